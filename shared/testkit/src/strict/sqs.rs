//! The SQS rules moto does not enforce (or enforces against other numbers), checked on the
//! JSON protocol's request bodies. Each rule names AWS's error code; the numbers are the
//! documented quotas (docs/reliability.md lists them with their sources).

use serde_json::{json, Map, Value};

use super::Refusal;

/// `SendMessageBatch` and friends: at most this many entries.
pub const MAX_BATCH_ENTRIES: usize = 10;
/// The total payload of one `SendMessageBatch` (bodies and attributes): 1 MiB.
pub const MAX_BATCH_BYTES: usize = 1_048_576;
/// The longest `MessageGroupId` / `MessageDeduplicationId`.
pub const MAX_ID_CHARS: usize = 128;
/// The longest batch entry id.
pub const MAX_ENTRY_ID_CHARS: usize = 80;
/// `DelaySeconds`: 0 to 15 minutes.
pub const MAX_DELAY_SECONDS: i64 = 900;
/// A visibility timeout: 0 to 12 hours.
pub const MAX_VISIBILITY_SECONDS: i64 = 43_200;
/// Message attributes per message.
pub const MAX_MESSAGE_ATTRIBUTES: usize = 10;
/// A message attribute's name and data type: at most 256 characters each.
pub const MAX_ATTRIBUTE_NAME_CHARS: usize = 256;

/// What the layer knows of a queue (read from moto with `GetQueueAttributes`).
#[derive(Debug, Clone, PartialEq)]
pub struct QueueInfo {
    pub fifo: bool,
    pub content_based_dedup: bool,
    /// `MaximumMessageSize`, in bytes.
    pub max_message_size: usize,
    /// `MessageRetentionPeriod`, in seconds.
    pub retention_seconds: f64,
}

/// SQS's default `MessageRetentionPeriod`: 4 days.
pub const DEFAULT_RETENTION_SECONDS: f64 = 345_600.0;

/// What to do with a request.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    Forward,
    Refuse(Refusal),
    /// A batch some of whose entries AWS would fail one by one (`SenderFault`): forward the
    /// others (their indexes) and add these `Failed` entries to moto's answer; `rules`
    /// names the rule each one broke.
    Partial {
        keep: Vec<usize>,
        failed: Vec<Value>,
        rules: Vec<&'static str>,
    },
}

fn invalid(code: &'static str, rule: &'static str, message: String) -> Refusal {
    Refusal::sqs(code, rule, message)
}

/// A group or deduplication id: 1-128 characters, each alphanumeric or ASCII punctuation
/// (that is, ASCII's printable characters but the space).
pub fn valid_message_id(id: &str) -> bool {
    let n = id.chars().count();
    (1..=MAX_ID_CHARS).contains(&n) && id.chars().all(|c| c.is_ascii_graphic())
}

/// A message body may only hold XML's characters: #x9 | #xA | #xD | #x20 to #xD7FF |
/// #xE000 to #xFFFD | #x10000 to #x10FFFF.
fn valid_body_char(c: char) -> bool {
    matches!(c, '\u{9}' | '\u{A}' | '\u{D}' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

fn decoded_len(base64: &str) -> usize {
    let trimmed = base64.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

/// The size SQS counts for a message: its body plus, for every attribute, the name, the
/// data type and the value.
pub fn message_size(entry: &Value) -> usize {
    let body = entry["MessageBody"].as_str().map_or(0, str::len);
    body + attributes_size(&entry["MessageAttributes"])
}

fn attributes_size(attributes: &Value) -> usize {
    attributes.as_object().map_or(0, |map| {
        map.iter()
            .map(|(name, a)| {
                name.len()
                    + a["DataType"].as_str().map_or(0, str::len)
                    + a["StringValue"].as_str().map_or(0, str::len)
                    + a["BinaryValue"].as_str().map_or(0, decoded_len)
            })
            .sum()
    })
}

fn int_param(body: &Value, name: &str) -> Option<i64> {
    match &body[name] {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn range(body: &Value, name: &str, lo: i64, hi: i64, rule: &'static str) -> Result<(), Refusal> {
    match int_param(body, name) {
        Some(v) if !(lo..=hi).contains(&v) => Err(invalid(
            "InvalidParameterValue",
            rule,
            format!("Value {v} for parameter {name} is invalid. Reason: Must be between {lo} and {hi}, if provided."),
        )),
        _ => Ok(()),
    }
}

/// One message (a `SendMessage` body or a batch entry) against the queue's rules.
fn check_message(entry: &Value, queue: &QueueInfo) -> Result<(), Refusal> {
    let body = entry["MessageBody"].as_str().unwrap_or_default();
    if body.is_empty() {
        return Err(invalid(
            "MissingParameter",
            "sqs.body.empty",
            "The request must contain the parameter MessageBody.".into(),
        ));
    }
    if let Some(bad) = body.chars().find(|c| !valid_body_char(*c)) {
        return Err(invalid(
            "InvalidMessageContents",
            "sqs.body.characters",
            format!("Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF (found U+{:04X})", bad as u32),
        ));
    }
    let size = message_size(entry);
    if size > queue.max_message_size {
        return Err(invalid(
            "InvalidParameterValue",
            "sqs.body.size",
            format!(
                "One or more parameters are invalid. Reason: Message must be shorter than {} bytes. (this one: {size} bytes, body and attributes)",
                queue.max_message_size
            ),
        ));
    }
    check_attributes(&entry["MessageAttributes"])?;
    check_system_attributes(&entry["MessageSystemAttributes"])?;
    if queue.fifo {
        // FIFO queues take a delay per queue only: a message's DelaySeconds may be 0, no more
        if int_param(entry, "DelaySeconds").is_some_and(|d| d != 0) {
            return Err(invalid(
                "InvalidParameterValue",
                "sqs.delay.fifo",
                format!(
                    "Value {} for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.",
                    entry["DelaySeconds"]
                ),
            ));
        }
        match entry["MessageGroupId"].as_str() {
            None => {
                return Err(invalid(
                    "MissingParameter",
                    "sqs.group_id.missing",
                    "The request must contain the parameter MessageGroupId.".into(),
                ))
            }
            Some(id) if !valid_message_id(id) => {
                return Err(invalid(
                    "InvalidParameterValue",
                    "sqs.group_id.format",
                    format!(
                        "Value {id} for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length."
                    ),
                ))
            }
            Some(_) => {}
        }
        match entry["MessageDeduplicationId"].as_str() {
            None if !queue.content_based_dedup => {
                return Err(invalid(
                    "InvalidParameterValue",
                    "sqs.dedup_id.missing",
                    "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly".into(),
                ))
            }
            Some(id) if !valid_message_id(id) => {
                return Err(invalid(
                    "InvalidParameterValue",
                    "sqs.dedup_id.format",
                    format!(
                        "Value {id} for parameter MessageDeduplicationId is invalid. Reason: MessageDeduplicationId can only include alphanumeric and punctuation characters. 1 to 128 in length."
                    ),
                ))
            }
            _ => {}
        }
    } else {
        range(entry, "DelaySeconds", 0, MAX_DELAY_SECONDS, "sqs.delay.range")?;
        if entry.get("MessageGroupId").is_some_and(|v| !v.is_null()) {
            // standard queues took no group id until fair queues; a test sending one to a
            // standard queue is still most likely a bug of ours
            if let Some(id) = entry["MessageGroupId"]
                .as_str()
                .filter(|id| !valid_message_id(id))
            {
                return Err(invalid(
                    "InvalidParameterValue",
                    "sqs.group_id.format",
                    format!("Value {id} for parameter MessageGroupId is invalid. Reason: 1 to 128 alphanumeric and punctuation characters."),
                ));
            }
        }
    }
    Ok(())
}

fn check_attributes(attributes: &Value) -> Result<(), Refusal> {
    let Some(map) = attributes.as_object() else {
        return Ok(());
    };
    if map.len() > MAX_MESSAGE_ATTRIBUTES {
        return Err(invalid(
            "InvalidParameterValue",
            "sqs.attributes.count",
            format!(
                "Number of message attributes [{}] exceeds the allowed maximum [{MAX_MESSAGE_ATTRIBUTES}].",
                map.len()
            ),
        ));
    }
    for (name, attribute) in map {
        let lower = name.to_ascii_lowercase();
        let bad_name = name.is_empty()
            || name.chars().count() > MAX_ATTRIBUTE_NAME_CHARS
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
            || name.starts_with('.')
            || name.ends_with('.')
            || name.contains("..")
            || lower.starts_with("aws.")
            || lower.starts_with("amazon.");
        if bad_name {
            return Err(invalid(
                "InvalidParameterValue",
                "sqs.attributes.name",
                format!("Message attribute name '{name}' is invalid: up to 256 characters of A-Z, a-z, 0-9, '_', '-' and '.', not starting with AWS. or Amazon., no leading, trailing or repeated '.'."),
            ));
        }
        let data_type = attribute["DataType"].as_str().unwrap_or_default();
        let base = data_type.split('.').next().unwrap_or_default();
        if !matches!(base, "String" | "Number" | "Binary")
            || data_type.chars().count() > MAX_ATTRIBUTE_NAME_CHARS
        {
            return Err(invalid(
                "InvalidParameterValue",
                "sqs.attributes.type",
                format!("The message attribute '{name}' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String."),
            ));
        }
        let value_empty = match base {
            "Binary" => attribute["BinaryValue"].as_str().is_none_or(str::is_empty),
            _ => attribute["StringValue"].as_str().is_none_or(str::is_empty),
        };
        if value_empty {
            return Err(invalid(
                "InvalidParameterValue",
                "sqs.attributes.value",
                format!("The message attribute '{name}' must contain non-empty message attribute value for message attribute type '{data_type}'."),
            ));
        }
    }
    Ok(())
}

/// A message's system attributes (which do not count toward its size): `AWSTraceHeader`
/// alone, a String holding a well-formed X-Ray tracing header (the SQS API Reference,
/// `SendMessage`'s `MessageSystemAttributes`).
fn check_system_attributes(attributes: &Value) -> Result<(), Refusal> {
    let Some(map) = attributes.as_object() else {
        return Ok(());
    };
    for (name, attribute) in map {
        let value = attribute["StringValue"].as_str().unwrap_or_default();
        let problem = if name != "AWSTraceHeader" {
            Some(format!("Message system attribute name '{name}' is invalid: AWSTraceHeader is the only one supported."))
        } else if attribute["DataType"] != "String" {
            Some("The message system attribute 'AWSTraceHeader' must be of type String.".to_string())
        } else if !xray_header(value) {
            Some(format!(
                "The message system attribute 'AWSTraceHeader' is not a valid X-Ray trace header: {value:?}"
            ))
        } else {
            None
        };
        if let Some(message) = problem {
            return Err(invalid("InvalidParameterValue", "sqs.system_attributes", message));
        }
    }
    Ok(())
}

/// `Root=1-{8 hex}-{24 hex}`, with optional `Parent={16 hex}` and `Sampled={0|1|?}`,
/// `;`-separated.
fn xray_header(text: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.chars().all(|c| c.is_ascii_hexdigit());
    let mut root = false;
    for part in text.split(';') {
        let ok = match part.split_once('=') {
            Some(("Root", id)) => {
                root = matches!(id.split('-').collect::<Vec<_>>()[..], ["1", time, rest] if hex(time, 8) && hex(rest, 24));
                root
            }
            Some(("Parent", id)) => hex(id, 16),
            Some(("Sampled", flag)) => matches!(flag, "0" | "1" | "?"),
            Some((key, _)) => !key.is_empty(),
            None => false,
        };
        if !ok {
            return false;
        }
    }
    root
}

/// The rules of a batch's envelope (count, entry ids), which fail the whole request.
fn check_batch_envelope(entries: &[Value]) -> Result<(), Refusal> {
    if entries.is_empty() {
        return Err(invalid(
            "EmptyBatchRequest",
            "sqs.batch.empty",
            "There should be at least one SendMessageBatchRequestEntry in the request.".into(),
        ));
    }
    if entries.len() > MAX_BATCH_ENTRIES {
        return Err(invalid(
            "TooManyEntriesInBatchRequest",
            "sqs.batch.entries",
            format!(
                "Maximum number of entries per request are {MAX_BATCH_ENTRIES}. You have sent {}.",
                entries.len()
            ),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for entry in entries {
        let id = entry["Id"].as_str().unwrap_or_default();
        let valid = (1..=MAX_ENTRY_ID_CHARS).contains(&id.chars().count())
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(invalid(
                "InvalidBatchEntryId",
                "sqs.batch.entry_id",
                "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.".into(),
            ));
        }
        if !seen.insert(id) {
            return Err(invalid(
                "BatchEntryIdsNotDistinct",
                "sqs.batch.distinct_ids",
                format!("Id {id} repeated."),
            ));
        }
    }
    Ok(())
}

fn entries(body: &Value) -> Vec<Value> {
    body["Entries"].as_array().cloned().unwrap_or_default()
}

fn entry_failure(entry: &Value, refusal: &Refusal) -> Value {
    json!({
        "Id": entry["Id"],
        "SenderFault": true,
        "Code": refusal.code,
        "Message": refusal.message,
    })
}

/// Each entry on its own: the ones that break `rule` fail alone, the rest go on.
fn partial(entries: &[Value], rule: impl Fn(&Value) -> Result<(), Refusal>) -> Verdict {
    let (mut keep, mut failed, mut rules) = (Vec::new(), Vec::new(), Vec::new());
    for (i, entry) in entries.iter().enumerate() {
        match rule(entry) {
            Ok(()) => keep.push(i),
            Err(refusal) => {
                failed.push(entry_failure(entry, &refusal));
                rules.push(refusal.rule);
            }
        }
    }
    if failed.is_empty() {
        Verdict::Forward
    } else {
        Verdict::Partial { keep, failed, rules }
    }
}

/// The verdict on one SQS request. `queue` is `None` for operations without a queue (or
/// one moto does not know, which moto then refuses itself).
pub fn check(operation: &str, body: &Value, queue: Option<&QueueInfo>) -> Verdict {
    let result = (|| -> Result<Verdict, Refusal> {
        match operation {
            "SendMessage" => {
                if let Some(queue) = queue {
                    check_message(body, queue)?;
                }
            }
            "SendMessageBatch" => {
                let entries = entries(body);
                check_batch_envelope(&entries)?;
                let total: usize = entries.iter().map(message_size).sum();
                if total > MAX_BATCH_BYTES {
                    return Err(invalid(
                        "BatchRequestTooLong",
                        "sqs.batch.bytes",
                        format!("Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. You have sent {total} bytes."),
                    ));
                }
                if let Some(queue) = queue {
                    let verdict = partial(&entries, |entry| check_message(entry, queue));
                    if verdict != Verdict::Forward {
                        return Ok(verdict);
                    }
                }
            }
            "DeleteMessageBatch" => check_batch_envelope(&entries(body))?,
            "ChangeMessageVisibility" => range(
                body,
                "VisibilityTimeout",
                0,
                MAX_VISIBILITY_SECONDS,
                "sqs.visibility.range",
            )?,
            "ChangeMessageVisibilityBatch" => {
                let entries = entries(body);
                check_batch_envelope(&entries)?;
                let verdict = partial(&entries, |entry| {
                    range(
                        entry,
                        "VisibilityTimeout",
                        0,
                        MAX_VISIBILITY_SECONDS,
                        "sqs.visibility.range",
                    )
                });
                if verdict != Verdict::Forward {
                    return Ok(verdict);
                }
            }
            "ReceiveMessage" => {
                range(body, "MaxNumberOfMessages", 1, 10, "sqs.receive.max_messages")?;
                range(body, "WaitTimeSeconds", 0, 20, "sqs.receive.wait")?;
                range(
                    body,
                    "VisibilityTimeout",
                    0,
                    MAX_VISIBILITY_SECONDS,
                    "sqs.visibility.range",
                )?;
            }
            "CreateQueue" => {
                check_queue_name(body)?;
                check_queue_attributes(&body["Attributes"])?;
            }
            "SetQueueAttributes" => check_queue_attributes(&body["Attributes"])?,
            _ => {}
        }
        Ok(Verdict::Forward)
    })();
    match result {
        Ok(v) => v,
        Err(refusal) => Verdict::Refuse(refusal),
    }
}

/// A queue name: 1 to 80 characters (a FIFO queue's `.fifo` suffix counted), each a
/// letter, a digit, `-` or `_`; a FIFO queue's ends in `.fifo`, and only its does.
pub const MAX_QUEUE_NAME_CHARS: usize = 80;

fn check_queue_name(body: &Value) -> Result<(), Refusal> {
    let name = body["QueueName"].as_str().unwrap_or_default();
    let fifo = body["Attributes"]["FifoQueue"]
        .as_str()
        .map(|s| s.eq_ignore_ascii_case("true"))
        .or_else(|| body["Attributes"]["FifoQueue"].as_bool())
        .unwrap_or(false);
    let stem = if fifo {
        name.strip_suffix(".fifo")
    } else {
        Some(name)
    };
    let fits = stem.is_some_and(|stem| {
        !stem.is_empty()
            && name.chars().count() <= MAX_QUEUE_NAME_CHARS
            && stem
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
    });
    if fits {
        return Ok(());
    }
    Err(invalid(
        "InvalidParameterValue",
        "sqs.queue_name",
        format!(
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length \
             (a FIFO queue's name ends in .fifo, counted): {name:?} ({} characters)",
            name.chars().count()
        ),
    ))
}

fn check_queue_attributes(attributes: &Value) -> Result<(), Refusal> {
    let Some(map) = attributes.as_object() else {
        return Ok(());
    };
    let bounds: [(&str, i64, i64); 5] = [
        ("MaximumMessageSize", 1024, 1_048_576),
        ("VisibilityTimeout", 0, MAX_VISIBILITY_SECONDS),
        ("DelaySeconds", 0, MAX_DELAY_SECONDS),
        ("MessageRetentionPeriod", 60, 1_209_600),
        ("ReceiveMessageWaitTimeSeconds", 0, 20),
    ];
    for (name, lo, hi) in bounds {
        let Some(value) = map.get(name) else {
            continue;
        };
        let parsed = value
            .as_str()
            .and_then(|s| s.parse::<i64>().ok())
            .or_else(|| value.as_i64());
        if parsed.is_none_or(|v| !(lo..=hi).contains(&v)) {
            return Err(invalid(
                "InvalidAttributeValue",
                "sqs.queue_attributes.range",
                format!("Invalid value for the parameter {name}: {value} (from {lo} to {hi})."),
            ));
        }
    }
    Ok(())
}

/// The request body with only the entries at `keep` (in order).
pub fn keep_entries(body: &Value, keep: &[usize]) -> Value {
    let all = entries(body);
    let mut out = body.as_object().cloned().unwrap_or_else(Map::new);
    out.insert(
        "Entries".into(),
        Value::Array(keep.iter().filter_map(|i| all.get(*i).cloned()).collect()),
    );
    Value::Object(out)
}

/// moto's batch answer with `failed` added (AWS lists every entry once, in `Successful` or
/// in `Failed`).
pub fn merge_failed(answer: &Value, failed: Vec<Value>) -> Value {
    let mut out = answer.as_object().cloned().unwrap_or_else(Map::new);
    let mut all = out
        .get("Failed")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    all.extend(failed);
    out.insert("Failed".into(), Value::Array(all));
    out.entry("Successful")
        .or_insert_with(|| Value::Array(Vec::new()));
    Value::Object(out)
}
