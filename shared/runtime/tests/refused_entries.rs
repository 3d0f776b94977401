//! Entries refused one by one inside a batch that succeeded (issue 43), in memory:
//!
//! - a refused `SendMessageBatch` entry holds back the later entries of its message group,
//!   also those the relay cuts into its next batch of 10, so each group's messages reach
//!   the queue in commit order (the relay's `blocked` set; DESIGN 3.5, "a refused entry
//!   holds back the later entries of its group");
//! - a status event the bus refused stays pending and goes out with a later run; it is
//!   never acknowledged as sent.
//!
//! The queue here refuses as the strict layer's fault mode does on moto
//! (`stm_testkit::strict::entry_faults`): the chosen entry fails with every later entry of
//! its group in that request. The same two rules are checked over moto with the strict
//! layer's faults per entry: `aws_faults.rs` (`refused_entries`) and `status_events.rs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use stm_core::{Event, Execution, Status};
use stm_runtime::queue::{HookedQueue, PublishFailure, QueueHook};
use stm_runtime::relay::{self, RelayBounds};
use stm_runtime::status::{notice, MemoryBus, StatusBus, StatusEvents};
use stm_runtime::{MemoryQueue, OutgoingMessage, Queue};
use stm_store::{Commit, ExecutionStore, MemoryStore};

/// The hook of a [`MemoryQueue`] whose `publish_batch` refuses the entries of the events
/// named in `refuse` (each once): such an entry fails, and so does every later entry of its
/// group in the same call (a FIFO group's tail cannot be accepted past a refused entry
/// without reordering it); the rest is published.
struct Refusing {
    refuse: Mutex<Vec<String>>,
    /// Entries per `publish_batch` call.
    calls: Mutex<Vec<usize>>,
}

fn event_id(message: &OutgoingMessage) -> String {
    serde_json::from_str::<serde_json::Value>(&message.body)
        .ok()
        .and_then(|v| v["id"].as_str().map(str::to_string))
        .unwrap_or_default()
}

#[async_trait]
impl QueueHook for Refusing {
    async fn publish_batch(&self, inner: &dyn Queue, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        self.calls.lock().expect("calls").push(messages.len());
        let first = {
            let mut refuse = self.refuse.lock().expect("refuse");
            let at = messages.iter().position(|m| refuse.contains(&event_id(m)));
            if let Some(at) = at {
                let id = event_id(&messages[at]);
                refuse.retain(|r| *r != id);
            }
            at
        };
        let failing = |i: usize| {
            first.is_some_and(|f| i == f || (i > f && messages[i].group_id == messages[f].group_id))
        };
        let kept: Vec<usize> = (0..messages.len()).filter(|&i| !failing(i)).collect();
        let sent: Vec<OutgoingMessage> = kept.iter().map(|&i| messages[i].clone()).collect();
        let mut failures: Vec<PublishFailure> = inner
            .publish_batch(&sent)
            .await
            .into_iter()
            .map(|f| PublishFailure {
                index: kept[f.index],
                ..f
            })
            .collect();
        failures.extend(
            (0..messages.len())
                .filter(|&i| failing(i))
                .map(|index| PublishFailure {
                    index,
                    code: "InternalError".into(),
                    message: "refused (test)".into(),
                }),
        );
        failures.sort_by_key(|f| f.index);
        failures
    }
}

/// The queue's messages per group, as event ids in queue order.
fn by_group(queue: &MemoryQueue) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for message in queue.snapshot() {
        out.entry(message.group_id.clone())
            .or_default()
            .push(event_id(&message));
    }
    out
}

async fn relay_with(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    bus: Option<&dyn StatusBus>,
) -> relay::RelaySummary {
    relay::relay_pending_until(store, queue, bus, None, f64::INFINITY, RelayBounds::default())
        .await
        .expect("relay")
}

#[tokio::test]
async fn a_refused_entry_holds_back_the_later_entries_of_its_group_in_the_next_batch() {
    let store = MemoryStore::new();
    let inner = Arc::new(MemoryQueue::new(5));
    let queue = HookedQueue::new(
        inner.clone(),
        Refusing {
            refuse: Mutex::new(vec!["g2".into()]),
            calls: Mutex::default(),
        },
    );
    // one commit's 16 events in seq order: every fourth to `h`, the others to `g`; the
    // relay sends them 10 then 6
    let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut emits = Vec::new();
    let (mut g, mut h) = (0, 0);
    for i in 0..16 {
        let (group, id) = if i % 4 == 3 {
            h += 1;
            ("h", format!("h{}", h - 1))
        } else {
            g += 1;
            ("g", format!("g{}", g - 1))
        };
        let mut event = Event::new("Ping");
        event.id = id.clone();
        expected.entry(group.to_string()).or_default().push(id);
        emits.push((Some(group.to_string()), event));
    }
    let mut source = Execution::new("source", "Flat");
    store
        .commit(
            &mut source,
            Commit {
                emits,
                ..Commit::default()
            },
        )
        .await
        .expect("commit");

    let first = relay_with(&store, &queue, None).await;
    assert_eq!(
        *queue.hook.calls.lock().expect("calls"),
        vec![10, 2],
        "two batches, the second without g's four held-back entries"
    );
    let sent = by_group(&inner);
    // g2 was refused in the first batch (g3..g7 with it, as the rest of its group there);
    // g8..g11 came in the second batch and must wait behind it
    assert_eq!(
        sent["g"],
        ["g0", "g1"],
        "group g overtook its refused entry: {sent:?}"
    );
    assert_eq!(
        sent["h"], expected["h"],
        "another group is not held back: {sent:?}"
    );
    let pending: Vec<String> = store
        .pending_outbox()
        .await
        .expect("outbox")
        .iter()
        .map(|e| e.event.id.clone())
        .collect();
    assert_eq!(
        pending,
        expected["g"][2..].to_vec(),
        "the refused entry and every later one of g stay pending"
    );
    assert_eq!((first.failed, first.remaining), (10, 10), "{first:?}");

    // the next run sends them, in order
    let second = relay_with(&store, &queue, None).await;
    assert_eq!((second.forwarded, second.remaining), (10, 0), "{second:?}");
    assert_eq!(
        by_group(&inner),
        expected,
        "each group in commit order, each message once"
    );
}

#[tokio::test]
async fn refused_status_events_stay_pending_until_the_bus_takes_them() {
    let store = MemoryStore::new();
    let queue = MemoryQueue::new(5);
    let bus = MemoryBus::new();
    // five executions' FAILED notices, committed together
    let mut emits = Vec::new();
    for i in 0..5 {
        let mut exe = Execution::new(format!("e{i}"), "Order");
        exe.status = Status::Failed;
        emits.push((
            None,
            notice(StatusEvents::All, Status::Running, &exe, 1_700_000_000.0).expect("a notice"),
        ));
    }
    let mut source = Execution::new("source", "Order");
    store
        .commit(
            &mut source,
            Commit {
                emits,
                ..Commit::default()
            },
        )
        .await
        .expect("commit");
    let on_bus = |bus: &MemoryBus| -> Vec<String> {
        bus.events()
            .iter()
            .map(|e| {
                let detail: serde_json::Value = serde_json::from_str(&e.detail).expect("JSON");
                detail["executionId"].as_str().unwrap_or_default().to_string()
            })
            .collect()
    };

    // the bus refuses the first two entries of its next put (e0's and e1's)
    bus.refuse_next(2);
    let first = relay_with(&store, &queue, Some(&bus)).await;
    assert_eq!(bus.refused(), 2, "the bus refused two entries");
    assert_eq!(on_bus(&bus), ["e2", "e3", "e4"]);
    let pending: Vec<String> = store
        .pending_outbox()
        .await
        .expect("outbox")
        .iter()
        .map(|e| {
            e.event.data["executionId"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(
        pending,
        ["e0", "e1"],
        "a refused status event was acknowledged as sent: {first:?}"
    );
    assert_eq!((first.forwarded, first.remaining), (3, 2), "{first:?}");

    // the next run puts them; each execution's notice is on the bus once
    let second = relay_with(&store, &queue, Some(&bus)).await;
    assert_eq!((second.forwarded, second.remaining), (2, 0), "{second:?}");
    let mut all = on_bus(&bus);
    all.sort();
    assert_eq!(all, ["e0", "e1", "e2", "e3", "e4"]);
    assert!(queue.is_empty(), "status events never go to the queue");
}
