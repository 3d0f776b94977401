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
use crate::definition::{
    ActionRef, Assign, Definition, EventFilter, Node, NodeId, NodeKind, Timeout, Transition,
};
use crate::pyvalue;

const INDENT: &str = "  ";

/// `defn` as a Mermaid `stateDiagram-v2` (no trailing newline).
pub fn mermaid(defn: &Definition) -> String {
    let mut out = vec!["stateDiagram-v2".to_string()];
    emit_body(defn, defn.root, 0, &mut out);
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

fn emit_choice(defn: &Definition, source: &Node, t: &Transition, pad: &str, out: &mut Vec<String>) {
    let Some(choice) = &t.choice else { return };
    let src = nid(source);
    let node = format!("{src}__choose");
    out.push(format!("{pad}state {node} <<choice>>"));
    out.push(format!(
        "{pad}{src} --> {node}{}",
        edge_suffix(t.event_filter.as_ref(), &t.assignments)
    ));
    for (i, (guard, target)) in choice.branches.iter().enumerate() {
        let assigns = choice.branch_assignments.get(i).map(Vec::as_slice).unwrap_or(&[]);
        out.push(format!(
            "{pad}{node} --> {} : [{}]{}",
            nid(defn.node(*target)),
            text(&predicate_label(guard)),
            branch_effect(assigns)
        ));
    }
    if let Some(default) = choice.default {
        out.push(format!(
            "{pad}{node} --> {} : else{}",
            nid(defn.node(default)),
            branch_effect(&choice.default_assignments)
        ));
    }
}

fn emit_selector(
    defn: &Definition,
    comp: NodeId,
    source: &Node,
    t: &Transition,
    pad: &str,
    out: &mut Vec<String>,
) {
    let Some(selector) = &t.selector else { return };
    let f = short_name(&selector.action.function);
    let src = nid(source);
    let choice = format!("{src}__{f}");
    out.push(format!("{pad}state {choice} <<choice>>"));
    out.push(format!(
        "{pad}{src} --> {choice}{}",
        edge_suffix(t.event_filter.as_ref(), &[])
    ));
    for (value, target_name) in &selector.mapper {
        if let Some(target) = defn.resolve_relative(comp, target_name) {
            out.push(format!(
                "{pad}{choice} --> {} : {f}={}",
                nid(defn.node(target)),
                text(value)
            ));
        }
    }
    if let Some(default) = &selector.default {
        if let Some(target) = defn.resolve_relative(comp, default) {
            out.push(format!("{pad}{choice} --> {} : else", nid(defn.node(target))));
        }
    }
}

fn emit_transitions(defn: &Definition, comp: NodeId, pad: &str, out: &mut Vec<String>) {
    let scope = defn.node(comp);
    for &child in &scope.children {
        let child_node = defn.node(child);
        for t in scope.transitions.iter().filter(|t| t.source == child) {
            if let Some(target) = t.target {
                out.push(format!(
                    "{pad}{} --> {}{}",
                    nid(child_node),
                    nid(defn.node(target)),
                    edge_suffix(t.event_filter.as_ref(), &t.assignments)
                ));
            } else if t.selector.is_some() {
                emit_selector(defn, comp, child_node, t, pad, out);
            } else if t.choice.is_some() {
                emit_choice(defn, child_node, t, pad, out);
            }
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

fn emit_composite(defn: &Definition, id: NodeId, indent: usize, out: &mut Vec<String>) {
    let node = defn.node(id);
    let pad = INDENT.repeat(indent);
    let node_id = nid(node);
    let title = composite_title(node);
    if title == node_id {
        out.push(format!("{pad}state {node_id} {{"));
    } else {
        out.push(format!("{pad}state \"{title}\" as {node_id} {{"));
    }
    if node.kind == NodeKind::Orthogonal {
        for (i, &region) in node.children.iter().enumerate() {
            if i > 0 {
                out.push(format!("{}--", INDENT.repeat(indent + 1)));
            }
            emit_composite(defn, region, indent + 1, out);
        }
    } else {
        emit_body(defn, id, indent + 1, out);
    }
    out.push(format!("{pad}}}"));
}

fn emit_body(defn: &Definition, comp: NodeId, indent: usize, out: &mut Vec<String>) {
    let pad = INDENT.repeat(indent);
    let scope = defn.node(comp);
    if let Some(start) = scope.start_state.as_deref().and_then(|s| defn.child(comp, s)) {
        out.push(format!("{pad}[*] --> {}", nid(defn.node(start))));
    }
    for &child in &scope.children {
        let node = defn.node(child);
        if node.is_composite() {
            emit_composite(defn, child, indent, out);
        } else {
            emit_leaf(node, &pad, out);
        }
    }
    emit_transitions(defn, comp, &pad, out);
    // a leaf with no outgoing transition in this scope is a sink: the final pseudostate
    for &child in &scope.children {
        let node = defn.node(child);
        if !node.is_composite() && !scope.transitions.iter().any(|t| t.source == child) {
            let line = format!("{pad}{} --> [*]", nid(node));
            if !out.contains(&line) {
                out.push(line);
            }
        }
    }
}
