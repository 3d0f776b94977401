//! `stm local --status-events all` (here through `STM_STATUS_EVENTS`, the flag's
//! variable): each status change the operator commands and the worker make reaches the
//! local bus `{prefix}-status` once, and its rule's copy queue, with the event's detail.

mod common;

use std::time::{Duration, Instant};

use common::Local;
use serde_json::Value;

/// The status events copied so far (their details), each checked to be one.
fn copied(local: &Local) -> Vec<Value> {
    local
        .status_event_copies()
        .into_iter()
        .map(|e| {
            assert_eq!(e["source"], "stm");
            assert_eq!(e["detail-type"], "Statechart Execution Status Change");
            e["detail"].clone()
        })
        .collect()
}

#[test]
fn each_status_change_reaches_the_local_bus_once() {
    let local = Local::start_with(
        "status_local",
        &common::repo().join("examples"),
        &[("STM_STATUS_EVENTS".to_string(), "all".to_string())],
    );
    assert!(
        local.console().contains("status events (all) on the bus"),
        "{}",
        local.console()
    );

    for id in ["done-1", "held-1", "gone-1"] {
        local.ok(&["create", "examples/order.stm", "Order", "--id", id]);
    }
    local.ok(&["send", "done-1", r#"Submit:{"amount": 5.0}"#]);
    local.ok(&["send", "done-1", r#"PaymentOk:{"receipt": "r"}"#]);
    local.ok(&["send", "done-1", "Shipped"]);
    local.wait_show("done-1", &["DONE"]);
    local.wait_show("held-1", &["RUNNING"]);
    local.ok(&["suspend", "held-1"]);
    local.wait_show("gone-1", &["RUNNING"]);
    local.ok(&["terminate", "gone-1"]);

    // the worker's flush puts DONE at once; the operator's changes wait for a relay run
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < 3 && Instant::now() < deadline {
        seen.extend(copied(&local));
        std::thread::sleep(Duration::from_millis(500));
    }
    // and nothing comes twice
    std::thread::sleep(Duration::from_secs(3));
    seen.extend(copied(&local));
    let mut got: Vec<String> = seen
        .iter()
        .map(|d| {
            format!(
                "{} {} <- {}",
                d["executionId"].as_str().unwrap_or("?"),
                d["status"].as_str().unwrap_or("?"),
                d["previousStatus"].as_str().unwrap_or("?")
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            "done-1 DONE <- RUNNING",
            "gone-1 CANCELLED <- RUNNING",
            "held-1 SUSPENDED <- RUNNING",
        ],
        "{seen:?}"
    );
    let done = seen
        .iter()
        .find(|d| d["executionId"] == "done-1")
        .expect("done-1");
    assert_eq!(done["definitionId"], "Order");
    assert_eq!(done["outcome"], "success");
    assert!(done["stopDate"].as_i64().is_some(), "{done}");
}
