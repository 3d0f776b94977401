//! The simulation: the real worker, relay and sweeper over the metered store and the
//! simulated queue, on one manual clock, with the tally of what they did.

use std::sync::Arc;

use serde_json::Value;
use stm_core::{Event, Execution, FanOutJoin, Status};
use stm_runtime::{
    relay, sweeper, ActionRegistry, Clock, Control, Definitions, Driver, ManualClock, Worker, WorkerSettings,
};
use stm_store::{Commit, ExecutionStore, TimerOp};

use crate::config::{DDB_SECONDS, SQS_SECONDS, START};
use crate::latency::Sampler;
use crate::metered::MeteredStore;
use crate::queue::SimQueue;

/// What the worker and the sweeper did in a run.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Records handled (processed, broadcast, spawned).
    pub(crate) events: u64,
    /// Records acknowledged without a step (duplicates, unknown executions, drained).
    noops: u64,
    /// Records reported failed, and the first reasons.
    failed: u64,
    reasons: Vec<String>,
    /// The worker's invocations' modelled seconds (the event source's invoke and the
    /// handler's calls, one after another): what its concurrency is made of.
    pub(crate) worker_seconds: f64,
    /// The most heap one invocation of the worker held above its start.
    pub(crate) worker_heap: usize,
    /// The sweeps run, their modelled seconds, the timers they fired and the most heap one
    /// sweep held.
    pub(crate) sweeps: u64,
    pub(crate) sweep_seconds: f64,
    pub(crate) fired: u64,
    pub(crate) sweep_heap: usize,
    /// Records that were broadcasts (an emitting commit each).
    pub(crate) broadcasts: u64,
    /// The watched group's busy seconds and events (the hot execution).
    pub(crate) watched_busy: f64,
    pub(crate) watched_events: u64,
    pub(crate) watched_batches: u64,
}

/// An operator's command a bulk run applies.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Operation {
    Suspend,
    Resume,
    Cancel,
}

/// One arrival: when, to whom, what.
type Arrival = (f64, String, Event);

pub(crate) struct Sim {
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) store: Arc<MeteredStore>,
    pub(crate) queue: Arc<SimQueue>,
    worker: Worker,
    control: Control,
    pub(crate) tally: Tally,
    pub(crate) watched: Option<String>,
    pub(crate) latency: Sampler,
}

/// The status events' bus: EventBridge's `PutEvents`, counted (one request per call, 10
/// entries at most, as the worker's bus cuts them) and kept nowhere.
#[derive(Debug)]
struct CountedBus {
    queue: Arc<SimQueue>,
}

#[async_trait::async_trait]
impl stm_runtime::status::StatusBus for CountedBus {
    async fn put(&self, events: &[stm_runtime::status::BusEvent]) -> Vec<stm_runtime::queue::PublishFailure> {
        self.queue
            .handler_call("PutEvents", events.len().div_ceil(10) as u64, events.len() as u64);
        Vec::new()
    }
}

impl Sim {
    pub(crate) fn new(defs: &Definitions) -> Sim {
        Sim::built(defs, false, FanOutJoin::Children)
    }

    /// Whose executions keep their fan-outs' joins as `join` says.
    pub(crate) fn with_fan_out_join(defs: &Definitions, join: FanOutJoin) -> Sim {
        Sim::built(defs, false, join)
    }

    /// With status events: every status change an execution's commit makes goes on a
    /// (counted) bus.
    pub(crate) fn with_status_events(defs: &Definitions) -> Sim {
        Sim::built(defs, true, FanOutJoin::Children)
    }

    fn built(defs: &Definitions, status_events: bool, join: FanOutJoin) -> Sim {
        let clock = Arc::new(ManualClock::new(START));
        let store = Arc::new(MeteredStore::new(clock.clone()));
        let batch_size = crate::config::deployment().worker_batch_size as usize;
        let queue = Arc::new(SimQueue::new(clock.clone(), batch_size));
        let mut driver = Driver::new(store.clone(), defs.clone(), ActionRegistry::with_builtins())
            .with_clock(clock.clone())
            .with_fan_out_join(join);
        if status_events {
            driver = driver.with_status_events(stm_runtime::status::StatusEvents::All);
        }
        let mut worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default());
        if status_events {
            worker = worker.with_status_bus(Arc::new(CountedBus { queue: queue.clone() }));
        }
        let control = Control::new(driver, queue.clone());
        Sim {
            clock,
            store,
            queue,
            worker,
            control,
            tally: Tally::default(),
            watched: None,
            latency: Sampler::new(0x1A7E),
        }
    }

    pub(crate) fn set_time(&self, t: f64) {
        if t > self.clock.now() {
            self.clock.set(t);
        }
    }

    /// Start charging from now on: the meter, the counts and the tally from zero.
    pub(crate) fn begin_measuring(&mut self) {
        self.store.reset();
        self.store.set_enabled(true);
        self.queue.reset_counts();
        self.forget_calls();
        self.tally = Tally::default();
    }

    pub(crate) async fn create(&self, definition: &str, id: &str, context: Option<Value>) {
        let context = context.and_then(|v| v.as_object().cloned());
        self.control
            .create(definition, context, Some(id))
            .await
            .unwrap_or_else(|e| panic!("create {id}: {e}"));
    }

    /// `n` copies of execution `template` (started, its first timer armed if it has one)
    /// straight into the store, nothing charged: copy `i` is `name(i)`, its timer due at
    /// `fire_at(i)` (else the template's), suspended (its timer held) when `suspended(i)`.
    pub(crate) async fn seed_copies(
        &mut self,
        template: &str,
        n: usize,
        name: impl Fn(usize) -> String,
        fire_at: impl Fn(usize) -> Option<f64>,
        suspended: impl Fn(usize) -> bool,
    ) {
        let enabled = self.store.on();
        self.store.set_enabled(false);
        let exe = self
            .store
            .inner
            .load(template)
            .await
            .expect("load")
            .unwrap_or_else(|| panic!("no execution {template} to copy"));
        let timer = self
            .store
            .inner
            .timers_of(template)
            .await
            .expect("timers")
            .into_iter()
            .next();
        for i in 0..n {
            let mut copy: Execution = exe.clone();
            copy.id = name(i);
            copy.version = 0;
            let held = suspended(i);
            if held {
                copy.status = Status::Suspended;
            }
            let timers = timer
                .iter()
                .map(|t| {
                    let (path, fire_at) = (t.path.clone(), fire_at(i).unwrap_or(t.fire_at));
                    if held {
                        TimerOp::Hold { path, fire_at }
                    } else {
                        TimerOp::Schedule { path, fire_at }
                    }
                })
                .collect();
            let commit = Commit {
                timers,
                ..Commit::default()
            };
            self.store.commit(&mut copy, commit).await.expect("seed a copy");
        }
        self.store.set_enabled(enabled);
    }

    /// The operator's command on one execution, at the clock's time (a bulk run's step).
    pub(crate) async fn operate(&self, command: Operation, id: &str) {
        let done = match command {
            Operation::Suspend => self.control.suspend(id).await,
            Operation::Resume => self.control.resume(id).await,
            Operation::Cancel => self.control.cancel(id, None).await,
        };
        done.unwrap_or_else(|e| panic!("{command:?} {id}: {e}"));
    }

    /// A serial caller (the relay's run, one long sweep): every DynamoDB and SQS request
    /// advances the clock by `share` of the serial pace ([`DDB_SECONDS`], [`SQS_SECONDS`]),
    /// so its load spreads over the seconds it takes; 0 turns the pace off.
    pub(crate) fn pace(&self, share: f64) {
        self.store.set_serial(DDB_SECONDS * share);
        *crate::config::lock(&self.queue.serial) = SQS_SECONDS * share;
    }

    /// Forget the requests logged so far: [`calls_time`](Self::calls_time) then times what
    /// comes after.
    pub(crate) fn forget_calls(&self) {
        self.store.take_calls();
        self.queue.take_calls();
    }

    /// The modelled time of the DynamoDB and SQS requests made since the last
    /// [`forget_calls`](Self::forget_calls) (or call of this), in the order they were made,
    /// each drawn from the latency table: one after another, but the relay's lanes and a
    /// parallel scan's segments side by side ([`Sampler::timed`](crate::latency::Sampler::timed)).
    pub(crate) fn calls_time(&mut self) -> f64 {
        let mut calls = self.store.take_calls();
        calls.extend(self.queue.take_calls());
        calls.sort_by_key(|call| call.order);
        self.latency.timed(&calls)
    }

    /// One receive of the event source (the messages ready first, of one group or
    /// several), through the worker's real handler.
    async fn batch(&mut self, at: f64) {
        self.set_time(at);
        let Some(received) = self.queue.take_batch(at) else {
            return;
        };
        self.forget_calls();
        // the event source's receive, then its invoke
        self.queue
            .tally("ReceiveMessage", 1, received.records.len() as u64);
        let mark = stm_testkit::heap::Mark::now();
        let outcome = self.worker.handle_batch(&received.records).await;
        let heap = mark.peak_above();
        let handler = self.calls_time();
        let invoked = self.latency.serial(["Invoke"]) + handler;
        let mut cycle = self.latency.serial(["ReceiveMessage"]) + invoked;
        let failed = outcome.failed_ids().len();
        if outcome.records.len() > failed {
            // the event source deletes what the handler did not report failed
            self.queue
                .tally("DeleteMessageBatch", 1, (outcome.records.len() - failed) as u64);
            cycle += self.latency.serial(["DeleteMessageBatch"]);
        }
        // the watched group's records (the hot execution's latency is its own)
        let watched_ids: std::collections::HashSet<String> = match self.watched.as_deref() {
            Some(w) => received
                .records
                .iter()
                .filter(|r| r.group_id.as_deref() == Some(w))
                .map(|r| r.message_id.clone())
                .collect(),
            None => Default::default(),
        };
        let watched = !watched_ids.is_empty();
        let now = self.clock.now();
        self.queue.settle(received, &outcome, now, now + cycle);
        let t = &mut self.tally;
        t.worker_seconds += invoked;
        t.worker_heap = t.worker_heap.max(heap);
        let mut handled = 0;
        let mut watched_handled = 0;
        for (record, result) in &outcome.records {
            use stm_runtime::worker::Handled;
            let counts = match result {
                Ok(Handled::Processed { .. } | Handled::Spawned { .. }) => true,
                Ok(Handled::Broadcast { .. }) => {
                    t.broadcasts += 1;
                    true
                }
                Ok(_) => {
                    t.noops += 1;
                    false
                }
                Err(why) => {
                    t.failed += 1;
                    if t.reasons.len() < 5 {
                        t.reasons.push(format!("{record}: {why:?}"));
                    }
                    false
                }
            };
            if counts {
                handled += 1;
                if watched_ids.contains(record) {
                    watched_handled += 1;
                }
            }
        }
        t.events += handled;
        if watched {
            t.watched_busy += cycle;
            t.watched_events += watched_handled;
            t.watched_batches += 1;
        }
    }

    async fn sweep(&mut self, at: f64) {
        self.set_time(at);
        self.forget_calls();
        let mark = stm_testkit::heap::Mark::now();
        let summary = sweeper::sweep(self.store.as_ref(), self.queue.as_ref(), self.clock.now())
            .await
            .expect("sweep");
        let heap = mark.peak_above();
        self.tally.sweep_seconds += self.calls_time();
        self.tally.sweeps += 1;
        self.tally.fired += summary.fired as u64;
        self.tally.sweep_heap = self.tally.sweep_heap.max(heap);
    }

    /// Run in time order until nothing is left: the arrivals, a sweep at every whole second
    /// of `sweeps` (from, until), and every group's batches.
    pub(crate) async fn run(
        &mut self,
        mut arrivals: impl FnMut() -> Option<Arrival>,
        sweeps: Option<(f64, f64)>,
    ) {
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
    pub(crate) async fn drain(&mut self) {
        self.run(|| None, None).await;
    }

    /// A relay pass at `at` (then whatever it published is processed).
    pub(crate) async fn relay(&mut self, at: f64) -> relay::RelaySummary {
        self.set_time(at);
        let summary = relay::relay_pending(self.store.as_ref(), self.queue.as_ref())
            .await
            .expect("relay pass");
        self.drain().await;
        summary
    }

    pub(crate) fn assert_clean(&self, what: &str) {
        let t = &self.tally;
        assert_eq!(t.failed, 0, "{what}: records failed: {:?}", t.reasons);
        assert_eq!(t.noops, 0, "{what}: records acknowledged without a step");
        assert_eq!(self.queue.len(), 0, "{what}: messages left in the queue");
    }
}
