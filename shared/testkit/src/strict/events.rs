//! EventBridge's `PutEvents` as AWS takes it, where moto takes more: at least one entry,
//! at most 10, under 256 KB of entries all told (the source, detail type, detail and
//! resources of each, in UTF-8 bytes), a detail that is a JSON object, and no source
//! starting with `aws.` (reserved for AWS's own events). An entry that breaks an entry
//! rule fails alone, at its index, as AWS answers it; the others are put (the request
//! cut to them by `sqs::keep_entries`: both services call the list `Entries`).

use serde_json::{json, Value};

use super::refusal::Refusal;

/// The most entries in one request.
pub const MAX_ENTRIES: usize = 10;
/// The entries' total size must be less than this (256 KB).
pub const MAX_REQUEST_BYTES: usize = 256 * 1024;

/// What the layer does with a `PutEvents`.
#[derive(Debug)]
pub enum Verdict {
    Forward,
    Refuse(Refusal),
    /// Forward the entries at `keep` and answer the others with these failed results,
    /// by their index in the request; `rules` names the rule each one broke.
    Partial {
        keep: Vec<usize>,
        failed: Vec<(usize, Value)>,
        rules: Vec<&'static str>,
    },
}

fn entries(body: &Value) -> &[Value] {
    body["Entries"].as_array().map_or(&[], Vec::as_slice)
}

/// An entry's size as EventBridge counts it for the request's limit.
pub fn entry_bytes(entry: &Value) -> usize {
    let text = |key: &str| entry[key].as_str().map_or(0, str::len);
    let time = if entry["Time"].is_null() { 0 } else { 14 };
    let resources: usize = entry["Resources"]
        .as_array()
        .map_or(0, |r| r.iter().filter_map(Value::as_str).map(str::len).sum());
    time + text("Source") + text("DetailType") + text("Detail") + resources
}

/// The verdict on `operation` (only `PutEvents` is checked).
pub fn check(operation: &str, body: &Value) -> Verdict {
    if operation != "PutEvents" {
        return Verdict::Forward;
    }
    let all = entries(body);
    if all.is_empty() || all.len() > MAX_ENTRIES {
        return Verdict::Refuse(Refusal::events_validation(
            "events.batch.entries",
            format!(
                "1 validation error detected: Value at 'entries' failed to satisfy constraint: Member must have length between 1 and {MAX_ENTRIES} (it has {})",
                all.len()
            ),
        ));
    }
    let total: usize = all.iter().map(entry_bytes).sum();
    if total >= MAX_REQUEST_BYTES {
        return Verdict::Refuse(Refusal::events_validation(
            "events.batch.bytes",
            format!("Total size of the entries in the request is over the limit ({total} bytes)."),
        ));
    }
    let mut keep = Vec::new();
    let mut failed = Vec::new();
    let mut rules = Vec::new();
    for (i, entry) in all.iter().enumerate() {
        let source = entry["Source"].as_str().unwrap_or_default();
        let detail = entry["Detail"].as_str().map(serde_json::from_str::<Value>);
        let refused = if source.starts_with("aws.") {
            Some((
                "events.entry.source",
                "NotAuthorizedForSourceException",
                "Not authorized for the source.",
            ))
        } else if matches!(detail, Some(Ok(ref d)) if !d.is_object()) {
            Some(("events.entry.detail", "MalformedDetail", "Detail is malformed."))
        } else {
            None
        };
        match refused {
            Some((rule, code, message)) => {
                failed.push((i, json!({"ErrorCode": code, "ErrorMessage": message})));
                rules.push(rule);
            }
            None => keep.push(i),
        }
    }
    if failed.is_empty() {
        Verdict::Forward
    } else {
        Verdict::Partial { keep, failed, rules }
    }
}

/// The answer to the whole request: moto's results for the kept entries (`None`: none was
/// forwarded) and the failed ones, each at its index in the request, with the count of
/// failures.
pub fn merge(moto: Option<&Value>, keep: &[usize], failed: Vec<(usize, Value)>) -> Value {
    let total = keep.len() + failed.len();
    let mut results = vec![Value::Null; total];
    let from_moto = moto
        .and_then(|m| m["Entries"].as_array())
        .cloned()
        .unwrap_or_default();
    for (slot, result) in keep.iter().zip(from_moto) {
        if let Some(r) = results.get_mut(*slot) {
            *r = result;
        }
    }
    for (slot, result) in failed {
        if let Some(r) = results.get_mut(slot) {
            *r = result;
        }
    }
    let failures = results.iter().filter(|r| !r["ErrorCode"].is_null()).count();
    json!({"FailedEntryCount": failures, "Entries": results})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(source: &str, detail: &str) -> Value {
        json!({"Source": source, "DetailType": "t", "Detail": detail, "EventBusName": "b"})
    }

    #[test]
    fn entry_rules_fail_alone_and_request_rules_refuse_all() {
        let body = json!({"Entries": [entry("stm", "{}"), entry("aws.states", "{}"), entry("stm", "[1]")]});
        let Verdict::Partial { keep, failed, rules } = check("PutEvents", &body) else {
            panic!("a partial verdict");
        };
        assert_eq!(keep, vec![0]);
        assert_eq!(rules, vec!["events.entry.source", "events.entry.detail"]);
        let answer = merge(Some(&json!({"Entries": [{"EventId": "x"}]})), &keep, failed);
        assert_eq!(answer["FailedEntryCount"], 2);
        assert_eq!(answer["Entries"][0]["EventId"], "x");
        assert_eq!(
            answer["Entries"][1]["ErrorCode"],
            "NotAuthorizedForSourceException"
        );
        assert_eq!(answer["Entries"][2]["ErrorCode"], "MalformedDetail");

        let eleven = json!({"Entries": vec![entry("stm", "{}"); 11]});
        assert!(
            matches!(check("PutEvents", &eleven), Verdict::Refuse(r) if r.rule == "events.batch.entries")
        );
        let big = "x".repeat(130 * 1024);
        let two = json!({"Entries": [entry("stm", &format!("{{\"a\":\"{big}\"}}")), entry("stm", &format!("{{\"a\":\"{big}\"}}"))]});
        assert!(matches!(check("PutEvents", &two), Verdict::Refuse(r) if r.rule == "events.batch.bytes"));
        assert!(matches!(
            check("PutEvents", &json!({"Entries": [entry("stm", "{}")]})),
            Verdict::Forward
        ));
        assert!(matches!(check("ListRules", &json!({})), Verdict::Forward));
    }
}
