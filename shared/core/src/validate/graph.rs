//! Machine-wide checks on the transition graph: non-deterministic automatic
//! transitions and states unreachable from the root.

use std::collections::HashSet;

use super::reads::choice_targets;
use super::Validator;
use crate::definition::{NodeId, NodeKind};

impl Validator<'_> {
    pub(super) fn check_nondeterminism(&mut self) {
        let mut by_source: Vec<(NodeId, usize)> = Vec::new();
        for &id in &self.order {
            for t in &self.defn.node(id).transitions {
                if t.is_automatic() {
                    match by_source.iter_mut().find(|(s, _)| *s == t.source) {
                        Some(entry) => entry.1 += 1,
                        None => by_source.push((t.source, 1)),
                    }
                }
            }
        }
        for (src, count) in by_source {
            if count > 1 {
                self.error(
                    "nondeterministic_automatic",
                    src,
                    None,
                    format!(
                        "{count} automatic (eventless) transitions leave this state; the drain is ambiguous"
                    ),
                );
            }
        }
    }

    /// Nodes reachable from the root by initial descent and transition / selector /
    /// choice targets (a scope's transitions count once the scope is reached).
    fn reachable(&self) -> HashSet<NodeId> {
        let defn = self.defn;
        let mut seen = HashSet::new();
        let mut work = Vec::new();
        let visit = |n: NodeId, seen: &mut HashSet<NodeId>, work: &mut Vec<NodeId>| {
            if seen.insert(n) {
                work.push(n);
            }
        };
        visit(defn.root, &mut seen, &mut work);
        while let Some(id) = work.pop() {
            let node = defn.node(id);
            if !node.children.is_empty() {
                if node.kind == NodeKind::Orthogonal {
                    for &c in &node.children {
                        visit(c, &mut seen, &mut work);
                    }
                } else if let Some(start) = node.start_state.as_deref().and_then(|s| defn.child(id, s)) {
                    visit(start, &mut seen, &mut work);
                }
            }
            for t in &node.transitions {
                if let Some(target) = t.target {
                    visit(target, &mut seen, &mut work);
                }
                if let Some(sel) = &t.selector {
                    for name in sel.mapper.values().chain(sel.default.iter()) {
                        if let Some(target) = defn.resolve_relative(id, name) {
                            visit(target, &mut seen, &mut work);
                        }
                    }
                }
                for target in choice_targets(t) {
                    visit(target, &mut seen, &mut work);
                }
            }
        }
        seen
    }

    pub(super) fn check_reachability(&mut self) {
        let reachable = self.reachable();
        for id in self.order.clone() {
            if !reachable.contains(&id) {
                self.warning(
                    "unreachable",
                    id,
                    None,
                    "state is not reachable from the root".into(),
                );
            }
        }
    }
}
