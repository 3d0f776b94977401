//! Static checks on a [`Definition`], the rules of harel 0.9.0's
//! `definition/validate.py`.
//!
//! A pure pass over the immutable graph that catches the structural defects the builder
//! does not: unresolved selector targets, missing composite initials, non-deterministic
//! automatic transitions, unreachable states, references to undeclared events, event
//! fields and context fields, terminals without a verdict, teardown (`Cancel` /
//! `Expired`) transitions that don't end the execution, and the rest.
//!
//! Findings come in harel's order (per node in declaration order, then the
//! machine-wide passes) with harel's codes and message text; [`Finding`]'s `Display`
//! prints what `harel validate` prints, prefixed by `file:line:col: ` where known.
//! [`Finding::harel_text`] gives the bare harel line.
//!
//! Deliberate differences from harel:
//! - harel collects the event fields a transition reads in a Python `set`, so the order of
//!   several `unknown_event_field` findings for one transition varies from run to run
//!   there; here it is the order of first appearance.
//! - A literal timeout above [`MAX_TIMEOUT_SECONDS`] is an error (`timeout_too_large`).
//!   harel 0.9.0 accepts any positive int, and a timer's `fire_at` (now plus the timeout)
//!   is stored as a DynamoDB number: past 1E+126 every commit entering the state fails in
//!   DynamoDB (`ValidationException`) and is retried until the dead-letter queue. That is
//!   a harel bug, so the extra finding is on purpose.

use std::collections::HashSet;
use std::fmt;

use serde::Serialize;

use crate::definition::{
    Assign, CmpOp, Definition, EventFilter, Expr, FieldType, Node, NodeId, NodeKind, Pos, Predicate, Source,
    Timeout, Transition, RESERVED_EVENTS,
};
use crate::pyvalue;
use crate::Value;

/// The longest literal `timeout`, in seconds: 2^53 - 1 (about 285 million years).
///
/// A timer fires at `now + timeout`, both seconds as a float (a Python `float` in harel,
/// an `f64` here), and the store writes that `fire_at` as a DynamoDB number, spelled as
/// Python's `repr` of the float. 2^53 - 1 is the largest integer a float holds exactly, so
/// a longer literal would not even be the number of seconds written (`2^53 + 1` reads as
/// `2^53`); below it `fire_at` stays under 2^54, whose `repr` has at most 17 significant
/// digits and a magnitude far inside what DynamoDB holds (38 significant digits,
/// 1E-130 to below 1E+126), so every timer this accepts can be stored.
pub const MAX_TIMEOUT_SECONDS: u64 = (1 << 53) - 1;

/// How bad a [`Finding`] is: an error blocks running the machine, a warning does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One validation finding (harel's `Issue`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// harel's rule id (`unreachable`, `unknown_event`, ...).
    pub code: String,
    pub message: String,
    /// The `full_path` of the node the finding is about (`""` is the machine root).
    pub path: Option<String>,
    /// 1-based source position of the node or transition, when the definition has one.
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// The source file (the definition's `source_file`), when known.
    pub file: Option<String>,
    /// What to do about it beyond harel's message ("did you mean `Go`?"), when there is
    /// something to say; not part of [`harel_text`](Self::harel_text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Finding {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Exactly what harel's `str(issue)` prints: `[error] code at Path: message`.
    pub fn harel_text(&self) -> String {
        let at = match self.path.as_deref() {
            Some(p) if !p.is_empty() => p,
            _ => "<root>",
        };
        format!("[{}] {} at {}: {}", self.severity, self.code, at, self.message)
    }

    /// `file:line:col` (or the parts of it that are known), `None` if nothing is.
    pub fn location(&self) -> Option<String> {
        let pos = self.line.map(|l| match self.column {
            Some(c) => format!("{l}:{c}"),
            None => l.to_string(),
        });
        match (&self.file, pos) {
            (Some(f), Some(p)) => Some(format!("{f}:{p}")),
            (Some(f), None) => Some(f.clone()),
            (None, Some(p)) => Some(p),
            (None, None) => None,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(loc) = self.location() {
            write!(f, "{loc}: ")?;
        }
        f.write_str(&self.harel_text())?;
        if let Some(hint) = &self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

/// Whether any finding is an error.
pub fn has_errors(findings: &[Finding]) -> bool {
    findings.iter().any(Finding::is_error)
}

/// Every finding on `defn` (errors and warnings), in harel's order; empty when the
/// machine is well-formed. Inline submachines are not descended into (as in harel):
/// validate each of `defn.submachines` on its own if wanted.
pub fn validate(defn: &Definition) -> Vec<Finding> {
    let mut v = Validator {
        defn,
        order: preorder(defn),
        out: Vec::new(),
    };
    v.run();
    v.out
}

// --- helpers ---------------------------------------------------------------------

/// harel's names of the comparison ops (as its messages print them).
fn op_name(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Eq => "eq",
        CmpOp::Ne => "ne",
        CmpOp::Lt => "lt",
        CmpOp::Le => "le",
        CmpOp::Gt => "gt",
        CmpOp::Ge => "ge",
        CmpOp::In => "in",
    }
}

fn is_numeric_op(op: &str) -> bool {
    matches!(op, "lt" | "le" | "gt" | "ge")
}

fn is_unordered(ty: FieldType) -> bool {
    matches!(ty, FieldType::String | FieldType::Bool)
}

/// Python `repr(str)`.
fn srepr(s: &str) -> String {
    pyvalue::repr(&Value::String(s.to_string()))
}

/// Python `repr(list_of_str)`.
fn list_repr(items: &[String]) -> String {
    pyvalue::repr(&Value::Array(items.iter().cloned().map(Value::String).collect()))
}

/// The kinds an event filter accepts (`A | B`), trimmed.
fn kinds(ef: &EventFilter) -> impl Iterator<Item = &str> {
    ef.kinds.iter().flat_map(|k| k.split('|')).map(str::trim)
}

fn has_kind(ef: &EventFilter, kind: &str) -> bool {
    kinds(ef).any(|k| k == kind)
}

/// The nodes in harel's `index` order: depth-first, parents before children, children
/// in declaration order.
fn preorder(defn: &Definition) -> Vec<NodeId> {
    let mut out = Vec::with_capacity(defn.nodes.len());
    let mut stack = vec![defn.root];
    while let Some(id) = stack.pop() {
        out.push(id);
        stack.extend(defn.node(id).children.iter().rev().copied());
    }
    out
}

/// The leaves of a predicate tree, left to right.
fn tree_leaves<'a>(pred: &'a Predicate, out: &mut Vec<&'a Predicate>) {
    match pred {
        Predicate::Leaf { .. } => out.push(pred),
        Predicate::All(children) | Predicate::Any(children) => {
            for c in children {
                tree_leaves(c, out);
            }
        }
        Predicate::Not(child) => tree_leaves(child, out),
    }
}

fn leaves_of(pred: Option<&Predicate>) -> Vec<&Predicate> {
    let mut out = Vec::new();
    if let Some(p) = pred {
        tree_leaves(p, &mut out);
    }
    out
}

/// The (namespace, field) pairs a leaf reads: its left side and, when it compares with a
/// reference, its right side.
fn operands(leaf: &Predicate) -> Vec<(Source, &str)> {
    let mut out = Vec::new();
    if let Predicate::Leaf {
        source,
        field,
        value_ref,
        ..
    } = leaf
    {
        if !field.is_empty() {
            out.push((*source, field.as_str()));
        }
        if let Some((rs, rf)) = value_ref {
            if !rf.is_empty() {
                out.push((*rs, rf.as_str()));
            }
        }
    }
    out
}

fn leaf_op(leaf: &Predicate) -> &'static str {
    match leaf {
        Predicate::Leaf { op, .. } => op_name(*op),
        _ => "eq",
    }
}

/// The leaves of a `choose`'s branch guards.
fn choice_leaves(t: &Transition) -> Vec<&Predicate> {
    let mut out = Vec::new();
    if let Some(choice) = &t.choice {
        for (guard, _) in &choice.branches {
            tree_leaves(guard, &mut out);
        }
    }
    out
}

/// Every guard leaf of a transition: its `where`, then each `when` of a `choose`.
fn guard_leaves(t: &Transition) -> Vec<&Predicate> {
    let mut out = leaves_of(t.event_filter.as_ref().and_then(|ef| ef.predicate.as_ref()));
    out.extend(choice_leaves(t));
    out
}

/// The `ref` nodes of an assignment's right-hand side, left to right.
fn expr_refs(expr: &Expr, out: &mut Vec<(Source, String)>) {
    match expr {
        Expr::Ref { source, field } => out.push((*source, field.clone())),
        Expr::Lit(_) => {}
        Expr::Arith { left, right, .. } => {
            expr_refs(left, out);
            expr_refs(right, out);
        }
    }
}

/// Every `set` a transition can apply: its own, then each `choose` branch's, then the
/// `else`'s.
fn all_assignments(t: &Transition) -> Vec<&Assign> {
    let mut out: Vec<_> = t.assignments.iter().collect();
    if let Some(choice) = &t.choice {
        out.extend(choice.branch_assignments.iter().flatten());
        out.extend(choice.default_assignments.iter());
    }
    out
}

/// harel's `_literal_type`.
fn literal_type(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "bool",
        Value::Number(n) if crate::pynum::is_float_text(n.as_str()) => "float",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        _ => "list",
    }
}

/// A timeout literal as Python would print the value the DSL produced.
fn seconds_repr(s: f64) -> String {
    if s.is_finite() && s.fract() == 0.0 && s.abs() < 1e15 {
        format!("{}", s as i64)
    } else {
        pyvalue::float_repr(s)
    }
}

// --- the validator ---------------------------------------------------------------

struct Validator<'a> {
    defn: &'a Definition,
    order: Vec<NodeId>,
    out: Vec<Finding>,
}

impl<'a> Validator<'a> {
    fn node(&self, id: NodeId) -> &'a Node {
        self.defn.node(id)
    }

    fn push(&mut self, code: &str, severity: Severity, at: NodeId, pos_of: Option<&Pos>, message: String) {
        let node = self.defn.node(at);
        let pos = pos_of.or(node.pos.as_ref());
        self.out.push(Finding {
            severity,
            code: code.to_string(),
            message,
            path: Some(node.full_path.clone()),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            file: self.defn.source_file.clone(),
            hint: None,
        });
    }

    fn error(&mut self, code: &str, at: NodeId, pos: Option<&Pos>, message: String) {
        self.push(code, Severity::Error, at, pos, message);
    }

    fn warning(&mut self, code: &str, at: NodeId, pos: Option<&Pos>, message: String) {
        self.push(code, Severity::Warning, at, pos, message);
    }

    fn run(&mut self) {
        let order = self.order.clone();
        for &id in &order {
            self.check_selectors(id);
            self.check_initial(id);
            self.check_timeout(id);
            self.check_outcome(id);
            self.check_invoke(id);
            self.check_with(id);
        }
        self.check_nondeterminism();
        self.check_reachability();
        self.check_events();
        self.check_context_refs();
        self.check_context_defaults();
        self.check_cancel_targets();
        self.check_choose_can_hang();
        self.check_ttl();
        self.check_terminal_outcomes();
    }

    // --- structure helpers (harel's `_all_transitions_from` and friends) ---

    /// harel's `_all_transitions_from`: every transition `id` owns as a scope (whatever
    /// its source), then those of its ancestor scopes whose source is `id`.
    fn all_transitions_from(&self, id: NodeId) -> impl Iterator<Item = &'a Transition> + 'a {
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
    fn transitions_from(&self, id: NodeId) -> Vec<&'a Transition> {
        self.all_transitions_from(id).filter(|t| t.source == id).collect()
    }

    fn has_outgoing(&self, id: NodeId) -> bool {
        !self.transitions_from(id).is_empty()
    }

    /// A sink: a leaf (not an `invoke`) with no outgoing transition.
    fn is_terminal(&self, id: NodeId) -> bool {
        let n = self.node(id);
        n.children.is_empty() && n.invoke.is_none() && !self.has_outgoing(id)
    }

    /// The node whose subtree runs as `id`'s execution: the nearest ancestor-or-self
    /// that is an orthogonal region, else the machine root.
    fn execution_root_of(&self, id: NodeId) -> NodeId {
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
    fn catching_ancestor(&self, leaf: NodeId, root: NodeId) -> Option<NodeId> {
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

    fn resolve(&self, scope: NodeId, name: &str) -> Option<NodeId> {
        self.defn.resolve_relative(scope, name)
    }

    // --- per-node checks ---

    fn check_selectors(&mut self, id: NodeId) {
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

    fn check_initial(&mut self, id: NodeId) {
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

    fn check_timeout(&mut self, id: NodeId) {
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

    fn check_outcome(&mut self, id: NodeId) {
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

    fn check_with(&mut self, id: NodeId) {
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

    fn check_invoke(&mut self, id: NodeId) {
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

    // --- machine-wide checks ---

    fn check_nondeterminism(&mut self) {
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

    fn check_reachability(&mut self) {
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

    fn check_events(&mut self) {
        for id in self.order.clone() {
            for t in &self.defn.node(id).transitions {
                let Some(ef) = &t.event_filter else { continue };
                let mut extra: Vec<(String, &'static str)> = Vec::new();
                for leaf in choice_leaves(t) {
                    for (src, f) in operands(leaf) {
                        if src == Source::Event {
                            extra.push((f.to_string(), leaf_op(leaf)));
                        }
                    }
                }
                for a in all_assignments(t) {
                    let mut refs = Vec::new();
                    expr_refs(&a.expr, &mut refs);
                    for (src, f) in refs {
                        if src == Source::Event && !f.is_empty() {
                            extra.push((f, "eq"));
                        }
                    }
                }
                self.check_event(id, t, ef, extra);
            }
        }
    }

    fn check_event(
        &mut self,
        id: NodeId,
        t: &Transition,
        ef: &EventFilter,
        extra: Vec<(String, &'static str)>,
    ) {
        let pos = t.pos.as_ref();
        // (field, op) of every event read: the `where`, then the extras
        let mut leaves: Vec<(String, &'static str)> = Vec::new();
        for leaf in leaves_of(ef.predicate.as_ref()) {
            for (src, f) in operands(leaf) {
                if src == Source::Event {
                    leaves.push((f.to_string(), leaf_op(leaf)));
                }
            }
        }
        leaves.extend(extra);
        let mut fields: Vec<&str> = Vec::new();
        for (f, _) in &leaves {
            if !fields.contains(&f.as_str()) {
                fields.push(f);
            }
        }
        for (n, kind) in kinds(ef).enumerate() {
            if RESERVED_EVENTS.contains(&kind) {
                continue;
            }
            let Some(etype) = self.defn.events.get(kind) else {
                // pointed at the name itself where the parser saw it written
                let name_pos = t.event_pos.get(n).or(pos);
                self.error(
                    "unknown_event",
                    id,
                    name_pos,
                    format!("transition references undeclared event {}", srepr(kind)),
                );
                let declared = self.defn.events.keys().map(String::as_str);
                if let (Some(finding), Some(near)) =
                    (self.out.last_mut(), crate::suggest::nearest(kind, declared))
                {
                    finding.hint = Some(format!("did you mean `{near}`?"));
                }
                continue;
            };
            if etype.fields.is_empty() {
                continue; // declared but schemaless: no field checks
            }
            for f in &fields {
                if !etype.fields.contains_key(*f) {
                    self.error(
                        "unknown_event_field",
                        id,
                        pos,
                        format!("event {} has no field {}", srepr(kind), srepr(f)),
                    );
                }
            }
            for (f, op) in &leaves {
                if let Some(spec) = etype.fields.get(f) {
                    if is_numeric_op(op) && is_unordered(spec.ty) {
                        self.warning(
                            "op_type_mismatch",
                            id,
                            pos,
                            format!(
                                "op {} on {} ({}) compares a non-ordered field",
                                srepr(op),
                                srepr(f),
                                spec.ty.as_str()
                            ),
                        );
                    }
                }
            }
        }
    }

    fn check_context_ref(&mut self, id: NodeId, pos: Option<&Pos>, field: &str, op: &str) {
        let schema = &self.defn.context_schema;
        if schema.is_empty() {
            return;
        }
        match schema.get(field) {
            None => self.error(
                "unknown_context_field",
                id,
                pos,
                format!("the context declares no field {}", srepr(field)),
            ),
            Some(spec) if is_numeric_op(op) && is_unordered(spec.ty) => self.warning(
                "op_type_mismatch",
                id,
                pos,
                format!(
                    "op {} on context.{field} ({}) compares a non-ordered field",
                    srepr(op),
                    spec.ty.as_str()
                ),
            ),
            Some(_) => {}
        }
    }

    /// The declared type of what a guard operand reads, where it is knowable.
    fn operand_type(&self, source: Source, field: &str, t: &Transition) -> Option<FieldType> {
        let specs: Vec<Option<FieldType>> = match source {
            Source::Context => vec![self.defn.context_schema.get(field).map(|s| s.ty)],
            Source::Event => match &t.event_filter {
                None => Vec::new(),
                Some(ef) => kinds(ef)
                    .map(|k| {
                        self.defn
                            .events
                            .get(k)
                            .and_then(|e| e.fields.get(field))
                            .map(|s| s.ty)
                    })
                    .collect(),
            },
        };
        if specs.is_empty() || specs.iter().any(Option::is_none) {
            return None;
        }
        let first = specs[0]?;
        if first == FieldType::Any || specs.iter().any(|s| *s != Some(first)) {
            return None;
        }
        Some(first)
    }

    fn check_compared_types(&mut self, id: NodeId, t: &Transition, leaf: &Predicate) {
        let Predicate::Leaf {
            source,
            field,
            op,
            value_ref: Some((rsource, rfield)),
            ..
        } = leaf
        else {
            return;
        };
        if *op == CmpOp::In || field.is_empty() || rfield.is_empty() {
            return;
        }
        let left = self.operand_type(*source, field, t);
        let right = self.operand_type(*rsource, rfield, t);
        if let (Some(l), Some(r)) = (left, right) {
            let numeric = |x: FieldType| matches!(x, FieldType::Int | FieldType::Float);
            if l != r && !(numeric(l) && numeric(r)) {
                self.warning(
                    "compare_type_mismatch",
                    id,
                    t.pos.as_ref(),
                    format!(
                        "a guard compares {}.{field} ({}) with {}.{rfield} ({}): values of different types are \
                         never equal or ordered",
                        source.as_str(),
                        l.as_str(),
                        rsource.as_str(),
                        r.as_str()
                    ),
                );
            }
        }
    }

    /// The static type of a right-hand side where it is knowable.
    fn expr_type(&self, expr: &Expr) -> Option<&'static str> {
        match expr {
            Expr::Lit(v) => Some(literal_type(v)),
            Expr::Ref {
                source: Source::Context,
                field,
            } => match self.defn.context_schema.get(field) {
                Some(spec) if spec.ty != FieldType::Any => Some(spec.ty.as_str()),
                _ => None,
            },
            Expr::Ref { .. } => None,
            Expr::Arith { op, left, right } => {
                if *op == crate::definition::ArithOp::Div {
                    return Some("float");
                }
                // a set of the knowable side types (harel drops unknown ones as None)
                let mut sides: Vec<Option<&'static str>> = Vec::new();
                for side in [left, right] {
                    let ty = self.expr_type(side);
                    if !sides.contains(&ty) {
                        sides.push(ty);
                    }
                }
                if sides == [Some("int")] {
                    return Some("int");
                }
                let all_numeric = sides.iter().all(|s| matches!(s, Some("int") | Some("float")));
                if all_numeric && sides.contains(&Some("float")) {
                    return Some("float");
                }
                None
            }
        }
    }

    fn check_assignments(&mut self, id: NodeId, t: &Transition) {
        let pos = t.pos.as_ref();
        for assign in all_assignments(t) {
            let mut refs = Vec::new();
            expr_refs(&assign.expr, &mut refs);
            for (source, field) in refs {
                if source == Source::Context && !field.is_empty() {
                    self.check_context_ref(id, pos, &field, "eq");
                } else if source == Source::Event && t.event_filter.is_none() {
                    self.error(
                        "event_ref_without_event",
                        id,
                        pos,
                        format!("`set` reads event.{field} on an automatic transition, which has no event"),
                    );
                }
            }
            if let Expr::Arith { op, left, right } = &assign.expr {
                for operand in [left, right] {
                    if let Some(kind @ ("string" | "bool" | "list")) = self.expr_type(operand) {
                        self.error(
                            "assign_type_mismatch",
                            id,
                            pos,
                            format!(
                                "`{}` in `set context.{}` needs numbers, got a {kind}",
                                op.symbol(),
                                assign.field
                            ),
                        );
                    }
                }
            }
            if self.defn.context_schema.is_empty() {
                continue;
            }
            let Some(spec) = self.defn.context_schema.get(&assign.field) else {
                self.error(
                    "unknown_context_field",
                    id,
                    pos,
                    format!(
                        "`set` writes context.{}, which the context doesn't declare",
                        assign.field
                    ),
                );
                continue;
            };
            let kind = self.expr_type(&assign.expr);
            let declared = spec.ty.as_str();
            let fits = match kind {
                None => true,
                Some(k) => spec.ty == FieldType::Any || k == declared || (declared == "float" && k == "int"),
            };
            if !fits {
                self.error(
                    "assign_type_mismatch",
                    id,
                    pos,
                    format!(
                        "`set context.{}` ({declared}) is given a {}",
                        assign.field,
                        kind.unwrap_or("None")
                    ),
                );
            }
        }
    }

    fn check_context_refs(&mut self) {
        for id in self.order.clone() {
            let node = self.node(id);
            let loop_var = node.invoke_each.as_ref().map(|(v, _)| v.as_str());
            for parent_key in node.invoke_with.values() {
                if Some(parent_key.as_str()) != loop_var {
                    self.check_context_ref(id, None, parent_key, "eq");
                }
            }
            if let Some((_, coll)) = &node.invoke_each {
                self.check_context_ref(id, None, coll, "eq");
            }
            for t in &node.transitions {
                let pos = t.pos.as_ref();
                for leaf in guard_leaves(t) {
                    for (src, f) in operands(leaf) {
                        if src == Source::Context {
                            self.check_context_ref(id, pos, f, leaf_op(leaf));
                        } else if t.event_filter.is_none() {
                            self.error(
                                "event_ref_without_event",
                                id,
                                pos,
                                format!(
                                    "a guard reads the event's {} on an automatic transition, which has no event \
                                     — it can never hold",
                                    srepr(f)
                                ),
                            );
                        }
                    }
                    self.check_compared_types(id, t, leaf);
                }
                self.check_assignments(id, t);
            }
        }
    }

    fn check_context_defaults(&mut self) {
        let root = self.defn.root;
        for (name, spec) in &self.defn.context_schema {
            let Some(default) = &spec.default else { continue };
            if default.is_null() || spec.ty.fits(default) {
                continue;
            }
            self.error(
                "default_type_mismatch",
                root,
                None,
                format!(
                    "the default of context field {} ({}) is {} {}",
                    srepr(name),
                    spec.ty.as_str(),
                    pyvalue::type_name(default),
                    pyvalue::repr(default)
                ),
            );
        }
    }

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

    fn check_cancel_targets(&mut self) {
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

    fn check_choose_can_hang(&mut self) {
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

    fn check_ttl(&mut self) {
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

    fn check_terminal_outcomes(&mut self) {
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

fn choice_targets(t: &Transition) -> Vec<NodeId> {
    match &t.choice {
        None => Vec::new(),
        Some(c) => c.branches.iter().map(|(_, n)| *n).chain(c.default).collect(),
    }
}
