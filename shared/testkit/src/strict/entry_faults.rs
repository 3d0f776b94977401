//! The layer's fault mode per entry ([`StrictLayer::fault_entries`]): a batch call that
//! AWS answers as a success while part of it was not done, which a fault proxy that fails
//! whole calls can never produce. Opt-in per name prefix (tables, queues, buses), drawn
//! at random from a seed, each request with the given probability:
//!
//! - `SendMessageBatch`: 200, the drawn entries in `Failed` with `SenderFault` false and a
//!   server-side code (`InternalError`), the rest sent and in
//!   `Successful` (SQS API Reference, `SendMessageBatch` and `BatchResultErrorEntry`:
//!   every entry is listed once, in one of the two, and `SenderFault` says whose fault it
//!   was). On a FIFO queue the drawn entry fails with every later entry of its message
//!   group in the request: SQS documents no order between a failed entry and a later one
//!   of its group in one batch, and a later entry accepted there could never be recalled
//!   (the runtime's relay assumes the group's tail fails with it; see the report of
//!   issue 43).
//! - `PutEvents`: 200, `FailedEntryCount` and, at the drawn entries' indexes,
//!   `{"ErrorCode": "ThrottlingException", "ErrorMessage": ...}` instead of an `EventId`
//!   (EventBridge API Reference, `PutEvents` / `PutEventsResultEntry`; the user guide,
//!   *Sending events with PutEvents*: one result per entry, in order).
//! - `BatchGetItem`: 200 with part of the keys (at least one read, at least one not) in
//!   `UnprocessedKeys`, in the request's own `KeysAndAttributes` form (DynamoDB API
//!   Reference, `BatchGetItem`: a partial result "if ... the table's provisioned
//!   throughput is exceeded ... or an internal processing failure occurs"; only when
//!   none is read is it a `ProvisionedThroughputExceededException`).
//! - `BatchWriteItem`: 200 with part of the puts and deletes (at least one done, at least
//!   one not) in `UnprocessedItems`, in `RequestItems`' form (DynamoDB API Reference,
//!   `BatchWriteItem`).
//! - `TransactWriteItems`: 400 `TransactionCanceledException`, one `CancellationReasons`
//!   entry per action, a drawn one `ThrottlingError`, the others `None`; nothing written
//!   (DynamoDB API Reference, `TransactWriteItems`: "Throttling Error", "There is
//!   insufficient provisioned capacity for the transaction to be completed").
//!
//! The layer counts, per prefix and kind ([`EntryFaultCounts`]), the entries it failed and
//! the ones it later let through (the same message, event, key or item, or a commit of
//! the same execution): a fault suite proves it walked a recovery only if both moved.
//!
//! [`StrictLayer::fault_entries`]: super::StrictLayer::fault_entries

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use serde_json::{json, Map, Value};

/// The kinds of entry fault, as counted.
pub const SQS_FAILED_ENTRY: &str = "SendMessageBatch.Failed";
pub const EVENTS_FAILED_ENTRY: &str = "PutEvents.Failed";
pub const UNPROCESSED_KEYS: &str = "BatchGetItem.UnprocessedKeys";
pub const UNPROCESSED_ITEMS: &str = "BatchWriteItem.UnprocessedItems";
pub const TRANSACTION_THROTTLED: &str = "TransactWriteItems.ThrottlingError";
/// Every kind, in the order above.
pub const KINDS: [&str; 5] = [
    SQS_FAILED_ENTRY,
    EVENTS_FAILED_ENTRY,
    UNPROCESSED_KEYS,
    UNPROCESSED_ITEMS,
    TRANSACTION_THROTTLED,
];

/// What the fault mode did under one prefix, by kind ([`KINDS`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryFaultCounts {
    /// Entries failed (an entry failed twice counts twice).
    pub injected: BTreeMap<String, usize>,
    /// Distinct failed entries later let through.
    pub recovered: BTreeMap<String, usize>,
    /// Distinct failed entries not (yet) let through.
    pub outstanding: BTreeMap<String, usize>,
}

impl EntryFaultCounts {
    pub fn injected(&self, kind: &str) -> usize {
        self.injected.get(kind).copied().unwrap_or(0)
    }

    pub fn recovered(&self, kind: &str) -> usize {
        self.recovered.get(kind).copied().unwrap_or(0)
    }
}

struct Rule {
    /// Probability per request, in percent.
    percent: f64,
    /// Operation -> its own probability, in place of `percent`.
    per_operation: BTreeMap<String, f64>,
    rng: crate::Rng,
    injected: BTreeMap<&'static str, usize>,
    recovered: BTreeMap<&'static str, usize>,
    /// Kind -> identities failed and not let through since.
    owed: BTreeMap<&'static str, BTreeSet<String>>,
}

impl Rule {
    fn hit(&mut self, operation: &str) -> bool {
        let percent = self.per_operation.get(operation).copied().unwrap_or(self.percent);
        self.rng.unit() * 100.0 < percent
    }

    /// A random subset of `0..n` with at least one member and, when `keep_one`, at least
    /// one left out (a partial result: AWS answers "none done" with a whole-call error).
    fn subset(&mut self, n: usize, keep_one: bool) -> BTreeSet<usize> {
        let mut out: BTreeSet<usize> = (0..n).filter(|_| self.rng.next() & 1 == 1).collect();
        if out.is_empty() {
            out.insert(self.rng.index(n));
        }
        if keep_one && out.len() == n {
            let spared = self.rng.index(n);
            out.remove(&spared);
        }
        out
    }

    fn failed(&mut self, kind: &'static str, identities: impl IntoIterator<Item = String>) {
        let owed = self.owed.entry(kind).or_default();
        for id in identities {
            *self.injected.entry(kind).or_default() += 1;
            owed.insert(id);
        }
    }

    fn through(&mut self, kind: &'static str, identities: impl IntoIterator<Item = String>) {
        let Some(owed) = self.owed.get_mut(kind) else {
            return;
        };
        for id in identities {
            if owed.remove(&id) {
                *self.recovered.entry(kind).or_default() += 1;
            }
        }
    }
}

/// The prefixes under fault, and their counts.
#[derive(Default)]
pub(super) struct EntryFaults {
    rules: Mutex<BTreeMap<String, Rule>>,
}

/// What the layer does with one request in the fault mode.
#[derive(Debug, Default)]
pub(super) struct Plan {
    /// The request to forward instead (entries taken out), if any.
    pub(super) body: Option<Value>,
    /// Answer this instead of forwarding (a cancelled transaction): status, error type
    /// and body.
    pub(super) refuse: Option<Value>,
    /// SQS: failed entries to add to the answer's `Failed`.
    pub(super) sqs_failed: Vec<Value>,
    /// EventBridge: indexes (into the entries forwarded before this plan) to answer as
    /// failed, with their results.
    pub(super) events_failed: Vec<(usize, Value)>,
    /// DynamoDB: the `UnprocessedKeys` / `UnprocessedItems` to add to the answer.
    pub(super) unprocessed: Option<(&'static str, Value)>,
    /// The prefix whose rule drew this, to credit what then goes through.
    pub(super) prefix: Option<String>,
}

/// A key or item as text that does not depend on the order of its attributes (the SDK
/// sends maps in any order).
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, String> = map.iter().map(|(k, v)| (k, canonical(v))).collect();
            let parts: Vec<String> = sorted.iter().map(|(k, v)| format!("{k:?}:{v}")).collect();
            format!("{{{}}}", parts.join(","))
        }
        other => other.to_string(),
    }
}

fn queue_name(body: &Value) -> String {
    body["QueueUrl"]
        .as_str()
        .and_then(|url| url.rsplit('/').next())
        .unwrap_or_default()
        .to_string()
}

fn sqs_identity(queue: &str, entry: &Value) -> String {
    // a FIFO entry's deduplication id is what SQS itself takes as the message's identity
    let id = entry["MessageDeduplicationId"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| entry["MessageBody"].as_str().unwrap_or_default().to_string());
    format!("{queue}#{id}")
}

fn event_identity(entry: &Value) -> String {
    format!(
        "{}#{}",
        entry["EventBusName"].as_str().unwrap_or("default"),
        entry["Detail"].as_str().unwrap_or_default()
    )
}

/// A `WriteRequest`'s identity: its table, what it does and to which key or item.
fn write_identity(table: &str, request: &Value) -> String {
    if let Some(delete) = request.get("DeleteRequest") {
        format!("{table}#delete#{}", canonical(&delete["Key"]))
    } else {
        format!("{table}#put#{}", canonical(&request["PutRequest"]["Item"]))
    }
}

/// A transaction's identity: its first action's table and key (the execution put leads
/// every commit), so a later commit of the same execution is its recovery.
fn transaction_identity(body: &Value, key_of: &dyn Fn(&str, &Value) -> Value) -> String {
    let first = body["TransactItems"]
        .as_array()
        .and_then(|items| items.first())
        .and_then(Value::as_object)
        .and_then(|m| m.values().next())
        .cloned()
        .unwrap_or(Value::Null);
    let table = first["TableName"].as_str().unwrap_or_default();
    let key = match first.get("Key") {
        Some(key) => key.clone(),
        None => key_of(table, &first["Item"]),
    };
    format!("{table}#{}", canonical(&key))
}

impl EntryFaults {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Rule>> {
        self.rules.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn set(&self, prefix: &str, percent: f64, seed: u64) {
        let mut rules = self.lock();
        match rules.get_mut(prefix) {
            // counts stay across a change of rate: a suite reads them at its end
            Some(rule) => {
                rule.percent = percent.clamp(0.0, 100.0);
                rule.per_operation.clear();
            }
            None => {
                rules.insert(
                    prefix.to_string(),
                    Rule {
                        percent: percent.clamp(0.0, 100.0),
                        per_operation: BTreeMap::new(),
                        rng: crate::Rng::new(seed.rotate_left(29).max(1) ^ 0x9E37_79B9_7F4A_7C15),
                        injected: BTreeMap::new(),
                        recovered: BTreeMap::new(),
                        owed: BTreeMap::new(),
                    },
                );
            }
        }
    }

    /// `operation`'s own probability under `prefix` (a rule there must exist: see
    /// [`set`](Self::set)).
    pub(super) fn set_operation(&self, prefix: &str, operation: &str, percent: f64) {
        if let Some(rule) = self.lock().get_mut(prefix) {
            rule.per_operation
                .insert(operation.to_string(), percent.clamp(0.0, 100.0));
        }
    }

    pub(super) fn counts(&self, prefix: &str) -> EntryFaultCounts {
        let rules = self.lock();
        let Some(rule) = rules.get(prefix) else {
            return EntryFaultCounts::default();
        };
        let named = |m: &BTreeMap<&'static str, usize>| m.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        EntryFaultCounts {
            injected: named(&rule.injected),
            recovered: named(&rule.recovered),
            outstanding: rule.owed.iter().map(|(k, v)| (k.to_string(), v.len())).collect(),
        }
    }

    /// The prefix of a rule that covers one of `names`.
    fn prefix_for(rules: &BTreeMap<String, Rule>, names: &[String]) -> Option<String> {
        rules
            .keys()
            .find(|prefix| names.iter().any(|n| n.starts_with(prefix.as_str())))
            .cloned()
    }

    /// The names a request acts on, for the prefix rules.
    pub(super) fn names(operation: &str, body: &Value) -> Vec<String> {
        match operation {
            "SendMessageBatch" => vec![queue_name(body)],
            "PutEvents" => body["Entries"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| e["EventBusName"].as_str().unwrap_or("default").to_string())
                .collect(),
            "BatchGetItem" | "BatchWriteItem" | "TransactWriteItems" => {
                super::dynamodb::tables_named(operation, body)
            }
            _ => Vec::new(),
        }
    }

    /// Draw the faults for one request (`body` as it would be forwarded). `key_of` cuts an
    /// item down to its table's key.
    pub(super) fn plan(&self, operation: &str, body: &Value, key_of: &dyn Fn(&str, &Value) -> Value) -> Plan {
        let mut rules = self.lock();
        if rules.is_empty() {
            return Plan::default();
        }
        let Some(prefix) = Self::prefix_for(&rules, &Self::names(operation, body)) else {
            return Plan::default();
        };
        let Some(rule) = rules.get_mut(&prefix) else {
            return Plan::default();
        };
        let mut plan = Plan {
            prefix: Some(prefix.clone()),
            ..Plan::default()
        };
        if !rule.hit(operation) {
            return plan;
        }
        match operation {
            "SendMessageBatch" => {
                let entries = body["Entries"].as_array().cloned().unwrap_or_default();
                if entries.is_empty() {
                    return plan;
                }
                let first = rule.rng.index(entries.len());
                let group = entries[first]["MessageGroupId"].as_str().map(str::to_string);
                let failing = |i: usize, e: &Value| {
                    i == first
                        || (i > first && group.is_some() && e["MessageGroupId"].as_str() == group.as_deref())
                };
                // a fault of SQS's, not of the sender's: the entry may be sent again as it is
                let code = (
                    "InternalError",
                    "We encountered an internal error. Please try again. (injected)",
                );
                let queue = queue_name(body);
                let mut kept = Vec::new();
                let mut ids = Vec::new();
                for (i, entry) in entries.iter().enumerate() {
                    if failing(i, entry) {
                        ids.push(sqs_identity(&queue, entry));
                        plan.sqs_failed.push(json!({
                            "Id": entry["Id"].clone(),
                            "SenderFault": false,
                            "Code": code.0,
                            "Message": code.1,
                        }));
                    } else {
                        kept.push(entry.clone());
                    }
                }
                rule.failed(SQS_FAILED_ENTRY, ids);
                plan.body = Some(with(body, "Entries", Value::Array(kept)));
            }
            "PutEvents" => {
                let entries = body["Entries"].as_array().cloned().unwrap_or_default();
                if entries.is_empty() {
                    return plan;
                }
                let failing = rule.subset(entries.len(), false);
                let mut kept = Vec::new();
                let mut ids = Vec::new();
                for (i, entry) in entries.iter().enumerate() {
                    if failing.contains(&i) {
                        ids.push(event_identity(entry));
                        plan.events_failed.push((
                            i,
                            json!({"ErrorCode": "ThrottlingException", "ErrorMessage": "Rate exceeded. (injected)"}),
                        ));
                    } else {
                        kept.push(entry.clone());
                    }
                }
                rule.failed(EVENTS_FAILED_ENTRY, ids);
                plan.body = Some(with(body, "Entries", Value::Array(kept)));
            }
            "BatchGetItem" => {
                let Some(tables) = body["RequestItems"].as_object() else {
                    return plan;
                };
                let all: Vec<(String, usize)> = tables
                    .iter()
                    .flat_map(|(t, ka)| {
                        let n = ka["Keys"].as_array().map_or(0, Vec::len);
                        (0..n).map(move |i| (t.clone(), i))
                    })
                    .collect();
                if all.len() < 2 {
                    return plan;
                }
                let left: BTreeSet<usize> = rule.subset(all.len(), true);
                let mut read = Map::new();
                let mut unread = Map::new();
                let mut ids = Vec::new();
                for (table, ka) in tables {
                    let keys = ka["Keys"].as_array().cloned().unwrap_or_default();
                    let (mut now, mut later) = (Vec::new(), Vec::new());
                    for (i, key) in keys.into_iter().enumerate() {
                        let at = all.iter().position(|(t, k)| t == table && *k == i);
                        if at.is_some_and(|at| left.contains(&at)) {
                            ids.push(format!("{table}#{}", canonical(&key)));
                            later.push(key);
                        } else {
                            now.push(key);
                        }
                    }
                    if !now.is_empty() {
                        read.insert(table.clone(), with(ka, "Keys", Value::Array(now)));
                    }
                    if !later.is_empty() {
                        // the same form as the request's: projection, consistency and names kept
                        unread.insert(table.clone(), with(ka, "Keys", Value::Array(later)));
                    }
                }
                rule.failed(UNPROCESSED_KEYS, ids);
                plan.body = Some(with(body, "RequestItems", Value::Object(read)));
                plan.unprocessed = Some(("UnprocessedKeys", Value::Object(unread)));
            }
            "BatchWriteItem" => {
                let Some(tables) = body["RequestItems"].as_object() else {
                    return plan;
                };
                let total: usize = tables.values().map(|r| r.as_array().map_or(0, Vec::len)).sum();
                if total < 2 {
                    return plan;
                }
                let left = rule.subset(total, true);
                let mut done = Map::new();
                let mut undone = Map::new();
                let mut ids = Vec::new();
                let mut at = 0;
                for (table, requests) in tables {
                    let (mut now, mut later) = (Vec::new(), Vec::new());
                    for request in requests.as_array().into_iter().flatten() {
                        if left.contains(&at) {
                            ids.push(write_identity(table, request));
                            later.push(request.clone());
                        } else {
                            now.push(request.clone());
                        }
                        at += 1;
                    }
                    if !now.is_empty() {
                        done.insert(table.clone(), Value::Array(now));
                    }
                    if !later.is_empty() {
                        undone.insert(table.clone(), Value::Array(later));
                    }
                }
                rule.failed(UNPROCESSED_ITEMS, ids);
                plan.body = Some(with(body, "RequestItems", Value::Object(done)));
                plan.unprocessed = Some(("UnprocessedItems", Value::Object(undone)));
            }
            "TransactWriteItems" => {
                let actions = body["TransactItems"].as_array().map_or(0, Vec::len);
                if actions == 0 {
                    return plan;
                }
                let throttled = rule.rng.index(actions);
                let reasons: Vec<Value> = (0..actions)
                    .map(|i| {
                        if i == throttled {
                            json!({"Code": "ThrottlingError", "Message": "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. (injected)"})
                        } else {
                            json!({"Code": "None"})
                        }
                    })
                    .collect();
                let codes: Vec<&str> = (0..actions)
                    .map(|i| if i == throttled { "ThrottlingError" } else { "None" })
                    .collect();
                rule.failed(TRANSACTION_THROTTLED, [transaction_identity(body, key_of)]);
                plan.refuse = Some(json!({
                    "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                    "Message": format!(
                        "Transaction cancelled, please refer cancellation reasons for specific reasons [{}]",
                        codes.join(", ")
                    ),
                    "CancellationReasons": reasons,
                }));
            }
            _ => {}
        }
        plan
    }

    /// moto answered `answer` (200) to `forwarded`: credit what went through to the rule
    /// of `prefix`.
    pub(super) fn went_through(
        &self,
        prefix: &str,
        operation: &str,
        forwarded: &Value,
        answer: &Value,
        key_of: &dyn Fn(&str, &Value) -> Value,
    ) {
        let mut rules = self.lock();
        let Some(rule) = rules.get_mut(prefix) else {
            return;
        };
        match operation {
            "SendMessageBatch" => {
                let queue = queue_name(forwarded);
                let sent: BTreeSet<&str> = answer["Successful"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["Id"].as_str())
                    .collect();
                let ids: Vec<String> = forwarded["Entries"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|e| e["Id"].as_str().is_some_and(|id| sent.contains(id)))
                    .map(|e| sqs_identity(&queue, e))
                    .collect();
                rule.through(SQS_FAILED_ENTRY, ids);
            }
            "PutEvents" => {
                let results = answer["Entries"].as_array().cloned().unwrap_or_default();
                let ids: Vec<String> = forwarded["Entries"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .zip(results)
                    .filter(|(_, r)| r["ErrorCode"].is_null())
                    .map(|(e, _)| event_identity(e))
                    .collect();
                rule.through(EVENTS_FAILED_ENTRY, ids);
            }
            "BatchGetItem" => {
                let ids: Vec<String> = forwarded["RequestItems"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .flat_map(|(table, ka)| {
                        ka["Keys"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(move |k| format!("{table}#{}", canonical(k)))
                    })
                    .collect();
                rule.through(UNPROCESSED_KEYS, ids);
            }
            "BatchWriteItem" => {
                let ids: Vec<String> = forwarded["RequestItems"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .flat_map(|(table, requests)| {
                        requests
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(move |r| write_identity(table, r))
                    })
                    .collect();
                rule.through(UNPROCESSED_ITEMS, ids);
            }
            "TransactWriteItems" => {
                rule.through(TRANSACTION_THROTTLED, [transaction_identity(forwarded, key_of)]);
            }
            _ => {}
        }
    }
}

/// `object` with `key` set to `value`.
fn with(object: &Value, key: &str, value: Value) -> Value {
    let mut out = object.as_object().cloned().unwrap_or_default();
    out.insert(key.to_string(), value);
    Value::Object(out)
}

/// moto's answer with the plan's unprocessed keys or items in it (moto's own, if any,
/// kept: it answers an empty map).
pub(super) fn add_unprocessed(answer: &Value, field: &str, unprocessed: &Value) -> Value {
    let mut out = answer.as_object().cloned().unwrap_or_default();
    let mut merged = out
        .get(field)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (table, more) in unprocessed.as_object().into_iter().flatten() {
        match (merged.get_mut(table), more) {
            // UnprocessedItems: a list of WriteRequests per table
            (Some(Value::Array(have)), Value::Array(add)) => have.extend(add.iter().cloned()),
            // UnprocessedKeys: KeysAndAttributes per table
            (Some(have @ Value::Object(_)), Value::Object(add)) => {
                let mut keys = have["Keys"].as_array().cloned().unwrap_or_default();
                keys.extend(
                    add.get("Keys")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
                have["Keys"] = Value::Array(keys);
            }
            _ => {
                merged.insert(table.clone(), more.clone());
            }
        }
    }
    out.insert(field.to_string(), Value::Object(merged));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_key(_: &str, item: &Value) -> Value {
        item.clone()
    }

    fn always(prefix: &str) -> EntryFaults {
        let faults = EntryFaults::default();
        faults.set(prefix, 100.0, 7);
        faults
    }

    #[test]
    fn a_fifo_entry_fails_with_the_rest_of_its_group_and_is_credited_when_sent() {
        let faults = always("p-");
        let entry = |id: &str, group: &str| json!({"Id": id, "MessageBody": "b", "MessageGroupId": group, "MessageDeduplicationId": format!("d{id}")});
        let body = json!({"QueueUrl": "http://h/1/p-events.fifo", "Entries": (0..10).map(|i| entry(&i.to_string(), if i % 2 == 0 { "a" } else { "b" })).collect::<Vec<_>>()});
        let plan = faults.plan("SendMessageBatch", &body, &no_key);
        let kept = plan.body.expect("a cut request")["Entries"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let failed: Vec<usize> = plan
            .sqs_failed
            .iter()
            .filter_map(|f| f["Id"].as_str()?.parse().ok())
            .collect();
        assert!(!failed.is_empty());
        assert_eq!(kept.len() + failed.len(), 10, "every entry once");
        let first = failed[0];
        for i in first..10 {
            assert_eq!(
                failed.contains(&i),
                i % 2 == first % 2,
                "the group's tail fails: {failed:?}"
            );
        }
        assert!(plan.sqs_failed.iter().all(|f| f["SenderFault"] == false));
        let counts = faults.counts("p-");
        assert_eq!(counts.injected(SQS_FAILED_ENTRY), failed.len());
        // the same entries sent again, accepted
        let again = json!({"QueueUrl": "http://h/1/p-events.fifo", "Entries": failed.iter().map(|i| entry(&i.to_string(), if i % 2 == 0 { "a" } else { "b" })).collect::<Vec<_>>()});
        let answer =
            json!({"Successful": failed.iter().map(|i| json!({"Id": i.to_string()})).collect::<Vec<_>>()});
        faults.went_through("p-", "SendMessageBatch", &again, &answer, &no_key);
        assert_eq!(faults.counts("p-").recovered(SQS_FAILED_ENTRY), failed.len());
        assert_eq!(faults.counts("p-").outstanding[SQS_FAILED_ENTRY], 0);
    }

    #[test]
    fn batch_reads_and_writes_leave_part_unprocessed_never_all() {
        let faults = always("t_");
        for _ in 0..20 {
            let body = json!({"RequestItems": {
                "t_executions": {"Keys": [{"id": {"S": "a"}}], "ConsistentRead": true},
                "t_processed": {"Keys": [{"execution_id": {"S": "a"}, "event_id": {"S": "e"}}], "ConsistentRead": true},
            }});
            let plan = faults.plan("BatchGetItem", &body, &no_key);
            let read = plan.body.expect("a cut request");
            let (field, unread) = plan.unprocessed.expect("unprocessed keys");
            assert_eq!(field, "UnprocessedKeys");
            let count = |v: &Value| -> usize {
                v.as_object()
                    .into_iter()
                    .flatten()
                    .map(|(_, ka)| ka["Keys"].as_array().map_or(0, Vec::len))
                    .sum()
            };
            assert_eq!((count(&read["RequestItems"]), count(&unread)), (1, 1));
            assert!(unread
                .as_object()
                .into_iter()
                .flatten()
                .all(|(_, ka)| ka["ConsistentRead"] == true));
            let writes = json!({"RequestItems": {"t_outbox": [
                {"DeleteRequest": {"Key": {"seq": {"N": "1"}}}},
                {"DeleteRequest": {"Key": {"seq": {"N": "2"}}}},
                {"DeleteRequest": {"Key": {"seq": {"N": "3"}}}},
            ]}});
            let plan = faults.plan("BatchWriteItem", &writes, &no_key);
            let done = plan.body.expect("a cut request")["RequestItems"]["t_outbox"]
                .as_array()
                .map_or(0, Vec::len);
            let (_, undone) = plan.unprocessed.expect("unprocessed items");
            let left = undone["t_outbox"].as_array().map_or(0, Vec::len);
            assert!(done >= 1 && left >= 1 && done + left == 3, "{done} + {left}");
            let answer = add_unprocessed(&json!({"UnprocessedItems": {}}), "UnprocessedItems", &undone);
            assert_eq!(
                answer["UnprocessedItems"]["t_outbox"]
                    .as_array()
                    .map_or(0, Vec::len),
                left
            );
        }
        // a single key is never partly read: no fault
        let one = json!({"RequestItems": {"t_executions": {"Keys": [{"id": {"S": "a"}}]}}});
        assert!(faults.plan("BatchGetItem", &one, &no_key).body.is_none());
    }

    #[test]
    fn a_transaction_is_cancelled_with_a_throttling_reason_per_action() {
        let faults = always("t_");
        let body = json!({"TransactItems": [
            {"Put": {"TableName": "t_executions", "Item": {"id": {"S": "a"}}}},
            {"Put": {"TableName": "t_outbox", "Item": {"seq": {"N": "1"}}}},
        ]});
        let refused = faults
            .plan("TransactWriteItems", &body, &no_key)
            .refuse
            .expect("cancelled");
        let codes: Vec<&str> = refused["CancellationReasons"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["Code"].as_str())
            .collect();
        assert_eq!(codes.len(), 2);
        assert_eq!(codes.iter().filter(|c| **c == "ThrottlingError").count(), 1);
        assert!(codes.iter().all(|c| *c == "ThrottlingError" || *c == "None"));
        faults.went_through("t_", "TransactWriteItems", &body, &json!({}), &no_key);
        assert_eq!(faults.counts("t_").recovered(TRANSACTION_THROTTLED), 1);
        // another prefix is left alone
        assert!(faults
            .plan(
                "TransactWriteItems",
                &json!({"TransactItems": [{"Put": {"TableName": "u_x", "Item": {}}}]}),
                &no_key
            )
            .refuse
            .is_none());
    }
}
