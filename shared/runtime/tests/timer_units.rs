//! What one near timer writes, in the cheapest layout (`DedupeMarks::OnItem`), over moto
//! behind the strict layer, whose meter charges what AWS bills (a conditional write refused
//! for its condition included): the arm, the sweeper's fire and the `Timeout`'s step.
//!
//! The `Timeout` of a fired timer finds its row gone (the sweeper deleted it after
//! sending, or the step's claim deletes it), so leaving the timed state cancels nothing:
//! its commit is one plain `PutItem` of the execution, not a transaction with a delete of
//! a row that is not there (which cost 3 write units more per fired timer). The claim
//! reads the row first and deletes it only when it is still armed: the usual `Timeout`,
//! whose row the sweeper deleted, costs the claim one read unit, not a refused write's
//! unit; one that comes before the sweeper's delete costs the read and the delete.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use stm_core::Status;
use stm_runtime::queue::SqsQueue;
use stm_runtime::sweeper;
use stm_runtime::Clock as _;
use stm_store::{CreateOptions, DedupeMarks, ExecutionStore};
use stm_testkit::meter::{MeterReport, PartitionMeter};

use common::{Stack, START};

/// Units and requests charged to the tables under `prefix` so far.
struct Seen {
    units: BTreeMap<String, (f64, f64)>,
    requests: BTreeMap<String, u64>,
}

fn seen(meter: &PartitionMeter, prefix: &str) -> Seen {
    let report: MeterReport = meter.report_where(|t| t.starts_with(prefix));
    Seen {
        units: report
            .units_per_table
            .into_iter()
            .map(|(table, r, w)| (table[prefix.len()..].to_string(), (r, w)))
            .collect(),
        requests: report.requests,
    }
}

/// What was charged between `before` and `after`: (read, write) units per table (without
/// the prefix), and requests per operation; zeros left out.
fn between(before: &Seen, after: &Seen) -> (BTreeMap<String, (f64, f64)>, BTreeMap<String, u64>) {
    let units = after
        .units
        .iter()
        .map(|(table, (r, w))| {
            let (r0, w0) = before.units.get(table).copied().unwrap_or_default();
            (table.clone(), (r - r0, w - w0))
        })
        .filter(|(_, (r, w))| *r != 0.0 || *w != 0.0)
        .collect();
    let requests = after
        .requests
        .iter()
        .map(|(op, n)| (op.clone(), n - before.requests.get(op).copied().unwrap_or(0)))
        .filter(|(_, n)| *n != 0)
        .collect();
    (units, requests)
}

fn writes(units: &BTreeMap<String, (f64, f64)>, table: &str) -> f64 {
    units
        .iter()
        .filter(|(t, _)| t.ends_with(table))
        .map(|(_, (_, w))| w)
        .sum()
}

fn reads(units: &BTreeMap<String, (f64, f64)>, table: &str) -> f64 {
    units
        .iter()
        .filter(|(t, _)| t.ends_with(table))
        .map(|(_, (r, _))| r)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fired_timers_timeout_commits_as_one_plain_put() {
    let moto = stm_testkit::moto().await;
    let parts = common::moto_parts_with("timer_units", 2, 5, |options| CreateOptions {
        dedupe_marks: DedupeMarks::OnItem,
        timer_full_scan_interval: None,
        ..options
    })
    .await;
    let (store, prefix) = (parts.store.clone(), parts.prefix.clone());
    let stack = Stack::new(
        store.clone(),
        Arc::new(SqsQueue::new(parts.client, parts.urls.queue_url)),
    )
    .redeploy(common::definitions_of("timers.stm"));
    let meter = moto.meter();

    let before_arm = seen(&meter, &prefix);
    let seed = json!({"delay": 10.0}).as_object().cloned().unwrap_or_default();
    stack
        .control
        .create("Doorbell", Some(seed), Some("t1"))
        .await
        .expect("create");
    stack.drain().await;
    let armed = seen(&meter, &prefix);
    let fire_at = START + 10.0;
    assert_eq!(
        store.armed_timer("t1", "Waiting").await.expect("read"),
        Some(fire_at)
    );

    stack.clock.set(fire_at);
    let summary = sweeper::sweep(stack.store.as_ref(), stack.queue.as_ref(), fire_at)
        .await
        .expect("sweep");
    assert_eq!(summary.fired, 1, "{summary:?}");
    let fired = seen(&meter, &prefix);
    stack.drain().await;
    let stepped = seen(&meter, &prefix);
    let exe = stack.load("t1").await;
    assert_eq!(
        (exe.active_path.as_deref(), exe.status),
        (Some("Expired"), Status::Done),
        "the Timeout stepped"
    );

    let (arm_units, arm_requests) = between(&before_arm, &armed);
    let (fire_units, fire_requests) = between(&armed, &fired);
    let (step_units, step_requests) = between(&fired, &stepped);
    println!("| phase | write units by table | requests |");
    println!("|---|---|---|");
    for (phase, units, requests) in [
        ("create and arm", &arm_units, &arm_requests),
        ("the sweeper's fire", &fire_units, &fire_requests),
        ("the Timeout's step", &step_units, &step_requests),
    ] {
        let by_table: Vec<String> = units
            .iter()
            .filter(|(_, (_, w))| *w > 0.0)
            .map(|(t, (_, w))| format!("{t} {w}"))
            .collect();
        println!("| {phase} | {} | {requests:?} |", by_table.join(", "));
    }

    // the Timeout's step: the load, the claim (a read, which finds the row the sweeper
    // deleted gone: nothing to delete), and one plain put of the execution; no
    // transaction, and no write of the timer's row
    assert_eq!(
        step_requests.get("TransactWriteItems"),
        None,
        "the Timeout's commit is a transaction: {step_requests:?}"
    );
    assert_eq!(step_requests.get("PutItem"), Some(&1), "{step_requests:?}");
    assert_eq!(
        step_requests.get("DeleteItem"),
        None,
        "the claim wrote to a gone row: {step_requests:?}"
    );
    assert_eq!(writes(&step_units, "_executions"), 1.0, "{step_units:?}");
    assert_eq!(writes(&step_units, "_timers"), 0.0, "{step_units:?}");
    assert_eq!(
        reads(&step_units, "_timers"),
        1.0,
        "the claim's read: {step_units:?}"
    );
    // the sweeper's fire: its guarded delete of the row and of its due-index entry
    assert_eq!(writes(&fire_units, "_timers"), 1.0, "{fire_units:?}");
    assert_eq!(writes(&fire_units, "_timers/due_index"), 1.0, "{fire_units:?}");
    // the arm: the timer's put in the start's transaction, and its due-index entry
    assert_eq!(writes(&arm_units, "_timers"), 2.0, "{arm_units:?}");
    assert_eq!(writes(&arm_units, "_timers/due_index"), 1.0, "{arm_units:?}");

    // a Timeout stepped before the sweeper's delete (it sends, then deletes): the claim
    // reads the row still armed and deletes it, and the commit stays one plain put
    let seed = json!({"delay": 20.0}).as_object().cloned().unwrap_or_default();
    stack
        .control
        .create("Doorbell", Some(seed), Some("t2"))
        .await
        .expect("create");
    stack.drain().await;
    let fire_at = stack.clock.now() + 20.0;
    assert_eq!(
        store.armed_timer("t2", "Waiting").await.expect("read"),
        Some(fire_at)
    );
    stack.clock.set(fire_at);
    let before = seen(&meter, &prefix);
    let timeout = common::event("Timeout", json!({"path": "Waiting", "fire_at": fire_at}));
    stack.control.send("t2", &timeout).await.expect("send");
    stack.drain().await;
    let (units, requests) = between(&before, &seen(&meter, &prefix));
    let exe = stack.load("t2").await;
    assert_eq!(exe.active_path.as_deref(), Some("Expired"), "the Timeout stepped");
    assert_eq!(store.armed_timer("t2", "Waiting").await.expect("read"), None);
    println!(
        "| a Timeout before the sweeper's delete | timers {}, its index {} | {requests:?} |",
        writes(&units, "_timers"),
        writes(&units, "_timers/due_index")
    );
    assert_eq!(requests.get("TransactWriteItems"), None, "{requests:?}");
    assert_eq!(
        requests.get("DeleteItem"),
        Some(&1),
        "the claim's delete: {requests:?}"
    );
    assert_eq!(reads(&units, "_timers"), 1.0, "the claim's read: {units:?}");
    assert_eq!(writes(&units, "_timers/due_index"), 1.0, "{units:?}");
    assert_eq!(writes(&units, "_timers"), 1.0, "{units:?}");
    stm_testkit::assert_no_access_denied();
}
