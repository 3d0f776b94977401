//! One run of a scenario: the functions' stack (in memory, or on moto through the proxy)
//! and the test's view of it, the script sent through a retrying client, and every round
//! (poll, relay, sweep, waits for messages in flight) driven to quiescence.

use std::sync::Arc;
use std::time::Duration;

use stm_core::Event;
use stm_runtime::status::{StatusBus, StatusEvents};
use stm_runtime::worker::{Failed, Handled};
use stm_runtime::{
    relay, sweeper, ActionRegistry, Clock, Control, ControlError, Definitions, Driver, DriverError,
    ManualClock, MemoryQueue, Queue, Record, Worker, WorkerSettings,
};
use stm_store::{ExecutionStore, MemoryStore};
use stm_testkit::{Fault, FaultProxy};

use crate::common::queue_view::QueueView;
use crate::common::scenarios::{settled_outcome, Outcome, Rng, Scenario, Step};
use crate::common::{object, START};
use crate::moto::{Moto, Side};
use crate::settings::{Knobs, CLIENT_ATTEMPTS, MAX_IN_FLIGHT_WAIT, MAX_ROUNDS, VISIBILITY_SECONDS};
use crate::stats::{describe, RunStats, Tried};

enum Polled {
    Received,
    Empty,
    Failed,
}

pub(crate) struct Harness {
    /// The functions' store and queue, and the status bus (every status change announced).
    store: Arc<dyn ExecutionStore>,
    queue: Arc<dyn Queue>,
    bus: Arc<dyn StatusBus>,
    /// The test's view of the store and of the queue.
    view_store: Arc<dyn ExecutionStore>,
    view: QueueView,
    worker: Worker,
    /// The client.
    control: Control,
    clock: Arc<ManualClock>,
    knobs: Knobs,
    rng: Rng,
    pub(crate) stats: RunStats,
}

impl Harness {
    #[allow(clippy::too_many_arguments)] // the two sides of the stack and the knobs
    fn new(
        (store, queue, bus): (Arc<dyn ExecutionStore>, Arc<dyn Queue>, Arc<dyn StatusBus>),
        client_store: Arc<dyn ExecutionStore>,
        client_queue: Arc<dyn Queue>,
        view_store: Arc<dyn ExecutionStore>,
        view: QueueView,
        defs: &Definitions,
        knobs: Knobs,
        rng: Rng,
    ) -> Self {
        let clock = Arc::new(ManualClock::new(START));
        let driver = Driver::new(store.clone(), defs.clone(), ActionRegistry::with_builtins())
            .with_clock(clock.clone())
            .with_trace(true)
            .with_status_events(StatusEvents::All);
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
        )
        .with_status_bus(bus.clone());
        let control_driver = Driver::new(client_store, defs.clone(), ActionRegistry::with_builtins())
            .with_clock(clock.clone())
            .with_trace(true)
            .with_status_events(StatusEvents::All);
        let control = Control::new(control_driver, client_queue);
        Harness {
            store,
            queue,
            bus,
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
    pub(crate) fn memory(defs: &Definitions, knobs: Knobs, rng: Rng, bus: Arc<dyn StatusBus>) -> Self {
        let store: Arc<dyn ExecutionStore> = Arc::new(MemoryStore::new());
        let queue = Arc::new(MemoryQueue::new(1_000));
        Harness::new(
            (store.clone(), queue.clone(), bus),
            store.clone(),
            queue.clone(),
            store,
            QueueView::Memory(queue),
            defs,
            knobs,
            rng,
        )
    }

    pub(crate) fn on_moto(moto: &Moto, side: &Side, defs: &Definitions, knobs: Knobs, rng: Rng) -> Self {
        Harness::new(
            (side.store.clone(), side.queue.clone(), moto.bus.clone()),
            side.client_store.clone(),
            side.client_queue.clone(),
            side.view_store.clone(),
            QueueView::Sqs {
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
                    let unpublished = reason.error().downcast_ref::<stm_runtime::worker::RecordError>();
                    if matches!(
                        unpublished,
                        Some(stm_runtime::worker::RecordError::Unpublished { .. })
                    ) {
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
        let pass = relay::relay_pending_until(
            self.store.as_ref(),
            self.queue.as_ref(),
            Some(self.bus.as_ref()),
            None,
            f64::INFINITY,
            relay::RelayBounds::default(),
        );
        match pass.await {
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
                Err(ControlError::Driver(DriverError::AlreadyExists(_))) if attempt > 1 => return,
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
    pub(crate) async fn run(
        &mut self,
        sc: &Scenario,
        id: &str,
        what: &str,
        proxy: Option<&FaultProxy>,
    ) -> Outcome {
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
