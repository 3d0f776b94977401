//! The action registry: handler names (as a `.stm` file binds them, e.g.
//! `payments.charge` or `harel.lib.exponential_backoff`) mapped to Rust functions.
//!
//! An action receives the execution's live context (which it may change), the
//! triggering event, its bound inputs and a stable idempotency key, and returns a
//! value (used by selectors). A failure is an [`ActionError`] with a type name and a
//! message, as harel records a Python exception.
//!
//! Actions are plain functions ([`ActionRegistry::register`]) or async ones
//! ([`ActionRegistry::register_async`]), and both read the registry's shared
//! [`ActionState`] (SDK clients built once at init, the user's own configuration), as
//! axum handlers read `State`.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use stm_core::engine::ActionError;
use stm_core::pynum::{self, Num};
use stm_core::pyvalue;

// Python's operators, as the harel.lib built-ins apply them
mod python_ops;
use stm_core::{Definition, Event, Map, Value};

/// What an action gets.
#[derive(Debug)]
pub struct ActionInput<'a> {
    /// The execution's context, live: changes stick.
    pub context: &'a mut Map,
    /// The triggering event; `None` on start and on automatic transitions.
    pub event: Option<&'a Event>,
    /// The inputs bound in the `.stm` file (`on enter charge(amount: 10)`).
    pub inputs: &'a Map,
    /// `{execution_id}:{event id or "start"}:{index}:{action}`: the same on every
    /// redelivery of the same event, so a side effect can be made effect-once.
    pub idempotency_key: &'a str,
    pub execution_id: &'a str,
    /// The registry's shared state ([`ActionRegistry::with_state`]); read it with
    /// [`ActionInput::state`].
    pub state: &'a ActionState,
}

impl<'a> ActionInput<'a> {
    /// The shared value of type `T` the registry was given with
    /// [`ActionRegistry::with_state`] (or that the runtime provides: the worker gives
    /// its `aws_sdk_dynamodb::Client` and `aws_sdk_sqs::Client`). A missing one is an
    /// action error naming the type, so `?` works.
    pub fn state<T: Any + Send + Sync>(&self) -> Result<&'a T, ActionError> {
        self.state.get::<T>().ok_or_else(|| {
            ActionError::new(
                "LookupError",
                format!(
                    "no shared state of type {} was given to the action registry: add it with \
                     ActionRegistry::with_state",
                    std::any::type_name::<T>()
                ),
            )
        })
    }
}

/// Values shared by every action, one per type, as axum's `State`: built once (at a
/// Lambda's init) and read by each call with [`ActionInput::state`].
#[derive(Clone, Default)]
pub struct ActionState {
    values: HashMap<TypeId, (&'static str, Arc<dyn Any + Send + Sync>)>,
}

impl ActionState {
    /// Keep `value`, replacing an earlier value of the same type.
    pub fn insert<T: Any + Send + Sync>(&mut self, value: T) {
        self.values
            .insert(TypeId::of::<T>(), (std::any::type_name::<T>(), Arc::new(value)));
    }

    /// The value of type `T`, if one was given.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|(_, value)| value.downcast_ref::<T>())
    }

    /// Whether a value of type `T` was given.
    pub fn contains<T: Any + Send + Sync>(&self) -> bool {
        self.values.contains_key(&TypeId::of::<T>())
    }
}

impl std::fmt::Debug for ActionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&str> = self.values.values().map(|(name, _)| *name).collect();
        names.sort_unstable();
        f.debug_set().entries(names).finish()
    }
}

pub type ActionFn = Arc<dyn Fn(ActionInput<'_>) -> Result<Value, ActionError> + Send + Sync>;

/// Handler name -> function, with the state the functions share.
#[derive(Clone, Default)]
pub struct ActionRegistry {
    actions: BTreeMap<String, ActionFn>,
    state: ActionState,
}

impl std::fmt::Debug for ActionRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActionRegistry")
            .field("actions", &self.actions.keys().collect::<Vec<_>>())
            .field("state", &self.state)
            .finish()
    }
}

/// Actions a definition uses that nothing provides.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "machine {machine}: unbound actions: {} (register them in the worker's ActionRegistry, or bind \
     them with STM_ACTIONS; on `stm local` or `stm run`, serve the worker's actions with \
     `cargo run -p <project>-worker -- serve-actions` and export the STM_ACTIONS line it prints)",
    names.join(", ")
)]
pub struct UnboundActions {
    pub machine: String,
    pub names: Vec<String>,
}

impl ActionRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        ActionRegistry::default()
    }

    /// A registry holding harel's `harel.lib.*` built-ins under their exact names.
    pub fn with_builtins() -> Self {
        let mut r = ActionRegistry::new();
        r.register("harel.lib.exponential_backoff", exponential_backoff);
        r.register("harel.lib.linear_backoff", linear_backoff);
        r.register("harel.lib.reset_backoff", reset_backoff);
        r.register("harel.lib.join_success", join_success);
        r
    }

    /// Bind `name` (as a `.stm` file calls it: `on enter orders.total()`) to `f`. The
    /// action reads and may change the live context; its value matters to selectors; an
    /// error (any `std::error::Error`, with `?`) is routed by `on error` on its type name.
    ///
    /// ```
    /// use stm_runtime::ActionRegistry;
    ///
    /// let mut actions = ActionRegistry::with_builtins();
    /// actions.register("orders.count", |input| {
    ///     let raw = input.inputs.get("of").and_then(|v| v.as_str()).unwrap_or("0");
    ///     let count: i64 = raw.parse()?; // a ParseIntError routes to `on error`
    ///     input.context.insert("count".into(), count.into());
    ///     Ok(serde_json::Value::Null)
    /// });
    /// assert!(actions.get("orders.count").is_some());
    /// ```
    pub fn register<F>(&mut self, name: impl Into<String>, f: F) -> &mut Self
    where
        F: Fn(ActionInput<'_>) -> Result<Value, ActionError> + Send + Sync + 'static,
    {
        self.actions.insert(name.into(), Arc::new(f));
        self
    }

    /// Bind `name` to an async function: an `async` closure that may await I/O (an SDK
    /// call, an HTTP request) while it holds the live context.
    ///
    /// The engine steps synchronously, so the call blocks the step until the future
    /// is done (`tokio::task::block_in_place`): it needs a multi-thread tokio runtime,
    /// which `#[tokio::main]` and the Lambda functions use. On a current-thread runtime
    /// the call is an action error that says so.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stm_runtime::ActionRegistry;
    ///
    /// struct Prices { euro_cents: u64 }
    ///
    /// let mut actions = ActionRegistry::with_builtins().with_state(Arc::new(Prices { euro_cents: 250 }));
    /// actions.register_async("orders.price", async |input| {
    ///     let prices = input.state::<Arc<Prices>>()?; // borrowed for the whole call
    ///     tokio::time::sleep(std::time::Duration::from_millis(1)).await; // an SDK call, say
    ///     input.context.insert("price".into(), prices.euro_cents.into());
    ///     Ok(serde_json::json!(prices.euro_cents))
    /// });
    /// assert!(actions.get("orders.price").is_some());
    /// ```
    pub fn register_async<F>(&mut self, name: impl Into<String>, f: F) -> &mut Self
    where
        F: AsyncFn(ActionInput<'_>) -> Result<Value, ActionError> + Send + Sync + 'static,
    {
        let name = name.into();
        let action = name.clone();
        self.register(name, move |input: ActionInput<'_>| {
            block_on_action(&action, f(input))
        })
    }

    /// Share `value` with every action (one value per type, read with
    /// [`ActionInput::state`]): an SDK client, a pool, the user's configuration. Wrap it
    /// in an `Arc` to share it cheaply; the registry is cloned per function.
    pub fn with_state<T: Any + Send + Sync>(mut self, value: T) -> Self {
        self.state.insert(value);
        self
    }

    /// Share `value` unless a value of its type is there already (what the runtime uses
    /// to offer its own clients without replacing the user's; only the `aws` build has
    /// clients to offer).
    #[cfg(feature = "aws")]
    pub(crate) fn provide<T: Any + Send + Sync>(&mut self, value: T) -> &mut Self {
        if !self.state.contains::<T>() {
            self.state.insert(value);
        }
        self
    }

    /// The shared state the actions read.
    pub fn state(&self) -> &ActionState {
        &self.state
    }

    pub fn get(&self, name: &str) -> Option<&ActionFn> {
        self.actions.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.actions.keys().map(String::as_str)
    }

    /// Every action `defn` (and its inline submachines) uses must be registered:
    /// checked when definitions load, so a typo fails at startup, not mid-step.
    pub fn check(&self, defn: &Definition) -> Result<(), UnboundActions> {
        let names: Vec<String> = defn
            .action_names()
            .into_iter()
            .filter(|n| !self.actions.contains_key(n))
            .collect();
        if names.is_empty() {
            Ok(())
        } else {
            Err(UnboundActions {
                machine: defn.id.clone(),
                names,
            })
        }
    }
}

/// Run an async action's future to its end from the engine's synchronous call, on the
/// caller's runtime so that clients built at init (bound to that runtime's I/O driver)
/// work inside it.
fn block_on_action<T>(
    action: &str,
    future: impl std::future::Future<Output = Result<T, ActionError>>,
) -> Result<T, ActionError> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| handle.block_on(future))
        }
        // blocking the only thread of a current-thread runtime would stop the very I/O
        // the future waits for
        Ok(_) => Err(ActionError::new(
            "RuntimeError",
            format!(
                "async action {action:?} needs a multi-thread tokio runtime (#[tokio::main], \
                 #[tokio::test(flavor = \"multi_thread\")] or Builder::new_multi_thread); \
                 this one is current-thread"
            ),
        )),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| {
                ActionError::new(
                    "RuntimeError",
                    format!("cannot start a runtime for {action:?}: {e}"),
                )
            })?
            .block_on(future),
    }
}

// --- harel.lib built-ins ---------------------------------------------------------

/// An input as given, or its default (harel's keyword defaults); the operators decide
/// what it may be, as Python's do.
fn input_or(inputs: &Map, name: &str, default: Value) -> Value {
    inputs.get(name).cloned().unwrap_or(default)
}

fn str_input(inputs: &Map, name: &str, default: &str) -> String {
    inputs
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or(default)
        .to_string()
}

/// `int(ctx.get(counter, 0))`, as Python converts: a bool or an int as it is, a float
/// truncated, a string parsed as an int literal; anything else is Python's error.
fn attempt(ctx: &Map, counter: &str) -> Result<i64, ActionError> {
    match ctx.get(counter) {
        None => Ok(0),
        Some(v) => py_int(v),
    }
}

/// Python's `int(v)` for the JSON values, within 64 bits.
fn py_int(v: &Value) -> Result<i64, ActionError> {
    let not_a_number = || {
        ActionError::new(
            "TypeError",
            format!(
                "int() argument must be a string, a bytes-like object or a real number, not '{}'",
                pyvalue::type_name(v)
            ),
        )
    };
    match v {
        Value::Bool(b) => Ok(i64::from(*b)),
        Value::Number(n) => match (n.as_i64(), Num::from_number(n)) {
            (Some(i), _) => Ok(i),
            (None, Num::Float(f)) => float_to_int(f, v),
            (None, _) => Err(beyond_64_bits(v)),
        },
        Value::String(text) => {
            let invalid = || {
                ActionError::new(
                    "ValueError",
                    format!("invalid literal for int() with base 10: {}", pyvalue::repr(v)),
                )
            };
            let digits = pynum::python_digits(text.trim(), false).ok_or_else(invalid)?;
            match digits.parse::<i64>() {
                Ok(i) => Ok(i),
                Err(_)
                    if digits
                        .trim_start_matches(['+', '-'])
                        .chars()
                        .all(|c| c.is_ascii_digit()) =>
                {
                    Err(beyond_64_bits(v))
                }
                Err(_) => Err(invalid()),
            }
        }
        _ => Err(not_a_number()),
    }
}

/// Python's `int(f)` for a float counter: truncated toward zero.
fn float_to_int(f: f64, v: &Value) -> Result<i64, ActionError> {
    if f.is_nan() {
        return Err(ActionError::new(
            "ValueError",
            "cannot convert float NaN to integer",
        ));
    }
    if f.is_infinite() {
        return Err(ActionError::new(
            "OverflowError",
            "cannot convert float infinity to integer",
        ));
    }
    // 2**63: the first float past i64
    if f.trunc().abs() < 9_223_372_036_854_775_808_f64 {
        Ok(f.trunc() as i64)
    } else {
        Err(beyond_64_bits(v))
    }
}

/// A counter Python would hold as a big int: stm's are 64-bit (a deliberate limit).
fn beyond_64_bits(v: &Value) -> ActionError {
    ActionError::new(
        "OverflowError",
        format!("the attempt counter {} does not fit in 64 bits", pyvalue::repr(v)),
    )
}

/// Python's `float(v)` for the JSON values.
fn py_float(v: &Value) -> Result<f64, ActionError> {
    pyvalue::py_float(v).map_err(|e| ActionError::new(e.type_name, e.message))
}

/// `min(delay, float(cap))` when a cap is given: Python's `min` keeps `delay` (and
/// its int-ness) unless the cap is strictly smaller.
fn capped(delay: Value, inputs: &Map) -> Result<Value, ActionError> {
    match inputs.get("cap") {
        None | Some(Value::Null) => Ok(delay),
        Some(cap) => {
            let cap = Num::Float(py_float(cap)?);
            let Some(d) = Num::from_value(&delay) else {
                return Err(ActionError::new(
                    "TypeError",
                    format!(
                        "'<' not supported between instances of 'float' and '{}'",
                        pyvalue::type_name(&delay)
                    ),
                ));
            };
            // exact, as Python compares a float with an int of any size
            Ok(if cap.py_cmp(&d) == Some(std::cmp::Ordering::Less) {
                cap.into_value()
            } else {
                delay
            })
        }
    }
}

fn next_backoff(
    input: ActionInput<'_>,
    delay_for: impl Fn(i64) -> Result<Value, ActionError>,
) -> Result<Value, ActionError> {
    let into = str_input(input.inputs, "into", "backoff");
    let counter = str_input(input.inputs, "counter", "__attempt");
    let n = attempt(input.context, &counter)?;
    let delay = capped(delay_for(n)?, input.inputs)?;
    input.context.insert(counter, Value::from(n + 1));
    input.context.insert(into, delay.clone());
    Ok(delay)
}

/// `base * factor ** attempt` (capped) into `context[into]`; bumps the counter.
pub fn exponential_backoff(input: ActionInput<'_>) -> Result<Value, ActionError> {
    let base = input_or(input.inputs, "base", pyvalue::float(1.0));
    let factor = input_or(input.inputs, "factor", pyvalue::float(2.0));
    next_backoff(input, |n| python_ops::mul(&base, &python_ops::pow(&factor, n)?))
}

/// `base + step * attempt` (capped) into `context[into]`; bumps the counter.
pub fn linear_backoff(input: ActionInput<'_>) -> Result<Value, ActionError> {
    let base = input_or(input.inputs, "base", pyvalue::float(1.0));
    let step = input_or(input.inputs, "step", pyvalue::float(1.0));
    next_backoff(input, |n| {
        python_ops::add(&base, &python_ops::mul(&step, &Value::from(n))?)
    })
}

/// Clear the attempt counter.
pub fn reset_backoff(input: ActionInput<'_>) -> Result<Value, ActionError> {
    let counter = str_input(input.inputs, "counter", "__attempt");
    input.context.shift_remove(&counter);
    Ok(Value::Null)
}

/// Selector over an orthogonal join's `region_results`: `"pass"` if every (`mode:
/// "all"`, the default) or some (any other `mode`, as harel compares `mode == "all"`)
/// region's outcome is the string `"success"`, else `"fail"`; no results is `"fail"`.
/// Results that are not a mapping of mappings raise harel's `AttributeError`, which
/// `on error` routes.
pub fn join_success(input: ActionInput<'_>) -> Result<Value, ActionError> {
    let no_attribute = |v: &Value, attribute: &str| {
        ActionError::new(
            "AttributeError",
            format!(
                "'{}' object has no attribute '{attribute}'",
                pyvalue::type_name(v)
            ),
        )
    };
    // each entry as (every instance it stands for succeeded, one of them did): a harel
    // entry stands for one region or instance, a counted join's for its whole fan-out
    let oks: Vec<(bool, bool)> = match input.context.get("region_results") {
        None => Vec::new(),
        Some(Value::Object(results)) => results
            .values()
            .map(|r| match r {
                Value::Object(r) => Ok(match counted_successes(r) {
                    Some((succeeded, total)) => (succeeded == total && total > 0, succeeded > 0),
                    None => {
                        let ok = r.get("outcome").and_then(Value::as_str) == Some("success");
                        (ok, ok)
                    }
                }),
                other => Err(no_attribute(other, "get")),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(no_attribute(other, "values")),
    };
    let all = match input.inputs.get("mode") {
        None => true,
        Some(mode) => mode.as_str() == Some("all"),
    };
    let passed = !oks.is_empty()
        && if all {
            oks.iter().all(|(every, _)| *every)
        } else {
            oks.iter().any(|(_, some)| *some)
        };
    Ok(Value::from(if passed { "pass" } else { "fail" }))
}

/// A counted join's `region_results` entry (`stm_core::CountedJoin::summary`): its
/// instances that succeeded, and how many there are.
fn counted_successes(entry: &Map) -> Option<(u64, u64)> {
    let Some(Value::Object(outcomes)) = entry.get("outcomes") else {
        return None;
    };
    let total = entry.get("total")?.as_u64()?;
    Some((
        outcomes.get("success").and_then(Value::as_u64).unwrap_or(0),
        total,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(f: fn(ActionInput<'_>) -> Result<Value, ActionError>, ctx: &mut Map, inputs: Value) -> Value {
        let inputs = inputs.as_object().cloned().unwrap_or_default();
        f(ActionInput {
            context: ctx,
            event: None,
            inputs: &inputs,
            idempotency_key: "k",
            execution_id: "e",
            state: &ActionState::default(),
        })
        .expect("action")
    }

    #[test]
    fn exponential_backoff_keeps_python_int_float_typing() {
        let mut ctx = Map::new();
        assert_eq!(
            call(
                exponential_backoff,
                &mut ctx,
                json!({"base": 5, "factor": 2, "cap": 12})
            ),
            json!(5)
        );
        assert_eq!(
            call(
                exponential_backoff,
                &mut ctx,
                json!({"base": 5, "factor": 2, "cap": 12})
            ),
            json!(10)
        );
        assert_eq!(
            call(
                exponential_backoff,
                &mut ctx,
                json!({"base": 5, "factor": 2, "cap": 12})
            ),
            json!(12.0)
        );
        assert_eq!(ctx.get("__attempt"), Some(&json!(3)));
        let mut fresh = Map::new();
        assert_eq!(call(exponential_backoff, &mut fresh, json!({})), json!(1.0));
    }

    #[test]
    fn join_success_modes() {
        let mut ctx = json!({"region_results": {"A": {"outcome": "success"}, "B": {"outcome": "failed"}}})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            call(join_success, &mut ctx, json!({"mode": "all"})),
            json!("fail")
        );
        assert_eq!(
            call(join_success, &mut ctx, json!({"mode": "any"})),
            json!("pass")
        );
    }

    /// A counted join's one entry decides `join all` and `join any` as harel's entries,
    /// one per instance, would: every mix of outcomes over one to six instances.
    #[test]
    fn join_success_reads_a_counted_join_as_its_instances() {
        for n in 1..=6u64 {
            for mask in 0..(1u32 << n) {
                let mut join = stm_core::CountedJoin::new("Fan".into(), "p:Fan:0:".into(), "Fan".into(), n);
                let mut harel = Map::new();
                let empty = Map::new();
                for i in 0..n {
                    let outcome = if mask & (1 << i) != 0 { "success" } else { "failed" };
                    join.record(
                        i,
                        stm_core::execution::counted_join::Report {
                            outcome: Some(outcome),
                            result: &empty,
                        },
                    );
                    harel.insert(format!("Fan:{i}"), json!({ "outcome": outcome }));
                }
                for mode in ["all", "any"] {
                    let mut by_instance = Map::new();
                    by_instance.insert("region_results".into(), Value::Object(harel.clone()));
                    let mut counted = Map::new();
                    counted.insert("region_results".into(), json!({ "Fan": join.summary() }));
                    assert_eq!(
                        call(join_success, &mut counted, json!({ "mode": mode })),
                        call(join_success, &mut by_instance, json!({ "mode": mode })),
                        "join {mode} over {n} instances, successes {mask:b}"
                    );
                }
            }
        }
    }
}
