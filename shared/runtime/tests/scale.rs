//! The scale simulator and its gate: the REAL worker (`Worker::handle_batch`), relay
//! (`relay::relay_pending`) and sweeper (`sweeper::sweep`) over a metered in-memory store
//! (`common/metered.rs`: DynamoDB's requests and units per partition key, as the DynamoDB
//! store would send them) and an in-memory SQS FIFO queue ([`SimQueue`]), in SIMULATED time.
//!
//! It prints one table: per workload and rate, the events/s offered and served, the
//! hottest partition key and its units/s against DynamoDB's per-key limits (1,000 WCU/s,
//! 3,000 RCU/s), the DynamoDB requests and units per event, the Lambda concurrency the
//! worker needs, and the DynamoDB cost per million events (on-demand prices read from
//! `bench/cost_model.py` at run time). Its last line is
//! `scale: hottest key NN% of its limit; per-event requests flat: yes|no`.
//!
//! The gate (asserted): at the modelled rates no key above 50% of its limit in any workload
//! but the single hot execution (one key by definition: its ceiling in events/s is reported
//! instead), and the DynamoDB requests per event of the same workload equal (within 2%)
//! with a small table and with a large one (10^4 idle executions in the quick run, 10^6 in
//! the full one). A shared item written by every emitting commit (a seq counter, say) puts
//! that key over the limit at 10,000 events/s with 10% emits: the gate fails.
//!
//! ```text
//! cargo test -p stm-runtime --test scale -- --nocapture     # quick: 1k and 10k events/s
//! STM_SCALE=full cargo test -p stm-runtime --test scale -- --nocapture   # + 100k, 10^6 rows
//! bash scripts/scale.sh [--quick]
//! ```
//!
//! # Simulated time
//!
//! One `ManualClock` is the driver's clock and the meter's: the producer's events arrive at
//! the workload's rate (evenly spaced), each message group (one execution) takes a batch of
//! the messages visible in it (up to 10, as SQS FIFO hands a group's messages to one
//! invocation), and is busy for the batch's modelled latency: 5 ms per DynamoDB request and
//! 10 ms per SQS request the handler makes. Groups are independent (as many Lambda
//! instances as needed); within a group everything is serial. The sweeper runs every
//! simulated second (the template's schedule is a minute; near timers ring doorbells, not
//! modelled: this is the sweeper's path at its most frequent), the relay once per run,
//! after the window.
//!
//! - **Lambda concurrency needed** = offered events/s x modelled worker seconds per event.
//! - **Served** = min(offered, `WorkerMaxConcurrency` (template.yaml) x events/s one instance
//!   serves); for the hot execution min(offered, its group's ceiling); with timers, the
//!   timer events are also capped by what a sweep fires per second (`SWEEP_CONCURRENCY`
//!   executions' timers at once).
//!
//! # Workloads
//!
//! The machines are `tests/machines/scale.stm`. A mix's producer sends `Ping`s to
//! `Counter`s (10 events/s each on average, at least 1,000 of them) and to `Duo` parents (a
//! broadcast: the parent's commit writes one outbox row for its region, which the inline
//! flush publishes: an event to another execution); `Ticker`s arm a 1.5 s timer that the
//! sweeper fires, and its `Timeout` moves them to their other timed state, which cancels
//! the old timer and arms the next (every 2 s, sweeps being whole seconds).
//! - plain: only `Counter`s;
//! - emits: 10% of the events are emitted by another execution's commit;
//! - timers: 10% of the events are `Timeout`s (the cost model's default share);
//! - hot execution: every event to one `Counter`;
//! - fan-out: one `Broadcast` over 1,000 recipients (today the commit of 1,000 spawn rows is
//!   over DynamoDB's 100-item transaction: the row reports the failure and its reason);
//! - mix (the table, small and large): 10% emits and 10% timers, its executions alone, then
//!   next to idle executions (half waiting on a 30-day timer, half suspended) seeded straight
//!   into the store: the flatness pair;
//! - relay backlog: pending outbox rows (10^4 quick, 10^6 full) seeded straight into the
//!   store, one run of the scheduled relay's code, serial (the clock advances by the
//!   latency model's time per request): requests and units per forwarded row, the run's
//!   modelled time against the relay function's `Timeout`, and what it held at once (the
//!   most seqs and row bytes one store call handed back, with the rows' messages) against
//!   its `MemorySize` (both from template.yaml): the ceiling row.

#![cfg(feature = "aws")]

#[path = "common/metered.rs"]
mod metered;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use metered::MeteredStore;
use serde_json::{json, Value};
use stm_core::{Event, Execution, Status};
use stm_runtime::queue::{plan_batches, PublishFailure, ReceivedMessage, SPAWN_KIND};
use stm_runtime::worker::BatchOutcome;
use stm_runtime::{
    relay, sweeper, ActionRegistry, Clock, Control, Definitions, Driver, DriverError, ManualClock,
    OutgoingMessage, Queue, Record, Worker, WorkerSettings,
};
use stm_store::{Commit, ExecutionStore, TimerOp};
use stm_testkit::meter::{KeyLoad, MeterReport};

/// The simulation's epoch (the clock's start).
const START: f64 = 1_700_000_000.0;
/// The latency model.
const DDB_SECONDS: f64 = 0.005;
const SQS_SECONDS: f64 = 0.010;
/// The gate.
const GATE_SHARE: f64 = 0.5;
const FLAT_TOLERANCE: f64 = 0.02;
/// How long a failed record stays hidden when the worker did not release it.
const VISIBILITY_SECONDS: f64 = 360.0;
/// The share of events that emit, and that are timeouts, in the mixed workloads.
const EMIT_SHARE: f64 = 0.1;
const TIMER_SHARE: f64 = 0.1;
/// The `Ticker`'s timer fires every this many seconds (1.5 s, swept at whole seconds).
const TICKER_PERIOD: f64 = 2.0;
/// Events per second per active execution, on average.
const EVENTS_PER_EXECUTION: f64 = 10.0;

// --- configuration -----------------------------------------------------------------

#[derive(Debug, Clone)]
struct Config {
    full: bool,
    rates: Vec<f64>,
    /// The simulated seconds of arrivals per run.
    window: f64,
    idle: usize,
    backlog: usize,
    fanout: usize,
}

impl Config {
    fn from_env() -> Config {
        let full = std::env::var("STM_SCALE").is_ok_and(|v| v.eq_ignore_ascii_case("full"));
        if full {
            Config {
                full,
                rates: vec![1_000.0, 10_000.0, 100_000.0],
                window: 2.0,
                idle: 1_000_000,
                backlog: 1_000_000,
                fanout: 1_000,
            }
        } else {
            Config {
                full,
                rates: vec![1_000.0, 10_000.0],
                window: 2.0,
                idle: 10_000,
                backlog: 10_000,
                fanout: 1_000,
            }
        }
    }
}

fn repo_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

/// DynamoDB's on-demand prices, $ per million units, from `bench/cost_model.py`'s `PRICES`.
#[derive(Debug, Clone, Copy)]
struct Prices {
    write: f64,
    read: f64,
}

fn prices() -> Prices {
    let path = repo_file("bench/cost_model.py");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading the DynamoDB prices from {}: {e}", path.display()));
    let table = text
        .find("PRICES = {")
        .map(|at| &text[at..])
        .unwrap_or_else(|| panic!("{}: no `PRICES = {{` (the DynamoDB prices)", path.display()));
    let price = |name: &str| -> f64 {
        let needle = format!("\"{name}\":");
        let at = table
            .find(&needle)
            .unwrap_or_else(|| panic!("{}: PRICES has no {needle}", path.display()));
        let number: String = table[at + needle.len()..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        number
            .parse()
            .unwrap_or_else(|_| panic!("{}: {needle} is not followed by a number", path.display()))
    };
    Prices {
        write: price("ddb_write_per_million_wru"),
        read: price("ddb_read_per_million_rru"),
    }
}

/// A number from template.yaml: the first `key: N` in the block of `name` (a resource or a
/// parameter, indented by two spaces).
fn template_number(name: &str, key: &str) -> f64 {
    let path = repo_file("template.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let header = format!("  {name}:");
    let mut lines = text.lines().skip_while(|l| l.trim_end() != header);
    lines
        .next()
        .unwrap_or_else(|| panic!("{}: no `{name}:`", path.display()));
    for line in lines {
        let sibling = line.starts_with("  ") && !line.starts_with("   ");
        let top = !line.is_empty() && !line.starts_with(' ');
        if sibling || top {
            break;
        }
        if let Some(value) = line.trim_start().strip_prefix(&format!("{key}:")) {
            return value
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("{}: {name}'s {key} is not a number: {line}", path.display()));
        }
    }
    panic!("{}: `{name}` has no `{key}:`", path.display())
}

#[derive(Debug, Clone, Copy)]
struct Deployment {
    worker_max_concurrency: f64,
    relay_memory_mb: f64,
    relay_timeout: f64,
}

fn deployment() -> Deployment {
    Deployment {
        worker_max_concurrency: template_number("WorkerMaxConcurrency", "Default"),
        relay_memory_mb: template_number("Relay", "MemorySize"),
        relay_timeout: template_number("Relay", "Timeout"),
    }
}

fn definitions() -> Definitions {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/machines/scale.stm");
    let mut defs = Definitions::new();
    for defn in stm_runtime::config::load_file(&file).expect("scale.stm loads and validates") {
        defs.register(defn);
    }
    defs
}

/// A small deterministic generator (splitmix64): the same workload for the small and the
/// large table.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// --- the queue ---------------------------------------------------------------------

/// Whole microseconds: the queue's order of simulated times.
fn micros(t: f64) -> i64 {
    (t * 1e6).round() as i64
}

#[derive(Debug, Clone)]
struct Queued {
    message_id: String,
    message: OutgoingMessage,
    receive_count: u32,
    visible_at: f64,
}

#[derive(Debug, Default)]
struct Group {
    messages: VecDeque<Queued>,
    /// When the group's last batch ends (its next cannot start before).
    free_at: f64,
    /// The time of its live entry in the ready heap.
    scheduled: Option<i64>,
}

#[derive(Debug, Default)]
struct QueueState {
    groups: HashMap<String, Group>,
    ready: BinaryHeap<Reverse<(i64, u64, String)>>,
    tie: u64,
    next_id: u64,
    dedupe: HashSet<String>,
    /// Receipt handle -> when the worker's release makes it visible again.
    released: HashMap<String, f64>,
    queued: usize,
}

/// SQS FIFO in simulated time: per-group order, one batch of a group at a time, up to 10
/// messages per batch, deduplication, visibility. It counts the SQS requests made through
/// it (a `SendMessageBatch` per request `plan_batches` cuts, a `ChangeMessageVisibility`);
/// the producer's sends ([`SimQueue::inject`]) and the event source's receives and deletes
/// are not counted (they are not in the worker's time).
///
/// Not `MemoryQueue`: its deduplication window and visibility run on the wall clock and
/// its receive scans the whole queue, quadratic at 10^5 messages.
#[derive(Debug)]
struct SimQueue {
    state: Mutex<QueueState>,
    clock: Arc<ManualClock>,
    requests: AtomicU64,
    /// Messages accepted by `publish_batch`, and their bytes.
    published: AtomicU64,
    published_bytes: AtomicU64,
    /// Count what is published but keep nothing (the relay backlog's pass).
    discard: AtomicBool,
    /// The clock's advance per request (a serial caller; 0: none).
    serial: Mutex<f64>,
}

impl SimQueue {
    fn new(clock: Arc<ManualClock>) -> Self {
        SimQueue {
            state: Mutex::default(),
            clock,
            requests: AtomicU64::new(0),
            published: AtomicU64::new(0),
            published_bytes: AtomicU64::new(0),
            discard: AtomicBool::new(false),
            serial: Mutex::new(0.0),
        }
    }

    fn count_requests(&self, n: u64) {
        self.requests.fetch_add(n, Ordering::SeqCst);
        let step = *lock(&self.serial);
        if step > 0.0 {
            self.clock.advance(step * n as f64);
        }
    }

    fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    fn reset_counts(&self) {
        self.requests.store(0, Ordering::SeqCst);
        self.published.store(0, Ordering::SeqCst);
        self.published_bytes.store(0, Ordering::SeqCst);
    }

    fn len(&self) -> usize {
        lock(&self.state).queued
    }

    fn schedule(st: &mut QueueState, group_id: &str) {
        let Some(group) = st.groups.get_mut(group_id) else {
            return;
        };
        let Some(head) = group.messages.front() else {
            group.scheduled = None;
            return;
        };
        let at = micros(head.visible_at.max(group.free_at));
        if group.scheduled == Some(at) {
            return;
        }
        group.scheduled = Some(at);
        st.tie += 1;
        let tie = st.tie;
        st.ready.push(Reverse((at, tie, group_id.to_string())));
    }

    fn push(st: &mut QueueState, message: OutgoingMessage, at: f64) {
        if !st.dedupe.insert(message.deduplication_id.clone()) {
            return; // SQS accepts and drops a duplicate within its window
        }
        st.next_id += 1;
        let message_id = format!("m-{}", st.next_id);
        let group_id = message.group_id.clone();
        st.groups
            .entry(group_id.clone())
            .or_default()
            .messages
            .push_back(Queued {
                message_id,
                message,
                receive_count: 0,
                visible_at: at,
            });
        st.queued += 1;
        let idle = st.groups.get(&group_id).is_some_and(|g| g.scheduled.is_none());
        if idle {
            SimQueue::schedule(st, &group_id);
        }
    }

    /// A producer's send (not counted).
    fn inject(&self, target: &str, event: &Event) {
        let now = self.clock.now();
        SimQueue::push(&mut lock(&self.state), OutgoingMessage::event(target, event), now);
    }

    /// When the next batch of any group can start.
    fn next_ready(&self) -> Option<f64> {
        let mut st = lock(&self.state);
        loop {
            let Reverse((at, _, group)) = st.ready.peek()?;
            if st.groups.get(group).and_then(|g| g.scheduled) == Some(*at) {
                return Some(*at as f64 / 1e6);
            }
            st.ready.pop();
        }
    }

    /// The batch of the group that is ready first, at `now`: its group, its records and
    /// the messages (kept until [`settle`](Self::settle)).
    fn take_batch(&self) -> Option<(String, Vec<Record>, Vec<Queued>)> {
        let mut st = lock(&self.state);
        let (at, group_id) = loop {
            let Reverse((at, _, group)) = st.ready.pop()?;
            if st.groups.get(&group).and_then(|g| g.scheduled) == Some(at) {
                break (at, group);
            }
        };
        let group = st.groups.get_mut(&group_id)?;
        group.scheduled = None;
        let mut taken = Vec::new();
        while taken.len() < 10 && group.messages.front().is_some_and(|m| micros(m.visible_at) <= at) {
            if let Some(mut m) = group.messages.pop_front() {
                m.receive_count += 1;
                taken.push(m);
            }
        }
        let records = taken
            .iter()
            .map(|m| Record {
                message_id: m.message_id.clone(),
                receipt_handle: Some(format!("{}#{}", m.message_id, m.receive_count)),
                body: m.message.body.clone(),
                group_id: Some(group_id.clone()),
                kind: m.message.spawn.then(|| SPAWN_KIND.to_string()),
                receive_count: m.receive_count,
            })
            .collect();
        Some((group_id, records, taken))
    }

    /// After the worker's batch: the failed records go back to the front of their group
    /// (visible when the worker released them), the rest are deleted; the group is busy
    /// until `free_at`.
    fn settle(&self, group_id: &str, taken: Vec<Queued>, outcome: &BatchOutcome, now: f64, free_at: f64) {
        let failed: HashSet<String> = outcome.failed_ids().into_iter().collect();
        let mut st = lock(&self.state);
        let mut back = Vec::new();
        for mut m in taken {
            let receipt = format!("{}#{}", m.message_id, m.receive_count);
            let released = st.released.remove(&receipt);
            if failed.contains(&m.message_id) {
                m.visible_at = released.unwrap_or(now + VISIBILITY_SECONDS);
                back.push(m);
            } else {
                st.queued -= 1;
            }
        }
        if let Some(group) = st.groups.get_mut(group_id) {
            for m in back.into_iter().rev() {
                group.messages.push_front(m);
            }
            group.free_at = free_at;
            // kept when empty: its next batch still waits for `free_at`
            SimQueue::schedule(&mut st, group_id);
        }
    }
}

#[async_trait]
impl Queue for SimQueue {
    async fn publish_batch(&self, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        let plan = plan_batches(messages);
        let now = self.clock.now();
        self.count_requests(plan.batches.len() as u64);
        let discard = self.discard.load(Ordering::SeqCst);
        let mut st = lock(&self.state);
        for &index in plan.batches.iter().flatten() {
            let message = &messages[index];
            self.published.fetch_add(1, Ordering::SeqCst);
            self.published_bytes
                .fetch_add(message.sqs_bytes() as u64, Ordering::SeqCst);
            if !discard {
                SimQueue::push(&mut st, message.clone(), now);
            }
        }
        plan.refused
    }

    /// The simulator hands each group's batch to the worker itself ([`SimQueue::take_batch`]).
    async fn receive(
        &self,
        _max: usize,
        _visibility_seconds: i32,
        _wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, DriverError> {
        Ok(Vec::new())
    }

    async fn delete(&self, _receipt_handle: &str) -> Result<(), DriverError> {
        Ok(())
    }

    async fn change_visibility(&self, receipt_handle: &str, seconds: i32) -> Result<(), DriverError> {
        self.count_requests(1);
        let at = self.clock.now() + f64::from(seconds.max(0));
        lock(&self.state).released.insert(receipt_handle.to_string(), at);
        Ok(())
    }
}

// --- the simulation ----------------------------------------------------------------

/// What the worker and the sweeper did in a run.
#[derive(Debug, Default)]
struct Tally {
    /// Records handled (processed, broadcast, spawned).
    events: u64,
    /// Records acknowledged without a step (duplicates, unknown executions, drained).
    noops: u64,
    /// Records reported failed, and the first reasons.
    failed: u64,
    reasons: Vec<String>,
    /// The requests the worker's handler made (its modelled time).
    worker_ddb: u64,
    worker_sqs: u64,
    /// The sweeps' requests and the timers they fired.
    sweep_ddb: u64,
    sweep_sqs: u64,
    fired: u64,
    /// Records that were broadcasts (an emitting commit each).
    broadcasts: u64,
    /// The watched group's busy seconds and events (the hot execution).
    watched_busy: f64,
    watched_events: u64,
    watched_batches: u64,
}

/// One arrival: when, to whom, what.
type Arrival = (f64, String, Event);

struct Sim {
    clock: Arc<ManualClock>,
    store: Arc<MeteredStore>,
    queue: Arc<SimQueue>,
    worker: Worker,
    control: Control,
    tally: Tally,
    watched: Option<String>,
}

impl Sim {
    fn new(defs: &Definitions) -> Sim {
        let clock = Arc::new(ManualClock::new(START));
        let store = Arc::new(MeteredStore::new(clock.clone()));
        let queue = Arc::new(SimQueue::new(clock.clone()));
        let driver = Driver::new(store.clone(), defs.clone(), ActionRegistry::with_builtins())
            .with_clock(clock.clone());
        let worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default());
        let control = Control::new(driver, queue.clone());
        Sim {
            clock,
            store,
            queue,
            worker,
            control,
            tally: Tally::default(),
            watched: None,
        }
    }

    fn set_time(&self, t: f64) {
        if t > self.clock.now() {
            self.clock.set(t);
        }
    }

    /// Start charging from now on: the meter, the counts and the tally from zero.
    fn begin_measuring(&mut self) {
        self.store.reset();
        self.store.set_enabled(true);
        self.queue.reset_counts();
        self.tally = Tally::default();
    }

    async fn create(&self, definition: &str, id: &str, context: Option<Value>) {
        let context = context.and_then(|v| v.as_object().cloned());
        self.control
            .create(definition, context, Some(id))
            .await
            .unwrap_or_else(|e| panic!("create {id}: {e}"));
    }

    /// One batch of the group ready first, through the worker's real handler.
    async fn batch(&mut self, at: f64) {
        self.set_time(at);
        let Some((group, records, taken)) = self.queue.take_batch() else {
            return;
        };
        if records.is_empty() {
            let now = self.clock.now();
            self.queue
                .settle(&group, taken, &BatchOutcome::default(), now, now);
            return;
        }
        let (ddb, sqs) = (self.store.requests(), self.queue.requests());
        let outcome = self.worker.handle_batch(&records).await;
        let ddb = self.store.requests() - ddb;
        let sqs = self.queue.requests() - sqs;
        let latency = ddb as f64 * DDB_SECONDS + sqs as f64 * SQS_SECONDS;
        let now = self.clock.now();
        self.queue.settle(&group, taken, &outcome, now, now + latency);
        let t = &mut self.tally;
        t.worker_ddb += ddb;
        t.worker_sqs += sqs;
        let mut handled = 0;
        for (_, result) in &outcome.records {
            use stm_runtime::worker::Handled;
            match result {
                Ok(Handled::Processed { .. } | Handled::Spawned { .. }) => handled += 1,
                Ok(Handled::Broadcast { .. }) => {
                    handled += 1;
                    t.broadcasts += 1;
                }
                Ok(_) => t.noops += 1,
                Err(why) => {
                    t.failed += 1;
                    if t.reasons.len() < 5 {
                        t.reasons.push(format!("{group}: {why:?}"));
                    }
                }
            }
        }
        t.events += handled;
        if self.watched.as_deref() == Some(group.as_str()) {
            t.watched_busy += latency;
            t.watched_events += handled;
            t.watched_batches += 1;
        }
    }

    async fn sweep(&mut self, at: f64) {
        self.set_time(at);
        let (ddb, sqs) = (self.store.requests(), self.queue.requests());
        let summary = sweeper::sweep(self.store.as_ref(), self.queue.as_ref(), self.clock.now())
            .await
            .expect("sweep");
        self.tally.sweep_ddb += self.store.requests() - ddb;
        self.tally.sweep_sqs += self.queue.requests() - sqs;
        self.tally.fired += summary.fired as u64;
    }

    /// Run in time order until nothing is left: the arrivals, a sweep at every whole second
    /// of `sweeps` (from, until), and every group's batches.
    async fn run(&mut self, mut arrivals: impl FnMut() -> Option<Arrival>, sweeps: Option<(f64, f64)>) {
        let mut next_arrival = arrivals();
        let mut next_sweep = sweeps.map(|(from, _)| from);
        let sweep_until = sweeps.map_or(f64::NEG_INFINITY, |(_, until)| until);
        loop {
            let arrival_at = next_arrival.as_ref().map(|(t, _, _)| *t);
            let sweep_at = next_sweep.filter(|t| *t < sweep_until);
            let batch_at = self.queue.next_ready();
            let first = [arrival_at, sweep_at, batch_at]
                .into_iter()
                .flatten()
                .fold(f64::INFINITY, f64::min);
            if !first.is_finite() {
                break;
            }
            if arrival_at == Some(first) {
                if let Some((t, target, event)) = next_arrival.take() {
                    self.set_time(t);
                    self.queue.inject(&target, &event);
                }
                next_arrival = arrivals();
            } else if sweep_at == Some(first) {
                self.sweep(first).await;
                next_sweep = Some(first + 1.0);
            } else {
                self.batch(first).await;
            }
        }
    }

    /// Process everything queued (no arrivals, no sweeps).
    async fn drain(&mut self) {
        self.run(|| None, None).await;
    }

    /// A relay pass at `at` (then whatever it published is processed).
    async fn relay(&mut self, at: f64) -> relay::RelaySummary {
        self.set_time(at);
        let summary = relay::relay_pending(self.store.as_ref(), self.queue.as_ref())
            .await
            .expect("relay pass");
        self.drain().await;
        summary
    }

    fn assert_clean(&self, what: &str) {
        let t = &self.tally;
        assert_eq!(t.failed, 0, "{what}: records failed: {:?}", t.reasons);
        assert_eq!(t.noops, 0, "{what}: records acknowledged without a step");
        assert_eq!(self.queue.len(), 0, "{what}: messages left in the queue");
    }
}

// --- results -----------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Row {
    workload: String,
    rate: String,
    offered: Option<f64>,
    served: Option<f64>,
    hottest: Option<KeyLoad>,
    requests_per_event: f64,
    reads_per_event: f64,
    writes_per_event: f64,
    concurrency: Option<f64>,
    cost_per_million: f64,
    note: String,
    /// In the hot-key gate (all but the single hot execution).
    gated: bool,
    /// The run failed (the reason).
    failed: Option<String>,
}

/// The per-event figures of a run.
struct PerEvent {
    requests: f64,
    reads: f64,
    writes: f64,
    cost: f64,
}

fn per_event(report: &MeterReport, events: f64, prices: Prices) -> PerEvent {
    let events = events.max(1.0);
    let (reads, writes) = report.total_units();
    let (reads, writes) = (reads / events, writes / events);
    PerEvent {
        requests: report.total_requests() as f64 / events,
        reads,
        writes,
        cost: reads * prices.read + writes * prices.write,
    }
}

fn rate_label(rate: f64) -> String {
    if rate >= 1_000.0 {
        format!("{}k/s", rate / 1_000.0)
    } else {
        format!("{rate}/s")
    }
}

fn count_label(n: usize) -> String {
    let exp = (n as f64).log10();
    if (exp - exp.round()).abs() < 1e-9 && n >= 1_000 {
        format!("10^{}", exp.round())
    } else {
        n.to_string()
    }
}

/// What a run measured, as a row: `offered` events/s; the worker's modelled seconds per
/// event give the concurrency and what the deployment serves.
fn measured_row(sim: &Sim, workload: &str, rate: f64, offered: f64, env: &Env) -> (Row, MeterReport) {
    let report = sim.store.meter.report();
    let t = &sim.tally;
    let pe = per_event(&report, t.events as f64, env.prices);
    let seconds_per_event =
        (t.worker_ddb as f64 * DDB_SECONDS + t.worker_sqs as f64 * SQS_SECONDS) / (t.events.max(1) as f64);
    let capacity = env.deployment.worker_max_concurrency / seconds_per_event.max(1e-9);
    let row = Row {
        workload: workload.to_string(),
        rate: rate_label(rate),
        offered: Some(offered),
        served: Some(offered.min(capacity)),
        hottest: report.hottest().cloned(),
        requests_per_event: pe.requests,
        reads_per_event: pe.reads,
        writes_per_event: pe.writes,
        concurrency: Some(offered * seconds_per_event),
        cost_per_million: pe.cost,
        note: format!("{:.1} ms/event", seconds_per_event * 1e3),
        gated: true,
        failed: None,
    };
    (row, report)
}

struct Env {
    cfg: Config,
    defs: Definitions,
    prices: Prices,
    deployment: Deployment,
}

// --- workloads ---------------------------------------------------------------------

/// A mix: the producer's Pings to Counters and Duo parents, Tickers' timeouts, and
/// `idle` executions beside them.
#[derive(Debug, Clone, Copy)]
struct Mix {
    emit_share: f64,
    timer_share: f64,
    idle: usize,
    /// Name the row by its table's size (the flatness pair).
    sized: bool,
}

async fn run_mix(env: &Env, workload: &str, mix: Mix, rate: f64) -> Row {
    let mut workload = workload.to_string();
    let mut sim = Sim::new(&env.defs);
    sim.store.set_enabled(false);
    // of `rate` events/s: emit_share are broadcasts by a Duo parent and as many are the
    // emitted events its region takes; timer_share are Timeouts; the rest plain Pings
    let duo_rate = mix.emit_share * rate;
    let counter_rate = rate * (1.0 - 2.0 * mix.emit_share - mix.timer_share);
    let counters = ((counter_rate / EVENTS_PER_EXECUTION).ceil() as usize).max(1_000);
    let duos = if duo_rate > 0.0 {
        ((duo_rate / EVENTS_PER_EXECUTION).ceil() as usize).max(100)
    } else {
        0
    };
    let tickers = (mix.timer_share * rate * TICKER_PERIOD).round() as usize;
    if mix.idle > 0 {
        // first: MemoryStore keeps its timers in arming order and removes one by shifting
        // those after it, so the active timers, armed after the idle ones, stay cheap
        seed_idle(&mut sim, mix.idle).await;
    }
    for i in 0..counters {
        sim.create("Counter", &format!("c{i}"), None).await;
    }
    for i in 0..duos {
        sim.create("Duo", &format!("d{i}"), None).await;
    }
    // half the tickers a second later: the sweeps alternate between the halves
    for i in 0..tickers.div_ceil(2) {
        sim.create("Ticker", &format!("t{}", 2 * i), None).await;
    }
    sim.drain().await;
    sim.set_time(START + 1.0);
    for i in 0..tickers / 2 {
        sim.create("Ticker", &format!("t{}", 2 * i + 1), None).await;
    }
    sim.drain().await;
    sim.assert_clean(&format!("{workload} setup"));
    if mix.sized {
        // the Duos' regions are executions too
        let active = counters + 2 * duos + tickers;
        workload = if mix.idle > 0 {
            format!("{workload}, {active} + {} idle", count_label(mix.idle))
        } else {
            format!("{workload}, {active} executions")
        };
    }
    let workload = workload.as_str();

    let t0 = START + 2.0;
    sim.set_time(t0);
    sim.begin_measuring();
    let producer_rate = duo_rate + counter_rate;
    let arrivals_total = (producer_rate * env.cfg.window).round() as usize;
    let mut rng = Rng(0x5CA1E ^ rate as u64);
    let mut i = 0;
    let arrivals = move || {
        if i >= arrivals_total {
            return None;
        }
        let at = t0 + i as f64 / producer_rate;
        i += 1;
        let target = if rng.unit() * producer_rate < duo_rate {
            format!("d{}", rng.below(duos))
        } else {
            format!("c{}", rng.below(counters))
        };
        Some((at, target, Event::new("Ping")))
    };
    let window_end = t0 + env.cfg.window;
    sim.run(arrivals, Some((t0, window_end))).await;
    let relayed = sim.relay(window_end.max(sim.clock.now())).await;
    sim.assert_clean(workload);
    assert_eq!(
        relayed.forwarded, 0,
        "{workload}: the inline flush left rows for the relay"
    );
    let t = &sim.tally;
    if mix.emit_share > 0.0 {
        assert!(t.broadcasts > 0, "{workload}: no emitting commit");
    }
    if mix.timer_share > 0.0 {
        assert!(
            t.fired as usize >= tickers,
            "{workload}: {} of {tickers} timers fired",
            t.fired
        );
    }
    let offered = t.events as f64 / env.cfg.window;
    let fired = t.fired;
    let sweep_seconds = sim.tally.sweep_ddb as f64 * DDB_SECONDS + sim.tally.sweep_sqs as f64 * SQS_SECONDS;
    let (mut row, _) = measured_row(&sim, workload, rate, offered, env);
    if fired > 0 {
        // a sweep fires `SWEEP_CONCURRENCY` executions' timers at once: what it fires per
        // second caps the timer events served
        let per_timer = sweep_seconds / fired as f64;
        let sweeper_cap = stm_runtime::sweeper::SWEEP_CONCURRENCY as f64 / per_timer.max(1e-9);
        let timer_rate = fired as f64 / env.cfg.window;
        if let Some(served) = row.served.as_mut() {
            *served = served.min(offered - timer_rate + timer_rate.min(sweeper_cap));
        }
        row.note += &format!(
            "; sweeper: {:.0} timers/s needed, a sweep fires {:.0}/s ({} at once)",
            timer_rate,
            sweeper_cap,
            stm_runtime::sweeper::SWEEP_CONCURRENCY
        );
    }
    row
}

/// `n` idle executions straight into the store (no events, nothing charged): copies of a
/// started `Sleeper` (its 30-day timer armed), every other one suspended.
async fn seed_idle(sim: &mut Sim, n: usize) {
    sim.create("Sleeper", "sleeper", None).await;
    sim.drain().await;
    let template = sim
        .store
        .inner
        .load("sleeper")
        .await
        .expect("load")
        .expect("the sleeper");
    let timer = sim
        .store
        .inner
        .due_timers(f64::INFINITY)
        .await
        .expect("timers")
        .into_iter()
        .find(|t| t.execution_id == "sleeper")
        .expect("the sleeper's timer");
    for i in 0..n {
        let mut exe: Execution = template.clone();
        exe.id = format!("idle{i}");
        exe.version = 0;
        if i % 2 == 1 {
            exe.status = Status::Suspended;
        }
        let commit = Commit {
            timers: vec![TimerOp::Schedule {
                path: timer.path.clone(),
                fire_at: timer.fire_at,
            }],
            ..Commit::default()
        };
        sim.store
            .commit(&mut exe, commit)
            .await
            .expect("seed an idle execution");
    }
}

/// Every event to one execution: its group is serial, so its ceiling is what one group
/// serves under the latency model (and its key's limit).
async fn run_hot(env: &Env, rate: f64) -> Row {
    let mut sim = Sim::new(&env.defs);
    sim.store.set_enabled(false);
    sim.create("Counter", "hot", None).await;
    sim.drain().await;
    let t0 = START + 1.0;
    sim.set_time(t0);
    sim.begin_measuring();
    sim.watched = Some("hot".to_string());
    let total = (rate * env.cfg.window).round() as usize;
    let mut i = 0;
    let arrivals = move || {
        if i >= total {
            return None;
        }
        let at = t0 + i as f64 / rate;
        i += 1;
        Some((at, "hot".to_string(), Event::new("Ping")))
    };
    sim.run(arrivals, None).await;
    sim.relay(sim.clock.now()).await;
    sim.assert_clean("hot execution");
    let offered = sim.tally.events as f64 / env.cfg.window;
    let (mut row, report) = measured_row(&sim, "hot execution", rate, offered, env);
    let t = &sim.tally;
    let latency_ceiling = t.watched_events as f64 / t.watched_busy.max(1e-9);
    // the key's own limit: its units per event against 1,000 WCU/s and 3,000 RCU/s
    let (reads, writes) = report
        .units_per_table
        .iter()
        .find(|(table, _, _)| table == metered::EXECUTIONS)
        .map_or((0.0, 0.0), |(_, r, w)| (*r, *w));
    let events = t.events.max(1) as f64;
    let key_ceiling = (stm_testkit::meter::PARTITION_WRITE_UNITS / (writes / events).max(1e-9))
        .min(stm_testkit::meter::PARTITION_READ_UNITS / (reads / events).max(1e-9));
    let ceiling = latency_ceiling.min(key_ceiling);
    let batches = t.watched_batches.max(1) as f64;
    let served = offered.min(ceiling);
    row.served = Some(served);
    // one group is one invocation at a time: what it serves, at its time per event
    let seconds_per_event = (t.worker_ddb as f64 * DDB_SECONDS + t.worker_sqs as f64 * SQS_SECONDS) / events;
    row.concurrency = Some(served * seconds_per_event);
    row.gated = false;
    row.note = format!(
        "one execution's ceiling {:.0} ev/s ({:.0} by its serial group: {:.1} ms per batch of {:.1} events; {:.0} by its key's limit)",
        ceiling,
        latency_ceiling,
        1e3 * t.watched_busy / batches,
        t.watched_events as f64 / batches,
        key_ceiling
    );
    row
}

/// One fan-out over `n` recipients, to quiescence.
async fn run_fanout(env: &Env) -> Row {
    let n = env.cfg.fanout;
    let mut sim = Sim::new(&env.defs);
    sim.begin_measuring();
    let recipients: Vec<Value> = (0..n).map(|i| json!(format!("r{i}"))).collect();
    sim.create("Broadcast", "fan", Some(json!({ "recipients": recipients })))
        .await;
    sim.drain().await;
    sim.relay(sim.clock.now()).await;
    let exe = sim
        .store
        .inner
        .load("fan")
        .await
        .expect("load")
        .expect("the fan-out");
    let elapsed = (sim.clock.now() - START).max(1e-3);
    let offered = sim.tally.events as f64 / elapsed;
    let (mut row, _) = measured_row(&sim, &format!("fan-out {n} children"), 0.0, offered, env);
    row.rate = "1 fan-out".to_string();
    row.offered = None;
    row.served = None;
    row.concurrency = None;
    match exe.status {
        Status::Done => {
            sim.assert_clean("fan-out");
            let children = sim.store.inner.all_executions().len() - 1;
            assert_eq!(children, n, "fan-out: every child created");
            // one execution's key by definition (the parent's item, rewritten by each
            // child's Finished): a ceiling to report, as the hot execution's, not a key
            // the deployment shares
            row.gated = false;
            row.note = format!(
                "{} events in {:.2} s simulated, outcome {}; the join rewrites the parent's item \
                 (~130 B a child) once per Finished: DynamoDB throttles that key and the join takes longer",
                sim.tally.events,
                elapsed,
                exe.outcome.as_deref().unwrap_or("-")
            );
        }
        status => {
            row.failed = Some(format!(
                "execution {status}: {}",
                exe.error.as_deref().unwrap_or("no error recorded")
            ));
            row.note = format!("{status}");
        }
    }
    row
}

/// The scheduled relay over `rows` pending outbox rows seeded straight into the store:
/// one run of `relay_pending`, serial (the clock advances by the latency model's time per
/// request), whatever passes it takes.
async fn run_relay_backlog(env: &Env) -> Row {
    let rows = env.cfg.backlog;
    let mut sim = Sim::new(&env.defs);
    sim.store.set_enabled(false);
    // the relay's messages are counted, not kept (nothing processes them here)
    sim.queue.discard.store(true, Ordering::SeqCst);
    const PER_COMMIT: usize = 50;
    let mut seeded = 0;
    let mut k = 0;
    while seeded < rows {
        let batch = PER_COMMIT.min(rows - seeded);
        let mut exe = Execution::new(format!("src{k}"), "Counter");
        let emits = (0..batch)
            .map(|j| (Some(format!("c{}", (seeded + j) % 1_000)), Event::new("Ping")))
            .collect();
        let commit = Commit {
            emits,
            ..Commit::default()
        };
        sim.store
            .commit(&mut exe, commit)
            .await
            .expect("seed outbox rows");
        seeded += batch;
        k += 1;
    }
    let backlog_bytes = sim.store.outbox_bytes();
    let t0 = START + 1.0;
    sim.set_time(t0);
    sim.begin_measuring();
    sim.store.set_serial(DDB_SECONDS);
    *lock(&sim.queue.serial) = SQS_SECONDS;
    let summary = relay::relay_pending(sim.store.as_ref(), sim.queue.as_ref())
        .await
        .expect("relay run");
    let seconds = sim.clock.now() - t0;
    sim.store.set_serial(0.0);
    *lock(&sim.queue.serial) = 0.0;
    assert_eq!(summary.forwarded, rows, "relay backlog: {summary:?}");
    assert_eq!(sim.store.outbox_bytes(), 0, "relay backlog: rows left pending");
    let report = sim.store.meter.report();
    let pe = per_event(&report, rows as f64, env.prices);
    let message_bytes = sim.queue.published_bytes.load(Ordering::SeqCst) as f64 / rows as f64;
    let row_bytes = backlog_bytes as f64 / rows as f64;
    // what the run held at once: the seqs of a pass (16 bytes each), and the most rows one
    // read handed back with their messages
    let (seqs, held) = sim.store.peak();
    let peak = seqs as f64 * std::mem::size_of::<stm_store::PendingSeq>() as f64
        + held as f64 * (1.0 + message_bytes / row_bytes.max(1.0));
    let d = env.deployment;
    let per_invocation = if seconds > d.relay_timeout {
        format!(
            "{:.0} rows in its {:.0} s Timeout",
            rows as f64 * d.relay_timeout / seconds,
            d.relay_timeout
        )
    } else {
        format!("within its {:.0} s Timeout", d.relay_timeout)
    };
    Row {
        workload: format!("relay backlog {} rows", count_label(rows)),
        rate: "1 run".to_string(),
        offered: None,
        served: None,
        hottest: report.hottest().cloned(),
        requests_per_event: pe.requests,
        reads_per_event: pe.reads,
        writes_per_event: pe.writes,
        concurrency: None,
        cost_per_million: pe.cost,
        note: format!(
            "per forwarded row; run {seconds:.0} s modelled ({per_invocation}); peak memory ~{:.2} MB \
             ({} seqs + {:.0} KB of rows and messages; {:.0} MB function)",
            peak / 1e6,
            seqs,
            held as f64 * (1.0 + message_bytes / row_bytes.max(1.0)) / 1e3,
            d.relay_memory_mb
        ),
        gated: true,
        failed: None,
    }
}

// --- the table and the gate --------------------------------------------------------

fn fmt_rate(v: Option<f64>) -> String {
    match v {
        None => "-".to_string(),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
    }
}

fn print_table(rows: &[Row], env: &Env) {
    let headers = [
        "workload",
        "rate",
        "offered ev/s",
        "served ev/s",
        "hottest key (table/key)",
        "RCU/s",
        "WCU/s",
        "% limit",
        "DDB req/ev",
        "RCU+WCU/ev",
        "concurrency",
        "DDB $/M ev",
        "notes",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let (key, rcu, wcu, share) = match &r.hottest {
                Some(k) => {
                    let mut key = format!("{}/{}", k.table, k.key);
                    if key.chars().count() > 30 {
                        key = format!("{}…", key.chars().take(29).collect::<String>());
                    }
                    (
                        key,
                        format!("{:.0}", k.read_units_per_second),
                        format!("{:.0}", k.write_units_per_second),
                        format!(
                            "{:.1}%{}",
                            100.0 * k.share_of_limit(),
                            if r.gated { "" } else { " (not gated)" }
                        ),
                    )
                }
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            let note = match &r.failed {
                Some(reason) => format!("FAILED: {reason}"),
                None => r.note.clone(),
            };
            vec![
                r.workload.clone(),
                r.rate.clone(),
                fmt_rate(r.offered),
                fmt_rate(r.served),
                key,
                rcu,
                wcu,
                share,
                format!("{:.2}", r.requests_per_event),
                format!("{:.2}+{:.2}", r.reads_per_event, r.writes_per_event),
                r.concurrency.map_or("-".into(), |c| format!("{c:.1}")),
                format!("{:.2}", r.cost_per_million),
                note,
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..headers.len())
        .map(|c| {
            cells
                .iter()
                .map(|row| row[c].chars().count())
                .chain([headers[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |values: Vec<String>| {
        let padded: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(c, v)| {
                let pad = widths[c].saturating_sub(v.chars().count());
                if c == 0 || c == 4 || c == headers.len() - 1 {
                    format!("{v}{}", " ".repeat(pad))
                } else {
                    format!("{}{v}", " ".repeat(pad))
                }
            })
            .collect();
        println!("| {} |", padded.join(" | ").trim_end());
    };
    println!();
    println!(
        "stm scale simulation ({}): simulated time, the real worker/relay/sweeper over a metered in-memory store and queue",
        if env.cfg.full { "full" } else { "quick" }
    );
    println!(
        "latency model: {:.0} ms per DynamoDB request, {:.0} ms per SQS request the worker makes; concurrency = offered x \
         modelled s/event; served = min(offered, WorkerMaxConcurrency {:.0} x events/s of one instance)",
        DDB_SECONDS * 1e3,
        SQS_SECONDS * 1e3,
        env.deployment.worker_max_concurrency
    );
    println!(
        "limits per partition key: {:.0} WCU/s, {:.0} RCU/s (hottest second); DynamoDB on-demand ${}/M WRU, ${}/M RRU \
         (bench/cost_model.py); {:.0} s of arrivals per run; sweeper every 1 s, relay once per run; per event: \
         every DynamoDB request and unit (worker, sweeper, relay); notes: the worker's modelled ms per event",
        stm_testkit::meter::PARTITION_WRITE_UNITS,
        stm_testkit::meter::PARTITION_READ_UNITS,
        env.prices.write,
        env.prices.read,
        env.cfg.window
    );
    line(headers.iter().map(|h| h.to_string()).collect());
    line(widths.iter().map(|w| "-".repeat(*w)).collect());
    for row in cells {
        line(row);
    }
    println!();
}

/// A line on stderr per finished run (the full run takes minutes).
fn progress(row: Row, started: std::time::Instant) -> Row {
    eprintln!(
        "[scale] {} at {}: {:.1} s",
        row.workload,
        row.rate,
        started.elapsed().as_secs_f64()
    );
    row
}

#[tokio::test]
async fn scale() {
    let cfg = Config::from_env();
    let env = Env {
        defs: definitions(),
        prices: prices(),
        deployment: deployment(),
        cfg: cfg.clone(),
    };
    let wall = std::time::Instant::now();
    let plain = Mix {
        emit_share: 0.0,
        timer_share: 0.0,
        idle: 0,
        sized: false,
    };
    let emits = Mix {
        emit_share: EMIT_SHARE,
        ..plain
    };
    let timers = Mix {
        timer_share: TIMER_SHARE,
        ..plain
    };
    let small = Mix {
        emit_share: EMIT_SHARE,
        timer_share: TIMER_SHARE,
        idle: 0,
        sized: true,
    };
    let large = Mix {
        idle: cfg.idle,
        ..small
    };
    let mut rows = Vec::new();
    let mut flat: Vec<(String, Row, Row)> = Vec::new();
    for &rate in &cfg.rates {
        for (name, mix) in [("plain", plain), ("emits 10%", emits), ("timers 10%", timers)] {
            let started = std::time::Instant::now();
            rows.push(progress(run_mix(&env, name, mix, rate).await, started));
        }
        let started = std::time::Instant::now();
        rows.push(progress(run_hot(&env, rate).await, started));
        let started = std::time::Instant::now();
        let a = progress(run_mix(&env, "mix", small, rate).await, started);
        let started = std::time::Instant::now();
        let b = progress(run_mix(&env, "mix", large, rate).await, started);
        flat.push((rate_label(rate), a.clone(), b.clone()));
        rows.push(a);
        rows.push(b);
    }
    let started = std::time::Instant::now();
    rows.push(progress(run_fanout(&env).await, started));
    let started = std::time::Instant::now();
    rows.push(progress(run_relay_backlog(&env).await, started));
    print_table(&rows, &env);

    // the gate
    let gated = rows.iter().filter(|r| r.gated);
    let hottest = gated
        .filter_map(|r| r.hottest.as_ref().map(|k| (r, k)))
        .max_by(|a, b| a.1.share_of_limit().total_cmp(&b.1.share_of_limit()));
    let share = hottest.map_or(0.0, |(_, k)| k.share_of_limit());
    if let Some((row, key)) = hottest {
        println!(
            "gate: the hottest key of the gated rows is {}/{} in `{}` at {}: {:.1}% of its limit (gate: {:.0}%)",
            key.table,
            key.key,
            row.workload,
            row.rate,
            100.0 * share,
            100.0 * GATE_SHARE
        );
    }
    for row in rows.iter().filter(|r| r.failed.is_some()) {
        println!(
            "failed: `{}`: {}",
            row.workload,
            row.failed.as_deref().unwrap_or_default()
        );
    }
    let mut all_flat = true;
    for (rate, a, b) in &flat {
        let delta = (b.requests_per_event - a.requests_per_event).abs() / a.requests_per_event.max(1e-9);
        let units_a = a.reads_per_event + a.writes_per_event;
        let units_b = b.reads_per_event + b.writes_per_event;
        let units_delta = (units_b - units_a).abs() / units_a.max(1e-9);
        let ok = delta <= FLAT_TOLERANCE;
        all_flat &= ok;
        println!(
            "flat at {rate}: requests/event {:.3} (small) vs {:.3} ({}): {:+.2}%; units/event {:.3} vs {:.3}: {:+.2}%{}",
            a.requests_per_event,
            b.requests_per_event,
            b.workload,
            100.0 * delta,
            units_a,
            units_b,
            100.0 * units_delta,
            if ok { "" } else { "  <- NOT FLAT" }
        );
    }
    println!("simulated in {:.1} s of wall time", wall.elapsed().as_secs_f64());
    println!(
        "scale: hottest key {:.0}% of its limit; per-event requests flat: {}",
        100.0 * share,
        if all_flat { "yes" } else { "no" }
    );
    assert!(
        share <= GATE_SHARE,
        "a partition key is at {:.1}% of its limit (gate {:.0}%)",
        100.0 * share,
        100.0 * GATE_SHARE
    );
    assert!(all_flat, "the requests per event grow with the table");
}
