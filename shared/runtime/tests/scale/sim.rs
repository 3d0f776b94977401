//! The simulation: the real worker, relay and sweeper over the metered store and the
//! simulated queue, on one manual clock, with the tally of what they did.

use std::sync::Arc;

use serde_json::Value;
use stm_core::Event;
use stm_runtime::worker::BatchOutcome;
use stm_runtime::{
    relay, sweeper, ActionRegistry, Clock, Control, Definitions, Driver, ManualClock, Worker, WorkerSettings,
};

use crate::config::{DDB_SECONDS, SQS_SECONDS, START};
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
    /// The requests the worker's handler made (its modelled time).
    pub(crate) worker_ddb: u64,
    pub(crate) worker_sqs: u64,
    /// The sweeps' requests and the timers they fired.
    pub(crate) sweep_ddb: u64,
    pub(crate) sweep_sqs: u64,
    pub(crate) fired: u64,
    /// Records that were broadcasts (an emitting commit each).
    pub(crate) broadcasts: u64,
    /// The watched group's busy seconds and events (the hot execution).
    pub(crate) watched_busy: f64,
    pub(crate) watched_events: u64,
    pub(crate) watched_batches: u64,
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
}

impl Sim {
    pub(crate) fn new(defs: &Definitions) -> Sim {
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
        self.tally = Tally::default();
    }

    pub(crate) async fn create(&self, definition: &str, id: &str, context: Option<Value>) {
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
