//! Machine-wide checks of how executions end: teardown (`Cancel` / `Expired`)
//! transitions must land on a terminal that ends the execution, an automatic `choose`
//! must not hang, `ttl` must be usable, and every terminal must declare its outcome.

use std::collections::HashSet;

use super::reads::{choice_targets, has_kind, kinds, srepr};
use super::Validator;
use crate::definition::{NodeId, NodeKind};

impl Validator<'_> {
    /// Why reaching `target` would NOT end `root`'s execution in that same step.
    fn why_not_ending(&self, target: NodeId, root: NodeId) -> Option<String> {
        if self.execution_root_of(target) != root {
            return Some("it is not part of this execution".into());
        }
        if !self.is_terminal(target) {
            return Some("it has its own outgoing transitions".into());
        }
        self.catching_ancestor(target, root).map(|c| {
            format!(
                "the enclosing {} has its own transition and the execution would go on",
                srepr(self.defn.path(c))
            )
        })
    }

    pub(super) fn check_cancel_targets(&mut self) {
        for id in self.order.clone() {
            for t in &self.defn.node(id).transitions {
                let Some(ef) = &t.event_filter else { continue };
                let teardown: Vec<&str> = kinds(ef).filter(|k| teardown_remedy(k).is_some()).collect();
                if teardown.is_empty() {
                    continue;
                }
                let mut targets: Vec<NodeId> = t.target.into_iter().collect();
                if let Some(sel) = &t.selector {
                    for name in sel.mapper.values().chain(sel.default.iter()) {
                        if let Some(n) = self.resolve(id, name) {
                            targets.push(n);
                        }
                    }
                }
                targets.extend(choice_targets(t));
                let root = self.execution_root_of(id);
                for kind in teardown {
                    let Some((code, remedy)) = teardown_remedy(kind) else {
                        continue;
                    };
                    for &target in &targets {
                        if let Some(why) = self.why_not_ending(target, root) {
                            self.error(
                                code,
                                id,
                                t.pos.as_ref(),
                                format!(
                                    "`on {kind}` must resolve directly to a terminal that ends the execution, got \
                                     {}: {why} — {remedy}",
                                    srepr(self.defn.path(target))
                                ),
                            );
                        }
                    }
                }
            }
        }
    }

    /// Whether the execution can get past `source` other than through its automatic
    /// transitions (an event transition from it or an enclosing state of the same
    /// execution, or an `on activity` hook).
    fn can_rerun(&self, source: NodeId) -> bool {
        if self.node(source).on_activity.is_some() {
            return true;
        }
        let root = self.execution_root_of(source);
        let mut cur = Some(source);
        while let Some(n) = cur {
            // (unfiltered, as harel: a scope's own transitions count whatever their source)
            for t in self.all_transitions_from(n) {
                if let Some(ef) = &t.event_filter {
                    if kinds(ef).any(|k| teardown_remedy(k).is_none()) {
                        return true;
                    }
                }
            }
            if n == root {
                break;
            }
            cur = self.node(n).parent;
        }
        false
    }

    pub(super) fn check_choose_can_hang(&mut self) {
        for id in self.order.clone() {
            for t in &self.defn.node(id).transitions {
                let Some(choice) = &t.choice else { continue };
                if t.event_filter.is_some() || choice.default.is_some() {
                    continue;
                }
                if !self.can_rerun(t.source) {
                    self.error(
                        "choose_can_hang",
                        t.source,
                        t.pos.as_ref(),
                        "an automatic `choose` without `else` can never be re-evaluated here (no event transition, \
                         no `on activity`): if no branch holds, the execution waits forever — add an `else`"
                            .into(),
                    );
                }
            }
        }
    }

    pub(super) fn check_ttl(&mut self) {
        let root = self.defn.root;
        match self.defn.ttl {
            Some(0) => self.error(
                "ttl_not_positive",
                root,
                None,
                "`ttl` must be positive, got 0".into(),
            ),
            Some(_) => {}
            None => {
                for id in self.order.clone() {
                    for t in &self.defn.node(id).transitions {
                        if t.event_filter.as_ref().is_some_and(|ef| has_kind(ef, "Expired")) {
                            self.warning(
                                "expired_without_ttl",
                                id,
                                t.pos.as_ref(),
                                "`on Expired` never fires: the machine declares no `ttl`".into(),
                            );
                        }
                    }
                }
            }
        }
    }

    /// The leaf sinks in `root`'s subtree that end its execution (their bubble reaches
    /// `root` uncaught); nested orthogonal regions are their own roots.
    fn execution_terminals(&self, root: NodeId, out: &mut Vec<NodeId>) {
        self.walk_terminals(root, root, out);
    }

    fn walk_terminals(&self, id: NodeId, root: NodeId, out: &mut Vec<NodeId>) {
        let node = self.node(id);
        if node.children.is_empty() {
            if self.is_terminal(id) && self.catching_ancestor(id, root).is_none() {
                out.push(id);
            }
            return;
        }
        if node.kind == NodeKind::Orthogonal {
            return;
        }
        for &c in &node.children {
            self.walk_terminals(c, root, out);
        }
    }

    pub(super) fn check_terminal_outcomes(&mut self) {
        let mut roots = vec![self.defn.root];
        for &id in &self.order {
            let node = self.node(id);
            if node.kind == NodeKind::Orthogonal {
                roots.extend(node.children.iter().copied());
            }
        }
        let mut seen = HashSet::new();
        for root in roots {
            let mut terms = Vec::new();
            self.execution_terminals(root, &mut terms);
            for term in terms {
                if !seen.insert(term) {
                    continue;
                }
                if self.node(term).outcome.is_none() {
                    self.error(
                        "terminal_missing_outcome",
                        term,
                        None,
                        "terminal of the machine/region must declare an `outcome` (e.g. success / failed) — the \
                         verdict the model routes on"
                            .into(),
                    );
                }
            }
        }
    }
}

/// The teardown events whose transition must land directly on a terminal: code and
/// remedy.
fn teardown_remedy(kind: &str) -> Option<(&'static str, &'static str)> {
    match kind {
        "Cancel" => Some((
            "cancel_target_not_terminal",
            "model multi-step or async cancellation as an ordinary domain event instead (e.g. `CancelOrder`), \
             not the reserved `Cancel`",
        )),
        "Expired" => Some((
            "expired_target_not_terminal",
            "an expired execution ends in that same step; a longer wind-down belongs in ordinary transitions \
             before the `ttl` runs out",
        )),
        _ => None,
    }
}
