//! A recorded trace explained step by step (`stm trace --explain`, the console's trace):
//! each step's event run through [`stm_core::engine::explain`] again, from the state the
//! step started in, on the machine version that ran it.
//!
//! A trace records each step's event, the state it left (`from_path`) and the context it
//! left behind (`context_out`), so the state before step N is step N's `from_path` with
//! step N-1's context: exactly what a transition's selection reads. The status is not
//! recorded; a step the worker ran was on a RUNNING execution (a suspended one parks its
//! events, a finished one takes none), so that is the status explained from. The version
//! is the execution's pin, and before a `migrate` step the version it migrated from.

use serde_json::Value;
use stm_core::engine::{self, Explanation};
use stm_core::version::Version;
use stm_core::{Event, Execution, Map, Status};
use stm_runtime::Definitions;

/// What `stm trace --explain` and the console show under one step.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Explained {
    Why(Explanation),
    /// The step selected no transition for a reason the trace itself records, or it
    /// cannot be explained here: why, in one sentence.
    Note(String),
}

impl std::fmt::Display for Explained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Explained::Why(why) => write!(f, "{why}"),
            Explained::Note(text) => writeln!(f, "    => {text}"),
        }
    }
}

/// Explains one execution's trace records, in their order.
pub(crate) struct TraceExplainer<'a> {
    definitions: &'a Definitions,
    /// The execution as each step started: its id, machine and branch, moved along.
    before: Execution,
    /// The machine version each record's step ran on.
    versions: Vec<Option<Version>>,
    next: usize,
}

impl<'a> TraceExplainer<'a> {
    /// For `exe`'s trace `records` (oldest first), on the machines of `definitions`.
    pub(crate) fn new(definitions: &'a Definitions, exe: &Execution, records: &[Map]) -> Self {
        let mut before = Execution::new(exe.id.clone(), exe.definition_id.clone());
        before.root_path = exe.root_path.clone();
        TraceExplainer {
            definitions,
            before,
            versions: versions_of(exe.definition_version, records),
            next: 0,
        }
    }

    /// The explanation of `record`, the next record of this trace.
    pub(crate) fn explain(&mut self, record: &Map) -> Explained {
        let version = self.versions.get(self.next).copied().flatten();
        self.next += 1;
        let explained = self.explain_from_before(record, version);
        // the next step starts where this one left the context
        if let Some(Value::Object(context)) = record.get("context_out") {
            self.before.context.clone_from(context);
        }
        explained
    }

    fn explain_from_before(&mut self, record: &Map, version: Option<Version>) -> Explained {
        let text = |key: &str| record.get(key).and_then(Value::as_str);
        if text("cause") == Some("control") {
            return Explained::Note(format!(
                "a control command ({}): no event, no transition selected",
                text("event_kind").unwrap_or("?")
            ));
        }
        if let Some(why) = text("ignored") {
            return Explained::Note(format!("the step ran nothing: {why}"));
        }
        let id = &self.before.definition_id;
        let defn = match version {
            Some(v) => self.definitions.get_version(id, v),
            None => self.definitions.get(id),
        };
        let Some(defn) = defn else {
            let at = version.map_or_else(String::new, |v| format!(" at version {v}"));
            return Explained::Note(format!(
                "not explained: the machine {id}{at} is not among the definitions \
                 (pass --definitions DIR, the folder of .stm files the deployment runs, \
                 with its versions/)"
            ));
        };
        let kind = text("event_kind").unwrap_or("?");
        let data = match record.get("event_data") {
            Some(Value::Object(data)) => data.clone(),
            _ => Map::new(),
        };
        self.before.active_path = text("from_path").map(str::to_string);
        self.before.status = if self.before.active_path.is_some() {
            Status::Running
        } else {
            Status::Pending
        };
        Explained::Why(engine::explain(defn, &self.before, &Event::with_data(kind, data)))
    }
}

/// The version each record's step ran on: `current` (the execution's pin now), and before
/// each `migrate` step the version it migrated from (`None`: unpinned, the current one).
fn versions_of(current: Option<Version>, records: &[Map]) -> Vec<Option<Version>> {
    let mut versions = vec![None; records.len()];
    let mut version = current;
    for (at, record) in records.iter().enumerate().rev() {
        versions[at] = version;
        let is_migrate = record.get("cause").and_then(Value::as_str) == Some("control")
            && record.get("event_kind").and_then(Value::as_str) == Some("migrate");
        if is_migrate {
            version = record
                .get("event_data")
                .and_then(|d| d.get("from_version"))
                .and_then(Value::as_str)
                .and_then(|v| v.parse().ok());
        }
    }
    versions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::map;
    use serde_json::json;

    const SHOP: &str = r#"
event Pay { amount: int }
machine Shop {
  context { limit: int = 10 }
  initial Open
  state Open {}
  final Big success
  final Small success
  from Open to Big on Pay where event.amount > context.limit
  from Open to Small on Pay
}
"#;

    fn definitions() -> Definitions {
        let mut definitions = Definitions::new();
        definitions.register(stm_core::dsl::load_definition_str(SHOP, None, None).expect("loads"));
        definitions
    }

    #[test]
    fn each_step_is_explained_from_the_previous_steps_context() {
        let definitions = definitions();
        let exe = Execution::new("s-1", "Shop");
        let records = [
            map(
                json!({"index": 0, "event_kind": "Start", "event_data": {}, "from_path": null,
                "to_path": "Open", "context_out": {"limit": 100}}),
            ),
            map(
                json!({"index": 1, "event_kind": "Pay", "event_data": {"amount": 50},
                "from_path": "Open", "to_path": "Small", "context_out": {"limit": 100}}),
            ),
        ];
        let mut explainer = TraceExplainer::new(&definitions, &exe, &records);
        let start = explainer.explain(&records[0]).to_string();
        assert!(start.contains("Start starts"), "{start}");
        // 50 > 100 is false with the context the start left, so Small is taken
        let pay = explainer.explain(&records[1]).to_string();
        assert!(
            pay.contains("[amount > context.limit: false]: guard false"),
            "{pay}"
        );
        assert!(pay.contains("2. Open -> Small on Pay [no guard]: taken"), "{pay}");
    }

    #[test]
    fn control_steps_ignored_steps_and_unknown_machines_say_so() {
        let definitions = definitions();
        let records = [
            map(json!({"cause": "control", "event_kind": "redrive", "from_path": "Open"})),
            map(json!({"event_kind": "Timeout", "from_path": "Open", "ignored": "a stale Timeout"})),
        ];
        let mut explainer = TraceExplainer::new(&definitions, &Execution::new("s-1", "Shop"), &records);
        assert!(explainer
            .explain(&records[0])
            .to_string()
            .contains("control command (redrive)"));
        assert!(explainer
            .explain(&records[1])
            .to_string()
            .contains("ran nothing: a stale Timeout"));
        let mut other = TraceExplainer::new(&definitions, &Execution::new("x-1", "Other"), &records[1..]);
        let note = other.explain(&map(json!({"event_kind": "Pay", "from_path": "Open"})));
        assert!(note
            .to_string()
            .contains("the machine Other is not among the definitions"));
    }

    #[test]
    fn steps_before_a_migrate_ran_on_the_version_it_migrated_from() {
        let (old, new): (Version, Version) = (
            "00000000000000aa".parse().expect("v"),
            "00000000000000bb".parse().expect("v"),
        );
        let records = [
            map(json!({"event_kind": "Pay"})),
            map(json!({"cause": "control", "event_kind": "migrate",
                "event_data": {"from_version": old.to_string(), "to_version": new.to_string()}})),
            map(json!({"event_kind": "Pay"})),
        ];
        assert_eq!(
            versions_of(Some(new), &records),
            [Some(old), Some(new), Some(new)]
        );
    }
}
