//! The `harel.lib` built-ins against harel 0.9.0 itself: each case runs through harel's
//! function (in the test venv's Python) and ours, and the value, or the exception's type
//! and message, must be the same.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use stm_runtime::{ActionInput, ActionRegistry, ActionState};

/// Runs each `[function, context, inputs]` through harel: `{"ok": value, "context": ctx}`
/// or `{"error": [type, message]}`.
const HAREL_SIDE: &str = r#"
import json, sys
import harel.lib as lib

class Stm:
    def __init__(self, ctx):
        self.execution_ctx = ctx
        self.idempotency_key = "k"

out = []
for name, ctx, inputs in json.load(sys.stdin):
    stm = Stm(ctx)
    try:
        value = getattr(lib, name)(stm, None, **inputs)
        out.append({"ok": value, "context": stm.execution_ctx})
    except Exception as e:
        out.append({"error": [type(e).__name__, str(e)]})
print(json.dumps(out))
"#;

fn harel(cases: &[Value]) -> Vec<Value> {
    let mut child = Command::new(stm_testkit::python())
        .args(["-c", HAREL_SIDE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the venv's python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stm_core::pyjson::dumps(&Value::Array(cases.to_vec())).as_bytes())
        .expect("cases sent");
    let out = child.wait_with_output().expect("harel ran");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Python's json.dumps: Infinity, NaN and big ints as Python writes them
    match stm_core::pyjson::loads(&String::from_utf8_lossy(&out.stdout)).expect("harel's JSON") {
        Value::Array(results) => results,
        other => panic!("harel answered {other}"),
    }
}

fn ours(case: &Value) -> Value {
    let actions = ActionRegistry::with_builtins();
    let name = case[0].as_str().expect("a name");
    let f = actions.get(&format!("harel.lib.{name}")).expect("a built-in");
    let mut context = case[1].as_object().cloned().unwrap_or_default();
    let inputs = case[2].as_object().cloned().unwrap_or_default();
    let result = f(ActionInput {
        context: &mut context,
        event: None,
        inputs: &inputs,
        idempotency_key: "k",
        execution_id: "e",
        state: &ActionState::default(),
    });
    match result {
        Ok(value) => json!({"ok": value, "context": context}),
        Err(err) => json!({"error": [err.type_name, err.message]}),
    }
}

fn agree(cases: Vec<Value>) {
    // an empty list would agree with anything
    assert!(!cases.is_empty(), "no cases to compare");
    let theirs = harel(&cases);
    // zip stops at the shorter list: a result harel left out at the end would leave its
    // case unchecked, and the test green
    assert_eq!(
        theirs.len(),
        cases.len(),
        "harel answered {} results for {} cases",
        theirs.len(),
        cases.len()
    );
    let mut differ = Vec::new();
    for (case, expected) in cases.iter().zip(&theirs) {
        let got = ours(case);
        if &got != expected {
            differ.push(format!("{case}\n  harel: {expected}\n  stm:   {got}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{}/{} agree; the others:\n{}",
        cases.len() - differ.len(),
        cases.len(),
        differ.join("\n")
    );
}

#[test]
fn join_success_is_harels() {
    let results = |r: Value| json!({ "region_results": r });
    let two = results(json!({"A": {"outcome": "success"}, "B": {"outcome": "failed"}}));
    let all_ok = results(json!({"A": {"outcome": "success"}, "B": {"outcome": "success"}}));
    let mut cases = Vec::new();
    for ctx in [
        json!({}),
        results(json!({})),
        two.clone(),
        all_ok,
        results(json!({"A": {"outcome": 1}, "B": {}})),
        results(json!({"A": {"outcome": "success", "x": [1]}})),
        // not a mapping of mappings: harel's AttributeError
        results(json!([{"outcome": "success"}])),
        results(json!("success")),
        results(json!(null)),
        results(json!(3)),
        results(json!({"A": [1]})),
        results(json!({"A": "success"})),
        results(json!({"A": null})),
    ] {
        for inputs in [
            json!({}),
            json!({"mode": "all"}),
            json!({"mode": "any"}),
            json!({"mode": null}),
            json!({"mode": 1}),
            json!({"mode": "ALL"}),
            json!({"mode": "all", "extra": true}),
        ] {
            cases.push(json!(["join_success", ctx, inputs]));
        }
    }
    agree(cases);
}

#[test]
fn backoff_conversions_are_pythons() {
    let mut cases = Vec::new();
    // the attempt counter goes through int(), the cap through float()
    for counter in [
        json!(null),
        json!(0),
        json!(3),
        json!(-2),
        json!(2.9),
        json!(-2.9),
        json!(true),
        json!(false),
        json!("2"),
        json!(" 4 "),
        json!("+1"),
        json!("-1"),
        json!("1_0"),
        json!("1__0"),
        json!("_1"),
        json!("2.0"),
        json!("zz"),
        json!(""),
        json!("0x10"),
        json!([1]),
        json!({"a": 1}),
    ] {
        for name in ["exponential_backoff", "linear_backoff"] {
            cases.push(json!([name, {"__attempt": counter}, {"base": 5, "factor": 2, "step": 3}]));
        }
    }
    for cap in [
        json!(12),
        json!(12.5),
        json!(0),
        json!(true),
        json!("7"),
        json!(" 7.5 "),
        json!("1e1"),
        json!("1_0"),
        json!("inf"),
        json!("Infinity"),
        json!("nan"),
        json!("x"),
        json!(""),
        json!([1]),
        json!({}),
    ] {
        for attempt in [0, 1, 3] {
            cases.push(json!([
                "exponential_backoff",
                {"__attempt": attempt},
                {"base": 5, "factor": 2, "cap": cap}
            ]));
            cases.push(json!([
                "linear_backoff",
                {"__attempt": attempt},
                {"base": 1.5, "step": 2, "cap": cap}
            ]));
        }
    }
    // numbers of both kinds, where Python keeps an int an int
    for (base, factor) in [
        (json!(1), json!(3)),
        (json!(0.5), json!(2)),
        (json!(2), json!(1.5)),
        (json!(3), json!(-1)),
    ] {
        for attempt in [0, 2, 5] {
            cases.push(json!([
                "exponential_backoff",
                {"__attempt": attempt},
                {"base": base, "factor": factor, "into": "wait", "counter": "__attempt"}
            ]));
        }
    }
    cases.push(json!(["reset_backoff", {"__attempt": 4, "x": 1}, {}]));
    cases.push(json!(["reset_backoff", {"x": 1}, {"counter": "x"}]));
    agree(cases);
}

#[test]
fn backoffs_keep_pythons_numbers() {
    let big = |text: &str| stm_core::pyjson::loads(text).expect("a number");
    let mut cases = Vec::new();
    // ints grow past 64 bits (10 ** 30 at attempt 30); a float power overflows; a cap
    // compares exactly with an int of any size
    for (base, factor) in [
        (json!(1), json!(10)),
        (json!(3), json!(10)),
        (big("100000000000000000000"), json!(7)),
        (json!(1.0), json!(10)),
        (json!(-2), json!(3)),
        (json!(1e300), json!(10.0)),
        (big("Infinity"), json!(2)),
        (big("NaN"), json!(2)),
    ] {
        for attempt in [0, 1, 19, 20, 30, 64, 400] {
            for cap in [json!(null), json!(1e30), json!(f64::MAX), json!("inf")] {
                cases.push(json!([
                    "exponential_backoff",
                    {"__attempt": attempt},
                    {"base": base, "factor": factor, "cap": cap}
                ]));
            }
        }
    }
    for (base, step) in [
        (big("9223372036854775807"), json!(1)),
        (big("-9223372036854775808"), json!(-1)),
        (big("9007199254740993"), json!(0.5)),
        (big("123456789012345678901234567890"), json!(true)),
        (big("1"), big("100000000000000000000")),
    ] {
        for attempt in [0, 1, 2, 7] {
            cases.push(json!(["linear_backoff", {"__attempt": attempt}, {"base": base, "step": step}]));
        }
    }
    agree(cases);
}

#[test]
fn backoff_operands_duck_type_as_in_python() {
    let mut cases = Vec::new();
    let operands = [
        json!(2),
        json!(0.5),
        json!(true),
        json!(false),
        json!(0),
        json!(-1),
        json!("x"),
        json!("ab"),
        json!([1, "a"]),
        json!([]),
        json!(null),
        json!({"a": 1}),
        json!(1.5),
    ];
    for a in &operands {
        for b in &operands {
            for attempt in [0, 2] {
                cases.push(json!([
                    "exponential_backoff",
                    {"__attempt": attempt},
                    {"base": a, "factor": b}
                ]));
                cases.push(json!([
                    "linear_backoff",
                    {"__attempt": attempt},
                    {"base": a, "step": b}
                ]));
            }
        }
    }
    // a capped delay that is no number, a float power that overflows, zero to a negative power
    cases.push(json!(["exponential_backoff", {"__attempt": 1}, {"base": "x", "factor": 2, "cap": 3}]));
    cases.push(json!(["linear_backoff", {"__attempt": 1}, {"base": [1], "step": [2], "cap": 3}]));
    cases.push(json!(["exponential_backoff", {"__attempt": 400}, {"base": 1, "factor": 10.0}]));
    cases.push(json!(["exponential_backoff", {"__attempt": -1}, {"base": 1, "factor": 0}]));
    cases.push(json!(["exponential_backoff", {"__attempt": -2}, {"base": 3, "factor": 2}]));
    cases.push(json!(["exponential_backoff", {"__attempt": 30}, {"base": 1, "factor": 3}]));
    agree(cases);
}
