//! Guards and triggers: whether a transition's event filter and guard hold, where a
//! `choose` goes, and the assignments a transition applies.

use crate::definition::{Assign, CmpOp, EventFilter, NodeId, Predicate, Source, Transition};
use crate::execution::Event;
use crate::pyvalue::{py_cmp, py_contains, py_eq};
use crate::{Map, Value};

fn compare(op: CmpOp, actual: &Value, expected: &Value) -> bool {
    use std::cmp::Ordering::*;
    match op {
        CmpOp::Eq => py_eq(actual, expected),
        CmpOp::Ne => !py_eq(actual, expected),
        CmpOp::Lt => py_cmp(actual, expected) == Some(Less),
        CmpOp::Le => matches!(py_cmp(actual, expected), Some(Less | Equal)),
        CmpOp::Gt => py_cmp(actual, expected) == Some(Greater),
        CmpOp::Ge => matches!(py_cmp(actual, expected), Some(Greater | Equal)),
        CmpOp::In => py_contains(expected, actual) == Some(true),
    }
}

pub(super) fn scope_of<'a>(source: Source, event_data: &'a Map, context: &'a Map) -> &'a Map {
    match source {
        Source::Event => event_data,
        Source::Context => context,
    }
}

/// Evaluate a guard. A leaf on a field absent from its namespace (on either side),
/// or whose values cannot be compared, does not hold.
pub fn eval_predicate(pred: &Predicate, event_data: &Map, context: &Map) -> bool {
    match pred {
        Predicate::Leaf {
            source,
            field,
            op,
            value,
            value_ref,
        } => {
            let Some(actual) = scope_of(*source, event_data, context).get(field) else {
                return false;
            };
            match value_ref {
                None => compare(*op, actual, value),
                Some((other_source, other_field)) => scope_of(*other_source, event_data, context)
                    .get(other_field)
                    .is_some_and(|other| compare(*op, actual, other)),
            }
        }
        Predicate::All(children) => children.iter().all(|c| eval_predicate(c, event_data, context)),
        Predicate::Any(children) => children.iter().any(|c| eval_predicate(c, event_data, context)),
        Predicate::Not(child) => !eval_predicate(child, event_data, context),
    }
}

fn filter_matches(filter: &EventFilter, event: &Event, context: &Map) -> bool {
    filter.kinds.iter().any(|k| k == &event.kind)
        && filter
            .predicate
            .as_ref()
            .is_none_or(|p| eval_predicate(p, &event.data, context))
}

fn choice_index(t: &Transition, event_data: &Map, context: &Map) -> Option<usize> {
    t.choice
        .as_ref()?
        .branches
        .iter()
        .position(|(guard, _)| eval_predicate(guard, event_data, context))
}

pub(super) fn choice_target(t: &Transition, event_data: &Map, context: &Map) -> Option<NodeId> {
    let choice = t.choice.as_ref()?;
    match choice_index(t, event_data, context) {
        Some(i) => Some(choice.branches[i].1),
        None => choice.default,
    }
}

fn choice_open(t: &Transition, event_data: &Map, context: &Map) -> bool {
    t.choice.is_none() || choice_target(t, event_data, context).is_some()
}

/// A transition triggered by `event` whose guard holds (and, for a `choose`, that has
/// somewhere to go).
pub(super) fn event_matches(t: &Transition, event: &Event, context: &Map) -> bool {
    t.event_filter
        .as_ref()
        .is_some_and(|f| filter_matches(f, event, context))
        && choice_open(t, &event.data, context)
}

pub(super) fn auto_matches(t: &Transition, context: &Map) -> bool {
    t.event_filter.is_none() && choice_open(t, &Map::new(), context)
}

/// A transition's assignments: its own `set`, then the `set` of the `choose` branch it
/// takes.
pub(super) fn assignments_of(t: &Transition, event: Option<&Event>, context: &Map) -> Vec<Assign> {
    let mut out = t.assignments.clone();
    if let Some(choice) = &t.choice {
        let empty = Map::new();
        let data = event.map_or(&empty, |e| &e.data);
        match choice_index(t, data, context) {
            None => out.extend(choice.default_assignments.iter().cloned()),
            Some(i) => {
                if let Some(branch) = choice.branch_assignments.get(i) {
                    out.extend(branch.iter().cloned());
                }
            }
        }
    }
    out
}
