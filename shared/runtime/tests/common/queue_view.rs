//! What a test inspects of the queue under test, in memory or on SQS: its depth, what is
//! visible in it, that it and its dead-letter queue were left empty, and what a consumer
//! receives from it.

use std::collections::BTreeMap;
use std::sync::Arc;

use stm_runtime::queue::ReceivedMessage;
use stm_runtime::{MemoryQueue, Queue, SqsQueue};

pub enum QueueView {
    Memory(Arc<MemoryQueue>),
    Sqs { main: SqsQueue, dlq: SqsQueue },
}

impl QueueView {
    /// Messages in the queue, visible or in flight.
    pub async fn depth(&self) -> u64 {
        match self {
            QueueView::Memory(q) => q.len() as u64,
            QueueView::Sqs { main, .. } => main.approximate_depth().await.expect("queue depth"),
        }
    }

    /// The visible messages, for a report of what is stuck (an SQS receive with no
    /// visibility timeout: they stay visible; their receive counts go up by one).
    pub async fn peek(&self) -> Vec<ReceivedMessage> {
        match self {
            QueueView::Memory(_) => Vec::new(),
            QueueView::Sqs { main, .. } => main.receive(10, 0, 0).await.unwrap_or_default(),
        }
    }

    pub async fn assert_empty(&self, what: &str) {
        match self {
            QueueView::Memory(q) => {
                assert!(q.is_empty(), "{what}: messages left: {:?}", q.snapshot());
                assert!(
                    q.dead_letters().is_empty(),
                    "{what}: dead-lettered: {:?}",
                    q.dead_letters()
                );
            }
            QueueView::Sqs { main, dlq } => {
                assert_eq!(
                    main.approximate_depth().await.expect("depth"),
                    0,
                    "{what}: messages left"
                );
                let dead = dlq.receive(10, 0, 0).await.expect("receive from the DLQ");
                assert!(dead.is_empty(), "{what}: dead-lettered: {dead:?}");
            }
        }
    }
}

/// What a consumer receives from `queue` until two receives in a row find nothing: each
/// message's body (an event's JSON), deleted once received, by message group in the order
/// received.
pub async fn consume_by_group(queue: &dyn Queue) -> BTreeMap<String, Vec<serde_json::Value>> {
    let mut got: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    let mut empty = 0;
    while empty < 2 {
        let messages = queue.receive(10, 30, 0).await.expect("receive");
        if messages.is_empty() {
            empty += 1;
            continue;
        }
        for m in messages {
            let body: serde_json::Value = serde_json::from_str(&m.body).expect("an event");
            got.entry(m.group_id.clone().unwrap_or_default())
                .or_default()
                .push(body);
            queue.delete(&m.receipt_handle).await.expect("delete");
        }
    }
    got
}

/// An event body's `id`.
pub fn event_id(body: &serde_json::Value) -> String {
    body["id"].as_str().unwrap_or_default().to_string()
}
