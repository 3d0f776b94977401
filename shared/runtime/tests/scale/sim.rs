//! The simulation: the real worker, relay and sweeper (its schedule and its doorbell
//! trigger) over the metered store and the simulated queues, on one manual clock, with the
//! tally of what they did.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;
use stm_core::{Event, Execution, FanOutJoin, Status};
use stm_runtime::doorbell::{handle_doorbells, parse_doorbell, MAX_EARLY_WAIT};
use stm_runtime::{
    relay, sweeper, ActionRegistry, Clock, Control, Definitions, Driver, ManualClock, Record, Worker,
    WorkerSettings,
};
use stm_store::{Commit, ExecutionStore, TimerOp};

use crate::config::{DDB_SECONDS, SQS_SECONDS, START};
use crate::doorbell::SimDoorbells;
use crate::latency::Sampler;
use crate::metered::MeteredStore;
use crate::queue::SimQueue;

/// What the worker and the sweeper did in a run.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Records handled (processed, broadcast, spawned).
    pub(crate) events: u64,
    /// Records acknowledged without a step (duplicates, unknown executions, drained).
    pub(crate) noops: u64,
    /// Records reported failed, and the first reasons.
    pub(crate) failed: u64,
    pub(crate) reasons: Vec<String>,
    /// The worker's invocations' modelled seconds (the event source's invoke and the
    /// handler's calls, one after another): what its concurrency is made of.
    pub(crate) worker_seconds: f64,
    /// The most heap one invocation of the worker held above its start.
    pub(crate) worker_heap: usize,
    /// The sweeps run, their modelled seconds, the timers they fired (those no doorbell
    /// fired first) and the most heap one sweep held.
    pub(crate) sweeps: u64,
    pub(crate) sweep_seconds: f64,
    pub(crate) fired: u64,
    pub(crate) sweep_heap: usize,
    /// The doorbell invocations (the sweeper's trigger on the doorbell queue): how many,
    /// the records they took, the timers they fired, the records whose timer was gone or
    /// re-armed (a sweep fired it first, or its state was left), their instances' busy
    /// seconds (receive to delete, each record's wait for its `fire_at` included) and the
    /// part of them spent only waiting (a trigger behind its doorbells receives them due,
    /// and waits for none), the most instances at once, each fired timer's seconds past its
    /// `fire_at`, and the most heap one invocation held (its records' side by side).
    pub(crate) doorbell_invocations: u64,
    pub(crate) doorbell_records: u64,
    pub(crate) doorbell_fired: u64,
    pub(crate) doorbell_stale: u64,
    pub(crate) doorbell_seconds: f64,
    pub(crate) doorbell_wait_seconds: f64,
    pub(crate) doorbell_peak: usize,
    pub(crate) doorbell_late: Vec<f64>,
    pub(crate) doorbell_heap: usize,
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

/// A doorbell invocation in flight: its records, each answered when its wait for
/// `fire_at` ends, and what they came to so far.
#[derive(Debug)]
struct Invocation {
    received_at: f64,
    records: Vec<Record>,
    /// Records not answered yet.
    left: usize,
    /// When the handler started (after the receive and the invoke).
    started: f64,
    /// When the last answered record's calls ended, and the most calls' time of one
    /// record (its end had no record waited).
    ended: f64,
    calls: f64,
    failed: Vec<String>,
    heap: usize,
}

pub(crate) struct Sim {
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) store: Arc<MeteredStore>,
    pub(crate) queue: Arc<SimQueue>,
    /// The precise-timer doorbells the worker rings and their trigger's instances.
    pub(crate) doorbells: Arc<SimDoorbells>,
    /// Doorbell invocations in flight, and their records' answers by (when, order): the
    /// exact time, the invocation and the record.
    invocations: HashMap<u64, Invocation>,
    answers: BTreeMap<(i64, u64), (f64, u64, usize)>,
    /// The last number given to an invocation or an answer.
    next_answer: u64,
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
        Sim::built(defs, false, FanOutJoin::Children, None)
    }

    /// Whose executions keep their fan-outs' joins as `join` says.
    pub(crate) fn with_fan_out_join(defs: &Definitions, join: FanOutJoin) -> Sim {
        Sim::built(defs, false, join, None)
    }

    /// With status events: every status change an execution's commit makes goes on a
    /// (counted) bus.
    pub(crate) fn with_status_events(defs: &Definitions) -> Sim {
        Sim::built(defs, true, FanOutJoin::Children, None)
    }

    /// Whose doorbells' trigger runs at most `concurrency` invocations at once, in place
    /// of the template's `DoorbellMaxConcurrency`.
    pub(crate) fn with_doorbell_concurrency(defs: &Definitions, concurrency: usize) -> Sim {
        Sim::built(defs, false, FanOutJoin::Children, Some(concurrency))
    }

    fn built(defs: &Definitions, status_events: bool, join: FanOutJoin, doorbells: Option<usize>) -> Sim {
        let clock = Arc::new(ManualClock::new(START));
        let store = Arc::new(MeteredStore::new(clock.clone()));
        let d = crate::config::deployment();
        let queue = Arc::new(SimQueue::new(clock.clone(), d.worker_batch_size as usize));
        // as the template deploys the worker: near timers ring doorbells
        // (`STM_TIMER_QUEUE_URL`), answered by the sweeper's trigger on that queue
        let doorbells = Arc::new(SimDoorbells::new(
            clock.clone(),
            queue.clone(),
            doorbells.unwrap_or(d.doorbell_max_concurrency as usize),
            d.doorbell_batch_size as usize,
            d.timer_queue_visibility,
        ));
        let mut driver = Driver::new(store.clone(), defs.clone(), ActionRegistry::with_builtins())
            .with_clock(clock.clone())
            .with_fan_out_join(join);
        if status_events {
            driver = driver.with_status_events(stm_runtime::status::StatusEvents::All);
        }
        let mut worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default())
            .with_doorbell(doorbells.clone());
        if status_events {
            worker = worker.with_status_bus(Arc::new(CountedBus { queue: queue.clone() }));
        }
        let control = Control::new(driver, queue.clone());
        Sim {
            clock,
            store,
            queue,
            doorbells,
            invocations: HashMap::new(),
            answers: BTreeMap::new(),
            next_answer: 0,
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
        Box::pin(self.control.create(definition, context, Some(id)))
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
        // each function's future on the heap (here and below): a debug build's are tens of
        // KB, and nested by value up through every workload they overflowed the 2 MB stack
        let outcome = Box::pin(self.worker.handle_batch(&received.records)).await;
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
        let summary = Box::pin(sweeper::sweep(
            self.store.as_ref(),
            self.queue.as_ref(),
            self.clock.now(),
        ))
        .await
        .expect("sweep");
        let heap = mark.peak_above();
        self.tally.sweep_seconds += self.calls_time();
        self.tally.sweeps += 1;
        self.tally.fired += summary.fired as u64;
        self.tally.sweep_heap = self.tally.sweep_heap.max(heap);
    }

    /// The doorbell trigger's receive at `at` and its invoke: each record is answered when
    /// `doorbell::answer` would stop waiting for it ([`Sim::answer`]), and the instance stays
    /// busy until the last one's calls and the delete are done.
    async fn doorbell_receive(&mut self, at: f64) {
        self.set_time(at);
        let records = self.doorbells.receive(at);
        assert!(
            !records.is_empty(),
            "a doorbell receive at {at} took nothing (the loop would not advance)"
        );
        self.queue
            .tally(crate::doorbell::RECEIVE, 1, records.len() as u64);
        let start = at + self.latency.serial(["ReceiveMessage", "Invoke"]);
        // one counter numbers the invocations and their answers
        self.next_answer += 1;
        let id = self.next_answer;
        for (index, record) in records.iter().enumerate() {
            // `doorbell::answer`'s wait: until `fire_at` if that is within
            // `MAX_EARLY_WAIT`, else none (not due: re-delayed); a malformed body, none
            let fire_at = parse_doorbell(&record.body).map_or(start, |t| t.fire_at);
            let early = fire_at - start;
            let answer_at = if early > 0.0 && early <= MAX_EARLY_WAIT.as_secs_f64() {
                fire_at
            } else {
                start
            };
            self.next_answer += 1;
            self.answers.insert(
                ((answer_at * 1e6).round() as i64, self.next_answer),
                (answer_at, id, index),
            );
        }
        let t = &mut self.tally;
        t.doorbell_invocations += 1;
        t.doorbell_records += records.len() as u64;
        t.doorbell_peak = t.doorbell_peak.max(self.doorbells.busy());
        self.invocations.insert(
            id,
            Invocation {
                received_at: at,
                left: records.len(),
                records,
                started: start,
                ended: start,
                calls: 0.0,
                failed: Vec::new(),
                heap: 0,
            },
        );
    }

    /// One doorbell record answered at the moment its wait ends, through the real
    /// `doorbell::handle_doorbells` (so it waits no more: the clock is at its `fire_at`).
    /// The handler answers a batch's records side by side, so each record's calls are
    /// timed on their own and the invocation ends with the last of them.
    async fn answer(&mut self) {
        let Some((_, (at, id, index))) = self.answers.pop_first() else {
            return;
        };
        self.set_time(at);
        let Some(record) = self.invocations.get(&id).map(|inv| inv.records[index].clone()) else {
            return;
        };
        self.forget_calls();
        let clock = self.clock.clone();
        let now = move || clock.now();
        let mark = stm_testkit::heap::Mark::now();
        let (failed, summary) = Box::pin(handle_doorbells(
            self.store.as_ref(),
            self.queue.as_ref(),
            std::slice::from_ref(&record),
            &now,
            Some(self.doorbells.as_ref()),
        ))
        .await;
        let heap = mark.peak_above();
        let calls = self.calls_time();
        let t = &mut self.tally;
        t.doorbell_fired += summary.fired as u64;
        if summary.fired > 0 {
            if let Ok(timer) = parse_doorbell(&record.body) {
                t.doorbell_late.push((at - timer.fire_at).max(0.0));
            }
        } else if failed.is_empty() && summary.due == 0 {
            t.doorbell_stale += 1;
        }
        let Some(inv) = self.invocations.get_mut(&id) else {
            return;
        };
        inv.ended = inv.ended.max(at + calls);
        inv.calls = inv.calls.max(calls);
        inv.failed.extend(failed);
        inv.heap += heap;
        inv.left -= 1;
        if inv.left > 0 {
            return;
        }
        let Some(inv) = self.invocations.remove(&id) else {
            return;
        };
        // the trigger deletes what the handler did not report failed
        let mut end = inv.ended;
        let deleted = inv.records.len() - inv.failed.len();
        if deleted > 0 {
            self.queue.tally(crate::doorbell::DELETE, 1, deleted as u64);
            end += self.latency.serial(["DeleteMessageBatch"]);
        }
        self.doorbells.finish(&inv.records, &inv.failed, end);
        let t = &mut self.tally;
        t.doorbell_seconds += end - inv.received_at;
        t.doorbell_wait_seconds += inv.ended - (inv.started + inv.calls);
        t.doorbell_heap = t.doorbell_heap.max(inv.heap);
    }

    /// Run in time order until nothing is left: the arrivals, a sweep at every whole second
    /// of `sweeps` (from, until), the doorbell invocations that start before `until` (and
    /// their records' answers, whenever they come), and every group's batches.
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
            let answer_at = self.answers.values().next().map(|(at, _, _)| *at);
            let ring_at = self.doorbells.next_receive().filter(|t| *t < sweep_until);
            let batch_at = self.queue.next_ready();
            let first = [arrival_at, sweep_at, answer_at, ring_at, batch_at]
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
            } else if answer_at == Some(first) {
                // before a sweep at the same instant: the doorbell was waiting for it, the
                // sweep has its due index to read first
                self.answer().await;
            } else if sweep_at == Some(first) {
                self.sweep(first).await;
                next_sweep = Some(first + 1.0);
            } else if ring_at == Some(first) {
                self.doorbell_receive(first).await;
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
        let summary = Box::pin(relay::relay_pending(self.store.as_ref(), self.queue.as_ref()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{definitions, simulate};

    /// A commit's near timer rings a doorbell (a far one does not), and the doorbell, not
    /// the sweep, fires it at its `fire_at`: an invocation holds its instance through its
    /// records' waits for `fire_at` (half a second here: a 1.5 s timer's doorbell is
    /// delayed a whole second).
    #[test]
    fn near_timers_are_fired_by_their_doorbells_not_the_sweep() {
        simulate(async {
            let mut sim = Sim::new(&definitions());
            for i in 0..20 {
                sim.create("Ticker", &format!("t{i}"), None).await;
            }
            sim.create("Sleeper", "far", None).await;
            sim.drain().await;
            assert_eq!(
                sim.doorbells.rung(),
                20,
                "one doorbell per near timer, none for the 30-day one"
            );
            sim.begin_measuring();
            let t0 = sim.clock.now();
            sim.run(|| None, Some((t0.ceil(), t0 + 4.0))).await;
            let t = &sim.tally;
            assert_eq!(t.fired, 0, "the sweep fired a near timer");
            assert!(
                t.doorbell_fired >= 40,
                "{} timers fired by doorbells",
                t.doorbell_fired
            );
            let latest = t.doorbell_late.iter().copied().fold(0.0, f64::max);
            assert!(latest < 1e-3, "a doorbell fired {latest} s late");
            let held = t.doorbell_seconds / t.doorbell_invocations.max(1) as f64;
            assert!(held > 0.4, "an invocation held its instance {held} s");
            let waited = t.doorbell_wait_seconds / t.doorbell_invocations.max(1) as f64;
            assert!(
                waited > 0.4,
                "an invocation waited {waited} s for its records' fire_at"
            );
            let sends = sim
                .queue
                .action_loads()
                .into_iter()
                .find(|a| a.action == crate::doorbell::SEND)
                .map_or(0, |a| a.requests);
            assert!(sends > 0, "no doorbell sent in the window");
        });
    }

    /// A burst of near timers: the trigger runs at most its concurrency's invocations at
    /// once, the doorbells it could not take in time are late, and the sweep fires what
    /// they had not fired by then (their doorbells then find them gone). At 20 at once
    /// (about 2,760 timers a second), which a burst of 2,000 in one second overwhelms; the
    /// template's default is sized not to be.
    #[test]
    fn the_trigger_keeps_to_its_concurrency_and_the_sweep_takes_the_rest() {
        simulate(async {
            let mut sim = Sim::with_doorbell_concurrency(&definitions(), 20);
            let n = 2_000;
            for i in 0..n {
                sim.create("Ticker", &format!("t{i}"), None).await;
            }
            sim.drain().await;
            sim.begin_measuring();
            let t0 = sim.clock.now();
            sim.run(|| None, Some((t0.ceil(), t0 + 2.5))).await;
            let t = &sim.tally;
            let max = sim.doorbells.max_concurrency;
            assert_eq!(
                t.doorbell_peak, max,
                "the most invocations at once, against DoorbellMaxConcurrency"
            );
            assert!(t.doorbell_fired > 0 && t.fired > 0, "{t:?}");
            assert!(
                t.doorbell_stale > 0,
                "no doorbell found its timer fired by the sweep"
            );
            let mut late = t.doorbell_late.clone();
            let p99 = crate::latency::quantile(&mut late, 0.99);
            assert!(
                p99 > 0.05,
                "a burst of {n} doorbells fired on time: p99 {p99} s late"
            );
        });
    }
}
