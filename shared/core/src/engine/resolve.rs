//! Transition resolution: which transition of the active configuration an event, an
//! automatic step or a timeout takes (innermost scope first), and the static test that
//! a teardown event lands directly on a sink.

use super::guard::event_matches;
use super::Step;
use crate::definition::{Definition, NodeId, NodeKind, Transition};
use crate::execution::{Event, Execution};

/// A matched transition: its scope and its index in the scope's transitions.
pub(super) type Found = (NodeId, usize);

pub(super) fn transition(defn: &Definition, found: Found) -> &Transition {
    &defn.node(found.0).transitions[found.1]
}

/// Innermost-first resolution over `rel` (the chain from a child of `scope` down to
/// the active node). Deeper levels always fall back to their parent scope; the top
/// level does so only when `allow_parent`, which reproduces harel's asymmetry for
/// automatic transitions.
fn nested(
    defn: &Definition,
    scope: NodeId,
    rel: &[NodeId],
    pred: &dyn Fn(&Transition) -> bool,
    allow_parent: bool,
) -> Option<Found> {
    let head = rel[0];
    if rel.len() > 1 {
        if let Some(deeper) = nested(defn, head, &rel[1..], pred, true) {
            return Some(deeper);
        }
        if !allow_parent {
            return None;
        }
    }
    defn.node(scope)
        .transitions
        .iter()
        .position(|t| t.source == head && pred(t))
        .map(|i| (scope, i))
}

fn resolve_between(
    defn: &Definition,
    root: NodeId,
    active: NodeId,
    pred: &dyn Fn(&Transition) -> bool,
    allow_parent: bool,
) -> Option<Found> {
    if active == root {
        return None;
    }
    // the chain root..=active, built on the stack: resolution runs several times per
    // step and machines are shallow, so this keeps the hot path allocation-free
    let mut stack = [root; SHALLOW];
    let mut depth = 0;
    let mut cur = active;
    while cur != root && depth < SHALLOW {
        stack[depth] = cur;
        depth += 1;
        cur = defn.node(cur).parent?;
    }
    if cur == root {
        stack[..depth].reverse();
        return nested(defn, root, &stack[..depth], pred, allow_parent);
    }
    let chain = defn.chain(root, active)?; // deeper than SHALLOW: rare, allocate
    nested(defn, root, &chain[1..], pred, allow_parent)
}

/// Nesting depth resolved without allocating.
pub(super) const SHALLOW: usize = 32;

pub(super) fn resolve(
    defn: &Definition,
    exe: &Execution,
    pred: &dyn Fn(&Transition) -> bool,
    allow_parent: bool,
) -> Option<Found> {
    let root = defn.get(&exe.root_path)?;
    let active = defn.get(exe.active_path.as_deref()?)?;
    resolve_between(defn, root, active, pred, allow_parent)
}

/// A `Timeout`'s transition: anchored at the state that timed out and bubbling up
/// through its ancestors, so a composite's budget isn't shadowed by an inner state.
///
/// It stops at the execution's root, as every other event's resolution does: a region
/// never takes a transition of the machine around it. (harel's bubbling goes past a
/// region's root and then raises `ValueError: ... is not an ancestor of ...`, leaving
/// the region with an active path outside itself; we leave the timeout unhandled.)
pub(super) fn resolve_at(
    defn: &Definition,
    root: NodeId,
    path: &str,
    pred: &dyn Fn(&Transition) -> bool,
) -> Option<Found> {
    let mut cur = defn.get(path)?;
    while let Some(scope) = defn.node(cur).parent.filter(|_| cur != root) {
        if let Some(i) = defn
            .node(scope)
            .transitions
            .iter()
            .position(|t| t.source == cur && pred(t))
        {
            return Some((scope, i));
        }
        cur = scope;
    }
    None
}

fn would_be_a_sink(defn: &Definition, exe: &Execution, target: NodeId) -> bool {
    let node = defn.node(target);
    if !node.children.is_empty() || node.invoke.is_some() {
        return false;
    }
    let Some(root) = defn.get(&exe.root_path) else {
        return false;
    };
    if !defn.is_descendant(target, root) {
        return false;
    }
    let mut cur = target;
    while cur != root {
        if cur != target && defn.node(cur).kind == NodeKind::Orthogonal {
            return false;
        }
        if resolve_between(defn, root, cur, &|_| true, false).is_some() {
            return false;
        }
        match defn.node(cur).parent {
            Some(p) => cur = p,
            None => return false,
        }
    }
    true
}

/// The transition a teardown event (`Cancel`, `Expired`) would take, if it lands
/// directly on a sink (every branch of a selector or choice, checked statically).
pub(super) fn safe_teardown(defn: &Definition, exe: &Execution, event: &Event) -> Option<Found> {
    exe.active_path.as_ref()?;
    let found = resolve(defn, exe, &|t| event_matches(t, event, &exe.context), true)?;
    let t = transition(defn, found);
    if let Some(target) = t.target {
        return would_be_a_sink(defn, exe, target).then_some(found);
    }
    if let Some(choice) = &t.choice {
        let all = choice.branches.iter().map(|(_, n)| *n).chain(choice.default);
        return all
            .into_iter()
            .all(|n| would_be_a_sink(defn, exe, n))
            .then_some(found);
    }
    if let Some(selector) = &t.selector {
        for name in selector.mapper.values().chain(selector.default.iter()) {
            match defn.resolve_relative(found.0, name) {
                Some(n) if would_be_a_sink(defn, exe, n) => {}
                _ => return None,
            }
        }
    }
    Some(found)
}

impl Step<'_> {
    /// [`resolve`] for this step's execution, on the nodes it already looked up.
    pub(super) fn resolve_here(
        &self,
        pred: &dyn Fn(&Transition) -> bool,
        allow_parent: bool,
    ) -> Option<Found> {
        let root = self.root().ok()?;
        let active = self.active().ok()?;
        resolve_between(self.defn, root, active, pred, allow_parent)
    }

    pub(super) fn resolve_event(&self, event: &Event) -> Option<Found> {
        let context = &self.exe.context;
        self.resolve_here(&|t| event_matches(t, event, context), true)
    }
}
