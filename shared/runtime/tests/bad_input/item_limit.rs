//! DynamoDB's item and transaction limits, over moto: a commit the store refuses before the
//! call fails the execution at once; a wide fan-out is packed, a wider one fails its
//! parent; a trace step over the limit is poison.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use stm_core::Status;
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::worker::{Failed, Handled};
use stm_runtime::{ActionRegistry, Control, Driver, ManualClock, MemoryQueue, Worker, WorkerSettings};
use stm_store::ExecutionStore;

use crate::common::{self, event, object, START};
use crate::support::{definitions, good, processed, record};

/// A step whose commit DynamoDB would refuse whatever the retry (here an execution item
/// over 400 KB; a fan-out over 100 transaction items below) is never retried: the store
/// says so before calling DynamoDB, the step is undone and the execution fails where it
/// was with the store's reason, the event is marked processed, and the record is
/// acknowledged, so its group moves on at once (no back-off, no dead-letter queue).
/// Nothing of the step leaks: no outbox entry, spawn intent or timer. Also over moto: a
/// 250 KB event that the machine does not keep is fine, and with the execution trace on,
/// a step whose trace entry (event data + context) passes the limit even undone is
/// poison, dead-lettered after its poison retries: nothing can be written for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_over_dynamodbs_limits_fails_the_execution_at_once() {
    let started = Instant::now();
    let parts = common::moto_parts("limits", 5, 3).await;
    let store = parts.store.clone();
    let queue = Arc::new(MemoryQueue::new(3));
    let clock = Arc::new(ManualClock::new(START));
    let driver = Driver::new(store.clone(), definitions(), ActionRegistry::with_builtins()).with_clock(clock);
    let worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default());
    let control = Control::new(driver.clone(), queue.clone());
    let blob = "b".repeat(250 * 1024);
    control
        .create("Blob", Some(object(json!({"blob": blob}))), Some("big"))
        .await
        .expect("a 250 KB context fits");
    control.create("Flat", None, Some("flat")).await.expect("create");
    let settings = EventSourceSettings {
        wait_seconds: 0,
        visibility_seconds: 5,
        ..EventSourceSettings::default()
    };
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 50)
        .await
        .expect("drain");
    let big = store.load("big").await.expect("load").expect("big");
    assert_eq!(big.active_path.as_deref(), Some("Idle"));
    let item = store.execution_item_size(&big);
    assert!(item > 250 * 1024 && item < 400 * 1024, "{item}");

    // 200 KB more would make it ~450 KB
    let fill = event("Fill", json!({"blob": "m".repeat(200 * 1024)})).with_id("fill-1");
    let body = serde_json::to_string(&fill).expect("json");
    assert!(body.len() < 256 * 1024, "within SQS's classic message limit");
    let out = worker
        .handle_batch(&[record("m1", &body, Some("big"), None), good("m2", "flat", "Go")])
        .await;
    assert_eq!(
        out.records[0].1,
        Ok(Handled::Processed {
            execution_id: "big".into(),
            status: Status::Failed,
        }),
        "acknowledged: the execution failed"
    );
    assert_eq!(out.records[1].1, processed("flat"), "another group goes on");
    let failed = store.load("big").await.expect("load").expect("big");
    let text = failed.error.clone().unwrap_or_default();
    assert!(
        text.starts_with("StoreError: execution big item is ")
            && text.contains(
                "bytes, over DynamoDB's limit of 409600 bytes (shrink the context or the event data)"
            ),
        "{text}"
    );
    assert_eq!(failed.status, Status::Failed);
    // undone: the state and context it started from
    assert_eq!(
        (failed.active_path.as_deref(), &failed.context),
        (Some("Idle"), &big.context)
    );
    assert_eq!(failed.version, big.version + 1, "one commit: the failure");
    assert!(store.is_processed("big", "fill-1").await.expect("processed"));
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
    assert!(store.due_timers(START + 1e9).await.expect("timers").is_empty());

    // the same step coalesced behind another event of its execution (one batch, one
    // group): the burst's commit is refused, so its records are stepped one at a time; the
    // first commits as it would alone, the over-limit one fails the execution
    control
        .create(
            "Blob",
            Some(object(json!({"blob": "c".repeat(250 * 1024)}))),
            Some("big2"),
        )
        .await
        .expect("create");
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 50)
        .await
        .expect("drain");
    let big2 = store.load("big2").await.expect("load").expect("big2");
    let nudge = event("Nudge", json!({})).with_id("nudge-2");
    let fill = event("Fill", json!({"blob": "m".repeat(200 * 1024)})).with_id("fill-2");
    let out = worker
        .handle_batch(&[
            record(
                "m5",
                &serde_json::to_string(&nudge).expect("json"),
                Some("big2"),
                None,
            ),
            record(
                "m6",
                &serde_json::to_string(&fill).expect("json"),
                Some("big2"),
                None,
            ),
        ])
        .await;
    assert_eq!(
        out.records.iter().map(|r| r.1.clone()).collect::<Vec<_>>(),
        vec![
            Ok(Handled::Processed {
                execution_id: "big2".into(),
                status: Status::Running,
            }),
            Ok(Handled::Processed {
                execution_id: "big2".into(),
                status: Status::Failed,
            }),
        ],
        "both acknowledged: nothing retried to the dead-letter queue"
    );
    let failed = store.load("big2").await.expect("load").expect("big2");
    assert_eq!(failed.status, Status::Failed);
    assert!(
        failed
            .error
            .as_deref()
            .unwrap_or_default()
            .starts_with("StoreError: execution big2 item is "),
        "{:?}",
        failed.error
    );
    assert_eq!(
        failed.version,
        big2.version + 2,
        "the nudge's commit, then the failure's"
    );
    assert!(store.is_processed("big2", "nudge-2").await.expect("processed"));
    assert!(store.is_processed("big2", "fill-2").await.expect("processed"));

    // a fan-out of 1,000 children, ten times a transaction's 100 items: its spawn intents
    // are packed into a few rows of the one commit; every child starts and the parent joins
    let started_wide = Instant::now();
    let width = 1_000;
    let recipients: Vec<String> = (0..width).map(|n| format!("r{n}")).collect();
    control
        .create(
            "FanOut",
            Some(object(json!({ "recipients": recipients }))),
            Some("wide"),
        )
        .await
        .expect("create");
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 5_000)
        .await
        .expect("drain");
    let wide = store.load("wide").await.expect("load").expect("wide");
    assert_eq!(
        (wide.status, wide.active_path.as_deref(), wide.error.as_deref()),
        (Status::Done, Some("AllSent"), None),
        "the parent joined all {width} children"
    );
    assert_eq!(wide.children.len(), width);
    assert!(wide
        .children
        .values()
        .all(|c| c.finished && c.outcome.as_deref() == Some("success")));
    let children = store.ids_with_prefix("wide:").await.expect("children");
    assert_eq!(children.len(), width, "each child created once");
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
    assert!(
        queue.is_empty() && queue.dead_letters().is_empty(),
        "nothing retried or dead-lettered"
    );
    println!(
        "a fan-out of {width} children started and joined on moto in {:.2?}",
        started_wide.elapsed()
    );

    // past what the parent's item holds (each child is an entry of its `children`): the
    // parent fails at its start with the reason, at once, nothing spawned
    let recipients: Vec<String> = (0..4_000).map(|n| format!("recipient-{n}")).collect();
    control
        .create(
            "FanOut",
            Some(object(json!({ "recipients": recipients }))),
            Some("widest"),
        )
        .await
        .expect("create");
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 50)
        .await
        .expect("drain");
    let widest = store.load("widest").await.expect("load").expect("widest");
    let reason = widest.error.clone().unwrap_or_default();
    assert_eq!(widest.status, Status::Failed, "{reason}");
    assert!(
        reason.starts_with("StoreError: execution widest item is ")
            && reason.contains("over DynamoDB's limit of 409600 bytes"),
        "the reason names DynamoDB's item limit: {reason}"
    );
    assert!(widest.children.is_empty(), "undone: no child");
    assert!(store.ids_with_prefix("widest:").await.expect("ids").is_empty());
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
    assert!(
        queue.is_empty() && queue.dead_letters().is_empty(),
        "nothing retried or dead-lettered"
    );

    // a 250 KB event the machine does not keep is no problem for the store
    let huge = event("Go", json!({"pad": "x".repeat(250 * 1024)})).with_id("huge-1");
    let body = serde_json::to_string(&huge).expect("json");
    control.create("Flat", None, Some("flat2")).await.expect("create");
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 50)
        .await
        .expect("drain");
    let out = worker
        .handle_batch(&[record("m3", &body, Some("flat2"), None)])
        .await;
    assert_eq!(out.records[0].1, processed("flat2"));

    // with the trace on, the trace entry carries the event data and the context out:
    // 150 KB of context + 260 KB of event data fit neither
    let traced = Worker::new(
        driver.clone().with_trace(true),
        queue.clone(),
        WorkerSettings::default(),
    );
    control
        .create(
            "Blob",
            Some(object(json!({"blob": "t".repeat(150 * 1024)}))),
            Some("traced"),
        )
        .await
        .expect("create");
    eventsource::drain(queue.as_ref(), &traced, &settings, || START, 50)
        .await
        .expect("drain");
    let before = store.load("traced").await.expect("load").expect("traced");
    let wide = event("Go", json!({"pad": "w".repeat(260 * 1024)})).with_id("wide-1");
    let out = traced
        .handle_batch(&[record(
            "m4",
            &serde_json::to_string(&wide).expect("json"),
            Some("traced"),
            None,
        )])
        .await;
    match &out.records[0].1 {
        Err(Failed::Poison(cause)) => {
            let t = cause.to_string();
            assert!(
                t.starts_with("the trace step item is ") && t.contains("over DynamoDB's limit"),
                "{t}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(store.load("traced").await.expect("load").expect("traced"), before);
    println!("item-limit cases over moto: {:.2?}", started.elapsed());
}
