//! What the randomized suites share (`crash_injection.rs`, `aws_faults.rs`,
//! `duplicates_and_order.rs`): a seeded random source and the scenario machines with their
//! event scripts.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};
use stm_core::{Event, Execution};
use stm_runtime::Definitions;
use stm_store::{DueTimer, ExecutionStore};

use super::{event, observable};

/// xorshift64* (no dependencies; deterministic for a seed).
#[derive(Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| {
            let v = v.trim();
            match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => v.parse().ok(),
            }
        })
        .unwrap_or(default)
}

// --- the machines and their scripts ----------------------------------------------

/// `tests/machines/scenarios.stm` plus the `Checkout`, `Webhook` and `Shipment` examples
/// (the example `Shipment` replaces the lifecycle machine of the same name, unused here).
/// The test machines and three examples, each with a second version retained beside it
/// (its `ttl` changed), as a deploy that froze the previous one carries them: every
/// execution runs pinned, its version looked up among two.
pub fn definitions_with_examples() -> Definitions {
    let mut defs = super::definitions();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for file in ["checkout.stm", "webhook.stm", "shipment.stm"] {
        for defn in stm_runtime::config::load_file(&examples.join(file)).expect("example loads") {
            defs.register(defn);
        }
    }
    let current: Vec<stm_core::Definition> = defs.iter().map(|d| d.as_ref().clone()).collect();
    for defn in current {
        let mut previous = defn;
        previous.ttl = Some(previous.ttl.map_or(86_400, |t| t + 1));
        defs.retain(stm_core::version::FrozenVersion::new(&previous, None));
    }
    defs
}

#[allow(clippy::large_enum_variant)] // a handful of test steps
#[derive(Clone)]
pub enum Step {
    /// Send an event to the root.
    Send(Event),
    /// Send the i-th event to the root's i-th child (the shipment's parcels).
    ToChildren(Vec<Event>),
    /// Move the clock on (the sweeper then fires what is due).
    Advance(f64),
}

#[derive(Clone)]
pub struct Scenario {
    pub definition: &'static str,
    pub seed: Option<Value>,
    pub steps: Vec<Step>,
    /// Whether the sends may go out back to back: not when the outcome depends on which of
    /// two regions finishes first (a `cancel_on_failure` checkout where a region fails),
    /// a race that concurrent workers decide either way, crash or no crash.
    pub burst_ok: bool,
}

pub fn scenario(rng: &mut Rng) -> Scenario {
    match rng.below(7) {
        0 => Scenario {
            // orthogonal fork and join
            definition: "Fork",
            seed: None,
            steps: vec![
                Step::Send(event("Go", json!({}))),
                Step::Send(event(
                    "PaymentOk",
                    json!({"receipt": format!("r-{}", rng.below(1000))}),
                )),
                Step::Send(event("Packed", json!({}))),
            ],
            burst_ok: true,
        },
        1 => {
            // examples/checkout.stm: an orthogonal checkout, either region may fail
            let payment = if rng.chance(75) { "Charged" } else { "Declined" };
            let stock = if rng.chance(75) { "Reserved" } else { "OutOfStock" };
            let mut steps = vec![Step::Send(event("Checkout", json!({})))];
            if rng.chance(50) {
                steps.push(Step::Send(event(payment, json!({}))));
                steps.push(Step::Send(event(stock, json!({}))));
            } else {
                steps.push(Step::Send(event(stock, json!({}))));
                steps.push(Step::Send(event(payment, json!({}))));
            }
            Scenario {
                definition: "Checkout",
                seed: None,
                steps,
                burst_ok: payment == "Charged" && stock == "Reserved",
            }
        }
        2 => {
            // a fan-out invoke whose children finish on their own
            let pool = ["a", "b", "c", "bounce", "d"];
            let n = 1 + rng.below(4) as usize;
            let recipients: Vec<&str> = (0..n)
                .map(|_| pool[rng.below(pool.len() as u64) as usize])
                .collect();
            Scenario {
                definition: "FanOut",
                seed: Some(json!({ "recipients": recipients })),
                steps: vec![],
                burst_ok: true,
            }
        }
        3 => {
            // examples/shipment.stm: a fan-out whose children wait for their own event
            let n = 1 + rng.below(3) as usize;
            let parcels: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
            let outcomes = (0..n)
                .map(|_| event(if rng.chance(80) { "Delivered" } else { "Lost" }, json!({})))
                .collect();
            Scenario {
                definition: "Shipment",
                seed: Some(json!({ "parcels": parcels })),
                steps: vec![Step::ToChildren(outcomes)],
                burst_ok: true,
            }
        }
        4 => Scenario {
            // a timeout fired by the sweeper
            definition: "Timed",
            seed: None,
            steps: vec![Step::Advance(1.0), Step::Advance(1.5), Step::Advance(5.0)],
            burst_ok: true,
        },
        5 => Scenario {
            // a deferred event: Approve before Submit is held, then handled
            definition: "Deferring",
            seed: None,
            steps: vec![
                Step::Send(event("Approve", json!({}))),
                Step::Send(event("Submit", json!({}))),
            ],
            burst_ok: true,
        },
        _ => Scenario {
            // examples/webhook.stm: the payment webhook overtakes the confirmation
            definition: "Webhook",
            seed: None,
            steps: vec![
                Step::Send(event(
                    "PaymentSucceeded",
                    json!({"ref": format!("p-{}", rng.below(1000))}),
                )),
                Step::Send(event("Confirmed", json!({}))),
            ],
            burst_ok: true,
        },
    }
}

// --- comparing a disturbed run with the undisturbed one ---------------------------

/// Far enough ahead that every armed timer is due.
pub const FAR_FUTURE: f64 = 1.0e12;

/// What a scenario left, read once it is quiet.
pub struct Outcome {
    pub executions: BTreeMap<String, Execution>,
    /// Each execution's trace, as its steps' event kinds.
    pub traces: BTreeMap<String, Vec<String>>,
    /// The processed mark of each event the script sent, in order.
    pub marks: Vec<bool>,
    /// How many events the script sent.
    pub sent: usize,
}

/// Read a quiet scenario from `store`: the root and all its descendants with their traces,
/// the marks of the sent events; nothing may be left pending (outbox, spawns, timers).
pub async fn settled_outcome(
    store: &dyn ExecutionStore,
    root: &str,
    sent: &[(String, String)],
    what: &str,
) -> Outcome {
    let outbox = store.pending_outbox().await.expect("outbox");
    assert!(outbox.is_empty(), "{what}: outbox entries left: {outbox:?}");
    let spawns = store.pending_spawns().await.expect("spawns");
    assert!(spawns.is_empty(), "{what}: spawn intents left: {spawns:?}");
    let mut executions = BTreeMap::new();
    let mut traces = BTreeMap::new();
    let mut todo = vec![root.to_string()];
    while let Some(id) = todo.pop() {
        let exe = store
            .load(&id)
            .await
            .expect("load")
            .unwrap_or_else(|| panic!("{what}: no execution {id}"));
        todo.extend(exe.children.keys().cloned());
        let trace = store.read_trace(&id).await.expect("trace");
        let kinds: Vec<String> = trace
            .iter()
            .map(|t| {
                t.get("event_kind")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string()
            })
            .collect();
        traces.insert(id.clone(), kinds);
        executions.insert(id, exe);
    }
    let timers: Vec<DueTimer> = store
        .due_timers(FAR_FUTURE)
        .await
        .expect("timers")
        .into_iter()
        .filter(|t| executions.contains_key(&t.execution_id))
        .collect();
    assert!(timers.is_empty(), "{what}: timers left: {timers:?}");
    let mut marks = Vec::new();
    for (target, event_id) in sent {
        marks.push(
            store
                .is_processed(target, event_id)
                .await
                .expect("processed mark"),
        );
    }
    Outcome {
        executions,
        traces,
        marks,
        sent: sent.len(),
    }
}

/// What the comparisons counted, summed over the scenarios.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    pub processed: i64,
    pub commits: i64,
    pub lost: i64,
    pub duplicates: i64,
}

/// Compare a disturbed run (`got`) with the undisturbed one: the same executions, field by
/// field of what a user sees, one traced step and one processed mark per event, the same
/// traced steps; count what differs. `labels` name the two runs in messages.
pub fn compare(
    expected: &Outcome,
    got: &Outcome,
    tally: &mut Tally,
    (clean, faulty): (&str, &str),
    what: &str,
) {
    assert_eq!(
        expected.executions.keys().collect::<Vec<_>>(),
        got.executions.keys().collect::<Vec<_>>(),
        "{what}: executions differ"
    );
    for (id, want) in &expected.executions {
        let have = &got.executions[id];
        // what is promised is each event applied once, in order: one traced step per
        // event. The version counts commits, and a coalesced burst is one commit for
        // several events, so it may differ between runs that batched differently.
        let (steps_want, steps_have) = (expected.traces[id].len() as i64, got.traces[id].len() as i64);
        tally.processed += have.processed_events;
        tally.commits += have.version;
        let (dp, dv) = (
            have.processed_events - want.processed_events,
            steps_have - steps_want,
        );
        if dp < 0 || dv < 0 {
            tally.lost += (-dp).max(-dv);
        }
        if dp > 0 || dv > 0 {
            tally.duplicates += dp.max(dv);
        }
        assert_eq!(
            observable(have),
            observable(want),
            "{what}: execution {id} differs"
        );
        assert_eq!(
            (have.processed_events, steps_have),
            (want.processed_events, steps_want),
            "{what}: execution {id}: (processed_events, traced steps); traced steps: {clean} {:?}, \
             {faulty} {:?}",
            expected.traces[id],
            got.traces[id],
        );
        let (mut tw, mut th) = (expected.traces[id].clone(), got.traces[id].clone());
        assert_eq!(th.len(), tw.len(), "{what}: execution {id}: trace length");
        // the order of a joining parent's steps may differ (children finish in any order)
        tw.sort();
        th.sort();
        assert_eq!(th, tw, "{what}: execution {id}: traced event kinds");
    }
    assert_eq!(
        got.marks, expected.marks,
        "{what}: processed marks of the sent events"
    );
    assert!(
        got.marks.iter().all(|m| *m),
        "{what}: a sent event was not processed"
    );
}
