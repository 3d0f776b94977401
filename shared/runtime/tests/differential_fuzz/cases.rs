//! One generated case: the machine's text (its top level, declarations and bindings), and
//! its event script with the seed context, as harel's batch runner reads them.

use std::fmt::Write as _;

use crate::machine::{Machine, CTX_KEYS, EVENT_FIELDS, MAX_STATES, TYPES};
use crate::rng::{case_seed, Rng};
use crate::values::{gen_float, gen_int, gen_number, gen_str, gen_value, json_str, V};

/// One generated case: the machine text and the case line for harel_batch.py.
#[derive(Debug)]
pub(crate) struct Case {
    pub(crate) name: String,
    pub(crate) index: usize,
    pub(crate) text: String,
    /// the seed (context) as JSON text, or "null"
    pub(crate) seed: String,
    /// the steps as JSON text
    pub(crate) steps: String,
}

fn gen_machine(r: &mut Rng) -> (String, Machine) {
    let mut m = Machine::default();
    let mut items = Vec::new();
    if r.chance(25) {
        let mut fields = Vec::new();
        for key in CTX_KEYS.iter().chain(["n"].iter()) {
            if !r.chance(50) {
                continue;
            }
            let ty = r.pick(TYPES).to_string();
            let optional = r.chance(30);
            let mut f = format!("{key}: {ty}{}", if optional { "?" } else { "" });
            // harel refuses a default on an optional field
            if !optional && r.chance(60) {
                let default = match ty.as_str() {
                    "int" => gen_int(r, true),
                    "float" => {
                        if r.chance(20) {
                            gen_int(r, true)
                        } else {
                            gen_float(r, true)
                        }
                    }
                    "string" => gen_str(r),
                    "bool" => V::Bool(r.chance(50)),
                    _ => gen_value(r, true, 0),
                };
                let _ = write!(f, " = {}", default.stm());
            }
            m.ctx_types.push((key.to_string(), ty, optional));
            fields.push(f);
        }
        items.push(format!("context {{ {} }}", fields.join("  ")));
    }
    if r.chance(8) {
        items.push(format!("ttl {}", r.pick(&["10", "60"])));
    }
    let children = m.children(r, 0, MAX_STATES);
    items.push(format!("initial {}", children[0].name));
    let trans = m.transitions(r, &children, None);
    items.extend(children.into_iter().map(|c| c.text));
    items.extend(trans);

    let mut head = String::new();
    if !m.bound.is_empty() {
        let binds: Vec<String> = m.bound.iter().map(|(s, f)| format!("{s} = {f}")).collect();
        let _ = writeln!(head, "bind {{ {} }}", binds.join(" "));
    }
    if r.chance(20) {
        for k in m.kinds.clone() {
            if !r.chance(60) {
                continue;
            }
            let mut fields = Vec::new();
            let mut decl = Vec::new();
            for f in EVENT_FIELDS {
                if r.chance(40) {
                    let ty = r.pick(TYPES).to_string();
                    let optional = r.chance(50);
                    decl.push(format!("{f}: {ty}{}", if optional { "?" } else { "" }));
                    fields.push((f.to_string(), ty, optional));
                }
            }
            let _ = writeln!(head, "event {k} {{ {} }}", decl.join("  "));
            m.event_types.insert(k, fields);
        }
    }
    let text = format!("{head}machine M {{\n{}\n}}\n", items.join("\n"));
    (text, m)
}

/// A value of a declared type (mostly), for seeds and typed events.
fn gen_typed(r: &mut Rng, ty: &str) -> V {
    if r.chance(6) {
        return gen_value(r, false, 0);
    }
    match ty {
        "int" => gen_int(r, false),
        "float" => gen_number(r, false),
        "string" => gen_str(r),
        "bool" => V::Bool(r.chance(50)),
        _ => gen_value(r, false, 0),
    }
}

fn obj(fields: &[(String, V)]) -> String {
    let parts: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}: {}", json_str(k), v.json()))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

pub(crate) fn gen_case(seed: u64, index: usize) -> Case {
    let mut r = Rng::new(case_seed(seed, index));
    let (text, m) = gen_machine(&mut r);

    // the seed: some context keys, typed or not
    let seed_json = if r.chance(15) {
        "null".to_string()
    } else {
        let mut fields = Vec::new();
        for key in CTX_KEYS.iter().chain(["n", "t"].iter()) {
            if !r.chance(45) {
                continue;
            }
            let ty = m
                .ctx_types
                .iter()
                .find(|(k, _, _)| k == key)
                .map(|(_, t, _)| t.as_str());
            let v = match ty {
                Some(t) => gen_typed(&mut r, t),
                None if *key == "t" => gen_number(&mut r, false),
                None => gen_value(&mut r, false, 0),
            };
            fields.push((key.to_string(), v));
        }
        obj(&fields)
    };

    let mut kinds = m.kinds.clone();
    if kinds.is_empty() {
        kinds.push("A".into());
    }
    let mut steps = Vec::new();
    let n = r.between(3, 15);
    let mut id = 0;
    for _ in 0..n {
        let roll = r.below(100);
        if roll < if m.has_timers { 25 } else { 8 } {
            let secs = r.pick(&["1", "2.5", "5", "10", "30", "100"]);
            steps.push(format!("{{\"advance\": {secs}}}"));
            continue;
        }
        let kind = if roll >= 97 {
            r.pick(&["Z", "Reset", "Cancel"]).to_string()
        } else {
            r.pick(&kinds).clone()
        };
        let mut fields = Vec::new();
        let typed = m.event_types.get(&kind);
        for f in EVENT_FIELDS {
            if !r.chance(55) {
                continue;
            }
            let ty = typed
                .and_then(|fs| fs.iter().find(|(n, _, _)| n == f))
                .map(|(_, t, _)| t.as_str());
            let v = match ty {
                Some(t) => gen_typed(&mut r, t),
                None if r.chance(60) => gen_number(&mut r, false),
                None => gen_value(&mut r, false, 0),
            };
            fields.push((f.to_string(), v));
        }
        if kind == "Cancel" && r.chance(50) {
            fields.push(("reason".into(), V::Str("customer".into())));
        }
        // now and then a redelivery of the previous id (harel dedupes by id)
        if !(id > 0 && r.chance(4)) {
            id += 1;
        }
        steps.push(format!(
            "{{\"send\": {{\"kind\": {}, \"data\": {}, \"id\": \"e{id}\"}}}}",
            json_str(&kind),
            obj(&fields)
        ));
    }
    Case {
        name: format!("fz{seed:x}-{index:05}"),
        index,
        text,
        seed: seed_json,
        steps: format!("[{}]", steps.join(", ")),
    }
}
