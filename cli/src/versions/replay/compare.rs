//! One recorded execution replayed on the new definition: a fresh execution started as
//! its trace's `Start` left it, each recorded event fed at its recorded time through the
//! same [`Driver`] step the worker runs (over a store in memory), and after each step the
//! active state, the actions run and the context compared with what the trace recorded.

use std::sync::{Arc, Mutex};

use stm_core::engine::ActionError;
use stm_core::pyvalue;
use stm_core::{Definition, Event, Execution, Map, Value};
use stm_runtime::{ActionRegistry, Definitions, Driver, ManualClock};
use stm_store::{ExecutionStore, MemoryStore};

use super::traces::Recorded;

/// A recorded `Timeout` is NEW's timer when NEW armed that state's timer within this many
/// seconds of the recorded one. The worker takes the time twice per step (once to arm the
/// timer, once to stamp the trace step): microseconds apart, never near a second.
const SAME_TIMER: f64 = 1.0;

/// A timer NEW would have fired more than this many seconds before a recorded step
/// changes what that step meets. The worker's timers fire late by the doorbell's or the
/// sweeper's delay (under a minute), so an event can be recorded after a timer was due
/// and before its `Timeout`: that is not a difference.
const TIMER_LATENESS: f64 = 60.0;

/// What one execution's replay found.
#[derive(Debug)]
pub enum Verdict {
    /// Every step replayed as recorded; `note` says where the replay stopped early.
    Same { note: Option<String> },
    /// The first step that went otherwise on NEW.
    Differs(Difference),
    /// Why the trace cannot be replayed (from which step, if it got that far).
    CannotReplay(String),
}

/// The first step of a trace that NEW does differently, with both sides.
#[derive(Debug)]
pub struct Difference {
    /// The step's index in the trace (0: its `Start`).
    pub step: i64,
    pub event: String,
    /// `(what, recorded, on NEW)`: `path`, `actions`, `context.KEY`, `timer PATH`,
    /// `status`, `outcome`, `error`, `step`.
    pub aspects: Vec<(String, String, String)>,
}

/// The new definitions, and the driver that steps their executions.
pub struct Replayer {
    driver: Driver,
    clock: Arc<ManualClock>,
    /// The project actions (not harel's built-ins) a step called: their effect on the
    /// context is not in the trace, so the replay stops there.
    called: Arc<Mutex<Vec<String>>>,
}

impl Replayer {
    /// A replayer of `machines` (NEW): harel's built-in actions run as the worker runs
    /// them (they are pure functions of the context and their inputs); every other action
    /// NEW names is a stub that records the call.
    pub fn new(machines: Vec<Definition>) -> Self {
        let called = Arc::new(Mutex::new(Vec::new()));
        let mut actions = ActionRegistry::with_builtins();
        let mut definitions = Definitions::new();
        for defn in machines {
            for name in defn.action_names() {
                if actions.get(&name).is_some() {
                    continue;
                }
                let called = called.clone();
                let stub = name.clone();
                actions.register(name, move |_| {
                    called
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(stub.clone());
                    Err(ActionError::new(
                        "RuntimeError",
                        format!("{stub} is not replayed"),
                    ))
                });
            }
            definitions.register(defn);
        }
        let clock = Arc::new(ManualClock::new(0.0));
        let driver =
            Driver::new(Arc::new(MemoryStore::new()), definitions, actions).with_clock(clock.clone());
        Replayer {
            driver,
            clock,
            called,
        }
    }

    /// Whether NEW has machine `id` (a submachine of one included).
    pub fn has_machine(&self, id: &str) -> bool {
        self.driver.definitions.get(id).is_some()
    }

    /// The machine of `exe` on NEW: by its id, else (an invoked child) by its FQN.
    fn machine_of(&self, exe: &Execution) -> Option<&Arc<Definition>> {
        let definitions = &self.driver.definitions;
        definitions
            .get(&exe.definition_id)
            .or_else(|| exe.definition_fqn.as_deref().and_then(|fqn| definitions.get(fqn)))
    }

    /// Replay `recorded` on NEW.
    pub async fn replay(&self, recorded: &Recorded) -> Verdict {
        let steps = &recorded.steps;
        let record = &recorded.execution;
        let Some(first) = steps.first() else {
            return Verdict::CannotReplay("its trace is empty".into());
        };
        let first = Step::of(first, 0);
        if first.kind != "Start" || first.control.is_some() {
            return Verdict::CannotReplay(format!(
                "its trace begins at step {} ({}), not at its Start: the worker keeps only the \
                 last STM_TRACE_MAX steps, or traced it from later on",
                first.index, first.kind
            ));
        }
        let Some(defn) = self.machine_of(record) else {
            return Verdict::CannotReplay(format!("NEW has no machine {:?}", record.definition_id));
        };
        // each execution on a store of its own: its timers are only its own
        let store = Arc::new(MemoryStore::new());
        let mut driver = self.driver.clone();
        driver.store = store.clone();
        self.called.lock().unwrap_or_else(|e| e.into_inner()).clear();

        let mut exe = fresh(record, defn, &first);
        for (position, raw) in steps.iter().enumerate() {
            let step = Step::of(raw, position);
            if let Some(command) = &step.control {
                return Verdict::Same {
                    note: Some(format!(
                        "replayed up to step {}, a `{command}` by an operator: what follows is not replayed",
                        step.index
                    )),
                };
            }
            if step.ignored {
                // the worker ran nothing for it (a stale Timeout): neither does the replay
                continue;
            }
            self.clock.set(step.timestamp);
            let differs = |aspects| {
                Verdict::Differs(Difference {
                    step: step.index,
                    event: step.kind.clone(),
                    aspects,
                })
            };
            let mut event = None;
            if position > 0 {
                let mut ev = Event::with_data(step.kind.clone(), step.data.clone())
                    .with_id(format!("replay-{}", step.index));
                match timer_check(store.as_ref(), &exe.id, &mut ev, step.timestamp).await {
                    Ok(None) => {}
                    Ok(Some(aspects)) => return differs(aspects),
                    Err(err) => return Verdict::CannotReplay(err.to_string()),
                }
                event = Some(ev);
            } else {
                // the Start's data goes into the context, as the engine's `Start` puts it
                exe.context.extend(step.data.clone());
            }
            let report = driver.run_step(&mut exe, event.as_ref()).await;
            if let Some(action) = self.called.lock().unwrap_or_else(|e| e.into_inner()).first() {
                return Verdict::CannotReplay(format!(
                    "step {} ({}) calls {action}, an action of the project: the trace records that it \
                     ran, not what it did",
                    step.index, step.kind
                ));
            }
            let report = match report {
                Ok(report) => report,
                Err(err) => return differs(vec![("step".into(), "ran".into(), format!("stopped: {err}"))]),
            };
            let mut aspects = Vec::new();
            if step.to_path != exe.active_path {
                aspects.push(("path".into(), path(&step.to_path), path(&exe.active_path)));
            }
            if step.actions != report.actions {
                aspects.push(("actions".into(), list(&step.actions), list(&report.actions)));
            }
            // the context the start's actions started from is not in the trace: the one
            // they left is taken as recorded
            let known_start = position > 0 || step.actions.is_empty();
            if known_start {
                aspects.extend(context_differences(&step.context, &exe.context, defn));
            }
            if !aspects.is_empty() {
                return differs(aspects);
            }
            if !known_start {
                exe.context = step.context.clone();
            }
        }
        let last = steps.last().map(|s| Step::of(s, steps.len() - 1));
        match last {
            // the record is what the last traced step left (it was stamped with the step's
            // time): its status and outcome are that step's too. Otherwise a command that
            // writes no trace step (terminate, suspend) changed it since.
            Some(last) if record.updated_at == Some(last.timestamp) => {
                let aspects = outcome_differences(record, &exe);
                if aspects.is_empty() {
                    Verdict::Same { note: None }
                } else {
                    Verdict::Differs(Difference {
                        step: last.index,
                        event: last.kind,
                        aspects,
                    })
                }
            }
            _ => Verdict::Same { note: None },
        }
    }
}

/// One trace step, read leniently: a key a step lacks reads as harel's default.
struct Step {
    index: i64,
    kind: String,
    data: Map,
    to_path: Option<String>,
    actions: Vec<String>,
    context: Map,
    timestamp: f64,
    /// The command of an operator's control step (`migrate`, `redrive`).
    control: Option<String>,
    /// The worker ignored it (a stale `Timeout`) and ran nothing.
    ignored: bool,
    assigned: Map,
}

impl Step {
    fn of(raw: &Map, position: usize) -> Self {
        let object = |key: &str| match raw.get(key) {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        };
        let text = |key: &str| raw.get(key).and_then(Value::as_str).map(str::to_string);
        Step {
            index: raw
                .get("index")
                .and_then(Value::as_i64)
                .unwrap_or(position as i64),
            kind: text("event_kind").unwrap_or_else(|| "?".into()),
            data: object("event_data"),
            to_path: text("to_path"),
            actions: match raw.get("actions") {
                Some(Value::Array(names)) => names
                    .iter()
                    .map(|n| n.as_str().map_or_else(|| pyvalue::repr(n), str::to_string))
                    .collect(),
                _ => Vec::new(),
            },
            context: object("context_out"),
            timestamp: raw.get("timestamp").and_then(Value::as_f64).unwrap_or(0.0),
            control: (text("cause").as_deref() == Some("control"))
                .then(|| text("command").unwrap_or_else(|| "control".into())),
            ignored: raw.contains_key("ignored"),
            assigned: object("assigned"),
        }
    }
}

/// A PENDING execution of NEW with `record`'s identity, and the context its trace's
/// `Start` (`first`) began from, as far as the trace tells it: the context it left, less
/// what that step's `set`s wrote (back to their defaults) and the `Start`'s own data
/// (which the replayed start puts back).
fn fresh(record: &Execution, defn: &Definition, first: &Step) -> Execution {
    let mut exe = Execution::new(record.id.clone(), record.definition_id.clone());
    exe.definition_fqn = record.definition_fqn.clone();
    exe.root_path = record.root_path.clone();
    exe.parent_id = record.parent_id.clone();
    exe.child_id = record.child_id.clone();
    exe.priority = record.priority;
    // unpinned: it steps on NEW's current version of its machine
    exe.definition_version = None;
    let mut context = first.context.clone();
    for key in first.assigned.keys().chain(first.data.keys()) {
        context.shift_remove(key);
    }
    // as the engine's reset does: a region's context is its parent's, with no defaults
    if exe.parent_id.is_none() || exe.definition_fqn.is_some() {
        defn.with_context_defaults(&mut context);
    }
    exe.context = context;
    exe
}

/// Before a recorded event: a timer NEW would have fired long before it, and for a
/// recorded `Timeout`, whether NEW armed that timer at the same time. A `Timeout` NEW
/// armed is given NEW's `fire_at` (the replay's own timer, which the step consumes).
async fn timer_check(
    store: &dyn ExecutionStore,
    id: &str,
    event: &mut Event,
    now: f64,
) -> Result<Option<Vec<(String, String, String)>>, stm_store::StoreError> {
    let timeout_path = (event.kind == "Timeout")
        .then(|| event.data.get("path").and_then(Value::as_str).map(str::to_string))
        .flatten();
    for due in store.due_timers(now - TIMER_LATENESS).await? {
        if due.execution_id == id && Some(&due.path) != timeout_path.as_ref() {
            return Ok(Some(vec![(
                format!("timer {}", due.path),
                "not fired before this step".into(),
                format!("fires {} before it", seconds(now - due.fire_at)),
            )]));
        }
    }
    let Some(path) = timeout_path else {
        return Ok(None);
    };
    let Some(recorded) = event.data.get("fire_at").and_then(Value::as_f64) else {
        // a Timeout sent by hand: the engine's own guard decides
        return Ok(None);
    };
    if path.starts_with('@') {
        // the `ttl` (the engine checks it against `expires_at`) and the parked recheck
        // (nothing to replay): neither is a state's timer
        return Ok(None);
    }
    let what = format!("timer {path}");
    Ok(match store.armed_timer(id, &path).await? {
        Some(armed) if (armed - recorded).abs() <= SAME_TIMER => {
            event.data.insert("fire_at".into(), pyvalue::float(armed));
            None
        }
        Some(armed) => Some(vec![(
            what,
            "fired".into(),
            if armed > recorded {
                format!("armed for {} later", seconds(armed - recorded))
            } else {
                format!("armed for {} earlier", seconds(recorded - armed))
            },
        )]),
        None => Some(vec![(what, "fired".into(), "not armed".into())]),
    })
}

/// The keys whose values differ, each as `context.KEY`. A field NEW declares with a
/// default, which the recorded context lacks and the replay holds at that default, is not
/// one: the execution started before NEW declared it (`stm versions check` says so).
fn context_differences(recorded: &Map, replayed: &Map, defn: &Definition) -> Vec<(String, String, String)> {
    let shown = |v: Option<&Value>| v.map_or_else(|| "(absent)".to_string(), pyvalue::repr);
    let declared_default = |key: &str| defn.context_schema.get(key).and_then(|f| f.default.as_ref());
    let mut out = Vec::new();
    let keys = recorded
        .keys()
        .chain(replayed.keys().filter(|k| !recorded.contains_key(*k)));
    for key in keys {
        let (a, b) = (recorded.get(key), replayed.get(key));
        if a.is_none() && b.is_some() && b == declared_default(key) {
            continue;
        }
        if a != b {
            out.push((format!("context.{key}"), shown(a), shown(b)));
        }
    }
    out
}

/// The status, outcome and error of the record against the replay's.
fn outcome_differences(record: &Execution, replayed: &Execution) -> Vec<(String, String, String)> {
    let text = |s: &Option<String>| s.clone().unwrap_or_else(|| "None".into());
    let mut out = Vec::new();
    if record.status != replayed.status {
        out.push((
            "status".into(),
            record.status.to_string(),
            replayed.status.to_string(),
        ));
    }
    if record.outcome != replayed.outcome {
        out.push(("outcome".into(), text(&record.outcome), text(&replayed.outcome)));
    }
    if record.error != replayed.error {
        out.push(("error".into(), text(&record.error), text(&replayed.error)));
    }
    out
}

fn path(p: &Option<String>) -> String {
    p.clone().unwrap_or_else(|| "None".into())
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// A span of time, to the tenth of a second: `55.0 s`.
fn seconds(span: f64) -> String {
    format!("{span:.1} s")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MACHINE: &str = "event Go {}\nmachine M {\n  context {\n    n: int = 0\n    attempts: int = 0\n    wait: float?\n  }\n  initial A\n  state A {\n    on enter harel.lib.exponential_backoff(counter: \"attempts\", into: \"wait\")\n  }\n  state B {\n    on enter acme.note()\n  }\n  final C done\n  from A to B on Go set context.n = context.n + 1\n  from B to C on Go\n}\n";

    fn machine(text: &str) -> Definition {
        stm_core::dsl::load_definition_str(text, None, None).expect("a valid machine")
    }

    /// `events` run through the worker's step with traces on: what the store recorded.
    fn record(events: &[&str]) -> Recorded {
        let mut actions = ActionRegistry::with_builtins();
        actions.register("acme.note", |input| {
            input.context.insert("noted".into(), Value::from(true));
            Ok(Value::Null)
        });
        let mut definitions = Definitions::new();
        definitions.register(machine(MACHINE));
        let store = Arc::new(MemoryStore::new());
        let clock = Arc::new(ManualClock::new(1_000.0));
        let driver = Driver::new(store.clone(), definitions, actions)
            .with_clock(clock.clone())
            .with_trace(true);
        block_on(async {
            driver.create("M", None, Some("m-1")).await.expect("created");
            for kind in events {
                clock.advance(1.0);
                driver
                    .process("m-1", &Event::new(*kind))
                    .await
                    .expect("processed");
            }
            Recorded {
                execution: store.load("m-1").await.expect("load").expect("stored"),
                steps: store.read_trace("m-1").await.expect("its trace"),
            }
        })
    }

    fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(f)
    }

    #[test]
    fn a_start_that_ran_actions_keeps_its_recorded_context() {
        // the start's backoff bumped `attempts` from 0 to 1: replayed from the context it
        // left, it would bump it again
        let recorded = record(&[]);
        let verdict = block_on(Replayer::new(vec![machine(MACHINE)]).replay(&recorded));
        assert!(matches!(verdict, Verdict::Same { note: None }), "{verdict:?}");
    }

    #[test]
    fn a_project_action_stops_the_replay_at_its_step() {
        let recorded = record(&["Go", "Go"]);
        let verdict = block_on(Replayer::new(vec![machine(MACHINE)]).replay(&recorded));
        let Verdict::CannotReplay(why) = verdict else {
            panic!("{verdict:?}");
        };
        assert!(
            why.starts_with("step 1 (Go) calls acme.note, an action of the project"),
            "{why}"
        );
    }

    #[test]
    fn a_set_that_differs_is_named_with_both_values() {
        let recorded = record(&["Go"]);
        let changed = MACHINE.replace("context.n + 1", "context.n + 2");
        let verdict = block_on(Replayer::new(vec![machine(&changed)]).replay(&recorded));
        let Verdict::CannotReplay(_) = verdict else {
            panic!("B's action is reached either way: {verdict:?}");
        };
        let changed = changed.replace("    on enter acme.note()\n", "");
        let verdict = block_on(Replayer::new(vec![machine(&changed)]).replay(&recorded));
        let Verdict::Differs(d) = verdict else {
            panic!("{verdict:?}");
        };
        assert_eq!((d.step, d.event.as_str()), (1, "Go"));
        assert!(
            d.aspects.contains(&("context.n".into(), "1".into(), "2".into())),
            "{:?}",
            d.aspects
        );
    }

    #[test]
    fn an_operators_step_ends_the_replay_there() {
        let mut recorded = record(&[]);
        let mut migrate = recorded.steps[0].clone();
        migrate.insert("cause".into(), Value::from("control"));
        migrate.insert("command".into(), Value::from("migrate"));
        migrate.insert("to_path".into(), Value::from("Elsewhere"));
        migrate.insert("index".into(), Value::from(1));
        recorded.steps.push(migrate);
        let verdict = block_on(Replayer::new(vec![machine(MACHINE)]).replay(&recorded));
        let Verdict::Same { note: Some(note) } = verdict else {
            panic!("{verdict:?}");
        };
        assert!(note.starts_with("replayed up to step 1, a `migrate`"), "{note}");
    }
}
