//! The per-node checks, run on each node in harel's order: selectors, the initial
//! state, timeouts, outcomes, `with` and `invoke`.

use super::reads::{has_kind, list_repr, seconds_repr, srepr};
use super::{Validator, MAX_TIMEOUT_SECONDS};
use crate::definition::{NodeId, NodeKind, Timeout};
use crate::pyvalue;

impl Validator<'_> {
    pub(super) fn check_selectors(&mut self, id: NodeId) {
        let node = self.node(id);
        for t in &node.transitions {
            let Some(sel) = &t.selector else { continue };
            let pos = t.pos.as_ref();
            if sel.mapper.is_empty() {
                self.error(
                    "selector_malformed",
                    id,
                    pos,
                    "selector needs an action and a non-empty mapper".into(),
                );
                continue;
            }
            let mut targets: Vec<(&str, &str)> =
                sel.mapper.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            if let Some(d) = &sel.default {
                targets.push(("else", d.as_str()));
            }
            for (result, target) in targets {
                if self.resolve(id, target).is_none() {
                    self.error(
                        "selector_target_unresolved",
                        id,
                        pos,
                        format!(
                            "selector branch {} -> {} does not resolve from this scope",
                            srepr(result),
                            srepr(target)
                        ),
                    );
                }
            }
            if let Some(values) = &sel.enum_values {
                // harel keeps the declared results as `str(value)`
                let declared: Vec<String> = values.iter().map(pyvalue::py_str).collect();
                let phantom: Vec<String> = sel
                    .mapper
                    .keys()
                    .filter(|k| !declared.contains(k))
                    .cloned()
                    .collect();
                if !phantom.is_empty() {
                    self.error(
                        "selector_phantom_branch",
                        id,
                        pos,
                        format!(
                            "selector branches {} are not in the declared result set {}",
                            list_repr(&phantom),
                            list_repr(&declared)
                        ),
                    );
                }
                let uncovered: Vec<String> = declared
                    .iter()
                    .filter(|v| !sel.mapper.contains_key(v.as_str()))
                    .cloned()
                    .collect();
                if !uncovered.is_empty() && sel.default.is_none() {
                    self.error(
                        "selector_non_exhaustive",
                        id,
                        pos,
                        format!(
                            "selector does not cover {} and has no `else`",
                            list_repr(&uncovered)
                        ),
                    );
                }
            }
        }
    }

    pub(super) fn check_initial(&mut self, id: NodeId) {
        let node = self.node(id);
        if node.children.is_empty() || node.kind == NodeKind::Orthogonal {
            return;
        }
        match &node.start_state {
            None => self.error(
                "missing_initial",
                id,
                None,
                "composite has children but no initial state".into(),
            ),
            Some(start) if self.defn.child(id, start).is_none() => self.error(
                "initial_unresolved",
                id,
                None,
                format!("initial state {} is not a child of this composite", srepr(start)),
            ),
            Some(_) => {}
        }
    }

    /// Whether a `Timeout` for `id` is handled: a `Timeout` transition whose source is
    /// `id` or an ancestor, owned by that source's parent scope (as harel looks).
    fn has_timeout_handler(&self, id: NodeId) -> bool {
        let mut cur = id;
        while let Some(parent) = self.node(cur).parent {
            let handled = self.node(parent).transitions.iter().any(|t| {
                t.source == cur && t.event_filter.as_ref().is_some_and(|ef| has_kind(ef, "Timeout"))
            });
            if handled {
                return true;
            }
            cur = parent;
        }
        false
    }

    pub(super) fn check_timeout(&mut self, id: NodeId) {
        let node = self.node(id);
        let Some(timeout) = &node.timeout else { return };
        match timeout {
            Timeout::ContextKey(key) => {
                if key.is_empty() {
                    self.error(
                        "timeout_malformed",
                        id,
                        None,
                        "dynamic timeout must be {context: <key>}".into(),
                    );
                }
            }
            Timeout::Seconds(s) => {
                let s = *s;
                if !(s.is_finite() && s.fract() == 0.0 && s > 0.0) {
                    self.error(
                        "timeout_invalid",
                        id,
                        None,
                        format!("timeout must be a positive int, got {}", seconds_repr(s)),
                    );
                } else if s > MAX_TIMEOUT_SECONDS as f64 {
                    // not harel's: see the module docs and `MAX_TIMEOUT_SECONDS`
                    self.error(
                        "timeout_too_large",
                        id,
                        None,
                        format!(
                            "timeout must be at most {MAX_TIMEOUT_SECONDS} seconds (2**53 - 1, \
                             the longest a timer's fire_at holds exactly and DynamoDB can store), \
                             got {}",
                            // the whole number the float holds, short of an exponent's length
                            if s < 1e21 {
                                format!("{s:.0}")
                            } else {
                                pyvalue::float_repr(s)
                            }
                        ),
                    );
                }
            }
        }
        if !self.has_timeout_handler(id) {
            self.warning(
                "timeout_unhandled",
                id,
                None,
                "timeout is armed but no `on: Timeout` transition handles it (guaranteed no-op on fire)"
                    .into(),
            );
        }
    }

    pub(super) fn check_outcome(&mut self, id: NodeId) {
        let node = self.node(id);
        if node.outcome.is_none() {
            return;
        }
        if !node.children.is_empty() {
            self.warning(
                "outcome_on_composite",
                id,
                None,
                "outcome on a non-terminal composite".into(),
            );
        } else if self.has_outgoing(id) {
            self.warning(
                "outcome_on_nonterminal",
                id,
                None,
                "outcome on a state with outgoing transitions".into(),
            );
        }
    }

    pub(super) fn check_with(&mut self, id: NodeId) {
        let node = self.node(id);
        if !node.invoke_with.is_empty() && node.invoke.is_none() && node.kind != NodeKind::Orthogonal {
            self.warning(
                "with_without_children",
                id,
                None,
                "`with` has no effect here: it passes context to an `invoke` or to an orthogonal node's regions"
                    .into(),
            );
        }
    }

    pub(super) fn check_invoke(&mut self, id: NodeId) {
        let node = self.node(id);
        if node.invoke.is_none() {
            return;
        }
        if !node.children.is_empty() {
            self.error(
                "invoke_on_composite",
                id,
                None,
                "an `invoke` state must be a leaf".into(),
            );
        }
        if node.invoke_each.is_none() && self.transitions_from(id).iter().any(|t| t.is_automatic()) {
            self.error(
                "invoke_automatic_exit",
                id,
                None,
                "a single `invoke` state must not have an automatic outgoing transition (it would fire before \
                 the submachine returns); use `on Returned`"
                    .into(),
            );
        }
    }
}
