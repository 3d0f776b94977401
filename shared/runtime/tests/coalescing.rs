//! Coalescing: consecutive records of one execution in a batch are stepped in memory, in
//! order, with one load and one commit. What must hold, each checked against the same
//! records handled one at a time (`WorkerSettings::coalesce` off):
//!
//! - the same end state, the same traced steps in the same order, a processed mark per
//!   event, the same timers; only the version differs (it counts commits);
//! - a burst over DynamoDB's transaction limit (100 actions) is cut into several commits,
//!   over moto through the strict layer, which refuses a transaction of 101;
//! - a step that fails (an `OverflowError` harel lets escape) ends the burst there: the
//!   steps before it commit, it fails, the rest of its group is skipped, and the next
//!   delivery applies them once;
//! - a lost CAS fails the burst's first record and skips the rest: the whole burst comes
//!   back and is applied once;
//! - the lifecycle gates apply per event: a `Cancel` in the middle drains what follows it,
//!   a `SUSPENDED` execution parks the first record and holds back the rest;
//! - another group's records in between change nothing.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::faulty::Faulty;
use common::Stack;
use serde_json::{json, Value};
use stm_core::{Event, Map, Status};
use stm_runtime::worker::{Failed, Handled, Record};
use stm_runtime::{Definitions, MemoryQueue, OutgoingMessage, Queue};
use stm_store::{ExecutionStore, MemoryStore};

const MACHINES: &str = r#"
event Tick { amount: any }
event Go {}
event Stop {}
event Finish {}

# a counter that flips between two timed states on every Tick
machine Counter {
  context {
    total: float = 0.5
  }
  initial A
  state A { timeout 30 }
  state B { timeout 60 }
  final Stopped done
  from A to B on Tick set context.total = context.total + event.amount
  from B to A on Tick set context.total = context.total + event.amount
  from A to Stopped on Stop
  from B to Stopped on Stop
}

# twelve regions: entering Work spawns twelve children and a Reset (a control event, not
# broadcast to the regions) leaves it, cancelling them, so ten such events need more than
# a transaction's 100 actions
machine Wide {
  initial Idle
  state Idle {}
  orthogonal Work {
    state R1 { initial W state W {} final F success from W to F on Finish }
    state R2 { initial W state W {} final F success from W to F on Finish }
    state R3 { initial W state W {} final F success from W to F on Finish }
    state R4 { initial W state W {} final F success from W to F on Finish }
    state R5 { initial W state W {} final F success from W to F on Finish }
    state R6 { initial W state W {} final F success from W to F on Finish }
    state R7 { initial W state W {} final F success from W to F on Finish }
    state R8 { initial W state W {} final F success from W to F on Finish }
    state R9 { initial W state W {} final F success from W to F on Finish }
    state R10 { initial W state W {} final F success from W to F on Finish }
    state R11 { initial W state W {} final F success from W to F on Finish }
    state R12 { initial W state W {} final F success from W to F on Finish }
  }
  from Idle to Work on Go
}
"#;

fn definitions() -> Definitions {
    common::definitions_from(MACHINES)
}

fn stack(store: Arc<dyn ExecutionStore>, queue: Arc<dyn Queue>, coalesce: bool) -> Stack {
    let mut stack = Stack::traced(store, queue).redeploy(definitions());
    stack.worker.driver = stack.worker.driver.clone().with_trace(true);
    stack.control.driver = stack.control.driver.clone().with_trace(true);
    stack.worker.settings.coalesce = coalesce;
    stack
}

fn tick(id: &str, amount: Value) -> Event {
    let mut data = Map::new();
    data.insert("amount".into(), amount);
    Event::with_data("Tick", data).with_id(id)
}

async fn send(stack: &Stack, messages: &[OutgoingMessage]) {
    let failures = stack.queue.publish_batch(messages).await;
    assert!(failures.is_empty(), "published: {failures:?}");
}

/// One receive of up to 10 records, handled as the Lambda event source would.
async fn one_batch(stack: &Stack) -> Vec<(String, Result<Handled, Failed>)> {
    let received = stack.queue.receive(10, 30, 0).await.expect("receive");
    let records: Vec<Record> = received.iter().map(Record::from_received).collect();
    let outcome = stack.worker.handle_batch(&records).await;
    for (message, (_, result)) in received.iter().zip(&outcome.records) {
        if result.is_ok() {
            stack.queue.delete(&message.receipt_handle).await.expect("delete");
        }
    }
    outcome.records
}

/// Everything a user sees of an execution and its trace, and what it left armed.
async fn seen(stack: &Stack, id: &str) -> Value {
    let exe = stack.load(id).await;
    let trace: Vec<Value> = stack
        .store
        .read_trace(id)
        .await
        .expect("trace")
        .into_iter()
        .map(|step| {
            json!({
                "event": step.get("event_kind"),
                "from": step.get("from_path"),
                "to": step.get("to_path"),
                "context": step.get("context_out"),
                "actions": step.get("actions"),
            })
        })
        .collect();
    let timers: Vec<Value> = stack
        .store
        // every timer armed (DynamoDB takes only a finite bound)
        .due_timers(common::START + 1e9)
        .await
        .expect("timers")
        .into_iter()
        .filter(|t| t.execution_id == id)
        .map(|t| json!([t.path, t.fire_at]))
        .collect();
    json!({"state": common::observable(&exe), "trace": trace, "timers": timers})
}

/// How the tree of `id` ended: what [`seen`] shows of it, and each region's status, found
/// by the tree's id prefix (a `Reset` forgets its regions, which stay in the table).
async fn tree_end(stack: &Stack, id: &str) -> (Value, Vec<(String, String)>) {
    let mut children = Vec::new();
    for child in stack
        .store
        .ids_with_prefix(&format!("{id}:"))
        .await
        .expect("children")
    {
        let status = stack.load(&child).await.status.as_str().to_string();
        children.push((child, status));
    }
    children.sort();
    (seen(stack, id).await, children)
}

async fn all_marked(stack: &Stack, id: &str, events: &[Event]) {
    for event in events {
        assert!(
            stack.store.is_processed(id, &event.id).await.expect("mark"),
            "{} has its processed mark",
            event.id
        );
    }
}

/// 26 events to one execution, received 10 at a time: coalesced into 3 commits, the same
/// as 26 commits one at a time in everything but the version.
#[tokio::test]
async fn a_coalesced_burst_ends_as_the_same_events_one_at_a_time() {
    let events: Vec<Event> = (0..25)
        .map(|i| tick(&format!("t{i}"), json!(i)))
        .chain([Event::new("Stop").with_id("stop")])
        .collect();
    let mut views = Vec::new();
    for coalesce in [true, false] {
        let queue = Arc::new(MemoryQueue::default());
        let s = stack(Arc::new(MemoryStore::new()), queue, coalesce);
        s.start("Counter", "c-1").await;
        // a second execution's events interleaved: its own group, its own burst
        s.start("Counter", "c-2").await;
        let mut messages = Vec::new();
        for (i, e) in events.iter().enumerate() {
            messages.push(OutgoingMessage::event("c-1", e));
            if i % 5 == 0 {
                messages.push(OutgoingMessage::event("c-2", &tick(&format!("o{i}"), json!(1))));
            }
        }
        send(&s, &messages).await;
        s.drain().await;
        all_marked(&s, "c-1", &events).await;
        let exe = s.load("c-1").await;
        assert_eq!(exe.status, Status::Done);
        views.push((seen(&s, "c-1").await, seen(&s, "c-2").await, exe.version));
    }
    let (on, off) = (&views[0], &views[1]);
    assert_eq!(on.0, off.0, "c-1 the same either way");
    assert_eq!(on.1, off.1, "c-2 the same either way");
    assert_eq!(
        on.0["trace"].as_array().map(Vec::len),
        Some(27),
        "Start + 26 steps traced"
    );
    assert_eq!(off.2, 27, "one at a time: the start and one commit per event");
    assert!(on.2 < 10, "coalesced: a few commits (version {})", on.2);
}

/// A step that fails ends the burst: the steps before it commit, it and the rest of its
/// group come back, and the redelivery applies each of them once.
#[tokio::test]
async fn a_failing_step_ends_the_burst_after_committing_the_steps_before_it() {
    let queue = Arc::new(MemoryQueue::default());
    let s = stack(Arc::new(MemoryStore::new()), queue, true);
    s.start("Counter", "c-1").await;
    // an int too large for a float added to a float: OverflowError, unrouted (harel)
    let huge = stm_core::pyjson::loads(&format!("1{}", "0".repeat(400))).expect("a big int");
    let events = [
        tick("a", json!(1)),
        tick("b", json!(2)),
        tick("boom", huge),
        tick("c", json!(3)),
    ];
    let messages: Vec<OutgoingMessage> = events.iter().map(|e| OutgoingMessage::event("c-1", e)).collect();
    send(&s, &messages).await;
    let results = one_batch(&s).await;
    let kinds: Vec<String> = results
        .iter()
        .map(|(_, r)| match r {
            Ok(Handled::Processed { .. }) => "processed".to_string(),
            Err(Failed::Error(e)) => {
                format!("error: {}", e.to_string().split(':').next().unwrap_or_default())
            }
            Err(Failed::Skipped) => "skipped".to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "processed",
            "processed",
            "error: int too large to convert to float",
            "skipped"
        ]
    );
    let exe = s.load("c-1").await;
    assert_eq!(exe.context.get("total"), Some(&json!(3.5)), "a and b applied");
    assert_eq!(exe.version, 2, "the start and one commit for a and b");
    assert!(!s.store.is_processed("c-1", "boom").await.expect("mark"));
    assert!(!s.store.is_processed("c-1", "c").await.expect("mark"));
    // the failed record keeps failing (the same input), the one behind it waits
    let results = one_batch(&s).await;
    assert!(matches!(results[0].1, Err(Failed::Error(_))), "{results:?}");
    assert!(!s.store.is_processed("c-1", "c").await.expect("mark"));
}

/// A lost CAS retries the whole burst: its first record fails as a conflict, the rest is
/// skipped, and the next delivery applies all of them once, in order.
#[tokio::test]
async fn a_lost_cas_retries_the_whole_burst() {
    let store = Arc::new(Faulty {
        conflicting: vec!["c-1"],
        ..Faulty::default()
    });
    let queue = Arc::new(MemoryQueue::default());
    let s = stack(store.clone(), queue, true);
    s.start("Counter", "c-1").await;
    let events: Vec<Event> = (1..=4).map(|i| tick(&format!("t{i}"), json!(i))).collect();
    let messages: Vec<OutgoingMessage> = events.iter().map(|e| OutgoingMessage::event("c-1", e)).collect();
    send(&s, &messages).await;
    store.faulty.store(true, Ordering::SeqCst);
    let results = one_batch(&s).await;
    store.faulty.store(false, Ordering::SeqCst);
    assert!(matches!(results[0].1, Err(Failed::Conflict(_))), "{results:?}");
    assert!(
        results[1..]
            .iter()
            .all(|(_, r)| matches!(r, Err(Failed::Skipped))),
        "{results:?}"
    );
    assert_eq!(s.load("c-1").await.version, 1, "nothing of the burst written");
    // the conflict is released at once: the next receive gets the whole burst again
    let results = one_batch(&s).await;
    assert_eq!(results.len(), 4);
    assert!(
        results
            .iter()
            .all(|(_, r)| matches!(r, Ok(Handled::Processed { .. }))),
        "{results:?}"
    );
    let exe = s.load("c-1").await;
    assert_eq!(exe.context.get("total"), Some(&json!(10.5)), "each applied once");
    assert_eq!(exe.version, 2);
    let trace = seen(&s, "c-1").await;
    let kinds: Vec<&Value> = trace["trace"]
        .as_array()
        .expect("trace")
        .iter()
        .map(|t| &t["context"]["total"])
        .collect();
    assert_eq!(
        kinds,
        [&json!(0.5), &json!(1.5), &json!(3.5), &json!(6.5), &json!(10.5)],
        "in order"
    );
}

/// The lifecycle gates apply per event on the execution as the burst left it: a Cancel in
/// the middle (no modelled transition: the execution is CANCELLED) drains what follows.
#[tokio::test]
async fn a_cancel_in_the_middle_of_a_burst_drains_what_follows_it() {
    let queue = Arc::new(MemoryQueue::default());
    let s = stack(Arc::new(MemoryStore::new()), queue, true);
    s.start("Counter", "c-1").await;
    let events = [
        tick("a", json!(1)),
        tick("b", json!(2)),
        Event::new("Cancel").with_id("cancel"),
        tick("c", json!(3)),
        tick("d", json!(4)),
    ];
    let messages: Vec<OutgoingMessage> = events.iter().map(|e| OutgoingMessage::event("c-1", e)).collect();
    send(&s, &messages).await;
    let results = one_batch(&s).await;
    let got: Vec<String> = results
        .iter()
        .map(|(_, r)| match r {
            Ok(Handled::Processed { status, .. }) => format!("processed {status}"),
            Ok(Handled::Drained { status }) => format!("drained {status}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        got,
        [
            "processed RUNNING",
            "processed RUNNING",
            "processed CANCELLED",
            "drained CANCELLED",
            "drained CANCELLED"
        ]
    );
    let exe = s.load("c-1").await;
    assert_eq!(exe.status, Status::Cancelled);
    assert_eq!(exe.context.get("total"), Some(&json!(3.5)));
    assert_eq!(
        exe.version, 2,
        "a, b and the Cancel in one commit; the drains write nothing"
    );
}

/// A SUSPENDED execution keeps each of the burst's records in a row of its own, in order,
/// its item written once for the run: every record is acknowledged (none waits in SQS,
/// where its retention could delete it); the resume arms the recheck, whose `Timeout`
/// steps them once each.
#[tokio::test]
async fn a_suspended_execution_keeps_the_burst_in_parked_rows() {
    let queue = Arc::new(MemoryQueue::default());
    let s = stack(Arc::new(MemoryStore::new()), queue.clone(), true);
    s.start("Counter", "c-1").await;
    s.control.suspend("c-1").await.expect("suspended");
    let before = s.load("c-1").await.version;
    let events: Vec<Event> = (1..=3).map(|i| tick(&format!("t{i}"), json!(i))).collect();
    let messages: Vec<OutgoingMessage> = events.iter().map(|e| OutgoingMessage::event("c-1", e)).collect();
    send(&s, &messages).await;
    let results = one_batch(&s).await;
    assert!(
        results
            .iter()
            .all(|(_, r)| matches!(r, Ok(Handled::ParkedWhileSuspended { .. }))),
        "{results:?}"
    );
    let parked = s.load("c-1").await;
    // the first event of the run writes the item (it marks the execution as having
    // parked events); the others write their own rows only
    assert_eq!(parked.version, before + 1, "one item write for the run");
    assert_eq!(
        s.parked("c-1")
            .await
            .iter()
            .map(|e| e.id.as_str())
            .collect::<Vec<_>>(),
        ["t1", "t2", "t3"]
    );
    assert!(queue.is_empty(), "nothing left in SQS");
    // a redelivery of a kept event changes nothing
    let redelivered = Record {
        message_id: "again".into(),
        receipt_handle: None,
        body: serde_json::to_string(&events[0]).expect("json"),
        group_id: Some("c-1".into()),
        kind: None,
        receive_count: 2,
        trace: None,
    };
    let again = s.worker.handle_batch(&[redelivered]).await.records;
    assert!(
        matches!(again[0].1, Ok(Handled::ParkedWhileSuspended { .. })),
        "{again:?}"
    );
    assert_eq!(s.load("c-1").await.version, before + 1);
    assert_eq!(s.parked("c-1").await.len(), 3, "kept once");
    s.control.resume("c-1").await.expect("resumed");
    s.drain().await;
    let exe = s.load("c-1").await;
    assert_eq!(exe.context.get("total"), Some(&json!(6.5)));
    assert!(s.parked("c-1").await.is_empty());
    assert_eq!(exe.parked_after, None, "the run is over");
    all_marked(&s, "c-1", &events).await;
}

/// Over DynamoDB (moto, through the strict layer, which refuses a transaction of more than
/// 100 actions): ten events that spawn twelve regions (`Go`) or cancel them (`Reset`) would
/// need 131 actions in one commit with a row per spawn intent; the store packs the sixty
/// intents into one row (`more_spawns`), so the burst is one commit of 72 actions; the end
/// is the one-at-a-time end.
#[tokio::test]
async fn a_burst_over_the_transaction_limit_is_cut_into_commits() {
    let mut ends = Vec::new();
    for coalesce in [true, false] {
        let parts = common::moto_parts(if coalesce { "coalesce-on" } else { "coalesce-off" }, 30, 100).await;
        let queue: Arc<dyn Queue> = Arc::new(stm_runtime::SqsQueue::new(
            parts.client.clone(),
            parts.urls.queue_url.clone(),
        ));
        let s = stack(parts.store.clone(), queue, coalesce);
        s.start("Wide", "w-1").await;
        let events: Vec<Event> = (0..10)
            .map(|i| Event::new(if i % 2 == 0 { "Go" } else { "Reset" }).with_id(format!("e{i}")))
            .collect();
        let messages: Vec<OutgoingMessage> =
            events.iter().map(|e| OutgoingMessage::event("w-1", e)).collect();
        send(&s, &messages).await;
        let results = one_batch(&s).await;
        assert_eq!(
            results.len(),
            10,
            "one receive holds the ten records of the group"
        );
        assert!(
            results
                .iter()
                .all(|(_, r)| matches!(r, Ok(Handled::Processed { .. }))),
            "{results:?}"
        );
        let version = s.load("w-1").await.version;
        if coalesce {
            // the execution, 60 cancels, 10 marks and the sixty spawn intents packed in one
            // row: 72 actions, one commit after the start (a row per intent would have
            // taken 131, and two commits)
            assert_eq!(version, 2, "the start and one commit");
        } else {
            assert_eq!(version, 11);
        }
        s.drain().await;
        all_marked(&s, "w-1", &events).await;
        ends.push(tree_end(&s, "w-1").await);
    }
    assert_eq!(ends[0], ends[1], "coalesced and one at a time end the same");
    assert_eq!(ends[0].1.len(), 60, "five entries of twelve regions each");
}

/// The release of parked events, over DynamoDB (moto, through the strict layer): sixteen
/// events parked on a suspended `Wide` (eight `Go` spawning twelve regions each, eight
/// `Reset` cancelling them) are released in bursts that the store's transaction limit of
/// 100 actions cuts (each released event adds its row's and claim's deletes and its mark),
/// so a burst is written as several commits, each publishing before the next; the end is
/// the end of releasing them one commit each.
#[tokio::test]
async fn a_release_over_the_transaction_limit_is_cut_into_commits() {
    let mut ends = Vec::new();
    let mut commits = Vec::new();
    for burst in [16, 1] {
        let parts = common::moto_parts(&format!("release-burst-{burst}"), 30, 100).await;
        let queue: Arc<dyn Queue> = Arc::new(stm_runtime::SqsQueue::new(
            parts.client.clone(),
            parts.urls.queue_url.clone(),
        ));
        let mut s = stack(parts.store.clone(), queue, true);
        s.worker.driver = s.worker.driver.clone().with_release_burst(burst);
        s.start("Wide", "w-1").await;
        s.control.suspend("w-1").await.expect("suspended");
        let events: Vec<Event> = (0..16)
            .map(|i| Event::new(if i % 2 == 0 { "Go" } else { "Reset" }).with_id(format!("e{i}")))
            .collect();
        let messages: Vec<OutgoingMessage> =
            events.iter().map(|e| OutgoingMessage::event("w-1", e)).collect();
        send(&s, &messages).await;
        s.drain().await;
        assert_eq!(s.parked("w-1").await.len(), 16, "every event parked");
        s.control.resume("w-1").await.expect("resumed");
        let resumed = s.load("w-1").await.version;
        s.drain().await;
        assert!(s.parked("w-1").await.is_empty(), "every event released");
        commits.push(s.load("w-1").await.version - resumed);
        all_marked(&s, "w-1", &events).await;
        ends.push(tree_end(&s, "w-1").await);
    }
    assert_eq!(
        ends[0], ends[1],
        "released in bursts and one at a time end the same"
    );
    assert_eq!(ends[0].1.len(), 96, "eight entries of twelve regions each");
    // one at a time: a commit per event; in bursts of 16: cut by the limit, more than one
    assert_eq!(commits[1], 16, "{commits:?}");
    assert!(
        1 < commits[0] && commits[0] < 16,
        "the burst was cut by the limit: {commits:?}"
    );
}
