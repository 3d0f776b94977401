//! A canary rolled back by itself, on `stm local`: 10% of new executions routed to a
//! version whose new transition fails; once enough of them FAILED, the weight returns to 0
//! on its own, the rollback's status event arrives once, new executions take the old
//! version, and every execution that started on the failing one keeps it.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{stdout, stm_alone, Local};
use serde_json::Value;

/// v1: `Go` closes the flow. v2 adds what fails: `Go` divides by `x`, which is 0.
const V1: &str = "event Go {}\n\nmachine Flow {\n  context { x: float = 0.0 }\n  initial Open\n  state Open {}\n  final Closed success\n  from Open to Closed on Go\n}\n";

fn v2() -> String {
    V1.replace(
        "from Open to Closed on Go\n",
        "from Open to Closed on Go set context.x = 1.0 / context.x\n",
    )
}

/// A definitions folder whose current version is v2, with v1 frozen beside it: both
/// deployed. Returns the folder and (v1, v2).
fn deployed_pair() -> (PathBuf, String, String) {
    let dir = std::env::temp_dir().join(format!("stm-cli-rollout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("make the folder");
    let file = dir.join("flow.stm");
    std::fs::write(&file, V1).expect("write v1");
    let folder = dir.to_str().expect("utf-8 path");
    let frozen = stm_alone(&["versions", "freeze", folder, "--label", "v1"]);
    assert!(frozen.status.success(), "{}", common::stderr(&frozen));
    let v1 = version_of(&file);
    std::fs::write(&file, v2()).expect("write v2");
    let v2 = version_of(&file);
    assert_ne!(v1, v2);
    (dir, v1, v2)
}

fn version_of(file: &Path) -> String {
    let listing = stdout(&stm_alone(&["list", file.to_str().expect("utf-8")]));
    listing
        .lines()
        .find_map(|l| l.strip_prefix("versions:  "))
        .and_then(|v| v.split(", ").find_map(|m| m.strip_prefix("Flow ")))
        .unwrap_or_else(|| panic!("no version of Flow in:\n{listing}"))
        .to_string()
}

/// `count` execution ids whose bucket a canary of weight 10 takes (`canary`) or not.
fn ids(prefix: &str, canary: bool, count: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|id| (stm_store::route::bucket(id) < 10) == canary)
        .take(count)
        .collect()
}

fn version_shown(local: &Local, id: &str) -> String {
    let shown = local.ok(&["show", id]);
    shown
        .lines()
        .find_map(|l| l.strip_prefix("  machine version: "))
        .unwrap_or_else(|| panic!("no version in:\n{shown}"))
        .to_string()
}

/// The rollback events copied so far from the status bus (their details); the others
/// are dropped.
fn rollbacks(local: &Local) -> Vec<Value> {
    local
        .status_event_copies()
        .into_iter()
        .filter(|e| e["detail-type"] == "Statechart Rollout Rolled Back")
        .map(|e| e["detail"].clone())
        .collect()
}

#[test]
fn a_failing_canary_is_rolled_back_by_itself() {
    let (dir, v1, v2) = deployed_pair();
    let folder = dir.to_str().expect("utf-8").to_string();
    let file = dir.join("flow.stm").to_str().expect("utf-8").to_string();
    let vars = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let local = Local::start_with(
        "rollout",
        &dir,
        &vars(&[
            ("STM_STATUS_EVENTS", "all"),
            ("STM_ROLLBACK_FAILURE_RATE", "0.5"),
            ("STM_ROLLBACK_MIN_FINISHED", "4"),
            ("STM_ROLLBACK_WINDOW_SECONDS", "600"),
        ]),
    );

    // no route: the current version
    let shown = local.ok(&["versions", "route", "Flow"]);
    assert_eq!(
        shown.trim(),
        format!("Flow (alias live): {v2} 100%, the current version (no route)")
    );

    // the gate: v2 changes what `Go` does, so the static check beside v1 puts Open at
    // risk and nothing is routed, until told
    let route = [
        "versions", "route", "Flow", "--to", &v2, "--weight", "10", "--from", "v1",
    ];
    let refused = local.stm(&route);
    assert_eq!(refused.status.code(), Some(2), "{}", common::stderr(&refused));
    assert!(
        common::stderr(&refused).contains("not routed: the static check from ")
            && common::stderr(&refused).contains("Route it anyway with --accept-risk"),
        "{}",
        common::stderr(&refused)
    );
    let shown = local.ok(&["versions", "route", "Flow"]);
    assert!(shown.contains("(no route)"), "{shown}");
    // told: 10% of new executions to v2, the rest to v1 (--from: the alias pins it)
    let routed = local.ok(&[&route[..], &["--accept-risk"]].concat());
    assert!(
        routed.ends_with(&format!("Flow (alias live): {v1} (v1) 90%, {v2} 10%\n")),
        "{routed}"
    );

    // in-use shows the route and the canary's tally, over the deployment's windows of 600
    // s (the sweeper records them on the route: this shell does not have the variable)
    let expected = format!(
        "Flow (alias live): {v1} (v1) 90%, {v2} 10%\n  canary {v2}: 0 finished, 0 FAILED (0.0%) in the last 1200 s\n"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let used = loop {
        let used = local.ok(&["versions", "in-use", "--definitions", &folder]);
        if used.ends_with(&expected) || Instant::now() > deadline {
            break used;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(used.ends_with(&expected), "{used}");

    let on_canary = ids("c", true, 5);
    let on_primary = ids("p", false, 5);
    for id in on_canary.iter().chain(&on_primary) {
        local.ok(&["create", &file, "Flow", "--id", id]);
    }
    for id in &on_canary {
        assert_eq!(version_shown(&local, id), v2, "{id}");
    }
    for id in &on_primary {
        assert_eq!(version_shown(&local, id), v1, "{id}");
    }
    for id in on_canary.iter().chain(&on_primary) {
        local.wait_show(id, &["RUNNING"]);
        local.ok(&["send", id, "Go"]);
    }
    for id in &on_canary {
        local.wait_show(id, &["FAILED"]);
    }
    for id in &on_primary {
        local.wait_show(id, &["DONE"]);
    }

    // a sweep sees at least 4 finished, at least half of them FAILED: weight 0
    let deadline = Instant::now() + Duration::from_secs(60);
    let shown = loop {
        let shown = local.ok(&["versions", "route", "Flow"]);
        if shown.contains("rolled back by itself") || Instant::now() > deadline {
            break shown;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    // decided by the sweep that first saw at least 4 finished, all FAILED: 4 or 5 of them
    let head = format!("Flow (alias live): {v1} (v1) 100%\n  rolled back by itself: {v2} from 10% to 0% (");
    let counts = shown
        .trim_end()
        .strip_prefix(&head)
        .and_then(|rest| rest.strip_suffix(" finished executions FAILED)"))
        .unwrap_or_else(|| panic!("{shown}\n{}", local.console()));
    let decided: u64 = match counts.split_once(" of ") {
        Some((failed, finished)) if failed == finished => failed.parse().expect("a count"),
        _ => panic!("{counts}"),
    };
    assert!((4..=5).contains(&decided), "{shown}");

    // its event, once: several sweeps later there is still one
    let mut events = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while events.is_empty() && Instant::now() < deadline {
        events.extend(rollbacks(&local));
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(4));
    events.extend(rollbacks(&local));
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event["definitionId"], "Flow");
    assert_eq!(event["rolledBackVersion"], v2.as_str());
    assert_eq!(event["primaryVersion"], v1.as_str());
    assert_eq!(
        (event["failed"].as_u64(), event["finished"].as_u64()),
        (Some(decided), Some(decided))
    );

    // new executions whose ids the canary took before now take v1
    let after = ids("after", true, 3);
    for id in &after {
        local.ok(&["create", &file, "Flow", "--id", id]);
        assert_eq!(version_shown(&local, id), v1, "{id}");
    }
    // promoting v2 outright is gated as its canary was: refused, the route unchanged
    let promote = local.stm(&["versions", "route", "Flow", "--to", &v2, "--weight", "100"]);
    assert_eq!(promote.status.code(), Some(2), "{}", common::stderr(&promote));
    assert!(local
        .ok(&["versions", "route", "Flow"])
        .starts_with(&format!("Flow (alias live): {v1} (v1) 100%\n")));
    // and the ones that started on v2 keep it
    for id in &on_canary {
        assert_eq!(version_shown(&local, id), v2, "{id}");
    }
    // in-use: per version its executions, the finished and FAILED ones, and the route
    let used = local.ok(&["versions", "in-use", "--definitions", &folder]);
    assert!(
        used.lines().any(|l| l.starts_with(&format!(
            "Flow {v2} (current): 0 live executions; 5 finished, 5 FAILED (100.0%)"
        ))),
        "{used}"
    );
    assert!(
        used.lines().any(
            |l| l.starts_with(&format!("Flow {v1} (retained, v1): 3 live executions, "))
                && l.ends_with("; 5 finished, 0 FAILED (0.0%)")
        ),
        "{used}"
    );
    assert!(
        used.contains(&format!(
            "Flow (alias live): {v1} (v1) 100%\n  rolled back by itself: {v2}"
        )),
        "{used}"
    );
    let _ = std::fs::remove_dir_all(&folder);
}
