//! A batch mixing good and bad records across groups, through the queue-driven stack: the
//! poison ends in the dead-letter queue, the FIFO batch rule holds back only the failed
//! record's group and only for that batch, and the documented limit of an event behind a
//! poison message in its own group.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use stm_core::{Execution, Status};
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::worker::{Cause, Failed, Handled, Record};
use stm_runtime::DriverError;
use stm_runtime::{
    ActionRegistry, Control, Driver, ManualClock, MemoryQueue, OutgoingMessage, Queue, Worker, WorkerSettings,
};
use stm_store::{ExecutionStore, MemoryStore};

use crate::common::releases::releasing;
use crate::common::{event, Stack, START};
use crate::support::{definitions, fixture, good, processed, record};

fn raw(group: &str, dedup: &str, body: &str, spawn: bool) -> OutgoingMessage {
    OutgoingMessage {
        group_id: group.into(),
        deduplication_id: dedup.into(),
        body: body.into(),
        spawn,
        trace: None,
    }
}

async fn drain_until_empty(stack: &Stack, queue: &MemoryQueue, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        stack.drain().await;
        if queue.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the queue never emptied: {:?}",
            queue.snapshot()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Good and bad records across groups in one batch, each bad record alone in its group:
/// every good record is processed on its first receive (a failure holds back only its own
/// group), every bad one is reported; then, polled to quiescence, every poison message
/// (and the event of an unknown definition) is dead-lettered after maxReceiveCount and
/// every good event is processed exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_batch_loses_nothing_and_dead_letters_only_the_poison() {
    let started = Instant::now();
    let (store, queue, stack, gone) = mixed_stack(4).await;
    let batch = mixed_batch();
    assert!(queue.publish_batch(&batch).await.is_empty());
    let received = queue.receive(10, 30, 0).await.expect("receive");
    assert_eq!(received.len(), 10, "one batch");
    let records: Vec<Record> = received.iter().map(Record::from_received).collect();
    let outcome = stack.worker.handle_batch(&records).await;
    let results: Vec<&Result<Handled, Failed>> = outcome.records.iter().map(|(_, r)| r).collect();
    assert!(
        matches!(results[1], Err(Failed::Poison(t)) if t.to_string().contains("not JSON")),
        "{:?}",
        results[1]
    );
    assert!(
        matches!(results[4], Err(Failed::Poison(t)) if t.to_string().contains("not a JSON object")),
        "{:?}",
        results[4]
    );
    assert!(
        matches!(results[8], Err(Failed::Poison(t)) if t.to_string().contains("spawn intent")),
        "{:?}",
        results[8]
    );
    assert_eq!(
        results[9],
        &Err(Failed::Error(Cause::new(DriverError::UnknownDefinition(
            "Gone".into()
        ))))
    );
    // a, b, c: Go then Finish each, processed behind the failures of other groups
    for i in [0, 2, 3, 5, 6, 7] {
        assert!(
            matches!(results[i], Ok(Handled::Processed { .. })),
            "record {i} ({}): {:?}",
            batch[i].group_id,
            results[i]
        );
    }
    let reported: Vec<String> = [1, 4, 8, 9]
        .iter()
        .map(|&i| received[i].message_id.clone())
        .collect();
    assert_eq!(outcome.failed_ids(), reported, "only the bad records");
    for id in ["a", "b", "c"] {
        assert_eq!(
            stack.load(id).await.status,
            Status::Done,
            "{id}: in the first batch"
        );
    }
    for (message, (_, result)) in received.iter().zip(&outcome.records) {
        if result.is_ok() {
            // the event source deletes what succeeded
            queue.delete(&message.receipt_handle).await.expect("delete");
        }
    }

    // the event source keeps polling: each bad record comes back after its retry period,
    // until SQS's redrive takes it
    drain_until_empty(&stack, &queue, Duration::from_secs(60)).await;
    assert_eq!(dead_bodies(&queue), mixed_bad_bodies(), "only the bad records");
    for id in ["a", "b", "c"] {
        let exe = stack.load(id).await;
        assert_eq!(exe.status, Status::Done, "{id}");
        assert_eq!(exe.processed_events, 2, "{id}: Go and Finish, once each");
    }
    assert_eq!(stack.load("gone").await, gone, "untouched");
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
    println!("mixed batch to quiescence: {:.2?}", started.elapsed());
}

/// Regression: the old batch rule reported every record after the first
/// failure, whatever its group, and each report is a receive, so a good event of group `c`
/// that kept landing behind failures of *other* groups (here four bad records, at
/// maxReceiveCount 3) was dead-lettered without ever being attempted. FIFO order only
/// binds a group: now a failure holds back only the later records of its own group
/// (Powertools' `skip_group_on_error`), and the good records, last in the batch behind
/// every bad one, are processed on their first receive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn good_records_of_other_groups_never_age_behind_failures() {
    let (_store, queue, stack, _gone) = mixed_stack(3).await;
    // the good records last: behind every bad one
    let (good, mut batch): (Vec<_>, Vec<_>) = mixed_batch()
        .into_iter()
        .partition(|m| ["a", "b", "c"].contains(&m.group_id.as_str()));
    batch.extend(good);
    assert!(queue.publish_batch(&batch).await.is_empty());
    let first = eventsource::poll_once(queue.as_ref(), &stack.worker, &stack.settings)
        .await
        .expect("poll");
    assert_eq!(first.received, 10);
    assert_eq!(first.deleted, 6, "every good record on its first receive");
    assert_eq!(first.failed.len(), 4, "only the bad records are reported");
    for id in ["a", "b", "c"] {
        assert_eq!(stack.load(id).await.status, Status::Done, "{id}");
    }
    drain_until_empty(&stack, &queue, Duration::from_secs(60)).await;
    assert_eq!(dead_bodies(&queue), mixed_bad_bodies(), "only the bad records");
    for id in ["a", "b", "c"] {
        let exe = stack.load(id).await;
        assert_eq!(exe.status, Status::Done, "{id}");
        assert_eq!(exe.processed_events, 2, "{id}: once each");
    }
}

/// The batch rule per group: after group `a`'s poison record, `a`'s later event is
/// skipped (never attempted, so `a` stays where it was and its order holds), while the
/// records of `b` and `c` before, between and after them are processed; the skipped
/// record is hidden as long as its group's failed record (it cannot be received before
/// it), and `a`'s event goes through once the poison is gone.
#[tokio::test]
async fn a_later_record_of_the_failed_group_is_skipped_while_other_groups_go_on() {
    let store = Arc::new(MemoryStore::new());
    // records seen by the event source, with the visibility the worker gave each reported one
    let queue = Arc::new(releasing(5, false));
    let driver = Driver::new(store.clone(), definitions(), ActionRegistry::with_builtins())
        .with_clock(Arc::new(ManualClock::new(START)));
    let worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default());
    let control = Control::new(driver, queue.clone());
    for id in ["a", "b", "c"] {
        control.create("Flat", None, Some(id)).await.expect("create");
    }
    let settings = EventSourceSettings {
        wait_seconds: 0,
        ..EventSourceSettings::default()
    };
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 50)
        .await
        .expect("drain");
    assert!(queue.inner.is_empty());
    assert!(queue
        .publish_batch(&[
            mixed_event("b", "Go"),
            raw("a", "poison-a", "{not json", false),
            mixed_event("c", "Go"),
            mixed_event("a", "Go"),
            mixed_event("b", "Finish"),
            mixed_event("c", "Finish"),
        ])
        .await
        .is_empty());
    let received = queue.receive(10, 30, 0).await.expect("receive");
    assert_eq!(received.len(), 6, "one batch");
    let records: Vec<Record> = received.iter().map(Record::from_received).collect();
    let outcome = worker.handle_batch(&records).await;
    let results: Vec<&Result<Handled, Failed>> = outcome.records.iter().map(|(_, r)| r).collect();
    assert_eq!(results[0], &processed("b"));
    assert!(matches!(results[1], Err(Failed::Poison(_))), "{:?}", results[1]);
    assert_eq!(results[2], &processed("c"), "between the failure and the skip");
    assert_eq!(results[3], &Err(Failed::Skipped), "a's later record");
    let done = |id: &str| {
        Ok(Handled::Processed {
            execution_id: id.into(),
            status: Status::Done,
        })
    };
    assert_eq!(results[4], &done("b"), "after the skip");
    assert_eq!(results[5], &done("c"));
    assert_eq!(
        outcome.failed_ids(),
        [received[1].message_id.clone(), received[3].message_id.clone()]
    );
    let a = store.load("a").await.expect("load").expect("a");
    assert_eq!(a.active_path.as_deref(), Some("Idle"), "a's Go not attempted");
    assert!(!store.is_processed("a", "go-a").await.expect("processed"));
    // the poison is hidden for its retry period, the skipped record just as long; the
    // processed ones are left to the event source to delete
    let poison_wait = WorkerSettings::default().poison_retry_seconds;
    assert_eq!(queue.hook.of(&received[1].receipt_handle), Some(poison_wait));
    assert_eq!(queue.hook.of(&received[3].receipt_handle), Some(poison_wait));
    for i in [0, 2, 4, 5] {
        assert_eq!(
            queue.hook.of(&received[i].receipt_handle),
            None,
            "record {i} not released"
        );
    }

    // once the poison is gone, a's Go is next in its group and goes through
    for i in [0, 1, 2, 4, 5] {
        queue
            .inner
            .delete(&received[i].receipt_handle)
            .await
            .expect("delete");
    }
    queue
        .inner
        .change_visibility(&received[3].receipt_handle, 0)
        .await
        .expect("release");
    let again = queue.receive(10, 30, 0).await.expect("receive");
    assert_eq!(again.len(), 1);
    let outcome = worker.handle_batch(&[Record::from_received(&again[0])]).await;
    assert_eq!(
        outcome.records[0].1,
        Ok(Handled::Processed {
            execution_id: "a".into(),
            status: Status::Running
        })
    );
}

/// The failed groups live for one batch only (Powertools TypeScript issue 3673 kept them
/// in the processor, across invocations): after a batch in which group `a` failed, the
/// same worker processes `a`'s next batch normally.
#[tokio::test]
async fn the_failed_groups_do_not_leak_into_the_next_batch() {
    let fx = fixture().await;
    let first = fx
        .worker
        .handle_batch(&[
            record("m1", "{not json", Some("a"), None),
            good("m2", "a", "Go"),
            good("m3", "b", "Go"),
        ])
        .await;
    assert!(matches!(first.records[0].1, Err(Failed::Poison(_))));
    assert_eq!(first.records[1].1, Err(Failed::Skipped));
    assert_eq!(first.records[2].1, processed("b"));
    // the next invocation, on the same worker: a's records are attempted again
    let second = fx
        .worker
        .handle_batch(&[good("m2", "a", "Go"), good("m4", "c", "Go")])
        .await;
    assert_eq!(second.records[0].1, processed("a"), "not skipped");
    assert_eq!(second.records[1].1, processed("c"));
    assert!(second.failed_ids().is_empty());
    // and a failure there holds back only that batch's later records of its group
    let third = fx
        .worker
        .handle_batch(&[
            record("m5", "[1]", Some("b"), None),
            good("m6", "a", "Finish"),
            good("m7", "b", "Finish"),
        ])
        .await;
    assert_eq!(
        third.records[1].1,
        Ok(Handled::Processed {
            execution_id: "a".into(),
            status: Status::Done
        })
    );
    assert_eq!(third.records[2].1, Err(Failed::Skipped));
}

async fn mixed_stack(max_receive_count: u32) -> (Arc<MemoryStore>, Arc<MemoryQueue>, Stack, Execution) {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(max_receive_count));
    let stack = Stack::new(store.clone(), queue.clone());
    for id in ["a", "b", "c"] {
        stack
            .control
            .create("Flat", None, Some(id))
            .await
            .expect("create");
    }
    stack.drain().await;
    let mut gone = Execution::new("gone", "Gone");
    gone.status = Status::Running;
    store.save(&mut gone).await.expect("save");
    let gone = store.load("gone").await.expect("load").expect("gone");
    (store, queue, stack, gone)
}

fn mixed_event(target: &str, kind: &str) -> OutgoingMessage {
    let id = format!("{}-{target}", kind.to_ascii_lowercase());
    OutgoingMessage::event(target, &event(kind, json!({})).with_id(id))
}

/// Good events of `a`, `b`, `c` (Go, then Finish) among four bad records of their own
/// groups: two poison bodies, a malformed spawn intent, an event of an unknown definition.
fn mixed_batch() -> Vec<OutgoingMessage> {
    vec![
        mixed_event("a", "Go"),
        raw("p", "poison-1", "{not json", false),
        mixed_event("b", "Go"),
        mixed_event("a", "Finish"),
        raw("q", "poison-2", "[1, 2]", false),
        mixed_event("c", "Go"),
        mixed_event("b", "Finish"),
        mixed_event("c", "Finish"),
        raw("s", "poison-3", "{}", true),
        mixed_event("gone", "Go"),
    ]
}

fn mixed_bad_bodies() -> Vec<String> {
    let mut bad = vec![
        "{not json".to_string(),
        "[1, 2]".to_string(),
        "{}".to_string(),
        mixed_event("gone", "Go").body,
    ];
    bad.sort();
    bad
}

fn dead_bodies(queue: &MemoryQueue) -> Vec<String> {
    let mut dead: Vec<String> = queue.dead_letters().iter().map(|m| m.body.clone()).collect();
    dead.sort();
    dead
}

/// KNOWN LIMITATION, documented: an event queued right behind a poison message *in the
/// same group* is received with it on every delivery (FIFO), is reported with it (the
/// batch rule), so its receive count grows with the poison's, and SQS's redrive moves it
/// to the dead-letter queue together with the poison. It is not lost (it can be redriven
/// from the DLQ) but it is not processed. The same holds for the events behind a record
/// failing for a lasting reason (an unknown definition, a context over the item limit)
/// or parked (SUSPENDED) for longer than the receive budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_behind_a_poison_message_in_its_group_is_dead_lettered_with_it() {
    let (_store, queue, stack, _gone) = mixed_stack(3).await;
    let finish = mixed_event("a", "Finish");
    assert!(queue
        .publish_batch(&[
            mixed_event("a", "Go"),
            raw("a", "poison", "{not json", false),
            finish.clone()
        ])
        .await
        .is_empty());
    drain_until_empty(&stack, &queue, Duration::from_secs(30)).await;
    let dead: Vec<String> = queue.dead_letters().iter().map(|m| m.body.clone()).collect();
    assert_eq!(dead, ["{not json".to_string(), finish.body]);
    let a = stack.load("a").await;
    assert_eq!(
        a.active_path.as_deref(),
        Some("Working"),
        "Go went through; Finish went to the DLQ with the poison"
    );
}
