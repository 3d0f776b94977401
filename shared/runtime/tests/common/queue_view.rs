//! What a test inspects of the queue under test, in memory or on SQS: its depth, what is
//! visible in it, and that it and its dead-letter queue were left empty.

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
