//! Faults from AWS: the whole queue-driven stack (the real worker, relay, sweeper and
//! control plane) over DynamoDB and SQS on moto, every call going through
//! `stm_testkit::FaultProxy`, which fails a random share of the requests of each operation
//! the way AWS does:
//!
//! * DynamoDB (`GetItem`, `BatchGetItem`, `TransactWriteItems`, `DeleteItem`, `BatchWriteItem`,
//!   `Query`, `Scan`): `ThrottlingException`,
//!   `ProvisionedThroughputExceededException`, a 500 `InternalServerError`, a lost answer
//!   (the request applied, the connection closed before the response), and for
//!   `TransactWriteItems` also a `TransactionConflict` cancellation;
//! * SQS (`SendMessageBatch`, `ReceiveMessage`, `DeleteMessage`, `ChangeMessageVisibility`,
//!   over the JSON protocol: `X-Amz-Target: AmazonSQS.<Operation>`): `ThrottlingException`,
//!   a 500 `InternalError` and a lost answer. A lost `SendMessageBatch` answer makes the
//!   SDK (or the relay) publish again with the same deduplication id; a lost
//!   `DeleteMessage` or `ChangeMessageVisibility` answer is a no-op retry; a lost
//!   `ReceiveMessage` answer leaves its messages in flight until their visibility timeout
//!   (1 s) runs out and they come back.
//!
//! The SDKs retry first, the store's commit retries on top ([`stm_store::RetryPolicy`], its
//! default), and what outlives both is the runtime's to absorb: a failed record is reported
//! in the batch response and redelivered, an unpublished outbox entry stays for the relay,
//! an undeleted timer for the next sweep, a failed control-plane call is retried by its
//! client. Each scenario draws the SDK's retry budget (short backoffs so the test is quick):
//! 3 attempts per call (the SDK's default, which absorbs nearly every fault at 10%) or 1
//! (no SDK retry: every fault reaches the runtime's own handling), and the table layout
//! (processed marks in harel's table, or on the execution item, loaded for an event with a
//! `GetItem`). A timer that comes due meets a sweeper whose publish fails past every retry,
//! so the sweeper's own recovery runs too. Faults on the harness's own receive and delete
//! (the event-source mapping's calls in production) are injected too.
//!
//! Each scenario runs one machine's script (the orthogonal `Fork` and `Checkout`, the
//! fan-outs `FanOut` and `Shipment`, the sweeper's `Timed`, the deferring `Deferring` and
//! `Webhook`; the generator of `crash_injection.rs`) twice with the same knobs: fault-free
//! over MemoryStore + MemoryQueue (the reference), then on moto through the proxy. Each run
//! is driven to quiescence: poll (receive, `Worker::handle_batch`, delete what was not
//! reported failed, as the Lambda event-source mapping does), relay and sweep passes
//! between polls, a manual clock the script moves so timers come due, waits for messages
//! in flight, and a bound on the rounds. The faulty run must end exactly like the
//! reference by `common::scenarios::compare` (the same executions with the same observable
//! state and `processed_events`, the same applied steps in order, a version no empty
//! commit pushed up, every sent event marked processed), with no outbox entry, spawn intent
//! or timer left, an empty queue and an empty dead-letter queue (`maxReceiveCount` 1000: a
//! transient fault must never dead-letter). The run also proves what it covered: every
//! operation was faulted, and faults reached each of the runtime's own recovery paths.
//! A record failing for any reason but a transient one (`Retryable`, a conflict, skipped
//! behind one) fails the test: every injected fault must be classified as transient.
//!
//! The control plane (the client: `create`, `send`) goes through the proxy too, on a store
//! and SQS client of its own, and retries a failed call (a `create` that finds its
//! execution already there after a failed attempt is done: the attempt landed).
//!
//! `STM_FAULT_SCENARIOS` (default 32), `STM_FAULT_RATE` (percent of the requests of each
//! operation, default 10), `STM_FAULT_SDK_ATTEMPTS` (the budgets to draw from, default
//! `1,3`) and `STM_FAULT_SEED` override the defaults; one summary line goes to stderr
//! (`--nocapture`).
//!
//! `an_event_sent_after_a_create_whose_start_was_not_queued_is_not_lost` pins the loss the
//! faults exposed (see there); `sqs_faults_are_retried_by_the_sdk` checks that the SQS
//! faults the proxy answers are ones the Rust SDK retries.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_smithy_types::retry::RetryConfig;
use common::scenarios::{
    compare, definitions_with_examples as definitions, env_u64, scenario, scenario_count, settled_outcome,
    Outcome, Rng, Scenario, Step, Tally,
};
use common::{event, object, START};
use serde_json::json;
use stm_core::Event;
use stm_runtime::queue::ReceivedMessage;
use stm_runtime::worker::{Failed, Handled};
use stm_runtime::{
    relay, sweeper, ActionRegistry, Clock, Control, Definitions, Driver, DriverError, ManualClock,
    MemoryQueue, OutgoingMessage, Queue, Record, SqsQueue, Worker, WorkerSettings,
};
use stm_store::{CreateOptions, DedupeMarks, DynamoDbStore, ExecutionStore, MemoryStore};
use stm_testkit::{Fault, FaultProxy};

/// Far enough in the future to list every armed timer (and a valid DynamoDB number).
/// Poll / relay / sweep rounds one drain may take before the test fails.
const MAX_ROUNDS: usize = 300;
/// How long one drain may wait for messages in flight to come back.
const MAX_IN_FLIGHT_WAIT: Duration = Duration::from_secs(30);
/// The visibility timeout of a received batch (what a lost receive answer costs).
const VISIBILITY_SECONDS: i32 = 1;
/// Attempts of a client (control plane) call. A send to a PENDING execution makes about
/// five requests (load, outbox Scan, the Start's publish and ack, the event's publish), so
/// at a 25% fault rate with one SDK attempt a call lands only about one time in four: ten
/// attempts all failed in about 6% of such sends (seen: seed 3 at 25%). Forty leave odds
/// of about 1e-5; a real client retries with back-off the same way.
const CLIENT_ATTEMPTS: usize = 40;

/// Every DynamoDB operation on this suite's paths. Not `PutItem`: only the item layout's
/// untraced plain commit is one, and this suite traces every step (the comparison reads
/// the trace), so its commits are `TransactWriteItems` (`dynamodb_faults.rs` in the store
/// faults the `PutItem` commit).
const DYNAMODB_OPERATIONS: [&str; 7] = [
    "GetItem",
    "BatchGetItem",
    "TransactWriteItems",
    "DeleteItem",
    "BatchWriteItem",
    "Query",
    "Scan",
];
const SQS_OPERATIONS: [&str; 4] = [
    "SendMessageBatch",
    "ReceiveMessage",
    "DeleteMessage",
    "ChangeMessageVisibility",
];

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// How a run's worker and event source behave (the same for both runs of a scenario).
#[derive(Debug, Clone, Copy)]
struct Knobs {
    batch: usize,
    inline_flush: bool,
    /// chance (%) of a relay pass between two polls
    relay_between_polls: u64,
    /// The script's consecutive sends go out back to back, without waiting for quiescence.
    burst: bool,
}

fn knobs(rng: &mut Rng, sc: &Scenario) -> Knobs {
    Knobs {
        batch: 1 + rng.below(10) as usize,
        // mostly the production setting; without it the relay publishes everything
        inline_flush: rng.chance(75),
        relay_between_polls: [0, 10, 30][rng.below(3) as usize],
        burst: rng.chance(50) && sc.burst_ok,
    }
}

// --- the stack on moto, through the proxy ------------------------------------------

/// The SDK's standard retry mode with `attempts` attempts per call and short backoffs (the
/// default's 1 s base would make the test crawl).
fn quick_retries(attempts: u32) -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(attempts.max(1))
        .with_initial_backoff(Duration::from_millis(10))
        .with_max_backoff(Duration::from_millis(100))
}

async fn dynamodb(
    endpoint: &str,
    prefix: &str,
    sdk_retry: Option<RetryConfig>,
    dedupe_marks: DedupeMarks,
) -> Arc<DynamoDbStore> {
    let options = CreateOptions {
        prefix: prefix.to_string(),
        connect_attempts: 5,
        sdk_retry,
        dedupe_marks,
        ..CreateOptions::default()
    };
    Arc::new(
        DynamoDbStore::create_with(Some(endpoint), stm_testkit::REGION, options)
            .await
            .expect("tables"),
    )
}

async fn sqs_client(endpoint: &str, retry: Option<RetryConfig>) -> aws_sdk_sqs::Client {
    let client = SqsQueue::client(Some(endpoint), stm_testkit::REGION).await;
    match retry {
        None => client,
        Some(retry) => {
            aws_sdk_sqs::Client::from_conf(client.config().to_builder().retry_config(retry).build())
        }
    }
}

/// The functions' and the client's clients of one SDK retry budget and one table layout.
struct Side {
    /// The SDK's attempts per call.
    sdk_attempts: u32,
    /// Where the processed marks live: harel's table (a commit is a `TransactWriteItems`)
    /// or the execution item (a plain event's commit is a conditional `PutItem`).
    dedupe_marks: DedupeMarks,
    /// The functions' (worker, relay, sweeper) store and queue: through the proxy.
    store: Arc<dyn ExecutionStore>,
    queue: Arc<dyn Queue>,
    /// The client's (control plane): through the proxy, an instance of its own.
    client_store: Arc<dyn ExecutionStore>,
    client_queue: Arc<dyn Queue>,
    /// The test's view, straight to moto, reading the marks where this layout keeps them.
    view_store: Arc<dyn ExecutionStore>,
}

/// One set of tables and one FIFO queue (+ DLQ) on moto for every scenario of the test;
/// the functions and the client reach them through the proxy, the test's checks directly.
struct Moto {
    proxy: FaultProxy,
    /// One side per SDK retry budget and table layout under test.
    sides: Vec<Side>,
    main: SqsQueue,
    dlq: SqsQueue,
}

impl Moto {
    /// `sdk_attempts`: the SDK retry budgets (attempts per call) to build sides for.
    async fn start(tag: &str, sdk_attempts: &[u32]) -> Self {
        let moto = stm_testkit::moto().await;
        let proxy = FaultProxy::start(moto.endpoint());
        let prefix = stm_testkit::unique_prefix(tag);
        let direct = sqs_client(moto.endpoint(), None).await;
        let urls = SqsQueue::ensure(&direct, &format!("{prefix}-events"), VISIBILITY_SECONDS, 1_000)
            .await
            .expect("queue");
        let mut sides = Vec::new();
        for &attempts in sdk_attempts {
            // both layouts over the same tables: each scenario is an execution of its own
            for marks in [DedupeMarks::Table, DedupeMarks::OnItem] {
                let retries = Some(quick_retries(attempts));
                let functions_sqs = sqs_client(proxy.endpoint(), retries.clone()).await;
                let client_sqs = sqs_client(proxy.endpoint(), retries.clone()).await;
                sides.push(Side {
                    sdk_attempts: attempts,
                    dedupe_marks: marks,
                    store: dynamodb(proxy.endpoint(), &prefix, retries.clone(), marks).await,
                    queue: Arc::new(SqsQueue::new(functions_sqs, urls.queue_url.clone())),
                    client_store: dynamodb(proxy.endpoint(), &prefix, retries, marks).await,
                    client_queue: Arc::new(SqsQueue::new(client_sqs, urls.queue_url.clone())),
                    view_store: dynamodb(moto.endpoint(), &prefix, None, marks).await,
                });
            }
        }
        Moto {
            proxy,
            sides,
            main: SqsQueue::new(direct.clone(), urls.queue_url),
            dlq: SqsQueue::new(direct, urls.dead_letter_url),
        }
    }

    /// Arm the random faults: `percent` of the requests of every operation under test.
    fn arm(&self, percent: f64, seed: u64) {
        let server_error = |error_type: &str| Fault::Error {
            status: 500,
            error_type: error_type.into(),
            message: "We encountered an internal error. Please try again. (injected)".into(),
        };
        let dynamodb_faults = vec![
            Fault::Throttling,
            Fault::ProvisionedThroughputExceeded,
            server_error("InternalServerError"),
            Fault::DropResponse,
        ];
        let reads_and_writes: Vec<&str> = DYNAMODB_OPERATIONS
            .iter()
            .copied()
            .filter(|op| *op != "TransactWriteItems")
            .collect();
        self.proxy
            .set_rate(&reads_and_writes, percent, dynamodb_faults.clone(), seed);
        let mut transaction_faults = dynamodb_faults;
        transaction_faults.push(Fault::TransactionConflict);
        self.proxy
            .set_rate(&["TransactWriteItems"], percent, transaction_faults, seed);
        self.proxy.set_rate(
            &SQS_OPERATIONS,
            percent,
            vec![
                Fault::Throttling,
                server_error("InternalError"),
                Fault::DropResponse,
            ],
            seed,
        );
    }
}

// --- the harness -----------------------------------------------------------------

/// What the test inspects of the queue under test: what is left in it and in its DLQ.
enum View {
    Memory(Arc<MemoryQueue>),
    Sqs { main: SqsQueue, dlq: SqsQueue },
}

impl View {
    /// Messages in the queue, visible or in flight.
    async fn depth(&self) -> u64 {
        match self {
            View::Memory(q) => q.len() as u64,
            View::Sqs { main, .. } => main.approximate_depth().await.expect("queue depth"),
        }
    }

    /// The visible messages, for the stuck report (an SQS receive with no visibility
    /// timeout: they stay visible; their receive counts go up by one).
    async fn peek(&self) -> Vec<ReceivedMessage> {
        match self {
            View::Memory(_) => Vec::new(),
            View::Sqs { main, .. } => main.receive(10, 0, 0).await.unwrap_or_default(),
        }
    }

    async fn assert_empty(&self, what: &str) {
        match self {
            View::Memory(q) => {
                assert!(q.is_empty(), "{what}: messages left: {:?}", q.snapshot());
                assert!(
                    q.dead_letters().is_empty(),
                    "{what}: dead-lettered: {:?}",
                    q.dead_letters()
                );
            }
            View::Sqs { main, dlq } => {
                assert_eq!(
                    main.approximate_depth().await.expect("depth"),
                    0,
                    "{what}: messages left"
                );
                let dead = dlq.receive(10, 0, 0).await.expect("receive from the DLQ");
                assert!(dead.is_empty(), "{what}: dead-lettered: {dead:?}");
            }
        }
    }
}

#[derive(Debug, Default, Clone)]
struct RunStats {
    /// Records handed to the worker.
    deliveries: usize,
    /// Records the worker reported failed (batch item failures), by why.
    failed_retryable: usize,
    /// Of those retryable: committed, but the inline flush could not publish everything (the
    /// redelivery delivers the pending entries before the group's next event).
    failed_flush: usize,
    failed_conflict: usize,
    failed_skipped: usize,
    /// Redeliveries the worker recognised (a processed event, an existing child).
    dropped_redeliveries: usize,
    /// Calls of the harness (the event-source mapping) that failed after the SDK's retries.
    receive_errors: usize,
    delete_errors: usize,
    /// Relay and sweep passes that failed as a whole, entries / timers left for later.
    relay_errors: usize,
    relay_left: usize,
    sweep_errors: usize,
    sweep_left: usize,
    /// Control-plane calls retried by the client.
    client_retries: usize,
    /// Timers come due with the sweeper's publish faulted past every retry, and first
    /// events sent with the publishes after them faulted (see [`Harness::run`]).
    sweeps_faulted: usize,
    flushes_faulted: usize,
    /// The most rounds one drain took, and the time spent waiting for messages in flight.
    longest_drain: usize,
    in_flight_wait: Duration,
    /// Per message handed to the worker: what it is, its last receive count and its last
    /// outcome (for the report of what is stuck when a drain gives up).
    tried: BTreeMap<String, Tried>,
    /// Relay passes in the current drain (each tries every pending entry).
    relay_passes: usize,
}

/// A message for the stuck report: its group and kind (or the spawn it carries).
fn describe(message: &ReceivedMessage) -> String {
    let body: serde_json::Value = serde_json::from_str(&message.body).unwrap_or_default();
    let group = message.group_id.as_deref().unwrap_or("-");
    match (body["kind"].as_str(), body["child_id"].as_str()) {
        (Some(kind), _) => format!("{kind} {} to {group}", body["id"].as_str().unwrap_or("")),
        (None, Some(child)) => format!("spawn of {child} (group {group})"),
        _ => format!("a message of group {group}"),
    }
}

#[derive(Debug, Default, Clone)]
struct Tried {
    what: String,
    receives: u32,
    last: String,
}

impl RunStats {
    fn failed_items(&self) -> usize {
        self.failed_retryable + self.failed_conflict + self.failed_skipped
    }

    fn add(&mut self, other: &RunStats) {
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

enum Polled {
    Received,
    Empty,
    Failed,
}

struct Harness {
    /// The functions' store and queue.
    store: Arc<dyn ExecutionStore>,
    queue: Arc<dyn Queue>,
    /// The test's view of the store and of the queue.
    view_store: Arc<dyn ExecutionStore>,
    view: View,
    worker: Worker,
    /// The client.
    control: Control,
    clock: Arc<ManualClock>,
    knobs: Knobs,
    rng: Rng,
    stats: RunStats,
}

impl Harness {
    #[allow(clippy::too_many_arguments)] // the two sides of the stack and the knobs
    fn new(
        store: Arc<dyn ExecutionStore>,
        queue: Arc<dyn Queue>,
        client_store: Arc<dyn ExecutionStore>,
        client_queue: Arc<dyn Queue>,
        view_store: Arc<dyn ExecutionStore>,
        view: View,
        defs: &Definitions,
        knobs: Knobs,
        rng: Rng,
    ) -> Self {
        let clock = Arc::new(ManualClock::new(START));
        let driver = Driver::new(store.clone(), defs.clone(), ActionRegistry::with_builtins())
            .with_clock(clock.clone())
            .with_trace(true);
        let worker = Worker::new(
            driver,
            queue.clone(),
            WorkerSettings {
                inline_flush: knobs.inline_flush,
                suspend_recheck_seconds: 1,
                suspend_recheck_max_seconds: 1,
                poison_retry_seconds: 1,
                // no back-off: a throttled, conflicting or failing record comes straight
                // back, since this stack waits for redeliveries in real time
                retry_seconds: 0,
                retry_max_seconds: 0,
                ..WorkerSettings::default()
            },
        );
        let control_driver = Driver::new(client_store, defs.clone(), ActionRegistry::with_builtins())
            .with_clock(clock.clone())
            .with_trace(true);
        let control = Control::new(control_driver, client_queue);
        Harness {
            store,
            queue,
            view_store,
            view,
            worker,
            control,
            clock,
            knobs,
            rng,
            stats: RunStats::default(),
        }
    }

    /// The fault-free reference: MemoryStore + MemoryQueue.
    fn memory(defs: &Definitions, knobs: Knobs, rng: Rng) -> Self {
        let store: Arc<dyn ExecutionStore> = Arc::new(MemoryStore::new());
        let queue = Arc::new(MemoryQueue::new(1_000));
        Harness::new(
            store.clone(),
            queue.clone(),
            store.clone(),
            queue.clone(),
            store,
            View::Memory(queue),
            defs,
            knobs,
            rng,
        )
    }

    fn on_moto(moto: &Moto, side: &Side, defs: &Definitions, knobs: Knobs, rng: Rng) -> Self {
        Harness::new(
            side.store.clone(),
            side.queue.clone(),
            side.client_store.clone(),
            side.client_queue.clone(),
            side.view_store.clone(),
            View::Sqs {
                main: moto.main.clone(),
                dlq: moto.dlq.clone(),
            },
            defs,
            knobs,
            rng,
        )
    }

    /// One invocation of the event-source mapping: receive a batch, run the worker, delete
    /// the records it did not report failed. A failed receive or delete is the mapping's
    /// problem: the messages come back after their visibility timeout.
    async fn poll(&mut self, what: &str) -> Polled {
        let messages = match self.queue.receive(self.knobs.batch, VISIBILITY_SECONDS, 0).await {
            Ok(messages) => messages,
            Err(_) => {
                self.stats.receive_errors += 1;
                return Polled::Failed;
            }
        };
        if messages.is_empty() {
            return Polled::Empty;
        }
        let records: Vec<Record> = messages.iter().map(Record::from_received).collect();
        let outcome = self.worker.handle_batch(&records).await;
        self.stats.deliveries += records.len();
        for (message, (_, result)) in messages.iter().zip(&outcome.records) {
            let tried = self.stats.tried.entry(message.message_id.clone()).or_default();
            tried.what = describe(message);
            tried.receives = message.receive_count;
            tried.last = match result {
                Ok(handled) => format!("{handled:?}"),
                Err(why) => format!("{why:?}"),
            };
            match result {
                Ok(Handled::Duplicate | Handled::Spawned { created: false, .. }) => {
                    self.stats.dropped_redeliveries += 1
                }
                Ok(_) => {}
                // reported in the batch response: not deleted, released by the worker
                Err(Failed::Retryable(reason)) => {
                    self.stats.failed_retryable += 1;
                    if reason.starts_with("committed, but") {
                        self.stats.failed_flush += 1;
                    }
                    continue;
                }
                Err(Failed::Conflict(_)) => {
                    self.stats.failed_conflict += 1;
                    continue;
                }
                Err(Failed::Skipped) => {
                    self.stats.failed_skipped += 1;
                    continue;
                }
                Err(why) => panic!(
                    "{what}: record {} failed with a non-transient failure: {why:?} ({})",
                    message.message_id, message.body
                ),
            }
            if self.queue.delete(&message.receipt_handle).await.is_err() {
                self.stats.delete_errors += 1;
            }
        }
        Polled::Received
    }

    /// One scheduled relay run: what it moved or left (a failure counts as movement: the
    /// next round retries).
    async fn relay(&mut self) -> usize {
        self.stats.relay_passes += 1;
        match relay::relay_pending(self.store.as_ref(), self.queue.as_ref()).await {
            Ok(summary) => {
                self.stats.relay_left += summary.remaining;
                summary.forwarded + summary.remaining
            }
            Err(_) => {
                self.stats.relay_errors += 1;
                1
            }
        }
    }

    /// One scheduled sweep at the clock's now: what it fired or left.
    async fn sweep(&mut self) -> usize {
        let now = self.clock.now();
        match sweeper::sweep(self.store.as_ref(), self.queue.as_ref(), now).await {
            Ok(summary) => {
                self.stats.sweep_left += summary.failed;
                summary.fired + summary.failed
            }
            Err(_) => {
                self.stats.sweep_errors += 1;
                1
            }
        }
    }

    /// Poll, relay and sweep until a full round moves nothing and no message is in flight.
    async fn drain(&mut self, what: &str) {
        let mut waited = Duration::ZERO;
        self.stats.relay_passes = 0;
        for round in 1..=MAX_ROUNDS {
            self.stats.longest_drain = self.stats.longest_drain.max(round);
            match self.poll(what).await {
                Polled::Received => {
                    if self.rng.chance(self.knobs.relay_between_polls) {
                        self.relay().await;
                    }
                    continue;
                }
                Polled::Failed => continue,
                Polled::Empty => {}
            }
            let moved = self.relay().await + self.sweep().await;
            if moved > 0 {
                continue;
            }
            // nothing visible, nothing pending: done, unless messages are in flight (a lost
            // receive answer, a failed delete or release): they come back after their
            // visibility timeout
            if self.view.depth().await == 0 {
                self.stats.in_flight_wait += waited;
                return;
            }
            assert!(
                waited < MAX_IN_FLIGHT_WAIT,
                "{what}: messages still in flight after {waited:?}"
            );
            let pause = Duration::from_millis(250);
            tokio::time::sleep(pause).await;
            waited += pause;
        }
        let report = self.stuck().await;
        panic!("{what}: no quiescence after {MAX_ROUNDS} rounds; what is stuck:\n{report}");
    }

    /// What keeps a drain from settling, as facts: the messages still failing (their receive
    /// counts and last outcome), the pending outbox entries and spawn intents (each tried by
    /// every relay pass of the drain), the due timers, and the status of every execution
    /// they name.
    async fn stuck(&self) -> String {
        let mut out = Vec::new();
        let mut failing: Vec<(&String, &Tried)> = self
            .stats
            .tried
            .iter()
            .filter(|(_, t)| {
                ![
                    "Processed",
                    "Broadcast",
                    "Spawned",
                    "Duplicate",
                    "UnknownExecution",
                    "Drained",
                ]
                .iter()
                .any(|ok| t.last.starts_with(ok))
            })
            .collect();
        failing.sort_by_key(|(_, t)| std::cmp::Reverse(t.receives));
        out.push(format!(
            "messages last seen failing or not processed ({}):",
            failing.len()
        ));
        for (id, t) in failing.iter().take(15) {
            out.push(format!(
                "  {id}: {} received {} times, last {}",
                t.what, t.receives, t.last
            ));
        }
        let mut named = std::collections::BTreeSet::new();
        match self.view_store.pending_outbox().await {
            Ok(entries) => {
                out.push(format!(
                    "pending outbox entries ({}), each tried by the drain's {} relay passes:",
                    entries.len(),
                    self.stats.relay_passes
                ));
                for e in entries.iter().take(15) {
                    let target = e.target_id.clone().unwrap_or_default();
                    out.push(format!(
                        "  seq {} -> {target}: {} ({})",
                        e.seq, e.event.kind, e.event.id
                    ));
                    named.insert(target);
                }
            }
            Err(err) => out.push(format!("pending outbox unreadable: {err}")),
        }
        match self.view_store.pending_spawns().await {
            Ok(spawns) => {
                out.push(format!("pending spawn intents ({}):", spawns.len()));
                for sp in spawns.iter().take(15) {
                    out.push(format!(
                        "  seq {} {} -> {} at {}",
                        sp.seq, sp.parent_id, sp.child_id, sp.root_path
                    ));
                    named.insert(sp.parent_id.clone());
                    named.insert(sp.child_id.clone());
                }
            }
            Err(err) => out.push(format!("pending spawns unreadable: {err}")),
        }
        match self.view_store.due_timers(self.clock.now()).await {
            Ok(timers) => {
                out.push(format!("due timers ({}):", timers.len()));
                for t in timers.iter().take(15) {
                    out.push(format!("  {} {} at {}", t.execution_id, t.path, t.fire_at));
                    named.insert(t.execution_id.clone());
                }
            }
            Err(err) => out.push(format!("due timers unreadable: {err}")),
        }
        out.push(format!(
            "queue depth (visible + in flight): {}",
            self.view.depth().await
        ));
        for message in self.view.peek().await {
            out.push(format!(
                "  queued {}: {} (received {} times)",
                message.message_id,
                describe(&message),
                message.receive_count
            ));
        }
        for id in named.iter().filter(|id| !id.is_empty()) {
            match self.view_store.load(id).await {
                Ok(Some(exe)) => out.push(format!(
                    "  execution {id}: {} at {} (version {}, {} processed)",
                    exe.status,
                    exe.active_path.as_deref().unwrap_or("-"),
                    exe.version,
                    exe.processed_events
                )),
                Ok(None) => out.push(format!("  execution {id}: absent")),
                Err(err) => out.push(format!("  execution {id}: unreadable ({err})")),
            }
        }
        out.join("\n")
    }

    /// The client's `create`, retried until it lands.
    async fn create(&mut self, sc: &Scenario, id: &str, what: &str) {
        let mut last = String::new();
        for attempt in 1..=CLIENT_ATTEMPTS {
            match self
                .control
                .create(sc.definition, sc.seed.clone().map(object), Some(id))
                .await
            {
                Ok(_) => return,
                // an earlier attempt landed; its Start is in the outbox (the relay sends it)
                Err(DriverError::AlreadyExists(_)) if attempt > 1 => return,
                Err(err) => {
                    self.stats.client_retries += 1;
                    last = err.to_string();
                }
            }
        }
        panic!("{what}: create failed {CLIENT_ATTEMPTS} times; the last: {last}");
    }

    /// The client's `send`, retried until it lands (a re-send has the same deduplication
    /// id, and the worker's processed mark drops a second copy).
    async fn send(&mut self, target: &str, ev: &Event, what: &str) {
        let mut last = String::new();
        for _ in 0..CLIENT_ATTEMPTS {
            match self.control.send(target, ev).await {
                Ok(()) => return,
                Err(err) => {
                    self.stats.client_retries += 1;
                    last = err.to_string();
                }
            }
        }
        panic!("{what}: send to {target} failed {CLIENT_ATTEMPTS} times; the last: {last}");
    }

    /// Run the script. With `proxy` (the faulty run), a timer that comes due meets a
    /// sweeper whose publishes fail past the SDK's retries, and the publishes right after
    /// the first event sent fail the same way (with the inline flush on, the worker's flush
    /// of its step): random faults at 10% seldom outlive the SDK's retries there, and the
    /// recoveries behind them (the timer stays armed; a committed record is redelivered so
    /// its entries go out first) must be walked too.
    async fn run(&mut self, sc: &Scenario, id: &str, what: &str, proxy: Option<&FaultProxy>) -> Outcome {
        self.create(sc, id, what).await;
        // in a burst the client does not wait between its sends: the worker finds several
        // events of the execution's group queued (the create's Start included)
        let bursty = self.knobs.burst;
        let burst = |next: Option<&Step>| bursty && matches!(next, Some(Step::Send(_)));
        if !burst(sc.steps.first()) {
            self.drain(what).await;
        }
        let mut sent = Vec::new();
        for (i, step) in sc.steps.iter().enumerate() {
            match step {
                Step::Send(ev) => {
                    self.send(id, ev, what).await;
                    sent.push((id.to_string(), ev.clone()));
                    if let Some(proxy) = proxy.filter(|_| i == 0 && self.knobs.inline_flush) {
                        // the next publishes are the worker's inline flush of this event's
                        // step (or, in a burst, the client's next send, which retries)
                        proxy.fail_next("SendMessageBatch", 3, Fault::Throttling);
                        self.stats.flushes_faulted += 1;
                    }
                }
                Step::ToChildren(events) => {
                    let root = self.view_store.load(id).await.expect("load").expect("root");
                    let children: Vec<String> = root.children.keys().cloned().collect();
                    assert_eq!(children.len(), events.len(), "{what}: children {children:?}");
                    for (child, ev) in children.iter().zip(events) {
                        self.send(child, ev, what).await;
                        sent.push((child.clone(), ev.clone()));
                    }
                }
                Step::Advance(seconds) => {
                    self.clock.advance(*seconds);
                    if let Some(proxy) = proxy {
                        let now = self.clock.now();
                        if !self
                            .view_store
                            .due_timers(now)
                            .await
                            .expect("due timers")
                            .is_empty()
                        {
                            // the queue is quiet: the next publishes are the sweeper's
                            proxy.fail_next("SendMessageBatch", 3, Fault::Throttling);
                            self.stats.sweeps_faulted += 1;
                        }
                    }
                }
            }
            if !(matches!(step, Step::Send(_)) && burst(sc.steps.get(i + 1))) {
                self.drain(what).await;
            }
        }
        self.outcome(id, &sent, what).await
    }

    /// The final state, and the checks that nothing is left behind.
    async fn outcome(&self, root: &str, sent: &[(String, Event)], what: &str) -> Outcome {
        if self.view.depth().await != 0 {
            let report = self.stuck().await;
            panic!("{what}: messages left after the drain settled; what is stuck:\n{report}");
        }
        self.view.assert_empty(what).await;
        settled_outcome(self.view_store.as_ref(), root, sent, what).await
    }
}

#[derive(Default)]
struct Totals {
    scenarios: usize,
    by_machine: BTreeMap<&'static str, usize>,
    /// Scenarios per SDK retry budget and per table layout.
    by_sdk_attempts: BTreeMap<u32, usize>,
    by_layout: BTreeMap<String, usize>,
    creates: usize,
    sent: usize,
    stats: RunStats,
    reference_deliveries: usize,
    tally: Tally,
}

fn summarize(seed: u64, percent: f64, totals: &Totals, proxy: &FaultProxy, elapsed: Duration) {
    let requests = proxy.requests_by_operation();
    let injected = proxy.injected_by_operation();
    // (faults injected, requests, "Op faults/requests, ...") over `ops`
    let tally = |ops: &[&str]| -> (usize, usize, String) {
        let count = |map: &BTreeMap<String, usize>, op: &str| map.get(op).copied().unwrap_or(0);
        let each: Vec<String> = ops
            .iter()
            .map(|op| format!("{op} {}/{}", count(&injected, op), count(&requests, op)))
            .collect();
        (
            ops.iter().map(|op| count(&injected, op)).sum(),
            ops.iter().map(|op| count(&requests, op)).sum(),
            each.join(", "),
        )
    };
    let (ddb_faults, ddb_requests, ddb_each) = tally(&DYNAMODB_OPERATIONS);
    let (sqs_faults, sqs_requests, sqs_each) = tally(&SQS_OPERATIONS);
    let s = &totals.stats;
    eprintln!(
        "aws_faults: seed {seed:#x}, rate {percent}%, {} scenarios {:?} (by SDK attempts per call {:?}, by layout {:?}); {} creates + {} events sent; \
         faults injected / requests: DynamoDB {ddb_faults}/{ddb_requests} ({ddb_each}), SQS \
         {sqs_faults}/{sqs_requests} ({sqs_each}); faults by kind {:?}; worker deliveries {} ({} fault-free), \
         batch items reported failed {} (retryable {} of which {} after a failed inline flush, conflict {}, skipped behind one {}), redeliveries \
         dropped as duplicates {}; harness receive / delete failures {} / {}; relay passes failed {} \
         (entries left for the next pass {}), sweeps failed {} (timers left {}; due timers met with a \
         faulted sweeper {}); first sends followed by faulted publishes {}; client retries {}; \
         events processed {} in {} commits; longest drain {} rounds (bound {MAX_ROUNDS}), waited \
         {:.1} s for messages in flight; events lost {}, duplicates applied {}; {:.1} s",
        totals.scenarios,
        totals.by_machine,
        totals.by_sdk_attempts,
        totals.by_layout,
        totals.creates,
        totals.sent,
        proxy.injected_by_fault(),
        s.deliveries,
        totals.reference_deliveries,
        s.failed_items(),
        s.failed_retryable,
        s.failed_flush,
        s.failed_conflict,
        s.failed_skipped,
        s.dropped_redeliveries,
        s.receive_errors,
        s.delete_errors,
        s.relay_errors,
        s.relay_left,
        s.sweep_errors,
        s.sweep_left,
        s.sweeps_faulted,
        s.flushes_faulted,
        s.client_retries,
        totals.tally.processed,
        totals.tally.commits,
        s.longest_drain,
        s.in_flight_wait.as_secs_f64(),
        totals.tally.lost,
        totals.tally.duplicates,
        elapsed.as_secs_f64(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_faults_change_nothing() {
    let scenarios = scenario_count("STM_FAULT_SCENARIOS", 32);
    let percent = env_f64("STM_FAULT_RATE", 10.0);
    let seed = env_u64("STM_FAULT_SEED", 0xFA01_7ED5_EED5);
    let sdk_attempts: Vec<u32> = std::env::var("STM_FAULT_SDK_ATTEMPTS")
        .unwrap_or_else(|_| "1,3".into())
        .split(',')
        .filter_map(|a| a.trim().parse().ok())
        .collect();
    assert!(
        !sdk_attempts.is_empty(),
        "STM_FAULT_SDK_ATTEMPTS: a list like 1,3"
    );
    let defs = definitions();
    let moto = Moto::start("faults", &sdk_attempts).await;
    moto.arm(percent, seed);
    let started = Instant::now();
    let mut master = Rng::new(seed);
    let mut totals = Totals::default();
    for n in 0..scenarios {
        let sc = scenario(&mut master);
        let knobs = knobs(&mut master, &sc);
        let side = &moto.sides[master.below(moto.sides.len() as u64) as usize];
        let run_rng = Rng::new(master.next());
        let id = format!("s{n}-{}", sc.definition.to_lowercase());

        let mut clean = Harness::memory(&defs, knobs, run_rng.clone());
        let expected = clean.run(&sc, &id, &format!("{id} (fault-free)"), None).await;
        assert_eq!(
            clean.stats.failed_items(),
            0,
            "{id}: the fault-free run failed records"
        );

        let what = format!(
            "scenario {n} ({}, {knobs:?}, SDK attempts {}, marks {:?}, seed {seed:#x}, rate {percent}%)",
            sc.definition, side.sdk_attempts, side.dedupe_marks
        );
        let mut faulty = Harness::on_moto(&moto, side, &defs, knobs, run_rng);
        let got = faulty.run(&sc, &id, &what, Some(&moto.proxy)).await;
        compare(
            &expected,
            &got,
            &mut totals.tally,
            ("fault-free", "faulty"),
            &what,
        );

        totals.scenarios += 1;
        *totals.by_machine.entry(sc.definition).or_default() += 1;
        *totals.by_sdk_attempts.entry(side.sdk_attempts).or_default() += 1;
        *totals
            .by_layout
            .entry(format!("{:?}", side.dedupe_marks))
            .or_default() += 1;
        totals.creates += 1;
        totals.sent += got.sent;
        totals.stats.add(&faulty.stats);
        totals.reference_deliveries += clean.stats.deliveries;
    }
    let elapsed = started.elapsed();
    moto.proxy.clear();
    summarize(seed, percent, &totals, &moto.proxy, elapsed);
    assert_eq!(totals.tally.lost, 0, "events lost");
    assert_eq!(totals.tally.duplicates, 0, "events applied twice");
    if percent > 0.0 && scenarios >= 10 {
        assert_coverage(&totals.stats, &moto.proxy);
    }
    // every path the faults drove the functions into ran under their roles
    stm_testkit::assert_no_access_denied();
}

/// A fault run proves only the paths it walked: every operation the stack calls was faulted
/// (SQS's JSON protocol names its operations in `X-Amz-Target` as DynamoDB's does, so the
/// proxy sees both services), and faults got past the SDK's and the store's retries into
/// each of the runtime's own recovery paths. Two are left to suites that drive them on
/// purpose: a record failed on a conflict (faults alone make none, as the commit's
/// `ClientRequestToken` makes a retried commit idempotent; `races.rs`), and a record
/// skipped behind a failed one of its group (it needs a failure with later records of the
/// group in the same batch, which a seed may or may not draw; `batch_rules.rs`).
fn assert_coverage(s: &RunStats, proxy: &FaultProxy) {
    for op in DYNAMODB_OPERATIONS.iter().chain(&SQS_OPERATIONS) {
        assert!(proxy.requests(op) > 0, "no {op} request went through the proxy");
        assert!(proxy.injected(op) > 0, "no fault was injected into {op}");
    }
    let paths = [
        (
            "a record reported failed as retryable and redelivered",
            s.failed_retryable,
        ),
        (
            "a committed record whose inline flush failed, redelivered so its entries go out \
             before the group's next event",
            s.failed_flush,
        ),
        (
            "a redelivery dropped as a duplicate (processed mark, existing child)",
            s.dropped_redeliveries,
        ),
        ("a relay pass that failed and was run again", s.relay_errors),
        ("an entry a relay pass left pending for the next", s.relay_left),
        (
            "a sweep that failed or left a timer for the next",
            s.sweep_errors + s.sweep_left,
        ),
        (
            "a receive that failed (messages back after their visibility timeout)",
            s.receive_errors,
        ),
        ("a delete that failed (the record redelivered)", s.delete_errors),
        ("a client call retried", s.client_retries),
    ];
    let dead: Vec<&str> = paths
        .iter()
        .filter(|(_, count)| *count == 0)
        .map(|(path, _)| *path)
        .collect();
    assert!(
        dead.is_empty(),
        "recovery paths no fault reached (the run proves nothing of them): {dead:?}"
    );
}

/// The SQS faults the proxy injects are what the Rust SDK retries: a 500 with SQS's
/// `InternalError`, a `ThrottlingException`, a lost answer (the retry of a publish whose
/// answer was lost is dropped by the FIFO deduplication).
#[tokio::test]
async fn sqs_faults_are_retried_by_the_sdk() {
    let moto = stm_testkit::moto().await;
    let proxy = FaultProxy::start(moto.endpoint());
    let prefix = stm_testkit::unique_prefix("sqs_retry");
    let direct = sqs_client(moto.endpoint(), None).await;
    let urls = SqsQueue::ensure(&direct, &format!("{prefix}-events"), 30, 5)
        .await
        .expect("queue");
    let queue = SqsQueue::new(
        sqs_client(proxy.endpoint(), Some(quick_retries(3))).await,
        urls.queue_url.clone(),
    );
    let view = SqsQueue::new(direct, urls.queue_url);
    let faults = [
        Fault::Error {
            status: 500,
            error_type: "InternalError".into(),
            message: "injected".into(),
        },
        Fault::Throttling,
        Fault::DropResponse,
    ];
    let op = "SendMessageBatch";
    for (n, fault) in faults.iter().enumerate() {
        let before = proxy.requests(op);
        proxy.fail_next(op, 2, fault.clone());
        let message = OutgoingMessage::event("g", &Event::new("Ping").with_id(format!("e{n}")));
        let failures = queue.publish_batch(std::slice::from_ref(&message)).await;
        assert!(failures.is_empty(), "{fault:?}: {failures:?}");
        assert_eq!(
            proxy.requests(op) - before,
            3,
            "{fault:?}: two faulted attempts, then the one answered"
        );
        assert_eq!(proxy.armed(op), 0);
    }
    // each publish landed once (the lost answers' retries were deduplicated)
    assert_eq!(view.approximate_depth().await.expect("depth"), 3);
    // and a fault outliving the SDK's three attempts is a reported failure, not a panic
    proxy.fail_next(op, 3, Fault::Throttling);
    let message = OutgoingMessage::event("g", &Event::new("Ping").with_id("e-last"));
    let failures = queue.publish_batch(std::slice::from_ref(&message)).await;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].message.contains("ThrottlingException"),
        "{failures:?}"
    );
    // the receive, delete and visibility calls are retried too
    for op in ["ReceiveMessage", "ChangeMessageVisibility", "DeleteMessage"] {
        proxy.fail_next(
            op,
            2,
            Fault::Error {
                status: 500,
                error_type: "InternalError".into(),
                message: "injected".into(),
            },
        );
    }
    let got = queue.receive(1, 30, 0).await.expect("receive after two 500s");
    assert_eq!(got.len(), 1);
    queue
        .change_visibility(&got[0].receipt_handle, 30)
        .await
        .expect("visibility after two 500s");
    queue
        .delete(&got[0].receipt_handle)
        .await
        .expect("delete after two 500s");
    for op in ["ReceiveMessage", "ChangeMessageVisibility", "DeleteMessage"] {
        assert_eq!((proxy.injected(op), proxy.requests(op)), (2, 3), "{op}");
    }
}

/// The loss the faults exposed: `create` commits the execution (`PENDING`) with its `Start`
/// in the outbox and then publishes it; when the queue refuses that publish (SQS throttled
/// or failing past the SDK's retries) `create` still succeeds and leaves the `Start` to the
/// scheduled relay. An event the client sends next (at once, or any time before the next
/// relay run) reached the execution's group *before* the `Start`, and the worker drops any
/// event for a `PENDING` execution: it was lost although `send` had succeeded. `send` now
/// publishes a `PENDING` execution's pending outbox entries (its `Start`) before the event.
#[tokio::test]
async fn an_event_sent_after_a_create_whose_start_was_not_queued_is_not_lost() {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(5));
    let stack = common::Stack::new(store.clone(), queue.clone());
    queue.fail_next_publishes(1);
    stack
        .control
        .create("Flat", None, Some("flat"))
        .await
        .expect("create succeeds: the Start stays for the relay");
    assert_eq!(store.pending_outbox().await.expect("outbox").len(), 1);
    assert!(queue.is_empty(), "the Start was not queued");
    // the client goes on at once, before any relay run
    stack
        .control
        .send("flat", &event("Go", json!({})))
        .await
        .expect("send");
    stack.drain().await;
    let exe = stack.load("flat").await;
    assert_eq!(
        (exe.active_path.as_deref(), exe.context.get("n")),
        (Some("Working"), Some(&json!(1))),
        "Go was applied after the Start: {exe:?}"
    );
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
}
