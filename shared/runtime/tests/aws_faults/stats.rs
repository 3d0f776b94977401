//! What a run counts: deliveries, failed records by why, the harness's and the relay's
//! and sweeper's failed calls, client retries, and per message what was tried (for the
//! report of what is stuck).

use std::collections::BTreeMap;
use std::time::Duration;

use stm_runtime::queue::ReceivedMessage;

#[derive(Debug, Default, Clone)]
pub(crate) struct RunStats {
    /// Records handed to the worker.
    pub(crate) deliveries: usize,
    /// Records the worker reported failed (batch item failures), by why.
    pub(crate) failed_retryable: usize,
    /// Of those retryable: committed, but the inline flush could not publish everything (the
    /// redelivery delivers the pending entries before the group's next event).
    pub(crate) failed_flush: usize,
    pub(crate) failed_conflict: usize,
    pub(crate) failed_skipped: usize,
    /// Redeliveries the worker recognised (a processed event, an existing child).
    pub(crate) dropped_redeliveries: usize,
    /// Calls of the harness (the event-source mapping) that failed after the SDK's retries.
    pub(crate) receive_errors: usize,
    pub(crate) delete_errors: usize,
    /// Relay and sweep passes that failed as a whole, entries / timers left for later.
    pub(crate) relay_errors: usize,
    pub(crate) relay_left: usize,
    pub(crate) sweep_errors: usize,
    pub(crate) sweep_left: usize,
    /// Control-plane calls retried by the client.
    pub(crate) client_retries: usize,
    /// Timers come due with the sweeper's publish faulted past every retry, and first
    /// events sent with the publishes after them faulted (see
    /// [`Harness::run`](crate::harness::Harness::run)).
    pub(crate) sweeps_faulted: usize,
    pub(crate) flushes_faulted: usize,
    /// The most rounds one drain took, and the time spent waiting for messages in flight.
    pub(crate) longest_drain: usize,
    pub(crate) in_flight_wait: Duration,
    /// Per message handed to the worker: what it is, its last receive count and its last
    /// outcome (for the report of what is stuck when a drain gives up).
    pub(crate) tried: BTreeMap<String, Tried>,
    /// Relay passes in the current drain (each tries every pending entry).
    pub(crate) relay_passes: usize,
}

/// A message for the stuck report: its group and kind (or the spawn it carries).
pub(crate) fn describe(message: &ReceivedMessage) -> String {
    let body: serde_json::Value = serde_json::from_str(&message.body).unwrap_or_default();
    let group = message.group_id.as_deref().unwrap_or("-");
    match (body["kind"].as_str(), body["child_id"].as_str()) {
        (Some(kind), _) => format!("{kind} {} to {group}", body["id"].as_str().unwrap_or("")),
        (None, Some(child)) => format!("spawn of {child} (group {group})"),
        _ => format!("a message of group {group}"),
    }
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Tried {
    pub(crate) what: String,
    pub(crate) receives: u32,
    pub(crate) last: String,
}

impl RunStats {
    pub(crate) fn failed_items(&self) -> usize {
        self.failed_retryable + self.failed_conflict + self.failed_skipped
    }

    pub(crate) fn add(&mut self, other: &RunStats) {
        self.deliveries += other.deliveries;
        self.failed_retryable += other.failed_retryable;
        self.failed_flush += other.failed_flush;
        self.failed_conflict += other.failed_conflict;
        self.failed_skipped += other.failed_skipped;
        self.dropped_redeliveries += other.dropped_redeliveries;
        self.receive_errors += other.receive_errors;
        self.delete_errors += other.delete_errors;
        self.relay_errors += other.relay_errors;
        self.relay_left += other.relay_left;
        self.sweep_errors += other.sweep_errors;
        self.sweep_left += other.sweep_left;
        self.client_retries += other.client_retries;
        self.sweeps_faulted += other.sweeps_faulted;
        self.flushes_faulted += other.flushes_faulted;
        self.longest_drain = self.longest_drain.max(other.longest_drain);
        self.in_flight_wait += other.in_flight_wait;
    }
}
