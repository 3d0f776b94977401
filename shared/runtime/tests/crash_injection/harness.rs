//! One run of a scenario: the stack (in memory, or DynamoDB and SQS on moto) behind the
//! crashing wrappers, the script sent, and every round driven to quiescence, the dead
//! process revived as a new instance.

use std::sync::Arc;

use stm_core::Event;
use stm_runtime::worker::Handled;
use stm_runtime::{
    relay, sweeper, ActionRegistry, Clock, Control, Definitions, Driver, ManualClock, MemoryQueue, Queue,
    Record, Worker, WorkerSettings,
};
use stm_store::{ExecutionStore, MemoryStore};

use crate::common::queue_view::QueueView;
use crate::common::scenarios::{settled_outcome, Outcome, Rng, Scenario, Step};
use crate::common::{object, START};
use crate::plan::{Actor, Boundary, CrashPlan};
use crate::wrappers::{CrashingQueue, CrashingStore};

/// Poll / relay / sweep rounds one drain may take before the test fails (a livelock never
/// quiesces). A 100-child wide fan-out whose children's outcomes reach the parent one a
/// poll takes about 200 (seed 0xc2a54ed00d1e, crash-free: 203), so twice that.
pub(crate) const MAX_ROUNDS: usize = 400;

/// How a run's worker and event source behave (the same for both runs of a scenario).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Knobs {
    pub(crate) batch: usize,
    pub(crate) inline_flush: bool,
    /// chance (%) of a relay pass between two polls
    pub(crate) relay_between_polls: u64,
    /// The script's consecutive sends go out back to back, without waiting for quiescence.
    pub(crate) burst: bool,
    /// How the scheduled relay reads: small, so crashes land between its reads and passes,
    /// and drawn, so a run's rows fall across reads or share one (an order broken inside
    /// a read or across reads shows either way).
    pub(crate) relay: relay::RelayBounds,
}

// --- the harness -----------------------------------------------------------------

#[derive(Debug, Default, Clone)]
pub(crate) struct RunStats {
    /// Records handed to the worker.
    pub(crate) deliveries: usize,
    /// Redeliveries the worker recognised (a processed event, an existing child).
    pub(crate) dropped_redeliveries: usize,
    /// The most poll / relay / sweep rounds one drain took.
    pub(crate) longest_drain: usize,
}

pub(crate) struct Harness {
    /// The store and queue themselves (the test's view, and the event source's: the
    /// Lambda event-source mapping is not part of the crashing process).
    pub(crate) store: Arc<dyn ExecutionStore>,
    queue: Arc<dyn Queue>,
    backend: QueueView,
    /// The crashing process's view.
    crashing_store: Arc<CrashingStore>,
    crashing_queue: Arc<CrashingQueue>,
    plan: CrashPlan,
    worker: Worker,
    /// The client side (create, send) never crashes: it is not under test here.
    pub(crate) control: Control,
    clock: Arc<ManualClock>,
    knobs: Knobs,
    rng: Rng,
    pub(crate) stats: RunStats,
}

impl Harness {
    pub(crate) fn new(
        store: Arc<dyn ExecutionStore>,
        queue: Arc<dyn Queue>,
        backend: QueueView,
        defs: &Definitions,
        plan: CrashPlan,
        knobs: Knobs,
        rng: Rng,
    ) -> Self {
        let clock = Arc::new(ManualClock::new(START));
        let crashing_store = Arc::new(CrashingStore::new(store.clone(), plan.clone()));
        let crashing_queue = Arc::new(CrashingQueue::new(queue.clone(), plan.clone()));
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

    pub(crate) fn memory(defs: &Definitions, plan: CrashPlan, knobs: Knobs, rng: Rng) -> Self {
        // a large max_receive_count: a crash must never dead-letter a message
        let queue = Arc::new(MemoryQueue::new(1_000));
        Harness::new(
            Arc::new(MemoryStore::new()),
            queue.clone(),
            QueueView::Memory(queue),
            defs,
            plan,
            knobs,
            rng,
        )
    }

    /// One invocation of the event source: receive a batch, run the worker, delete the
    /// records it did not report failed, unless the instance died (or its response was
    /// lost): then nothing is deleted and the whole batch comes back (visibility 0).
    pub(crate) async fn poll(&mut self) -> usize {
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
    pub(crate) async fn relay(&mut self) -> usize {
        self.plan.set_actor(Actor::Relay);
        let result = relay::relay_pending_until(
            self.crashing_store.as_ref(),
            self.crashing_queue.as_ref(),
            None,
            None,
            f64::INFINITY,
            self.knobs.relay,
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
    pub(crate) async fn drain(&mut self, what: &str) {
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

    pub(crate) async fn run(&mut self, sc: &Scenario, id: &str, what: &str) -> Outcome {
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
    pub(crate) async fn outcome(&self, root: &str, sent: &[(String, Event)], what: &str) -> Outcome {
        self.backend.assert_empty(what).await;
        settled_outcome(self.store.as_ref(), root, sent, what).await
    }
}
