//! Tests of [`explain`]: each reason on a small machine, and the explanation held to the
//! step's own choice over every state and event of the examples.

use super::guard::event_matches;
use super::resolve::{resolve, resolve_at};
use super::*;
use crate::dsl::{load_definition_file, load_definition_str};

const SHOP: &str = r#"
event Pay { amount: int }
event Ping {}
event Hold {}
event Poke {}
event Nudge {}
machine Shop {
  context { limit: int = 10 }
  initial Open
  state Open {
    initial Browsing
    defer Hold
    state Browsing {}
    state Paying { on activity audit.log() }
    from Browsing to Paying on Pay where event.amount > context.limit
    from Browsing to Paying on Pay where event.amount > 100
    from Browsing choose on Ping {
      when context.limit > 50 to Paying
    }
    from Paying to Browsing on Ping
    from Browsing to Paying on Nudge
  }
  final Closed success
  from Open to Closed on Pay
  from Open to Closed on Poke
}
"#;

fn shop() -> Definition {
    load_definition_str(SHOP, None, None).expect("shop loads")
}

fn at(defn: &Definition, path: &str) -> Execution {
    let mut exe = Execution::new("e", "Shop");
    defn.with_context_defaults(&mut exe.context);
    exe.status = Status::Running;
    exe.active_path = Some(path.to_string());
    exe
}

fn pay(amount: i64) -> Event {
    let mut data = Map::new();
    data.insert("amount".into(), Value::from(amount));
    Event::with_data("Pay", data)
}

fn reasons(why: &Explanation) -> Vec<(String, Reason)> {
    why.considered
        .iter()
        .map(|c| (format!("{:?} {}", c.order, c.source), c.reason))
        .collect()
}

#[test]
fn the_first_holding_guard_is_taken_and_the_rest_are_outranked() {
    let defn = shop();
    let why = explain(&defn, &at(&defn, "Open.Browsing"), &pay(500));
    assert_eq!(
        reasons(&why),
        [
            ("Some(1) Open.Browsing".into(), Reason::Taken),
            ("Some(2) Open.Browsing".into(), Reason::OutrankedByEarlier),
            ("Some(3) Open".into(), Reason::OutrankedByInner),
        ]
    );
    assert_eq!(why.outcome, Outcome::Taken);
    let guard = why.considered[0].guard.clone().expect("a guard");
    assert_eq!(
        (guard.text.as_str(), guard.value),
        ("amount > context.limit", true)
    );
}

#[test]
fn guards_that_do_not_hold_say_so_with_their_values() {
    let defn = shop();
    let why = explain(&defn, &at(&defn, "Open.Browsing"), &pay(5));
    assert_eq!(
        reasons(&why),
        [
            ("Some(1) Open.Browsing".into(), Reason::GuardFalse),
            ("Some(2) Open.Browsing".into(), Reason::GuardFalse),
            ("Some(3) Open".into(), Reason::Taken),
        ]
    );
    let text = why.to_string();
    assert!(
        text.contains("[amount > context.limit: false]: guard false"),
        "{text}"
    );
    assert!(text.contains("[amount > 100: false]: guard false"), "{text}");
    assert!(
        text.contains("3. Open -> Closed on Pay [no guard]: taken"),
        "{text}"
    );
}

#[test]
fn a_transition_of_a_state_not_active_is_listed_after_the_considered_ones() {
    let defn = shop();
    let why = explain(&defn, &at(&defn, "Open.Browsing"), &Event::new("Ping"));
    assert_eq!(
        reasons(&why),
        [
            ("Some(1) Open.Browsing".into(), Reason::NoBranch),
            ("None Open.Paying".into(), Reason::StateNotActive),
        ]
    );
    match &why.considered[0].target {
        Target::Choose { branches, chosen, .. } => {
            assert_eq!(branches[0].0.text, "context.limit > 50");
            assert!(!branches[0].0.value);
            assert_eq!(chosen, &None);
        }
        other => panic!("not a choose: {other:?}"),
    }
    // nothing taken, no defer, no `on activity` on Browsing: dropped
    assert_eq!(why.outcome, Outcome::NoTransition);
    assert!(why
        .to_string()
        .contains("=> no transition for the event: it is dropped"));
}

#[test]
fn an_event_no_transition_takes_is_deferred_run_as_activity_or_dropped() {
    let defn = shop();
    let why = explain(&defn, &at(&defn, "Open.Browsing"), &Event::new("Hold"));
    assert!(why.considered.is_empty());
    assert_eq!(why.outcome, Outcome::Deferred { by: "Open".into() });
    assert!(why.to_string().contains("=> event deferred: Open defers Hold"));

    // Paying has an `on activity`; Hold is still deferred there (the defer comes first)
    let why = explain(&defn, &at(&defn, "Open.Paying"), &Event::new("Hold"));
    assert_eq!(why.outcome, Outcome::Deferred { by: "Open".into() });
    // Nudge: only Browsing takes it, so at Paying its `on activity` runs
    let why = explain(&defn, &at(&defn, "Open.Paying"), &Event::new("Nudge"));
    assert_eq!(
        reasons(&why),
        [("None Open.Browsing".into(), Reason::StateNotActive)]
    );
    assert_eq!(
        why.outcome,
        Outcome::Activity {
            state: "Open.Paying".into()
        }
    );

    let why = explain(&defn, &at(&defn, "Closed"), &Event::new("Poke"));
    assert_eq!(reasons(&why), [("None Open".into(), Reason::StateNotActive)]);
    assert_eq!(why.outcome, Outcome::NoTransition);
}

#[test]
fn a_finished_execution_considers_nothing_and_control_events_say_what_they_do() {
    let defn = shop();
    let mut exe = at(&defn, "Closed");
    exe.status = Status::Done;
    let why = explain(&defn, &exe, &pay(500));
    assert_eq!(why.outcome, Outcome::NotRunning(Status::Done));
    assert!(why.considered.is_empty());
    assert!(why.to_string().contains("the execution is DONE"));
    let why = explain(&defn, &at(&defn, "Open.Browsing"), &Event::new("Reset"));
    assert!(matches!(why.outcome, Outcome::Control(_)));
}

#[test]
fn explaining_changes_nothing_and_agrees_with_the_step() {
    let defn = shop();
    for (event, path) in [
        (pay(500), "Open.Browsing"),
        (pay(5), "Open.Browsing"),
        (Event::new("Ping"), "Open.Paying"),
    ] {
        let mut exe = at(&defn, path);
        let before = exe.clone();
        let why = explain(&defn, &exe, &event);
        assert_eq!(exe, before);
        let taken = why
            .considered
            .iter()
            .find(|c| c.reason == Reason::Taken)
            .map(|c| c.target.clone());
        process(&defn, &mut exe, &event, 0.0, &mut NoActions).expect("step");
        let Some(Target::State(to)) = taken else {
            panic!("{why:?}")
        };
        assert_eq!(
            exe.active_path.as_deref(),
            Some(to.as_str()),
            "{event:?} at {path}"
        );
    }
}

/// Every state of every example as the active one, every event kind the machine knows:
/// the explanation's taken transition is the one the engine's resolution picks.
#[test]
fn the_explanation_takes_what_the_engine_resolves_on_every_example() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/") {
        let path = entry.expect("an entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("stm") {
            continue;
        }
        let defn = load_definition_file(&path, None).expect("an example loads");
        for (n, _) in defn.nodes.iter().enumerate().skip(1) {
            let active = defn.path(NodeId(n)).to_string();
            let mut exe = Execution::new("e", defn.id.clone());
            defn.with_context_defaults(&mut exe.context);
            exe.status = Status::Running;
            exe.active_path = Some(active.clone());
            for kind in defn.event_kinds() {
                let event = if kind == "Timeout" {
                    timeout_event("e", &active, 1.0)
                } else {
                    Event::new(kind.clone())
                };
                let why = explain(&defn, &exe, &event);
                let resolved = if kind == "Timeout" {
                    let root = defn.root;
                    resolve_at(&defn, root, &active, &|t| event_matches(t, &event, &exe.context))
                } else if ["Start", "Reset", "SetState", "Finished"].contains(&kind.as_str()) {
                    None
                } else {
                    resolve(&defn, &exe, &|t| event_matches(t, &event, &exe.context), true)
                };
                assert_eq!(why.taken_at(), resolved, "{kind} at {active} in {}", defn.id);
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "only {checked} cases");
}
