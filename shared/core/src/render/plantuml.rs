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
use super::walk::{Edge, Scope};
use crate::definition::{ActionRef, Assign, Definition, EventFilter, Node, NodeKind};

const INDENT: &str = "  ";

/// `defn` as PlantUML state-diagram lines (no `@startuml` and no trailing newline,
/// as harel writes it).
pub fn plantuml(defn: &Definition) -> String {
    emit(Scope::root(defn), 0, "").join("\n")
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

/// The lines `edge` draws from `source`.
fn emit_edge(source: &Node, edge: &Edge, pad: &str, out: &mut Vec<String>) {
    let src = address(source);
    match edge {
        Edge::To {
            target,
            filter,
            assignments,
        } => out.push(format!(
            "{pad}{src} --> {}{}",
            address(target),
            label(*filter, assignments)
        )),
        Edge::Choose {
            filter,
            assignments,
            branches,
            default,
        } => {
            // without the name's spaces, unlike harel: see the module's doc
            let node = sibling(source, &format!("{}_choose", source.name.replace(' ', "")));
            out.push(format!("{pad}state {node}<<choice>>"));
            out.push(format!("{pad}{src} --> {node}{}", label(*filter, assignments)));
            for branch in branches {
                out.push(format!(
                    "{pad}{node} --> {}: [{}]{}",
                    address(branch.target),
                    predicate_label(branch.guard),
                    branch_effect(branch.assignments)
                ));
            }
            if let Some((target, assigns)) = default {
                out.push(format!(
                    "{pad}{node} --> {}: else{}",
                    address(target),
                    branch_effect(assigns)
                ));
            }
        }
        // no `else` branch, as harel draws it (see the module's doc)
        Edge::Select {
            filter,
            function,
            values,
            default: _,
        } => {
            let f = short_name(function);
            let choice = sibling(source, f);
            out.push(format!("{pad}state {choice}<<choice>>"));
            out.push(format!("{pad}{src} --> {choice}{}", label(*filter, &[])));
            for (value, target) in values {
                out.push(format!("{pad}{choice} --> {}: {f}={value}", address(target)));
            }
        }
    }
}

fn emit_transitions(scope: Scope, pad: &str, out: &mut Vec<String>) {
    for child in scope.children() {
        if child.is_sink() {
            // no way out of this child in its scope: a sink, drawn once
            let line = format!("{pad}{} --> [*]", address(child.node));
            if !out.contains(&line) {
                out.push(line);
            }
            continue;
        }
        for edge in child.edges() {
            emit_edge(child.node, &edge, pad, out);
        }
    }
}

/// The lines of `scope`'s body; `end_line` follows each composite child's block.
fn emit(scope: Scope, indent: usize, end_line: &str) -> Vec<String> {
    let pad = INDENT.repeat(indent);
    let mut out = Vec::new();
    for child in scope.children() {
        let node = child.node;
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
    for child in scope.children() {
        let node = child.node;
        if node.is_composite() {
            let child_end = if node.kind == NodeKind::Orthogonal {
                "||"
            } else {
                ""
            };
            let body = emit(child.scope(), indent + 1, child_end);
            out.push(format!("{pad}{} {{", declare(node)));
            out.extend(body);
            out.push(format!("{pad}}}"));
            out.push(format!("{pad}{end_line}"));
        }
    }
    if let Some(start) = scope.initial() {
        out.push(format!("{pad}[*] --> {}", address(start)));
    }
    if scope.has_transitions() {
        emit_transitions(scope, &pad, &mut out);
    } else {
        // meant to drop the separator after the last region; harel drops whatever is last
        out.pop();
    }
    out
}
