//! The engine: the pure interpretation of a [`Definition`] (harel 0.9.0's
//! `engine/core.py`, same semantics, written as Rust).
//!
//! [`start`] and [`process`] take the definition, the execution, the event and the
//! time. They move the execution (active path, history, status, context) in place and
//! return the [`Effect`]s the caller must carry out durably: emits, spawned children,
//! timers to arm or disarm. The engine does no IO and never runs user code itself:
//! blocking actions (state hooks and selectors) are asked of the caller through
//! [`ActionHost`], the seam where harel's engine yields `RunAction`/`RunSelector`.
//!
//! Semantics, in brief:
//! - **Scope resolution**: the innermost scope wins; outer scopes are a fallback for
//!   event transitions only (automatic lookups don't fall back past the first level).
//! - **UML order**: exits run innermost-first up to the LCA, the transition's `set`
//!   applies, then entries run outermost-first down to the target, which descends into
//!   its initial (or history) child. A self-transition fires nothing.
//! - **Drain**: automatic transitions are followed to quiescence; a leaf with nothing
//!   to wait for is a sink that bubbles to its composite; the global sink ends the
//!   execution (DONE, with the innermost declared `outcome`).
//! - **Orthogonal states** fork one child execution per region and join once every
//!   region reported `Finished`; `invoke` runs a black-box child and delivers
//!   `Returned`; fan-out invokes one child per collection entry.
//!
//! "No transition" is not an error: an unhandled event runs the leaf's `on activity`,
//! or is deferred, or is dropped. Errors ([`StepError`]) are an action that failed, a
//! `set` that cannot be evaluated, or a definition/execution mismatch.

use crate::definition::{
    ActionRef, Assign, CmpOp, Definition, EventFilter, Expr, NodeId, NodeKind, Predicate, Source, Timeout,
    Transition,
};
use std::cell::Cell;

use indexmap::IndexMap;

use crate::execution::{ChildState, Event, Execution, Status};
use crate::ids;
use crate::pyvalue::{self, py_cmp, py_contains, py_eq};
use crate::{Map, Value};

/// The timer path of a machine's `ttl` (never a node path: node names are identifiers).
pub const TTL_PATH: &str = "@ttl";

/// Which hook of a state an action runs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Enter,
    Exit,
    Activity,
}

/// A blocking action the engine needs run now.
#[derive(Debug, Clone, Copy)]
pub struct ActionCall<'a> {
    /// The state whose hook (or whose active configuration's selector) this is.
    pub node: NodeId,
    /// `None` for a selector.
    pub hook: Option<Hook>,
    pub action: &'a ActionRef,
    /// The triggering event (`None` on start and automatic transitions, as in harel).
    pub event: Option<&'a Event>,
}

/// A failed action: the exception type and message harel would record.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionError {
    pub type_name: String,
    pub message: String,
}

impl ActionError {
    pub fn new(type_name: impl Into<String>, message: impl Into<String>) -> Self {
        ActionError {
            type_name: type_name.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ActionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.type_name, self.message)
    }
}

/// Any error becomes an action error, so `?` works inside an action: its type name (the
/// last segment of the Rust type's path, `ParseIntError`) is the exception type that
/// `on error` routes on, and its message is the error's text with its causes.
///
/// ```
/// use stm_core::engine::ActionError;
///
/// fn parse(raw: &str) -> Result<i64, ActionError> {
///     Ok(raw.parse::<i64>()?)
/// }
/// let err = parse("x").unwrap_err();
/// assert_eq!(err.type_name, "ParseIntError");
/// assert_eq!(err.message, "invalid digit found in string");
/// ```
///
/// (`ActionError` is not itself a `std::error::Error`, as `anyhow::Error` is not: that
/// would make this conversion overlap the identity `From`.)
impl<E: std::error::Error + Send + Sync + 'static> From<E> for ActionError {
    fn from(err: E) -> Self {
        let full = std::any::type_name::<E>();
        // `a::b::Error<c::D>`: the last path segment before any generic arguments
        let base = full.split('<').next().unwrap_or(full);
        let type_name = base.rsplit("::").next().unwrap_or(base);
        let mut message = err.to_string();
        let mut source = err.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        ActionError::new(type_name, message)
    }
}

/// The caller's side of a step: runs the actions the engine asks for.
///
/// `context` is the execution's live context; an action may read and change it. The
/// returned value matters for selectors only.
pub trait ActionHost {
    fn call(&mut self, call: &ActionCall<'_>, context: &mut Map) -> Result<Value, ActionError>;
}

/// A host for machines without actions: any call is an error.
#[derive(Debug)]
pub struct NoActions;

impl ActionHost for NoActions {
    fn call(&mut self, call: &ActionCall<'_>, _context: &mut Map) -> Result<Value, ActionError> {
        Err(ActionError::new(
            "LookupError",
            format!("no action host for {}", call.action.function),
        ))
    }
}

/// One region, invoke child or fan-out instance to create.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildSpec {
    pub child_id: String,
    /// The branch node for a region; `""` for a submachine child.
    pub root_path: String,
    /// What the child starts with; a submachine child carries `__invoke_fqn__`.
    pub context: Map,
}

/// What a step asks the caller to make durable, in the order the engine produced it.
#[derive(Debug, Clone, PartialEq)]
// Not `#[non_exhaustive]`: the driver must carry out every command, so a new one is a
// compile error there rather than a silent drop.
pub enum Effect {
    /// Deliver `event` to execution `to` after the commit.
    Emit { to: Option<String>, event: Event },
    /// Create these child executions after the commit.
    Spawn(Vec<ChildSpec>),
    /// Arm (upsert) the timer for `path`.
    ScheduleTimer { path: String, fire_at: f64 },
    /// Disarm the timer for `path`.
    CancelTimer { path: String },
    /// Informational: the context values a `set` wrote (for the trace).
    Assigned(Map),
    /// Informational: nothing in the machine took the event, and why (for the log). The
    /// step still counts it as processed, as harel's does.
    Dropped(String),
}

/// Why a step could not complete. The execution may have moved part way (as in harel);
/// the caller decides: route to `on error`, fail the execution, or drop the step.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// An action failed. `on_exit` failures are never routed to `on error`.
    #[error("{error}")]
    Action { error: ActionError, on_exit: bool },
    /// A `set` expression could not be evaluated (harel's `ExpressionError`).
    #[error("ExpressionError: {0}")]
    Expression(String),
    /// The definition and the execution don't fit together, or a selector result
    /// matched no branch: a bug in the model or the data, not a modelled failure.
    #[error("{0}")]
    Invalid(String),
    /// A Python exception harel lets escape the step, unrouted (an arithmetic
    /// `OverflowError`): the step fails and nothing of it commits.
    #[error("{type_name}: {message}")]
    Raised {
        type_name: &'static str,
        message: String,
    },
}

impl StepError {
    /// The `(type, message)` an `error` event carries for this failure.
    pub fn type_and_message(&self) -> (String, String) {
        match self {
            StepError::Action { error, .. } => (error.type_name.clone(), error.message.clone()),
            StepError::Expression(m) => ("ExpressionError".into(), m.clone()),
            StepError::Invalid(m) => ("AssertionError".into(), m.clone()),
            StepError::Raised { type_name, message } => ((*type_name).into(), message.clone()),
        }
    }
}

type StepResult<T = ()> = Result<T, StepError>;

/// Start a fresh execution: enter the initial configuration and drain.
pub fn start(
    defn: &Definition,
    exe: &mut Execution,
    now: f64,
    host: &mut dyn ActionHost,
) -> Result<Vec<Effect>, StepError> {
    let mut step = Step {
        defn,
        exe,
        now,
        host,
        effects: Vec::new(),
        active_node: Cell::new(None),
        root_node: Cell::new(None),
    };
    step.start()?;
    Ok(step.effects)
}

/// Process one event: control events (`Start`, `Reset`, `Cancel`, `SetState`,
/// `Finished`, `Timeout`) and domain events.
pub fn process(
    defn: &Definition,
    exe: &mut Execution,
    event: &Event,
    now: f64,
    host: &mut dyn ActionHost,
) -> Result<Vec<Effect>, StepError> {
    let mut step = Step {
        defn,
        exe,
        now,
        host,
        effects: Vec::new(),
        active_node: Cell::new(None),
        root_node: Cell::new(None),
    };
    step.process(event)?;
    Ok(step.effects)
}

/// The synthetic `error` event a driver injects when an action fails.
pub fn error_event(type_name: &str, message: &str) -> Event {
    let mut data = Map::new();
    data.insert("type".into(), Value::from(type_name));
    data.insert("message".into(), Value::from(message));
    Event::with_data("error", data)
}

/// The `Timeout` event a due timer delivers; its id is stable (timer key and fire
/// time) so a timer swept twice dedupes to one effect.
pub fn timeout_event(execution_id: &str, path: &str, fire_at: f64) -> Event {
    let mut data = Map::new();
    data.insert("path".into(), Value::from(path));
    data.insert("fire_at".into(), pyvalue::float(fire_at));
    Event::with_data("Timeout", data).with_id(format!(
        "timeout:{execution_id}:{path}:{}",
        pyvalue::float_repr(fire_at)
    ))
}

/// Whether the active configuration has an `on error` transition for `event`.
pub fn has_error_handler(defn: &Definition, exe: &Execution, event: &Event) -> bool {
    if exe.active_path.is_none() || exe.status != Status::Running {
        return false;
    }
    resolve(defn, exe, &|t| event_matches(t, event, &exe.context), true).is_some()
}

/// Whether the active configuration has its own `Cancel` transition that lands
/// directly on a sink (the control plane's cooperative-cancel test).
pub fn has_cancel_handler(defn: &Definition, exe: &Execution, event: &Event) -> bool {
    safe_teardown(defn, exe, event).is_some()
}

/// The `ttl` budget to (re)arm for `exe`: only a RUNNING root of a machine with `ttl`.
pub fn ttl_delay(defn: &Definition, exe: &Execution) -> Option<f64> {
    match defn.ttl {
        Some(ttl) if exe.parent_id.is_none() && exe.status == Status::Running => Some(ttl as f64),
        _ => None,
    }
}

/// Whether `target_path` is a safe place to park the execution directly: a leaf in
/// this execution's own branch, not inside an orthogonal ancestor.
pub fn is_valid_reposition_target(defn: &Definition, exe: &Execution, target_path: &str) -> bool {
    let (Some(node), Some(root)) = (defn.get(target_path), defn.get(&exe.root_path)) else {
        return false;
    };
    if defn.node(node).is_composite() {
        return false;
    }
    for ancestor in defn.ancestors(node) {
        if defn.node(ancestor).kind == NodeKind::Orthogonal {
            return false;
        }
        if ancestor == root {
            return true;
        }
    }
    false
}

// --- transition resolution ------------------------------------------------------

/// A matched transition: its scope and its index in the scope's transitions.
type Found = (NodeId, usize);

/// Whether a child's region key `key` names something under spawn site `path` joined by
/// `sep` (`path.child` for a region, `path:i` for a fan-out instance).
fn key_under(key: &str, path: &str, sep: char) -> bool {
    key.strip_prefix(path).is_some_and(|rest| rest.starts_with(sep))
}

fn transition(defn: &Definition, found: Found) -> &Transition {
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
const SHALLOW: usize = 32;

fn resolve(
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
fn resolve_at(
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

fn compare(op: CmpOp, actual: &Value, expected: &Value) -> bool {
    use std::cmp::Ordering::*;
    match op {
        CmpOp::Eq => py_eq(actual, expected),
        CmpOp::Ne => !py_eq(actual, expected),
        CmpOp::Lt => py_cmp(actual, expected) == Some(Less),
        CmpOp::Le => matches!(py_cmp(actual, expected), Some(Less | Equal)),
        CmpOp::Gt => py_cmp(actual, expected) == Some(Greater),
        CmpOp::Ge => matches!(py_cmp(actual, expected), Some(Greater | Equal)),
        CmpOp::In => py_contains(expected, actual) == Some(true),
    }
}

fn scope_of<'a>(source: Source, event_data: &'a Map, context: &'a Map) -> &'a Map {
    match source {
        Source::Event => event_data,
        Source::Context => context,
    }
}

/// Evaluate a guard. A leaf on a field absent from its namespace (on either side),
/// or whose values cannot be compared, does not hold.
pub fn eval_predicate(pred: &Predicate, event_data: &Map, context: &Map) -> bool {
    match pred {
        Predicate::Leaf {
            source,
            field,
            op,
            value,
            value_ref,
        } => {
            let Some(actual) = scope_of(*source, event_data, context).get(field) else {
                return false;
            };
            match value_ref {
                None => compare(*op, actual, value),
                Some((other_source, other_field)) => scope_of(*other_source, event_data, context)
                    .get(other_field)
                    .is_some_and(|other| compare(*op, actual, other)),
            }
        }
        Predicate::All(children) => children.iter().all(|c| eval_predicate(c, event_data, context)),
        Predicate::Any(children) => children.iter().any(|c| eval_predicate(c, event_data, context)),
        Predicate::Not(child) => !eval_predicate(child, event_data, context),
    }
}

fn filter_matches(filter: &EventFilter, event: &Event, context: &Map) -> bool {
    filter.kinds.iter().any(|k| k == &event.kind)
        && filter
            .predicate
            .as_ref()
            .is_none_or(|p| eval_predicate(p, &event.data, context))
}

fn choice_index(t: &Transition, event_data: &Map, context: &Map) -> Option<usize> {
    t.choice
        .as_ref()?
        .branches
        .iter()
        .position(|(guard, _)| eval_predicate(guard, event_data, context))
}

fn choice_target(t: &Transition, event_data: &Map, context: &Map) -> Option<NodeId> {
    let choice = t.choice.as_ref()?;
    match choice_index(t, event_data, context) {
        Some(i) => Some(choice.branches[i].1),
        None => choice.default,
    }
}

fn choice_open(t: &Transition, event_data: &Map, context: &Map) -> bool {
    t.choice.is_none() || choice_target(t, event_data, context).is_some()
}

/// A transition triggered by `event` whose guard holds (and, for a `choose`, that has
/// somewhere to go).
fn event_matches(t: &Transition, event: &Event, context: &Map) -> bool {
    t.event_filter
        .as_ref()
        .is_some_and(|f| filter_matches(f, event, context))
        && choice_open(t, &event.data, context)
}

fn auto_matches(t: &Transition, context: &Map) -> bool {
    t.event_filter.is_none() && choice_open(t, &Map::new(), context)
}

/// A transition's assignments: its own `set`, then the `set` of the `choose` branch it
/// takes.
fn assignments_of(t: &Transition, event: Option<&Event>, context: &Map) -> Vec<Assign> {
    let mut out = t.assignments.clone();
    if let Some(choice) = &t.choice {
        let empty = Map::new();
        let data = event.map_or(&empty, |e| &e.data);
        match choice_index(t, data, context) {
            None => out.extend(choice.default_assignments.iter().cloned()),
            Some(i) => {
                if let Some(branch) = choice.branch_assignments.get(i) {
                    out.extend(branch.iter().cloned());
                }
            }
        }
    }
    out
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
fn safe_teardown(defn: &Definition, exe: &Execution, event: &Event) -> Option<Found> {
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

// --- the step -------------------------------------------------------------------

/// `history.get_mut(key)`, by a scan while the map is small: a history holds an entry
/// per composite left, a handful, and hashing the key (SipHash) costs more than
/// comparing that many.
fn history_entry<'h>(history: &'h mut IndexMap<String, String>, key: &str) -> Option<&'h mut String> {
    if history.len() <= 8 {
        history
            .iter_mut()
            .find_map(|(k, v)| (k.as_str() == key).then_some(v))
    } else {
        history.get_mut(key)
    }
}

struct Step<'a> {
    defn: &'a Definition,
    exe: &'a mut Execution,
    now: f64,
    host: &'a mut dyn ActionHost,
    effects: Vec<Effect>,
    /// The node of `exe.active_path` once looked up, `None` until then: every write of
    /// the path in a step goes through `set_active` or resets it (resolution asks for the
    /// active node several times per step, and a lookup hashes the path).
    active_node: Cell<Option<NodeId>>,
    /// The node of `exe.root_path`, which no step changes.
    root_node: Cell<Option<NodeId>>,
}

const RESERVED_FINISHED_KEYS: [&str; 3] = ["child_id", "outcome", "__deferred__"];

impl Step<'_> {
    fn node_at(&self, path: &str) -> StepResult<NodeId> {
        self.defn
            .get(path)
            .ok_or_else(|| StepError::Invalid(format!("state {path:?} is not in machine {}", self.defn.id)))
    }

    fn root(&self) -> StepResult<NodeId> {
        if let Some(node) = self.root_node.get() {
            return Ok(node);
        }
        let node = self.node_at(&self.exe.root_path)?;
        self.root_node.set(Some(node));
        Ok(node)
    }

    fn active(&self) -> StepResult<NodeId> {
        if let Some(node) = self.active_node.get() {
            return Ok(node);
        }
        let node = match &self.exe.active_path {
            Some(p) => self.node_at(p)?,
            None => {
                return Err(StepError::Invalid(format!(
                    "execution {} has no active state",
                    self.exe.id
                )))
            }
        };
        self.active_node.set(Some(node));
        Ok(node)
    }

    /// [`resolve`] for this step's execution, on the nodes it already looked up.
    fn resolve_here(&self, pred: &dyn Fn(&Transition) -> bool, allow_parent: bool) -> Option<Found> {
        let root = self.root().ok()?;
        let active = self.active().ok()?;
        resolve_between(self.defn, root, active, pred, allow_parent)
    }

    fn set_active(&mut self, node: NodeId) {
        self.active_node.set(Some(node));
        // reuse the string's buffer: the active path moves several times per step
        let path = self.defn.path(node);
        match &mut self.exe.active_path {
            Some(current) => {
                current.clear();
                current.push_str(path);
            }
            None => self.exe.active_path = Some(path.to_string()),
        }
    }

    fn record_history(&mut self, node: NodeId) {
        if let Some(parent) = self.defn.node(node).parent {
            let (parent_path, path) = (self.defn.path(parent), self.defn.path(node));
            match history_entry(&mut self.exe.history, parent_path) {
                Some(current) if current == path => {}
                Some(current) => {
                    current.clear();
                    current.push_str(path);
                }
                None => {
                    self.exe.history.insert(parent_path.to_string(), path.to_string());
                }
            }
        }
    }

    /// Run `node`'s own hook, and arm/disarm its timer on enter/exit.
    fn run(&mut self, node: NodeId, hook: Hook, event: Option<&Event>) -> StepResult {
        let defn = self.defn;
        let n = defn.node(node);
        let action = match hook {
            Hook::Enter => &n.on_enter,
            Hook::Exit => &n.on_exit,
            Hook::Activity => &n.on_activity,
        };
        if let Some(action) = action {
            let call = ActionCall {
                node,
                hook: Some(hook),
                action,
                event,
            };
            if let Err(error) = self.host.call(&call, &mut self.exe.context) {
                return Err(StepError::Action {
                    error,
                    on_exit: hook == Hook::Exit,
                });
            }
        }
        if let Some(timeout) = &n.timeout {
            match hook {
                Hook::Enter => {
                    let delay = match timeout {
                        Timeout::Seconds(s) => *s,
                        Timeout::ContextKey(key) => self.context_seconds(key)?,
                    };
                    self.effects.push(Effect::ScheduleTimer {
                        path: n.full_path.clone(),
                        fire_at: self.now + delay,
                    });
                }
                Hook::Exit => self.effects.push(Effect::CancelTimer {
                    path: n.full_path.clone(),
                }),
                Hook::Activity => {}
            }
        }
        Ok(())
    }

    /// A timeout read from the context: `float(context.get(key, 0.0))` in harel, whose
    /// `ValueError` or `TypeError` escapes the step unrouted.
    fn context_seconds(&self, key: &str) -> StepResult<f64> {
        match self.exe.context.get(key) {
            None => Ok(0.0),
            Some(v) => crate::pynum::py_float(v).map_err(|e| StepError::Raised {
                type_name: e.type_name,
                message: e.message,
            }),
        }
    }

    fn start(&mut self) -> StepResult {
        self.exe.status = Status::Running;
        let root = self.root()?;
        let defn = self.defn;
        let start_node = defn
            .node(root)
            .start_state
            .as_deref()
            .and_then(|name| defn.child(root, name))
            .ok_or_else(|| StepError::Invalid(format!("{:?} has no initial state", defn.path(root))))?;
        if self.exe.parent_id.is_some() {
            self.run(root, Hook::Enter, None)?;
        }
        self.set_active(start_node);
        self.run(start_node, Hook::Enter, None)?;
        self.descend(start_node, None)?;
        self.drain()?;
        self.arm_ttl();
        Ok(())
    }

    fn arm_ttl(&mut self) {
        if let Some(delay) = ttl_delay(self.defn, self.exe) {
            let fire_at = self.now + delay;
            self.effects.push(Effect::ScheduleTimer {
                path: TTL_PATH.into(),
                fire_at,
            });
            self.exe.expires_at = Some(fire_at);
        }
    }

    /// Enter a composite's initial (or history) child, down to a leaf; an orthogonal
    /// node forks instead.
    fn descend(&mut self, mut node: NodeId, event: Option<&Event>) -> StepResult {
        let defn = self.defn;
        while defn.node(node).is_composite() {
            let n = defn.node(node);
            if n.kind == NodeKind::Orthogonal {
                self.fork(node);
                return Ok(());
            }
            if !n.allow_history {
                self.exe.history.shift_remove(&n.full_path);
            }
            let child = match self.exe.history.get(&n.full_path) {
                Some(path) => Some(self.node_at(path)?),
                None => n.start_state.as_deref().and_then(|name| defn.child(node, name)),
            };
            let Some(child) = child else {
                return Ok(());
            };
            // position on the child before its enter runs, so a failing enter is
            // routed from the child (harel does the same)
            self.set_active(child);
            self.run(child, Hook::Enter, event)?;
            self.exe
                .history
                .insert(n.full_path.clone(), defn.path(child).to_string());
            node = child;
        }
        Ok(())
    }

    fn fork(&mut self, node: NodeId) {
        let defn = self.defn;
        let n = defn.node(node);
        let seq = self.exe.invoke_seq.get(&n.full_path).copied().unwrap_or(0);
        self.exe.children.clear();
        let mut specs = Vec::with_capacity(n.children.len());
        for &child in &n.children {
            let child_path = defn.path(child);
            // harel's id, bounded only where SQS would refuse it (see `ids`)
            let child_id = ids::child_id(format!("{}:{}:{}", self.exe.id, child_path, seq));
            let mut passed = Map::new();
            for (child_key, parent_key) in &n.invoke_with {
                if let Some(v) = self.exe.context.get(parent_key) {
                    passed.insert(child_key.clone(), v.clone());
                }
            }
            specs.push(ChildSpec {
                child_id: child_id.clone(),
                root_path: child_path.to_string(),
                context: passed,
            });
            let mut state = ChildState::new(child_path);
            state.key = child_path.to_string();
            self.exe.children.insert(child_id, state);
        }
        self.effects.push(Effect::Spawn(specs));
    }

    fn fan_out(&mut self, node: NodeId) -> StepResult {
        let defn = self.defn;
        let n = defn.node(node);
        let Some((loop_var, coll_key)) = &n.invoke_each else {
            return Ok(());
        };
        let seq = self.exe.invoke_seq.get(&n.full_path).copied().unwrap_or(0);
        let owned = format!("{}:{}:", self.exe.id, n.full_path);
        // harel's test is the id prefix; a bounded id (see `ids`) may have lost it, and
        // its instance key `{path}:{i}` (set below, harel's too) says the same
        let path = n.full_path.as_str();
        self.exe
            .children
            .retain(|cid, cs| !(cid.starts_with(&owned) || (cs.submachine && key_under(&cs.key, path, ':'))));
        let items: Vec<Value> = match self.exe.context.get(coll_key) {
            None => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(Value::Object(map)) => map.keys().map(|k| Value::from(k.as_str())).collect(),
            Some(Value::String(s)) => s.chars().map(|c| Value::from(c.to_string())).collect(),
            Some(other) => {
                return Err(StepError::Invalid(format!(
                    "fan-out over context.{coll_key}: '{}' object is not iterable",
                    pyvalue::type_name(other)
                )))
            }
        };
        let mut specs = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let child_id = ids::child_id(format!("{}:{}:{}:{}", self.exe.id, n.full_path, seq, i));
            let mut ctx = Map::new();
            for (child_key, source) in &n.invoke_with {
                let v = if source == loop_var {
                    item.clone()
                } else {
                    self.exe.context.get(source).cloned().unwrap_or(Value::Null)
                };
                ctx.insert(child_key.clone(), v);
            }
            ctx.insert(
                "__invoke_fqn__".into(),
                n.invoke.clone().map_or(Value::Null, Value::from),
            );
            let mut state = ChildState::new("");
            state.submachine = true;
            state.key = format!("{}:{}", n.full_path, i);
            self.exe.children.insert(child_id.clone(), state);
            specs.push(ChildSpec {
                child_id,
                root_path: String::new(),
                context: ctx,
            });
        }
        self.effects.push(Effect::Spawn(specs));
        Ok(())
    }

    /// Whether `cid` was spawned by `node` (a region `id:node.child:seq` or a fan-out
    /// instance `id:node:seq:i`). harel tests the id's prefix; a bounded id (see `ids`)
    /// may have lost it, so the child's key (`node.child` for a region, `node:i` for an
    /// instance, as harel sets them) is tested too: for a harel-form id both agree.
    fn region_of(&self, node: NodeId, cid: &str, state: &ChildState) -> bool {
        let path = self.defn.path(node);
        let owned = format!("{}:{}", self.exe.id, path);
        cid.strip_prefix(&owned)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with(':'))
            || key_under(&state.key, path, '.')
            || key_under(&state.key, path, ':')
    }

    /// Leaving a spawn site: bump its entry counter (a re-entry spawns fresh ids) and
    /// cancel every region still running.
    fn leave_regions(&mut self, node: NodeId) {
        let path = self.defn.path(node).to_string();
        *self.exe.invoke_seq.entry(path).or_insert(0) += 1;
        let unfinished: Vec<String> = self
            .exe
            .children
            .iter()
            .filter(|(cid, cs)| !cs.finished && self.region_of(node, cid, cs))
            .map(|(cid, _)| cid.clone())
            .collect();
        for cid in unfinished {
            self.effects.push(Effect::Emit {
                to: Some(cid),
                event: Event::new("Cancel"),
            });
        }
    }

    fn joined(&self) -> bool {
        self.exe.children.values().all(|c| c.finished)
    }

    fn any_region_failed(&self) -> bool {
        self.exe
            .children
            .values()
            .any(|c| c.finished && c.outcome.as_deref().is_some_and(|o| o != "success"))
    }

    fn expose_region_results(&mut self) {
        let prefix = format!("{}:", self.exe.id);
        let mut results = Map::new();
        let mut reported = false;
        for (cid, cs) in &self.exe.children {
            let key = if cs.key.is_empty() {
                cid.strip_prefix(&prefix).unwrap_or(cid).to_string()
            } else {
                cs.key.clone()
            };
            let mut r = Map::new();
            r.insert(
                "outcome".into(),
                cs.outcome.clone().map_or(Value::Null, Value::from),
            );
            for (k, v) in &cs.result {
                r.insert(k.clone(), v.clone());
            }
            reported |= cs.outcome.is_some() || r.len() > 1;
            results.insert(key, Value::Object(r));
        }
        if reported {
            self.exe
                .context
                .insert("region_results".into(), Value::Object(results));
        }
    }

    /// The target of a matched transition: fixed, chosen, or computed by a selector.
    fn target_of(&mut self, found: Found, event: Option<&Event>) -> StepResult<NodeId> {
        let defn = self.defn;
        let t = transition(defn, found);
        if let Some(selector) = &t.selector {
            let node = self.active()?;
            let call = ActionCall {
                node,
                hook: None,
                action: &selector.action,
                event,
            };
            let result = self
                .host
                .call(&call, &mut self.exe.context)
                .map_err(|error| StepError::Action {
                    error,
                    on_exit: false,
                })?;
            let key = pyvalue::py_str(&result);
            let name = selector
                .mapper
                .get(&key)
                .or(selector.default.as_ref())
                .ok_or_else(|| {
                    StepError::Invalid(format!(
                        "selector result {} matched no branch and no `else`",
                        pyvalue::repr(&result)
                    ))
                })?;
            return defn.resolve_relative(found.0, name).ok_or_else(|| {
                StepError::Invalid(format!(
                    "selector target {name:?} not found from {:?}",
                    defn.path(found.0)
                ))
            });
        }
        if t.choice.is_some() {
            let empty = Map::new();
            let data = event.map_or(&empty, |e| &e.data);
            return choice_target(t, data, &self.exe.context)
                .ok_or_else(|| StepError::Invalid("a `choose` with no open branch was taken".into()));
        }
        t.target
            .ok_or_else(|| StepError::Invalid("transition without a target".into()))
    }

    fn value_of(&self, expr: &Expr, event_data: &Map) -> StepResult<Value> {
        match expr {
            Expr::Lit(v) => Ok(v.clone()),
            Expr::Ref { source, field } => scope_of(*source, event_data, &self.exe.context)
                .get(field)
                .cloned()
                .ok_or_else(|| StepError::Expression(format!("{}.{} is not set", source.as_str(), field))),
            Expr::Arith { op, left, right } => {
                let l = self.value_of(left, event_data)?;
                let r = self.value_of(right, event_data)?;
                pyvalue::arith(*op, &l, &r).map_err(|e| match e {
                    pyvalue::ArithError::Expression(m) => StepError::Expression(m),
                    pyvalue::ArithError::Raised(e) => StepError::Raised {
                        type_name: e.type_name,
                        message: e.message,
                    },
                })
            }
        }
    }

    /// Every right-hand side evaluated against the context and event as they are
    /// before any is applied, each checked against the context schema.
    fn evaluate(&self, assignments: &[Assign], event: Option<&Event>) -> StepResult<Map> {
        let empty = Map::new();
        let data = event.map_or(&empty, |e| &e.data);
        let mut values = Map::new();
        for assign in assignments {
            let value = self.value_of(&assign.expr, data)?;
            if let Some(spec) = self.defn.context_schema.get(&assign.field) {
                let null_ok = value.is_null() && !spec.required;
                if !null_ok && !spec.ty.fits(&value) {
                    return Err(StepError::Expression(format!(
                        "context.{} is declared {}, `set` gave {} {}",
                        assign.field,
                        spec.ty.as_str(),
                        pyvalue::type_name(&value),
                        pyvalue::repr(&value)
                    )));
                }
            }
            values.insert(assign.field.clone(), value);
        }
        Ok(values)
    }

    /// Take a transition with UML LCA semantics (see the module docs).
    fn take(&mut self, target: NodeId, event: Option<&Event>, assignments: &[Assign]) -> StepResult {
        let values = if assignments.is_empty() {
            Map::new()
        } else {
            self.evaluate(assignments, event)?
        };
        let defn = self.defn;
        let source = self.active()?;
        let pivot = defn.lca(source, target);
        // exited levels, innermost first: walk up from the source to the pivot
        let mut exiting = (source != pivot).then_some(source);
        while let Some(node) = exiting {
            exiting = defn.node(node).parent.filter(|p| *p != pivot);
            self.set_active(node);
            self.run(node, Hook::Exit, event)?;
            self.record_history(node);
            let n = defn.node(node);
            if n.kind == NodeKind::Orthogonal || n.invoke_each.is_some() {
                self.leave_regions(node);
            }
        }
        self.set_active(pivot);
        if !values.is_empty() {
            for (k, v) in &values {
                self.exe.context.insert(k.clone(), v.clone());
            }
            self.effects.push(Effect::Assigned(values));
        }
        // entered levels, outermost first
        let mut entered = [pivot; SHALLOW];
        let mut depth = 0;
        let mut cur = target;
        while cur != pivot && depth < SHALLOW {
            entered[depth] = cur;
            depth += 1;
            cur = defn.node(cur).parent.unwrap_or(pivot);
        }
        let deep; // deeper than SHALLOW below the pivot: rare, allocate
        let entered: &[NodeId] = if cur == pivot {
            entered[..depth].reverse();
            &entered[..depth]
        } else {
            deep = defn.chain(pivot, target).unwrap_or_default();
            deep.get(1..).unwrap_or_default()
        };
        for &node in entered {
            self.set_active(node);
            self.run(node, Hook::Enter, event)?;
            self.record_history(node);
        }
        self.descend(target, event)
    }

    /// Resolve, target and take `found` for `event`, as every event path does.
    fn fire(&mut self, found: Found, event: Option<&Event>) -> StepResult {
        let target = self.target_of(found, event)?;
        let assignments = assignments_of(transition(self.defn, found), event, &self.exe.context);
        self.take(target, event, &assignments)
    }

    fn deferred_kinds_contain(&self, kind: &str) -> bool {
        let Some(active) = self.exe.active_path.as_deref().and_then(|p| self.defn.get(p)) else {
            return false;
        };
        std::iter::once(active)
            .chain(self.defn.ancestors(active))
            .any(|n| self.defn.node(n).defer.contains(kind))
    }

    /// Pop the first deferred event (FIFO) that has a transition now.
    fn next_deferred(&mut self) -> Option<(Event, Found)> {
        let exe = &*self.exe;
        let (i, found) = exe.deferred.iter().enumerate().find_map(|(i, ev)| {
            self.resolve_here(&|t| event_matches(t, ev, &exe.context), true)
                .map(|f| (i, f))
        })?;
        Some((self.exe.deferred.remove(i), found))
    }

    /// Follow automatic transitions, bubble finished composites up, settle or sink.
    fn drain(&mut self) -> StepResult {
        let defn = self.defn;
        let root = self.root()?;
        loop {
            let active = self.active()?;
            let n = defn.node(active);
            if let (Some(fqn), None) = (&n.invoke, &n.invoke_each) {
                // a single submachine: spawn it once per entry, then wait for `Finished`
                let seq = self.exe.invoke_seq.get(&n.full_path).copied().unwrap_or(0);
                let harel_cid = format!("{}:{}:{}", self.exe.id, n.full_path, seq);
                let cid = ids::child_id(harel_cid.clone());
                if !self.exe.children.contains_key(&cid) {
                    let mut ctx = Map::new();
                    for (child_key, parent_key) in &n.invoke_with {
                        if let Some(v) = self.exe.context.get(parent_key) {
                            ctx.insert(child_key.clone(), v.clone());
                        }
                    }
                    ctx.insert("__invoke_fqn__".into(), Value::from(fqn.as_str()));
                    let mut state = ChildState::new("");
                    state.submachine = true;
                    if cid != harel_cid {
                        // harel leaves the key empty and `region_results` strips `{id}:`
                        // off the child id; a bounded id has no such tail, so keep it here
                        state.key = format!("{}:{}", n.full_path, seq);
                    }
                    self.exe.children.insert(cid.clone(), state);
                    self.effects.push(Effect::Spawn(vec![ChildSpec {
                        child_id: cid,
                        root_path: String::new(),
                        context: ctx,
                    }]));
                }
                return Ok(());
            }
            if n.invoke.is_some() {
                // fan-out: spawn once per entry (scoped to this entry's seq), then join
                let seq = self.exe.invoke_seq.get(&n.full_path).copied().unwrap_or(0);
                let prefix = format!("{}:{}:{}:", self.exe.id, n.full_path, seq);
                // harel's prefix test, or (a bounded id may have lost the prefix) this
                // entry's instance 0, which every non-empty fan-out has
                let first = ids::child_id(format!("{prefix}0"));
                if !self.exe.children.keys().any(|c| c.starts_with(&prefix))
                    && !self.exe.children.contains_key(&first)
                {
                    self.fan_out(active)?;
                }
                if !self.joined() {
                    return Ok(());
                }
                self.expose_region_results();
            } else if n.kind == NodeKind::Orthogonal {
                // wait for every region, unless `cancel_on_failure` and one already failed
                let resolved = self.joined() || (n.cancel_on_failure && self.any_region_failed());
                if !resolved {
                    return Ok(());
                }
                self.expose_region_results();
            }

            let auto = {
                let context = &self.exe.context;
                self.resolve_here(&|t| auto_matches(t, context), false)
            };
            if let Some(found) = auto {
                self.fire(found, None)?;
                continue;
            }
            if self.resolve_here(&|_| true, false).is_some() {
                if let Some((event, found)) = self.next_deferred() {
                    self.fire(found, Some(&event))?;
                    continue;
                }
                return Ok(()); // waiting for an event
            }

            // a sink at its own scope: record the verdict, exit, bubble up or finish
            if n.outcome.is_some() && self.exe.outcome.is_none() {
                self.exe.outcome = n.outcome.clone();
            }
            self.run(active, Hook::Exit, None)?;
            if let Some(parent) = n.parent.filter(|p| *p != root) {
                self.exe.history.shift_remove(defn.path(parent));
                self.set_active(parent);
                continue;
            }
            if self.exe.parent_id.is_some() {
                self.run(root, Hook::Exit, None)?;
            }
            if self.exe.status == Status::Running {
                self.exe.status = Status::Done;
                if let Some(parent_id) = self.exe.parent_id.clone() {
                    self.report_finished(root, parent_id);
                }
            }
            return Ok(());
        }
    }

    /// A region or invoke child reached its global sink: tell the parent, carrying the
    /// outcome, the `carry`-projected context and any still-deferred events.
    fn report_finished(&mut self, root: NodeId, parent_id: String) {
        let mut data = Map::new();
        data.insert(
            "child_id".into(),
            self.exe.child_id.clone().map_or(Value::Null, Value::from),
        );
        data.insert(
            "outcome".into(),
            self.exe.outcome.clone().map_or(Value::Null, Value::from),
        );
        for key in &self.defn.node(root).carry {
            if let Some(v) = self.exe.context.get(key) {
                data.insert(key.clone(), v.clone());
            }
        }
        if !self.exe.deferred.is_empty() {
            let deferred: Vec<Value> = self
                .exe
                .deferred
                .drain(..)
                .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
                .collect();
            data.insert("__deferred__".into(), Value::Array(deferred));
        }
        self.effects.push(Effect::Emit {
            to: Some(parent_id),
            event: Event::with_data("Finished", data),
        });
    }

    fn is_active(&self, path: &str) -> bool {
        let (Some(active), Some(node), Some(root)) = (
            self.exe.active_path.as_deref().and_then(|p| self.defn.get(p)),
            self.defn.get(path),
            self.defn.get(&self.exe.root_path),
        ) else {
            return false;
        };
        self.defn
            .chain(root, active)
            .is_some_and(|chain| chain.contains(&node))
    }

    fn resolve_event(&self, event: &Event) -> Option<Found> {
        let context = &self.exe.context;
        self.resolve_here(&|t| event_matches(t, event, context), true)
    }

    fn drop_event(&mut self, reason: String) {
        self.effects.push(Effect::Dropped(reason));
    }

    fn process(&mut self, event: &Event) -> StepResult {
        match event.kind.as_str() {
            "Reset" => self.reset(),
            "Cancel" => self.cancel(event),
            "Start" => {
                if self.exe.status == Status::Pending {
                    for (k, v) in &event.data {
                        self.exe.context.insert(k.clone(), v.clone());
                    }
                    self.start()?;
                } else {
                    self.drop_event(format!(
                        "the execution is {}, already started: Start starts only a PENDING one",
                        self.exe.status
                    ));
                }
                Ok(())
            }
            "SetState" => match event.data.get("current_state") {
                Some(Value::String(path)) => self.set_state(path),
                _ => Ok(()),
            },
            "Finished" => self.finished(event),
            "Timeout" => self.timeout(event),
            _ => self.domain(event),
        }
    }

    fn reset(&mut self) -> StepResult {
        if self.exe.status == Status::Cancelling {
            return Ok(());
        }
        if let Some(site) = self.exe.active_path.as_deref().and_then(|p| self.defn.get(p)) {
            if self.defn.node(site).is_spawn_site() {
                self.leave_regions(site);
            }
        }
        self.exe.children.clear();
        self.exe.context.clear();
        if self.exe.parent_id.is_none() || self.exe.definition_fqn.is_some() {
            self.defn.with_context_defaults(&mut self.exe.context);
        }
        self.exe.history.clear();
        self.exe.deferred.clear();
        self.exe.active_path = None;
        self.active_node.set(None);
        self.exe.outcome = None;
        self.exe.error = None;
        self.exe.status = Status::Pending;
        self.start()
    }

    fn cancel(&mut self, event: &Event) -> StepResult {
        if self.exe.status.is_finished() {
            return Ok(());
        }
        let live =
            matches!(self.exe.status, Status::Running | Status::Cancelling) && self.exe.active_path.is_some();
        let found = if live { self.resolve_event(event) } else { None };
        let Some(found) = found else {
            self.exe.status = Status::Cancelled;
            return Ok(());
        };
        self.exe.status = Status::Running;
        self.fire(found, Some(event))?;
        self.drain()?;
        self.exe.processed_events += 1;
        Ok(())
    }

    fn set_state(&mut self, path: &str) -> StepResult {
        if !is_valid_reposition_target(self.defn, self.exe, path)
            || !self.joined()
            || self.exe.status != Status::Running
        {
            return Ok(());
        }
        self.exe.deferred.clear();
        self.exe.active_path = Some(path.to_string());
        self.active_node.set(None);
        self.drain()
    }

    fn finished(&mut self, event: &Event) -> StepResult {
        let cid = event
            .data
            .get("child_id")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(state) = cid.as_ref().and_then(|c| self.exe.children.get_mut(c)) {
            state.finished = true;
            state.outcome = event
                .data
                .get("outcome")
                .and_then(Value::as_str)
                .map(str::to_string);
            state.result = event
                .data
                .iter()
                .filter(|(k, _)| !RESERVED_FINISHED_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
        }
        if let Some(Value::Array(raw)) = event.data.get("__deferred__") {
            for raw_event in raw {
                let ev: Event = serde_json::from_value(raw_event.clone())
                    .map_err(|e| StepError::Invalid(format!("bad deferred event in Finished: {e}")))?;
                self.exe.deferred.push(ev);
            }
        }
        let defn = self.defn;
        let active = self.exe.active_path.as_deref().and_then(|p| defn.get(p));
        if let Some(active) = active {
            let n = defn.node(active);
            if n.invoke.is_some() && n.invoke_each.is_none() && self.exe.status == Status::Running {
                // a single submachine state: its child's completion becomes `Returned`
                let seq = self.exe.invoke_seq.get(&n.full_path).copied().unwrap_or(0);
                let expected = ids::child_id(format!("{}:{}:{}", self.exe.id, n.full_path, seq));
                if cid.as_deref() == Some(expected.as_str()) {
                    let Some(cs) = self.exe.children.get(&expected) else {
                        return Ok(());
                    };
                    let mut data = Map::new();
                    data.insert(
                        "outcome".into(),
                        cs.outcome.clone().map_or(Value::Null, Value::from),
                    );
                    for (k, v) in &cs.result {
                        data.insert(k.clone(), v.clone());
                    }
                    let completion = Event::with_data("Returned", data);
                    if let Some(found) = self.resolve_event(&completion) {
                        self.exe.invoke_seq.insert(n.full_path.clone(), seq + 1);
                        self.exe.children.shift_remove(&expected);
                        self.fire(found, Some(&completion))?;
                        self.drain()?;
                    }
                }
                return Ok(());
            }
        }
        if self.exe.status == Status::Running {
            self.drain()?;
        }
        Ok(())
    }

    fn timeout(&mut self, event: &Event) -> StepResult {
        let path = event.data.get("path");
        if path.and_then(Value::as_str) == Some(TTL_PATH) {
            return self.expire(event);
        }
        let Some(path) = path.and_then(Value::as_str) else {
            return Ok(());
        };
        if self.exe.status != Status::Running || !self.is_active(path) {
            return Ok(()); // a stale timer: its state was left (or left and re-entered)
        }
        let found = {
            let exe = &*self.exe;
            let root = self.defn.get(&exe.root_path);
            root.and_then(|root| {
                resolve_at(self.defn, root, path, &|t| event_matches(t, event, &exe.context))
            })
        };
        if let Some(found) = found {
            self.fire(found, Some(event))?;
            self.drain()?;
            self.exe.processed_events += 1;
        }
        Ok(())
    }

    fn expire(&mut self, event: &Event) -> StepResult {
        let armed = self.exe.expires_at.map_or(Value::Null, pyvalue::float);
        let fired = event.data.get("fire_at").cloned().unwrap_or(Value::Null);
        if self.exe.status != Status::Running || !py_eq(&fired, &armed) {
            return Ok(());
        }
        self.exe.processed_events += 1;
        let expired = Event::new("Expired");
        if let Some(found) = safe_teardown(self.defn, self.exe, &expired) {
            self.fire(found, Some(&expired))?;
            return self.drain();
        }
        if let Some(site) = self.exe.active_path.as_deref().and_then(|p| self.defn.get(p)) {
            if self.defn.node(site).is_spawn_site() {
                self.leave_regions(site);
            }
        }
        self.exe.status = Status::Cancelled;
        self.exe.outcome = Some("expired".into());
        Ok(())
    }

    fn domain(&mut self, event: &Event) -> StepResult {
        if self.exe.status != Status::Running {
            self.drop_event(format!(
                "the execution is {}: it takes no more events (Reset restarts it)",
                self.exe.status
            ));
            return Ok(());
        }
        match self.resolve_event(event) {
            Some(found) => self.fire(found, Some(event))?,
            None => {
                let active = self.active()?;
                if self.deferred_kinds_contain(&event.kind) {
                    self.exe.deferred.push(event.clone());
                } else if self.defn.node(active).on_activity.is_some() {
                    self.run(active, Hook::Activity, Some(event))?;
                } else {
                    self.drop_event(format!(
                        "nothing in {} or above it takes {}, defers it or has an `on activity`",
                        self.defn.node(active).full_path,
                        event.kind
                    ));
                }
            }
        }
        self.drain()?;
        self.exe.processed_events += 1;
        self.arm_ttl();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::Node;

    /// A two-state loop built by hand: A --Go--> B --Back--> A.
    fn two_state() -> Definition {
        let mut d = Definition::new("Loop");
        let root = d.root;
        d.node_mut(root).start_state = Some("A".into());
        let a = d.add_node(root, Node::new("A", "A", NodeKind::Leaf));
        let b = d.add_node(root, Node::new("B", "B", NodeKind::Leaf));
        for (src, dst, kind) in [(a, b, "Go"), (b, a, "Back")] {
            d.node_mut(root).transitions.push(Transition {
                source: src,
                target: Some(dst),
                event_filter: Some(EventFilter {
                    kinds: vec![kind.into()],
                    predicate: None,
                }),
                selector: None,
                choice: None,
                assignments: vec![],
                pos: None,
                event_pos: Vec::new(),
            });
        }
        d
    }

    #[test]
    fn start_and_events_move_the_active_path() {
        let d = two_state();
        let mut exe = Execution::new("e", "Loop");
        start(&d, &mut exe, 0.0, &mut NoActions).expect("start");
        assert_eq!(exe.active_path.as_deref(), Some("A"));
        assert_eq!(exe.status, Status::Running);
        process(&d, &mut exe, &Event::new("Go"), 0.0, &mut NoActions).expect("go");
        assert_eq!(exe.active_path.as_deref(), Some("B"));
        // an unknown event is "no transition", not an error
        process(&d, &mut exe, &Event::new("Nope"), 0.0, &mut NoActions).expect("nope");
        assert_eq!(exe.active_path.as_deref(), Some("B"));
        assert_eq!(exe.processed_events, 2);
    }

    const SPAWNERS: &str = r#"
event Stop {}
event Again {}
machine Worker {
  initial W
  state W {}
  final Ok success
  from W to Ok on Again
}
machine Spawner {
  context {
    items: any = []
  }
  initial Fan
  state Fan {
    invoke Worker for item in items
    with { x: item }
  }
  orthogonal Split {
    state A {
      initial A1
      state A1 {}
    }
    state B {
      initial B1
      state B1 {}
    }
  }
  state Call { invoke Worker }
  state Paused {}
  final Joined success
  final Broken failed
  final Called success
  from Fan join all to Joined else to Broken
  from Fan to Paused on Stop
  from Paused to Fan on Again
  from Joined to Split on Again
  from Split to Call on Stop
  from Call to Called on Returned
}
"#;

    fn spawned(effects: &[Effect]) -> Vec<String> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Spawn(specs) => Some(specs.iter().map(|s| s.child_id.clone())),
                _ => None,
            })
            .flatten()
            .collect()
    }

    fn cancelled(effects: &[Effect]) -> Vec<String> {
        let mut to: Vec<String> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::Emit { to: Some(to), event } if event.kind == "Cancel" => Some(to.clone()),
                _ => None,
            })
            .collect();
        to.sort();
        to
    }

    fn finished(child_id: &str) -> Event {
        let mut data = Map::new();
        data.insert("child_id".into(), Value::from(child_id));
        data.insert("outcome".into(), Value::from("success"));
        Event::with_data("Finished", data)
    }

    /// With a parent id so long that every child id is bounded (`ids::child_id`), the
    /// engine still finds its children: a fan-out's re-entry replaces its instances, leaving
    /// a fan-out or an orthogonal node cancels what runs, a join exposes harel's keys, and
    /// a single invoke's `Finished` becomes `Returned`.
    #[test]
    fn bounded_child_ids_keep_the_children_bookkeeping() {
        let defn = crate::dsl::load_definition_str(SPAWNERS, Some("Spawner"), None).expect("machine");
        let parent = "p".repeat(125);
        let mut exe = Execution::new(parent.clone(), "Spawner");
        exe.context.insert("items".into(), serde_json::json!(["a", "b"]));
        // the join's selector (`harel.lib.join_success`): every instance succeeds here
        struct JoinPasses;
        impl ActionHost for JoinPasses {
            fn call(&mut self, _: &ActionCall<'_>, _: &mut Map) -> Result<Value, ActionError> {
                Ok(Value::from("pass"))
            }
        }
        let step = |exe: &mut Execution, ev: Option<Event>| match ev {
            None => start(&defn, exe, 0.0, &mut JoinPasses).expect("start"),
            Some(ev) => process(&defn, exe, &ev, 0.0, &mut JoinPasses).expect("process"),
        };
        let first = spawned(&step(&mut exe, None));
        assert_eq!(first.len(), 2);
        for id in &first {
            assert!(ids::valid_group_id(id) && id.contains('~'), "{id}");
        }
        // leaving the fan-out early cancels both instances
        let mut sorted = first.clone();
        sorted.sort();
        assert_eq!(cancelled(&step(&mut exe, Some(Event::new("Stop")))), sorted);
        // re-entering replaces them (fresh ids, the old ones dropped), once
        let second = spawned(&step(&mut exe, Some(Event::new("Again"))));
        assert_eq!(second.len(), 2);
        assert!(second.iter().all(|id| !first.contains(id)));
        assert_eq!(
            exe.children.keys().cloned().collect::<Vec<_>>(),
            second,
            "only this entry's instances"
        );
        assert!(spawned(&step(&mut exe, Some(finished(&second[0])))).is_empty());
        step(&mut exe, Some(finished(&second[1])));
        assert_eq!(exe.active_path.as_deref(), Some("Joined"));
        let results = exe.context.get("region_results").cloned().unwrap_or_default();
        assert_eq!(
            results.as_object().map(|r| r.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["Fan:0".to_string(), "Fan:1".to_string()])
        );
        // an orthogonal node's regions are cancelled when it is left
        let regions = spawned(&step(&mut exe, Some(Event::new("Again"))));
        assert_eq!(regions.len(), 2);
        let mut sorted = regions.clone();
        sorted.sort();
        let left = step(&mut exe, Some(Event::new("Stop")));
        assert_eq!(cancelled(&left), sorted);
        // a single invoke: its bounded child's `Finished` is the `Returned` it waits for
        let call = spawned(&left);
        assert_eq!(call.len(), 1);
        assert_eq!(exe.children.get(&call[0]).map(|c| c.key.as_str()), Some("Call:0"));
        step(&mut exe, Some(finished(&call[0])));
        assert_eq!(exe.active_path.as_deref(), Some("Called"));
    }

    #[test]
    fn timeout_event_id_is_stable() {
        let ev = timeout_event("x", "A.B", 1030.0);
        assert_eq!(ev.id, "timeout:x:A.B:1030.0");
        assert_eq!(ev.data.get("fire_at"), Some(&serde_json::json!(1030.0)));
    }
}
