//! Python value semantics over JSON values.
//!
//! harel evaluates guards, selector mappings and `set` arithmetic with Python's
//! operators. To give the same answers on the same data we reproduce the parts that
//! matter: `bool` is an `int` (`true == 1`), ordering across types is a `TypeError`
//! (which a guard treats as "does not hold"), `/` always yields a float, and
//! `str(value)` spells `True`, `None`, `1.0` and `[1, 'a']` the Python way.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::pynum::{self, Num, NumError};
use crate::{Map, Value};

// which characters Python's `repr` escapes (generated)
mod unprintable;

/// A number as Python sees it (bools included), or `None` for non-numbers.
fn as_num(v: &Value) -> Option<Num> {
    Num::from_value(v)
}

/// Python `a == b`.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    if let (Some(x), Some(y)) = (as_num(a), as_num(b)) {
        return x.py_cmp(&y) == Some(Ordering::Equal);
    }
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => false,
    }
}

/// Python's ordering of `a` and `b`, or `None` where Python raises `TypeError`.
pub fn py_cmp(a: &Value, b: &Value) -> Option<Ordering> {
    if let (Some(x), Some(y)) = (as_num(a), as_num(b)) {
        return x.py_cmp(&y);
    }
    match (a, b) {
        (Value::String(x), Value::String(y)) => Some(x.as_str().cmp(y.as_str())),
        (Value::Array(x), Value::Array(y)) => {
            // lexicographic: the first unequal pair decides, else the lengths
            for (p, q) in x.iter().zip(y) {
                if !py_eq(p, q) {
                    return py_cmp(p, q);
                }
            }
            Some(x.len().cmp(&y.len()))
        }
        _ => None,
    }
}

/// Python `item in container`, or `None` where Python raises `TypeError`.
pub fn py_contains(container: &Value, item: &Value) -> Option<bool> {
    match container {
        Value::Array(items) => Some(items.iter().any(|x| py_eq(x, item))),
        Value::String(s) => match item {
            Value::String(sub) => Some(s.contains(sub.as_str())),
            _ => None,
        },
        Value::Object(map) => match item {
            Value::String(k) => Some(map.contains_key(k)),
            // unhashable keys raise; other scalars just aren't JSON object keys
            Value::Array(_) | Value::Object(_) => None,
            _ => Some(false),
        },
        _ => None,
    }
}

/// Python's `type(value).__name__`.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if pynum::is_float_text(n.as_str()) => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python's `str(value)`.
pub fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => repr(other),
    }
}

/// Python's `repr(value)`.
pub fn repr(v: &Value) -> String {
    let mut out = String::new();
    write_repr(v, &mut out);
    out
}

fn write_repr(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => {
            let text = n.as_str();
            if pynum::is_float_text(text) {
                out.push_str(&float_repr(pynum::parse_float(text)));
            } else {
                // an int's JSON text is its Python repr, whatever its size
                out.push_str(text);
            }
        }
        Value::String(s) => out.push_str(&str_repr(s)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&str_repr(k));
                out.push_str(": ");
                write_repr(item, out);
            }
            out.push('}');
        }
    }
}

/// Python's `repr(str)`: single quotes unless the text has a single quote and no double.
/// Python's `str.isprintable()` for one character (the table is generated from the
/// Unicode database of the Python harel runs on).
pub fn is_printable(c: char) -> bool {
    let c = c as u32;
    unprintable::UNPRINTABLE
        .binary_search_by(|&(start, end)| {
            if end < c {
                Ordering::Less
            } else if start > c {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        })
        .is_err()
}

fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c if (c as u32) <= 0xff => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push(quote);
    out
}

/// Python's `repr(float)`: the shortest round-trip digits, in positional notation for
/// exponents from -4 to 15 and in `1e+16` style outside.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.2345e6", "-5e-7". Where two
    // spellings of that length both round-trip, Python takes the one nearest the exact
    // value (ties to even): the correctly rounded digits at that precision.
    let mut sci = format!("{f:e}");
    let precision = sci
        .split_once('e')
        .map_or(0, |(m, _)| m.trim_start_matches('-').len().saturating_sub(2));
    let nearest = format!("{f:.precision$e}");
    if nearest != sci && nearest.parse::<f64>() == Ok(f) {
        sci = nearest;
    }
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if negative { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
        };
        format!("{sign}{body}")
    } else {
        let frac = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{frac}e{esign}{:02}", exp.abs())
    }
}

/// Why a `set` expression could not be evaluated.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ArithError {
    /// harel's `ExpressionError` (a non-number, division by zero): routed to `on error`.
    Expression(String),
    /// A Python exception the operator itself raises (`OverflowError`, a too-large int):
    /// harel lets it escape the step unrouted, and so do we.
    Raised(NumError),
}

/// An arithmetic operator of a `set` expression: Python's `+`, `-`, `*` and `/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl ArithOp {
    /// The `.stm` spelling, Python's.
    pub fn symbol(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
        }
    }
}

/// Python arithmetic `left op right` on numbers (bools excluded, as harel does): ints of
/// any size, exact mixed arithmetic, `int / int` correctly rounded.
pub fn arith(op: ArithOp, left: &Value, right: &Value) -> Result<Value, ArithError> {
    let num = |v: &Value| -> Result<Num, ArithError> {
        match v {
            Value::Number(_) => as_num(v).ok_or_else(|| ArithError::Expression("bad number".to_string())),
            other => Err(ArithError::Expression(format!(
                "`{}` needs numbers, got {} {}",
                op.symbol(),
                type_name(other),
                repr(other)
            ))),
        }
    };
    let (l, r) = (num(left)?, num(right)?);
    let result = match op {
        ArithOp::Add => l.add(&r),
        ArithOp::Sub => l.sub(&r),
        ArithOp::Mul => l.mul(&r),
        ArithOp::Div if r.is_zero() => return Err(ArithError::Expression("division by zero".into())),
        ArithOp::Div => l.true_div(&r),
    };
    result.map(Num::into_value).map_err(ArithError::Raised)
}

/// A float as a JSON value (`Infinity`, `-Infinity` and `NaN` as Python's `json` writes
/// them).
pub fn float(f: f64) -> Value {
    pynum::float_value(f)
}

/// Python's `float(v)` for a JSON value, as harel reads a number of seconds: a number or
/// a bool as it is, a string as Python parses one; otherwise Python's `ValueError` or
/// `TypeError`.
pub fn py_float(v: &Value) -> Result<f64, NumError> {
    match v {
        Value::String(text) => pynum::python_digits(text.trim(), true)
            .and_then(|t| t.parse::<f64>().ok())
            .ok_or_else(|| {
                NumError::new(
                    "ValueError",
                    format!("could not convert string to float: {}", repr(v)),
                )
            }),
        other => match Num::from_value(other) {
            Some(n) => n.to_f64(),
            None => Err(NumError::new(
                "TypeError",
                format!(
                    "float() argument must be a string or a real number, not '{}'",
                    type_name(other)
                ),
            )),
        },
    }
}

/// Read a number as seconds (ints and floats; bools count as Python would).
pub fn as_seconds(v: &Value) -> Option<f64> {
    as_num(v).and_then(|n| n.to_f64().ok())
}

/// A shallow helper used by several crates: the object `v`, or an empty one.
pub fn object_or_empty(v: Option<&Value>) -> Map {
    match v {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn float_repr_matches_python() {
        assert_eq!(float_repr(1.0), "1.0");
        assert_eq!(float_repr(0.1), "0.1");
        assert_eq!(float_repr(1e16), "1e+16");
        assert_eq!(float_repr(1e-5), "1e-05");
        assert_eq!(float_repr(0.0001), "0.0001");
        assert_eq!(float_repr(123456.789), "123456.789");
        assert_eq!(float_repr(-2.5), "-2.5");
        assert_eq!(float_repr(1.5e300), "1.5e+300");
        assert_eq!(float_repr(1234567890123456.0), "1234567890123456.0");
        // 900719925474099.25 exactly: .2 and .3 both round-trip, Python takes the even .2
        assert_eq!(float_repr(9007199254740992.0 * 0.1), "900719925474099.2");
        assert_eq!(float_repr(5e-324), "5e-324");
        assert_eq!(float_repr(1.7976931348623157e308), "1.7976931348623157e+308");
    }

    #[test]
    fn str_matches_python() {
        assert_eq!(py_str(&json!(true)), "True");
        assert_eq!(py_str(&json!(null)), "None");
        assert_eq!(py_str(&json!([1, "a", 2.0])), "[1, 'a', 2.0]");
        assert_eq!(py_str(&json!({"a": [true]})), "{'a': [True]}");
        assert_eq!(py_str(&json!("it's")), "it's");
        assert_eq!(repr(&json!("it's")), "\"it's\"");
    }

    #[test]
    fn comparisons_follow_python() {
        assert!(py_eq(&json!(true), &json!(1)));
        assert!(py_eq(&json!(1), &json!(1.0)));
        assert!(!py_eq(&json!("1"), &json!(1)));
        assert_eq!(py_cmp(&json!("a"), &json!(1)), None);
        assert_eq!(py_cmp(&json!([1, 2]), &json!([1, 3])), Some(Ordering::Less));
        assert_eq!(py_contains(&json!(["a", "b"]), &json!("b")), Some(true));
        assert_eq!(py_contains(&json!("hello"), &json!("ell")), Some(true));
        assert_eq!(py_contains(&json!(5), &json!(5)), None);
    }

    #[test]
    fn arithmetic_follows_python() {
        assert_eq!(arith(ArithOp::Add, &json!(1), &json!(2)), Ok(json!(3)));
        let max = json!(i64::MAX);
        assert_eq!(
            arith(ArithOp::Add, &max, &json!(1)).map(|v| v.to_string()),
            Ok("9223372036854775808".to_string())
        );
        assert_eq!(
            arith(ArithOp::Mul, &json!(1e308), &json!(10)).map(|v| crate::pyjson::dumps(&v)),
            Ok("Infinity".into())
        );
        assert_eq!(arith(ArithOp::Div, &json!(4), &json!(2)), Ok(json!(2.0)));
        assert_eq!(arith(ArithOp::Mul, &json!(1.5), &json!(2)), Ok(json!(3.0)));
        assert!(arith(ArithOp::Div, &json!(1), &json!(0)).is_err());
        assert!(arith(ArithOp::Add, &json!(true), &json!(1)).is_err());
    }
}
