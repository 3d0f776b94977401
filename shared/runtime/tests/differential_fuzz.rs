//! Differential fuzzing against harel 0.9.0: random machines and event scripts, run by
//! harel (in-process, one Python process per shard for the whole batch:
//! `tests/fuzz/harel_batch.py`) and by our driver (the conformance runner,
//! `tests/common/harel_case.rs`), compared on the transcript, the step errors, the final
//! root and children, the traces, and the exact `json.dumps` bytes of every context.
//!
//! ```text
//! cargo test -p stm-runtime --test differential_fuzz -- --nocapture
//! STM_FUZZ_CASES=2000 STM_FUZZ_SEED=7 cargo test ...      # longer / another seed
//! STM_FUZZ_SEED=7 STM_FUZZ_ONLY=123 cargo test ...        # one case again
//! ```
//!
//! Every disagreement is written (machine text, seed + steps, both results, the first
//! difference) to `<target>/fuzz-disagreements.jsonl`; the test fails if there is any.
//! See `tests/fuzz/README.md`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{json, Value};
use stm_core::pyjson;
use stm_core::Map;

#[path = "common/harel_case.rs"]
mod harel_case;

const DEFAULT_CASES: usize = 200;
const DEFAULT_SEED: u64 = 0x5eed_2026;

// ---------------------------------------------------------------- the random source

/// splitmix64: tiny, seeded, good enough to pick shapes and values.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// 0..n
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    /// lo..=hi
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    /// true with probability pct/100
    fn chance(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// The seed of case `index` of a run seeded `seed` (cases are independent of the count).
fn case_seed(seed: u64, index: usize) -> u64 {
    let mut r = Rng::new(seed ^ (index as u64).wrapping_mul(0xd134_2543_de82_ef95));
    r.next()
}

// ---------------------------------------------------------------- values

/// A generated value, written both as JSON (seeds, event data: Python's `json` reads the
/// same text) and, when it can be, as a `.stm` literal.
#[derive(Debug, Clone)]
enum V {
    /// decimal digits (any size)
    Int(String),
    /// JSON text of a float: `1e308`, `-0.0`, `Infinity`, `NaN`
    Float(String),
    Str(String),
    Bool(bool),
    Null,
    List(Vec<V>),
}

const SMALL_INTS: &[&str] = &["0", "1", "2", "3", "-1", "5", "10", "100", "-7"];
/// around 2**53, 2**63, 2**64, 10**20 (the last ones only as JSON: a `.stm` integer
/// literal is refused past 64 bits, deliberately)
const EDGE_INTS: &[&str] = &[
    "9007199254740991",
    "9007199254740992",
    "9007199254740993",
    "-9007199254740993",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "9223372036854775809",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "100000000000000000000",
    "-100000000000000000000",
];
const FLOATS: &[&str] = &[
    "0.5",
    "2.5",
    "-0.0",
    "0.0",
    "3.0",
    "0.1",
    "1e-05",
    "1e+16",
    "1e308",
    "1.7976931348623157e+308",
    "-1.7976931348623157e+308",
    "5e-324",
    "2.2250738585072014e-308",
    "9007199254740992.0",
    "9007199254740994.0",
    "9.223372036854776e+18",
    "1.5e+300",
    "123456789.125",
    "-2.5",
];
const NON_FINITE: &[&str] = &["Infinity", "-Infinity", "NaN"];
const STRINGS: &[&str] = &[
    "a",
    "b",
    "paid",
    "",
    "1",
    "True",
    "1.0",
    "\u{a0}",
    "x\u{85}y",
    "\u{200b}",
    "a\u{2028}b",
    "\u{7f}",
    "\u{378}",
    "\u{e0080}",
    "\u{ad}",
    "\u{feff}",
    "\u{e9}t\u{e9}",
    "\t",
    "it's",
    "say \"hi\"",
    "back\\slash",
    "\u{1f600}",
    "\u{0}",
    "\u{10ffff}",
    "\u{3000}",
];

fn gen_int(r: &mut Rng, stm: bool) -> V {
    if r.chance(55) {
        V::Int(r.pick(SMALL_INTS).to_string())
    } else {
        let pool: Vec<&str> = EDGE_INTS
            .iter()
            .copied()
            .filter(|s| !stm || s.parse::<i64>().is_ok())
            .collect();
        V::Int(r.pick(&pool).to_string())
    }
}

fn gen_float(r: &mut Rng, stm: bool) -> V {
    if !stm && r.chance(4) {
        V::Float(r.pick(NON_FINITE).to_string())
    } else {
        V::Float(r.pick(FLOATS).to_string())
    }
}

fn gen_str(r: &mut Rng) -> V {
    V::Str(r.pick(STRINGS).to_string())
}

/// Any value; `stm`: writable as a `.stm` literal (no null, no ints past 64 bits, no
/// non-finite floats).
fn gen_value(r: &mut Rng, stm: bool, depth: usize) -> V {
    match r.below(100) {
        0..=34 => gen_int(r, stm),
        35..=59 => gen_float(r, stm),
        60..=79 => gen_str(r),
        80..=89 => V::Bool(r.chance(50)),
        90..=94 if !stm => V::Null,
        _ if depth == 0 => {
            let n = r.below(3);
            V::List((0..n).map(|_| gen_value(r, stm, depth + 1)).collect())
        }
        _ => gen_int(r, stm),
    }
}

/// A number (bools count, as in Python).
fn gen_number(r: &mut Rng, stm: bool) -> V {
    match r.below(100) {
        0..=49 => gen_int(r, stm),
        50..=91 => gen_float(r, stm),
        _ => V::Bool(r.chance(50)),
    }
}

impl V {
    fn json(&self) -> String {
        match self {
            V::Int(s) | V::Float(s) => s.clone(),
            V::Str(s) => json_str(s),
            V::Bool(b) => b.to_string(),
            V::Null => "null".into(),
            V::List(items) => {
                let parts: Vec<String> = items.iter().map(V::json).collect();
                format!("[{}]", parts.join(", "))
            }
        }
    }
    fn stm(&self) -> String {
        match self {
            V::Int(s) | V::Float(s) => s.clone(),
            V::Str(s) => stm_str(s),
            V::Bool(b) => b.to_string(),
            V::Null => "\"\"".into(),
            V::List(items) => {
                let parts: Vec<String> = items.iter().map(V::stm).collect();
                format!("[{}]", parts.join(", "))
            }
        }
    }
    /// What Python's `str()` would give, roughly (to keep selector branches distinct).
    fn str_key(&self) -> String {
        match self {
            V::Int(s) => s.clone(),
            V::Float(s) => format!("f{s}"),
            V::Str(s) => s.clone(),
            V::Bool(true) => "True".into(),
            V::Bool(false) => "False".into(),
            V::Null => "None".into(),
            V::List(_) => self.json(),
        }
    }
}

/// A JSON string literal, ASCII only (`\uXXXX`, surrogate pairs past the BMP).
fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            _ => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
    out
}

/// A `.stm` string literal, ASCII only (harel decodes it with `unicode_escape`).
fn stm_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            c if (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

// ---------------------------------------------------------------- machines

const CTX_KEYS: &[&str] = &["x", "y", "z", "s"];
const EVENT_FIELDS: &[&str] = &["v", "w", "s"];
const TYPES: &[&str] = &["int", "float", "string", "bool", "any"];

/// What the generator knows while writing one machine.
#[derive(Debug, Default)]
struct Machine {
    next_state: usize,
    /// event kinds a transition / defer names
    kinds: Vec<String>,
    has_timers: bool,
    /// the typed context, if any: key -> (type, optional)
    ctx_types: Vec<(String, String, bool)>,
    /// typed events: kind -> fields (name, type, optional)
    event_types: BTreeMap<String, Vec<(String, String, bool)>>,
    /// actions bound in the `bind` block
    bound: Vec<(&'static str, &'static str)>,
    has_orthogonal: bool,
}

/// One child of a scope, rendered later.
#[derive(Debug)]
struct Child {
    name: String,
    text: String,
    /// a final / sink: no outgoing transitions are added for it
    terminal: bool,
    /// names of its own children (for dotted targets)
    inner: Vec<String>,
    orthogonal: bool,
}

const KINDS: &[&str] = &["A", "B", "C", "D"];
/// The most states a machine has (regions and finals included).
const MAX_STATES: usize = 12;
/// What an orthogonal state takes: itself and two regions of four (region, work, two finals).
const ORTHOGONAL_STATES: usize = 9;

impl Machine {
    fn state_name(&mut self) -> String {
        let n = self.next_state;
        self.next_state += 1;
        format!("S{n}")
    }

    fn bind(&mut self, short: &'static str, full: &'static str) -> &'static str {
        if !self.bound.iter().any(|(s, _)| *s == short) {
            self.bound.push((short, full));
        }
        short
    }

    fn kind(&mut self, r: &mut Rng) -> String {
        let k = r.pick(KINDS).to_string();
        if !self.kinds.contains(&k) {
            self.kinds.push(k.clone());
        }
        k
    }

    /// An action call, as an enter/exit/activity hook.
    fn hook_action(&mut self, r: &mut Rng) -> String {
        match r.below(100) {
            0..=29 => {
                let a = self.bind("lg", "conf_actions.log");
                let label = if r.chance(25) {
                    gen_str(r)
                } else {
                    V::Str(format!("l{}", r.below(9)))
                };
                format!("{a}(label: {})", label.stm())
            }
            30..=39 => {
                let a = self.bind("sn", "conf_actions.seen");
                a.to_string()
            }
            40..=51 => {
                let a = self.bind("fl", "conf_actions.fail");
                let msg = if r.chance(60) {
                    gen_str(r)
                } else {
                    V::Str("boom".into())
                };
                format!("{a}(message: {})", msg.stm())
            }
            52..=59 => {
                let a = self.bind("fw", "conf_actions.fail_when");
                format!(
                    "{a}(key: \"{}\", message: {})",
                    r.pick(CTX_KEYS),
                    gen_str(r).stm()
                )
            }
            60..=74 => {
                let a = self.bind("pt", "conf_actions.put");
                let key = r.pick(CTX_KEYS);
                format!("{a}(key: \"{key}\", value: {})", gen_value(r, true, 0).stm())
            }
            75..=89 => {
                let a = self.bind("ic", "conf_actions.incr");
                let key = r.pick(&["n", "x", "y"]);
                if r.chance(20) {
                    format!("{a}(key: \"{key}\")")
                } else {
                    format!("{a}(key: \"{key}\", by: {})", gen_number(r, true).stm())
                }
            }
            _ => {
                let a = self.bind("ce", "conf_actions.copy_event");
                let field = r.pick(EVENT_FIELDS);
                if r.chance(50) {
                    format!("{a}(field: \"{field}\", into: \"{}\")", r.pick(CTX_KEYS))
                } else {
                    format!("{a}(field: \"{field}\")")
                }
            }
        }
    }

    /// The hooks, timeout and defer items of a state.
    fn state_items(&mut self, r: &mut Rng, leaf: bool) -> Vec<String> {
        let mut items = Vec::new();
        for _ in 0..r.below(3) {
            let hook = match r.below(10) {
                0..=5 => "enter",
                6 => "exit",
                _ => "activity",
            };
            if hook == "activity" && !leaf {
                continue;
            }
            let act = self.hook_action(r);
            items.push(format!("on {hook} {act}"));
        }
        if r.chance(18) {
            self.has_timers = true;
            if r.chance(80) {
                items.push(format!("timeout {}", r.pick(&["1", "5", "10", "30", "0"])));
            } else {
                items.push(format!("timeout context {}", r.pick(&["x", "y", "t"])));
            }
        }
        if leaf && r.chance(15) {
            let a = self.kind(r);
            let b = self.kind(r);
            if a == b {
                items.push(format!("defer {a}"));
            } else {
                items.push(format!("defer {a}, {b}"));
            }
        }
        items
    }

    /// A comparison's left side.
    fn lhs(&mut self, r: &mut Rng, error: bool) -> String {
        if error && r.chance(70) {
            return r.pick(&["type", "message"]).to_string();
        }
        match r.below(10) {
            0..=3 => r.pick(EVENT_FIELDS).to_string(),
            4..=5 => format!("event.{}", r.pick(EVENT_FIELDS)),
            _ => format!("context.{}", r.pick(CTX_KEYS)),
        }
    }

    fn comparison(&mut self, r: &mut Rng, error: bool) -> String {
        let lhs = self.lhs(r, error);
        let op = *r.pick(&["==", "!=", "<", "<=", ">", ">=", "in", "==", "<", "in"]);
        let rhs = if r.chance(25) {
            if r.chance(50) {
                format!("context.{}", r.pick(CTX_KEYS))
            } else {
                format!("event.{}", r.pick(EVENT_FIELDS))
            }
        } else if op == "in" {
            if r.chance(60) {
                let n = r.range(1, 3);
                V::List((0..n).map(|_| gen_value(r, true, 1)).collect()).stm()
            } else if error && r.chance(50) {
                V::Str(
                    r.pick(&["RuntimeError", "ValueError", "boom", "ExpressionError"])
                        .to_string(),
                )
                .stm()
            } else {
                gen_str(r).stm()
            }
        } else if error && lhs == "type" {
            V::Str(
                r.pick(&["RuntimeError", "ValueError", "ExpressionError"])
                    .to_string(),
            )
            .stm()
        } else {
            gen_value(r, true, 0).stm()
        };
        format!("{lhs} {op} {rhs}")
    }

    fn predicate(&mut self, r: &mut Rng, depth: usize, error: bool) -> String {
        if depth >= 2 {
            return self.comparison(r, error);
        }
        match r.below(10) {
            0..=4 => self.comparison(r, error),
            5..=6 => format!(
                "{} and {}",
                self.predicate(r, depth + 1, error),
                self.predicate(r, depth + 1, error)
            ),
            7 => format!(
                "{} or {}",
                self.predicate(r, depth + 1, error),
                self.predicate(r, depth + 1, error)
            ),
            8 => format!("not {}", self.comparison(r, error)),
            _ => format!(
                "({} or {}) and {}",
                self.comparison(r, error),
                self.comparison(r, error),
                self.comparison(r, error)
            ),
        }
    }

    fn operand(&mut self, r: &mut Rng) -> String {
        match r.below(10) {
            0..=3 => format!("context.{}", r.pick(CTX_KEYS)),
            4..=6 => format!("event.{}", r.pick(EVENT_FIELDS)),
            7..=8 => gen_number(r, true).stm(),
            _ => gen_value(r, true, 0).stm(),
        }
    }

    /// `set context.k = ...` (one or two assignments), or "" (none).
    fn assign(&mut self, r: &mut Rng, pct: u64) -> String {
        if !r.chance(pct) {
            return String::new();
        }
        let mut parts = Vec::new();
        for _ in 0..r.range(1, 2) {
            let key = r.pick(&["x", "y", "z", "s", "x", "y"]);
            let expr = match r.below(10) {
                0..=1 => self.operand(r),
                2..=3 => format!("context.{key} + {}", self.operand(r)),
                4 => format!("context.{key} - {}", self.operand(r)),
                // one side a context value, the other an event value or a literal: the
                // product's size grows linearly over a script, not exponentially
                5..=6 => {
                    let other = if r.chance(60) {
                        format!("event.{}", r.pick(EVENT_FIELDS))
                    } else {
                        gen_number(r, true).stm()
                    };
                    format!("context.{key} * {other}")
                }
                7..=8 => format!("{} / {}", self.operand(r), self.operand(r)),
                _ => format!("event.{} + event.{}", r.pick(EVENT_FIELDS), r.pick(EVENT_FIELDS)),
            };
            parts.push(format!("context.{key} = {expr}"));
        }
        format!(" set {}", parts.join(", "))
    }

    fn trigger(&mut self, r: &mut Rng) -> String {
        let k = self.kind(r);
        if r.chance(40) {
            format!(" on {k} where {}", self.predicate(r, 0, false))
        } else if r.chance(10) {
            let k2 = self.kind(r);
            if k2 == k {
                format!(" on {k}")
            } else {
                format!(" on {k} | {k2}")
            }
        } else {
            format!(" on {k}")
        }
    }

    /// The transitions of one scope. `children` are its children in declaration order;
    /// `scope` is the composite's own name (None at the machine root).
    fn transitions(&mut self, r: &mut Rng, children: &[Child], scope: Option<&str>) -> Vec<String> {
        let mut out = Vec::new();
        let names: Vec<&str> = children.iter().map(|c| c.name.as_str()).collect();
        let target = |r: &mut Rng, from: usize| -> String {
            let c = &children[r.below(children.len())];
            if !c.inner.is_empty() && r.chance(20) {
                format!("\"{}.{}\"", c.name, r.pick(&c.inner))
            } else if let (Some(s), true) = (scope, r.chance(6)) {
                s.to_string()
            } else if r.chance(15) {
                children[from].name.clone()
            } else {
                c.name.clone()
            }
        };
        // an automatic edge only goes forward (no eventless cycles)
        let forward = |r: &mut Rng, from: usize| -> Option<String> {
            if from + 1 >= names.len() {
                None
            } else {
                Some(names[r.range(from + 1, names.len() - 1)].to_string())
            }
        };
        let mut has_error = false;
        for (i, c) in children.iter().enumerate() {
            if c.terminal {
                continue;
            }
            let src = &c.name;
            if c.orthogonal {
                let live: Vec<&str> = names.iter().copied().filter(|n| n != src).collect();
                if live.is_empty() {
                    continue;
                }
                match r.below(4) {
                    0 => {
                        let a = r.pick(&live).to_string();
                        let b = r.pick(&live).to_string();
                        out.push(format!("from {src} join all to {a} else to {b}"));
                    }
                    1 => {
                        let a = r.pick(&live).to_string();
                        let b = r.pick(&live).to_string();
                        out.push(format!("from {src} join any to {a} else to {b}"));
                    }
                    2 => {
                        if let Some(t) = forward(r, i) {
                            out.push(format!("from {src} to {t}"));
                        }
                    }
                    _ => {
                        let t = r.pick(&live).to_string();
                        out.push(format!("from {src} to {t} on Timeout"));
                    }
                }
                continue;
            }
            for _ in 0..r.range(0, 2) {
                let t = match r.below(100) {
                    0..=54 => {
                        let t = target(r, i);
                        let trig = self.trigger(r);
                        let set = self.assign(r, 35);
                        format!("from {src} to {t}{trig}{set}")
                    }
                    55..=62 => match forward(r, i) {
                        Some(t) => {
                            let set = self.assign(r, 30);
                            format!("from {src} to {t}{set}")
                        }
                        None => continue,
                    },
                    63..=70 => {
                        let t = target(r, i);
                        self.has_timers = true;
                        let set = self.assign(r, 20);
                        format!("from {src} to {t} on Timeout{set}")
                    }
                    71..=84 => {
                        // a choose, on an event (or automatic, forward only)
                        let auto = r.chance(20);
                        let trig = if auto { String::new() } else { self.trigger(r) };
                        let pick = |r: &mut Rng| -> Option<String> {
                            if auto {
                                forward(r, i)
                            } else {
                                Some(target(r, i))
                            }
                        };
                        let mut body = Vec::new();
                        for _ in 0..r.range(1, 3) {
                            let Some(t) = pick(r) else { break };
                            let p = self.predicate(r, 1, false);
                            let set = self.assign(r, 30);
                            body.push(format!("when {p} to {t}{set}"));
                        }
                        if body.is_empty() {
                            continue;
                        }
                        if r.chance(70) {
                            if let Some(t) = pick(r) {
                                let set = self.assign(r, 30);
                                body.push(format!("else to {t}{set}"));
                            }
                        }
                        let set = self.assign(r, 15);
                        format!("from {src} choose{trig}{set} {{ {} }}", body.join(" "))
                    }
                    85..=93 => {
                        // a selector on an event
                        let action = match r.below(4) {
                            0 => {
                                let a = self.bind("pk", "conf_actions.pick");
                                format!("{a}(value: {})", gen_value(r, true, 0).stm())
                            }
                            1 => {
                                let a = self.bind("pc", "conf_actions.pick_ctx");
                                format!("{a}(key: \"{}\")", r.pick(CTX_KEYS))
                            }
                            2 if r.chance(30) => {
                                let a = self.bind("fl", "conf_actions.fail");
                                format!("{a}(message: {})", gen_str(r).stm())
                            }
                            _ => {
                                let a = self.bind("pe", "conf_actions.pick_event");
                                format!("{a}(field: \"{}\")", r.pick(EVENT_FIELDS))
                            }
                        };
                        let trig = self.trigger(r);
                        let mut seen = Vec::new();
                        let mut body = Vec::new();
                        for _ in 0..r.range(1, 3) {
                            let v = gen_value(r, true, 1);
                            let key = v.str_key();
                            if seen.contains(&key) {
                                continue;
                            }
                            seen.push(key);
                            let t = target(r, i);
                            body.push(format!("{} to {t}", v.stm()));
                        }
                        if r.chance(60) {
                            let t = target(r, i);
                            body.push(format!("else to {t}"));
                        }
                        format!("from {src} select {action}{trig} {{ {} }}", body.join(" "))
                    }
                    _ => {
                        if has_error && r.chance(50) {
                            continue;
                        }
                        has_error = true;
                        let t = target(r, i);
                        if r.chance(30) {
                            let p = self.predicate(r, 1, true);
                            format!("from {src} to {t} on error where {p}")
                        } else {
                            format!("from {src} to {t} on error")
                        }
                    }
                };
                out.push(t);
            }
        }
        // errors are more interesting routed than fatal: most scopes get a handler
        let sources: Vec<usize> = (0..children.len())
            .filter(|&i| !children[i].terminal && !children[i].orthogonal)
            .collect();
        if !has_error && !sources.is_empty() && r.chance(55) {
            let i = *r.pick(&sources);
            let t = target(r, i);
            let src = &children[i].name;
            if r.chance(30) {
                let p = self.predicate(r, 1, true);
                out.push(format!("from {src} to {t} on error where {p}"));
            } else {
                out.push(format!("from {src} to {t} on error"));
            }
        }
        out
    }

    /// The children of a scope (machine root: depth 0).
    /// `limit`: the state count the machine may reach once this scope is written (the
    /// machine's states are numbered in creation order, so `next_state` is the count).
    fn children(&mut self, r: &mut Rng, depth: usize, limit: usize) -> Vec<Child> {
        let n = if depth == 0 { r.range(3, 5) } else { r.range(2, 3) };
        let n = n.min(limit.saturating_sub(self.next_state)).max(1);
        let mut out: Vec<Child> = Vec::new();
        for i in 0..n {
            let roll = r.below(100);
            // what this child may use, keeping one state for each sibling still to come
            let avail = limit.saturating_sub(self.next_state + (n - i - 1));
            let name = self.state_name();
            if i > 0 && roll < 14 {
                let outcome = r.pick(&["success", "failed", "rejected"]);
                let body = if r.chance(25) {
                    let a = self.hook_action(r);
                    format!(" {{ on enter {a} }}")
                } else {
                    String::new()
                };
                out.push(Child {
                    text: format!("final {name} {outcome}{body}"),
                    name,
                    terminal: true,
                    inner: vec![],
                    orthogonal: false,
                });
            } else if depth == 0 && !self.has_orthogonal && roll >= 80 && avail >= ORTHOGONAL_STATES {
                self.has_orthogonal = true;
                out.push(self.orthogonal(r, name));
            } else if depth < 2 && (56..80).contains(&roll) && avail >= 3 {
                let inner_limit = self.next_state + avail - 1;
                let kids = self.children(r, depth + 1, inner_limit);
                let mut items = self.state_items(r, false);
                if r.chance(15) {
                    items.push("no history".into());
                }
                items.push(format!("initial {}", kids[0].name));
                let trans = self.transitions(r, &kids, Some(&name));
                let inner: Vec<String> = kids.iter().map(|k| k.name.clone()).collect();
                items.extend(kids.into_iter().map(|k| k.text));
                items.extend(trans);
                out.push(Child {
                    text: format!("state {name} {{\n{}\n}}", items.join("\n")),
                    name,
                    terminal: false,
                    inner,
                    orthogonal: false,
                });
            } else {
                let items = self.state_items(r, true);
                out.push(Child {
                    text: format!("state {name} {{ {} }}", items.join(" ")),
                    name,
                    terminal: false,
                    inner: vec![],
                    orthogonal: false,
                });
            }
        }
        out
    }

    /// An orthogonal state: 2 regions, each a small composite ending in finals.
    fn orthogonal(&mut self, r: &mut Rng, name: String) -> Child {
        let mut items = Vec::new();
        if r.chance(30) {
            items.push("cancel_on_failure".to_string());
        }
        if r.chance(30) {
            self.has_timers = true;
            items.push(format!("timeout {}", r.pick(&["5", "30"])));
        }
        if r.chance(30) {
            let a = self.hook_action(r);
            items.push(format!("on enter {a}"));
        }
        for _ in 0..2 {
            let region = self.state_name();
            let work = self.state_name();
            let ok = self.state_name();
            let bad = self.state_name();
            let mut ritems = Vec::new();
            if r.chance(40) {
                ritems.push(format!("carry {}", r.pick(CTX_KEYS)));
            }
            let items_w = self.state_items(r, true);
            ritems.push(format!("initial {work}"));
            ritems.push(format!("state {work} {{ {} }}", items_w.join(" ")));
            ritems.push(format!("final {ok} success"));
            ritems.push(format!("final {bad} failed"));
            let t1 = self.trigger(r);
            let s1 = self.assign(r, 40);
            ritems.push(format!("from {work} to {ok}{t1}{s1}"));
            let t2 = self.trigger(r);
            ritems.push(format!("from {work} to {bad}{t2}"));
            if r.chance(25) {
                ritems.push(format!("from {work} to {bad} on error"));
            }
            items.push(format!("state {region} {{\n{}\n}}", ritems.join("\n")));
        }
        Child {
            text: format!("orthogonal {name} {{\n{}\n}}", items.join("\n")),
            name,
            terminal: false,
            inner: vec![],
            orthogonal: true,
        }
    }
}

/// One generated case: the machine text and the case line for harel_batch.py.
#[derive(Debug)]
struct Case {
    name: String,
    index: usize,
    text: String,
    /// the seed (context) as JSON text, or "null"
    seed: String,
    /// the steps as JSON text
    steps: String,
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

fn gen_case(seed: u64, index: usize) -> Case {
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
    let n = r.range(3, 15);
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

// ---------------------------------------------------------------- comparison

/// An object from pairs (`json!` would serialize the values, which a non-finite number
/// does not survive).
fn object(pairs: Vec<(&str, Value)>) -> Value {
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
const DELIBERATE_DIFFERENCES: &[(&str, &str)] = &[(
    "is not an ancestor of",
    "a region's Timeout that only a transition of the machine around it handles: harel's \
     bubbling passes the region's root, then raises ValueError and leaves the region with an \
     active path outside itself; ours stops at the region's root and leaves the timeout \
     unhandled (stm_core::engine, resolve_at)",
)];

#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Verdict {
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

fn disagree(class: String, what: &str, path: String, ours: Value, harel: Value, all: Vec<String>) -> Verdict {
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
async fn compare(case: &Case, machine: &Path, result: &Value) -> (Verdict, Value) {
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

// ---------------------------------------------------------------- the harness

fn python() -> String {
    if let Ok(p) = std::env::var("STM_PYTHON") {
        return p;
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    if venv.exists() {
        return venv.to_string_lossy().into_owned();
    }
    "python3".into()
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn env_seed() -> u64 {
    match std::env::var("STM_FUZZ_SEED") {
        Ok(v) => {
            let v = v.trim();
            v.strip_prefix("0x")
                .map_or_else(|| v.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
                .unwrap_or_else(|| panic!("STM_FUZZ_SEED={v}: not a number"))
        }
        Err(_) => DEFAULT_SEED,
    }
}

/// Run harel on every case (shards in parallel), results by case name.
fn run_harel(dir: &Path, cases: &[(Case, PathBuf)], jobs: usize) -> BTreeMap<String, Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/harel_batch.py");
    let mut children = Vec::new();
    for shard in 0..jobs {
        let input = dir.join(format!("cases-{shard}.jsonl"));
        let mut text = String::new();
        for (case, path) in cases.iter().skip(shard).step_by(jobs) {
            let _ = writeln!(
                text,
                "{{\"name\": {}, \"machine\": {}, \"machine_name\": \"M\", \"seed\": {}, \"steps\": {}}}",
                json_str(&case.name),
                json_str(&path.to_string_lossy()),
                case.seed,
                case.steps
            );
        }
        std::fs::write(&input, text).expect("write the batch");
        let stdin = std::fs::File::open(&input).expect("open the batch");
        let mut cmd = Command::new(python());
        cmd.arg(&script);
        if std::env::var_os("STM_FUZZ_ARMING_ORDER").is_some() {
            cmd.arg("--arming-order");
        }
        let child = cmd
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {} (set STM_PYTHON to the venv with harel 0.9.0): {e}",
                    python()
                )
            });
        children.push(child);
    }
    let mut out = BTreeMap::new();
    for (shard, child) in children.into_iter().enumerate() {
        let output = child.wait_with_output().expect("harel batch");
        assert!(
            output.status.success(),
            "harel_batch.py failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let _ = std::fs::write(dir.join(format!("results-{shard}.jsonl")), &output.stdout);
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let v = pyjson::loads(line).unwrap_or_else(|e| panic!("harel output line: {e:?}: {line}"));
            let name = v["name"].as_str().unwrap_or_default().to_string();
            out.insert(name, v);
        }
    }
    out
}

/// The cases of a JSONL file, each `{"name", "machine": <.stm text>, "case": {"seed",
/// "steps"}}`: the shape of a `fuzz-disagreements.jsonl` line, so a report replays as is
/// (and a hand-minimised case is written the same way).
fn replay(file: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let v = pyjson::loads(line).unwrap_or_else(|e| panic!("{}:{}: {e:?}", file.display(), i + 1));
            let name = v["name"]
                .as_str()
                .map_or_else(|| format!("replay-{i:05}"), str::to_string);
            Case {
                name,
                index: v["index"].as_u64().map_or(i, |n| n as usize),
                text: v["machine"].as_str().unwrap_or_default().to_string(),
                seed: pyjson::dumps(&v["case"]["seed"]),
                steps: pyjson::dumps(&v["case"]["steps"]),
            }
        })
        .collect()
}

#[tokio::test]
async fn differential_fuzz_against_harel() {
    let seed = env_seed();
    let count = env_usize("STM_FUZZ_CASES").unwrap_or(DEFAULT_CASES);
    let only = env_usize("STM_FUZZ_ONLY");
    let jobs = env_usize("STM_FUZZ_JOBS")
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()).min(2))
        .max(1);
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-{seed:x}"));
    std::fs::create_dir_all(&dir).expect("fuzz dir");
    let started = Instant::now();

    let generated: Vec<Case> = match std::env::var("STM_FUZZ_REPLAY") {
        Ok(file) => replay(Path::new(&file)),
        Err(_) => match only {
            Some(i) => vec![gen_case(seed, i)],
            None => (0..count).map(|i| gen_case(seed, i)).collect(),
        },
    };
    let cases: Vec<(Case, PathBuf)> = generated
        .into_iter()
        .map(|case| {
            let path = dir.join(format!("{}.stm", case.name));
            std::fs::write(&path, &case.text).expect("write machine");
            (case, path)
        })
        .collect();
    assert!(!cases.is_empty(), "no case to run");
    let harel = run_harel(&dir, &cases, jobs.min(cases.len()).max(1));
    let harel_secs = started.elapsed().as_secs_f64();

    let report = target.join("fuzz-disagreements.jsonl");
    let mut lines = String::new();
    let mut agree = 0;
    let mut deliberate: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut classes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (case, path) in &cases {
        let result = harel
            .get(&case.name)
            .unwrap_or_else(|| panic!("no harel result for {}", case.name));
        let harel_text = pyjson::dumps(result);
        if let Some((_, reason)) = DELIBERATE_DIFFERENCES
            .iter()
            .find(|(m, _)| harel_text.contains(m))
        {
            deliberate.entry(reason).or_default().push(case.name.clone());
            continue;
        }
        let (verdict, ours) = compare(case, path, result).await;
        match verdict {
            Verdict::Agree => agree += 1,
            Verdict::Disagree {
                class,
                what,
                path: at,
                ours: o,
                harel: h,
                all,
            } => {
                classes.entry(class.clone()).or_default().push(case.name.clone());
                let record = object(vec![
                    ("name", Value::from(case.name.clone())),
                    ("seed", Value::from(format!("{seed:#x}"))),
                    ("index", Value::from(case.index)),
                    ("class", Value::from(class)),
                    (
                        "first_difference",
                        object(vec![
                            ("what", Value::from(what)),
                            ("path", Value::from(at)),
                            ("ours", o),
                            ("harel", h),
                        ]),
                    ),
                    ("differs", json!(all)),
                    ("machine", Value::from(case.text.clone())),
                    (
                        "case",
                        object(vec![
                            ("seed", pyjson::loads(&case.seed).unwrap_or(Value::Null)),
                            ("steps", pyjson::loads(&case.steps).unwrap_or(Value::Null)),
                        ]),
                    ),
                    ("harel", result.clone()),
                    ("ours", ours),
                ]);
                lines.push_str(&pyjson::dumps(&record));
                lines.push('\n');
            }
        }
    }
    std::fs::write(&report, &lines).expect("write the disagreements");
    let total = cases.len();
    eprintln!(
        "differential fuzz (seed {seed:#x}, {jobs} harel process(es)): {agree}/{total} agree, \
         {} deliberate differences, in {:.1}s (harel {harel_secs:.1}s)",
        deliberate.values().map(Vec::len).sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
    for (class, names) in &classes {
        let shown: Vec<&str> = names.iter().take(4).map(String::as_str).collect();
        eprintln!("  {:>4}  {class}  (e.g. {})", names.len(), shown.join(", "));
    }
    let deliberate_count: usize = deliberate.values().map(Vec::len).sum();
    for (reason, names) in &deliberate {
        eprintln!(
            "  {:>4}  deliberate difference: {reason}  (e.g. {})",
            names.len(),
            names[0]
        );
    }
    eprintln!("disagreements: {}", report.display());
    eprintln!("machines and batches: {}", dir.display());
    assert_eq!(
        agree + deliberate_count,
        total,
        "{} of {total} fuzz cases disagree with harel; see {}",
        total - agree,
        report.display()
    );
}
