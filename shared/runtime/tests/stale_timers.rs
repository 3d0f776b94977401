//! Stale timeouts, over moto behind the strict layer: a timed state left and re-entered
//! (its timer re-armed with a later `fire_at`) is never timed out by the old timer.
//!
//! - The sweeper finds due timers through the timers' due index, a GSI, which on AWS is
//!   eventually consistent: the strict layer holds the index still
//!   (`StrictLayer::hold_indexes`), so a sweep after the re-entry still lists the first
//!   arming. The sweeper confirms each timer with a consistent read before it publishes.
//! - A `Timeout` published while its timer was armed can still be overtaken by events
//!   ahead of it in the execution's FIFO group that leave and re-enter the state: the
//!   worker ignores a `Timeout` whose `fire_at` is not the armed timer's, and the trace
//!   says so (the worker's coalesced burst, and the one-event step of the embedded runner).

mod common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stm_core::Status;
use stm_runtime::queue::SqsQueue;
use stm_runtime::{sweeper, ActionRegistry, Definitions, Driver, ManualClock};
use stm_store::{CreateOptions, DynamoDbStore, ExecutionStore, MemoryStore};

use common::{Stack, START};

/// The machine: `Waiting` times out after `delay` seconds; `Leave` and `Back` leave and
/// re-enter it (re-arming its timer).
fn definitions() -> Definitions {
    common::definitions_of("timers.stm")
}

/// A traced stack over fresh tables and a FIFO queue on moto; the sweep reads the due
/// index only (no scheduled full scan, which is a consistent read of the table).
async fn stack(tag: &str) -> (Stack, Arc<DynamoDbStore>, String) {
    let parts = common::moto_parts_with(tag, 2, 5, |options| CreateOptions {
        timer_full_scan_interval: None,
        ..options
    })
    .await;
    let base = Stack::new(
        parts.store.clone(),
        Arc::new(SqsQueue::new(parts.client, parts.urls.queue_url)),
    );
    let mut stack = base.redeploy(definitions());
    stack.worker.driver = stack.worker.driver.clone().with_trace(true);
    stack.control.driver = stack.control.driver.clone().with_trace(true);
    (stack, parts.store, parts.prefix)
}

async fn create(stack: &Stack, id: &str, delay: f64) {
    let seed = json!({"delay": delay}).as_object().cloned().unwrap_or_default();
    stack
        .control
        .create("Doorbell", Some(seed), Some(id))
        .await
        .expect("create");
    stack.drain().await;
}

async fn send(stack: &Stack, id: &str, kind: &str) {
    stack
        .control
        .send(id, &common::event(kind, json!({})))
        .await
        .expect("send");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_index_entry_does_not_time_out_the_reentered_state() {
    let moto = stm_testkit::moto().await;
    let (stack, store, prefix) = stack("stale_index").await;
    create(&stack, "s1", 10.0).await; // Waiting, armed for START + 10
    let t1 = START + 10.0;
    assert_eq!(store.armed_timer("s1", "Waiting").await.expect("read"), Some(t1));

    // the index propagates no further: it lists the first arming from here on
    moto.strict().hold_indexes(&prefix);
    stack.clock.set(START + 3.0);
    send(&stack, "s1", "Leave").await; // cancelled
    stack.drain().await;
    stack.clock.set(START + 5.0);
    send(&stack, "s1", "Back").await; // re-armed for START + 15
    stack.drain().await;
    let t2 = START + 15.0;
    assert_eq!(store.armed_timer("s1", "Waiting").await.expect("read"), Some(t2));

    // between the two fire times the index still lists the first arming
    stack.clock.set(START + 12.0);
    let (listed, _) = store.due_timers_indexed(START + 12.0).await.expect("index");
    assert_eq!(
        listed
            .iter()
            .map(|t| (t.path.as_str(), t.fire_at))
            .collect::<Vec<_>>(),
        vec![("Waiting", t1)],
        "the held index lists the stale entry (else this test shows nothing)"
    );
    let summary = sweeper::sweep(stack.store.as_ref(), stack.queue.as_ref(), START + 12.0)
        .await
        .expect("sweep");
    stack.drain().await;
    let exe = stack.load("s1").await;
    assert_eq!(
        (exe.active_path.as_deref(), exe.status),
        (Some("Waiting"), Status::Running),
        "the re-entered state was timed out by its first timer, 3 s early (sweep: {summary:?})"
    );
    assert_eq!(summary.fired, 0, "{summary:?}");
    assert_eq!(
        store.armed_timer("s1", "Waiting").await.expect("read"),
        Some(t2),
        "the new arming stays"
    );

    // the index catches up; the new arming fires when due
    moto.strict().live_indexes(&prefix);
    stack.clock.set(t2);
    let summary = sweeper::sweep(stack.store.as_ref(), stack.queue.as_ref(), t2)
        .await
        .expect("sweep");
    assert_eq!(summary.fired, 1, "{summary:?}");
    stack.drain().await;
    let exe = stack.load("s1").await;
    assert_eq!(
        (exe.active_path.as_deref(), exe.status),
        (Some("Expired"), Status::Done)
    );
    assert_eq!(store.armed_timer("s1", "Waiting").await.expect("read"), None);
    stm_testkit::assert_no_access_denied();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_overtaken_by_a_reentry_is_ignored_and_traced() {
    let (stack, store, _) = stack("stale_overtaken").await;
    create(&stack, "s2", 10.0).await; // Waiting, armed for START + 10
    let t1 = START + 10.0;
    stack.clock.set(t1);
    // Leave and Back are queued ahead of the Timeout in the execution's group: the sweep's
    // check passes (the timer is armed with t1), then the worker re-arms before it
    // reaches the Timeout
    send(&stack, "s2", "Leave").await;
    send(&stack, "s2", "Back").await;
    let summary = sweeper::sweep(stack.store.as_ref(), stack.queue.as_ref(), t1)
        .await
        .expect("sweep");
    assert_eq!(summary.fired, 1, "{summary:?}");
    stack.drain().await;
    let t2 = t1 + 10.0;
    let exe = stack.load("s2").await;
    assert_eq!(
        (exe.active_path.as_deref(), exe.status),
        (Some("Waiting"), Status::Running),
        "the re-entered state was timed out by the Timeout of its first visit"
    );
    assert_eq!(store.armed_timer("s2", "Waiting").await.expect("read"), Some(t2));

    // the trace: Leave, Back, then the Timeout, ignored and said why
    let trace = stack.store.read_trace("s2").await.expect("trace");
    let last = trace.last().expect("a step");
    assert_eq!(last["event_kind"], "Timeout", "{trace:?}");
    assert_eq!(last["from_path"], "Waiting");
    assert_eq!(last["to_path"], "Waiting");
    let ignored = last["ignored"].as_str().unwrap_or_default();
    assert!(
        ignored.contains("stale") && ignored.contains("Waiting"),
        "the trace says the Timeout was ignored: {last:?}"
    );

    // the new arming still fires
    stack.clock.set(t2);
    let summary = sweeper::sweep(stack.store.as_ref(), stack.queue.as_ref(), t2)
        .await
        .expect("sweep");
    assert_eq!(summary.fired, 1, "{summary:?}");
    stack.drain().await;
    let exe = stack.load("s2").await;
    assert_eq!(exe.active_path.as_deref(), Some("Expired"));
    stm_testkit::assert_no_access_denied();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_index_fires_nothing_early_and_everything_once() {
    // propagation as AWS describes it (typically within a second), not held still: every
    // sweep of a machine that keeps leaving and re-entering its timed state
    let moto = stm_testkit::moto().await;
    let (stack, store, prefix) = stack("stale_lag").await;
    moto.strict().lag_indexes(&prefix, Duration::from_secs(1));
    create(&stack, "s3", 4.0).await; // armed for START + 4
    let mut now = START;
    for _ in 0..3 {
        // left and re-entered 3 s into each visit: re-armed for now + 4
        now += 3.0;
        stack.clock.set(now);
        send(&stack, "s3", "Leave").await;
        send(&stack, "s3", "Back").await;
        stack.drain().await;
        // past the previous arming (now + 1), before the new one: the index, a moment
        // behind, may still list the previous one
        let sweep_at = now + 2.0;
        stack.clock.set(sweep_at);
        let summary = sweeper::sweep(stack.store.as_ref(), stack.queue.as_ref(), sweep_at)
            .await
            .expect("sweep");
        stack.drain().await;
        assert_eq!(summary.fired, 0, "nothing is due at {sweep_at}: {summary:?}");
        assert_eq!(
            stack.load("s3").await.active_path.as_deref(),
            Some("Waiting"),
            "timed out early at {sweep_at}"
        );
    }
    tokio::time::sleep(Duration::from_millis(1200)).await; // the index catches up
    let due = now + 4.0;
    stack.clock.set(due);
    let summary = sweeper::sweep(stack.store.as_ref(), stack.queue.as_ref(), due)
        .await
        .expect("sweep");
    assert_eq!(summary.fired, 1, "{summary:?}");
    stack.drain().await;
    assert_eq!(stack.load("s3").await.active_path.as_deref(), Some("Expired"));
    assert_eq!(store.armed_timer("s3", "Waiting").await.expect("read"), None);
    moto.strict().live_indexes(&prefix);
}

#[tokio::test]
async fn a_stale_timeout_stepped_alone_is_ignored_and_traced() {
    // the one-event step (the embedded runner's, as the worker's outside a burst), over
    // the in-memory store
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(ManualClock::new(START));
    let driver = Driver::new(store.clone(), definitions(), ActionRegistry::with_builtins())
        .with_clock(clock.clone())
        .with_trace(true);
    let seed = json!({"delay": 10.0}).as_object().cloned().unwrap_or_default();
    driver
        .create("Doorbell", Some(seed), Some("m1"))
        .await
        .expect("create"); // armed for START + 10
    clock.set(START + 3.0);
    driver
        .process("m1", &common::event("Leave", json!({})))
        .await
        .expect("leave");
    clock.set(START + 5.0);
    driver
        .process("m1", &common::event("Back", json!({})))
        .await
        .expect("back"); // re-armed for START + 15
                         // the first visit's Timeout, as a stale sweep would deliver it
    clock.set(START + 12.0);
    let stale = stm_core::engine::timeout_event("m1", "Waiting", START + 10.0);
    let exe = driver.process("m1", &stale).await.expect("timeout");
    assert_eq!(
        (exe.active_path.as_deref(), exe.status),
        (Some("Waiting"), Status::Running),
        "timed out 3 s early by the first visit's timer"
    );
    assert!(
        store.is_processed("m1", &stale.id).await.expect("read"),
        "marked processed"
    );
    let trace = store.read_trace("m1").await.expect("trace");
    let last = trace.last().expect("a step");
    assert_eq!(last["event_kind"], "Timeout");
    assert!(
        last["ignored"].as_str().is_some_and(|why| why.contains("stale")),
        "{last:?}"
    );
    assert_eq!(
        store.armed_timer("m1", "Waiting").await.expect("read"),
        Some(START + 15.0),
        "the new arming is kept"
    );
    // a Timeout without a fire_at (sent by hand) is the engine's to judge, as in harel
    let by_hand = common::event("Timeout", json!({"path": "Waiting"}));
    let exe = driver.process("m1", &by_hand).await.expect("timeout");
    assert_eq!(exe.active_path.as_deref(), Some("Expired"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_consumes_only_the_armed_timer() {
    use stm_store::{Commit, TimerClaim, TimerOp};
    // the check both stores give the worker, on a timer armed by a commit and on one
    // written by harel 0.9.0 (its item: no `due_shard`, `fire_at` as Python's
    // `Decimal(str(float))`)
    let (_, dynamo, prefix) = stack("stale_claim").await;
    let memory = Arc::new(MemoryStore::new());
    let stores: [(&str, Arc<dyn ExecutionStore>); 2] = [("dynamodb", dynamo.clone()), ("memory", memory)];
    for (name, store) in stores {
        let mut exe = stm_core::Execution::new("c1", "Doorbell");
        let arm = Commit {
            timers: vec![TimerOp::Schedule {
                path: "Waiting".into(),
                fire_at: START + 15.25,
            }],
            ..Commit::default()
        };
        store.commit(&mut exe, arm).await.expect("commit");
        let claim = |fire_at: f64| {
            let store = store.clone();
            async move { store.claim_timer("c1", "Waiting", fire_at).await.expect("claim") }
        };
        assert_eq!(
            claim(START + 10.0).await,
            TimerClaim::Rearmed(START + 15.25),
            "{name}"
        );
        assert_eq!(
            store.armed_timer("c1", "Waiting").await.expect("read"),
            Some(START + 15.25),
            "{name}: a stale claim keeps the timer"
        );
        assert_eq!(claim(START + 15.25).await, TimerClaim::Claimed, "{name}");
        assert_eq!(
            store.armed_timer("c1", "Waiting").await.expect("read"),
            None,
            "{name}"
        );
        assert_eq!(
            claim(START + 15.25).await,
            TimerClaim::Absent,
            "{name}: claimed once"
        );
    }
    // harel's own timer item, as its DynamoDB store puts it
    let endpoint = stm_testkit::moto().await.endpoint().to_string();
    let put = json!({"TableName": format!("{prefix}_timers"), "Item": {
        "execution_id": {"S": "h1"}, "path": {"S": "Waiting"}, "fire_at": {"N": "1700000010.1"},
    }});
    let answer = tokio::task::spawn_blocking(move || {
        stm_testkit::http::json_call(&endpoint, "DynamoDB_20120810.PutItem", &put)
    })
    .await
    .expect("put");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        dynamo
            .claim_timer("h1", "Waiting", 1_700_000_009.9)
            .await
            .expect("claim"),
        TimerClaim::Rearmed(1_700_000_010.1)
    );
    assert_eq!(
        dynamo
            .claim_timer("h1", "Waiting", 1_700_000_010.1)
            .await
            .expect("claim"),
        TimerClaim::Claimed,
        "harel's number text is the same number"
    );
}
