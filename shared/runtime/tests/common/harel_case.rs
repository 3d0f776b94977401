//! Running one harel-style case (a machine, a seed, `send`/`advance` steps) through our
//! driver, the way `tests/conformance/generate.py` runs it through harel (see the README
//! there): a `MemoryStore`, a `ManualClock` at 1000.0, traces on, the execution "exe".
//!
//! Shared by `conformance.rs` (harel's goldens) and `differential_fuzz.rs` (harel run live
//! on generated machines); both include this file with `#[path = "common/harel_case.rs"]`.
#![allow(dead_code)]

use std::sync::Arc;

use serde_json::{json, Value};
use stm_core::engine::ActionError;
use stm_core::{Definition, Event, Execution, Map};
use stm_runtime::{ActionInput, ActionRegistry, Definitions, Driver, ManualClock};
use stm_store::MemoryStore;

/// The id every case creates its execution under.
pub const ROOT_ID: &str = "exe";

/// The Rust twins of `conf_actions.py` (same names, same semantics).
pub fn conf_actions() -> ActionRegistry {
    fn input<'a>(i: &'a ActionInput<'_>, name: &str) -> Option<&'a Value> {
        i.inputs.get(name)
    }
    fn push(ctx: &mut Map, key: &str, v: Value) {
        let entry = ctx.entry(key.to_string()).or_insert_with(|| json!([]));
        if let Value::Array(items) = entry {
            items.push(v);
        }
    }
    let mut r = ActionRegistry::with_builtins();
    r.register("conf_actions.log", |i| {
        let label = input(&i, "label").cloned().unwrap_or(Value::Null);
        push(i.context, "log", label);
        Ok(Value::Null)
    });
    r.register("conf_actions.seen", |i| {
        let kind = i.event.map_or(Value::Null, |e| Value::from(e.kind.as_str()));
        push(i.context, "seen", kind);
        Ok(Value::Null)
    });
    r.register("conf_actions.incr", |i| {
        let key = input(&i, "key")
            .and_then(Value::as_str)
            .unwrap_or("n")
            .to_string();
        let by = input(&i, "by").cloned().unwrap_or(json!(1));
        let cur = i.context.get(&key).cloned().unwrap_or(json!(0));
        let next = py_add(&cur, &by)?;
        i.context.insert(key, next);
        Ok(Value::Null)
    });
    r.register("conf_actions.put", |i| {
        let key = input(&i, "key")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let value = input(&i, "value").cloned().unwrap_or(Value::Null);
        i.context.insert(key, value);
        Ok(Value::Null)
    });
    r.register("conf_actions.copy_event", |i| {
        let field = input(&i, "field")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let into = match input(&i, "into").and_then(Value::as_str) {
            Some(s) if !s.is_empty() => s.to_string(),
            _ => field.clone(),
        };
        let v = i
            .event
            .and_then(|e| e.data.get(&field).cloned())
            .unwrap_or(Value::Null);
        i.context.insert(into, v);
        Ok(Value::Null)
    });
    r.register("conf_actions.fail", |i| {
        let msg = input(&i, "message")
            .and_then(Value::as_str)
            .unwrap_or("boom")
            .to_string();
        Err(ActionError::new("RuntimeError", msg))
    });
    r.register("conf_actions.fail_when", |i| {
        let key = input(&i, "key").and_then(Value::as_str).unwrap_or_default();
        if i.context.get(key) == Some(&Value::Bool(true)) {
            let msg = input(&i, "message")
                .and_then(Value::as_str)
                .unwrap_or("flag set")
                .to_string();
            return Err(ActionError::new("ValueError", msg));
        }
        Ok(Value::Null)
    });
    r.register("conf_actions.pick", |i| {
        Ok(input(&i, "value").cloned().unwrap_or(Value::Null))
    });
    r.register("conf_actions.pick_ctx", |i| {
        let key = input(&i, "key").and_then(Value::as_str).unwrap_or_default();
        Ok(i.context.get(key).cloned().unwrap_or(Value::Null))
    });
    r.register("conf_actions.pick_event", |i| {
        let field = input(&i, "field").and_then(Value::as_str).unwrap_or_default();
        Ok(i.event
            .and_then(|e| e.data.get(field).cloned())
            .unwrap_or(Value::Null))
    });
    r.register("conf_actions.noop", |_| Ok(Value::Null));
    r
}

/// Python's `a + b` on JSON values, as `conf_actions.incr` does it (`ctx.get(key, 0) +
/// by`): bools are ints, strings and lists concatenate, anything else is Python's
/// `TypeError` (with its message).
fn py_add(a: &Value, b: &Value) -> Result<Value, ActionError> {
    use stm_core::pyvalue::{arith, type_name, ArithError};
    let as_int = |v: &Value| match v {
        Value::Bool(x) => json!(i64::from(*x)),
        other => other.clone(),
    };
    match (a, b) {
        (Value::Number(_) | Value::Bool(_), Value::Number(_) | Value::Bool(_)) => {
            arith(stm_core::definition::ArithOp::Add, &as_int(a), &as_int(b)).map_err(|e| match e {
                ArithError::Raised(n) => ActionError::new(n.type_name, n.message),
                ArithError::Expression(m) => ActionError::new("TypeError", m),
                other => ActionError::new("TypeError", format!("{other:?}")),
            })
        }
        (Value::String(x), Value::String(y)) => Ok(Value::from(format!("{x}{y}"))),
        (Value::Array(x), Value::Array(y)) => Ok(Value::Array(x.iter().chain(y).cloned().collect())),
        (Value::String(_), other) => Err(ActionError::new(
            "TypeError",
            format!("can only concatenate str (not \"{}\") to str", type_name(other)),
        )),
        (Value::Array(_), other) => Err(ActionError::new(
            "TypeError",
            format!("can only concatenate list (not \"{}\") to list", type_name(other)),
        )),
        _ => Err(ActionError::new(
            "TypeError",
            format!(
                "unsupported operand type(s) for +: '{}' and '{}'",
                type_name(a),
                type_name(b)
            ),
        )),
    }
}

/// Replace every 32-hex-digit id inside strings by `<uuid>`, as generate.py does.
pub fn normalize(v: &mut Value) {
    match v {
        Value::String(s) => {
            let bytes = s.as_bytes();
            let mut out = String::with_capacity(s.len());
            let mut i = 0;
            while i < bytes.len() {
                let run = bytes[i..]
                    .iter()
                    .take_while(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
                    .count();
                if run == 32 {
                    out.push_str("<uuid>");
                    i += 32;
                } else if run > 0 {
                    out.push_str(&s[i..i + run]);
                    i += run;
                } else {
                    let ch = s[i..].chars().next().unwrap_or(' ');
                    out.push(ch);
                    i += ch.len_utf8();
                }
            }
            *s = out;
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        Value::Object(map) => map.values_mut().for_each(normalize),
        _ => {}
    }
}

pub fn error_text(e: &stm_runtime::DriverError) -> String {
    format!("{}: {}", e.python_type(), e)
}

/// What a case ended as on our side, in the shape of generate.py's `expected` block
/// (uuids normalised).
#[derive(Debug)]
pub struct CaseRun {
    pub create_error: Value,
    pub transcript: Vec<String>,
    pub step_errors: Vec<Value>,
    pub root: Value,
    pub children: Vec<Value>,
    pub traces: Value,
    /// Every stored execution (root first, then the others by id) with its context
    /// (normalised), for byte comparisons.
    pub contexts: Vec<(String, Map)>,
}

/// Run `steps` against `defn` from `seed`, as generate.py's `run_case` does with harel.
/// `Err` only for a broken case (an unknown step, a store failure).
pub async fn run_case(defn: Definition, seed: Option<Map>, steps: &[Value]) -> Result<CaseRun, String> {
    let actions = conf_actions();
    actions.check(&defn).map_err(|e| e.to_string())?;
    let defn_id = defn.id.clone();
    let mut defs = Definitions::new();
    defs.register(defn);
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(ManualClock::new(1000.0));
    let driver = Driver::new(store.clone(), defs, actions)
        .with_clock(clock.clone())
        .with_trace(true);

    let mut transcript = Vec::new();
    let mut step_errors = Vec::new();
    let create_error = match driver.create(&defn_id, seed, Some(ROOT_ID)).await {
        Ok(exe) => {
            transcript.push(format!("{:<20} -> {}", "(start)", path_text(&exe.active_path)));
            None
        }
        Err(e) => Some(error_text(&e)),
    };
    if create_error.is_none() {
        for step in steps {
            let (label, result) = if let Some(send) = step.get("send") {
                let mut event = Event::with_data(
                    send["kind"].as_str().unwrap_or_default(),
                    send["data"].as_object().cloned().unwrap_or_default(),
                );
                event.id = send["id"].as_str().unwrap_or_default().to_string();
                (
                    event.kind.clone(),
                    driver.process(ROOT_ID, &event).await.map(|_| ()),
                )
            } else if let Some(secs) = step.get("advance").and_then(Value::as_f64) {
                clock.advance(secs);
                let label = format!("(advance {}s)", py_g(secs));
                (label, driver.fire_due_timers().await.map(|_| ()))
            } else {
                return Err(format!("unknown step {step}"));
            };
            let exe = store.all_executions().into_iter().find(|e| e.id == ROOT_ID);
            let active = exe.and_then(|e| e.active_path);
            match result {
                Ok(()) => {
                    transcript.push(format!("{label:<20} -> {}", path_text(&active)));
                    step_errors.push(Value::Null);
                }
                Err(e) => {
                    transcript.push(format!("error: {}", e.python_type()));
                    step_errors.push(Value::from(error_text(&e)));
                }
            }
        }
        let exe = store.all_executions().into_iter().find(|e| e.id == ROOT_ID);
        if let Some(exe) = exe {
            transcript.push(format!(
                "status: {}  outcome: {}",
                exe.status,
                exe.outcome.as_deref().unwrap_or("None")
            ));
        }
    }

    let all = store.all_executions();
    let mut root = all.iter().find(|e| e.id == ROOT_ID).map_or(Value::Null, to_value);
    let mut children: Vec<Value> = all.iter().filter(|e| e.id != ROOT_ID).map(to_value).collect();
    let mut traces = Map::new();
    let mut ids: Vec<&str> = vec![ROOT_ID];
    ids.extend(all.iter().filter(|e| e.id != ROOT_ID).map(|e| e.id.as_str()));
    for id in &ids {
        let steps = stm_store::ExecutionStore::read_trace(&*store, id)
            .await
            .map_err(|e| e.to_string())?;
        if all.iter().any(|e| e.id == *id) {
            traces.insert(
                id.to_string(),
                Value::from(steps.into_iter().map(Value::Object).collect::<Vec<_>>()),
            );
        }
    }
    normalize(&mut root);
    children.iter_mut().for_each(normalize);
    let mut traces = Value::Object(traces);
    normalize(&mut traces);
    let mut contexts = Vec::new();
    for id in ids {
        if let Some(exe) = all.iter().find(|e| e.id == id) {
            let mut ctx = Value::Object(exe.context.clone());
            normalize(&mut ctx);
            if let Value::Object(ctx) = ctx {
                contexts.push((id.to_string(), ctx));
            }
        }
    }
    Ok(CaseRun {
        create_error: create_error.map_or(Value::Null, Value::from),
        transcript,
        step_errors,
        root,
        children,
        traces,
        contexts,
    })
}

/// The parts of `ours` that differ from harel's `expected` block, in the order
/// create_error, transcript, step_errors, root, children, traces: `(what, ours, harel)`.
/// `same` decides equality of two values.
pub fn differences(
    ours: &CaseRun,
    expected: &Value,
    same: impl Fn(&Value, &Value) -> bool,
) -> Vec<(&'static str, Value, Value)> {
    let mut out = Vec::new();
    let mut check = |what: &'static str, ours: Value, theirs: &Value| {
        if !same(&ours, theirs) {
            out.push((what, ours, theirs.clone()));
        }
    };
    check(
        "create_error",
        ours.create_error.clone(),
        &expected["create_error"],
    );
    check("transcript", json!(ours.transcript), &expected["transcript"]);
    check("step_errors", json!(ours.step_errors), &expected["step_errors"]);
    check("root", ours.root.clone(), &expected["root"]);
    check(
        "children",
        Value::Array(ours.children.clone()),
        &expected["children"],
    );
    let expected_traces = match &expected["traces"] {
        Value::Object(m) if m.is_empty() => json!({}),
        other => other.clone(),
    };
    // harel dumps no trace for executions a failed create never stored
    let nothing_stored = expected_traces == json!({}) && !expected["create_error"].is_null();
    if !nothing_stored {
        check("traces", ours.traces.clone(), &expected_traces);
    }
    out
}

/// An execution as harel dumps it, `model_dump(mode="json")`: pydantic's JSON mode
/// writes a non-finite float (`inf`, `nan`) as `null`. (The context's own bytes, where
/// harel keeps `Infinity`, are compared separately by the fuzzer.) Our own fields, which
/// harel's model does not have (the version pin), are left out.
fn to_value(e: &Execution) -> Value {
    fn nulls_for_non_finite(v: &mut Value) {
        match v {
            Value::Number(_)
                if matches!(
                    stm_core::pyjson::dumps(v).as_str(),
                    "Infinity" | "-Infinity" | "NaN"
                ) =>
            {
                *v = Value::Null
            }
            Value::Array(items) => items.iter_mut().for_each(nulls_for_non_finite),
            Value::Object(map) => map.values_mut().for_each(nulls_for_non_finite),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(e)
        .ok()
        .or_else(|| stm_core::pyjson::loads(&stm_core::pyjson::to_pydantic_json(e)).ok())
        .unwrap_or(Value::Null);
    nulls_for_non_finite(&mut v);
    if let Value::Object(fields) = &mut v {
        for ours in stm_core::execution::FIELDS_HAREL_IGNORES {
            fields.shift_remove(ours);
        }
    }
    v
}

fn path_text(p: &Option<String>) -> String {
    p.clone().unwrap_or_else(|| "None".into())
}

/// Python's `format(x, 'g')` for the few step sizes the cases use.
pub fn py_g(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}
