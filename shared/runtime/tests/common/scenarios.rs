//! What the randomized suites share (`crash_injection.rs`, `aws_faults.rs`,
//! `duplicates_and_order.rs`, `relay_sweeper.rs`): a seeded random source, the relay's
//! drawn bounds and the scenario machines with their event scripts.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};
use stm_core::{Event, Execution};
use stm_runtime::Definitions;
use stm_store::{DueTimer, ExecutionStore};

use super::{event, observable};

/// The seeded generator, the environment's numbers and the seed a failure prints: the
/// kit's, with which the store's contract suite draws its shapes too.
#[allow(unused_imports)] // a test binary without a randomized suite leaves some unused
pub use stm_testkit::{env_u64, Rng, SeedOnFailure};

/// The relay's bounds drawn: reads of 1 to 100 rows, passes of 1 to 300, lanes of 1 to 30
/// messages, small as often as large ([`Rng::spread`]). The production relay's are 2,000,
/// 100,000 and 100, under which a suite's few rows share one read and one lane: a reorder
/// across reads or lanes would never show, and with reads of 2 (the crash suite's) a
/// reorder inside one would rarely.
pub fn relay_bounds(rng: &mut Rng) -> stm_runtime::relay::RelayBounds {
    stm_runtime::relay::RelayBounds {
        read_rows: rng.spread(100) as usize,
        pass_rows: rng.spread(300) as usize,
        // from below one row's size (a read of one row, whatever its size) to many rows
        read_bytes: rng.spread(20_000) as usize,
        // one lane per message (16 side by side) to one for the whole read
        lane_messages: rng.spread(30) as usize,
    }
}

/// How many scenarios a randomized suite runs: `name` from the environment, else
/// `default`. Zero fails, since a suite that ran nothing would pass with nothing checked.
pub fn scenario_count(name: &str, default: u64) -> u64 {
    let n = env_u64(name, default);
    assert!(
        n > 0,
        "{name}=0 asks for no scenarios: the suite would check nothing (unset it for the default, {default})"
    );
    n
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

/// One applied step as the trace recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct TracedStep {
    pub event: String,
    pub data: Value,
    pub from: Option<String>,
    pub to: Option<String>,
}

impl TracedStep {
    fn read(row: &stm_core::Map) -> Self {
        let text = |key: &str| row.get(key).and_then(Value::as_str).map(str::to_string);
        TracedStep {
            event: text("event_kind").unwrap_or_else(|| "?".into()),
            data: row.get("event_data").cloned().unwrap_or(Value::Null),
            from: text("from_path"),
            to: text("to_path"),
        }
    }

    /// Who sent the event. Events of one sender reach an execution in the order they were
    /// sent (one FIFO group, and the sender emits them in order); events of different
    /// senders may interleave either way in a disturbed run: a region's or child's
    /// `Finished` races its siblings'. Everything else an execution receives here comes
    /// from one sender (the script for a root, the parent for a region).
    fn sender(&self) -> String {
        match (
            self.event.as_str(),
            self.data.get("child_id").and_then(Value::as_str),
        ) {
            ("Finished", Some(child)) => format!("child {child}"),
            _ => "its one sender".into(),
        }
    }
}

/// What a scenario left, read once it is quiet.
pub struct Outcome {
    pub executions: BTreeMap<String, Execution>,
    /// Each execution's trace, in the order its steps were applied.
    pub traces: BTreeMap<String, Vec<TracedStep>>,
    /// Per execution, the events the script sent it that left no trace step: a broadcast
    /// (a parent hands a domain event to its regions) commits a processed mark and the
    /// regions' outbox rows, but runs no step on the parent.
    pub untraced: BTreeMap<String, usize>,
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
    sent: &[(String, Event)],
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
        traces.insert(id.clone(), trace.iter().map(TracedStep::read).collect());
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
    // the script's events by target, kind and data (as JSON text, for an ordered key),
    // against the trace steps that match them
    let mut sent_alike: BTreeMap<(&str, &str, String), (Value, usize)> = BTreeMap::new();
    for (target, event) in sent {
        marks.push(
            store
                .is_processed(target, &event.id)
                .await
                .expect("processed mark"),
        );
        let data = Value::Object(event.data.clone());
        sent_alike
            .entry((target, &event.kind, data.to_string()))
            .or_insert((data, 0))
            .1 += 1;
    }
    let mut untraced = BTreeMap::new();
    for ((target, kind, _), (data, count)) in sent_alike {
        let traced = traces.get(target).map_or(0, |steps: &Vec<TracedStep>| {
            steps.iter().filter(|s| s.event == kind && s.data == data).count()
        });
        if count > traced {
            *untraced.entry(target.to_string()).or_insert(0) += count - traced;
        }
    }
    Outcome {
        executions,
        traces,
        untraced,
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

/// Compare a disturbed run (`got`) with the undisturbed one, execution by execution, on
/// what docs/reliability.md promises (each event applied once and in order, the same final record):
///
/// * the record: every field a user sees ([`observable`]) and `processed_events`;
/// * the applied steps, in order: the path each step went from and to, step by step, and
///   for each sender the events it sent, in order (see [`TracedStep::sender`]): an event
///   applied twice, lost, or overtaken by a later one of its sender fails;
/// * the version, within what commits allow: it counts commits; after the create's (the
///   execution PENDING), every commit applies at least one traced step or broadcast, so it
///   is at most one more than their number; an empty or repeated commit pushes it past. It may be lower, and differ between
///   the two runs: a coalesced burst commits several events at once, and a crash or a fault
///   changes which events arrive together;
/// * the processed marks of the events the script sent.
///
/// What differs is also counted in `tally` (`labels` name the two runs in messages).
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
        let (steps_want, steps_have) = (&expected.traces[id], &got.traces[id]);
        tally.processed += have.processed_events;
        tally.commits += have.version;
        let (dp, ds) = (
            have.processed_events - want.processed_events,
            steps_have.len() as i64 - steps_want.len() as i64,
        );
        if dp < 0 || ds < 0 {
            tally.lost += (-dp).max(-ds);
        }
        if dp > 0 || ds > 0 {
            tally.duplicates += dp.max(ds);
        }
        let shown = |steps: &[TracedStep]| {
            steps
                .iter()
                .map(|s| {
                    format!(
                        "{} {}->{}",
                        s.event,
                        s.from.as_deref().unwrap_or("-"),
                        s.to.as_deref().unwrap_or("-")
                    )
                })
                .collect::<Vec<_>>()
        };
        let steps_text = format!(
            "traced steps: {clean} {:?}, {faulty} {:?}",
            shown(steps_want),
            shown(steps_have)
        );
        assert_eq!(
            observable(have),
            observable(want),
            "{what}: execution {id} differs"
        );
        assert_eq!(
            (have.processed_events, steps_have.len()),
            (want.processed_events, steps_want.len()),
            "{what}: execution {id}: (processed_events, traced steps); {steps_text}"
        );
        let paths = |steps: &[TracedStep]| {
            steps
                .iter()
                .map(|s| (s.from.clone(), s.to.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            paths(steps_have),
            paths(steps_want),
            "{what}: execution {id}: the path of each step, in order; {steps_text}"
        );
        let by_sender = |steps: &[TracedStep]| {
            let mut senders: BTreeMap<String, Vec<(String, Value)>> = BTreeMap::new();
            for s in steps {
                senders
                    .entry(s.sender())
                    .or_default()
                    .push((s.event.clone(), s.data.clone()));
            }
            senders
        };
        assert_eq!(
            by_sender(steps_have),
            by_sender(steps_want),
            "{what}: execution {id}: each sender's events, in the order applied; {steps_text}"
        );
        for (run, outcome, exe) in [(clean, expected, want), (faulty, got, have)] {
            // the create's commit (PENDING, its Start still to run) plus at most one commit
            // per applied step or broadcast
            let commits = 1 + outcome.traces[id].len() + outcome.untraced.get(id).copied().unwrap_or(0);
            assert!(
                exe.version >= 1 && exe.version <= commits as i64,
                "{what}: execution {id}: the {run} run's version {} is not within 1..={commits} \
                 (the create, then each commit applies at least one step or broadcast); {steps_text}",
                exe.version,
            );
        }
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
