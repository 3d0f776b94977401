//! The in-memory FIFO queue (tests, the embedded runner): SQS FIFO's group order and
//! exclusivity, deduplication window, visibility and dead-lettering, and the limits it
//! refuses by.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{
    message_problem, BatchSize, OutgoingMessage, PublishFailure, Queue, QueueError, ReceivedMessage,
    MAX_BATCH, MESSAGE_KIND_ATTRIBUTE, SPAWN_KIND,
};
use crate::telemetry::TRACEPARENT_ATTRIBUTE;

#[derive(Debug, Clone)]
struct StoredMessage {
    message_id: String,
    message: OutgoingMessage,
    receive_count: u32,
    /// When it becomes receivable again; `None`: never received or released.
    hidden_until: Option<Instant>,
    receipt_handle: Option<String>,
}

#[derive(Debug, Default)]
struct MemoryInner {
    messages: VecDeque<StoredMessage>,
    dead_letters: Vec<OutgoingMessage>,
    /// deduplication id -> when it was sent (SQS's 5-minute window).
    recent: HashMap<String, Instant>,
    next_id: u64,
    /// Publishes to fail (per message), for tests.
    fail_next: usize,
    published: u64,
    /// Each `publish_batch` call's entries and bytes, for tests: a caller that means one
    /// call to be one `SendMessageBatch` (the relay) must keep within SQS's limits.
    publish_calls: Vec<BatchSize>,
}

/// An in-memory SQS FIFO queue with the semantics the worker relies on: per-group order,
/// one receiver per group while any of its messages is in flight, visibility timeouts,
/// the 5-minute deduplication window, and a dead-letter list after `max_receive_count`.
/// It refuses what SQS refuses of one message ([`message_problem`]: a group or
/// deduplication id outside SQS's rule, a message over 1 MiB), so tests over memory catch
/// what would fail on AWS.
#[derive(Debug)]
pub struct MemoryQueue {
    inner: Mutex<MemoryInner>,
    max_receive_count: u32,
}

impl Default for MemoryQueue {
    fn default() -> Self {
        MemoryQueue::new(5)
    }
}

const DEDUP_WINDOW: Duration = Duration::from_secs(300);

impl MemoryQueue {
    pub fn new(max_receive_count: u32) -> Self {
        MemoryQueue {
            inner: Mutex::new(MemoryInner::default()),
            max_receive_count: max_receive_count.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fail the next `n` messages published (each reported as a failure), for tests.
    pub fn fail_next_publishes(&self, n: usize) {
        self.lock().fail_next = n;
    }

    /// Messages in the queue (visible or in flight).
    pub fn len(&self) -> usize {
        self.lock().messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of what the queue holds, oldest first.
    pub fn snapshot(&self) -> Vec<OutgoingMessage> {
        self.lock().messages.iter().map(|m| m.message.clone()).collect()
    }

    pub fn dead_letters(&self) -> Vec<OutgoingMessage> {
        self.lock().dead_letters.clone()
    }

    /// Messages accepted so far (deduplicated sends not counted).
    pub fn published(&self) -> u64 {
        self.lock().published
    }

    /// The entries and bytes ([`OutgoingMessage::sqs_bytes`]) of every `publish_batch`
    /// call so far, oldest first.
    pub fn publish_calls(&self) -> Vec<BatchSize> {
        self.lock().publish_calls.clone()
    }
}

#[async_trait]
impl Queue for MemoryQueue {
    async fn publish_batch(&self, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        let mut inner = self.lock();
        let now = Instant::now();
        inner
            .recent
            .retain(|_, at| now.duration_since(*at) < DEDUP_WINDOW);
        let mut call = BatchSize::default();
        for message in messages {
            call.add(message.sqs_bytes());
        }
        inner.publish_calls.push(call);
        let mut failures = Vec::new();
        for (index, message) in messages.iter().enumerate() {
            if let Some((code, text)) = message_problem(message) {
                // what SQS answers for this message alone (`InvalidParameterValue`...)
                failures.push(PublishFailure {
                    index,
                    code: code.into(),
                    message: text,
                });
                continue;
            }
            if inner.fail_next > 0 {
                inner.fail_next -= 1;
                failures.push(PublishFailure {
                    index,
                    code: "InjectedFailure".into(),
                    message: "MemoryQueue::fail_next_publishes".into(),
                });
                continue;
            }
            if inner.recent.contains_key(&message.deduplication_id) {
                continue; // SQS accepts and drops a duplicate within the window
            }
            inner.recent.insert(message.deduplication_id.clone(), now);
            inner.next_id += 1;
            inner.published += 1;
            let message_id = format!("m-{}", inner.next_id);
            inner.messages.push_back(StoredMessage {
                message_id,
                message: message.clone(),
                receive_count: 0,
                hidden_until: None,
                receipt_handle: None,
            });
        }
        failures
    }

    async fn receive(
        &self,
        max: usize,
        visibility_seconds: i32,
        _wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, QueueError> {
        let mut inner = self.lock();
        let now = Instant::now();
        let in_flight = |m: &StoredMessage| m.hidden_until.is_some_and(|t| t > now);
        let mut blocked: std::collections::HashSet<String> = inner
            .messages
            .iter()
            .filter(|m| in_flight(m))
            .map(|m| m.message.group_id.clone())
            .collect();
        // redrive first: a message received max_receive_count times goes to the DLQ
        let max_receives = self.max_receive_count;
        let mut kept = VecDeque::with_capacity(inner.messages.len());
        let mut dead = Vec::new();
        for m in inner.messages.drain(..) {
            if !in_flight(&m) && m.receive_count >= max_receives && !blocked.contains(&m.message.group_id) {
                dead.push(m.message);
            } else {
                kept.push_back(m);
            }
        }
        inner.messages = kept;
        inner.dead_letters.extend(dead);
        let mut out = Vec::new();
        let mut taken_groups = std::collections::HashSet::new();
        let mut next_id = inner.next_id;
        for m in inner.messages.iter_mut() {
            if out.len() >= max.clamp(1, MAX_BATCH) {
                break;
            }
            let group = m.message.group_id.clone();
            if in_flight(m) {
                blocked.insert(group);
                continue;
            }
            if blocked.contains(&group) && !taken_groups.contains(&group) {
                continue;
            }
            next_id += 1;
            let receipt = format!("r-{next_id}");
            m.receive_count += 1;
            m.hidden_until = Some(now + Duration::from_secs(visibility_seconds.max(0) as u64));
            m.receipt_handle = Some(receipt.clone());
            taken_groups.insert(group.clone());
            blocked.insert(group.clone());
            let mut attributes = BTreeMap::new();
            attributes.insert("MessageGroupId".to_string(), group.clone());
            attributes.insert("ApproximateReceiveCount".to_string(), m.receive_count.to_string());
            attributes.insert(
                "MessageDeduplicationId".to_string(),
                m.message.deduplication_id.clone(),
            );
            let mut message_attributes = BTreeMap::new();
            if m.message.spawn {
                message_attributes.insert(MESSAGE_KIND_ATTRIBUTE.to_string(), SPAWN_KIND.to_string());
            }
            if let Some(ctx) = &m.message.trace {
                message_attributes.insert(TRACEPARENT_ATTRIBUTE.to_string(), ctx.traceparent());
            }
            out.push(ReceivedMessage {
                message_id: m.message_id.clone(),
                receipt_handle: receipt,
                body: m.message.body.clone(),
                group_id: Some(group),
                receive_count: m.receive_count,
                message_attributes,
                attributes,
            });
        }
        inner.next_id = next_id;
        Ok(out)
    }

    async fn delete(&self, receipt_handle: &str) -> Result<(), QueueError> {
        let mut inner = self.lock();
        inner
            .messages
            .retain(|m| m.receipt_handle.as_deref() != Some(receipt_handle));
        Ok(())
    }

    async fn change_visibility(&self, receipt_handle: &str, seconds: i32) -> Result<(), QueueError> {
        let mut inner = self.lock();
        let until = Instant::now() + Duration::from_secs(seconds.max(0) as u64);
        match inner
            .messages
            .iter_mut()
            .find(|m| m.receipt_handle.as_deref() == Some(receipt_handle))
        {
            Some(m) => {
                m.hidden_until = if seconds <= 0 { None } else { Some(until) };
                Ok(())
            }
            None => Err(QueueError::failed(
                "ChangeMessageVisibility",
                format!("unknown receipt handle {receipt_handle}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::wire::tests::sized;
    use crate::queue::MAX_MESSAGE_BYTES;
    use stm_core::Event;

    #[tokio::test]
    async fn memory_queue_refuses_what_sqs_refuses() {
        let q = MemoryQueue::new(3);
        let failures = q
            .publish_batch(&[
                msg("ok", 1),
                msg("a b", 2),
                sized("ok", 3, MAX_MESSAGE_BYTES),
                msg(&"x".repeat(129), 4),
            ])
            .await;
        let codes: Vec<(usize, &str)> = failures.iter().map(|f| (f.index, f.code.as_str())).collect();
        assert_eq!(
            codes,
            [
                (1, "InvalidParameterValue"),
                (2, "MessageTooLong"),
                (3, "InvalidParameterValue")
            ]
        );
        assert_eq!(q.len(), 1);
        let calls = q.publish_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].entries, 4);
        assert!(calls[0].bytes > MAX_MESSAGE_BYTES, "{calls:?}");
    }

    fn msg(group: &str, n: u32) -> OutgoingMessage {
        OutgoingMessage::event(group, &Event::new(format!("E{n}")).with_id(format!("e{n}")))
    }

    #[tokio::test]
    async fn memory_queue_keeps_group_order_and_exclusivity() {
        let q = MemoryQueue::new(3);
        assert!(q
            .publish_batch(&[msg("a", 1), msg("a", 2), msg("b", 3)])
            .await
            .is_empty());
        let first = q.receive(1, 30, 0).await.expect("receive");
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].group_id.as_deref(), Some("a"));
        // group a is in flight: only b is receivable
        let second = q.receive(10, 30, 0).await.expect("receive");
        assert_eq!(
            second
                .iter()
                .map(|m| m.group_id.clone().unwrap_or_default())
                .collect::<Vec<_>>(),
            ["b"]
        );
        q.delete(&first[0].receipt_handle).await.expect("delete");
        let third = q.receive(10, 30, 0).await.expect("receive");
        assert_eq!(third.len(), 1);
        assert!(third[0].body.contains("\"E2\""));
    }

    #[tokio::test]
    async fn memory_queue_dedupes_and_dead_letters() {
        let q = MemoryQueue::new(2);
        q.publish_batch(&[msg("a", 1)]).await;
        q.publish_batch(&[msg("a", 1)]).await;
        assert_eq!(q.len(), 1);
        for _ in 0..2 {
            let got = q.receive(1, 30, 0).await.expect("receive");
            q.change_visibility(&got[0].receipt_handle, 0)
                .await
                .expect("release");
        }
        assert!(q.receive(1, 30, 0).await.expect("receive").is_empty());
        assert_eq!(q.dead_letters().len(), 1);
    }
}
