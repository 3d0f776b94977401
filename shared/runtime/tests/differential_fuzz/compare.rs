//! Our result against harel's: equality as Python sees it, the first difference and its
//! class, the deliberate differences, and the verdict of one case.

use std::path::Path;

use serde_json::{json, Value};
use stm_core::{pyjson, Map};

use crate::cases::Case;
use crate::harel_case;

/// An object from pairs (`json!` would serialize the values, which a non-finite number
/// does not survive).
pub(crate) fn object(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// Equality as the suites mean it: objects as maps (key order aside, as in
/// conformance.rs), numbers by the text `pyjson::dumps` gives them (`pyjson::loads` reads
/// harel's floats into f64s, so this compares ints exactly and floats by value, `-0.0`
/// and int-vs-float included); everything else exactly. Float *spelling* (Python's repr)
/// is checked by the context bytes, which keep harel's own text.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => pyjson::dumps(a) == pyjson::dumps(b),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The first place where `ours` and `theirs` differ: (path, ours, harel).
fn first_diff(path: String, ours: &Value, theirs: &Value) -> Option<(String, Value, Value)> {
    if same(ours, theirs) {
        return None;
    }
    match (ours, theirs) {
        (Value::Array(x), Value::Array(y)) => {
            for (i, (a, b)) in x.iter().zip(y).enumerate() {
                if let Some(d) = first_diff(format!("{path}[{i}]"), a, b) {
                    return Some(d);
                }
            }
            Some((format!("{path}.len"), json!(x.len()), json!(y.len())))
        }
        (Value::Object(x), Value::Object(y)) => {
            for (k, a) in x {
                match y.get(k) {
                    Some(b) => {
                        if let Some(d) = first_diff(format!("{path}.{k}"), a, b) {
                            return Some(d);
                        }
                    }
                    None => return Some((format!("{path}.{k}"), a.clone(), Value::from("<absent>"))),
                }
            }
            for (k, b) in y {
                if !x.contains_key(k) {
                    return Some((format!("{path}.{k}"), Value::from("<absent>"), b.clone()));
                }
            }
            None
        }
        _ => Some((path, ours.clone(), theirs.clone())),
    }
}

/// A short class name for a difference path: indices and execution ids dropped.
fn class_of(what: &str, path: &str) -> String {
    let mut out = String::new();
    let mut skip = false;
    for c in path.chars() {
        match c {
            '[' => skip = true,
            ']' => skip = false,
            _ if !skip => out.push(c),
            _ => {}
        }
    }
    if what == "context_json" {
        return String::new();
    }
    let out = out.trim_start_matches('.').to_string();
    // traces.exe:S3:1.context_out.x -> traces.*.context_out.x
    let parts: Vec<String> = out
        .split('.')
        .enumerate()
        .map(|(i, p)| {
            if i == 0 && (what == "traces" || what == "context_json") {
                "*".into()
            } else {
                p.into()
            }
        })
        .collect();
    parts.join(".")
}

/// Where harel raises one of these, the case shows a harel bug we deliberately do not
/// reproduce: it is counted apart, with the reason, instead of compared.
pub(crate) const DELIBERATE_DIFFERENCES: &[(&str, &str)] = &[(
    "is not an ancestor of",
    "a region's Timeout that only a transition of the machine around it handles: harel's \
     bubbling passes the region's root, then raises ValueError and leaves the region with an \
     active path outside itself; ours stops at the region's root and leaves the timeout \
     unhandled (stm_core::engine, resolve_at)",
)];

#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Verdict {
    Agree,
    Disagree {
        class: String,
        what: String,
        path: String,
        ours: Value,
        harel: Value,
        all: Vec<String>,
    },
}

pub(crate) fn disagree(
    class: String,
    what: &str,
    path: String,
    ours: Value,
    harel: Value,
    all: Vec<String>,
) -> Verdict {
    Verdict::Disagree {
        class,
        what: what.to_string(),
        path,
        ours,
        harel,
        all,
    }
}

/// Our side of a case vs harel's `result` line: the verdict and what we produced.
pub(crate) async fn compare(case: &Case, machine: &Path, result: &Value) -> (Verdict, Value) {
    let ours_load = stm_core::dsl::load_definition_file(machine, Some("M"));
    let harel_error = result.get("error").and_then(Value::as_str);
    let where_ = result.get("where").and_then(Value::as_str).unwrap_or_default();
    let defn = match (ours_load, harel_error) {
        (Err(e), Some(h)) if where_ == "load" => {
            let e = e.to_string();
            return (
                disagree(
                    "generator: both refuse the machine".into(),
                    "load",
                    String::new(),
                    Value::from(e.clone()),
                    Value::from(h),
                    vec![],
                ),
                json!({ "load_error": e }),
            );
        }
        (Err(e), _) => {
            let e = e.to_string();
            return (
                disagree(
                    "load: only we refuse the machine".into(),
                    "load",
                    String::new(),
                    Value::from(e.clone()),
                    result.clone(),
                    vec![],
                ),
                json!({ "load_error": e }),
            );
        }
        (Ok(_), Some(h)) if where_ == "load" => {
            return (
                disagree(
                    "load: only harel refuses the machine".into(),
                    "load",
                    String::new(),
                    Value::Null,
                    Value::from(h),
                    vec![],
                ),
                Value::Null,
            );
        }
        (Ok(_), Some(h)) => {
            return (
                disagree(
                    format!("harel {where_}: {}", h.split(':').next().unwrap_or(h)),
                    "harel",
                    String::new(),
                    Value::Null,
                    Value::from(h),
                    vec![],
                ),
                Value::Null,
            );
        }
        (Ok(d), None) => d,
    };
    let seed = match pyjson::loads(&case.seed) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    };
    let steps = match pyjson::loads(&case.steps) {
        Ok(Value::Array(s)) => s,
        other => panic!("{}: bad steps {other:?}", case.name),
    };
    let ours = match harel_case::run_case(defn, seed, &steps).await {
        Ok(o) => o,
        Err(e) => {
            return (
                disagree(
                    "runner error".into(),
                    "runner",
                    String::new(),
                    Value::from(e.clone()),
                    Value::Null,
                    vec![],
                ),
                json!({ "runner_error": e }),
            )
        }
    };
    let mut contexts = Map::new();
    for (id, ctx) in &ours.contexts {
        contexts.insert(
            id.clone(),
            Value::from(pyjson::dumps(&Value::Object(ctx.clone()))),
        );
    }
    let ours_json = object(vec![
        ("create_error", ours.create_error.clone()),
        ("transcript", json!(ours.transcript)),
        ("step_errors", Value::Array(ours.step_errors.clone())),
        ("root", ours.root.clone()),
        ("children", Value::Array(ours.children.clone())),
        ("traces", ours.traces.clone()),
        ("context_json", Value::Object(contexts.clone())),
    ]);
    let expected = &result["expected"];
    let mut diffs = harel_case::differences(&ours, expected, same);
    // the exact bytes of each context
    let theirs_ctx = expected.get("context_json").cloned().unwrap_or(json!({}));
    if Value::Object(contexts.clone()) != theirs_ctx {
        diffs.push(("context_json", Value::Object(contexts), theirs_ctx));
    }
    if diffs.is_empty() {
        return (Verdict::Agree, ours_json);
    }
    let all: Vec<String> = diffs.iter().map(|(w, _, _)| w.to_string()).collect();
    let (what, o, t) = &diffs[0];
    let (path, dob, dth) = first_diff(what.to_string(), o, t).unwrap_or_default();
    let class = format!(
        "{what}: {}",
        class_of(what, path.strip_prefix(what).unwrap_or(&path))
    );
    (disagree(class, what, path, dob, dth, all), ours_json)
}
