//! At-least-once delivery over the in-memory stack (MemoryStore + MemoryQueue + the real
//! worker, relay and sweeper logic): duplicated messages, two relays racing over the same
//! pending entries and two sweepers firing the same due timers must change nothing.
//!
//! Each scenario (`common::scenarios`: the test machines and the `Checkout`, `Webhook` and
//! `Shipment` examples) runs twice: once duplicate-free, once with a seeded random schedule
//! that
//!
//! * (a) re-publishes messages a second time under a fresh deduplication id (a redelivery
//!   SQS's 5-minute window does not catch), right away or held back and released later,
//!   and optionally turns off the worker's inline flush so the relay delivers, in reads
//!   of 1 to 100 rows and passes of 1 to 300, drawn (a reorder inside one read and one
//!   across reads both change what a group receives);
//! * (b) runs the relay as two interleaved passes over one snapshot of the pending
//!   entries (both publish, both ack);
//! * (c) runs the sweeper twice over the same due timers (a second sweeper that read the
//!   timers before the first deleted them re-publishes each `Timeout`).
//!
//! About half the scenarios send their events as a burst (back to back, one drain), so
//! copies and held-back messages can land between events of one group. The two runs are
//! held to `common::scenarios::compare`: the same final records, each event applied once
//! and in its sender's order, no empty commit. `STM_DUP_SCENARIOS` / `STM_DUP_SEED`
//! override the count and the seed (printed on a failure).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::scenarios::{
    compare, definitions_with_examples, env_u64, relay_bounds, scenario, scenario_count, settled_outcome,
    Outcome, Rng, Scenario, SeedOnFailure, Step, Tally,
};
use common::{object, START};
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::queue::{HookedQueue, PublishFailure, QueueHook};
use stm_runtime::relay::RelayBounds;
use stm_runtime::{
    relay, sweeper, ActionRegistry, Clock, Control, Driver, ManualClock, MemoryQueue, OutgoingMessage, Queue,
    Worker, WorkerSettings,
};
use stm_store::{ExecutionStore, MemoryStore};

#[derive(Default)]
struct DupState {
    rng: Option<Rng>,
    /// chance (%) that a published message also gets a second copy
    copy_pct: u64,
    /// chance (%) that a message's deduplication id is made unique, so a second publish
    /// of the same logical send (a racing relay or sweeper) is delivered, not dropped
    bypass_pct: u64,
    held: Vec<OutgoingMessage>,
    counter: u64,
    copies: usize,
}

/// A MemoryQueue whose publishes may be duplicated: the copy carries a fresh
/// deduplication id, as a re-publish after SQS's window would.
type DupQueue = HookedQueue<Dup, MemoryQueue>;

/// The hook that duplicates.
struct Dup {
    state: Mutex<DupState>,
}

fn dup_queue(rng: Option<Rng>, copy_pct: u64, bypass_pct: u64) -> DupQueue {
    let state = DupState {
        rng,
        copy_pct,
        bypass_pct,
        ..DupState::default()
    };
    HookedQueue::new(
        Arc::new(MemoryQueue::new(50)),
        Dup {
            state: Mutex::new(state),
        },
    )
}

impl Dup {
    fn lock(&self) -> std::sync::MutexGuard<'_, DupState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn copies(&self) -> usize {
        self.lock().copies
    }
}

/// Publish the held-back copies (after whatever was published since).
async fn release_held(queue: &DupQueue) -> usize {
    let held = std::mem::take(&mut queue.hook.lock().held);
    if !held.is_empty() {
        let failures = queue.inner.publish_batch(&held).await;
        assert!(failures.is_empty(), "held copies refused: {failures:?}");
    }
    held.len()
}

/// Decide, under the lock, which messages get a unique deduplication id and which get a
/// copy (published now or held back).
fn plan_publish(
    st: &mut DupState,
    mut rng: Rng,
    messages: &[OutgoingMessage],
) -> (Vec<OutgoingMessage>, Vec<OutgoingMessage>) {
    let mut originals = Vec::with_capacity(messages.len());
    let mut now = Vec::new();
    for m in messages {
        let mut m = m.clone();
        if rng.chance(st.bypass_pct) {
            st.counter += 1;
            m.deduplication_id = format!("{}-b{}", m.deduplication_id, st.counter);
        }
        if rng.chance(st.copy_pct) {
            st.counter += 1;
            st.copies += 1;
            let mut copy = m.clone();
            copy.deduplication_id = format!("{}-c{}", m.deduplication_id, st.counter);
            if rng.chance(50) {
                now.push(copy);
            } else {
                st.held.push(copy);
            }
        }
        originals.push(m);
    }
    st.rng = Some(rng);
    (originals, now)
}

#[async_trait]
impl QueueHook for Dup {
    async fn publish_batch(&self, inner: &dyn Queue, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        let plan = {
            let mut st = self.lock();
            let rng = st.rng.take();
            rng.map(|rng| plan_publish(&mut st, rng, messages))
        };
        let Some((originals, now)) = plan else {
            return inner.publish_batch(messages).await;
        };
        let failures = inner.publish_batch(&originals).await;
        if !now.is_empty() {
            let extra = inner.publish_batch(&now).await;
            assert!(extra.is_empty(), "copies refused: {extra:?}");
        }
        failures
    }
}

/// The random schedule of one run (`None`: the duplicate-free baseline).
struct Chaos {
    rng: Rng,
    double_relay_pct: u64,
    double_sweep_pct: u64,
}

#[derive(Default)]
struct Counts {
    double_relays: usize,
    double_sweeps: usize,
    relay_republished: usize,
    sweep_republished: usize,
}

struct Harness {
    store: Arc<MemoryStore>,
    queue: Arc<DupQueue>,
    worker: Worker,
    control: Control,
    clock: Arc<ManualClock>,
    settings: EventSourceSettings,
    /// How the scheduled relay reads (drawn for the duplicated run: its reorders inside a
    /// read and across reads both show).
    bounds: RelayBounds,
    chaos: Option<Chaos>,
    counts: Counts,
}

impl Harness {
    fn new(
        chaos: Option<Chaos>,
        copy_pct: u64,
        bypass_pct: u64,
        inline_flush: bool,
        batch: usize,
        bounds: RelayBounds,
    ) -> Self {
        let store = Arc::new(MemoryStore::new());
        let clock = Arc::new(ManualClock::new(START));
        let queue_rng = chaos.as_ref().map(|c| c.rng.fork(0x9E37_79B9_7F4A_7C15));
        let queue = Arc::new(dup_queue(queue_rng, copy_pct, bypass_pct));
        // traced: one trace step per applied event is what the comparison counts (the
        // version counts commits, and a coalesced burst commits several events at once)
        let driver = Driver::new(
            store.clone(),
            definitions_with_examples(),
            ActionRegistry::with_builtins(),
        )
        .with_clock(clock.clone())
        .with_trace(true);
        let worker = Worker::new(
            driver.clone(),
            queue.clone(),
            WorkerSettings {
                inline_flush,
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
        let control = Control::new(driver, queue.clone());
        let settings = EventSourceSettings {
            batch_size: batch,
            // sequential polling: a failed item may come straight back
            visibility_seconds: 0,
            wait_seconds: 0,
        };
        Harness {
            store,
            queue,
            worker,
            control,
            clock,
            settings,
            bounds,
            chaos,
            counts: Counts::default(),
        }
    }

    fn roll(&mut self, pick: impl Fn(&Chaos) -> u64) -> bool {
        match self.chaos.as_mut() {
            Some(c) => {
                let pct = pick(c);
                c.rng.chance(pct)
            }
            None => false,
        }
    }

    /// One relay pass, or two relays over one snapshot of the pending entries, the second
    /// starting after a random part of the first.
    async fn relay(&mut self) -> usize {
        let (store, queue) = (self.store.clone(), self.queue.clone());
        let (store, queue): (&dyn ExecutionStore, &dyn Queue) = (store.as_ref(), queue.as_ref());
        if !self.roll(|c| c.double_relay_pct) {
            return relay::relay_pending_until(store, queue, None, None, f64::INFINITY, self.bounds)
                .await
                .expect("relay")
                .forwarded;
        }
        self.counts.double_relays += 1;
        let mut spawns = store.pending_spawns().await.expect("pending spawns");
        let mut outbox = store.pending_outbox().await.expect("pending outbox");
        spawns.sort_by_key(|s| s.seq);
        outbox.sort_by_key(|o| o.seq);
        // relay A is cut somewhere in its publishing order (every spawn intent, then the
        // outbox): it has published no outbox entry before the last of its spawn intents
        let rng = &mut self.chaos.as_mut().expect("chaos").rng;
        let cut = rng.below((spawns.len() + outbox.len()) as u64 + 1) as usize;
        let (cut_s, cut_o) = (cut.min(spawns.len()), cut.saturating_sub(spawns.len()));
        // relay A, first part
        let a1 = relay::deliver(store, queue, None, &spawns[..cut_s], &outbox[..cut_o]).await;
        // relay B, everything it read (including what A already acked)
        let b = relay::deliver(store, queue, None, &spawns, &outbox).await;
        // relay A, the rest
        let a2 = relay::deliver(store, queue, None, &spawns[cut_s..], &outbox[cut_o..]).await;
        self.counts.relay_republished += spawns.len() + outbox.len();
        a1.forwarded + b.forwarded + a2.forwarded
    }

    /// One sweep, or two sweepers that both read the due timers before either deleted.
    async fn sweep(&mut self) -> usize {
        let now = self.clock.now();
        let (store, queue) = (self.store.clone(), self.queue.clone());
        let store: &dyn ExecutionStore = store.as_ref();
        let double = self.roll(|c| c.double_sweep_pct);
        let due = if double {
            store.due_timers(now).await.expect("due timers")
        } else {
            Vec::new()
        };
        let fired = sweeper::sweep(store, queue.as_ref(), now)
            .await
            .expect("sweep")
            .fired;
        if double && !due.is_empty() {
            self.counts.double_sweeps += 1;
            for timer in &due {
                let message = OutgoingMessage::timeout(&timer.execution_id, &timer.path, timer.fire_at);
                let failures = queue.publish_batch(std::slice::from_ref(&message)).await;
                assert!(failures.is_empty(), "{failures:?}");
                // the guarded delete of an already deleted timer
                store
                    .delete_timer(&timer.execution_id, &timer.path, timer.fire_at)
                    .await
                    .expect("delete timer");
                self.counts.sweep_republished += 1;
            }
        }
        fired
    }

    /// Poll, relay, sweep and release held copies until nothing moves.
    async fn drain(&mut self) {
        for _ in 0..2_000 {
            let polled = eventsource::poll_once(self.queue.as_ref(), &self.worker, &self.settings)
                .await
                .expect("poll");
            if polled.received > 0 {
                // sometimes run the relay (or release copies) between polls
                if self.roll(|_| 15) {
                    self.relay().await;
                }
                if self.roll(|_| 10) {
                    release_held(&self.queue).await;
                }
                continue;
            }
            let moved = self.relay().await + self.sweep().await + release_held(&self.queue).await;
            if moved == 0 {
                return;
            }
        }
        panic!("the stack did not quiesce");
    }
}

/// Run `sc` on `h`: create, then the script's steps. In a burst the client sends the
/// script's events back to back and the worker finds them queued together (the create's
/// `Start` included); otherwise the stack drains after each step.
async fn run(h: &mut Harness, sc: &Scenario, id: &str, burst: bool, what: &str) -> Outcome {
    h.control
        .create(sc.definition, sc.seed.clone().map(object), Some(id))
        .await
        .expect("create");
    let bursting = |next: Option<&Step>| burst && matches!(next, Some(Step::Send(_)));
    if !bursting(sc.steps.first()) {
        h.drain().await;
    }
    let mut sent = Vec::new();
    for (i, step) in sc.steps.iter().enumerate() {
        match step {
            Step::Send(ev) => {
                h.control.send(id, ev).await.expect("send");
                sent.push((id.to_string(), ev.clone()));
                // a client retrying its send (same event id)
                if h.roll(|_| 30) {
                    h.control.send(id, ev).await.expect("send again");
                }
            }
            Step::ToChildren(events) => {
                let root = h.store.load(id).await.expect("load").expect("root");
                let children: Vec<String> = root.children.keys().cloned().collect();
                assert_eq!(children.len(), events.len(), "{what}: children {children:?}");
                for (child, ev) in children.iter().zip(events) {
                    h.control.send(child, ev).await.expect("send to a child");
                    sent.push((child.clone(), ev.clone()));
                }
            }
            Step::Advance(seconds) => h.clock.advance(*seconds),
        }
        if !(matches!(step, Step::Send(_)) && bursting(sc.steps.get(i + 1))) {
            h.drain().await;
        }
    }
    assert!(
        h.queue.inner.is_empty(),
        "{what}: messages left: {:?}",
        h.queue.inner.snapshot()
    );
    assert!(h.queue.inner.dead_letters().is_empty(), "{what}: dead letters");
    settled_outcome(h.store.as_ref(), id, &sent, what).await
}

#[tokio::test]
async fn duplicates_and_races_change_nothing() {
    let scenarios = scenario_count("STM_DUP_SCENARIOS", 240);
    let seed = env_u64("STM_DUP_SEED", 0xD0_0B1E_5EED);
    let _report = SeedOnFailure::new("duplicates_and_races_change_nothing", "STM_DUP_SEED", seed);
    let mut master = Rng::new(seed);
    let mut copies = 0usize;
    let mut extra_deliveries = 0i64;
    let mut bursts = 0usize;
    let mut tally = Tally::default();
    let mut counts = Counts::default();
    let mut by_machine: BTreeMap<&str, usize> = BTreeMap::new();
    for n in 0..scenarios {
        let sc = scenario(&mut master);
        *by_machine.entry(sc.definition).or_default() += 1;
        let id = format!("s{n}-{}", sc.definition.to_lowercase());
        // both runs send the same way: a burst is what lets duplicates and held-back
        // copies land between events of one group, where order can break
        let burst = sc.burst_ok && master.chance(50);
        bursts += usize::from(burst);

        let mut base = Harness::new(None, 0, 0, true, 10, RelayBounds::default());
        let expected = run(&mut base, &sc, &id, burst, &format!("{id} (duplicate-free)")).await;

        let chaos = Chaos {
            rng: Rng::new(master.next()),
            double_relay_pct: master.below(101),
            double_sweep_pct: master.below(101),
        };
        let copy_pct = 10 + master.below(91);
        let bypass_pct = master.below(101);
        let inline_flush = master.chance(50);
        let batch = 1 + master.below(10) as usize;
        let bounds = relay_bounds(&mut master);
        let what = format!(
            "scenario {n} ({}, burst {burst}, copy {copy_pct}%, bypass {bypass_pct}%, inline_flush \
             {inline_flush}, batch {batch}, relay {bounds:?})",
            sc.definition
        );
        let mut dup = Harness::new(Some(chaos), copy_pct, bypass_pct, inline_flush, batch, bounds);
        let got = run(&mut dup, &sc, &id, burst, &what).await;
        copies += dup.queue.hook.copies();
        // messages the worker received beyond the duplicate-free run's
        extra_deliveries += dup.queue.inner.published() as i64 - base.queue.inner.published() as i64;
        counts.double_relays += dup.counts.double_relays;
        counts.double_sweeps += dup.counts.double_sweeps;
        counts.relay_republished += dup.counts.relay_republished;
        counts.sweep_republished += dup.counts.sweep_republished;
        compare(
            &expected,
            &got,
            &mut tally,
            ("duplicate-free", "duplicated"),
            &what,
        );
    }
    println!(
        "duplicates_and_order: seed {seed:#x}, {scenarios} scenarios {by_machine:?}, {bursts} sent as \
         bursts; duplicates injected: {copies} message copies, {} double relay passes ({} entries \
         re-published), {} double sweeps ({} Timeouts re-published); {extra_deliveries} extra \
         messages delivered to the worker; events lost: {}; duplicates applied: {}",
        counts.double_relays,
        counts.relay_republished,
        counts.double_sweeps,
        counts.sweep_republished,
        tally.lost,
        tally.duplicates,
    );
    assert_eq!(tally.lost, 0);
    assert_eq!(tally.duplicates, 0);
    assert!(copies > 0 && counts.double_relays > 0 && counts.double_sweeps > 0);
    assert!(extra_deliveries > 0, "no duplicate reached the worker");
    assert!(bursts > 0, "no scenario was sent as a burst");
}
