//! What changes from one version of a machine to the next, and whom it puts at risk:
//! the check a deploy runs before it drops a version (`stm versions check`).
//!
//! Each [`Change`] names a state (or the context, an event, the machine) and says
//! whether an execution that sits there when it moves to the new version (a migration,
//! or an unpinned execution, which always steps on the current version) is
//! [`Severity::AtRisk`] or [`Severity::Safe`]. States are matched by path, so a rename
//! is a removal and an addition; a removed state with one added sibling of its kind is
//! reported as a likely rename.
//!
//! ```
//! use stm_core::version::diff::{diff, Severity};
//! let v1 = stm_core::dsl::load_definition_str("machine M {\n  initial A\n  state A {}\n  state B {}\n  from A to B on Go\n}\n", None, None).expect("valid");
//! let v2 = stm_core::dsl::load_definition_str("machine M {\n  initial A\n  state A {}\n  state C {}\n  from A to C on Go\n}\n", None, None).expect("valid");
//! let report = diff(&v1, &v2);
//! assert!(report.at_risk());
//! assert!(report.changes.iter().any(|c| c.subject == "state B" && c.severity == Severity::AtRisk));
//! assert!(report.is_at_risk_path("B") && !report.is_at_risk_path("C"));
//! ```

use std::collections::BTreeSet;
use std::fmt;

use crate::definition::{ActionRef, Definition, Node, NodeId, NodeKind, Timeout, Transition};
use crate::version::{version_of, Version};

/// Whether a change can break an execution that sits where it applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Severity {
    /// An execution there goes on as it would have, or only new executions see it.
    Safe,
    /// An execution there could fail, be stranded, or go on in a state that no longer
    /// means what it did.
    AtRisk,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Safe => "safe",
            Severity::AtRisk => "at risk",
        }
    }
}

/// One difference between two versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub severity: Severity,
    /// What it is about: `state Payment.Card`, `context.note`, `event Submit`,
    /// `machine`, `history Payment`, or one of these inside a submachine
    /// (`Order#Payment: state Card`).
    pub subject: String,
    /// The state path an execution sits at for this change to concern it (`None`: not
    /// about one state).
    pub path: Option<String>,
    pub what: String,
}

/// Every difference between two versions of one machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub machine: String,
    pub old_version: Version,
    pub new_version: Version,
    /// At-risk changes first, then by subject.
    pub changes: Vec<Change>,
}

impl Report {
    /// Whether any change puts an execution at risk.
    pub fn at_risk(&self) -> bool {
        self.changes.iter().any(|c| c.severity == Severity::AtRisk)
    }

    /// Whether an execution whose active state is `active_path` sits where an at-risk
    /// change applies: that state, or one of its ancestors (whose transitions and
    /// timeouts apply to it too).
    pub fn is_at_risk_path(&self, active_path: &str) -> bool {
        self.changes.iter().any(|c| {
            c.severity == Severity::AtRisk
                && c.path.as_deref().is_some_and(|p| {
                    p.is_empty() || active_path == p || active_path.starts_with(&format!("{p}."))
                })
        })
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.changes.is_empty() {
            return writeln!(f, "{}: unchanged ({})", self.machine, self.new_version);
        }
        writeln!(
            f,
            "{}: {} -> {}",
            self.machine, self.old_version, self.new_version
        )?;
        for c in &self.changes {
            writeln!(f, "  {:<8} {}: {}", c.severity.as_str(), c.subject, c.what)?;
        }
        let risky = self
            .changes
            .iter()
            .filter(|c| c.severity == Severity::AtRisk)
            .count();
        writeln!(
            f,
            "{}: {risky} at risk, {} safe",
            self.machine,
            self.changes.len() - risky
        )
    }
}

/// The differences from `old` to `new` (two versions of one machine).
pub fn diff(old: &Definition, new: &Definition) -> Report {
    let mut changes = Vec::new();
    diff_into(old, new, "", &mut changes);
    changes.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| a.subject.cmp(&b.subject))
    });
    let old_version = old.version.unwrap_or_else(|| version_of(old));
    let new_version = new.version.unwrap_or_else(|| version_of(new));
    if changes.is_empty() && old_version != new_version {
        changes.push(Change {
            severity: Severity::Safe,
            subject: "machine".into(),
            path: None,
            what: "compiled differently in a way no execution can tell apart (declarations in another order)"
                .into(),
        });
    }
    Report {
        machine: new.id.clone(),
        old_version,
        new_version,
        changes,
    }
}

struct Diff<'a> {
    old: &'a Definition,
    new: &'a Definition,
    prefix: &'a str,
    out: &'a mut Vec<Change>,
}

impl Diff<'_> {
    fn push(&mut self, severity: Severity, subject: String, path: Option<&str>, what: String) {
        self.out.push(Change {
            severity,
            subject: format!("{}{subject}", self.prefix),
            path: path.map(str::to_string),
            what,
        });
    }

    fn state(&mut self, severity: Severity, path: &str, what: String) {
        self.push(severity, format!("state {}", shown(path)), Some(path), what);
    }
}

fn shown(path: &str) -> &str {
    if path.is_empty() {
        "(root)"
    } else {
        path
    }
}

fn diff_into(old: &Definition, new: &Definition, prefix: &str, out: &mut Vec<Change>) {
    let mut d = Diff {
        old,
        new,
        prefix,
        out,
    };
    let added: Vec<&Node> = new
        .nodes
        .iter()
        .filter(|n| old.get(&n.full_path).is_none())
        .collect();
    for node in &old.nodes {
        match new.get(&node.full_path) {
            None => removed_state(&mut d, node, &added),
            Some(id) => changed_state(&mut d, node, new.node(id)),
        }
    }
    for node in &added {
        d.state(
            Severity::Safe,
            &node.full_path,
            format!("added ({})", kind_name(node.kind)),
        );
    }
    history(&mut d);
    context(&mut d);
    events(&mut d);
    if old.ttl != new.ttl {
        let show = |t: Option<u64>| t.map_or("none".to_string(), |s| format!("{s} s"));
        d.push(
            Severity::Safe,
            "machine".into(),
            None,
            format!(
                "ttl {} -> {}: an execution's budget restarts with its next event",
                show(old.ttl),
                show(new.ttl)
            ),
        );
    }
    for (id, old_sub) in &old.submachines {
        match new.submachines.get(id) {
            Some(new_sub) => diff_into(old_sub, new_sub, &format!("{prefix}{id}: "), d.out),
            None => d.push(
                Severity::Safe,
                format!("machine {id}"),
                None,
                "no longer invoked: its running children keep the version they started on".into(),
            ),
        }
    }
}

fn kind_name(kind: NodeKind) -> &'static str {
    match kind {
        NodeKind::Leaf => "a leaf",
        NodeKind::Composite => "a composite",
        NodeKind::Root => "the root",
        NodeKind::Orthogonal => "an orthogonal state",
    }
}

fn removed_state(d: &mut Diff<'_>, node: &Node, added: &[&Node]) {
    let parent_path = node.parent.map(|p| d.old.path(p).to_string());
    let siblings: Vec<&&Node> = added
        .iter()
        .filter(|n| n.kind == node.kind && n.parent.map(|p| d.new.path(p).to_string()) == parent_path)
        .collect();
    let hint = match siblings.as_slice() {
        [only] => format!(" (renamed to {}?)", only.full_path),
        _ => String::new(),
    };
    d.state(
        Severity::AtRisk,
        &node.full_path,
        format!("removed{hint}: an execution there has no state to be in"),
    );
}

fn changed_state(d: &mut Diff<'_>, old: &Node, new: &Node) {
    let path = old.full_path.as_str();
    if old.kind != new.kind {
        d.state(
            Severity::AtRisk,
            path,
            format!("was {}, is {}", kind_name(old.kind), kind_name(new.kind)),
        );
    }
    if old.kind == NodeKind::Orthogonal && new.kind == NodeKind::Orthogonal {
        let regions = |defn: &Definition, n: &Node| -> Vec<String> {
            n.children.iter().map(|c| defn.node(*c).name.clone()).collect()
        };
        let (before, after) = (regions(d.old, old), regions(d.new, new));
        if before != after {
            d.state(
                Severity::AtRisk,
                path,
                format!(
                    "regions [{}] -> [{}]: the live region children run the regions they started with",
                    before.join(", "),
                    after.join(", ")
                ),
            );
        }
    }
    transitions(d, old);
    if old.timeout != new.timeout {
        let (severity, why) = match (&old.timeout, &new.timeout) {
            (None, Some(_)) => (
                Severity::AtRisk,
                "an execution already there has no timer armed: it never times out",
            ),
            (Some(_), None) => (
                Severity::AtRisk,
                "an execution already there keeps its armed timer, and its Timeout finds no transition",
            ),
            _ => (
                Severity::AtRisk,
                "an execution already there keeps the timer armed for the old value",
            ),
        };
        d.state(
            severity,
            path,
            format!(
                "timeout {} -> {}: {why}",
                timeout_text(&old.timeout),
                timeout_text(&new.timeout)
            ),
        );
    }
    if old.invoke != new.invoke || old.invoke_each != new.invoke_each || old.invoke_with != new.invoke_with {
        d.state(
            Severity::AtRisk,
            path,
            format!(
                "invoke {} -> {}: a child already running is the old machine, with the old inputs",
                invoke_text(old),
                invoke_text(new)
            ),
        );
    }
    hook(
        d,
        path,
        "on enter",
        &old.on_enter,
        &new.on_enter,
        Severity::Safe,
        "only executions entering from now on run it",
    );
    hook(
        d,
        path,
        "on activity",
        &old.on_activity,
        &new.on_activity,
        Severity::Safe,
        "only executions entering from now on run it",
    );
    hook(
        d,
        path,
        "on exit",
        &old.on_exit,
        &new.on_exit,
        Severity::AtRisk,
        "an execution there runs the new one when it leaves",
    );
    if old.outcome != new.outcome {
        d.state(
            Severity::Safe,
            path,
            format!(
                "outcome {} -> {}: a finished execution keeps the one it recorded",
                old.outcome.as_deref().unwrap_or("none"),
                new.outcome.as_deref().unwrap_or("none")
            ),
        );
    }
    if old.start_state != new.start_state {
        d.state(
            Severity::Safe,
            path,
            format!(
                "initial {} -> {}: only entries from now on start there",
                old.start_state.as_deref().unwrap_or("none"),
                new.start_state.as_deref().unwrap_or("none")
            ),
        );
    }
    if old.defer != new.defer {
        d.state(
            Severity::AtRisk,
            path,
            format!(
                "defers [{}] -> [{}]: events held by an execution there are released under the new rule",
                join(&old.defer),
                join(&new.defer)
            ),
        );
    }
    if old.carry != new.carry || old.cancel_on_failure != new.cancel_on_failure {
        d.state(
            Severity::AtRisk,
            path,
            "what a region carries back or cancels on failure changed: a live region finishes under the new rule".into(),
        );
    }
}

fn join(set: &BTreeSet<String>) -> String {
    set.iter().cloned().collect::<Vec<_>>().join(", ")
}

fn hook(
    d: &mut Diff<'_>,
    path: &str,
    name: &str,
    old: &Option<ActionRef>,
    new: &Option<ActionRef>,
    severity: Severity,
    why: &str,
) {
    if old != new {
        let text = |a: &Option<ActionRef>| a.as_ref().map_or("none".to_string(), |a| a.function.clone());
        d.state(
            severity,
            path,
            format!("{name} {} -> {}: {why}", text(old), text(new)),
        );
    }
}

fn timeout_text(t: &Option<Timeout>) -> String {
    match t {
        None => "none".into(),
        Some(Timeout::Seconds(s)) => format!("{} s", crate::pyvalue::float_repr(*s)),
        Some(Timeout::ContextKey(key)) => format!("context {key}"),
    }
}

fn invoke_text(n: &Node) -> String {
    match (&n.invoke, &n.invoke_each) {
        (None, _) => "none".into(),
        (Some(m), Some((var, coll))) => format!("{m} for {var} in {coll}"),
        (Some(m), None) => m.clone(),
    }
}

/// A transition as text that does not depend on where nodes sit in the arena: its
/// trigger, guard, target path, selector or choice, and assignments.
fn transition_text(defn: &Definition, t: &Transition) -> String {
    use crate::render::{effect_text, predicate_label};
    let mut text = match &t.event_filter {
        None => "(automatic)".to_string(),
        Some(f) => {
            let mut text = format!("on {}", f.kinds.join(" | "));
            if let Some(p) = &f.predicate {
                text.push_str(&format!(" where {}", predicate_label(p)));
            }
            text
        }
    };
    if let Some(target) = t.target {
        text.push_str(&format!(" to {}", shown(defn.path(target))));
    }
    if let Some(s) = &t.selector {
        let arms: Vec<String> = s.mapper.iter().map(|(k, v)| format!("{k:?} to {v}")).collect();
        let default = s
            .default
            .as_deref()
            .map(|d| format!(" else to {d}"))
            .unwrap_or_default();
        text.push_str(&format!(
            " select {} {{ {}{default} }}",
            s.action.function,
            arms.join(", ")
        ));
    }
    if let Some(c) = &t.choice {
        let set =
            |a: &[crate::definition::Assign]| effect_text(a).map(|e| format!(" set {e}")).unwrap_or_default();
        let mut arms: Vec<String> = c
            .branches
            .iter()
            .zip(
                c.branch_assignments
                    .iter()
                    .map(Vec::as_slice)
                    .chain(std::iter::repeat(&[][..])),
            )
            .map(|((p, target), a)| {
                format!(
                    "when {} to {}{}",
                    predicate_label(p),
                    shown(defn.path(*target)),
                    set(a)
                )
            })
            .collect();
        if let Some(d) = c.default {
            arms.push(format!(
                "else to {}{}",
                shown(defn.path(d)),
                set(&c.default_assignments)
            ));
        }
        text.push_str(&format!(" choose {{ {} }}", arms.join("; ")));
    }
    if let Some(effect) = effect_text(&t.assignments) {
        text.push_str(&format!(" set {effect}"));
    }
    text
}

/// The transitions leaving `source` (a composite's apply to every state below it too),
/// each with the kinds that trigger it (none: automatic) and its text.
fn leaving(defn: &Definition, source: &str) -> Vec<(Vec<String>, String)> {
    let Some(id) = defn.get(source) else {
        return Vec::new();
    };
    defn.nodes
        .iter()
        .flat_map(|n| n.transitions.iter())
        .filter(|t| t.source == id)
        .map(|t| {
            let kinds = t
                .event_filter
                .as_ref()
                .map(|f| f.kinds.clone())
                .unwrap_or_default();
            (kinds, transition_text(defn, t))
        })
        .collect()
}

fn transitions(d: &mut Diff<'_>, old: &Node) {
    let path = old.full_path.as_str();
    let before = leaving(d.old, path);
    let after = leaving(d.new, path);
    if before == after {
        return;
    }
    let texts =
        |list: &[(Vec<String>, String)]| -> Vec<String> { list.iter().map(|(_, t)| t.clone()).collect() };
    let (before_texts, after_texts) = (texts(&before), texts(&after));
    let removed: Vec<&String> = before_texts.iter().filter(|t| !after_texts.contains(t)).collect();
    let added: Vec<&String> = after_texts.iter().filter(|t| !before_texts.contains(t)).collect();
    for t in &removed {
        d.state(
            Severity::AtRisk,
            path,
            format!("transition {t} removed or changed: an execution there no longer takes it"),
        );
    }
    for t in &added {
        d.state(Severity::Safe, path, format!("transition {t} added"));
    }
    if removed.is_empty() && added.is_empty() {
        // the same transitions in another order: it matters only among those one event
        // (or no event: the automatic ones) can trigger together
        let order_for = |list: &[(Vec<String>, String)], kind: Option<&str>| -> Vec<String> {
            list.iter()
                .filter(|(kinds, _)| match kind {
                    Some(k) => kinds.iter().any(|x| x == k),
                    None => kinds.is_empty(),
                })
                .map(|(_, t)| t.clone())
                .collect()
        };
        let mut kinds: BTreeSet<Option<&str>> = before
            .iter()
            .flat_map(|(k, _)| k.iter().map(|k| Some(k.as_str())))
            .collect();
        kinds.insert(None);
        let reordered: Vec<String> = kinds
            .into_iter()
            .filter(|k| order_for(&before, *k) != order_for(&after, *k))
            .map(|k| k.unwrap_or("(automatic)").to_string())
            .collect();
        if !reordered.is_empty() {
            d.state(
                Severity::AtRisk,
                path,
                format!(
                    "transitions on {} reordered: when more than one matches, another one wins",
                    reordered.join(", ")
                ),
            );
        }
    }
}

fn history(d: &mut Diff<'_>) {
    for node in &d.old.nodes {
        if !node.is_composite() || !node.allow_history || node.kind == NodeKind::Orthogonal {
            continue;
        }
        let lost: Vec<&str> = node
            .children
            .iter()
            .map(|c: &NodeId| d.old.path(*c))
            .filter(|child| {
                let still = d.new.get(&node.full_path).map(|id| d.new.node(id));
                !still.is_some_and(|n| n.is_composite() && n.allow_history) || d.new.get(child).is_none()
            })
            .collect();
        // one line per lost entry, about the executions sitting in that child (the ones
        // that would record it on leaving)
        for child in lost {
            d.push(
                Severity::AtRisk,
                format!("history {}", shown(&node.full_path)),
                Some(child),
                format!(
                    "an entry recorded for {child} would not resolve: an execution re-entering it by history has nowhere to go"
                ),
            );
        }
    }
}

fn context(d: &mut Diff<'_>) {
    for (name, old) in &d.old.context_schema {
        let subject = format!("context.{name}");
        match d.new.context_schema.get(name) {
            None => d.push(
                Severity::Safe,
                subject,
                None,
                "no longer declared: in-flight executions keep the value".into(),
            ),
            Some(new) if new.ty != old.ty => d.push(
                Severity::AtRisk,
                subject,
                Some(""),
                format!(
                    "type {} -> {}: an in-flight value may not fit, and a `set` checks the new type",
                    old.ty.as_str(),
                    new.ty.as_str()
                ),
            ),
            Some(new) if new.required && !old.required => d.push(
                Severity::AtRisk,
                subject,
                Some(""),
                "now required: in-flight executions may lack it".into(),
            ),
            Some(new) if new.default != old.default => d.push(
                Severity::Safe,
                subject,
                None,
                "default changed: only new executions start with it".into(),
            ),
            Some(_) => {}
        }
    }
    for (name, new) in &d.new.context_schema {
        if d.old.context_schema.contains_key(name) {
            continue;
        }
        let (severity, what) = if new.default.is_some() || new.required {
            (
                Severity::AtRisk,
                "added: in-flight executions lack it (a default applies when an execution is created)",
            )
        } else {
            (Severity::Safe, "added, optional")
        };
        // an at-risk context change concerns an execution wherever it sits
        let path = (severity == Severity::AtRisk).then_some("");
        d.push(severity, format!("context.{name}"), path, what.into());
    }
}

fn events(d: &mut Diff<'_>) {
    for (name, old) in &d.old.events {
        match d.new.events.get(name) {
            None => d.push(
                Severity::Safe,
                format!("event {name}"),
                None,
                "no longer declared: senders' events of it are not checked".into(),
            ),
            Some(new) if new.fields != old.fields => d.push(
                Severity::Safe,
                format!("event {name}"),
                None,
                "fields changed: senders must send the new shape".into(),
            ),
            Some(_) => {}
        }
    }
    for name in d.new.events.keys() {
        if !d.old.events.contains_key(name) {
            d.push(Severity::Safe, format!("event {name}"), None, "declared".into());
        }
    }
}
