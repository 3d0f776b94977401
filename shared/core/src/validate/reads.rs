//! What a definition's parts read and write (event kinds, guard leaves and their
//! operands, assignments, choice targets), and harel's spelling of values and ops in
//! its messages.

use crate::definition::{
    Assign, CmpOp, Definition, EventFilter, Expr, FieldType, NodeId, Predicate, Source, Transition,
};
use crate::pyvalue;
use crate::Value;

/// harel's names of the comparison ops (as its messages print them).
fn op_name(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Eq => "eq",
        CmpOp::Ne => "ne",
        CmpOp::Lt => "lt",
        CmpOp::Le => "le",
        CmpOp::Gt => "gt",
        CmpOp::Ge => "ge",
        CmpOp::In => "in",
    }
}

pub(super) fn is_numeric_op(op: &str) -> bool {
    matches!(op, "lt" | "le" | "gt" | "ge")
}

pub(super) fn is_unordered(ty: FieldType) -> bool {
    matches!(ty, FieldType::String | FieldType::Bool)
}

/// Python `repr(str)`.
pub(super) fn srepr(s: &str) -> String {
    pyvalue::repr(&Value::String(s.to_string()))
}

/// Python `repr(list_of_str)`.
pub(super) fn list_repr(items: &[String]) -> String {
    pyvalue::repr(&Value::Array(items.iter().cloned().map(Value::String).collect()))
}

/// The kinds an event filter accepts (`A | B`), trimmed.
pub(super) fn kinds(ef: &EventFilter) -> impl Iterator<Item = &str> {
    ef.kinds.iter().flat_map(|k| k.split('|')).map(str::trim)
}

pub(super) fn has_kind(ef: &EventFilter, kind: &str) -> bool {
    kinds(ef).any(|k| k == kind)
}

/// The nodes in harel's `index` order: depth-first, parents before children, children
/// in declaration order.
pub(super) fn preorder(defn: &Definition) -> Vec<NodeId> {
    let mut out = Vec::with_capacity(defn.nodes.len());
    let mut stack = vec![defn.root];
    while let Some(id) = stack.pop() {
        out.push(id);
        stack.extend(defn.node(id).children.iter().rev().copied());
    }
    out
}

/// The leaves of a predicate tree, left to right.
fn tree_leaves<'a>(pred: &'a Predicate, out: &mut Vec<&'a Predicate>) {
    match pred {
        Predicate::Leaf { .. } => out.push(pred),
        Predicate::All(children) | Predicate::Any(children) => {
            for c in children {
                tree_leaves(c, out);
            }
        }
        Predicate::Not(child) => tree_leaves(child, out),
    }
}

pub(super) fn leaves_of(pred: Option<&Predicate>) -> Vec<&Predicate> {
    let mut out = Vec::new();
    if let Some(p) = pred {
        tree_leaves(p, &mut out);
    }
    out
}

/// The (namespace, field) pairs a leaf reads: its left side and, when it compares with a
/// reference, its right side.
pub(super) fn operands(leaf: &Predicate) -> Vec<(Source, &str)> {
    let mut out = Vec::new();
    if let Predicate::Leaf {
        source,
        field,
        value_ref,
        ..
    } = leaf
    {
        if !field.is_empty() {
            out.push((*source, field.as_str()));
        }
        if let Some((rs, rf)) = value_ref {
            if !rf.is_empty() {
                out.push((*rs, rf.as_str()));
            }
        }
    }
    out
}

pub(super) fn leaf_op(leaf: &Predicate) -> &'static str {
    match leaf {
        Predicate::Leaf { op, .. } => op_name(*op),
        _ => "eq",
    }
}

/// The leaves of a `choose`'s branch guards.
pub(super) fn choice_leaves(t: &Transition) -> Vec<&Predicate> {
    let mut out = Vec::new();
    if let Some(choice) = &t.choice {
        for (guard, _) in &choice.branches {
            tree_leaves(guard, &mut out);
        }
    }
    out
}

/// Every guard leaf of a transition: its `where`, then each `when` of a `choose`.
pub(super) fn guard_leaves(t: &Transition) -> Vec<&Predicate> {
    let mut out = leaves_of(t.event_filter.as_ref().and_then(|ef| ef.predicate.as_ref()));
    out.extend(choice_leaves(t));
    out
}

/// The `ref` nodes of an assignment's right-hand side, left to right.
pub(super) fn expr_refs(expr: &Expr, out: &mut Vec<(Source, String)>) {
    match expr {
        Expr::Ref { source, field } => out.push((*source, field.clone())),
        Expr::Lit(_) => {}
        Expr::Arith { left, right, .. } => {
            expr_refs(left, out);
            expr_refs(right, out);
        }
    }
}

/// Every `set` a transition can apply: its own, then each `choose` branch's, then the
/// `else`'s.
pub(super) fn all_assignments(t: &Transition) -> Vec<&Assign> {
    let mut out: Vec<_> = t.assignments.iter().collect();
    if let Some(choice) = &t.choice {
        out.extend(choice.branch_assignments.iter().flatten());
        out.extend(choice.default_assignments.iter());
    }
    out
}

/// harel's `_literal_type`.
pub(super) fn literal_type(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "bool",
        Value::Number(n) if crate::pynum::is_float_text(n.as_str()) => "float",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        _ => "list",
    }
}

/// A timeout literal as Python would print the value the DSL produced.
pub(super) fn seconds_repr(s: f64) -> String {
    if s.is_finite() && s.fract() == 0.0 && s.abs() < 1e15 {
        format!("{}", s as i64)
    } else {
        pyvalue::float_repr(s)
    }
}

pub(super) fn choice_targets(t: &Transition) -> Vec<NodeId> {
    match &t.choice {
        None => Vec::new(),
        Some(c) => c.branches.iter().map(|(_, n)| *n).chain(c.default).collect(),
    }
}
