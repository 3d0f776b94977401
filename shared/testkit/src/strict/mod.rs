//! The strict AWS layer: a loopback proxy in front of moto that refuses what AWS refuses
//! and moto lets through, with AWS's error code and shape.
//!
//! - **IAM, per request.** The layer listens on one port per [`Principal`]. A request that
//!   arrives on a function's port is checked against that function's role in
//!   `template.yaml` (the same `(action, resource)` grants the exact-grant policies test
//!   compares, [`crate::iam`]); the operator's port against the template's operator
//!   policy. A request the role does not allow gets `AccessDeniedException`, as on AWS.
//!   Table and queue names resolve to the template's resources by the template's own
//!   name patterns (`${Prefix}_outbox` -> `OutboxTable`). The admin port is the harness
//!   (what CloudFormation and the test's own setup do): no IAM, the limits still apply.
//! - **SQS** ([`sqs`]): group and deduplication ids, body size against the queue's
//!   `MaximumMessageSize`, batches (10 entries, 1 MiB, distinct valid ids), `DelaySeconds`
//!   (0-900, never per message on FIFO), message attributes, visibility ranges. A batch
//!   entry that breaks a message rule fails alone (`SenderFault`), as on AWS.
//! - **DynamoDB** ([`dynamodb`]): key values (non-empty, partition ≤ 2,048 B, sort ≤
//!   1,024 B), item ≤ 400 KB, numbers a write sends (≤ 38 significant digits, zero or a
//!   magnitude from 1E-130 to below 1E+126: a `ValidationException`, inside a transaction
//!   a `ValidationError` cancellation reason), transactions (≤ 100 actions, ≤ 4 MB, one
//!   action per item),
//!   reserved words used bare in any expression, `ConsistentRead` on a GSI, `BatchGetItem`
//!   ≤ 100 keys, `BatchWriteItem` ≤ 25, `ClientRequestToken` ≤ 36 characters.
//! - **EventBridge** ([`events`]): `PutEvents` with 1-10 entries under 256 KB in all, each
//!   detail a JSON object and no `aws.` source (such an entry fails alone, as on AWS).
//!
//! The principal is the port's, or, on the harness port, the function the code says it runs
//! (`x-stm-function`, set by `stm_aws::as_function` under an emulator): the worker's,
//! relay's, sweeper's and operator's entry points scope themselves, so every path any suite
//! walks is checked against the role it needs on AWS, even where a test shares one client
//! between functions. Requests to other services (Lambda, moto's own API) pass through
//! unchecked.
//! Every refusal is counted by rule ([`StrictLayer::refusals`]).
//!
//! - **Eventually consistent indexes** ([`index_lag`]), opt-in per table-name prefix
//!   ([`StrictLayer::lag_indexes`], [`StrictLayer::hold_indexes`]): a `Query` on a GSI of
//!   those tables is answered with the index as it was a while ago, as AWS's GSIs are
//!   eventually consistent; moto's are always current.
//!
//! - **SQS's retention on a moved clock** ([`retention`]), opt-in per queue-name prefix
//!   ([`StrictLayer::advance_queues`]): a message as old as its queue's retention period
//!   is deleted, not received; moto keeps the wall clock.
//!
//! - **Faults per entry** ([`entry_faults`]), opt-in per name prefix
//!   ([`StrictLayer::fault_entries`]): a batch answered as AWS answers one it did in part
//!   (failed `SendMessageBatch` and `PutEvents` entries, `UnprocessedKeys`,
//!   `UnprocessedItems`, a transaction cancelled with a `ThrottlingError` reason), with
//!   counts of what was failed and later let through.
//!
//! - **A slow AWS**, opt-in per name prefix ([`StrictLayer::slow_requests`]): requests on
//!   those tables and queues are held before they go on, for tests of deadlines.
//!
//! Every DynamoDB request moto answers with 200 is charged to the layer's partition meter
//! ([`StrictLayer::meter`], [`dynamodb::Metering::observe`]): DynamoDB's read and write
//! units per table, key and second, before the answer goes back to the client.
//!
//! One file per concern: `layer.rs` starts the layer and is its API ([`StrictLayer`]),
//! `serve.rs` answers one connection (check, forward, rework the answer), `shared.rs` holds
//! what the connections share (caches of moto's schemas and queue attributes, counts),
//! `wire.rs` is the HTTP plumbing to moto, `principal.rs`, `policies.rs` and `refusal.rs`
//! are who asks, what the template lets them do and the answers in AWS's shape, and
//! `rules.rs` is the registry of rule names ([`RULES`]).

pub mod dynamodb;
pub mod entry_faults;
pub mod events;
pub mod index_lag;
pub mod retention;
pub mod sqs;

mod layer;
mod policies;
mod principal;
mod refusal;
mod rules;
mod serve;
mod shared;
mod wire;

pub use self::entry_faults::EntryFaultCounts;
pub use self::layer::StrictLayer;
pub use self::principal::Principal;
pub use self::refusal::Refusal;
pub use self::rules::RULES;
pub use self::wire::FUNCTION_HEADER;
