//! Unit tests of the engine on a hand-built machine and on `.stm` machines.

use super::*;
use crate::definition::Node;

use crate::definition::{EventFilter, Transition};
use crate::execution::FanOutJoin;
use crate::ids;
use indexmap::IndexMap;

/// A two-state loop built by hand: A --Go--> B --Back--> A.
fn two_state() -> Definition {
    let mut d = Definition::new("Loop");
    let root = d.root;
    d.node_mut(root).start_state = Some("A".into());
    let a = d.add_node(root, Node::new("A", "A", NodeKind::Leaf));
    let b = d.add_node(root, Node::new("B", "B", NodeKind::Leaf));
    for (src, dst, kind) in [(a, b, "Go"), (b, a, "Back")] {
        d.node_mut(root).transitions.push(Transition {
            source: src,
            target: Some(dst),
            event_filter: Some(EventFilter {
                kinds: vec![kind.into()],
                predicate: None,
            }),
            selector: None,
            choice: None,
            assignments: vec![],
            pos: None,
            event_pos: Vec::new(),
        });
    }
    d
}

#[test]
fn start_and_events_move_the_active_path() {
    let d = two_state();
    let mut exe = Execution::new("e", "Loop");
    start(&d, &mut exe, 0.0, &mut NoActions).expect("start");
    assert_eq!(exe.active_path.as_deref(), Some("A"));
    assert_eq!(exe.status, Status::Running);
    process(&d, &mut exe, &Event::new("Go"), 0.0, &mut NoActions).expect("go");
    assert_eq!(exe.active_path.as_deref(), Some("B"));
    // an unknown event is "no transition", not an error
    process(&d, &mut exe, &Event::new("Nope"), 0.0, &mut NoActions).expect("nope");
    assert_eq!(exe.active_path.as_deref(), Some("B"));
    assert_eq!(exe.processed_events, 2);
}

const SPAWNERS: &str = r#"
event Stop {}
event Again {}
machine Worker {
  initial W
  state W {}
  final Ok success
  from W to Ok on Again
}
machine Spawner {
  context {
    items: any = []
  }
  initial Fan
  state Fan {
    invoke Worker for item in items
    with { x: item }
  }
  orthogonal Split {
    state A {
      initial A1
      state A1 {}
    }
    state B {
      initial B1
      state B1 {}
    }
  }
  state Call { invoke Worker }
  state Paused {}
  final Joined success
  final Broken failed
  final Called success
  from Fan join all to Joined else to Broken
  from Fan to Paused on Stop
  from Paused to Fan on Again
  from Joined to Split on Again
  from Split to Call on Stop
  from Call to Called on Returned
}
"#;

/// The join's selector (`harel.lib.join_success`): every instance succeeds here.
struct JoinPasses;
impl ActionHost for JoinPasses {
    fn call(&mut self, _: &ActionCall<'_>, _: &mut Map) -> Result<Value, ActionError> {
        Ok(Value::from("pass"))
    }
}

fn spawned(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Spawn(specs) => Some(specs.iter().map(|s| s.child_id.clone())),
            _ => None,
        })
        .flatten()
        .collect()
}

fn cancelled(effects: &[Effect]) -> Vec<String> {
    let mut to: Vec<String> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Emit { to: Some(to), event } if event.kind == "Cancel" => Some(to.clone()),
            _ => None,
        })
        .collect();
    to.sort();
    to
}

fn finished(child_id: &str) -> Event {
    let mut data = Map::new();
    data.insert("child_id".into(), Value::from(child_id));
    data.insert("outcome".into(), Value::from("success"));
    Event::with_data("Finished", data)
}

/// With a parent id so long that every child id is bounded (`ids::child_id`), the
/// engine still finds its children: a fan-out's re-entry replaces its instances, leaving
/// a fan-out or an orthogonal node cancels what runs, a join exposes harel's keys, and
/// a single invoke's `Finished` becomes `Returned`.
#[test]
fn bounded_child_ids_keep_the_children_bookkeeping() {
    let defn = crate::dsl::load_definition_str(SPAWNERS, Some("Spawner"), None).expect("machine");
    let parent = "p".repeat(125);
    let mut exe = Execution::new(parent.clone(), "Spawner");
    exe.context.insert("items".into(), serde_json::json!(["a", "b"]));
    let step = |exe: &mut Execution, ev: Option<Event>| match ev {
        None => start(&defn, exe, 0.0, &mut JoinPasses).expect("start"),
        Some(ev) => process(&defn, exe, &ev, 0.0, &mut JoinPasses).expect("process"),
    };
    let first = spawned(&step(&mut exe, None));
    assert_eq!(first.len(), 2);
    for id in &first {
        assert!(ids::valid_group_id(id) && id.contains('~'), "{id}");
    }
    // leaving the fan-out early cancels both instances
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(cancelled(&step(&mut exe, Some(Event::new("Stop")))), sorted);
    // re-entering replaces them (fresh ids, the old ones dropped), once
    let second = spawned(&step(&mut exe, Some(Event::new("Again"))));
    assert_eq!(second.len(), 2);
    assert!(second.iter().all(|id| !first.contains(id)));
    assert_eq!(
        exe.children.keys().cloned().collect::<Vec<_>>(),
        second,
        "only this entry's instances"
    );
    assert!(spawned(&step(&mut exe, Some(finished(&second[0])))).is_empty());
    step(&mut exe, Some(finished(&second[1])));
    assert_eq!(exe.active_path.as_deref(), Some("Joined"));
    let results = exe.context.get("region_results").cloned().unwrap_or_default();
    assert_eq!(
        results.as_object().map(|r| r.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["Fan:0".to_string(), "Fan:1".to_string()])
    );
    // an orthogonal node's regions are cancelled when it is left
    let regions = spawned(&step(&mut exe, Some(Event::new("Again"))));
    assert_eq!(regions.len(), 2);
    let mut sorted = regions.clone();
    sorted.sort();
    let left = step(&mut exe, Some(Event::new("Stop")));
    assert_eq!(cancelled(&left), sorted);
    // a single invoke: its bounded child's `Finished` is the `Returned` it waits for
    let call = spawned(&left);
    assert_eq!(call.len(), 1);
    assert_eq!(exe.children.get(&call[0]).map(|c| c.key.as_str()), Some("Call:0"));
    step(&mut exe, Some(finished(&call[0])));
    assert_eq!(exe.active_path.as_deref(), Some("Called"));
}

#[test]
fn timeout_event_id_is_stable() {
    let ev = timeout_event("x", "A.B", 1030.0);
    assert_eq!(ev.id, "timeout:x:A.B:1030.0");
    assert_eq!(ev.data.get("fire_at"), Some(&serde_json::json!(1030.0)));
}

/// A counted join steps as harel's `children` do: over random walks of reports (in any
/// order, some twice, some stale from a fan-out already left), leaving and re-entering
/// the fan-out, both layouts spawn and cancel the same children and move through the
/// same states, and the counted join's outcomes are what harel's entries add up to.
#[test]
fn counted_joins_step_as_harels_children_do() {
    let defn = crate::dsl::load_definition_str(SPAWNERS, Some("Spawner"), None).expect("machine");
    let seed = stm_testkit::env_u64(stm_env::COUNTED_JOIN_SEED, 0xC0_7E);
    let _report = stm_testkit::SeedOnFailure::new(
        "counted_joins_step_as_harels_children_do",
        stm_env::COUNTED_JOIN_SEED,
        seed,
    );
    let mut rng = stm_testkit::Rng::new(seed);
    for walk in 0..200 {
        // a parent id long enough to bound its children's ids, now and then
        let id = if rng.chance(20) {
            "q".repeat(125)
        } else {
            format!("p{walk}")
        };
        let items: Vec<Value> = (0..rng.between(0, 12)).map(Value::from).collect();
        let mut harel = Execution::new(id.clone(), "Spawner");
        harel.context.insert("items".into(), Value::Array(items));
        let mut counted = harel.clone();
        counted.fan_out_join = FanOutJoin::Counted;
        let step = |exe: &mut Execution, ev: Option<&Event>| match ev {
            None => start(&defn, exe, 0.0, &mut JoinPasses).expect("start"),
            Some(ev) => process(&defn, exe, ev, 0.0, &mut JoinPasses).expect("process"),
        };
        let mut all_spawned = spawned(&step(&mut harel, None));
        assert_eq!(
            spawned(&step(&mut counted, None)),
            all_spawned,
            "walk {walk}: the spawn"
        );
        let mut outcomes: IndexMap<String, String> = IndexMap::new();
        for at in 0..rng.between(1, 40) {
            let event = match rng.below(10) {
                0 => Event::new("Stop"),
                1 => Event::new("Again"),
                _ if !all_spawned.is_empty() => {
                    let child = rng.pick(&all_spawned).clone();
                    let outcome = outcomes
                        .entry(child.clone())
                        .or_insert_with(|| if rng.chance(80) { "success" } else { "failed" }.to_string())
                        .clone();
                    let mut ev = finished(&child);
                    ev.data.insert("outcome".into(), Value::from(outcome));
                    ev
                }
                _ => Event::new("Again"),
            };
            let by_children = step(&mut harel, Some(&event));
            let by_count = step(&mut counted, Some(&event));
            let context = format!("walk {walk}, event {at} ({})", event.kind);
            assert_eq!(spawned(&by_count), spawned(&by_children), "{context}: spawned");
            assert_eq!(
                cancelled(&by_count),
                cancelled(&by_children),
                "{context}: cancelled"
            );
            assert_eq!(
                counted.active_path, harel.active_path,
                "{context}: the active state"
            );
            assert_eq!(counted.status, harel.status, "{context}: the status");
            assert_eq!(
                counted.has_unfinished_children(),
                harel.has_unfinished_children(),
                "{context}"
            );
            all_spawned.extend(spawned(&by_children));
            if let (Some(Value::Object(by_instance)), Some(Value::Object(by_site))) = (
                harel.context.get("region_results"),
                counted.context.get("region_results"),
            ) {
                let mut tally: IndexMap<String, u64> = IndexMap::new();
                for (_, entry) in by_instance.iter().filter(|(key, _)| key.starts_with("Fan:")) {
                    let outcome = entry.get("outcome").and_then(Value::as_str).unwrap_or("none");
                    *tally.entry(outcome.to_string()).or_default() += 1;
                }
                let summary = by_site.get("Fan").and_then(|s| s.get("outcomes")).cloned();
                let mut counts: Vec<(String, u64)> = summary
                    .and_then(|s| s.as_object().cloned())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.as_u64().unwrap_or(0)))
                    .collect();
                let mut expected: Vec<(String, u64)> = tally.into_iter().collect();
                counts.sort();
                expected.sort();
                assert_eq!(counts, expected, "{context}: the join's outcomes");
            }
        }
    }
}

/// A counted join's whole tally, delivered at once (`__joined__`: its reports were
/// recorded outside the parent), completes the join: the parent moves on, the counts are
/// the tally's, the instances that did not succeed are listed; a second tally, or one for
/// another entry of the site, changes nothing.
#[test]
fn a_delivered_tally_completes_a_counted_join_once() {
    let defn = crate::dsl::load_definition_str(SPAWNERS, Some("Spawner"), None).expect("machine");
    let mut exe = Execution::new("p", "Spawner");
    exe.fan_out_join = FanOutJoin::Counted;
    exe.context
        .insert("items".into(), serde_json::json!(["a", "b", "c"]));
    let spawned = spawned(&start(&defn, &mut exe, 0.0, &mut JoinPasses).expect("start"));
    assert_eq!(spawned.len(), 3);
    assert!(exe.children.is_empty(), "no entry per instance");
    let tally = |prefix: &str| {
        let mut data = Map::new();
        data.insert(
            crate::execution::counted_join::JOINED_KEY.into(),
            serde_json::json!({"prefix": prefix, "outcomes": {"success": 2, "failed": 1}, "others": [[1, "failed"]]}),
        );
        Event::with_data("Finished", data)
    };
    // another entry's tally (an earlier seq) is not this join's
    process(&defn, &mut exe, &tally("p:Fan:9:"), 0.0, &mut JoinPasses).expect("stale");
    assert_eq!(exe.active_path.as_deref(), Some("Fan"), "still joining");
    process(&defn, &mut exe, &tally("p:Fan:0:"), 0.0, &mut JoinPasses).expect("joined");
    assert_eq!(exe.active_path.as_deref(), Some("Joined"));
    let summary = &exe.context["region_results"]["Fan"];
    assert_eq!(
        summary["outcomes"],
        serde_json::json!({"success": 2, "failed": 1})
    );
    assert_eq!(summary["outcome"], serde_json::json!("failed"));
    assert_eq!(
        summary["listed"],
        serde_json::json!({"Fan:1": {"outcome": "failed"}})
    );
    let before = exe.clone();
    process(&defn, &mut exe, &tally("p:Fan:0:"), 0.0, &mut JoinPasses).expect("again");
    assert_eq!(exe.joins, before.joins, "a second tally changes nothing");
}
