//! The strict layer refuses what AWS refuses: one request per rule that breaks it (and is
//! refused with AWS's code), beside a request that keeps it (and goes through to moto).
//! Plain HTTP with JSON bodies, as the SDKs send them; moto behind the layer.
//!
//! One file per concern, under `strict_layer/`: `support.rs` (the calls, the tables and
//! queues each test makes), `refusals.rs` (a refusal case per rule), `within_limits.rs`
//! (requests and names at AWS's limits reach moto), `partial_failures.rs` (one bad part of
//! a transaction or a batch), `iam.rs` (what a role may do) and `queues.rs` (retention on a
//! moved clock, redrive to a dead-letter queue).

// a crate root looks for its modules beside it: name the directory
#[path = "strict_layer/iam.rs"]
mod iam;
#[path = "strict_layer/partial_failures.rs"]
mod partial_failures;
#[path = "strict_layer/queues.rs"]
mod queues;
#[path = "strict_layer/refusals.rs"]
mod refusals;
#[path = "strict_layer/support.rs"]
mod support;
#[path = "strict_layer/within_limits.rs"]
mod within_limits;
