//! The event queue: SQS FIFO in production (`SqsQueue`, in `queue/sqs.rs`, feature
//! `aws`), an in-memory FIFO for tests and the embedded runner ([`MemoryQueue`]). The
//! message contract, the size rules and the batch planner here are plain Rust and build
//! without the SDK.
//!
//! The wire contract (harel 0.9.0's SQS messages; ARCHITECTURE.md's glossary):
//! - an **event** message's body is harel's Event JSON and its `MessageGroupId` is the
//!   target execution id, so a harel sender can feed our worker and SQS itself keeps one
//!   in-flight event per execution;
//! - a **spawn intent** carries the message attribute `stm_kind = spawn`; its body is the
//!   spawn entry and its group is the child id;
//! - the `MessageDeduplicationId` is deterministic per logical send (outbox seq, spawn seq,
//!   timer identity, or event id + target), so a retried publish within SQS's 5-minute
//!   window is dropped.

use async_trait::async_trait;

// the queue's error type
mod error;
pub use error::QueueError;

// the wire contract: messages out and in, their ids, the size rules, the batch planner
mod wire;
pub use wire::*;

// the contract every queue keeps, run by this crate's tests against each (feature `contract`)
#[cfg(feature = "contract")]
pub mod contract;

// a queue that forwards every call through a test's hook (feature `contract`)
#[cfg(feature = "contract")]
mod hooked;
#[cfg(feature = "contract")]
pub use hooked::{AsQueue, HookedQueue, QueueCall, QueueHook, HOOK_FAILURE};

// the in-memory FIFO queue
mod memory;
pub use memory::MemoryQueue;

// the SQS FIFO queue (feature `aws`)
#[cfg(feature = "aws")]
mod sqs;
#[cfg(feature = "aws")]
pub use sqs::{QueueUrls, SqsQueue};
/// A message a publish did not deliver: `index` into the published slice.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishFailure {
    pub index: usize,
    pub code: String,
    pub message: String,
}

/// The queue. Publishing never fails as a whole: what was not delivered comes back as
/// failures, so the caller keeps those entries for a later run instead of losing them.
#[async_trait]
pub trait Queue: Send + Sync {
    /// Send `messages` in order, in as few requests as SQS allows ([`plan_batches`]: at
    /// most [`MAX_BATCH`] entries and [`MAX_BATCH_BYTES`] each). A message SQS would
    /// refuse on its own ([`message_problem`]) is not sent and comes back as a failure.
    async fn publish_batch(&self, messages: &[OutgoingMessage]) -> Vec<PublishFailure>;

    /// Receive up to `max` (at most 10) messages, hiding them for `visibility_seconds`;
    /// wait up to `wait_seconds` for one.
    async fn receive(
        &self,
        max: usize,
        visibility_seconds: i32,
        wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, QueueError>;

    async fn delete(&self, receipt_handle: &str) -> Result<(), QueueError>;

    /// Hide (or, with 0, release) a received message for `seconds`.
    async fn change_visibility(&self, receipt_handle: &str, seconds: i32) -> Result<(), QueueError>;
}
