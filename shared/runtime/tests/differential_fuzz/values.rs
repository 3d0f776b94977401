//! Random values (integers of any size, floats, non-finite numbers, strings, nested
//! objects and arrays), written as JSON for harel and, when they can be, as `.stm`
//! literals.

use std::fmt::Write as _;

use crate::rng::Rng;

/// A generated value, written both as JSON (seeds, event data: Python's `json` reads the
/// same text) and, when it can be, as a `.stm` literal.
#[derive(Debug, Clone)]
pub(crate) enum V {
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

pub(crate) fn gen_int(r: &mut Rng, stm: bool) -> V {
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

pub(crate) fn gen_float(r: &mut Rng, stm: bool) -> V {
    if !stm && r.chance(4) {
        V::Float(r.pick(NON_FINITE).to_string())
    } else {
        V::Float(r.pick(FLOATS).to_string())
    }
}

pub(crate) fn gen_str(r: &mut Rng) -> V {
    V::Str(r.pick(STRINGS).to_string())
}

/// Any value; `stm`: writable as a `.stm` literal (no null, no ints past 64 bits, no
/// non-finite floats).
pub(crate) fn gen_value(r: &mut Rng, stm: bool, depth: usize) -> V {
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
pub(crate) fn gen_number(r: &mut Rng, stm: bool) -> V {
    match r.below(100) {
        0..=49 => gen_int(r, stm),
        50..=91 => gen_float(r, stm),
        _ => V::Bool(r.chance(50)),
    }
}

impl V {
    pub(crate) fn json(&self) -> String {
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
    pub(crate) fn stm(&self) -> String {
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
    pub(crate) fn str_key(&self) -> String {
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
pub(crate) fn json_str(s: &str) -> String {
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
