//! The event queue: SQS FIFO in production, an in-memory FIFO for tests.
//!
//! The wire contract is DESIGN §3.3:
//! - an **event** message's body is harel's Event JSON and its `MessageGroupId` is the
//!   target execution id, so a harel sender can feed our worker and SQS itself keeps one
//!   in-flight event per execution;
//! - a **spawn intent** carries the message attribute `stm_kind = spawn`; its body is the
//!   spawn entry and its group is the child id;
//! - the `MessageDeduplicationId` is deterministic per logical send (outbox seq, spawn seq,
//!   timer identity, or event id + target), so a retried publish within SQS's 5-minute
//!   window is dropped.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_sdk_sqs::types::{
    MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName, SendMessageBatchRequestEntry,
};
use serde_json::json;
use sha2::{Digest, Sha256};
use stm_core::{Event, Map, Value};
use stm_store::{OutboxEntry, SpawnEntry};

use crate::driver::DriverError;

/// The message attribute that marks a non-event message, and its value for a spawn intent.
pub const MESSAGE_KIND_ATTRIBUTE: &str = "stm_kind";
pub const SPAWN_KIND: &str = "spawn";

/// `SendMessageBatch` takes at most this many entries.
pub const MAX_BATCH: usize = 10;

/// One message to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct OutgoingMessage {
    pub group_id: String,
    pub deduplication_id: String,
    pub body: String,
    /// A spawn intent (sent with the `stm_kind = spawn` attribute).
    pub spawn: bool,
}

/// A deduplication id from the parts of a logical send: the SHA-256 of the parts (hex,
/// 64 characters, within SQS's 128-character alphabet whatever the ids contain).
pub fn deduplication_id(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn event_body(event: &Event) -> String {
    // Event is plain data (string keys, JSON values): serialization cannot fail.
    serde_json::to_string(event).unwrap_or_else(|_| "{}".to_string())
}

impl OutgoingMessage {
    /// A committed outbox entry (`None`: an entry without a target, nothing to send).
    pub fn outbox(entry: &OutboxEntry) -> Option<Self> {
        let target = entry.target_id.as_ref()?;
        Some(OutgoingMessage {
            group_id: target.clone(),
            deduplication_id: deduplication_id(&["outbox", &entry.seq.to_string()]),
            body: event_body(&entry.event),
            spawn: false,
        })
    }

    /// A committed spawn intent, to the child's group.
    pub fn spawn(entry: &SpawnEntry) -> Self {
        let body = json!({
            "seq": entry.seq,
            "parent_id": entry.parent_id,
            "child_id": entry.child_id,
            "root_path": entry.root_path,
            "context": entry.context,
        });
        OutgoingMessage {
            group_id: entry.child_id.clone(),
            deduplication_id: deduplication_id(&["spawn", &entry.seq.to_string()]),
            body: body.to_string(),
            spawn: true,
        }
    }

    /// An event sent from outside (an operator, a client, the control plane): deduplicated
    /// by its event id and target, since one event may go to several groups (a broadcast).
    pub fn event(target_id: &str, event: &Event) -> Self {
        OutgoingMessage {
            group_id: target_id.to_string(),
            deduplication_id: deduplication_id(&["event", target_id, &event.id]),
            body: event_body(event),
            spawn: false,
        }
    }

    /// A due timer's `Timeout`: deduplicated by the timer's identity (its event id is
    /// derived from execution, path and fire_at), so a double sweep sends one message.
    pub fn timeout(execution_id: &str, path: &str, fire_at: f64) -> Self {
        let event = stm_core::engine::timeout_event(execution_id, path, fire_at);
        OutgoingMessage {
            group_id: execution_id.to_string(),
            deduplication_id: deduplication_id(&["timeout", &event.id]),
            body: event_body(&event),
            spawn: false,
        }
    }
}

/// A message the queue received, as the worker needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedMessage {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
    pub group_id: Option<String>,
    /// `ApproximateReceiveCount`.
    pub receive_count: u32,
    /// The string-valued message attributes.
    pub message_attributes: BTreeMap<String, String>,
    /// The system attributes (`MessageGroupId`, `SentTimestamp`, ...), as SQS names them.
    pub attributes: BTreeMap<String, String>,
}

/// What a message asks the worker to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// Process `event` on execution `target_id`.
    Event { target_id: String, event: Event },
    /// Create (and start) a child execution.
    Spawn(SpawnEntry),
}

/// Why a message is poison: it can never be processed, whatever retries happen.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("poison message: {0}")]
pub struct Poison(pub String);

impl Incoming {
    /// Read a message: `kind` is the `stm_kind` attribute, `group_id` its message group,
    /// and `message_id` stands in for an event id the body lacks (it is stable across
    /// redeliveries, so dedupe still holds).
    pub fn parse(
        body: &str,
        group_id: Option<&str>,
        kind: Option<&str>,
        message_id: &str,
    ) -> Result<Self, Poison> {
        let value: Value =
            serde_json::from_str(body).map_err(|e| Poison(format!("the body is not JSON ({e})")))?;
        let Value::Object(mut fields) = value else {
            return Err(Poison("the body is not a JSON object".into()));
        };
        match kind {
            Some(SPAWN_KIND) => parse_spawn(&fields).map(Incoming::Spawn),
            Some(other) => Err(Poison(format!("unknown {MESSAGE_KIND_ATTRIBUTE} {other:?}"))),
            None => {
                let target_id = group_id
                    .filter(|g| !g.is_empty())
                    .ok_or_else(|| Poison("an event message without a MessageGroupId".into()))?;
                if let Some(problem) = event_field_problem(&fields) {
                    return Err(Poison(format!("the body is not an Event: {problem}")));
                }
                if !fields.contains_key("id") {
                    fields.insert("id".into(), Value::from(message_id));
                }
                let event: Event = serde_json::from_value(Value::Object(fields))
                    .map_err(|e| Poison(format!("the body is not an Event ({e})")))?;
                if event.kind.is_empty() {
                    return Err(Poison("the event kind is empty".into()));
                }
                Ok(Incoming::Event {
                    target_id: target_id.to_string(),
                    event,
                })
            }
        }
    }
}

/// The first Event field whose JSON type is wrong, named: serde's own message says what
/// it expected ("invalid type: integer `5`, expected a string"), not which field.
fn event_field_problem(fields: &Map) -> Option<String> {
    let wrong = |name: &str, value: &Value, want: &str| {
        let found = match value {
            Value::Null => "null".to_string(),
            Value::Bool(b) => format!("a boolean ({b})"),
            Value::Number(n) => format!("a number ({n})"),
            Value::String(_) => "a string".to_string(),
            Value::Array(_) => "an array".to_string(),
            Value::Object(_) => "an object".to_string(),
        };
        Some(format!("its {name:?} is {found}, not {want}"))
    };
    for (name, value) in fields {
        match (name.as_str(), value) {
            ("id" | "kind", Value::String(_))
            | ("created_time" | "received_time", Value::String(_) | Value::Null)
            | ("data", Value::Object(_)) => {}
            ("id" | "kind", v) => return wrong(name, v, "a string"),
            ("created_time" | "received_time", v) => return wrong(name, v, "a string or null"),
            ("data", v) => return wrong(name, v, "an object"),
            _ => {}
        }
    }
    None
}

fn parse_spawn(fields: &Map) -> Result<SpawnEntry, Poison> {
    let text = |name: &str| -> Result<String, Poison> {
        fields
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| Poison(format!("a spawn intent without a string {name:?}")))
    };
    let seq = fields
        .get("seq")
        .and_then(Value::as_i64)
        .ok_or_else(|| Poison("a spawn intent without an integer \"seq\"".into()))?;
    let context = match fields.get("context") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => return Err(Poison("a spawn intent whose \"context\" is not an object".into())),
    };
    Ok(SpawnEntry {
        seq,
        parent_id: text("parent_id")?,
        child_id: text("child_id")?,
        root_path: text("root_path")?,
        context,
    })
}

/// A message a publish did not deliver: `index` into the published slice.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishFailure {
    pub index: usize,
    pub code: String,
    pub message: String,
}

/// The queue. Publishing never fails as a whole: what was not delivered comes back as
/// failures, so the caller keeps those entries for a later run instead of losing them.
#[async_trait]
pub trait Queue: Send + Sync {
    /// Send `messages` in order (in chunks of [`MAX_BATCH`]).
    async fn publish_batch(&self, messages: &[OutgoingMessage]) -> Vec<PublishFailure>;

    /// Receive up to `max` (at most 10) messages, hiding them for `visibility_seconds`;
    /// wait up to `wait_seconds` for one.
    async fn receive(
        &self,
        max: usize,
        visibility_seconds: i32,
        wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, DriverError>;

    async fn delete(&self, receipt_handle: &str) -> Result<(), DriverError>;

    /// Hide (or, with 0, release) a received message for `seconds`.
    async fn change_visibility(&self, receipt_handle: &str, seconds: i32) -> Result<(), DriverError>;
}

// --- SQS FIFO --------------------------------------------------------------------

/// The SQS FIFO queue.
#[derive(Clone, Debug)]
pub struct SqsQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

/// What [`SqsQueue::ensure`] created or found.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueUrls {
    pub queue_url: String,
    pub dead_letter_url: String,
}

fn sqs_error<E: std::fmt::Display>(operation: &str, err: E) -> DriverError {
    DriverError::Queue(format!("{operation}: {err}"))
}

impl SqsQueue {
    pub fn new(client: aws_sdk_sqs::Client, url: impl Into<String>) -> Self {
        SqsQueue {
            client,
            url: url.into(),
        }
    }

    /// A client for `endpoint_url` (an emulator) or real AWS (`None`).
    pub async fn client(endpoint_url: Option<&str>, region: &str) -> aws_sdk_sqs::Client {
        let config = stm_store::aws::sdk_config(endpoint_url, region).await;
        aws_sdk_sqs::Client::new(&config)
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn sqs(&self) -> &aws_sdk_sqs::Client {
        &self.client
    }

    /// Create the FIFO queue `name` (with `.fifo` added if missing) and its dead-letter
    /// queue `{name}-dlq.fifo` if absent, the first redriving to the second after
    /// `max_receive_count` receives. Idempotent (same attributes).
    pub async fn ensure(
        client: &aws_sdk_sqs::Client,
        name: &str,
        visibility_seconds: i32,
        max_receive_count: u32,
    ) -> Result<QueueUrls, DriverError> {
        let base = name.strip_suffix(".fifo").unwrap_or(name);
        let dlq = client
            .create_queue()
            .queue_name(format!("{base}-dlq.fifo"))
            .attributes(QueueAttributeName::FifoQueue, "true")
            .send()
            .await
            .map_err(|e| {
                sqs_error(
                    "CreateQueue (dead-letter)",
                    aws_sdk_sqs::error::DisplayErrorContext(e),
                )
            })?;
        let dead_letter_url = dlq.queue_url().unwrap_or_default().to_string();
        let arn = client
            .get_queue_attributes()
            .queue_url(&dead_letter_url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| sqs_error("GetQueueAttributes", aws_sdk_sqs::error::DisplayErrorContext(e)))?
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
            .unwrap_or_default();
        let redrive = json!({"deadLetterTargetArn": arn, "maxReceiveCount": max_receive_count}).to_string();
        let main = client
            .create_queue()
            .queue_name(format!("{base}.fifo"))
            .attributes(QueueAttributeName::FifoQueue, "true")
            .attributes(
                QueueAttributeName::VisibilityTimeout,
                visibility_seconds.to_string(),
            )
            .attributes(QueueAttributeName::RedrivePolicy, redrive)
            .send()
            .await
            .map_err(|e| sqs_error("CreateQueue", aws_sdk_sqs::error::DisplayErrorContext(e)))?;
        Ok(QueueUrls {
            queue_url: main.queue_url().unwrap_or_default().to_string(),
            dead_letter_url,
        })
    }

    /// How many messages the queue holds (visible + in flight), approximately.
    pub async fn approximate_depth(&self) -> Result<u64, DriverError> {
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .map_err(|e| sqs_error("GetQueueAttributes", aws_sdk_sqs::error::DisplayErrorContext(e)))?;
        let attrs = out.attributes();
        let get = |name: QueueAttributeName| {
            attrs
                .and_then(|a| a.get(&name))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok(get(QueueAttributeName::ApproximateNumberOfMessages)
            + get(QueueAttributeName::ApproximateNumberOfMessagesNotVisible))
    }

    async fn publish_chunk(&self, offset: usize, chunk: &[OutgoingMessage]) -> Vec<PublishFailure> {
        let mut entries = Vec::with_capacity(chunk.len());
        for (i, message) in chunk.iter().enumerate() {
            let mut entry = SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(&message.body)
                .message_group_id(&message.group_id)
                .message_deduplication_id(&message.deduplication_id);
            if message.spawn {
                match MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(SPAWN_KIND)
                    .build()
                {
                    Ok(attr) => entry = entry.message_attributes(MESSAGE_KIND_ATTRIBUTE, attr),
                    Err(e) => return whole_chunk_failed(offset, chunk.len(), "Build", &e.to_string()),
                }
            }
            match entry.build() {
                Ok(entry) => entries.push(entry),
                Err(e) => return whole_chunk_failed(offset, chunk.len(), "Build", &e.to_string()),
            }
        }
        let sent = self
            .client
            .send_message_batch()
            .queue_url(&self.url)
            .set_entries(Some(entries))
            .send()
            .await;
        match sent {
            Err(err) => {
                let text = aws_sdk_sqs::error::DisplayErrorContext(&err).to_string();
                tracing::warn!(error = %text, messages = chunk.len(), "SendMessageBatch failed");
                whole_chunk_failed(offset, chunk.len(), "SendMessageBatch", &text)
            }
            Ok(out) => out
                .failed()
                .iter()
                .map(|f| PublishFailure {
                    // ids are the chunk positions we gave; an unknown one fails the first
                    index: offset + f.id().parse::<usize>().unwrap_or(0),
                    code: f.code().to_string(),
                    message: f.message().unwrap_or_default().to_string(),
                })
                .collect(),
        }
    }
}

fn whole_chunk_failed(offset: usize, len: usize, code: &str, message: &str) -> Vec<PublishFailure> {
    (0..len)
        .map(|i| PublishFailure {
            index: offset + i,
            code: code.into(),
            message: message.into(),
        })
        .collect()
}

#[async_trait]
impl Queue for SqsQueue {
    async fn publish_batch(&self, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        let mut failures = Vec::new();
        for (n, chunk) in messages.chunks(MAX_BATCH).enumerate() {
            failures.extend(self.publish_chunk(n * MAX_BATCH, chunk).await);
        }
        failures
    }

    async fn receive(
        &self,
        max: usize,
        visibility_seconds: i32,
        wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, DriverError> {
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(max.clamp(1, MAX_BATCH) as i32)
            .visibility_timeout(visibility_seconds)
            .wait_time_seconds(wait_seconds)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| sqs_error("ReceiveMessage", aws_sdk_sqs::error::DisplayErrorContext(e)))?;
        Ok(out
            .messages()
            .iter()
            .map(|m| {
                let attributes: BTreeMap<String, String> = m
                    .attributes()
                    .map(|a| {
                        a.iter()
                            .map(|(k, v)| (k.as_str().to_string(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                let message_attributes = m
                    .message_attributes()
                    .map(|a| {
                        a.iter()
                            .filter_map(|(k, v)| v.string_value().map(|s| (k.clone(), s.to_string())))
                            .collect()
                    })
                    .unwrap_or_default();
                ReceivedMessage {
                    message_id: m.message_id().unwrap_or_default().to_string(),
                    receipt_handle: m.receipt_handle().unwrap_or_default().to_string(),
                    body: m.body().unwrap_or_default().to_string(),
                    group_id: attributes.get("MessageGroupId").cloned(),
                    receive_count: attributes
                        .get("ApproximateReceiveCount")
                        .and_then(|c| c.parse().ok())
                        .unwrap_or(1),
                    message_attributes,
                    attributes,
                }
            })
            .collect())
    }

    async fn delete(&self, receipt_handle: &str) -> Result<(), DriverError> {
        self.client
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(receipt_handle)
            .send()
            .await
            .map_err(|e| sqs_error("DeleteMessage", aws_sdk_sqs::error::DisplayErrorContext(e)))?;
        Ok(())
    }

    async fn change_visibility(&self, receipt_handle: &str, seconds: i32) -> Result<(), DriverError> {
        self.client
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(receipt_handle)
            .visibility_timeout(seconds)
            .send()
            .await
            .map_err(|e| {
                sqs_error(
                    "ChangeMessageVisibility",
                    aws_sdk_sqs::error::DisplayErrorContext(e),
                )
            })?;
        Ok(())
    }
}

// --- in memory -------------------------------------------------------------------

#[derive(Debug, Clone)]
struct StoredMessage {
    message_id: String,
    message: OutgoingMessage,
    receive_count: u32,
    /// When it becomes receivable again; `None`: never received or released.
    hidden_until: Option<Instant>,
    receipt_handle: Option<String>,
}

#[derive(Default)]
struct MemoryInner {
    messages: VecDeque<StoredMessage>,
    dead_letters: Vec<OutgoingMessage>,
    /// deduplication id -> when it was sent (SQS's 5-minute window).
    recent: HashMap<String, Instant>,
    next_id: u64,
    /// Publishes to fail (per message), for tests.
    fail_next: usize,
    published: u64,
}

/// An in-memory SQS FIFO queue with the semantics the worker relies on: per-group order,
/// one receiver per group while any of its messages is in flight, visibility timeouts,
/// the 5-minute deduplication window, and a dead-letter list after `max_receive_count`.
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
}

#[async_trait]
impl Queue for MemoryQueue {
    async fn publish_batch(&self, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        let mut inner = self.lock();
        let now = Instant::now();
        inner
            .recent
            .retain(|_, at| now.duration_since(*at) < DEDUP_WINDOW);
        let mut failures = Vec::new();
        for (index, message) in messages.iter().enumerate() {
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
    ) -> Result<Vec<ReceivedMessage>, DriverError> {
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

    async fn delete(&self, receipt_handle: &str) -> Result<(), DriverError> {
        let mut inner = self.lock();
        inner
            .messages
            .retain(|m| m.receipt_handle.as_deref() != Some(receipt_handle));
        Ok(())
    }

    async fn change_visibility(&self, receipt_handle: &str, seconds: i32) -> Result<(), DriverError> {
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
            None => Err(DriverError::Queue(format!(
                "ChangeMessageVisibility: unknown receipt handle {receipt_handle}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn parse_rejects_poison_and_fills_a_missing_event_id() {
        assert!(Incoming::parse("not json", Some("g"), None, "m1").is_err());
        assert!(Incoming::parse("{\"kind\":\"Go\"}", None, None, "m1").is_err());
        assert!(Incoming::parse("{\"kind\":\"Go\"}", Some("g"), Some("weird"), "m1").is_err());
        match Incoming::parse("{\"kind\":\"Go\"}", Some("g"), None, "m1") {
            Ok(Incoming::Event { target_id, event }) => {
                assert_eq!(target_id, "g");
                assert_eq!(event.id, "m1");
            }
            other => panic!("unexpected {other:?}"),
        }
        let spawn = OutgoingMessage::spawn(&SpawnEntry {
            seq: 7,
            parent_id: "p".into(),
            child_id: "p:A".into(),
            root_path: "Main.A".into(),
            context: Map::new(),
        });
        assert_eq!(spawn.group_id, "p:A");
        match Incoming::parse(&spawn.body, Some("p:A"), Some(SPAWN_KIND), "m2") {
            Ok(Incoming::Spawn(entry)) => assert_eq!(entry.seq, 7),
            other => panic!("unexpected {other:?}"),
        }
    }
}
