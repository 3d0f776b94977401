//! Crash injection at every boundary of the worker, the relay and the sweeper.
//!
//! A Lambda instance can die between any two of its calls: the at-least-once machinery
//! (the version CAS, the processed marks, the outbox and spawn intents, publish-before-ack,
//! publish-before-delete of timers, SQS redelivery) must turn every such death into a
//! retry that changes nothing. The seam: a [`CrashingStore`] around the store and a
//! [`CrashingQueue`] around the queue share one [`CrashPlan`], armed with crash points
//! (a boundary and the Nth occurrence of it). Once a point is reached the process is dead:
//! every later call through either wrapper fails until the harness revives it (a new
//! instance), and the harness throws the invocation's result away (a dead worker returns no
//! batch response, so none of its records is deleted: they all come back).
//!
//! The boundaries:
//!
//! 1. before a load (`load` / `load_for_event` fails, nothing read);
//! 2. after the engine ran, before the commit (`commit` fails, nothing written);
//! 3. after the commit, before the inline flush (`commit` applied, then the crash);
//! 4. after a publish, before its ack (`publish_batch` delivered, then the crash, so the
//!    outbox / spawn acks fail): the worker's inline flush and the relay;
//! 5. after the sweeper's publish, before `delete_timer` (the delete fails, not applied);
//! 6. before the batch response (the worker finished, its response is lost).
//!
//! Each scenario runs one machine's event script (the orthogonal `Fork` and `Checkout`, the
//! fan-outs `FanOut` and `Shipment`, the sweeper's `Timed`, the deferring `Deferring` and
//! `Webhook`) twice on fresh stacks with the same knobs (batch size, inline flush on or
//! off, relay passes between polls, and whether the client sends its events back to back
//! or waits for quiescence after each): crash-free (which also counts how often each
//! boundary is reached), then with 1–3 random crash points, each run driven to quiescence
//! (poll until nothing is received; relay and sweeper passes between polls; a manual clock
//! moved by the script so timers come due; a bound on the rounds). The crashed run
//! must end like the crash-free one by `common::scenarios::compare`: the same executions
//! with the same observable state and `processed_events`, the same applied steps in order
//! (each event took effect exactly once, in its sender's order), a version no commit
//! without a step pushed up, the same processed marks for the sent events; and no pending
//! outbox entry, spawn intent or timer left, an empty queue and an empty dead-letter queue.
//!
//! `crashes_change_nothing_in_memory` runs `STM_CRASH_SCENARIOS` scenarios (default 5000)
//! over MemoryStore + MemoryQueue; `crashes_change_nothing_over_dynamodb_and_sqs` runs
//! `STM_CRASH_MOTO_SCENARIOS` (default 50) over DynamoDbStore + SqsQueue on moto (the
//! crash-free reference there runs in memory), and beside them `STM_CRASH_MOTO_WIDE`
//! (default 3) wide fan-outs. `STM_CRASH_SEED` sets the seed of both.
//! `a_commit_whose_flush_died_is_delivered_before_the_next_event` pins the ordering bug
//! the randomized run found (see there).
//!
//! **A wide fan-out** (`WideFanOut` in `tests/machines/wide_fan_out.stm`: 100 children of
//! one step) is committed in one transaction only because the DynamoDB store packs its
//! spawn intents into a few rows (the MemoryStore does not pack); the inline flush and the
//! relay publish the intents 10 a batch and ack a packed row once all of its intents are
//! out. Its pieces are those publishes and those rows:
//! `a_packed_wide_fan_out_survives_crashes_between_its_pieces_over_dynamodb_and_sqs` puts a
//! crash mid-row, at a row's end before its ack, between rows, after the commit, and
//! between the relay's reads and passes, each at a named occurrence, and checks where it
//! landed (the spawn rows left pending) and that no child is lost or doubled and the parent
//! joins; the moto run adds wide fan-outs with random knobs and crash points.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use async_trait::async_trait;
use common::scenarios::{
    compare, definitions_with_examples as definitions, env_u64, scenario, scenario_count, settled_outcome,
    Outcome, Rng, Scenario, Step, Tally,
};
use common::{event, object, START};
use serde_json::json;
use stm_core::{Event, Execution, Map};
use stm_runtime::queue::{PublishFailure, ReceivedMessage};
use stm_runtime::worker::Handled;
use stm_runtime::{
    relay, sweeper, ActionRegistry, Clock, Control, Definitions, Driver, DriverError, ManualClock,
    MemoryQueue, OutgoingMessage, Queue, Record, SqsQueue, Worker, WorkerSettings,
};
use stm_store::{
    Commit, DueTimer, ExecutionPage, ExecutionStore, ListQuery, MemoryStore, OutboxEntry, PendingRows,
    PendingSeq, SpawnEntry, StoreError, Written,
};

/// Far enough in the future to list every armed timer (and a valid DynamoDB number).
/// Poll / relay / sweep rounds one drain may take before the test fails.
const MAX_ROUNDS: usize = 200;

// --- the fault-injection seam ----------------------------------------------------

/// Where a process can die.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Boundary {
    BeforeLoad,
    BeforeCommit,
    AfterCommit,
    AfterPublish,
    AfterSweepPublish,
    BeforeResponse,
    /// The relay between two reads of a pass (and between passes): what it read before is
    /// published and acked, the rest still pending.
    BetweenRelayReads,
}

const BOUNDARIES: [Boundary; 7] = [
    Boundary::BeforeLoad,
    Boundary::BeforeCommit,
    Boundary::AfterCommit,
    Boundary::AfterPublish,
    Boundary::AfterSweepPublish,
    Boundary::BeforeResponse,
    Boundary::BetweenRelayReads,
];

impl Boundary {
    fn index(self) -> usize {
        self as usize
    }

    fn label(self) -> &'static str {
        match self {
            Boundary::BeforeLoad => "before-load",
            Boundary::BeforeCommit => "before-commit",
            Boundary::AfterCommit => "after-commit",
            Boundary::AfterPublish => "after-publish",
            Boundary::AfterSweepPublish => "after-sweep-publish",
            Boundary::BeforeResponse => "before-response",
            Boundary::BetweenRelayReads => "between-relay-reads",
        }
    }
}

/// Which function the harness is running (the plan tells the sweeper's publish apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Actor {
    Worker,
    Relay,
    Sweeper,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CrashPoint {
    boundary: Boundary,
    /// 1-based: the Nth time the run reaches the boundary.
    occurrence: u64,
}

#[derive(Debug)]
struct PlanState {
    armed: Vec<CrashPoint>,
    /// How often each boundary was reached (by a live process), over the whole run.
    seen: [u64; 7],
    dead: bool,
    actor: Actor,
    /// The crashes injected, in order.
    hits: Vec<(CrashPoint, Actor)>,
    /// Per durable commit that wrote spawn intents, the intents each of its spawn rows
    /// holds, in seq order (one each, unless the store packed them).
    spawn_rows: Vec<Vec<usize>>,
}

/// The crash schedule shared by the store and queue wrappers of one run.
#[derive(Clone)]
struct CrashPlan(Arc<Mutex<PlanState>>);

impl CrashPlan {
    fn new(armed: Vec<CrashPoint>) -> Self {
        CrashPlan(Arc::new(Mutex::new(PlanState {
            armed,
            seen: [0; 7],
            dead: false,
            actor: Actor::Worker,
            hits: Vec::new(),
            spawn_rows: Vec::new(),
        })))
    }

    fn lock(&self) -> MutexGuard<'_, PlanState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_actor(&self, actor: Actor) {
        self.lock().actor = actor;
    }

    fn actor(&self) -> Actor {
        self.lock().actor
    }

    fn is_dead(&self) -> bool {
        self.lock().dead
    }

    /// A new instance: calls go through again.
    fn revive(&self) {
        self.lock().dead = false;
    }

    /// Count one occurrence of `boundary` by a live process; `true`: it dies here.
    fn reach(&self, boundary: Boundary) -> bool {
        let mut st = self.lock();
        debug_assert!(!st.dead, "a dead process reached {boundary:?}");
        st.seen[boundary.index()] += 1;
        let occurrence = st.seen[boundary.index()];
        let point = CrashPoint { boundary, occurrence };
        if st.armed.contains(&point) {
            st.dead = true;
            let actor = st.actor;
            st.hits.push((point, actor));
            return true;
        }
        false
    }

    fn seen(&self) -> [u64; 7] {
        self.lock().seen
    }

    fn hits(&self) -> Vec<(CrashPoint, Actor)> {
        self.lock().hits.clone()
    }

    /// Note the spawn rows of a durable commit: `seqs` is each intent's row seq, in order.
    fn record_spawn_rows(&self, seqs: &[i64]) {
        if seqs.is_empty() {
            return;
        }
        let mut rows: Vec<usize> = Vec::new();
        for (i, seq) in seqs.iter().enumerate() {
            match rows.last_mut() {
                Some(n) if i > 0 && seqs[i - 1] == *seq => *n += 1,
                _ => rows.push(1),
            }
        }
        self.lock().spawn_rows.push(rows);
    }

    fn spawn_rows(&self) -> Vec<Vec<usize>> {
        self.lock().spawn_rows.clone()
    }
}

fn dead_store() -> StoreError {
    StoreError::backend("injected crash: this process is dead")
}

fn dead_queue(operation: &str) -> DriverError {
    stm_runtime::queue::QueueError::failed(operation, "injected crash: this process is dead").into()
}

/// The store as a crashing process sees it.
struct CrashingStore {
    inner: Arc<dyn ExecutionStore>,
    plan: CrashPlan,
}

impl CrashingStore {
    fn alive(&self) -> Result<(), StoreError> {
        if self.plan.is_dead() {
            Err(dead_store())
        } else {
            Ok(())
        }
    }

    /// Fail unless alive, and die (failing) if `boundary` is armed here.
    fn gate(&self, boundary: Boundary) -> Result<(), StoreError> {
        self.alive()?;
        if self.plan.reach(boundary) {
            return Err(dead_store());
        }
        Ok(())
    }
}

#[async_trait]
impl ExecutionStore for CrashingStore {
    async fn load(&self, id: &str) -> Result<Option<Execution>, StoreError> {
        self.gate(Boundary::BeforeLoad)?;
        self.inner.load(id).await
    }

    async fn load_for_event(
        &self,
        id: &str,
        event_id: &str,
    ) -> Result<(Option<Execution>, bool), StoreError> {
        self.gate(Boundary::BeforeLoad)?;
        self.inner.load_for_event(id, event_id).await
    }
    fn check_commit(&self, exe: &Execution, commit: &Commit) -> Result<(), StoreError> {
        self.inner.check_commit(exe, commit)
    }
    async fn load_for_events(
        &self,
        id: &str,
        event_ids: &[&str],
    ) -> Result<(Option<Execution>, Vec<bool>), StoreError> {
        self.gate(Boundary::BeforeLoad)?;
        self.inner.load_for_events(id, event_ids).await
    }

    async fn commit(&self, exe: &mut Execution, commit: Commit) -> Result<Written, StoreError> {
        self.gate(Boundary::BeforeCommit)?;
        let seqs = self.inner.commit(exe, commit).await?;
        self.plan.record_spawn_rows(&seqs.spawns);
        // the write is durable; the process dies before it can use the result
        self.gate(Boundary::AfterCommit)?;
        Ok(seqs)
    }

    async fn is_processed(&self, id: &str, event_id: &str) -> Result<bool, StoreError> {
        self.alive()?;
        self.inner.is_processed(id, event_id).await
    }

    async fn list_executions(&self, query: &ListQuery) -> Result<ExecutionPage, StoreError> {
        self.alive()?;
        self.inner.list_executions(query).await
    }

    async fn pending_outbox(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        self.alive()?;
        self.inner.pending_outbox().await
    }

    async fn ack_outbox(&self, seq: i64) -> Result<(), StoreError> {
        self.alive()?;
        self.inner.ack_outbox(seq).await
    }

    async fn pending_spawns(&self) -> Result<Vec<SpawnEntry>, StoreError> {
        self.alive()?;
        self.inner.pending_spawns().await
    }

    async fn ack_spawn(&self, seq: i64) -> Result<(), StoreError> {
        self.alive()?;
        self.inner.ack_spawn(seq).await
    }
    async fn pending_rows_of(&self, id: &str) -> Result<PendingRows, StoreError> {
        self.alive()?;
        self.inner.pending_rows_of(id).await
    }

    async fn oldest_pending_seqs(
        &self,
        limit: usize,
        settled_before: f64,
    ) -> Result<Vec<PendingSeq>, StoreError> {
        self.alive()?;
        self.inner.oldest_pending_seqs(limit, settled_before).await
    }

    async fn pending_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<PendingRows, StoreError> {
        // only the relay's passes read rows by seq
        self.gate(Boundary::BetweenRelayReads)?;
        self.inner.pending_rows(spawns, outbox).await
    }

    async fn ack_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<(), StoreError> {
        self.alive()?;
        self.inner.ack_rows(spawns, outbox).await
    }

    async fn due_timers(&self, now: f64) -> Result<Vec<DueTimer>, StoreError> {
        self.alive()?;
        self.inner.due_timers(now).await
    }

    async fn delete_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<(), StoreError> {
        // only the sweeper deletes timers, right after it published the Timeout
        self.gate(Boundary::AfterSweepPublish)?;
        self.inner.delete_timer(id, path, fire_at).await
    }

    async fn armed_timer(&self, id: &str, path: &str) -> Result<Option<f64>, StoreError> {
        self.alive()?;
        self.inner.armed_timer(id, path).await
    }

    async fn claim_timer(
        &self,
        id: &str,
        path: &str,
        fire_at: f64,
    ) -> Result<stm_store::TimerClaim, StoreError> {
        // the worker's, before its commit: a dead process claims nothing
        self.alive()?;
        self.inner.claim_timer(id, path, fire_at).await
    }

    async fn read_trace(&self, id: &str) -> Result<Vec<Map>, StoreError> {
        self.alive()?;
        self.inner.read_trace(id).await
    }

    async fn append_trace(&self, id: &str, entry: Map) -> Result<(), StoreError> {
        self.alive()?;
        self.inner.append_trace(id, entry).await
    }

    async fn purge(&self, id: &str, expected_version: i64) -> Result<bool, StoreError> {
        self.alive()?;
        self.inner.purge(id, expected_version).await
    }

    async fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.alive()?;
        self.inner.ids_with_prefix(prefix).await
    }
}

/// The queue as a crashing process sees it.
struct CrashingQueue {
    inner: Arc<dyn Queue>,
    plan: CrashPlan,
}

#[async_trait]
impl Queue for CrashingQueue {
    async fn publish_batch(&self, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        if self.plan.is_dead() {
            return (0..messages.len())
                .map(|index| PublishFailure {
                    index,
                    code: "InjectedCrash".into(),
                    message: "this process is dead".into(),
                })
                .collect();
        }
        let failures = self.inner.publish_batch(messages).await;
        // the sweeper's publish is followed by its delete_timer (boundary 5), everyone
        // else's by the outbox / spawn acks (boundary 4)
        if self.plan.actor() != Actor::Sweeper {
            self.plan.reach(Boundary::AfterPublish);
        }
        failures
    }

    async fn receive(
        &self,
        max: usize,
        visibility_seconds: i32,
        wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, DriverError> {
        if self.plan.is_dead() {
            return Err(dead_queue("ReceiveMessage"));
        }
        self.inner.receive(max, visibility_seconds, wait_seconds).await
    }

    async fn delete(&self, receipt_handle: &str) -> Result<(), DriverError> {
        if self.plan.is_dead() {
            return Err(dead_queue("DeleteMessage"));
        }
        self.inner.delete(receipt_handle).await
    }

    async fn change_visibility(&self, receipt_handle: &str, seconds: i32) -> Result<(), DriverError> {
        if self.plan.is_dead() {
            return Err(dead_queue("ChangeMessageVisibility"));
        }
        self.inner.change_visibility(receipt_handle, seconds).await
    }
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

// --- the harness -----------------------------------------------------------------

/// How the test inspects the queue under test: what is left in it and in its DLQ.
enum Backend {
    Memory(Arc<MemoryQueue>),
    Sqs { main: SqsQueue, dlq: SqsQueue },
}

impl Backend {
    async fn assert_empty(&self, what: &str) {
        match self {
            Backend::Memory(q) => {
                assert!(q.is_empty(), "{what}: messages left: {:?}", q.snapshot());
                assert!(
                    q.dead_letters().is_empty(),
                    "{what}: dead-lettered: {:?}",
                    q.dead_letters()
                );
            }
            Backend::Sqs { main, dlq } => {
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
    /// Redeliveries the worker recognised (a processed event, an existing child).
    dropped_redeliveries: usize,
    /// The most poll / relay / sweep rounds one drain took.
    longest_drain: usize,
}

struct Harness {
    /// The store and queue themselves (the test's view, and the event source's: the
    /// Lambda event-source mapping is not part of the crashing process).
    store: Arc<dyn ExecutionStore>,
    queue: Arc<dyn Queue>,
    backend: Backend,
    /// The crashing process's view.
    crashing_store: Arc<CrashingStore>,
    crashing_queue: Arc<CrashingQueue>,
    plan: CrashPlan,
    worker: Worker,
    /// The client side (create, send) never crashes: it is not under test here.
    control: Control,
    clock: Arc<ManualClock>,
    knobs: Knobs,
    rng: Rng,
    stats: RunStats,
}

impl Harness {
    fn new(
        store: Arc<dyn ExecutionStore>,
        queue: Arc<dyn Queue>,
        backend: Backend,
        defs: &Definitions,
        plan: CrashPlan,
        knobs: Knobs,
        rng: Rng,
    ) -> Self {
        let clock = Arc::new(ManualClock::new(START));
        let crashing_store = Arc::new(CrashingStore {
            inner: store.clone(),
            plan: plan.clone(),
        });
        let crashing_queue = Arc::new(CrashingQueue {
            inner: queue.clone(),
            plan: plan.clone(),
        });
        let driver = Driver::new(
            crashing_store.clone(),
            defs.clone(),
            ActionRegistry::with_builtins(),
        )
        .with_clock(clock.clone())
        .with_trace(true);
        let worker = Worker::new(
            driver,
            crashing_queue.clone(),
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
        let control_driver = Driver::new(store.clone(), defs.clone(), ActionRegistry::with_builtins())
            .with_clock(clock.clone())
            .with_trace(true);
        let control = Control::new(control_driver, queue.clone());
        Harness {
            store,
            queue,
            backend,
            crashing_store,
            crashing_queue,
            plan,
            worker,
            control,
            clock,
            knobs,
            rng,
            stats: RunStats::default(),
        }
    }

    fn memory(defs: &Definitions, plan: CrashPlan, knobs: Knobs, rng: Rng) -> Self {
        // a large max_receive_count: a crash must never dead-letter a message
        let queue = Arc::new(MemoryQueue::new(1_000));
        Harness::new(
            Arc::new(MemoryStore::new()),
            queue.clone(),
            Backend::Memory(queue),
            defs,
            plan,
            knobs,
            rng,
        )
    }

    /// One invocation of the event source: receive a batch, run the worker, delete the
    /// records it did not report failed, unless the instance died (or its response was
    /// lost): then nothing is deleted and the whole batch comes back (visibility 0).
    async fn poll(&mut self) -> usize {
        let messages = self.queue.receive(self.knobs.batch, 0, 0).await.expect("receive");
        if messages.is_empty() {
            return 0;
        }
        let records: Vec<Record> = messages.iter().map(Record::from_received).collect();
        self.plan.set_actor(Actor::Worker);
        let outcome = self.worker.handle_batch(&records).await;
        self.stats.deliveries += records.len();
        if self.plan.is_dead() || self.plan.reach(Boundary::BeforeResponse) {
            self.plan.revive();
            // nothing deleted; the batch's visibility timeout runs out (at once, here). Said
            // explicitly rather than left to the receive's visibility of 0: moto, finding
            // several expired messages of one FIFO group, hands out the last one first
            for message in &messages {
                self.queue
                    .change_visibility(&message.receipt_handle, 0)
                    .await
                    .expect("visibility timeout");
            }
            return messages.len();
        }
        for (message, (_, result)) in messages.iter().zip(&outcome.records) {
            match result {
                Ok(Handled::Duplicate | Handled::Spawned { created: false, .. }) => {
                    self.stats.dropped_redeliveries += 1
                }
                Ok(_) => {}
                Err(why) => panic!(
                    "record {} failed in a live process: {why:?} ({})",
                    message.message_id, message.body
                ),
            }
            self.queue.delete(&message.receipt_handle).await.expect("delete");
        }
        messages.len()
    }

    /// One scheduled relay run; a crash counts as movement (the next round retries).
    async fn relay(&mut self) -> usize {
        self.plan.set_actor(Actor::Relay);
        // small passes and reads, so that crashes land between them
        let bounds = relay::RelayBounds {
            pass_rows: 3,
            read_rows: 2,
        };
        let result = relay::relay_pending_until(
            self.crashing_store.as_ref(),
            self.crashing_queue.as_ref(),
            None,
            f64::INFINITY,
            bounds,
        )
        .await;
        if self.plan.is_dead() {
            self.plan.revive();
            return 1;
        }
        let summary = result.expect("relay in a live process");
        assert_eq!(
            summary.remaining, 0,
            "relay left entries in a live process: {summary:?}"
        );
        summary.forwarded
    }

    /// One scheduled sweep at the clock's now; a crash counts as movement.
    async fn sweep(&mut self) -> usize {
        self.plan.set_actor(Actor::Sweeper);
        let now = self.clock.now();
        let result = sweeper::sweep(self.crashing_store.as_ref(), self.crashing_queue.as_ref(), now).await;
        if self.plan.is_dead() {
            self.plan.revive();
            return 1;
        }
        let summary = result.expect("sweep in a live process");
        assert_eq!(summary.failed, 0, "sweep failed in a live process: {summary:?}");
        summary.fired
    }

    /// Poll, relay and sweep until a full round moves nothing.
    async fn drain(&mut self, what: &str) {
        for round in 1..=MAX_ROUNDS {
            self.stats.longest_drain = self.stats.longest_drain.max(round);
            if self.poll().await > 0 {
                if self.rng.chance(self.knobs.relay_between_polls) {
                    self.relay().await;
                }
                continue;
            }
            let moved = self.relay().await + self.sweep().await;
            if moved == 0 {
                return;
            }
        }
        panic!("{what}: no quiescence after {MAX_ROUNDS} rounds");
    }

    async fn run(&mut self, sc: &Scenario, id: &str, what: &str) -> Outcome {
        self.control
            .create(sc.definition, sc.seed.clone().map(object), Some(id))
            .await
            .expect("create");
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
                    self.control.send(id, ev).await.expect("send");
                    sent.push((id.to_string(), ev.clone()));
                }
                Step::ToChildren(events) => {
                    let root = self.store.load(id).await.expect("load").expect("root");
                    let children: Vec<String> = root.children.keys().cloned().collect();
                    assert_eq!(children.len(), events.len(), "{what}: children {children:?}");
                    for (child, ev) in children.iter().zip(events) {
                        self.control.send(child, ev).await.expect("send to a child");
                        sent.push((child.clone(), ev.clone()));
                    }
                }
                Step::Advance(seconds) => self.clock.advance(*seconds),
            }
            if !(matches!(step, Step::Send(_)) && burst(sc.steps.get(i + 1))) {
                self.drain(what).await;
            }
        }
        self.outcome(id, &sent, what).await
    }

    /// The final state, and the checks that nothing is left behind.
    async fn outcome(&self, root: &str, sent: &[(String, Event)], what: &str) -> Outcome {
        self.backend.assert_empty(what).await;
        settled_outcome(self.store.as_ref(), root, sent, what).await
    }
}

#[derive(Default)]
struct Totals {
    scenarios: usize,
    by_machine: BTreeMap<&'static str, usize>,
    armed: usize,
    crashes: BTreeMap<Boundary, usize>,
    after_publish_by: BTreeMap<Actor, usize>,
    deliveries: usize,
    dropped_redeliveries: usize,
    extra_deliveries: i64,
    longest_drain: usize,
    tally: Tally,
}

impl Totals {
    /// Count in another set of runs (run beside these).
    fn absorb(&mut self, other: Totals) {
        self.scenarios += other.scenarios;
        for (machine, n) in other.by_machine {
            *self.by_machine.entry(machine).or_default() += n;
        }
        self.armed += other.armed;
        for (boundary, n) in other.crashes {
            *self.crashes.entry(boundary).or_default() += n;
        }
        for (actor, n) in other.after_publish_by {
            *self.after_publish_by.entry(actor).or_default() += n;
        }
        self.deliveries += other.deliveries;
        self.dropped_redeliveries += other.dropped_redeliveries;
        self.extra_deliveries += other.extra_deliveries;
        self.longest_drain = self.longest_drain.max(other.longest_drain);
        self.tally.processed += other.tally.processed;
        self.tally.commits += other.tally.commits;
        self.tally.lost += other.tally.lost;
        self.tally.duplicates += other.tally.duplicates;
    }
}

/// 1–3 crash points at boundaries the crash-free run reached, at an occurrence it reached
/// (a later crash shifts the counts, so a point may also land on a retry, or miss). The
/// first goes to the reachable boundary with the fewest crashes so far, so that the rare
/// ones (the sweeper's, the relay's) are covered by a small sample too; the rest are random.
fn crash_points(rng: &mut Rng, reached: &[u64; 7], totals: &Totals) -> Vec<CrashPoint> {
    let candidates: Vec<Boundary> = BOUNDARIES
        .iter()
        .copied()
        .filter(|b| reached[b.index()] > 0)
        .collect();
    let least = candidates
        .iter()
        .copied()
        .min_by_key(|b| totals.crashes.get(b).copied().unwrap_or(0));
    let n = 1 + rng.below(3) as usize;
    (0..n)
        .map(|i| {
            let boundary = match least {
                Some(b) if i == 0 => b,
                _ => candidates[rng.below(candidates.len() as u64) as usize],
            };
            // a little past the clean count too: retries reach a boundary more often
            let occurrence = 1 + rng.below(reached[boundary.index()] + 1);
            CrashPoint { boundary, occurrence }
        })
        .collect()
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

fn add_run(totals: &mut Totals, sc: &Scenario, plan: &CrashPlan, stats: &RunStats, clean: &RunStats) {
    totals.scenarios += 1;
    *totals.by_machine.entry(sc.definition).or_default() += 1;
    totals.armed += plan.lock().armed.len();
    for (point, actor) in plan.hits() {
        *totals.crashes.entry(point.boundary).or_default() += 1;
        if point.boundary == Boundary::AfterPublish {
            *totals.after_publish_by.entry(actor).or_default() += 1;
        }
    }
    totals.deliveries += stats.deliveries;
    totals.dropped_redeliveries += stats.dropped_redeliveries;
    totals.extra_deliveries += stats.deliveries as i64 - clean.deliveries as i64;
    totals.longest_drain = totals.longest_drain.max(stats.longest_drain);
}

fn summarize(test: &str, seed: u64, totals: &Totals, elapsed: std::time::Duration) {
    let crashes: Vec<String> = BOUNDARIES
        .iter()
        .map(|b| format!("{} {}", b.label(), totals.crashes.get(b).copied().unwrap_or(0)))
        .collect();
    let injected: usize = totals.crashes.values().sum();
    eprintln!(
        "{test}: seed {seed:#x}, {} scenarios {:?}; crash points armed {}, crashes injected {injected} \
         ({}; after-publish in worker {} / relay {}); events processed {} (processed_events) in {} \
         commits (versions); worker deliveries {} ({} more than crash-free, {} redeliveries dropped \
         as duplicates); longest drain {} rounds (bound {MAX_ROUNDS}); lost {}, duplicates {}; {:.1} s",
        totals.scenarios,
        totals.by_machine,
        totals.armed,
        crashes.join(", "),
        totals.after_publish_by.get(&Actor::Worker).copied().unwrap_or(0),
        totals.after_publish_by.get(&Actor::Relay).copied().unwrap_or(0),
        totals.tally.processed,
        totals.tally.commits,
        totals.deliveries,
        totals.extra_deliveries,
        totals.dropped_redeliveries,
        totals.longest_drain,
        totals.tally.lost,
        totals.tally.duplicates,
        elapsed.as_secs_f64(),
    );
}

/// No event lost or applied twice; with `coverage`, every boundary (and the after-publish
/// one in both the worker and the relay) had a crash.
fn assert_totals(totals: &Totals, coverage: bool) {
    assert_eq!(totals.tally.lost, 0, "events lost");
    assert_eq!(totals.tally.duplicates, 0, "events applied twice");
    if !coverage {
        return;
    }
    for b in BOUNDARIES {
        assert!(
            totals.crashes.get(&b).copied().unwrap_or(0) > 0,
            "no crash was injected at {}",
            b.label()
        );
    }
    for actor in [Actor::Worker, Actor::Relay] {
        assert!(
            totals.after_publish_by.get(&actor).copied().unwrap_or(0) > 0,
            "no after-publish crash in the {actor:?}"
        );
    }
}

/// The crash-free reference run of a scenario, over memory: its outcome, its stats and how
/// often it reached each boundary.
async fn reference(
    defs: &Definitions,
    sc: &Scenario,
    id: &str,
    knobs: Knobs,
    rng: Rng,
) -> (Outcome, RunStats, [u64; 7]) {
    let plan = CrashPlan::new(Vec::new());
    let mut clean = Harness::memory(defs, plan.clone(), knobs, rng);
    let expected = clean.run(sc, id, &format!("{id} (crash-free)")).await;
    (expected, clean.stats, plan.seen())
}

#[tokio::test]
async fn crashes_change_nothing_in_memory() {
    let scenarios = scenario_count("STM_CRASH_SCENARIOS", 5_000);
    let seed = env_u64("STM_CRASH_SEED", 0xC2A5_4ED0_0D1E);
    let defs = definitions();
    let started = Instant::now();
    let mut master = Rng::new(seed);
    let mut totals = Totals::default();
    for n in 0..scenarios {
        let sc = scenario(&mut master);
        let knobs = knobs(&mut master, &sc);
        let run_rng = Rng::new(master.next());
        let id = format!("s{n}-{}", sc.definition.to_lowercase());
        let (expected, clean_stats, reached) = reference(&defs, &sc, &id, knobs, run_rng.clone()).await;

        let points = crash_points(&mut master, &reached, &totals);
        let what = format!(
            "scenario {n} ({}, {knobs:?}, crash points {points:?})",
            sc.definition
        );
        let plan = CrashPlan::new(points);
        let mut crashed = Harness::memory(&defs, plan.clone(), knobs, run_rng);
        let got = crashed.run(&sc, &id, &what).await;
        compare(
            &expected,
            &got,
            &mut totals.tally,
            ("crash-free", "crashed"),
            &what,
        );
        add_run(&mut totals, &sc, &plan, &crashed.stats, &clean_stats);
    }
    summarize("crash_injection (memory)", seed, &totals, started.elapsed());
    assert_totals(&totals, scenarios >= 200);
}

/// The regression the randomized run found: a `Fork` whose client sends `Go`, `PaymentOk`
/// and `Packed` back to back, one batch of 10, inline flush on. The worker dies right after
/// a commit of the parent, before that commit's inline flush; the batch comes back. Before
/// the worker delivered the pending entries on a redelivery, the next event's inline flush
/// overtook them:
///
/// * crash after commit 2 (`Go`: the regions' spawn intents stay pending): the broadcast
///   `PaymentOk` and `Packed` reached the regions' groups before their spawn intents, found
///   no execution and were acknowledged as no-ops. The regions were created later by the
///   relay and waited forever: the parent stayed `RUNNING` in `Work` (events lost);
/// * crash after commit 3 (the broadcast of `PaymentOk`): `Packed` reached the `Billing`
///   region before `PaymentOk` (the traced steps show `Start, Packed, PaymentOk`), the
///   order the parent emitted them in reversed.
#[tokio::test]
async fn a_commit_whose_flush_died_is_delivered_before_the_next_event() {
    let defs = definitions();
    let sc = Scenario {
        definition: "Fork",
        seed: None,
        steps: vec![
            Step::Send(event("Go", json!({}))),
            Step::Send(event("PaymentOk", json!({"receipt": "r-1"}))),
            Step::Send(event("Packed", json!({}))),
        ],
        burst_ok: true,
    };
    let knobs = Knobs {
        batch: 10,
        inline_flush: true,
        relay_between_polls: 0,
        burst: true,
    };
    let mut totals = Totals::default();
    for occurrence in [2, 3] {
        let id = format!("regression-after-commit-{occurrence}");
        let (expected, _, _) = reference(&defs, &sc, &id, knobs, Rng::new(1)).await;
        let point = CrashPoint {
            boundary: Boundary::AfterCommit,
            occurrence,
        };
        let plan = CrashPlan::new(vec![point]);
        let mut crashed = Harness::memory(&defs, plan.clone(), knobs, Rng::new(1));
        let what = format!("Fork, burst, crash {point:?}");
        let got = crashed.run(&sc, &id, &what).await;
        assert_eq!(plan.hits().len(), 1, "{what}: the crash happened");
        compare(
            &expected,
            &got,
            &mut totals.tally,
            ("crash-free", "crashed"),
            &what,
        );
        assert_eq!(got.executions[&id].active_path.as_deref(), Some("Done"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_change_nothing_over_dynamodb_and_sqs() {
    let scenarios = scenario_count("STM_CRASH_MOTO_SCENARIOS", 50);
    let seed = env_u64("STM_CRASH_SEED", 0xC2A5_4ED0_0D1E) ^ 0x5EED_0FD1_5C00;
    let defs = definitions();
    // visibility 0: a batch a dead instance held comes back at once, as after its timeout
    let parts = common::moto_parts("crash", 0, 1_000).await;
    let store: Arc<dyn ExecutionStore> = parts.store.clone();
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()));
    let started = Instant::now();
    // the wide fan-outs run beside the others (each on its own tables and queue): alone,
    // one takes as long as a dozen of the others
    let wide = tokio::spawn(random_wide_runs(
        seed ^ 0x0057_1DE0_FA40,
        env_u64("STM_CRASH_MOTO_WIDE", 3),
    ));
    let mut master = Rng::new(seed);
    let mut totals = Totals::default();
    for n in 0..scenarios {
        let sc = scenario(&mut master);
        let knobs = knobs(&mut master, &sc);
        let run_rng = Rng::new(master.next());
        let id = format!("s{n}-{}", sc.definition.to_lowercase());
        let (expected, clean_stats, reached) = reference(&defs, &sc, &id, knobs, run_rng.clone()).await;

        let points = crash_points(&mut master, &reached, &totals);
        let what = format!(
            "moto scenario {n} ({}, {knobs:?}, crash points {points:?})",
            sc.definition
        );
        let plan = CrashPlan::new(points);
        let backend = Backend::Sqs {
            main: SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()),
            dlq: SqsQueue::new(parts.client.clone(), parts.urls.dead_letter_url.clone()),
        };
        let mut crashed = Harness::new(
            store.clone(),
            queue.clone(),
            backend,
            &defs,
            plan.clone(),
            knobs,
            run_rng,
        );
        let got = crashed.run(&sc, &id, &what).await;
        compare(
            &expected,
            &got,
            &mut totals.tally,
            ("crash-free", "crashed"),
            &what,
        );
        add_run(&mut totals, &sc, &plan, &crashed.stats, &clean_stats);
    }
    let wide = wide
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    totals.absorb(wide);
    summarize(
        "crash_injection (dynamodb+sqs on moto)",
        seed,
        &totals,
        started.elapsed(),
    );
    assert_totals(&totals, scenarios >= 30);
    // every recovery path (redeliveries, duplicates, relay and sweep reruns) ran under the
    // functions' roles
    stm_testkit::assert_no_access_denied();
}

/// The same overtaking without a crash: the inline flush of `Go`'s commit cannot publish
/// (a throttled `SendMessageBatch`), and `PaymentOk` and `Packed` are already queued
/// behind it. The record is reported failed although committed, so its redelivery (a
/// duplicate) publishes the pending spawn intents before the next event goes: the
/// regions exist when the broadcasts come, and the parent joins.
#[tokio::test]
async fn a_commit_whose_flush_could_not_publish_is_delivered_before_the_next_event() {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(5));
    let stack = common::Stack::new(store.clone(), queue.clone());
    stack
        .control
        .create("Fork", None, Some("f"))
        .await
        .expect("create");
    stack.drain().await;
    for ev in [
        common::event("Go", json!({})),
        common::event("PaymentOk", json!({"receipt": "r"})),
        common::event("Packed", json!({})),
    ] {
        stack.control.send("f", &ev).await.expect("send");
    }
    // Go's inline flush: both spawn intents fail to publish
    queue.fail_next_publishes(2);
    stack.drain().await;
    let parent = stack.load("f").await;
    assert_eq!(parent.active_path.as_deref(), Some("Done"), "{parent:?}");
    assert!(queue.dead_letters().is_empty(), "nothing dead-lettered");
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
}

// --- a wide fan-out: crashes between its pieces ------------------------------------

/// How many children the wide fan-out spawns: with the parent's other items, past a
/// transaction's 100, so the DynamoDB store packs the spawn intents of its one commit.
const WIDE_WIDTH: usize = 100;

/// The bytes of each child's `pad` (`tests/machines/wide_fan_out.stm`): large enough that
/// the packed intents take several rows (the store cuts a row at ~350 KB, counting an
/// intent's context twice), small enough for the parent's item, which holds it once.
const WIDE_PAD: usize = 6_000;

/// The intents one `SendMessageBatch` holds (SQS's 10; these messages are far below its
/// byte limit), so the Nth publish of a flush ends at intent `10 * N`.
const PUBLISH_BATCH: usize = 10;

/// The scenario machines, the examples and the wide fan-out.
fn wide_definitions() -> Definitions {
    let mut defs = definitions();
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/machines/wide_fan_out.stm");
    for defn in stm_runtime::config::load_file(&file).expect("wide_fan_out.stm loads and validates") {
        defs.register(defn);
    }
    defs
}

fn wide_scenario() -> Scenario {
    let recipients: Vec<String> = (0..WIDE_WIDTH).map(|i| format!("r{i}")).collect();
    Scenario {
        definition: "WideFanOut",
        seed: Some(json!({ "recipients": recipients, "pad": "p".repeat(WIDE_PAD) })),
        steps: vec![],
        burst_ok: true,
    }
}

/// Batches of 10 and no relay pass between polls: the relay runs only once the queue is
/// empty, so each boundary's occurrences come in the same order on every run and a crash
/// point names the same moment of the fan-out every time.
fn wide_knobs(inline_flush: bool) -> Knobs {
    Knobs {
        batch: 10,
        inline_flush,
        relay_between_polls: 0,
        burst: false,
    }
}

/// The run lengths of `entries`' seqs: the intents of each spawn row, in order.
fn rows_of(entries: &[SpawnEntry]) -> Vec<usize> {
    let mut rows: Vec<(i64, usize)> = Vec::new();
    for entry in entries {
        match rows.last_mut() {
            Some((seq, n)) if *seq == entry.seq => *n += 1,
            _ => rows.push((entry.seq, 1)),
        }
    }
    rows.into_iter().map(|(_, n)| n).collect()
}

/// A harness that crashes as `plan` says, over fresh tables and a fresh queue on moto
/// (moto slows down as its tables fill, and the wide runs go side by side).
async fn wide_harness(plan: CrashPlan, defs: &Definitions, knobs: Knobs, rng: Rng) -> Harness {
    let parts = common::moto_parts("crash-wide", 0, 1_000).await;
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()));
    let backend = Backend::Sqs {
        main: SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()),
        dlq: SqsQueue::new(parts.client.clone(), parts.urls.dead_letter_url.clone()),
    };
    Harness::new(parts.store, queue, backend, defs, plan, knobs, rng)
}

impl Harness {
    /// Create the wide fan-out `id` and handle its `Start` (one poll: the commit holding
    /// every spawn intent, then the inline flush as far as it gets); the spawn rows then
    /// pending, read back from the store, in seq order.
    async fn start_wide(&mut self, id: &str, what: &str) -> Vec<usize> {
        let sc = wide_scenario();
        self.control
            .create(sc.definition, sc.seed.map(object), Some(id))
            .await
            .expect("create");
        assert_eq!(self.poll().await, 1, "{what}: the parent's Start alone");
        let pending = self.store.pending_rows_of(id).await.expect("pending rows");
        rows_of(&pending.spawns)
    }
}

/// The spawn rows the DynamoDB store cuts the wide fan-out's commit into, read back from
/// the store before anything is published (inline flush off, no relay run yet); asserted
/// packed. Ids of the same length pack the same (a child's id is part of its intent's size).
async fn wide_layout(defs: &Definitions) -> Vec<usize> {
    let mut probe = wide_harness(CrashPlan::new(Vec::new()), defs, wide_knobs(false), Rng::new(1)).await;
    let rows = probe.start_wide("wide-p", "layout probe").await;
    assert_eq!(
        rows.iter().sum::<usize>(),
        WIDE_WIDTH,
        "every intent pending: {rows:?}"
    );
    // packed: a few rows (enough for the relay's reads of 2 and passes of 3 to fall between
    // them), each spanning several publishes
    assert!(
        rows.len() >= 4 && rows.len() <= WIDE_WIDTH / PUBLISH_BATCH,
        "the {WIDE_WIDTH} intents are not packed into a few rows: {rows:?}"
    );
    assert!(
        rows[..rows.len() - 1].iter().all(|n| *n > PUBLISH_BATCH),
        "a row spans several publishes: {rows:?}"
    );
    rows
}

/// One crash schedule for the wide fan-out.
struct WideCase {
    what: &'static str,
    inline_flush: bool,
    point: CrashPoint,
    /// Who dies there.
    actor: Actor,
    /// How many of the parent's spawn rows are acked (delivered) right after the crash:
    /// after the poll that handled the parent's `Start` (its commit, and its inline flush
    /// as far as it got) or, without the inline flush, after the relay's first run.
    acked_at_crash: usize,
}

/// Run `case` as `id` on fresh tables and a fresh queue, drive it to quiescence and check
/// it (see the test); returns what it tallied against a crash-free run in memory (the
/// MemoryStore does not pack: the same fan-out, one intent a row).
async fn wide_case(defs: Definitions, layout: Vec<usize>, id: String, case: WideCase) -> Tally {
    let started = Instant::now();
    let sc = wide_scenario();
    let knobs = wide_knobs(case.inline_flush);
    let (expected, _, _) = reference(&defs, &sc, &id, knobs, Rng::new(1)).await;
    let plan = CrashPlan::new(vec![case.point]);
    let mut crashed = wide_harness(plan.clone(), &defs, knobs, Rng::new(1)).await;
    let what = format!("{id}: {} ({:?})", case.what, case.point);

    let mut pending = crashed.start_wide(&id, &what).await;
    let rows = plan
        .spawn_rows()
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("{what}: the parent's commit wrote no spawn row"));
    assert_eq!(rows, layout, "{what}: the parent's commit packed as the probe's");
    if case.actor == Actor::Relay {
        // no inline flush: every row waits for the relay, whose first run dies
        assert_eq!(pending, rows, "{what}: the spawn rows pending before the relay");
        crashed.relay().await;
        let left = crashed.store.pending_rows_of(&id).await.expect("pending rows");
        pending = rows_of(&left.spawns);
    }
    // the crash landed where the case says, once, and left the rows it should: a packed
    // row is pending whole, unless all its intents were published and it was acked
    assert_eq!(plan.hits(), vec![(case.point, case.actor)], "{what}: the crash");
    assert_eq!(
        pending,
        rows[case.acked_at_crash..],
        "{what}: the spawn rows pending after the crash (the commit's: {rows:?})"
    );
    crashed.drain(&what).await;
    let got = crashed.outcome(&id, &[], &what).await;
    assert_wide_joined(crashed.store.as_ref(), &id, &got, &what).await;
    // and everything else as the crash-free run: the records, each step once, in order
    let mut tally = Tally::default();
    compare(&expected, &got, &mut tally, ("crash-free", "crashed"), &what);
    eprintln!(
        "{what}: {:.1} s, {} deliveries, {} redeliveries dropped as duplicates",
        started.elapsed().as_secs_f64(),
        crashed.stats.deliveries,
        crashed.stats.dropped_redeliveries
    );
    tally
}

/// The wide fan-out `id` ended as it must: every child created once (by id prefix) and
/// its `Start` run once, all finished with success, and the parent joined them in its
/// success final state.
async fn assert_wide_joined(store: &dyn ExecutionStore, id: &str, got: &Outcome, what: &str) {
    let parent = &got.executions[id];
    assert_eq!(
        (parent.status, parent.active_path.as_deref()),
        (stm_core::execution::Status::Done, Some("AllSent")),
        "{what}: the parent"
    );
    assert!(
        parent.children.len() == WIDE_WIDTH
            && parent
                .children
                .values()
                .all(|c| c.finished && c.outcome.as_deref() == Some("success")),
        "{what}: the parent's children: {:?}",
        parent.children
    );
    let created = store
        .ids_with_prefix(&format!("{id}:"))
        .await
        .expect("children by prefix");
    let mut children: Vec<String> = parent.children.keys().cloned().collect();
    children.sort();
    assert_eq!(
        created, children,
        "{what}: the children created are the parent's, each once"
    );
    for child in &created {
        let steps = &got.traces[child];
        assert_eq!(steps.len(), 1, "{what}: {child} ran its Start once: {steps:?}");
    }
}

/// A wide fan-out on DynamoDB and SQS (moto), with a crash between each kind of its
/// pieces. Its one commit holds 100 spawn intents, which the store packs into a few rows
/// (asserted: read back pending before any publish, and from the seqs each run's commit
/// gave); the inline flush and the relay publish them 10 a `SendMessageBatch` and ack a
/// row only once all its intents are out. The crash points, named by occurrence (the same
/// moment on every run: see [`wide_knobs`]), land:
///
/// * after the commit, before the inline flush (every row pending; the redelivered `Start`
///   is a duplicate that publishes them all);
/// * in the worker's inline flush: after the first publish of the first row (mid-row: ten
///   children's `Start`s sent, the row not acked); after the publish that completes the
///   first row, before its ack; after the next publish (the first row acked, the second
///   partly sent: between rows);
/// * in the relay (inline flush off; it reads 2 rows at a time, in passes of 3): after its
///   first publish (mid-row); before the second read of its first pass (two rows acked,
///   the rest pending: between reads); before the first read of its second pass (three
///   rows acked: between passes).
///
/// Each run must end with every child created exactly once (by id prefix, and each ran
/// its `Start` once), the parent `DONE` in `AllSent` having joined all of them, nothing
/// pending, an empty queue and dead-letter queue, and everything else as in a crash-free
/// run (`common::scenarios::compare`): a re-published intent is dropped by SQS's
/// deduplication or by the idempotent create, never a second child or a second `Finished`
/// applied. The cases run side by side, each on its own tables and queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packed_wide_fan_out_survives_crashes_between_its_pieces_over_dynamodb_and_sqs() {
    let started = Instant::now();
    let defs = wide_definitions();
    let layout = wide_layout(&defs).await;
    // the publish of the inline flush that holds the first row's last intent
    let first_row_done = layout[0].div_ceil(PUBLISH_BATCH) as u64;
    let at = |boundary, occurrence| CrashPoint { boundary, occurrence };
    let case = |what, inline_flush, point, actor, acked_at_crash| WideCase {
        what,
        inline_flush,
        point,
        actor,
        acked_at_crash,
    };
    let cases = vec![
        case(
            "after the commit, before the inline flush",
            true,
            at(Boundary::AfterCommit, 1),
            Actor::Worker,
            0,
        ),
        case(
            "worker, mid-row: after the first publish of the first row, before its ack",
            true,
            at(Boundary::AfterPublish, 1),
            Actor::Worker,
            0,
        ),
        case(
            "worker: after the publish that completes the first row, before its ack",
            true,
            at(Boundary::AfterPublish, first_row_done),
            Actor::Worker,
            0,
        ),
        case(
            "worker, between rows: the first row acked, the second partly published",
            true,
            at(Boundary::AfterPublish, first_row_done + 1),
            Actor::Worker,
            1,
        ),
        case(
            "relay, mid-row: after its first publish, before the row's ack",
            false,
            at(Boundary::AfterPublish, 1),
            Actor::Relay,
            0,
        ),
        case(
            "relay, between reads: two rows acked, the rest pending",
            false,
            at(Boundary::BetweenRelayReads, 2),
            Actor::Relay,
            2,
        ),
        case(
            "relay, between passes: the first pass's three rows acked",
            false,
            at(Boundary::BetweenRelayReads, 3),
            Actor::Relay,
            3,
        ),
    ];
    let n = cases.len();
    let mut runs = tokio::task::JoinSet::new();
    for (i, case) in cases.into_iter().enumerate() {
        // ids of one length: the same packing
        runs.spawn(wide_case(defs.clone(), layout.clone(), format!("wide-{i}"), case));
    }
    let mut tally = Tally::default();
    while let Some(run) = runs.join_next().await {
        let got = run.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        tally.processed += got.processed;
        tally.commits += got.commits;
        tally.lost += got.lost;
        tally.duplicates += got.duplicates;
    }
    assert_eq!((tally.lost, tally.duplicates), (0, 0), "{tally:?}");
    eprintln!(
        "wide fan-out on moto: {WIDE_WIDTH} children in spawn rows {layout:?}, {n} crash cases; {:.1} s",
        started.elapsed().as_secs_f64()
    );
    stm_testkit::assert_no_access_denied();
}

/// `count` wide fan-outs with random knobs and crash points as the moto run draws them,
/// but the first point, in turn: after one of the publishes of the fan-out's intents (by
/// the inline flush or, without it, the relay), before one of the relay's reads of its
/// packed rows (inline flush off), after its commit. Each runs on its own tables and queue
/// and must end as its crash-free run in memory, every child created once and joined, its
/// commit packed.
async fn random_wide_runs(seed: u64, count: u64) -> Totals {
    let defs = wide_definitions();
    let sc = wide_scenario();
    let mut rng = Rng::new(seed);
    let mut totals = Totals::default();
    for n in 0..count {
        let mut knobs = knobs(&mut rng, &sc);
        let piece = match n % 3 {
            // the first publishes carry the parent's intents, whoever sends them
            0 => CrashPoint {
                boundary: Boundary::AfterPublish,
                occurrence: 1 + rng.below((WIDE_WIDTH / PUBLISH_BATCH) as u64),
            },
            // the relay's first run reads the parent's few packed rows (2 a read, 3 a pass)
            1 => {
                knobs.inline_flush = false;
                CrashPoint {
                    boundary: Boundary::BetweenRelayReads,
                    occurrence: 1 + rng.below(3),
                }
            }
            _ => CrashPoint {
                boundary: Boundary::AfterCommit,
                occurrence: 1,
            },
        };
        let run_rng = Rng::new(rng.next());
        let id = format!("rw{n}-widefanout");
        let (expected, clean_stats, reached) = reference(&defs, &sc, &id, knobs, run_rng.clone()).await;
        let mut points = crash_points(&mut rng, &reached, &totals);
        points[0] = piece;
        let what = format!("moto wide fan-out {n} ({knobs:?}, crash points {points:?})");
        let plan = CrashPlan::new(points);
        let mut crashed = wide_harness(plan.clone(), &defs, knobs, run_rng).await;
        let got = crashed.run(&sc, &id, &what).await;
        let rows = plan
            .spawn_rows()
            .into_iter()
            .find(|rows| rows.iter().sum::<usize>() == WIDE_WIDTH)
            .unwrap_or_else(|| panic!("{what}: no commit wrote the {WIDE_WIDTH} spawn intents"));
        assert!(
            rows.len() <= WIDE_WIDTH / PUBLISH_BATCH,
            "{what}: not packed: {rows:?}"
        );
        assert_wide_joined(crashed.store.as_ref(), &id, &got, &what).await;
        compare(
            &expected,
            &got,
            &mut totals.tally,
            ("crash-free", "crashed"),
            &what,
        );
        eprintln!(
            "{what}: spawn rows {rows:?}, crashes {:?}, {} deliveries",
            plan.hits(),
            crashed.stats.deliveries
        );
        add_run(&mut totals, &sc, &plan, &crashed.stats, &clean_stats);
    }
    totals
}
