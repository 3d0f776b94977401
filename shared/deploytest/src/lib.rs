//! `stm-deploytest` (dev-only): what keeps `template.yaml` honest.
//!
//! - [`template`]: the template as data (CloudFormation's short-form tags turned into their
//!   long forms) and a small evaluator for the intrinsics it uses (`Ref`, `Fn::Sub`,
//!   `Fn::If`, `Fn::GetAtt`, conditions), so tests read the functions' environment the way
//!   CloudFormation will set it.
//! - [`iam`]: the AWS requests a function sent, mapped to the IAM actions and resources
//!   they need (per table, per item of a `TransactWriteItems`), and the grants a role in the
//!   template gives, in the same shape, so the two compare exactly.
//! - [`recorder`]: a loopback HTTP proxy in front of moto that records every DynamoDB and
//!   SQS request (its `X-Amz-Target` and JSON body). The functions' own code runs
//!   unchanged with `STM_ENDPOINT_URL` pointing at it: nothing is stubbed.
//! - [`runtime_api`]: a minimal Lambda Runtime API, to start the built bootstraps as Lambda
//!   would and time their init (the `lambda-smoke` binary).
//! - [`function_env`]: a fresh deployment on moto and a function binary spawned against
//!   that API (the functions' own tests). It is the one support module here: it needs the
//!   runtime and the store, which the testkit, a dependency of their own tests, cannot.
//!
//! The tests: `tests/template.rs` (static invariants), `tests/policies.rs` (each role
//! equals what its function's code sends, recorded against moto).

pub mod function_env;

// the template evaluator, the IAM mapping, the loopback HTTP, the request recorder and the
// Runtime API live in the testkit, whose strict AWS layer enforces the same roles on every
// moto-backed test
pub use stm_testkit::{http, iam, recorder, runtime_api, template};
// what a function test seeds work and reads results with (the functions' crates do not
// depend on them): the store, the runtime's driver and queue, their records
pub use {stm_core, stm_lambda, stm_runtime, stm_store};

/// The repository root, as every crate's tests find it.
pub use stm_testkit::repo_root;
