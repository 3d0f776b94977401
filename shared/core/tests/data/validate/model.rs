//! Test support shared by `validate_golden.rs` and `render_golden.rs`: the golden
//! cases in `cases/`, harel's expected output for each, and a [`Definition`] rebuilt
//! from harel's own model (`<case>.model.json`, written by `gen.py`) so the validator
//! and renderer can be checked without the `.stm` parser.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;
use stm_core::definition::{
    ActionRef, ArithOp, Assign, Choice, CmpOp, EventFilter, EventType, Expr, FieldSpec, FieldType, Predicate,
    Selector, Source, Timeout, Transition,
};
use stm_core::{Definition, Node, NodeKind};

/// `cases/`, or the directory `STM_VALIDATE_CASES` names (for an ad-hoc differential
/// run over cases `gen.py --cases DIR` prepared).
pub fn cases_dir() -> PathBuf {
    match std::env::var_os("STM_VALIDATE_CASES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/validate/cases"),
    }
}

/// The case stems (`cases/<stem>.stm`), sorted.
pub fn case_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(cases_dir())
        .expect("cases dir")
        .filter_map(|e| {
            let path = e.ok()?.path();
            if path.extension()? != "stm" {
                return None;
            }
            Some(path.file_stem()?.to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    names
}

pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One of harel's findings as recorded in `<case>.expected.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub severity: String,
    pub code: String,
    pub path: String,
    pub message: String,
    pub text: String,
}

pub struct ExpectedCase {
    pub machine: Option<String>,
    pub findings: Vec<Expected>,
}

pub fn expected(name: &str) -> ExpectedCase {
    let v = read_json(&cases_dir().join(format!("{name}.expected.json")));
    let s = |f: &Value, k: &str| f[k].as_str().unwrap_or_default().to_string();
    ExpectedCase {
        machine: v["machine"].as_str().map(str::to_string),
        findings: v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .map(|f| Expected {
                severity: s(f, "severity"),
                code: s(f, "code"),
                path: s(f, "path"),
                message: s(f, "message"),
                text: s(f, "text"),
            })
            .collect(),
    }
}

/// harel's Mermaid for a case, when it could render it (without the final newline).
pub fn expected_mermaid(name: &str) -> Option<String> {
    let text = std::fs::read_to_string(cases_dir().join(format!("{name}.mmd"))).ok()?;
    Some(text.strip_suffix('\n').unwrap_or(&text).to_string())
}

/// A line-by-line diff summary for an assertion message.
pub fn diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    let mut out = String::new();
    for i in 0..e.len().max(a.len()) {
        let (x, y) = (e.get(i).copied(), a.get(i).copied());
        if x != y {
            out.push_str(&format!("line {}:\n  harel: {:?}\n  ours:  {:?}\n", i + 1, x, y));
        }
    }
    out
}

// --- harel's model JSON -> Definition ------------------------------------------------

fn string(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("expected a string, got {v}"))
        .to_string()
}

fn opt_string(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

fn action(v: &Value) -> Option<ActionRef> {
    if v.is_null() {
        return None;
    }
    Some(ActionRef {
        function: string(&v["function"]),
        inputs: v["inputs"].as_object().cloned().unwrap_or_default(),
    })
}

fn source(v: &Value) -> Source {
    match v.as_str() {
        Some("context") => Source::Context,
        _ => Source::Event,
    }
}

fn cmp_op(v: &Value) -> CmpOp {
    match v.as_str().unwrap_or("eq") {
        "eq" => CmpOp::Eq,
        "ne" => CmpOp::Ne,
        "lt" => CmpOp::Lt,
        "le" => CmpOp::Le,
        "gt" => CmpOp::Gt,
        "ge" => CmpOp::Ge,
        "in" => CmpOp::In,
        other => panic!("unknown op {other}"),
    }
}

fn predicate(v: &Value) -> Predicate {
    let obj = v.as_object().expect("predicate object");
    let (key, body) = obj.iter().next().expect("predicate node");
    match key.as_str() {
        "leaf" => Predicate::Leaf {
            source: source(&body["source"]),
            field: opt_string(&body["field"]).unwrap_or_default(),
            op: cmp_op(&body["op"]),
            value: body["value"].clone(),
            value_ref: body["value_ref"]
                .as_array()
                .map(|r| (source(&r[0]), string(&r[1]))),
        },
        "all" => Predicate::All(body.as_array().expect("all").iter().map(predicate).collect()),
        "any" => Predicate::Any(body.as_array().expect("any").iter().map(predicate).collect()),
        "not" => Predicate::Not(Box::new(predicate(body))),
        other => panic!("unknown predicate node {other}"),
    }
}

fn expr(v: &Value) -> Expr {
    if let Some(r) = v.get("ref") {
        return Expr::Ref {
            source: source(&r[0]),
            field: string(&r[1]),
        };
    }
    if let Some(l) = v.get("lit") {
        return Expr::Lit(l.clone());
    }
    let a = &v["arith"];
    let op = match a[0].as_str() {
        Some("+") => ArithOp::Add,
        Some("-") => ArithOp::Sub,
        Some("*") => ArithOp::Mul,
        Some("/") => ArithOp::Div,
        other => panic!("unknown arith op {other:?}"),
    };
    Expr::Arith {
        op,
        left: Box::new(expr(&a[1])),
        right: Box::new(expr(&a[2])),
    }
}

fn assigns(v: &Value) -> Vec<Assign> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|x| Assign {
                    field: string(&x["field"]),
                    expr: expr(&x["expr"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn field_spec(v: &Value) -> FieldSpec {
    FieldSpec {
        ty: FieldType::parse(v["type"].as_str().unwrap_or("any")).expect("field type"),
        required: v["required"].as_bool().unwrap_or(true),
        default: if v["default"].is_null() {
            None
        } else {
            Some(v["default"].clone())
        },
    }
}

fn string_map(v: &Value) -> IndexMap<String, String> {
    v.as_object()
        .map(|m| m.iter().map(|(k, x)| (k.clone(), string(x))).collect())
        .unwrap_or_default()
}

/// The [`Definition`] harel built for case `name`.
pub fn model_definition(name: &str) -> Definition {
    let v = read_json(&cases_dir().join(format!("{name}.model.json")));
    let mut defn = Definition::new(string(&v["id"]));
    defn.ttl = v["ttl"].as_u64();
    for (ename, fields) in v["events"].as_object().expect("events") {
        let fields = fields
            .as_object()
            .expect("fields")
            .iter()
            .map(|(f, s)| (f.clone(), field_spec(s)))
            .collect();
        defn.events.insert(
            ename.clone(),
            EventType {
                name: ename.clone(),
                fields,
            },
        );
    }
    for (f, s) in v["context_schema"].as_object().expect("context_schema") {
        defn.context_schema.insert(f.clone(), field_spec(s));
    }
    let nodes = v["nodes"].as_array().expect("nodes");
    // the nodes come parents first (harel's index order)
    for n in nodes {
        let full_path = string(&n["full_path"]);
        let kind = match n["kind"].as_str() {
            Some("leaf") => NodeKind::Leaf,
            Some("composite") => NodeKind::Composite,
            Some("orthogonal") => NodeKind::Orthogonal,
            Some("parallel") if full_path.is_empty() => NodeKind::Root,
            Some("parallel") => NodeKind::Composite, // an orthogonal state's composite region
            other => panic!("unknown kind {other:?}"),
        };
        let id = if full_path.is_empty() {
            defn.root
        } else {
            let parent = defn
                .get(n["parent"].as_str().expect("parent"))
                .expect("parent node first");
            defn.add_node(parent, Node::new(string(&n["name"]), full_path.clone(), kind))
        };
        let node = defn.node_mut(id);
        node.on_enter = action(&n["on_enter"]);
        node.on_activity = action(&n["on_activity"]);
        node.on_exit = action(&n["on_exit"]);
        node.timeout = match &n["timeout"] {
            Value::Null => None,
            Value::Object(m) => Some(Timeout::ContextKey(
                m["context"].as_str().unwrap_or_default().into(),
            )),
            t => Some(Timeout::Seconds(t.as_f64().expect("timeout seconds"))),
        };
        node.outcome = opt_string(&n["outcome"]);
        node.carry = n["carry"].as_array().expect("carry").iter().map(string).collect();
        node.defer = n["defer"].as_array().expect("defer").iter().map(string).collect();
        node.invoke = opt_string(&n["invoke"]);
        node.invoke_with = string_map(&n["invoke_with"]);
        node.invoke_each = n["invoke_each"]
            .as_array()
            .map(|p| (string(&p[0]), string(&p[1])));
        node.start_state = opt_string(&n["start_state"]);
        node.allow_history = n["allow_history"].as_bool().unwrap_or(true);
        node.cancel_on_failure = n["cancel_on_failure"].as_bool().unwrap_or(false);
    }
    // transitions once every node exists
    for n in nodes {
        let scope = defn.get(n["full_path"].as_str().expect("path")).expect("scope");
        let lookup = |d: &Definition, p: &Value| d.get(p.as_str().expect("path")).expect("node");
        let mut transitions = Vec::new();
        for t in n["transitions"].as_array().expect("transitions") {
            let event_filter = (!t["event_filter"].is_null()).then(|| EventFilter {
                kinds: t["event_filter"]["kinds"]
                    .as_array()
                    .expect("kinds")
                    .iter()
                    .map(string)
                    .collect(),
                predicate: (!t["event_filter"]["predicate"].is_null())
                    .then(|| predicate(&t["event_filter"]["predicate"])),
            });
            let selector = (!t["selector"].is_null()).then(|| {
                let s = &t["selector"];
                Selector {
                    action: action(&s["action"]).expect("selector action"),
                    mapper: string_map(&s["mapper"]),
                    default: opt_string(&s["default"]),
                    enum_values: s["enum"].as_array().cloned(),
                }
            });
            let choice = (!t["choice"].is_null()).then(|| {
                let c = &t["choice"];
                Choice {
                    branches: c["branches"]
                        .as_array()
                        .expect("branches")
                        .iter()
                        .map(|b| (predicate(&b[0]), lookup(&defn, &b[1])))
                        .collect(),
                    default: (!c["default"].is_null()).then(|| lookup(&defn, &c["default"])),
                    branch_assignments: c["branch_assignments"]
                        .as_array()
                        .expect("branch_assignments")
                        .iter()
                        .map(assigns)
                        .collect(),
                    default_assignments: assigns(&c["default_assignments"]),
                }
            });
            transitions.push(Transition {
                source: lookup(&defn, &t["source"]),
                target: (!t["target"].is_null()).then(|| lookup(&defn, &t["target"])),
                event_filter,
                selector,
                choice,
                assignments: assigns(&t["assignments"]),
                pos: None,
                event_pos: Vec::new(),
            });
        }
        defn.node_mut(scope).transitions = transitions;
    }
    defn
}

// --- a comparable projection of a Definition -------------------------------------------

/// `defn` as lines of text that two builds of the same machine (harel's model, our
/// parser) should agree on: nodes in pre-order with their attributes and transitions,
/// node references as paths. Source positions and the `source_file` are left out; an
/// orthogonal state's composite region counts as `Composite` whatever its kind.
pub fn project(defn: &Definition) -> Vec<String> {
    let path = |id: stm_core::NodeId| format!("{:?}", defn.path(id));
    let mut out = vec![format!("machine {:?} ttl={:?}", defn.id, defn.ttl)];
    for (name, e) in &defn.events {
        out.push(format!("event {name:?} {:?}", e.fields));
    }
    out.push(format!("context {:?}", defn.context_schema));
    let mut stack = vec![defn.root];
    while let Some(id) = stack.pop() {
        stack.extend(defn.node(id).children.iter().rev().copied());
        let n = defn.node(id);
        let kind = match n.kind {
            NodeKind::Root if id != defn.root => NodeKind::Composite,
            k => k,
        };
        out.push(format!(
            "node {:?} name={:?} kind={kind:?} start={:?} outcome={:?} timeout={:?} invoke={:?} with={:?} \
             each={:?} history={} cancel_on_failure={} carry={:?} defer={:?}",
            n.full_path,
            n.name,
            n.start_state,
            n.outcome,
            n.timeout,
            n.invoke,
            n.invoke_with,
            n.invoke_each,
            n.allow_history,
            n.cancel_on_failure,
            n.carry,
            n.defer
        ));
        for (hook, a) in [
            ("enter", &n.on_enter),
            ("activity", &n.on_activity),
            ("exit", &n.on_exit),
        ] {
            if let Some(a) = a {
                out.push(format!("  on {hook} {:?} {:?}", a.function, a.inputs));
            }
        }
        for t in &n.transitions {
            out.push(format!(
                "  from {} to {:?} on {:?} set {:?}",
                path(t.source),
                t.target.map(path),
                t.event_filter,
                t.assignments
            ));
            if let Some(s) = &t.selector {
                out.push(format!(
                    "    select {:?} {:?} mapper={:?} else={:?} returns={:?}",
                    s.action.function, s.action.inputs, s.mapper, s.default, s.enum_values
                ));
            }
            if let Some(c) = &t.choice {
                for (i, (guard, target)) in c.branches.iter().enumerate() {
                    out.push(format!(
                        "    when {guard:?} to {} set {:?}",
                        path(*target),
                        c.branch_assignments.get(i)
                    ));
                }
                out.push(format!(
                    "    else {:?} set {:?}",
                    c.default.map(path),
                    c.default_assignments
                ));
            }
        }
    }
    out
}
