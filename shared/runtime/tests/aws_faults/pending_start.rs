//! An event sent after a `create` whose `Start` was not queued is not lost: the loss the
//! faults exposed, pinned down.

use std::sync::Arc;

use serde_json::json;
use stm_runtime::MemoryQueue;
use stm_store::{ExecutionStore, MemoryStore};

use crate::common::{self, event};

/// The loss the faults exposed: `create` commits the execution (`PENDING`) with its `Start`
/// in the outbox and then publishes it; when the queue refuses that publish (SQS throttled
/// or failing past the SDK's retries) `create` still succeeds and leaves the `Start` to the
/// scheduled relay. An event the client sends next (at once, or any time before the next
/// relay run) reached the execution's group *before* the `Start`, and the worker drops any
/// event for a `PENDING` execution: it was lost although `send` had succeeded. `send` now
/// publishes a `PENDING` execution's pending outbox entries (its `Start`) before the event.
#[tokio::test]
async fn an_event_sent_after_a_create_whose_start_was_not_queued_is_not_lost() {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(5));
    let stack = common::Stack::new(store.clone(), queue.clone());
    queue.fail_next_publishes(1);
    stack
        .control
        .create("Flat", None, Some("flat"))
        .await
        .expect("create succeeds: the Start stays for the relay");
    assert_eq!(store.pending_outbox().await.expect("outbox").len(), 1);
    assert!(queue.is_empty(), "the Start was not queued");
    // the client goes on at once, before any relay run
    stack
        .control
        .send("flat", &event("Go", json!({})))
        .await
        .expect("send");
    stack.drain().await;
    let exe = stack.load("flat").await;
    assert_eq!(
        (exe.active_path.as_deref(), exe.context.get("n")),
        (Some("Working"), Some(&json!(1))),
        "Go was applied after the Start: {exe:?}"
    );
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
}
