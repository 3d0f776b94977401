//! The wire contract of the event queue (harel 0.9.0's SQS messages): what a message
//! carries out (bodies, attributes, group and deduplication ids), what comes in (an event,
//! a spawn intent or poison), SQS's size rules, and the planner that cuts batches by them.

use std::collections::BTreeMap;

use serde_json::json;
use sha2::{Digest, Sha256};
use stm_core::{Event, Map, Value};
use stm_store::{OutboxEntry, SpawnEntry};

use super::PublishFailure;
use crate::telemetry::{self, TraceContext};

/// The message attribute that marks a non-event message, and its value for a spawn intent.
pub const MESSAGE_KIND_ATTRIBUTE: &str = "stm_kind";
pub const SPAWN_KIND: &str = "spawn";

/// `SendMessageBatch` takes at most this many entries.
pub const MAX_BATCH: usize = 10;

/// The largest message SQS takes (body + message attributes), in bytes: 1 MiB, the
/// largest `MaximumMessageSize` a queue can have, and the one the template and
/// `SqsQueue::ensure` give the event queue and its dead-letter queue.
pub const MAX_MESSAGE_BYTES: usize = 1_048_576;

/// The largest `SendMessageBatch` payload (every entry's body + message attributes), in
/// bytes: 1 MiB, whatever the entry count. A request over it is refused as a whole
/// (`BatchRequestTooLong`), so ten 120 KB events must go in two requests.
pub const MAX_BATCH_BYTES: usize = 1_048_576;

/// SQS's longest queue name, a FIFO queue's `.fifo` counted (`CreateQueue`, `QueueName`).
pub const MAX_QUEUE_NAME_CHARS: usize = 80;

/// The names the runtime derives from a queue's base name (the event queue, its
/// dead-letter queue, the timers' doorbell queue), the longest last.
pub(crate) fn derived_queue_names(base: &str) -> [String; 3] {
    let base = base.strip_suffix(".fifo").unwrap_or(base);
    [
        format!("{base}.fifo"),
        format!("{base}-timers"),
        format!("{base}-dlq.fifo"),
    ]
}

/// Why SQS would refuse to create the queues named after `base` (with `.fifo` or not), in
/// words that say what to choose instead; `None` when every derived name is one SQS takes:
/// at most 80 characters of letters, digits, `-` and `_` (and `.fifo`).
pub fn queue_name_problem(base: &str) -> Option<String> {
    let stem = base.strip_suffix(".fifo").unwrap_or(base);
    let longest_suffix = "-dlq.fifo".len();
    if stem.is_empty() {
        return Some("the queue name is empty: name it, for instance harel-events".into());
    }
    if let Some(bad) = stem
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_')))
    {
        return Some(format!(
            "the queue name {stem:?} has {bad:?}: SQS takes only letters, digits, - and _ (and the .fifo ending)"
        ));
    }
    let [.., longest] = derived_queue_names(stem);
    let n = longest.chars().count();
    (n > MAX_QUEUE_NAME_CHARS).then(|| {
        format!(
            "the queue name {stem:?} is too long: its dead-letter queue {longest} would be {n} characters, over SQS's \
             {MAX_QUEUE_NAME_CHARS}; choose a name of at most {} characters",
            MAX_QUEUE_NAME_CHARS - longest_suffix
        )
    })
}

/// The size SQS counts for a message with a `body_len`-byte body: the body plus, for each
/// message attribute, its name, data type and value. The one size function: the batch
/// chunker and the driver's check at commit both use it.
pub fn sqs_message_bytes(body_len: usize, spawn: bool) -> usize {
    let attributes = if spawn {
        MESSAGE_KIND_ATTRIBUTE.len() + "String".len() + SPAWN_KIND.len()
    } else {
        0
    };
    body_len + attributes
}

/// Why SQS would refuse `message` on its own, whatever it is batched with, as SQS's error
/// code and a message saying what to do (`None`: it is sendable). Such a message must not
/// go into a `SendMessageBatch`: one over the batch limit fails the whole request.
pub fn message_problem(message: &OutgoingMessage) -> Option<(&'static str, String)> {
    if let Some(problem) = stm_core::ids::group_id_problem(&message.group_id) {
        return Some((
            "InvalidParameterValue",
            format!(
                "Value {:?} for parameter MessageGroupId is invalid: {problem}; {} (the group id is \
                 the target execution id)",
                message.group_id,
                stm_core::ids::GROUP_ID_RULE
            ),
        ));
    }
    if let Some(problem) = stm_core::ids::group_id_problem(&message.deduplication_id) {
        return Some((
            "InvalidParameterValue",
            format!(
                "Value {:?} for parameter MessageDeduplicationId is invalid: {problem}; {}",
                message.deduplication_id,
                stm_core::ids::GROUP_ID_RULE
            ),
        ));
    }
    let bytes = message.sqs_bytes();
    if bytes > MAX_MESSAGE_BYTES {
        return Some((
            "MessageTooLong",
            format!(
                "the message to {:?} is {bytes} bytes (body and attributes); SQS takes at most \
                 {MAX_MESSAGE_BYTES}: it was not sent",
                message.group_id
            ),
        ));
    }
    None
}

/// One `SendMessageBatch` request being filled: how many entries and bytes it holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchSize {
    pub entries: usize,
    pub bytes: usize,
}

impl BatchSize {
    /// Whether a message of `bytes` still fits this request (at most [`MAX_BATCH`]
    /// entries and [`MAX_BATCH_BYTES`] in all). An empty request admits any message
    /// within [`MAX_MESSAGE_BYTES`] (which is not over the batch limit).
    pub(crate) fn admits(&self, bytes: usize) -> bool {
        self.entries < MAX_BATCH && self.bytes.saturating_add(bytes) <= MAX_BATCH_BYTES
    }

    pub fn add(&mut self, bytes: usize) {
        self.entries += 1;
        self.bytes += bytes;
    }
}

/// How a publish of `messages` goes out: the `SendMessageBatch` requests (indexes into
/// `messages`, in order) and the messages refused before any request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchPlan {
    pub batches: Vec<Vec<usize>>,
    pub refused: Vec<PublishFailure>,
}

/// Cut `messages` into `SendMessageBatch` requests by count and by bytes, keeping their
/// order; a message SQS would refuse on its own ([`message_problem`]) is in no request
/// and is reported refused instead. Every batch send goes through this (the relay's chunks
/// with [`BatchSize`], the same rule).
pub fn plan_batches(messages: &[OutgoingMessage]) -> BatchPlan {
    let mut plan = BatchPlan::default();
    let mut current: Vec<usize> = Vec::new();
    let mut size = BatchSize::default();
    for (index, message) in messages.iter().enumerate() {
        if let Some((code, text)) = message_problem(message) {
            plan.refused.push(PublishFailure {
                index,
                code: code.into(),
                message: text,
            });
            continue;
        }
        let bytes = message.sqs_bytes();
        if !size.admits(bytes) {
            plan.batches.push(std::mem::take(&mut current));
            size = BatchSize::default();
        }
        size.add(bytes);
        current.push(index);
    }
    if !current.is_empty() {
        plan.batches.push(current);
    }
    plan
}

/// One message to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct OutgoingMessage {
    pub group_id: String,
    pub deduplication_id: String,
    pub body: String,
    /// A spawn intent (sent with the `stm_kind = spawn` attribute).
    pub spawn: bool,
    /// The trace context it carries as its `traceparent` attribute
    /// ([`telemetry`](crate::telemetry)): the span that sent it. `None` when the body
    /// leaves no room for the attribute.
    pub trace: Option<TraceContext>,
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
    event.to_json()
}

/// Counts what serde writes, so a size is known without building the string.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    let mut count = ByteCount(0);
    // plain data into a writer that never fails: cannot fail either (and an error would
    // only under-count what `event_body` then also could not write)
    let _ = stm_core::pyjson::write_pydantic_json(&mut count, value);
    count.0
}

/// The SQS size of the message an event becomes ([`OutgoingMessage::outbox`],
/// [`OutgoingMessage::event`]), without building it.
pub(crate) fn event_message_bytes(event: &Event) -> usize {
    sqs_message_bytes(json_len(event), false)
}

/// The SQS size of the message a spawn intent becomes ([`OutgoingMessage::spawn`]), for
/// an intent not committed yet: its seq is counted at its widest.
pub(crate) fn spawn_message_bytes(parent_id: &str, child_id: &str, root_path: &str, context: &Map) -> usize {
    let body = spawn_body(i64::MIN, parent_id, child_id, root_path, context);
    // the body keeps a non-finite float as `Infinity`/`NaN` (`Value`'s own text), so
    // it is measured as written
    sqs_message_bytes(body.to_string().len(), true)
}

fn spawn_body(seq: i64, parent_id: &str, child_id: &str, root_path: &str, context: &Map) -> Value {
    json!({
        "seq": seq,
        "parent_id": parent_id,
        "child_id": child_id,
        "root_path": root_path,
        "context": context,
    })
}

impl OutgoingMessage {
    /// A message carrying `trace` (a row's, [`OutboxEntry::trace_context`]), else the
    /// current trace context ([`telemetry::current`]), else a new trace's, when the
    /// attribute fits under SQS's limit beside the body.
    fn new(
        group_id: String,
        deduplication_id: String,
        body: String,
        spawn: bool,
        trace: Option<&str>,
    ) -> Self {
        let fits = sqs_message_bytes(body.len(), spawn) + telemetry::TRACEPARENT_ATTRIBUTE_BYTES
            <= MAX_MESSAGE_BYTES;
        // no context (a row harel wrote, say): no attribute, and its handler starts a trace
        let trace = fits
            .then(|| {
                trace
                    .and_then(TraceContext::from_traceparent)
                    .or_else(telemetry::current)
            })
            .flatten();
        OutgoingMessage {
            group_id,
            deduplication_id,
            body,
            spawn,
            trace,
        }
    }

    /// Its size as SQS counts it ([`sqs_message_bytes`]).
    pub fn sqs_bytes(&self) -> usize {
        let trace = if self.trace.is_some() {
            telemetry::TRACEPARENT_ATTRIBUTE_BYTES
        } else {
            0
        };
        sqs_message_bytes(self.body.len(), self.spawn) + trace
    }

    /// A committed outbox entry (`None`: an entry without a target, nothing to send).
    /// Deduplicated by the row (its seq) and what it carries (its event id): a seq is
    /// unique only among the rows still pending, so a later row may reuse a delivered
    /// one's inside SQS's five minutes, and must not be dropped as its duplicate.
    pub fn outbox(entry: &OutboxEntry) -> Option<Self> {
        let target = entry.target_id.as_ref()?;
        Some(OutgoingMessage::new(
            target.clone(),
            deduplication_id(&["outbox", &entry.seq.to_string(), &entry.event.id]),
            event_body(&entry.event),
            false,
            entry.trace_context.as_deref(),
        ))
    }

    /// A committed spawn intent, to the child's group, deduplicated by the row and the
    /// child (as an outbox entry, see [`OutgoingMessage::outbox`]).
    pub fn spawn(entry: &SpawnEntry) -> Self {
        let body = spawn_body(
            entry.seq,
            &entry.parent_id,
            &entry.child_id,
            &entry.root_path,
            &entry.context,
        );
        OutgoingMessage::new(
            entry.child_id.clone(),
            deduplication_id(&["spawn", &entry.seq.to_string(), &entry.child_id]),
            body.to_string(),
            true,
            entry.trace_context.as_deref(),
        )
    }

    /// An event sent from outside (an operator, a client, the control plane): deduplicated
    /// by its event id and target, since one event may go to several groups (a broadcast).
    pub fn event(target_id: &str, event: &Event) -> Self {
        OutgoingMessage::new(
            target_id.to_string(),
            deduplication_id(&["event", target_id, &event.id]),
            event_body(event),
            false,
            None,
        )
    }

    /// A due timer's `Timeout`: deduplicated by the timer's identity (its event id is
    /// derived from execution, path and fire_at), so a double sweep sends one message.
    pub fn timeout(execution_id: &str, path: &str, fire_at: f64) -> Self {
        OutgoingMessage::timeout_in_trace(execution_id, path, fire_at, None)
    }

    /// [`timeout`](Self::timeout) continuing `trace`, the trace context of the commit
    /// that armed the timer ([`ExecutionStore::armed_timer_in_trace`]).
    ///
    /// [`ExecutionStore::armed_timer_in_trace`]: stm_store::ExecutionStore::armed_timer_in_trace
    pub fn timeout_in_trace(execution_id: &str, path: &str, fire_at: f64, trace: Option<&str>) -> Self {
        let event = stm_core::engine::timeout_event(execution_id, path, fire_at);
        OutgoingMessage::new(
            execution_id.to_string(),
            deduplication_id(&["timeout", &event.id]),
            event_body(&event),
            false,
            trace,
        )
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
            stm_core::pyjson::loads(body).map_err(|e| Poison(format!("the body is not JSON ({e})")))?;
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
                partition_key("the MessageGroupId (the target execution id)", target_id)?;
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
                // the processed table's sort key (the dedupe mark)
                sort_key("the event id", &event.id)?;
                Ok(Incoming::Event {
                    target_id: target_id.to_string(),
                    event,
                })
            }
        }
    }
}

/// DynamoDB's largest partition key (an execution id: `executions`, `processed`,
/// `timers`), in UTF-8 bytes.
pub const MAX_PARTITION_KEY_BYTES: usize = 2048;
/// DynamoDB's largest sort key (an event id: the `processed` table's), in UTF-8 bytes.
pub const MAX_SORT_KEY_BYTES: usize = 1024;

/// A message field that becomes a DynamoDB partition key must fit one.
fn partition_key(what: &str, value: &str) -> Result<(), Poison> {
    key_problem(what, value, "partition", MAX_PARTITION_KEY_BYTES)
}

/// A message field that becomes a DynamoDB sort key must fit one.
fn sort_key(what: &str, value: &str) -> Result<(), Poison> {
    key_problem(what, value, "sort", MAX_SORT_KEY_BYTES)
}

/// DynamoDB refuses an empty key, or one over its limit, with a `ValidationException` on
/// every attempt: without this check such a message is retried for hours before it
/// reaches the dead-letter queue.
fn key_problem(what: &str, value: &str, kind: &str, limit: usize) -> Result<(), Poison> {
    if value.is_empty() {
        return Err(Poison(format!(
            "{what} is empty; DynamoDB {kind} keys cannot be empty"
        )));
    }
    if value.len() > limit {
        return Err(Poison(format!(
            "{what} is {} bytes; DynamoDB {kind} keys take at most {} bytes",
            thousands(value.len()),
            thousands(limit)
        )));
    }
    Ok(())
}

/// `1300` as `1,300`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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
    let entry = SpawnEntry {
        seq,
        parent_id: text("parent_id")?,
        child_id: text("child_id")?,
        root_path: text("root_path")?,
        context,
        trace_context: None,
    };
    // both are loaded by key; the child's becomes its execution's id
    partition_key("the spawn intent's \"child_id\"", &entry.child_id)?;
    partition_key("the spawn intent's \"parent_id\"", &entry.parent_id)?;
    Ok(entry)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An event message to `group` whose body is about `bytes` long.
    pub(crate) fn sized(group: &str, n: usize, bytes: usize) -> OutgoingMessage {
        let mut data = Map::new();
        data.insert("blob".into(), Value::from("x".repeat(bytes)));
        OutgoingMessage::event(group, &Event::with_data("Big", data).with_id(format!("big{n}")))
    }

    #[test]
    fn a_queue_name_fits_when_its_dead_letter_queue_does() {
        let fits = "q".repeat(71);
        assert_eq!(queue_name_problem(&fits), None);
        assert_eq!(queue_name_problem(&format!("{fits}.fifo")), None);
        assert!(derived_queue_names(&fits)
            .iter()
            .all(|n| n.len() <= MAX_QUEUE_NAME_CHARS));
        let long = "q".repeat(72);
        assert_eq!(
            queue_name_problem(&long).as_deref(),
            Some(&*format!(
                "the queue name \"{long}\" is too long: its dead-letter queue {long}-dlq.fifo would be 81 \
                 characters, over SQS's 80; choose a name of at most 71 characters"
            ))
        );
        assert_eq!(
            queue_name_problem("orders.events").as_deref(),
            Some("the queue name \"orders.events\" has '.': SQS takes only letters, digits, - and _ (and the .fifo ending)")
        );
        assert!(queue_name_problem("").is_some());
    }

    #[test]
    fn batches_are_cut_by_bytes_as_well_as_count_in_order() {
        let messages: Vec<OutgoingMessage> = (0..11).map(|n| sized("g", n, 120_000)).collect();
        let plan = plan_batches(&messages);
        assert!(plan.refused.is_empty());
        // 8 x ~120 KB fit 1 MiB, the 9th would not
        assert_eq!(plan.batches.iter().map(Vec::len).collect::<Vec<_>>(), [8, 3]);
        let flat: Vec<usize> = plan.batches.concat();
        assert_eq!(flat, (0..11).collect::<Vec<_>>(), "order kept");
        for batch in &plan.batches {
            let bytes: usize = batch.iter().map(|&i| messages[i].sqs_bytes()).sum();
            assert!(
                batch.len() <= MAX_BATCH && bytes <= MAX_BATCH_BYTES,
                "{} entries, {bytes} bytes",
                batch.len()
            );
        }
        // small messages still go ten at a time
        let small: Vec<OutgoingMessage> = (0..25).map(|n| sized("g", n, 10)).collect();
        assert_eq!(
            plan_batches(&small)
                .batches
                .iter()
                .map(Vec::len)
                .collect::<Vec<_>>(),
            [10, 10, 5]
        );
    }

    #[test]
    fn a_message_sqs_would_refuse_is_in_no_batch() {
        let messages = vec![
            sized("g", 0, 100),
            sized("g", 1, MAX_MESSAGE_BYTES),
            sized("a b", 2, 100),
            sized("g", 3, 100),
        ];
        let plan = plan_batches(&messages);
        assert_eq!(plan.batches, [vec![0, 3]]);
        let refused: Vec<(usize, &str)> = plan.refused.iter().map(|f| (f.index, f.code.as_str())).collect();
        assert_eq!(refused, [(1, "MessageTooLong"), (2, "InvalidParameterValue")]);
        assert!(
            plan.refused[1].message.contains("MessageGroupId"),
            "{:?}",
            plan.refused[1]
        );
        // a message of exactly the limit is sendable, alone
        let body_len = MAX_MESSAGE_BYTES - sized("g", 9, 0).sqs_bytes();
        let exact = sized("g", 9, body_len);
        assert_eq!(exact.sqs_bytes(), MAX_MESSAGE_BYTES);
        assert_eq!(plan_batches(&[exact.clone(), exact]).batches, [vec![0], vec![1]]);
    }

    #[test]
    fn sizes_count_body_and_attributes_as_sqs_does() {
        let event = Event::new("E").with_id("e1");
        // outside any trace: the body alone
        let message = OutgoingMessage::event("g", &event);
        assert_eq!(message.trace, None);
        assert_eq!(message.sqs_bytes(), message.body.len());
        // the check at commit counts the body alone too: the attribute is dropped where it
        // does not fit, so it never makes a message too large
        assert_eq!(event_message_bytes(&event), message.body.len());
        let traced = crate::telemetry::TRACEPARENT_ATTRIBUTE_BYTES;
        let entry = SpawnEntry {
            seq: 7,
            parent_id: "p".into(),
            child_id: "p:A:0".into(),
            root_path: "Main.A".into(),
            context: Map::new(),
            trace_context: Some(TraceContext::new_trace(1.0).traceparent()),
        };
        let spawn = OutgoingMessage::spawn(&entry);
        // stm_kind + String + spawn, and the row's traceparent
        assert!(spawn.trace.is_some());
        assert_eq!(spawn.sqs_bytes(), spawn.body.len() + 8 + 6 + 5 + traced);
        // before the commit the seq is unknown: counted at its widest, never under
        let estimate = spawn_message_bytes("p", "p:A:0", "Main.A", &Map::new());
        let untraced = spawn.sqs_bytes() - traced;
        assert!(estimate >= untraced && estimate <= untraced + 20);
    }

    #[tokio::test]
    async fn a_body_that_leaves_no_room_goes_without_its_trace_context() {
        let ctx = TraceContext::new_trace(1.0);
        let fits = |bytes: usize| telemetry::in_context(ctx, async move { sized("g", 1, bytes) });
        let overhead = fits(0).await.body.len();
        let room = MAX_MESSAGE_BYTES - crate::telemetry::TRACEPARENT_ATTRIBUTE_BYTES - overhead;
        let just_fits = fits(room).await;
        assert_eq!(just_fits.trace, Some(ctx), "the current context");
        assert_eq!(just_fits.sqs_bytes(), MAX_MESSAGE_BYTES);
        let over = fits(room + 1).await;
        assert_eq!(over.trace, None);
        assert_eq!(over.sqs_bytes(), over.body.len());
        assert!(over.sqs_bytes() <= MAX_MESSAGE_BYTES);
    }

    #[test]
    fn a_row_s_trace_context_wins_over_the_current_one() {
        let row = crate::telemetry::TraceContext::new_trace(1.0);
        let entry = OutboxEntry {
            seq: 1,
            target_id: Some("t".into()),
            event: Event::new("E").with_id("e1"),
            trace_context: Some(row.traceparent()),
        };
        let message = OutgoingMessage::outbox(&entry).expect("a target");
        assert_eq!(message.trace, Some(row));
        let unreadable = OutboxEntry {
            trace_context: Some("garbage".into()),
            ..entry
        };
        // an unreadable one is ignored: the current context, here none
        let message = OutgoingMessage::outbox(&unreadable).expect("a target");
        assert_eq!(message.trace, None);
    }

    #[test]
    fn derived_deduplication_ids_obey_the_group_id_rule_whatever_they_derive_from() {
        // a timer's identity holds the state path, an event's id is the sender's: hashed,
        // they are 64 hex digits however long or non-ASCII the parts are
        let long = "Größe.Ünïcode path ".repeat(40);
        let event = Event::new("E").with_id(long.clone());
        let entry = SpawnEntry {
            seq: i64::MAX,
            parent_id: long.clone(),
            child_id: long.clone(),
            root_path: long.clone(),
            context: Map::new(),
            trace_context: None,
        };
        let outbox = OutboxEntry {
            seq: i64::MIN,
            target_id: Some("t".into()),
            event: event.clone(),
            trace_context: None,
        };
        let ids = [
            OutgoingMessage::timeout("exe", &long, 1.5).deduplication_id,
            OutgoingMessage::event(&long, &event).deduplication_id,
            OutgoingMessage::spawn(&entry).deduplication_id,
            OutgoingMessage::outbox(&outbox)
                .map(|m| m.deduplication_id)
                .unwrap_or_default(),
        ];
        for id in ids {
            assert!(stm_core::ids::valid_group_id(&id) && id.len() == 64, "{id}");
        }
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
            trace_context: None,
        });
        assert_eq!(spawn.group_id, "p:A");
        match Incoming::parse(&spawn.body, Some("p:A"), Some(SPAWN_KIND), "m2") {
            Ok(Incoming::Spawn(entry)) => assert_eq!(entry.seq, 7),
            other => panic!("unexpected {other:?}"),
        }
    }
}
