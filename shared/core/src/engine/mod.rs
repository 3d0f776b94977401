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

mod cursor;
mod drain;
mod entry_exit;
mod events;
mod explain;
#[cfg(test)]
mod explain_tests;
mod firing;
mod guard;
mod regions;
mod resolve;
#[cfg(test)]
mod tests;

use std::cell::Cell;

use crate::definition::{ActionRef, Definition, NodeId, NodeKind};
use crate::execution::{Event, Execution, Status};
use crate::pyvalue;
use crate::{Map, Value};

pub use explain::{explain, Considered, Explanation, Guard, Outcome, Reason, Target};
pub use guard::eval_predicate;
use guard::event_matches;
use resolve::{resolve, safe_teardown};

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
///
/// ```
/// use stm_core::dsl::load_definition_str;
/// use stm_core::engine::{self, Effect, NoActions};
/// use stm_core::Execution;
///
/// let defn = load_definition_str(
///     r#"
/// machine Checkout {
///   initial Prepare
///   orthogonal Prepare {
///     state Pack {
///       initial Packing
///       state Packing {}
///     }
///     state Bill {
///       initial Billing
///       state Billing {}
///     }
///   }
///   final Shipped success
///   from Prepare to Shipped
/// }
/// "#,
///     None,
///     None,
/// )?;
/// let mut exe = Execution::new("checkout-1", "Checkout");
/// let mut regions = Vec::new();
/// // a driver commits the execution, then carries out every effect
/// for effect in engine::start(&defn, &mut exe, 0.0, &mut NoActions)? {
///     match effect {
///         Effect::Spawn(children) => regions.extend(children.into_iter().map(|c| c.root_path)),
///         Effect::Emit { .. } | Effect::ScheduleTimer { .. } | Effect::CancelTimer { .. } => {}
///         Effect::Assigned(_) | Effect::Dropped(_) => {} // informational
///     }
/// }
/// // one child execution per region; the parent waits at the join
/// assert_eq!(regions, ["Prepare.Pack", "Prepare.Bill"]);
/// assert_eq!(exe.active_path.as_deref(), Some("Prepare"));
/// assert_eq!(exe.children.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
///
/// ```
/// use stm_core::dsl::load_definition_str;
/// use stm_core::engine::{self, Effect, NoActions};
/// use stm_core::{Execution, Status};
///
/// let defn = load_definition_str(
///     r#"
/// event Paid {}
/// machine Order {
///   initial Waiting
///   state Waiting { timeout 60 }
///   final Done success
///   final Abandoned failed
///   from Waiting to Done on Paid
///   from Waiting to Abandoned on Timeout
/// }
/// "#,
///     Some("Order"),
///     None,
/// )?;
/// let mut exe = Execution::new("order-1", "Order");
/// let effects = engine::start(&defn, &mut exe, 1000.0, &mut NoActions)?;
/// assert_eq!(exe.status, Status::Running);
/// assert_eq!(exe.active_path.as_deref(), Some("Waiting"));
/// // entering `Waiting` armed its timeout: the caller makes the timer durable
/// let timer = Effect::ScheduleTimer {
///     path: "Waiting".into(),
///     fire_at: 1060.0,
/// };
/// assert_eq!(effects, [timer]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
///
/// ```
/// use stm_core::dsl::load_definition_str;
/// use stm_core::engine::{self, Effect, NoActions};
/// use stm_core::{Event, Execution, Map, Status, Value};
///
/// let defn = load_definition_str(
///     r#"
/// event Paid { amount: int }
/// machine Order {
///   context { total: int = 0 }
///   initial Waiting
///   state Waiting {}
///   final Done success
///   from Waiting to Done on Paid where event.amount >= 10 set context.total = event.amount
/// }
/// "#,
///     None,
///     None,
/// )?;
/// let mut exe = Execution::new("order-1", "Order");
/// defn.with_context_defaults(&mut exe.context);
/// engine::start(&defn, &mut exe, 0.0, &mut NoActions)?;
/// let paid = |amount: i64| {
///     let mut data = Map::new();
///     data.insert("amount".into(), Value::from(amount));
///     Event::with_data("Paid", data)
/// };
///
/// // the guard does not hold: no transition, which is not an error
/// let effects = engine::process(&defn, &mut exe, &paid(5), 1.0, &mut NoActions)?;
/// assert!(matches!(effects[..], [Effect::Dropped(_)]));
/// assert_eq!(exe.active_path.as_deref(), Some("Waiting"));
///
/// // it does: the `set` applies and the final state ends the execution
/// engine::process(&defn, &mut exe, &paid(12), 2.0, &mut NoActions)?;
/// assert_eq!(exe.context.get("total"), Some(&Value::from(12)));
/// assert_eq!(exe.status, Status::Done);
/// assert_eq!(exe.outcome.as_deref(), Some("success"));
/// assert_eq!(exe.processed_events, 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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

// --- the step -------------------------------------------------------------------

// One `start` or `process` call. Its methods are split by concern over the child
// modules: `cursor` (where it stands), `resolve` and `guard` (which transition),
// `firing` and `entry_exit` (taking it), `regions` (child executions), `drain` (to
// quiescence) and `events` (what each event does).

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
