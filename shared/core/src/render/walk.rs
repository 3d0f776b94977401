//! The walk of a chart every drawing of it shares: scope by scope, the children in
//! declaration order, the initial child, and each transition as the edge it draws (to a
//! state, through a `choose`, through a `select`) with its targets resolved. The two
//! diagrams lay the same walk out each in its own order, and [`arrows`](super::arrows)
//! lists its edges, so what a diagram shows of a transition is decided here once.
//!
//! A transition belongs to the composite that is its scope and leaves one of that
//! scope's children (its `source`); a `select`'s targets are names resolved relative to
//! the scope, and one that does not resolve is left out (where harel would fail an
//! assertion).

use crate::definition::{Assign, Definition, EventFilter, Node, NodeId, Predicate, Transition};

/// A node as the scope of its children and of the transitions that leave them.
#[derive(Clone, Copy)]
pub(super) struct Scope<'d> {
    defn: &'d Definition,
    id: NodeId,
    /// The node itself.
    pub node: &'d Node,
}

/// A child of a [`Scope`], with the transitions that leave it there.
#[derive(Clone, Copy)]
pub(super) struct Child<'d> {
    parent: Scope<'d>,
    id: NodeId,
    /// The child itself.
    pub node: &'d Node,
}

/// What one transition draws.
pub(super) enum Edge<'d> {
    /// Straight to its target.
    To {
        target: &'d Node,
        filter: Option<&'d EventFilter>,
        assignments: &'d [Assign],
    },
    /// To a choice point, then one branch per guard in order and the `else`.
    Choose {
        filter: Option<&'d EventFilter>,
        assignments: &'d [Assign],
        branches: Vec<Branch<'d>>,
        /// The `else` target and its own `set`.
        default: Option<(&'d Node, &'d [Assign])>,
    },
    /// To a choice point named after the selector's function, then one branch per
    /// result value whose target resolves, and the `else` if it resolves. Neither
    /// diagram draws its transition's `set`, as harel's do not.
    Select {
        filter: Option<&'d EventFilter>,
        /// The selector's function as bound (a dotted path or a bare name).
        function: &'d str,
        values: Vec<(&'d str, &'d Node)>,
        default: Option<&'d Node>,
    },
}

/// One guarded branch of a `choose`.
pub(super) struct Branch<'d> {
    pub guard: &'d Predicate,
    pub target: &'d Node,
    /// The branch's own `set`.
    pub assignments: &'d [Assign],
}

impl<'d> Scope<'d> {
    /// The machine's root.
    pub(super) fn root(defn: &'d Definition) -> Self {
        Scope::at(defn, defn.root)
    }

    /// Node `id` as a scope (a leaf is one with nothing in it).
    pub(super) fn at(defn: &'d Definition, id: NodeId) -> Self {
        Scope {
            defn,
            id,
            node: defn.node(id),
        }
    }

    /// Its children, in declaration order.
    pub(super) fn children(self) -> impl Iterator<Item = Child<'d>> {
        self.node.children.iter().map(move |&id| Child {
            parent: self,
            id,
            node: self.defn.node(id),
        })
    }

    /// The initial child, if its name resolves.
    pub(super) fn initial(self) -> Option<&'d Node> {
        let start = self.node.start_state.as_deref()?;
        self.defn.child(self.id, start).map(|id| self.defn.node(id))
    }

    /// Whether any transition has this scope.
    pub(super) fn has_transitions(self) -> bool {
        !self.node.transitions.is_empty()
    }

    /// Its transitions in declaration order, each with its source.
    pub(super) fn edges(self) -> impl Iterator<Item = (&'d Node, Edge<'d>)> {
        self.node
            .transitions
            .iter()
            .filter_map(move |t| Some((self.defn.node(t.source), self.edge(t)?)))
    }

    /// What `t` draws: a target, else a selector, else a choice (a transition has
    /// exactly one).
    fn edge(self, t: &'d Transition) -> Option<Edge<'d>> {
        let defn = self.defn;
        let filter = t.event_filter.as_ref();
        if let Some(target) = t.target {
            return Some(Edge::To {
                target: defn.node(target),
                filter,
                assignments: &t.assignments,
            });
        }
        if let Some(selector) = &t.selector {
            let resolve = |name: &str| defn.resolve_relative(self.id, name).map(|id| defn.node(id));
            return Some(Edge::Select {
                filter,
                function: &selector.action.function,
                values: selector
                    .mapper
                    .iter()
                    .filter_map(|(value, name)| Some((value.as_str(), resolve(name)?)))
                    .collect(),
                default: selector.default.as_deref().and_then(resolve),
            });
        }
        let choice = t.choice.as_ref()?;
        Some(Edge::Choose {
            filter,
            assignments: &t.assignments,
            branches: choice
                .branches
                .iter()
                .enumerate()
                .map(|(i, (guard, target))| Branch {
                    guard,
                    target: defn.node(*target),
                    assignments: choice.branch_assignments.get(i).map(Vec::as_slice).unwrap_or(&[]),
                })
                .collect(),
            default: choice
                .default
                .map(|target| (defn.node(target), choice.default_assignments.as_slice())),
        })
    }
}

impl<'d> Child<'d> {
    /// The child as the scope of its own children.
    pub(super) fn scope(self) -> Scope<'d> {
        Scope::at(self.parent.defn, self.id)
    }

    /// The edges of the transitions leaving it in its parent's scope, in declaration
    /// order.
    pub(super) fn edges(self) -> impl Iterator<Item = Edge<'d>> {
        let id = self.id;
        self.parent
            .node
            .transitions
            .iter()
            .filter(move |t| t.source == id)
            .filter_map(move |t| self.parent.edge(t))
    }

    /// No transition leaves it in its parent's scope: a sink, drawn to the final
    /// pseudostate.
    pub(super) fn is_sink(self) -> bool {
        !self.parent.node.transitions.iter().any(|t| t.source == self.id)
    }
}
