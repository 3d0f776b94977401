//! The store's trace records as typed steps, each with what it changed in the context.

use serde_json::Value;
use stm_core::Map;

/// One step of the trace.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TraceStep {
    pub index: Option<i64>,
    /// The event's kind, or the control command's name (`redrive`, `migrate`).
    pub event: String,
    pub event_data: Map,
    /// A control-plane command rather than an event.
    pub control: bool,
    pub from: Option<String>,
    pub to: Option<String>,
    pub actions: Vec<String>,
    /// What the step changed in the context (against the previous step's).
    pub changes: Vec<ContextChange>,
    /// Seconds since the epoch.
    pub timestamp: Option<f64>,
    /// Why the step's event did what it did (`inspect::explain`), where the machine is known.
    pub explained: Option<String>,
}

/// One context key a step added, changed or removed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContextChange {
    pub key: String,
    /// `None`: the step added the key.
    pub before: Option<Value>,
    /// `None`: the step removed the key.
    pub after: Option<Value>,
}

/// The store's trace records as typed steps, each with what it changed in the context
/// (the first against an empty context: it shows the context the execution started with).
pub(crate) fn trace_steps(raw: &[Map]) -> Vec<TraceStep> {
    let empty = Map::new();
    let mut previous = &empty;
    let mut steps = Vec::with_capacity(raw.len());
    for record in raw {
        let text = |key: &str| record.get(key).and_then(Value::as_str).map(str::to_string);
        let context = match record.get("context_out") {
            Some(Value::Object(map)) => map,
            _ => previous,
        };
        steps.push(TraceStep {
            index: record.get("index").and_then(Value::as_i64),
            event: text("event_kind").unwrap_or_else(|| "?".to_string()),
            event_data: match record.get("event_data") {
                Some(Value::Object(map)) => map.clone(),
                _ => Map::new(),
            },
            control: text("cause").as_deref() == Some("control"),
            from: text("from_path"),
            to: text("to_path"),
            actions: match record.get("actions") {
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|a| a.as_str().map_or_else(|| a.to_string(), str::to_string))
                    .collect(),
                _ => Vec::new(),
            },
            changes: context_diff(previous, context),
            timestamp: record.get("timestamp").and_then(Value::as_f64),
            explained: None,
        });
        previous = context;
    }
    steps
}

/// The keys `after` added, changed or removed relative to `before`: `after`'s keys in its
/// order, then the removed ones.
pub(crate) fn context_diff(before: &Map, after: &Map) -> Vec<ContextChange> {
    let mut changes: Vec<ContextChange> = after
        .iter()
        .filter(|(key, value)| before.get(*key) != Some(value))
        .map(|(key, value)| ContextChange {
            key: key.clone(),
            before: before.get(key).cloned(),
            after: Some(value.clone()),
        })
        .collect();
    changes.extend(
        before
            .iter()
            .filter(|(key, _)| !after.contains_key(*key))
            .map(|(key, value)| ContextChange {
                key: key.clone(),
                before: Some(value.clone()),
                after: None,
            }),
    );
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::map;
    use serde_json::json;

    #[test]
    fn the_diff_names_added_changed_and_removed_keys() {
        let before = map(json!({"a": 1, "b": 2, "gone": true}));
        let after = map(json!({"a": 1, "b": 3, "new": "x"}));
        let changes = context_diff(&before, &after);
        assert_eq!(
            changes,
            [
                ContextChange {
                    key: "b".into(),
                    before: Some(json!(2)),
                    after: Some(json!(3))
                },
                ContextChange {
                    key: "new".into(),
                    before: None,
                    after: Some(json!("x"))
                },
                ContextChange {
                    key: "gone".into(),
                    before: Some(json!(true)),
                    after: None
                },
            ]
        );
        assert!(context_diff(&after, &after).is_empty());
    }

    #[test]
    fn trace_steps_diff_each_context_against_the_previous_one() {
        let raw = [
            map(
                json!({"index": 0, "event_kind": "Start", "event_data": {}, "from_path": null,
                "to_path": "Draft", "actions": [], "context_out": {"amount": 0.0}, "timestamp": 10.0}),
            ),
            map(
                json!({"index": 1, "event_kind": "Submit", "event_data": {"amount": 4.5},
                "from_path": "Draft", "to_path": "Payment.Charging", "actions": ["charge"],
                "context_out": {"amount": 4.5}, "timestamp": 11.5}),
            ),
            map(
                json!({"index": 2, "cause": "control", "event_kind": "redrive", "from_path": "X",
                "to_path": "Draft", "timestamp": 12.0}),
            ),
        ];
        let steps = trace_steps(&raw);
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[0].changes.len(), 1, "the start shows the initial context");
        assert_eq!(steps[0].from, None);
        let submit = &steps[1];
        assert_eq!(
            (
                submit.event.as_str(),
                submit.from.as_deref(),
                submit.to.as_deref()
            ),
            ("Submit", Some("Draft"), Some("Payment.Charging"))
        );
        assert_eq!(submit.actions, ["charge"]);
        assert_eq!(submit.changes[0].after, Some(json!(4.5)));
        assert_eq!(submit.timestamp, Some(11.5));
        // a step without a context keeps the previous one: no spurious removals
        assert!(steps[2].control && steps[2].changes.is_empty());
    }
}
