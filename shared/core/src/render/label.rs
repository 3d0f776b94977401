//! The text both diagrams write for a transition's parts, as harel 0.9.0's
//! `viz/_guards.py` writes it: guards, `set` effects, literals, event kinds and action
//! names. The renderers only differ in how they join these into a label.

use crate::definition::{Assign, EventFilter, Expr, Predicate, Source};
use crate::pyvalue;
use crate::Value;

/// The last segment of a dotted handler path (`billing.charge` -> `charge`).
pub(super) fn short_name(function: &str) -> &str {
    function.rsplit('.').next().unwrap_or(function)
}

/// A literal as written in the DSL: `true`, `'text'`, `[1, 'a']`, `1.5`.
fn value_text(v: &Value) -> String {
    match v {
        Value::Bool(b) => if *b { "true" } else { "false" }.to_string(),
        Value::String(s) => format!("'{s}'"),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(value_text).collect::<Vec<_>>().join(", ")
        ),
        other => pyvalue::py_str(other),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Combinator {
    All,
    Any,
    Not,
}

/// `pred` as text. An `and` inside an `or` is parenthesized although `and` binds
/// tighter: `a and b or c` is right but easy to misread (harel's rule).
fn predicate_text(pred: &Predicate, parent: Option<Combinator>) -> String {
    let (node, children) = match pred {
        Predicate::Leaf {
            source,
            field,
            op,
            value,
            value_ref,
        } => {
            let left = match source {
                Source::Event => field.clone(),
                Source::Context => format!("context.{field}"),
            };
            let right = match value_ref {
                Some((rs, rf)) => format!("{}.{rf}", rs.as_str()),
                None => value_text(value),
            };
            return format!("{left} {} {right}", op.symbol());
        }
        Predicate::Not(child) => return format!("not {}", predicate_text(child, Some(Combinator::Not))),
        Predicate::All(children) => (Combinator::All, children),
        Predicate::Any(children) => (Combinator::Any, children),
    };
    let joiner = if node == Combinator::All { " and " } else { " or " };
    let body = children
        .iter()
        .map(|c| predicate_text(c, Some(node)))
        .collect::<Vec<_>>()
        .join(joiner);
    let needs_parens = parent == Some(Combinator::Not) || parent.is_some_and(|p| p != node);
    if needs_parens {
        format!("({body})")
    } else {
        body
    }
}

/// A guard as the diagrams write it (`amount > 0 and context.open == true`).
pub(crate) fn predicate_label(pred: &Predicate) -> String {
    predicate_text(pred, None)
}

/// The guard of an event filter, if it has one.
pub(super) fn guard_text(ef: &EventFilter) -> Option<String> {
    ef.predicate.as_ref().map(predicate_label)
}

fn expr_text(expr: &Expr) -> String {
    match expr {
        Expr::Ref { source, field } => format!("{}.{field}", source.as_str()),
        Expr::Lit(v) => value_text(v),
        Expr::Arith { op, left, right } => {
            format!("{} {} {}", expr_text(left), op.symbol(), expr_text(right))
        }
    }
}

/// `set` assignments as the diagrams write them (`context.total = event.amount`).
pub(crate) fn effect_text(assignments: &[Assign]) -> Option<String> {
    if assignments.is_empty() {
        return None;
    }
    Some(
        assignments
            .iter()
            .map(|a| format!("context.{} = {}", a.field, expr_text(&a.expr)))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// The event kinds a filter matches, as harel stores them (`A|B`).
pub(super) fn kind_text(ef: &EventFilter) -> String {
    ef.kinds.join("|")
}
