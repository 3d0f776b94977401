//! SQS's retention on a clock the tests move. SQS deletes a message when it has been in
//! its queue for the queue's `MessageRetentionPeriod` (60 s to 14 days), whether or not
//! anyone received it. moto applies the rule on the wall clock only, so no test could ever
//! see a message of a day ago go. Here a test moves a queue's clock on
//! ([`crate::StrictLayer::advance_queues`]); from then on a `ReceiveMessage` on that queue
//! deletes, and never hands out, a message whose age on the moved clock has reached the
//! retention period, as SQS would have deleted it at that age.
//!
//! A message's age counts from its send, on the clock as it was then (the layer records
//! the sends to a moved queue; a message sent before the first move has moto's
//! `SentTimestamp`). A message that moto redrove to a dead-letter queue keeps its first
//! send time: AWS's rule for standard queues, and stricter than AWS's for FIFO ones
//! (whose enqueue time restarts in the dead-letter queue), so a test that passes here
//! passes there.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// The queues whose clocks a test moved, and the sends to them.
#[derive(Debug, Default)]
pub struct QueueClocks {
    /// Queue-name prefix -> seconds the clock is ahead of the wall clock.
    ahead: Mutex<BTreeMap<String, f64>>,
    /// Message id -> when it was sent, on its queue's clock.
    sent: Mutex<HashMap<String, f64>>,
}

/// What a receive on a moved queue needs put back after moto answers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MovedReceive {
    /// The queue's clock now (seconds since the epoch).
    pub now: f64,
    /// The client asked for no `SentTimestamp`: the layer asked for it, and strips it.
    pub strip_sent_timestamp: bool,
}

fn wall_clock() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// The queue's name: the last segment of its URL.
fn queue_name(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

fn names(body: &Value, parameter: &str) -> Vec<String> {
    body[parameter]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default()
}

impl QueueClocks {
    /// Move on by `seconds` the clock of every queue whose name starts with `prefix`.
    pub fn advance(&self, prefix: &str, seconds: f64) {
        *self
            .ahead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(prefix.to_string())
            .or_default() += seconds;
    }

    /// How far ahead of the wall clock the queue at `url` runs (`None`: not moved).
    fn ahead_of(&self, url: &str) -> Option<f64> {
        let name = queue_name(url);
        self.ahead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(prefix, _)| name.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, ahead)| *ahead)
    }

    /// After moto's 200 to a `SendMessage` or `SendMessageBatch` on a moved queue: record
    /// when each message was sent, on that queue's clock.
    pub fn record_sends(&self, operation: &str, body: &Value, answer: &Value) {
        let Some(ahead) = body["QueueUrl"].as_str().and_then(|u| self.ahead_of(u)) else {
            return;
        };
        let at = wall_clock() + ahead;
        let ids: Vec<&str> = match operation {
            "SendMessage" => answer["MessageId"].as_str().into_iter().collect(),
            "SendMessageBatch" => answer["Successful"]
                .as_array()
                .map(|a| a.iter().filter_map(|e| e["MessageId"].as_str()).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        for id in ids {
            sent.insert(id.to_string(), at);
        }
    }

    /// Before a `ReceiveMessage` is forwarded: on a moved queue, the request asks for each
    /// message's `SentTimestamp` (the client's own request may not have).
    pub fn before_receive(&self, body: &mut Value) -> Option<MovedReceive> {
        let ahead = body["QueueUrl"].as_str().and_then(|u| self.ahead_of(u))?;
        let asked: Vec<String> = names(body, "AttributeNames")
            .into_iter()
            .chain(names(body, "MessageSystemAttributeNames"))
            .collect();
        let has = asked.iter().any(|n| n == "All" || n == "SentTimestamp");
        if !has {
            let mut list = names(body, "MessageSystemAttributeNames");
            list.push("SentTimestamp".into());
            if let Some(map) = body.as_object_mut() {
                map.insert(
                    "MessageSystemAttributeNames".into(),
                    Value::Array(list.into_iter().map(Value::String).collect()),
                );
            }
        }
        Some(MovedReceive {
            now: wall_clock() + ahead,
            strip_sent_timestamp: !has,
        })
    }

    /// moto's answer to a receive on a moved queue, without the messages that SQS would
    /// have deleted by now, and the receipt handles of those (for the layer to delete them
    /// from moto).
    pub fn after_receive(&self, answer: &Value, moved: MovedReceive, retention: f64) -> (Value, Vec<String>) {
        let mut out = answer.as_object().cloned().unwrap_or_else(Map::new);
        let messages = out
            .get("Messages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        let mut kept = Vec::new();
        let mut expired = Vec::new();
        for mut message in messages {
            let id = message["MessageId"].as_str().unwrap_or_default();
            let sent_at = sent.get(id).copied().or_else(|| {
                message["Attributes"]["SentTimestamp"]
                    .as_str()
                    .and_then(|ms| ms.parse::<f64>().ok())
                    .map(|ms| ms / 1000.0)
            });
            if sent_at.is_some_and(|at| moved.now - at >= retention) {
                if let Some(handle) = message["ReceiptHandle"].as_str() {
                    expired.push(handle.to_string());
                }
                continue;
            }
            if moved.strip_sent_timestamp {
                if let Some(attributes) = message["Attributes"].as_object_mut() {
                    attributes.remove("SentTimestamp");
                    if attributes.is_empty() {
                        message.as_object_mut().map(|m| m.remove("Attributes"));
                    }
                }
            }
            kept.push(message);
        }
        if kept.is_empty() {
            out.remove("Messages");
        } else {
            out.insert("Messages".into(), Value::Array(kept));
        }
        (Value::Object(out), expired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_as_old_as_the_retention_is_gone_and_a_younger_one_stays() {
        let clocks = QueueClocks::default();
        let url = "http://127.0.0.1:1/123456789012/t1_x-events.fifo";
        // sent before the queue's clock moved: moto's SentTimestamp counts
        let old_ms = (wall_clock() * 1000.0) as u64;
        clocks.advance("t1_x", 100.0);
        let mut receive = json!({"QueueUrl": url, "MaxNumberOfMessages": 10});
        let moved = clocks.before_receive(&mut receive).expect("a moved queue");
        assert_eq!(receive["MessageSystemAttributeNames"], json!(["SentTimestamp"]));
        clocks.record_sends(
            "SendMessage",
            &json!({"QueueUrl": url}),
            &json!({"MessageId": "young"}),
        );
        let answer = json!({"Messages": [
            {"MessageId": "old", "ReceiptHandle": "h-old", "Attributes": {"SentTimestamp": old_ms.to_string()}},
            {"MessageId": "young", "ReceiptHandle": "h-young", "Attributes": {"SentTimestamp": old_ms.to_string()}},
        ]});
        let (kept, expired) = clocks.after_receive(&answer, moved, 60.0);
        assert_eq!(expired, ["h-old"]);
        assert_eq!(
            kept,
            json!({"Messages": [{"MessageId": "young", "ReceiptHandle": "h-young"}]})
        );
    }

    #[test]
    fn queues_whose_clock_did_not_move_are_left_alone() {
        let clocks = QueueClocks::default();
        clocks.advance("t1_", 1e6);
        let mut receive = json!({"QueueUrl": "http://h/1/t2_y-events.fifo"});
        assert_eq!(clocks.before_receive(&mut receive), None);
        assert_eq!(receive, json!({"QueueUrl": "http://h/1/t2_y-events.fifo"}));
    }
}
