//! Rendering a [`Definition`] as a Mermaid `stateDiagram-v2`, the
//! same text harel 0.9.0's `viz/mermaid.py` produces.
//!
//! Mermaid constraints that shape the output:
//! - a composite (group) node carries only a label, so its hooks / timeout are folded
//!   into its title with `<br/>`; only leaves get `id : description` lines;
//! - an orthogonal state's regions are nested composites split by `--`;
//! - node ids must be identifier-safe, so `full_path` is sanitized to an id and the
//!   name is shown with `state "Name" as id`;
//! - a `:` inside a description or an edge label is written `#58;`.
//!
//! As in harel, a transition is drawn in its scope only when its source is a direct
//! child of that scope, and a leaf with no such transition gets a `--> [*]` edge.
//! Where harel would fail an assertion (an unresolved initial or selector target) the
//! line is left out instead.

use super::label::{effect_text, guard_text, kind_text, predicate_label, short_name};
use super::walk::{Edge, Scope};
use crate::definition::{ActionRef, Assign, Definition, EventFilter, Node, NodeKind, Timeout};
use crate::pyvalue;

const INDENT: &str = "  ";

/// `defn` as a Mermaid `stateDiagram-v2` (no trailing newline).
pub fn mermaid(defn: &Definition) -> String {
    let mut out = vec!["stateDiagram-v2".to_string()];
    emit_body(Scope::root(defn), 0, &mut out);
    out.join("\n")
}

/// An identifier-safe Mermaid id from a node's `full_path`.
fn nid(node: &Node) -> String {
    node.full_path
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn fmt_timeout(t: &Timeout) -> String {
    match t {
        Timeout::ContextKey(key) => format!("context {key}"),
        Timeout::Seconds(s) if s.is_finite() && s.fract() == 0.0 && s.abs() < 1e15 => {
            format!("{}", *s as i64)
        }
        Timeout::Seconds(s) => pyvalue::float_repr(*s),
    }
}

/// A label safe after a ` : ` separator (`:` is a Mermaid syntax error there).
fn text(label: &str) -> String {
    label.replace(':', "#58;")
}

/// The description lines of a node: hooks, timeout, outcome, invoke.
fn desc_parts(node: &Node) -> Vec<String> {
    let mut parts = Vec::new();
    let hooks: [(&Option<ActionRef>, &str); 3] = [
        (&node.on_enter, "on enter"),
        (&node.on_activity, "on activity"),
        (&node.on_exit, "on exit"),
    ];
    for (action, label) in hooks {
        if let Some(a) = action {
            parts.push(format!("{label}: {}", short_name(&a.function)));
        }
    }
    if let Some(t) = &node.timeout {
        parts.push(format!("timeout: {}", fmt_timeout(t)));
    }
    if let Some(outcome) = node.outcome.as_deref().filter(|o| !o.is_empty()) {
        parts.push(format!("outcome: {outcome}"));
    }
    if let Some(invoke) = node.invoke.as_deref().filter(|i| !i.is_empty()) {
        parts.push(format!("invoke: {invoke}"));
    }
    if let Some((var, coll)) = &node.invoke_each {
        parts.push(format!("invoke each: {var} in {coll}"));
    }
    parts
}

/// The edge label from an event filter: `Event<br/>[guard]`.
fn filter_text(ef: &EventFilter) -> String {
    match guard_text(ef) {
        Some(guard) => format!("{}<br/>[{guard}]", kind_text(ef)),
        None => kind_text(ef),
    }
}

/// ` : Event<br/>[guard]<br/>/ effect`, the UML `event [guard] / effect` label.
fn edge_suffix(ef: Option<&EventFilter>, assignments: &[Assign]) -> String {
    let parts: Vec<String> = [ef.map(filter_text), effect_text(assignments)]
        .into_iter()
        .flatten()
        .map(|p| text(&p))
        .collect();
    match parts.as_slice() {
        [a, b] => format!(" : {a}<br/>/ {b}"),
        [a] if ef.is_none() => format!(" : / {a}"),
        [a] => format!(" : {a}"),
        _ => String::new(),
    }
}

fn branch_effect(assignments: &[Assign]) -> String {
    effect_text(assignments)
        .map(|e| format!("<br/>/ {}", text(&e)))
        .unwrap_or_default()
}

/// The lines `edge` draws from `source`.
fn emit_edge(source: &Node, edge: &Edge, pad: &str, out: &mut Vec<String>) {
    let src = nid(source);
    match edge {
        Edge::To {
            target,
            filter,
            assignments,
        } => out.push(format!(
            "{pad}{src} --> {}{}",
            nid(target),
            edge_suffix(*filter, assignments)
        )),
        Edge::Choose {
            filter,
            assignments,
            branches,
            default,
        } => {
            let node = format!("{src}__choose");
            out.push(format!("{pad}state {node} <<choice>>"));
            out.push(format!(
                "{pad}{src} --> {node}{}",
                edge_suffix(*filter, assignments)
            ));
            for branch in branches {
                out.push(format!(
                    "{pad}{node} --> {} : [{}]{}",
                    nid(branch.target),
                    text(&predicate_label(branch.guard)),
                    branch_effect(branch.assignments)
                ));
            }
            if let Some((target, assigns)) = default {
                out.push(format!(
                    "{pad}{node} --> {} : else{}",
                    nid(target),
                    branch_effect(assigns)
                ));
            }
        }
        Edge::Select {
            filter,
            function,
            values,
            default,
        } => {
            let f = short_name(function);
            let choice = format!("{src}__{f}");
            out.push(format!("{pad}state {choice} <<choice>>"));
            out.push(format!("{pad}{src} --> {choice}{}", edge_suffix(*filter, &[])));
            for (value, target) in values {
                out.push(format!("{pad}{choice} --> {} : {f}={}", nid(target), text(value)));
            }
            if let Some(target) = default {
                out.push(format!("{pad}{choice} --> {} : else", nid(target)));
            }
        }
    }
}

fn emit_transitions(scope: Scope, pad: &str, out: &mut Vec<String>) {
    for child in scope.children() {
        for edge in child.edges() {
            emit_edge(child.node, &edge, pad, out);
        }
    }
}

fn emit_leaf(node: &Node, pad: &str, out: &mut Vec<String>) {
    let id = nid(node);
    if node.name != id {
        out.push(format!("{pad}state \"{}\" as {id}", node.name));
    }
    for part in desc_parts(node) {
        out.push(format!("{pad}{id} : {}", text(&part)));
    }
}

fn composite_title(node: &Node) -> String {
    let parts = desc_parts(node);
    if parts.is_empty() {
        node.name.clone()
    } else {
        format!("{}<br/>{}", node.name, parts.join("<br/>"))
    }
}

fn emit_composite(scope: Scope, indent: usize, out: &mut Vec<String>) {
    let node = scope.node;
    let pad = INDENT.repeat(indent);
    let node_id = nid(node);
    let title = composite_title(node);
    if title == node_id {
        out.push(format!("{pad}state {node_id} {{"));
    } else {
        out.push(format!("{pad}state \"{title}\" as {node_id} {{"));
    }
    if node.kind == NodeKind::Orthogonal {
        for (i, region) in scope.children().enumerate() {
            if i > 0 {
                out.push(format!("{}--", INDENT.repeat(indent + 1)));
            }
            emit_composite(region.scope(), indent + 1, out);
        }
    } else {
        emit_body(scope, indent + 1, out);
    }
    out.push(format!("{pad}}}"));
}

fn emit_body(scope: Scope, indent: usize, out: &mut Vec<String>) {
    let pad = INDENT.repeat(indent);
    if let Some(start) = scope.initial() {
        out.push(format!("{pad}[*] --> {}", nid(start)));
    }
    for child in scope.children() {
        if child.node.is_composite() {
            emit_composite(child.scope(), indent, out);
        } else {
            emit_leaf(child.node, &pad, out);
        }
    }
    emit_transitions(scope, &pad, out);
    // a leaf with no outgoing transition in this scope is a sink: the final pseudostate
    for child in scope.children() {
        if !child.node.is_composite() && child.is_sink() {
            let line = format!("{pad}{} --> [*]", nid(child.node));
            if !out.contains(&line) {
                out.push(line);
            }
        }
    }
}
