//! Rollouts in the driver and the sweeper's evaluation, over the in-memory store: a new
//! execution starts on the version its machine's route picks for its id, and its children
//! follow it; a canary goes back to weight 0 exactly when its tally over the windows that
//! are its own reaches the rate over the minimum, and its event goes on the bus once, on a
//! later run when the bus refused it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stm_core::version::{frozen_file_name, version_of, FrozenVersion, Version};
use stm_runtime::rollout::{evaluate, RolloutPolicy, ROLLBACK_DETAIL_TYPE};
use stm_runtime::status::{MemoryBus, StatusEvents};
use stm_runtime::{ActionRegistry, Driver, DriverError};
use stm_store::contract::{env_u64, Rng, SeedOnFailure};
use stm_store::route::{bucket, tally_key, window_of, Canary, Route, Routes};
use stm_store::{ExecutionStore, MemoryStore, Tally};

/// P invokes an inline body whose first state tells which version's it is: A in v1, B in v2.
const P1: &str = "event Go {}\n\nmachine P {\n  initial Idle\n  state Idle {}\n  state Calling {\n    invoke {\n      initial A\n      state A {}\n    }\n  }\n  from Idle to Calling on Go\n}\n";

fn p2() -> String {
    P1.replace(
        "      initial A\n      state A {}\n",
        "      initial B\n      state B {}\n",
    )
}

fn version(text: &str) -> Version {
    version_of(&stm_core::dsl::load_definition_str(text, None, None).expect("valid"))
}

/// v2 current, v1 frozen beside it: both deployed.
fn deployed() -> PathBuf {
    let dir = stm_testkit::scratch_dir("rollout-runtime");
    std::fs::create_dir_all(dir.join("versions")).expect("make the folder");
    std::fs::write(dir.join("p.stm"), p2()).expect("write p.stm");
    let defn = stm_core::dsl::load_definition_str(P1, None, None).expect("valid");
    let frozen = FrozenVersion::new(&defn, Some("v1".into()));
    std::fs::write(
        dir.join("versions")
            .join(frozen_file_name(&frozen.machine, frozen.version)),
        frozen.to_text(),
    )
    .expect("write v1");
    dir
}

fn driver(store: &Arc<MemoryStore>, dir: &Path) -> Driver {
    let definitions = stm_runtime::config::load_definitions_dir(dir).expect("loads");
    // no cache: each create reads the routes as they are now
    Driver::new(store.clone(), definitions, ActionRegistry::with_builtins())
        .with_routes_ttl(std::time::Duration::ZERO)
}

fn canary_route(primary: Version, canary: Version, weight: u8) -> Route {
    let mut route = Route::to(primary);
    route.canary = Some(Canary {
        version: canary,
        weight,
        since: 0.0,
        window_seconds: None,
    });
    route
}

async fn put(store: &MemoryStore, machine: &str, route: Route) {
    let mut routes = store.routes().await.expect("routes");
    routes.machines.insert(machine.into(), route);
    assert!(store.put_routes(&routes, routes.generation).await.expect("put"));
}

/// The first `n` ids of `prefix` whose bucket is under `weight` (`under`) or not.
fn ids(prefix: &str, weight: u8, under: bool, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|id| (bucket(id) < weight) == under)
        .take(n)
        .collect()
}

#[tokio::test]
async fn new_executions_start_where_the_route_sends_them_and_children_follow_their_parent() {
    let (v1, v2) = (version(P1), version(&p2()));
    let dir = deployed();
    let store = Arc::new(MemoryStore::new());
    let driver = driver(&store, &dir);
    let go = stm_core::Event::new("Go");

    // no route: the current version
    let exe = driver.create("P", None, Some("plain")).await.expect("create");
    assert_eq!(exe.definition_version, Some(v2));

    // 30% to v2, the rest to v1: each id where its bucket says, and its child on the body
    // of its parent's version
    put(&store, "P", canary_route(v1, v2, 30)).await;
    for (id, expected, body) in ids("c", 30, true, 4)
        .into_iter()
        .map(|id| (id, v2, "B"))
        .chain(ids("p", 30, false, 4).into_iter().map(|id| (id, v1, "A")))
    {
        let exe = driver.create("P", None, Some(&id)).await.expect("create");
        assert_eq!(exe.definition_version, Some(expected), "{id}");
        let exe = driver
            .process(&id, &go.clone().with_id(format!("{id}-go")))
            .await
            .expect("Go");
        let child_id = exe.children.keys().next().cloned().expect("a child");
        let child = store.load(&child_id).await.expect("load").expect("the child");
        assert_eq!(child.active_path.as_deref(), Some(body), "{id}'s child");
    }

    // weight 0: the ids the canary took now start on the primary
    put(&store, "P", canary_route(v1, v2, 0)).await;
    for id in ids("after", 30, true, 4) {
        let exe = driver.create("P", None, Some(&id)).await.expect("create");
        assert_eq!(exe.definition_version, Some(v1), "{id}");
    }

    // a route to a version these definitions lack: refused, naming it and what to do
    let missing: Version = "00000000000000ff".parse().expect("a version");
    put(&store, "P", Route::to(missing)).await;
    let err = driver.create("P", None, Some("lost")).await.expect_err("refused");
    assert!(matches!(err, DriverError::RoutedVersionMissing { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("00000000000000ff") && text.contains("stm versions route"),
        "{text}"
    );
    assert!(
        store.load("lost").await.expect("load").is_none(),
        "nothing written"
    );
}

fn policy(rate: f64, min: u64) -> RolloutPolicy {
    RolloutPolicy {
        failure_rate: rate,
        min_finished: min,
        window_seconds: 60,
    }
}

#[tokio::test]
async fn a_canary_goes_back_to_0_exactly_past_the_rate_over_the_minimum_and_is_announced_once() {
    let seed = env_u64(stm_env::ROLLOUT_SEED, 0x0ddba11);
    let _report = SeedOnFailure::new("rollout evaluation", stm_env::ROLLOUT_SEED, seed);
    let mut rng = Rng::new(seed);
    let (v1, v2) = (
        "0000000000000001".parse::<Version>().expect("v"),
        "0000000000000002".parse::<Version>().expect("v"),
    );
    let now = 1_800_000_000.0;
    let policy = policy(0.25, 10);
    let current = window_of(now, policy.window_seconds);
    let mut rolled = 0;
    for round in 0..60 {
        let store = MemoryStore::new();
        let bus = MemoryBus::new();
        // the weight was set in the previous window or the current one
        let since_window = current - rng.index(2) as i64;
        let mut route = canary_route(v1, v2, 10);
        if let Some(c) = route.canary.as_mut() {
            c.since = (since_window * 60) as f64;
        }
        put(&store, "P", route).await;
        // what counts: the windows from `since` to now; what does not: older windows, the
        // primary's own tally, another window length
        let mut counted = Tally::default();
        for _ in 0..rng.index(12) {
            let window = current - rng.index(4) as i64;
            let failed = rng.index(4) as u64;
            let tally = Tally {
                finished: failed + rng.index(4) as u64,
                failed,
            };
            if window >= since_window {
                counted.add(tally);
            }
            let key = tally_key("P", v2, 60, window, rng.index(16) as u32);
            store.add_tallies(&[(key, tally)], 0).await.expect("add");
        }
        let noise = Tally {
            finished: 50,
            failed: 50,
        };
        for key in [
            tally_key("P", v1, 60, current, 0),
            tally_key("P", v2, 30, current, 0),
        ] {
            store.add_tallies(&[(key, noise)], 0).await.expect("add");
        }
        let expected = counted.finished >= 10 && counted.failure_rate() >= 0.25;
        rolled += usize::from(expected);

        let first = evaluate(&store, Some(&bus), &policy, now)
            .await
            .expect("evaluate");
        let routes: Routes = store.routes().await.expect("routes");
        let route = routes.get("P").expect("the route");
        let weight = route.canary.as_ref().map(|c| c.weight);
        assert_eq!(
            (first.rolled_back.len(), weight),
            (usize::from(expected), Some(if expected { 0 } else { 10 })),
            "round {round}: {counted:?}"
        );
        assert_eq!(route.canary.as_ref().and_then(|c| c.window_seconds), Some(60));
        if expected {
            let rb = route.rolled_back.as_ref().expect("the rollback");
            assert_eq!(
                (rb.finished, rb.failed, rb.weight, rb.announced),
                (counted.finished, counted.failed, 10, true)
            );
        }
        // later runs: nothing more to decide, nothing sent again
        let again = evaluate(&store, Some(&bus), &policy, now + 1.0)
            .await
            .expect("evaluate");
        assert!(again.rolled_back.is_empty() && again.announced == 0, "{again:?}");
        let events = bus.events();
        assert_eq!(events.len(), usize::from(expected), "round {round}");
        if let Some(event) = events.first() {
            assert_eq!(event.detail_type, ROLLBACK_DETAIL_TYPE);
            let detail: serde_json::Value = serde_json::from_str(&event.detail).expect("json");
            assert_eq!(detail["rolledBackVersion"], v2.to_string());
            assert_eq!(detail["primaryVersion"], v1.to_string());
            assert_eq!(detail["finished"], counted.finished);
        }
    }
    assert!(
        (10..50).contains(&rolled),
        "both outcomes drawn often: {rolled} of 60 rolled back"
    );
}

#[tokio::test]
async fn a_rollback_event_the_bus_refused_goes_out_on_the_next_run() {
    let (v1, v2) = (
        "0000000000000001".parse::<Version>().expect("v"),
        "0000000000000002".parse::<Version>().expect("v"),
    );
    let store = MemoryStore::new();
    let bus = MemoryBus::new();
    let policy = policy(0.5, 2);
    let now = 1_800_000_000.0;
    put(&store, "P", canary_route(v1, v2, 10)).await;
    let key = tally_key("P", v2, 60, window_of(now, 60), 7);
    store
        .add_tallies(
            &[(
                key,
                Tally {
                    finished: 2,
                    failed: 2,
                },
            )],
            0,
        )
        .await
        .expect("add");
    bus.refuse_next(1);
    let first = evaluate(&store, Some(&bus), &policy, now)
        .await
        .expect("evaluate");
    assert_eq!((first.rolled_back.len(), first.announced), (1, 0));
    let stored = store.routes().await.expect("routes");
    let rb = stored
        .get("P")
        .and_then(|r| r.rolled_back.clone())
        .expect("the rollback");
    assert!(!rb.announced, "the refused event is still owed");
    assert!(bus.events().is_empty());
    let second = evaluate(&store, Some(&bus), &policy, now + 60.0)
        .await
        .expect("evaluate");
    assert_eq!((second.rolled_back.len(), second.announced), (0, 1));
    let third = evaluate(&store, Some(&bus), &policy, now + 120.0)
        .await
        .expect("evaluate");
    assert_eq!(third.announced, 0);
    assert_eq!(bus.events().len(), 1);
    // without a bus the rollback is made all the same, and waits to be announced
    let quiet = MemoryStore::new();
    put(&quiet, "P", canary_route(v1, v2, 10)).await;
    let key = tally_key("P", v2, 60, window_of(now, 60), 0);
    quiet
        .add_tallies(
            &[(
                key,
                Tally {
                    finished: 4,
                    failed: 3,
                },
            )],
            0,
        )
        .await
        .expect("add");
    let made = evaluate(&quiet, None, &policy, now).await.expect("evaluate");
    assert_eq!(made.rolled_back, vec!["P".to_string()]);
}

#[test]
fn the_policy_says_what_is_wrong_with_a_setting() {
    use stm_env::{ROLLBACK_FAILURE_RATE, ROLLBACK_MIN_FINISHED, ROLLBACK_WINDOW_SECONDS};
    let lookup = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    };
    let off = RolloutPolicy::from_lookup(lookup(&[]), StatusEvents::None).expect("off by default");
    assert!(!off.enabled());
    let on = RolloutPolicy::from_lookup(
        lookup(&[
            (ROLLBACK_FAILURE_RATE, "0.05"),
            (ROLLBACK_MIN_FINISHED, "50"),
            (ROLLBACK_WINDOW_SECONDS, "120"),
        ]),
        StatusEvents::All,
    )
    .expect("valid");
    assert_eq!(
        (on.failure_rate, on.min_finished, on.window_seconds),
        (0.05, 50, 120)
    );
    let without_events =
        RolloutPolicy::from_lookup(lookup(&[(ROLLBACK_FAILURE_RATE, "0.05")]), StatusEvents::Failures)
            .expect_err("needs all");
    assert!(
        without_events
            .to_string()
            .contains(&format!("{}=all", stm_env::STATUS_EVENTS)),
        "{without_events}"
    );
    for (name, value) in [
        (ROLLBACK_FAILURE_RATE, "5%"),
        (ROLLBACK_FAILURE_RATE, "1.5"),
        (ROLLBACK_MIN_FINISHED, "0"),
        (ROLLBACK_WINDOW_SECONDS, "86401"),
    ] {
        let get = move |k: &str| (k == name).then(|| value.to_string());
        let err = RolloutPolicy::from_lookup(get, StatusEvents::All).expect_err("refused");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("{name}=\"{value}\": expected")),
            "{text}"
        );
    }
}
