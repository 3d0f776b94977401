//! Explained transitions: for one event and the execution as it stands before the step,
//! every transition the event could take, in the order the engine considers them, each
//! with its guard's value and why it was or was not taken.
//!
//! A separate, read-only pass rather than a sink threaded through the step: the step's
//! hot path stays exactly as it is (an explanation costs nothing when nobody asks), and
//! a trace can be explained afterwards from the state each step started from.
//!
//! Re-evaluating is safe because everything a selection reads is pure: a guard and a
//! `choose` branch are [`Predicate`](crate::definition::Predicate)s over the event's data
//! and the context, evaluated by the same functions the step uses, and never call an
//! action. The one thing an explanation does not evaluate is a `select`: its target comes
//! from an action at run time, so the explanation names the action and leaves it uncalled
//! (no action ever runs twice). What follows the event's own transition (the drain's
//! automatic transitions, re-delivered deferred events) is not part of the explanation.
//!
//! The order is [`resolve`](super::resolve)'s: from the active state up to the
//! execution's root (for a `Timeout`, from the state that timed out), at each level the
//! transitions of the enclosing scope whose source is that level's state, in declaration
//! order; the first whose event filter and guard hold (and, for a `choose`, that has
//! somewhere to go) is taken. The engine's tests check that the two agree.

use std::fmt;

use super::cursor::path_is_active;
use super::guard::{choice_target, eval_predicate, event_matches};
use super::TTL_PATH;
use crate::definition::{Definition, NodeId, Transition};
use crate::execution::{Event, Execution, Status};
use crate::render::predicate_label;
use crate::{Map, Value};

/// Why one transition was or was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// The first whose filter and guard hold: the step fires it.
    Taken,
    /// Its guard does not hold.
    GuardFalse,
    /// Its guard holds but no branch of its `choose` does, and it has no `else`.
    NoBranch,
    /// Its source is not the active state nor one of its ancestors.
    StateNotActive,
    /// A transition of an inner state was taken first.
    OutrankedByInner,
    /// A transition of the same state declared before it was taken.
    OutrankedByEarlier,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Taken => "taken",
            Reason::GuardFalse => "guard false",
            Reason::NoBranch => "no branch of its choose holds",
            Reason::StateNotActive => "state not active",
            Reason::OutrankedByInner => "outranked by an inner transition",
            Reason::OutrankedByEarlier => "outranked by an earlier transition",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A guard's text (as the diagrams write it) and its value on the event and context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    pub text: String,
    pub value: bool,
}

/// Where a transition goes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Target {
    State(String),
    /// A `choose`: its branches in order with their guards, its `else`, and the branch
    /// it picks now (`None`: none, and no `else`).
    Choose {
        branches: Vec<(Guard, String)>,
        default: Option<String>,
        chosen: Option<String>,
    },
    /// A `select`: the action named picks the target when the step runs (an explanation
    /// does not call it).
    Select(String),
}

/// One transition triggered by the event's kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Considered {
    /// Its place in the engine's order (1 first); `None` for one never considered
    /// (its state is not active).
    pub order: Option<usize>,
    pub source: String,
    pub target: Target,
    /// The event kinds it is triggered by (`A|B`).
    pub kinds: String,
    /// `None`: it has no guard.
    pub guard: Option<Guard>,
    pub reason: Reason,
}

/// What the event does when no transition is taken, or why nothing was considered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// One of the considered transitions is taken.
    Taken,
    /// No transition: a `defer` in this state (the active one or an ancestor) holds it.
    Deferred { by: String },
    /// No transition for the event: the active state's `on activity` runs.
    Activity { state: String },
    /// No transition for the event: it is dropped.
    NoTransition,
    /// The execution takes no domain event in this status.
    NotRunning(Status),
    /// A control event, or a case of one, that selects no transition: what it does.
    Control(String),
}

/// Every transition an event could take, in the engine's order, and what the event does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    pub event: String,
    /// The active state before the step.
    pub state: Option<String>,
    /// The considered transitions in order, then those whose state is not active.
    pub considered: Vec<Considered>,
    pub outcome: Outcome,
    /// The taken transition's scope and index, for the tests that hold this to the step.
    taken_at: Option<(NodeId, usize)>,
}

/// Explain what `event` does to `exe` (as it stands before the step) on `defn`: every
/// transition triggered by the event's kind, in the order the engine considers them,
/// with its guard's value and why it was or was not taken. Pure: nothing is changed and
/// no action is called (see the module's notes).
///
/// ```
/// use stm_core::dsl::load_definition_str;
/// use stm_core::engine::{self, NoActions, Outcome, Reason};
/// use stm_core::{Event, Execution, Map, Value};
///
/// let defn = load_definition_str(
///     r#"
/// event Paid { amount: int }
/// machine Order {
///   initial Waiting
///   state Waiting {}
///   final Done success
///   final Small success
///   from Waiting to Done on Paid where event.amount >= 10
///   from Waiting to Small on Paid
/// }
/// "#,
///     None,
///     None,
/// )?;
/// let mut exe = Execution::new("order-1", "Order");
/// engine::start(&defn, &mut exe, 0.0, &mut NoActions)?;
/// let mut data = Map::new();
/// data.insert("amount".into(), Value::from(5));
/// let paid = Event::with_data("Paid", data);
///
/// let why = engine::explain(&defn, &exe, &paid);
/// let reasons: Vec<Reason> = why.considered.iter().map(|c| c.reason).collect();
/// assert_eq!(reasons, [Reason::GuardFalse, Reason::Taken]);
/// assert_eq!(why.outcome, Outcome::Taken);
/// assert_eq!(
///     why.to_string(),
///     "    1. Waiting -> Done on Paid [amount >= 10: false]: guard false\n\
///     \x20   2. Waiting -> Small on Paid [no guard]: taken\n"
/// );
/// // the explanation changed nothing: the step still takes the second transition
/// engine::process(&defn, &mut exe, &paid, 1.0, &mut NoActions)?;
/// assert_eq!(exe.active_path.as_deref(), Some("Small"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn explain(defn: &Definition, exe: &Execution, event: &Event) -> Explanation {
    let mut out = Explanation {
        event: event.kind.clone(),
        state: exe.active_path.clone(),
        considered: Vec::new(),
        outcome: Outcome::NoTransition,
        taken_at: None,
    };
    let control = |text: &str| Outcome::Control(text.to_string());
    out.outcome = match event.kind.as_str() {
        "Start" | "Reset" | "SetState" | "Finished" => control(control_text(&event.kind)),
        "Cancel" if exe.status.is_finished() => control("the execution has finished: Cancel does nothing"),
        "Cancel" => {
            let live = matches!(exe.status, Status::Running | Status::Cancelling);
            match active_node(defn, exe).filter(|_| live) {
                Some(active) if out.walk(defn, exe, event, active) => Outcome::Taken,
                _ => control("no transition takes Cancel: the execution ends CANCELLED"),
            }
        }
        "Timeout" => match event.data.get("path").and_then(Value::as_str) {
            Some(TTL_PATH) => control("the machine's ttl expired: Expired tears it down"),
            None => control("a Timeout without a path: ignored"),
            Some(path) => match defn.get(path) {
                Some(node) if exe.status == Status::Running && path_is_active(defn, exe, path) => {
                    if out.walk(defn, exe, event, node) {
                        Outcome::Taken
                    } else {
                        Outcome::NoTransition
                    }
                }
                _ => Outcome::Control(format!("a stale timer: {path} is not active: ignored")),
            },
        },
        _ if exe.status != Status::Running => Outcome::NotRunning(exe.status),
        _ => match active_node(defn, exe) {
            None => control("the execution has no active state"),
            Some(active) if out.walk(defn, exe, event, active) => Outcome::Taken,
            Some(active) => match super::events::deferring_state(defn, active, &event.kind) {
                Some(by) => Outcome::Deferred {
                    by: defn.path(by).to_string(),
                },
                None if defn.node(active).on_activity.is_some() => Outcome::Activity {
                    state: defn.path(active).to_string(),
                },
                None => Outcome::NoTransition,
            },
        },
    };
    out
}

impl Explanation {
    /// The taken transition's scope and index, for the engine's tests.
    #[cfg(test)]
    pub(super) fn taken_at(&self) -> Option<(NodeId, usize)> {
        self.taken_at
    }

    /// Walk from `from` up to the execution's root as the engine does, recording every
    /// transition triggered by the event's kind, then those of states not active. Whether
    /// one was taken.
    fn walk(&mut self, defn: &Definition, exe: &Execution, event: &Event, from: NodeId) -> bool {
        let Some(root) = defn.get(&exe.root_path) else {
            return false;
        };
        let context = &exe.context;
        let mut seen = Vec::new();
        let mut cur = from;
        let mut taken_level = None;
        let mut level = 0;
        while let Some(scope) = defn.node(cur).parent.filter(|_| cur != root) {
            for (i, t) in defn.node(scope).transitions.iter().enumerate() {
                if t.source != cur || !triggered_by(t, event) {
                    continue;
                }
                seen.push((scope, i));
                let reason = match taken_level {
                    Some(at) if at < level => Reason::OutrankedByInner,
                    Some(_) => Reason::OutrankedByEarlier,
                    // the step's own test: the two cannot disagree
                    None if event_matches(t, event, context) => {
                        taken_level = Some(level);
                        self.taken_at = Some((scope, i));
                        Reason::Taken
                    }
                    None => match guard_of(t, &event.data, context) {
                        Some(Guard { value: false, .. }) => Reason::GuardFalse,
                        _ => Reason::NoBranch,
                    },
                };
                let order = Some(seen.len());
                self.push(defn, t, &event.data, context, order, reason);
            }
            cur = scope;
            level += 1;
        }
        // the same kind's transitions elsewhere in this execution's branch
        for (n, node) in defn.nodes.iter().enumerate() {
            let scope = NodeId(n);
            if !defn.is_descendant(scope, root) {
                continue;
            }
            for (i, t) in node.transitions.iter().enumerate() {
                if triggered_by(t, event) && !seen.contains(&(scope, i)) {
                    self.push(defn, t, &event.data, context, None, Reason::StateNotActive);
                }
            }
        }
        self.taken_at.is_some()
    }

    fn push(
        &mut self,
        defn: &Definition,
        t: &Transition,
        data: &Map,
        context: &Map,
        order: Option<usize>,
        reason: Reason,
    ) {
        self.considered.push(Considered {
            order,
            source: defn.path(t.source).to_string(),
            target: target_of(defn, t, data, context),
            kinds: t
                .event_filter
                .as_ref()
                .map_or_else(String::new, |f| f.kinds.join("|")),
            guard: guard_of(t, data, context),
            reason,
        });
    }
}

fn control_text(kind: &str) -> &'static str {
    match kind {
        "Start" => "Start starts a PENDING execution: it enters the initial state",
        "Reset" => "Reset restarts the execution from its initial state",
        "SetState" => "SetState moves the execution to the state it names",
        _ => "Finished records a child's outcome (a submachine's becomes Returned)",
    }
}

fn active_node(defn: &Definition, exe: &Execution) -> Option<NodeId> {
    defn.get(exe.active_path.as_deref()?)
}

fn triggered_by(t: &Transition, event: &Event) -> bool {
    t.event_filter
        .as_ref()
        .is_some_and(|f| f.kinds.iter().any(|k| k == &event.kind))
}

fn guard_of(t: &Transition, data: &Map, context: &Map) -> Option<Guard> {
    let predicate = t.event_filter.as_ref()?.predicate.as_ref()?;
    Some(Guard {
        text: predicate_label(predicate),
        value: eval_predicate(predicate, data, context),
    })
}

fn target_of(defn: &Definition, t: &Transition, data: &Map, context: &Map) -> Target {
    if let Some(choice) = &t.choice {
        let path = |n: NodeId| defn.path(n).to_string();
        return Target::Choose {
            branches: choice
                .branches
                .iter()
                .map(|(guard, to)| {
                    let value = eval_predicate(guard, data, context);
                    let text = predicate_label(guard);
                    (Guard { text, value }, path(*to))
                })
                .collect(),
            default: choice.default.map(path),
            chosen: choice_target(t, data, context).map(path),
        };
    }
    if let Some(selector) = &t.selector {
        return Target::Select(selector.action.function.clone());
    }
    Target::State(t.target.map_or_else(String::new, |n| defn.path(n).to_string()))
}

/// Indented lines, one per transition (a `choose` adds one per branch), then what the
/// event does when none was taken.
impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.considered {
            let order = c.order.map_or_else(|| "- ".to_string(), |n| format!("{n}."));
            let to = match &c.target {
                Target::State(path) => path.as_str(),
                Target::Choose { .. } => "choose",
                Target::Select(action) => action.as_str(),
            };
            let select = if matches!(c.target, Target::Select(_)) {
                "select "
            } else {
                ""
            };
            let guard = match &c.guard {
                Some(g) => format!("{}: {}", g.text, g.value),
                None => "no guard".to_string(),
            };
            writeln!(
                f,
                "    {order} {} -> {select}{to} on {} [{guard}]: {}",
                c.source, c.kinds, c.reason
            )?;
            if let Target::Choose {
                branches,
                default,
                chosen,
            } = &c.target
            {
                let mut picked = false;
                for (g, to) in branches {
                    let mark = if g.value && !picked { " (chosen)" } else { "" };
                    picked |= g.value;
                    writeln!(f, "         when {}: {} -> {to}{mark}", g.text, g.value)?;
                }
                if let Some(to) = default {
                    let mark = if !picked && chosen.is_some() {
                        " (chosen)"
                    } else {
                        ""
                    };
                    writeln!(f, "         else -> {to}{mark}")?;
                }
            }
        }
        match &self.outcome {
            Outcome::Taken => Ok(()),
            Outcome::Deferred { by } => {
                writeln!(f, "    => event deferred: {by} defers {}", self.event)
            }
            Outcome::Activity { state } => writeln!(
                f,
                "    => no transition for the event: the on activity of {state} runs"
            ),
            Outcome::NoTransition => {
                writeln!(f, "    => no transition for the event: it is dropped")
            }
            Outcome::NotRunning(status) => writeln!(
                f,
                "    => the execution is {status}: it takes no events (no transition considered)"
            ),
            Outcome::Control(text) => writeln!(f, "    => {text}"),
        }
    }
}
