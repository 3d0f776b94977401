//! The worker's batch rules against a store that misbehaves on purpose (the
//! throttling and failures a real AWS account gives), over MemoryStore and the in-memory queue:
//!
//! - **Back-off of released records** (bug 6): a record the store keeps throttling was
//!   released at visibility 0 on every receive, so the template's `maxReceiveCount` (100)
//!   was spent within minutes and the record dead-lettered. Now it backs off from 1 s
//!   doubling to 5 min: the 100 receives span ~7.7 h of visibility timeouts (summed as the
//!   worker sets them; the queue's hook makes each hidden record visible again at once,
//!   so hours of simulated time take milliseconds). A lost CAS retries at once on its
//!   first receives, then backs off the same way. A skipped record of the failed group
//!   is hidden as long as the failed record, whatever its own receive count.
//! - **The invocation deadline** (bug 5): with a deadline that leaves room for only one
//!   slow record, that record commits and the records behind it are reported
//!   `OutOfTime` (released at once, never poison), a later record of a group that failed
//!   earlier in the batch stays `Skipped`, and the next invocation processes them all.
//!   Without a deadline every record is processed, however slow.

mod common;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::START;
use stm_core::Status;
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::worker::{BatchOutcome, Failed, Handled, Record};
use stm_runtime::{
    ActionRegistry, Control, Driver, ManualClock, OutgoingMessage, Queue, Worker, WorkerSettings,
};
use stm_store::ExecutionStore;

use common::faulty::Faulty;
use common::releases::{releasing, ReleasingQueue};

// --- fixtures ----------------------------------------------------------------------

struct Fixture {
    store: Arc<Faulty>,
    queue: Arc<ReleasingQueue>,
    worker: Worker,
}

/// `Flat` executions `ids`, started (Idle), before the store's faults are switched on.
async fn fixture(store: Faulty, queue: ReleasingQueue, settings: WorkerSettings, ids: &[&str]) -> Fixture {
    let store = Arc::new(store);
    let queue = Arc::new(queue);
    let driver = Driver::new(
        store.clone(),
        common::definitions(),
        ActionRegistry::with_builtins(),
    )
    .with_clock(Arc::new(ManualClock::new(START)));
    let worker = Worker::new(driver.clone(), queue.clone(), settings);
    let control = Control::new(driver, queue.clone());
    for id in ids {
        control.create("Flat", None, Some(id)).await.expect("create");
    }
    eventsource::drain(queue.as_ref(), &worker, &event_source(), || START, 50)
        .await
        .expect("drain");
    assert!(queue.inner.is_empty(), "started");
    for id in ids {
        let exe = store.inner.load(id).await.expect("load").expect("created");
        assert_eq!(exe.active_path.as_deref(), Some("Idle"), "{id}");
    }
    store.faulty.store(true, Ordering::SeqCst);
    Fixture { store, queue, worker }
}

fn event_source() -> EventSourceSettings {
    EventSourceSettings {
        wait_seconds: 0,
        // the queue's visibility timeout in the template (6 x the function timeout)
        visibility_seconds: 180,
        ..EventSourceSettings::default()
    }
}

fn go(target: &str, kind: &str) -> OutgoingMessage {
    let id = format!("{}-{target}", kind.to_ascii_lowercase());
    OutgoingMessage::event(target, &stm_core::Event::new(kind).with_id(id))
}

fn poison(group: &str) -> OutgoingMessage {
    OutgoingMessage {
        group_id: group.into(),
        deduplication_id: format!("poison-{group}"),
        body: "{not json".into(),
        spawn: false,
        trace: None,
    }
}

async fn publish(queue: &ReleasingQueue, messages: &[OutgoingMessage]) -> Vec<Record> {
    assert!(queue.publish_batch(messages).await.is_empty());
    let received = queue.receive(10, 180, 0).await.expect("receive");
    assert_eq!(received.len(), messages.len(), "one batch");
    received.iter().map(Record::from_received).collect()
}

fn processed(id: &str) -> Result<Handled, Failed> {
    Ok(Handled::Processed {
        execution_id: id.into(),
        status: Status::Running,
    })
}

fn results(outcome: &BatchOutcome) -> Vec<&Result<Handled, Failed>> {
    outcome.records.iter().map(|(_, r)| r).collect()
}

/// Receive and handle (through the event-source emulation, as `stm local` runs the
/// worker) until the queue hands out nothing more: each receive of the one record, with
/// the visibility the worker gave it.
async fn receive_until_dead_lettered(fx: &Fixture) -> Vec<(u32, Failed, i32)> {
    let mut receives = Vec::new();
    for _ in 0..1_000 {
        let before = fx.queue.hook.all().len();
        let messages = fx.queue.receive(10, 180, 0).await.expect("receive");
        if messages.is_empty() {
            return receives;
        }
        assert_eq!(messages.len(), 1);
        let record = Record::from_received(&messages[0]);
        let outcome = fx.worker.handle_batch(std::slice::from_ref(&record)).await;
        let Err(why) = outcome.records[0].1.clone() else {
            panic!("receive {}: {:?}", record.receive_count, outcome.records[0])
        };
        let set = fx.queue.hook.all();
        assert_eq!(set.len(), before + 1, "one release per receive");
        let (receipt, seconds) = set[before].clone();
        assert_eq!(receipt, messages[0].receipt_handle);
        receives.push((record.receive_count, why, seconds));
    }
    panic!("never dead-lettered")
}

// --- back-off ----------------------------------------------------------------------

/// Bug 6: under a store that always throttles, the 100 receives SQS allows
/// (`maxReceiveCount` in the template) span ~7.7 h of visibility timeouts instead of the
/// few minutes of back-to-back receives that released at 0 (the old code's sum: 0 s).
/// Every failure is transient (never poison), and the execution is untouched.
#[tokio::test]
async fn a_sustained_throttle_takes_hours_to_dead_letter_a_record() {
    let store = Faulty {
        throttled: vec!["t"],
        ..Faulty::default()
    };
    let fx = fixture(store, releasing(100, true), WorkerSettings::default(), &["t"]).await;
    let before = fx.store.inner.load("t").await.expect("load").expect("t");
    assert!(fx.queue.publish_batch(&[go("t", "Go")]).await.is_empty());
    let receives = receive_until_dead_lettered(&fx).await;

    assert_eq!(receives.len(), 100, "maxReceiveCount receives, then the DLQ");
    assert_eq!(fx.queue.inner.dead_letters().len(), 1);
    for (n, (count, why, _)) in receives.iter().enumerate() {
        assert_eq!(*count as usize, n + 1, "ApproximateReceiveCount");
        assert!(
            matches!(why, Failed::Retryable(t) if t.to_string().contains("ThrottlingException")),
            "receive {count}: {why:?}"
        );
    }
    let waits: Vec<i32> = receives.iter().map(|(_, _, s)| *s).collect();
    assert_eq!(waits[..10], [1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);
    assert!(waits[10..].iter().all(|&s| s == 300), "{waits:?}");
    let hidden: i64 = waits.iter().map(|&s| i64::from(s)).sum();
    assert!(hidden >= 6 * 3600, "only {hidden} s of back-off");
    assert_eq!(hidden, 27_811, "~7.7 h");
    assert_eq!(
        fx.store.inner.load("t").await.expect("load").expect("t"),
        before,
        "untouched"
    );
}

/// A lost CAS usually wins on the next attempt (the execution moved on; the retry reads
/// the new version), so the first receives come back at once; a lasting contention then
/// backs off like a throttle, and 100 receives still span hours.
#[tokio::test]
async fn a_lost_cas_retries_at_once_then_backs_off() {
    let store = Faulty {
        conflicting: vec!["k"],
        ..Faulty::default()
    };
    let fx = fixture(store, releasing(100, true), WorkerSettings::default(), &["k"]).await;
    assert!(fx.queue.publish_batch(&[go("k", "Go")]).await.is_empty());
    let receives = receive_until_dead_lettered(&fx).await;
    assert_eq!(receives.len(), 100);
    for (count, why, _) in &receives {
        assert!(matches!(why, Failed::Conflict(_)), "receive {count}: {why:?}");
    }
    let waits: Vec<i32> = receives.iter().map(|(_, _, s)| *s).collect();
    assert_eq!(waits[..8], [0, 0, 0, 1, 2, 4, 8, 16]);
    let hidden: i64 = waits.iter().map(|&s| i64::from(s)).sum();
    assert_eq!(hidden, 26_911, "~7.5 h");
}

/// A skipped record cannot be received before the failed record of its group (FIFO), so
/// it is hidden exactly as long, whatever its own receive count: released at 0 it only
/// burnt a receive. A record of another group is processed and not released at all.
#[tokio::test]
async fn a_skipped_record_waits_as_long_as_its_groups_failure() {
    let store = Faulty {
        throttled: vec!["t"],
        ..Faulty::default()
    };
    let fx = fixture(
        store,
        releasing(100, false),
        WorkerSettings::default(),
        &["t", "b"],
    )
    .await;
    let mut records = publish(&fx.queue, &[go("t", "Go"), go("b", "Go"), go("t", "Finish")]).await;
    // the throttled record on its 5th receive (16 s); the one behind it on its 1st
    records[0].receive_count = 5;
    let outcome = fx.worker.handle_batch(&records).await;
    let got = results(&outcome);
    assert!(matches!(got[0], Err(Failed::Retryable(_))), "{:?}", got[0]);
    assert_eq!(got[1], &processed("b"));
    assert_eq!(got[2], &Err(Failed::Skipped));
    let receipt = |i: usize| records[i].receipt_handle.clone().expect("receipt");
    assert_eq!(fx.queue.hook.of(&receipt(0)), Some(16));
    assert_eq!(fx.queue.hook.of(&receipt(2)), Some(16), "its group's delay");
    assert_eq!(
        fx.queue.hook.of(&receipt(1)),
        None,
        "processed: left to the event source"
    );
}

// --- the invocation deadline -------------------------------------------------------

/// The reserve the deadline tests run with, and how long the slow record takes: started
/// with a full second left, the slow record leaves less than the reserve behind it.
const RESERVE: Duration = Duration::from_millis(500);
const SLOW: Duration = Duration::from_millis(700);

async fn slow_fixture() -> Fixture {
    let store = Faulty {
        slow: vec!["slow"],
        delay: SLOW,
        ..Faulty::default()
    };
    let settings = WorkerSettings {
        record_reserve: RESERVE,
        ..WorkerSettings::default()
    };
    fixture(store, releasing(10, false), settings, &["slow", "a", "b"]).await
}

/// Bug 5: one stalled record must not time out the whole batch (whose committed records
/// would then all be redelivered). With a deadline that leaves room for the slow record
/// only: the poison before it is reported as ever; the slow record commits; then less than
/// the reserve is left, so `b`'s event is not started (`OutOfTime`, released at once,
/// never poison), while `a`'s event, behind `a`'s failure, stays `Skipped` with its
/// group's delay. The next invocation processes what was not started.
#[tokio::test]
async fn a_slow_record_leaves_the_rest_of_the_batch_to_the_next_invocation() {
    let fx = slow_fixture().await;
    let records = publish(
        &fx.queue,
        &[
            poison("a"),
            go("slow", "Go"),
            go("a", "Go"),
            go("b", "Go"),
            go("b", "Finish"),
        ],
    )
    .await;
    let started = Instant::now();
    let deadline = started + RESERVE + Duration::from_millis(500);
    let outcome = fx.worker.handle_batch_until(&records, Some(deadline)).await;
    assert!(started.elapsed() >= SLOW, "the slow record ran");
    let got = results(&outcome);
    assert!(matches!(got[0], Err(Failed::Poison(_))), "{:?}", got[0]);
    assert_eq!(got[1], &processed("slow"), "committed");
    assert_eq!(got[2], &Err(Failed::Skipped), "a failed earlier in the batch");
    assert_eq!(got[3], &Err(Failed::OutOfTime));
    assert_eq!(got[4], &Err(Failed::OutOfTime));
    let ids: Vec<String> = records.iter().map(|r| r.message_id.clone()).collect();
    assert_eq!(
        outcome.failed_ids(),
        [&ids[0], &ids[2], &ids[3], &ids[4]].map(Clone::clone)
    );
    let slow = fx.store.inner.load("slow").await.expect("load").expect("slow");
    assert_eq!(slow.active_path.as_deref(), Some("Working"));
    assert!(fx
        .store
        .inner
        .is_processed("slow", "go-slow")
        .await
        .expect("processed"));
    let b = fx.store.inner.load("b").await.expect("load").expect("b");
    assert_eq!(b.active_path.as_deref(), Some("Idle"), "not started");
    let receipt = |i: usize| records[i].receipt_handle.clone().expect("receipt");
    let poison_wait = WorkerSettings::default().poison_retry_seconds;
    assert_eq!(fx.queue.hook.of(&receipt(0)), Some(poison_wait));
    assert_eq!(
        fx.queue.hook.of(&receipt(2)),
        Some(poison_wait),
        "its group's delay"
    );
    assert_eq!(fx.queue.hook.of(&receipt(3)), Some(0), "back at once");
    assert_eq!(fx.queue.hook.of(&receipt(4)), Some(0));
    assert_eq!(fx.queue.hook.of(&receipt(1)), None);

    // the event source deletes the committed record; the next invocation gets b's events
    // (released at once) and processes them, in order
    fx.queue.delete(&receipt(1)).await.expect("delete");
    let next: Vec<Record> = fx
        .queue
        .receive(10, 180, 0)
        .await
        .expect("receive")
        .iter()
        .map(Record::from_received)
        .collect();
    let b_ids: Vec<&str> = next.iter().map(|r| r.message_id.as_str()).collect();
    assert_eq!(
        b_ids,
        [ids[3].as_str(), ids[4].as_str()],
        "only b's (a is hidden)"
    );
    let outcome = fx
        .worker
        .handle_batch_until(&next, Some(Instant::now() + Duration::from_secs(60)))
        .await;
    assert_eq!(results(&outcome)[0], &processed("b"));
    assert_eq!(
        results(&outcome)[1],
        &Ok(Handled::Processed {
            execution_id: "b".into(),
            status: Status::Done
        })
    );
}

/// Without a deadline (`handle_batch`, `stm local`'s poller) every record is processed,
/// however slow; with a deadline far enough away, too.
#[tokio::test]
async fn without_a_deadline_every_record_is_processed() {
    let fx = slow_fixture().await;
    let batch = [go("slow", "Go"), go("a", "Go"), go("b", "Go")];
    let records = publish(&fx.queue, &batch).await;
    let outcome = fx.worker.handle_batch(&records).await;
    assert_eq!(
        results(&outcome),
        [&processed("slow"), &processed("a"), &processed("b")]
    );
    assert!(fx.queue.hook.all().is_empty(), "nothing released");

    let fx = slow_fixture().await;
    let records = publish(&fx.queue, &batch).await;
    let far = Instant::now() + Duration::from_secs(60);
    let outcome = fx.worker.handle_batch_until(&records, Some(far)).await;
    assert!(outcome.failed_ids().is_empty(), "{:?}", outcome.records);
}

/// The first record is always started (else a deadline below the reserve would return
/// every invocation with nothing done, and the records would age into the dead-letter
/// queue); the Lambda handler's form reports the rest in `batchItemFailures`.
#[tokio::test]
async fn past_the_reserve_only_the_first_record_is_started() {
    let fx = slow_fixture().await;
    assert!(fx
        .queue
        .publish_batch(&[go("a", "Go"), go("b", "Go"), go("a", "Finish")])
        .await
        .is_empty());
    let messages = fx.queue.receive(10, 180, 0).await.expect("receive");
    let records: Vec<Record> = messages.iter().map(Record::from_received).collect();
    let failed = fx.worker.handle_invocation(&records, Some(Instant::now())).await;
    let reported: Vec<&str> = failed.iter().map(String::as_str).collect();
    assert_eq!(
        reported,
        [messages[1].message_id.as_str(), messages[2].message_id.as_str()]
    );
    let a = fx.store.inner.load("a").await.expect("load").expect("a");
    assert_eq!(a.active_path.as_deref(), Some("Working"), "the first record ran");
    let released: HashMap<String, i32> = fx.queue.hook.all().into_iter().collect();
    assert_eq!(released.get(&messages[1].receipt_handle), Some(&0));
    assert_eq!(released.get(&messages[2].receipt_handle), Some(&0));
}
