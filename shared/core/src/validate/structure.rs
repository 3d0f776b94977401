//! Structural queries the checks share (harel's `_all_transitions_from` and friends):
//! a state's transitions, sinks, the root of the execution a state runs in, and name
//! resolution from a scope.

use super::Validator;
use crate::definition::{NodeId, NodeKind, Transition};

impl<'a> Validator<'a> {
    /// harel's `_all_transitions_from`: every transition `id` owns as a scope (whatever
    /// its source), then those of its ancestor scopes whose source is `id`.
    pub(super) fn all_transitions_from(&self, id: NodeId) -> impl Iterator<Item = &'a Transition> + 'a {
        let defn = self.defn;
        defn.node(id)
            .transitions
            .iter()
            .chain(defn.ancestors(id).flat_map(move |scope| {
                defn.node(scope)
                    .transitions
                    .iter()
                    .filter(move |t| t.source == id)
            }))
    }

    /// Transitions whose source is `id`, gathered from `id` and its ancestor scopes.
    pub(super) fn transitions_from(&self, id: NodeId) -> Vec<&'a Transition> {
        self.all_transitions_from(id).filter(|t| t.source == id).collect()
    }

    pub(super) fn has_outgoing(&self, id: NodeId) -> bool {
        !self.transitions_from(id).is_empty()
    }

    /// A sink: a leaf (not an `invoke`) with no outgoing transition.
    pub(super) fn is_terminal(&self, id: NodeId) -> bool {
        let n = self.node(id);
        n.children.is_empty() && n.invoke.is_none() && !self.has_outgoing(id)
    }

    /// The node whose subtree runs as `id`'s execution: the nearest ancestor-or-self
    /// that is an orthogonal region, else the machine root.
    pub(super) fn execution_root_of(&self, id: NodeId) -> NodeId {
        let mut cur = id;
        while let Some(parent) = self.node(cur).parent {
            if self.node(parent).kind == NodeKind::Orthogonal {
                return cur;
            }
            cur = parent;
        }
        cur
    }

    /// The first ancestor of `leaf` below `root` with an outgoing transition of its own.
    pub(super) fn catching_ancestor(&self, leaf: NodeId, root: NodeId) -> Option<NodeId> {
        let mut anc = self.node(leaf).parent;
        while let Some(a) = anc {
            if a == root {
                break;
            }
            if self.has_outgoing(a) {
                return Some(a);
            }
            anc = self.node(a).parent;
        }
        None
    }

    pub(super) fn resolve(&self, scope: NodeId, name: &str) -> Option<NodeId> {
        self.defn.resolve_relative(scope, name)
    }
}
