//! The three Lambda functions of an stm deployment as a library, so that a project adds
//! its own Rust actions without editing this repository: its `main.rs` is a few lines
//! over [`run_worker`], [`run_relay`] or [`run_sweeper`].
//!
//! Each one does what a function's cold start must: JSON logs (each line of a record in
//! its span: the message, group and execution ids), the configuration from
//! the environment (`STM_*`, see ARCHITECTURE.md), the DynamoDB and SQS clients built
//! once, and, for the worker, every `.stm` machine of `STM_DEFINITIONS_DIR` loaded and
//! validated with its actions bound. A broken definition or a missing variable fails the
//! cold start with the file, line or variable named. Then it serves invocations through
//! `lambda_runtime::run` until the runtime stops it. The check that the seven tables
//! exist runs meanwhile, while the function waits for its first invocation; every
//! invocation waits for it, and a missing table fails it, the table named.
//!
//! ```no_run
//! use stm_runtime::ActionRegistry;
//!
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     let mut actions = ActionRegistry::with_builtins();
//!     actions.register("orders.total", |input| {
//!         let count = input.context.get("items").and_then(|v| v.as_array()).map_or(0, Vec::len);
//!         Ok(serde_json::json!(count))
//!     });
//!     stm_lambda::run_worker(actions).await
//! }
//! ```
//!
//! A handler's failure reaches Lambda as a [`lambda_runtime::Diagnostic`] through
//! [`HandlerError`]'s `From` impl, and a failed init (a missing table, which the first
//! invocation finds) through its own: `errorType` is `stm.` and the Python exception name
//! harel would raise (`stm.StoreError`), `errorMessage` the error's text.

mod context;
mod error;
pub mod events;
mod functions;
mod logs;
mod serve;

pub use context::{DeploymentCheck, Function, FunctionContext, InitError};
pub use error::HandlerError;
pub use events::{deadline_from_epoch_millis, handle_doorbell_event, handle_sqs_event, sqs_event};
pub use functions::{
    relay_handler, run_relay, run_sweeper, run_worker, sweeper_handler, worker_handler, SweeperTrigger,
    DEFAULT_ACTIONS_ADDR,
};
pub use serve::{bindings, serve_actions, serve_actions_on, MAX_REQUEST_BYTES};
