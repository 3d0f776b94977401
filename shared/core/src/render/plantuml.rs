//! Rendering a [`Definition`] as PlantUML state-diagram lines, the same text harel
//! 0.9.0's `viz/plantuml.py` produces (`stm render`'s default format).
//!
//! The layout of one scope, in order:
//! 1. each child's hooks, as `state Name: <b>on_enter</b>: <i>fn</i>`;
//! 2. each composite child's block `state Name { .. }`, followed by the scope's
//!    separator line: `||` between the regions of an orthogonal state, an indented
//!    empty line elsewhere;
//! 3. the initial edge `[*] --> Start`;
//! 4. the transitions whose source is a direct child, and `Child --> [*]` for each
//!    child (leaf or composite) with none. A scope without transitions instead drops
//!    its last line (meant for the trailing `||`, whatever that line is).
//!
//! A node is addressed by its `full_path` without spaces, and shown by its name with
//! `state "Name" as Address` when the two differ. Labels are UML's
//! `event [guard] / effect`, parts split by a literal `\n` (PlantUML's line break).
//!
//! Followed as harel writes it although it looks unintended, since the output must be
//! harel's byte for byte and PlantUML still accepts it:
//! - the line after a composite's block outside an orthogonal state is an empty line
//!   carrying only the indentation;
//! - a `select`'s `else` branch and its transition's `set` are not drawn;
//! - timeouts, outcomes and invocations are not drawn;
//! - a name with characters PlantUML does not take in an unquoted name (`-`, say) goes
//!   into the address as it is, so such a diagram does not draw: that is harel's
//!   addressing itself, kept so that every other diagram stays harel's.
//!
//! One deliberate difference: harel names the choice pseudostate of a `choose` from the
//! source's name with its spaces (`A.My State_choose`), which PlantUML rejects (an
//! unquoted name cannot hold a space) and which disagrees with harel's own addresses,
//! all without spaces. Ours drops them too (`A.MyState_choose`); without a space in the
//! name the two agree.
//!
//! Where harel would fail an assertion (an unresolved initial or selector target) the
//! line is left out instead.

use super::label::{effect_text, guard_text, kind_text, predicate_label, short_name};
use crate::definition::{ActionRef, Assign, Definition, EventFilter, Node, NodeId, NodeKind, Transition};

const INDENT: &str = "  ";

/// `defn` as PlantUML state-diagram lines (no `@startuml` and no trailing newline,
/// as harel writes it).
pub fn plantuml(defn: &Definition) -> String {
    emit(defn, defn.root, 0, "").join("\n")
}

/// A node's address: its `full_path` without spaces.
fn address(node: &Node) -> String {
    node.full_path.replace(' ', "")
}

/// `state Name` or `state "Name" as Address`, the head of a node's declaration.
fn declare(node: &Node) -> String {
    let addr = address(node);
    if node.name == addr {
        format!("state {addr}")
    } else {
        format!("state \"{}\" as {addr}", node.name)
    }
}

/// A pseudostate beside `source`: its parent's address then `leaf`.
fn sibling(source: &Node, leaf: &str) -> String {
    let addr = address(source);
    match addr.rsplit_once('.') {
        Some((parent, _)) => format!("{parent}.{leaf}"),
        None => leaf.to_string(),
    }
}

/// `: Event\n[guard]\n/ effect`, the edge label (empty for a bare automatic edge).
fn label(ef: Option<&EventFilter>, assignments: &[Assign]) -> String {
    let effect = effect_text(assignments);
    let Some(ef) = ef else {
        return effect.map(|e| format!(": / {e}")).unwrap_or_default();
    };
    let head = match guard_text(ef) {
        Some(guard) => format!(": {}\\n[{guard}]", kind_text(ef)),
        None => format!(": {}", kind_text(ef)),
    };
    match effect {
        Some(e) => format!("{head}\\n/ {e}"),
        None => head,
    }
}

/// A `choose` branch's own `set`, appended to its edge label.
fn branch_effect(assignments: &[Assign]) -> String {
    effect_text(assignments)
        .map(|e| format!("\\n/ {e}"))
        .unwrap_or_default()
}

fn emit_choice(defn: &Definition, source: &Node, t: &Transition, pad: &str, out: &mut Vec<String>) {
    let Some(choice) = &t.choice else { return };
    let src = address(source);
    // without the name's spaces, unlike harel: see the module's doc
    let node = sibling(source, &format!("{}_choose", source.name.replace(' ', "")));
    out.push(format!("{pad}state {node}<<choice>>"));
    out.push(format!(
        "{pad}{src} --> {node}{}",
        label(t.event_filter.as_ref(), &t.assignments)
    ));
    for (i, (guard, target)) in choice.branches.iter().enumerate() {
        let assigns = choice.branch_assignments.get(i).map(Vec::as_slice).unwrap_or(&[]);
        out.push(format!(
            "{pad}{node} --> {}: [{}]{}",
            address(defn.node(*target)),
            predicate_label(guard),
            branch_effect(assigns)
        ));
    }
    if let Some(default) = choice.default {
        out.push(format!(
            "{pad}{node} --> {}: else{}",
            address(defn.node(default)),
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
    let choice = sibling(source, f);
    out.push(format!("{pad}state {choice}<<choice>>"));
    out.push(format!(
        "{pad}{} --> {choice}{}",
        address(source),
        label(t.event_filter.as_ref(), &[])
    ));
    for (value, target_name) in &selector.mapper {
        if let Some(target) = defn.resolve_relative(comp, target_name) {
            out.push(format!(
                "{pad}{choice} --> {}: {f}={value}",
                address(defn.node(target))
            ));
        }
    }
}

fn emit_transitions(defn: &Definition, comp: NodeId, pad: &str, out: &mut Vec<String>) {
    let scope = defn.node(comp);
    for &child in &scope.children {
        let child_node = defn.node(child);
        let mut outgoing = scope.transitions.iter().filter(|t| t.source == child).peekable();
        if outgoing.peek().is_none() {
            // no way out of this child in its scope: a sink, drawn once
            let line = format!("{pad}{} --> [*]", address(child_node));
            if !out.contains(&line) {
                out.push(line);
            }
            continue;
        }
        for t in outgoing {
            if let Some(target) = t.target {
                out.push(format!(
                    "{pad}{} --> {}{}",
                    address(child_node),
                    address(defn.node(target)),
                    label(t.event_filter.as_ref(), &t.assignments)
                ));
            } else if t.selector.is_some() {
                emit_selector(defn, comp, child_node, t, pad, out);
            } else if t.choice.is_some() {
                emit_choice(defn, child_node, t, pad, out);
            }
        }
    }
}

/// The lines of scope `comp`'s body; `end_line` follows each composite child's block.
fn emit(defn: &Definition, comp: NodeId, indent: usize, end_line: &str) -> Vec<String> {
    let pad = INDENT.repeat(indent);
    let scope = defn.node(comp);
    let mut out = Vec::new();
    for &child in &scope.children {
        let node = defn.node(child);
        let hooks: [(&Option<ActionRef>, &str); 3] = [
            (&node.on_enter, "on_enter"),
            (&node.on_activity, "on_activity"),
            (&node.on_exit, "on_exit"),
        ];
        for (action, hook) in hooks {
            if let Some(a) = action {
                out.push(format!(
                    "{pad}{}: <b>{hook}</b>: <i>{}</i>",
                    declare(node),
                    short_name(&a.function)
                ));
            }
        }
    }
    for &child in &scope.children {
        let node = defn.node(child);
        if node.is_composite() {
            let child_end = if node.kind == NodeKind::Orthogonal {
                "||"
            } else {
                ""
            };
            let body = emit(defn, child, indent + 1, child_end);
            out.push(format!("{pad}{} {{", declare(node)));
            out.extend(body);
            out.push(format!("{pad}}}"));
            out.push(format!("{pad}{end_line}"));
        }
    }
    if let Some(start) = scope.start_state.as_deref().and_then(|s| defn.child(comp, s)) {
        out.push(format!("{pad}[*] --> {}", address(defn.node(start))));
    }
    if !scope.transitions.is_empty() {
        emit_transitions(defn, comp, &pad, &mut out);
    } else {
        // meant to drop the separator after the last region; harel drops whatever is last
        out.pop();
    }
    out
}
