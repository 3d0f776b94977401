//! The relay and the sweeper over MemoryStore + MemoryQueue: failed publishes stay pending
//! (nothing is dropped) and keep their group's order; a double sweep sends one Timeout.

mod common;

use std::sync::Arc;

use common::faulty::Faulty;
use common::{event, Stack};
use serde_json::json;
use stm_core::Status;
use stm_runtime::{relay, sweeper, MemoryQueue, Queue};
use stm_store::{Commit, ExecutionStore, MemoryStore, SpawnIntent};

#[tokio::test]
async fn failed_publishes_stay_pending_and_the_next_run_delivers_them() {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(5));
    let stack = Stack::new(store.clone(), queue.clone());
    for id in ["a", "b", "c"] {
        // the Start publishes fail: the creates still succeed, the entries stay queued
        queue.fail_next_publishes(1);
        stack
            .control
            .create("Flat", None, Some(id))
            .await
            .expect("create");
    }
    assert_eq!(store.pending_outbox().await.expect("outbox").len(), 3);
    assert!(queue.is_empty());

    queue.fail_next_publishes(1);
    let first = relay::relay_pending(store.as_ref(), queue.as_ref())
        .await
        .expect("relay");
    assert_eq!(
        (first.forwarded, first.failed, first.remaining),
        (2, 1, 1),
        "{first:?}"
    );
    let second = relay::relay_pending(store.as_ref(), queue.as_ref())
        .await
        .expect("relay");
    assert_eq!(
        (second.forwarded, second.failed, second.remaining),
        (1, 0, 0),
        "{second:?}"
    );
    stack.drain().await;
    for id in ["a", "b", "c"] {
        assert_eq!(stack.load(id).await.status, Status::Running);
    }
}

#[tokio::test]
async fn a_group_with_a_failed_publish_is_held_back_in_order() {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(5));
    let stack = Stack::new(store.clone(), queue.clone());
    // the fork's spawn intents fail to publish in the inline flush; the broadcast that
    // follows must not overtake them (it would reach regions that do not exist yet)
    stack
        .control
        .create("Fork", None, Some("f"))
        .await
        .expect("create");
    stack.drain().await;
    stack
        .control
        .send("f", &event("Go", json!({})))
        .await
        .expect("send");
    queue.fail_next_publishes(2);
    stack.drain().await;
    stack
        .control
        .send("f", &event("PaymentOk", json!({"receipt": "r"})))
        .await
        .expect("send");
    stack
        .control
        .send("f", &event("Packed", json!({})))
        .await
        .expect("send");
    stack.drain().await;
    let parent = stack.load("f").await;
    assert_eq!(parent.status, Status::Done, "{parent:?}");
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
}

#[tokio::test]
async fn a_double_sweep_sends_one_timeout_and_suspended_timers_wait() {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(5));
    let stack = Stack::new(store.clone(), queue.clone());
    stack
        .control
        .create("Timed", None, Some("t"))
        .await
        .expect("create");
    stack
        .control
        .create("Timed", None, Some("s"))
        .await
        .expect("create");
    stack.drain().await;
    stack.control.suspend("s").await.expect("suspend");
    let later = common::START + 10.0;
    let before = queue.published();
    // the delete "fails" to happen between two sweeps: the same timer is swept twice
    let due = store.due_timers(later).await.expect("due");
    assert_eq!(due.len(), 2);
    let first = sweeper::sweep(store.as_ref(), queue.as_ref(), later)
        .await
        .expect("sweep");
    assert_eq!((first.fired, first.suspended), (1, 1), "{first:?}");
    let message = stm_runtime::OutgoingMessage::timeout("t", &due[0].path, due[0].fire_at);
    assert!(queue.publish_batch(&[message]).await.is_empty());
    assert_eq!(
        queue.published() - before,
        1,
        "the re-sent Timeout is deduplicated"
    );
    stack.clock.set(later);
    stack.drain().await;
    assert_eq!(stack.load("t").await.active_path.as_deref(), Some("Expired"));
    assert_eq!(
        stack.load("s").await.active_path.as_deref(),
        Some("Waiting"),
        "suspended: not fired"
    );
    stack.control.resume("s").await.expect("resume");
    stack.drain().await;
    assert_eq!(
        stack.load("s").await.active_path.as_deref(),
        Some("Expired"),
        "fires once resumed"
    );
}

/// A worker commits while a relay is between its two reads: a step that spawns a region,
/// then the broadcast to that region. The relay's pass reads the outbox before the spawn
/// intents (`ExecutionStore::oldest_pending_seqs`),
/// so every event it sees was committed after the intents of the regions it goes to, and
/// its second read finds those (or they were published already): an event never reaches a
/// region's group before the region's spawn intent (it would find no execution there and
/// be dropped as a no-op, lost).
#[tokio::test]
async fn an_event_committed_between_the_relays_reads_never_overtakes_its_regions_spawn() {
    let store = Arc::new(Faulty::default());
    let queue = Arc::new(MemoryQueue::new(5));
    let stack = Stack::new(store.clone(), queue.clone());
    stack
        .control
        .create("Flat", None, Some("p"))
        .await
        .expect("create");
    stack.drain().await;
    let region = "p:Work.Region:0";
    *store.between_reads.lock().expect("lock") = vec![
        (
            "p".to_string(),
            Commit {
                spawns: vec![SpawnIntent {
                    child_id: region.into(),
                    root_path: "Work.Region".into(),
                    context: Default::default(),
                }],
                ..Commit::default()
            },
        ),
        (
            "p".to_string(),
            Commit {
                emits: vec![(Some(region.into()), event("Ping", json!({})))],
                ..Commit::default()
            },
        ),
    ];
    let region_messages = || -> Vec<&'static str> {
        queue
            .snapshot()
            .iter()
            .filter(|m| m.group_id == region)
            .map(|m| if m.spawn { "spawn" } else { "event" })
            .collect()
    };
    relay::relay_pending(store.as_ref(), queue.as_ref())
        .await
        .expect("relay");
    let first = region_messages();
    assert!(
        first.first() != Some(&"event"),
        "the event went out before its region's spawn intent: {first:?}"
    );
    relay::relay_pending(store.as_ref(), queue.as_ref())
        .await
        .expect("relay");
    assert_eq!(region_messages(), ["spawn", "event"]);
}
