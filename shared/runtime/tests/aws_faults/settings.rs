//! The suite's bounds (rounds, waits, the visibility timeout, the client's attempts), the
//! operations it faults, and the knobs each scenario draws.

use std::time::Duration;

use crate::common::scenarios::{Rng, Scenario};

/// Far enough in the future to list every armed timer (and a valid DynamoDB number).
/// Poll / relay / sweep rounds one drain may take before the test fails.
pub(crate) const MAX_ROUNDS: usize = 300;
/// How long one drain may wait for messages in flight to come back.
pub(crate) const MAX_IN_FLIGHT_WAIT: Duration = Duration::from_secs(30);
/// The visibility timeout of a received batch (what a lost receive answer costs).
pub(crate) const VISIBILITY_SECONDS: i32 = 1;
/// Attempts of a client (control plane) call. A send to a PENDING execution makes about
/// five requests (load, outbox Scan, the Start's publish and ack, the event's publish), so
/// at a 25% fault rate with one SDK attempt a call lands only about one time in four: ten
/// attempts all failed in about 6% of such sends (seen: seed 3 at 25%). Forty leave odds
/// of about 1e-5; a real client retries with back-off the same way.
pub(crate) const CLIENT_ATTEMPTS: usize = 40;

/// Every DynamoDB operation on this suite's paths. Not `PutItem`: only the item layout's
/// untraced plain commit is one, and this suite traces every step (the comparison reads
/// the trace), so its commits are `TransactWriteItems` (`dynamodb_faults.rs` in the store
/// faults the `PutItem` commit).
pub(crate) const DYNAMODB_OPERATIONS: [&str; 7] = [
    "GetItem",
    "BatchGetItem",
    "TransactWriteItems",
    "DeleteItem",
    "BatchWriteItem",
    "Query",
    "Scan",
];
pub(crate) const SQS_OPERATIONS: [&str; 4] = [
    "SendMessageBatch",
    "ReceiveMessage",
    "DeleteMessage",
    "ChangeMessageVisibility",
];

/// The kinds of fault per entry the strict layer draws for this suite.
pub(crate) const ENTRY_FAULT_KINDS: [&str; 5] = [
    stm_testkit::strict::entry_faults::SQS_FAILED_ENTRY,
    stm_testkit::strict::entry_faults::EVENTS_FAILED_ENTRY,
    stm_testkit::strict::entry_faults::UNPROCESSED_KEYS,
    stm_testkit::strict::entry_faults::UNPROCESSED_ITEMS,
    stm_testkit::strict::entry_faults::TRANSACTION_THROTTLED,
];

/// The faults per call the proxy draws from ([`Fault::label`](stm_testkit::Fault::label)).
pub(crate) const CALL_FAULT_KINDS: [&str; 6] = [
    "Throttling",
    "ProvisionedThroughputExceeded",
    "500 InternalServerError",
    "500 InternalError",
    "DropResponse",
    "TransactionConflict",
];

pub(crate) fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// How a run's worker and event source behave (the same for both runs of a scenario).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Knobs {
    pub(crate) batch: usize,
    pub(crate) inline_flush: bool,
    /// chance (%) of a relay pass between two polls
    pub(crate) relay_between_polls: u64,
    /// The script's consecutive sends go out back to back, without waiting for quiescence.
    pub(crate) burst: bool,
}

pub(crate) fn knobs(rng: &mut Rng, sc: &Scenario) -> Knobs {
    Knobs {
        batch: 1 + rng.below(10) as usize,
        // mostly the production setting; without it the relay publishes everything
        inline_flush: rng.chance(75),
        relay_between_polls: [0, 10, 30][rng.below(3) as usize],
        burst: rng.chance(50) && sc.burst_ok,
    }
}
