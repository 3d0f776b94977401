//! Python value semantics over JSON values.
//!
//! harel evaluates guards, selector mappings and `set` arithmetic with Python's
//! operators. To give the same answers on the same data we reproduce the parts that
//! matter: `bool` is an `int` (`true == 1`), ordering across types is a `TypeError`
//! (which a guard treats as "does not hold"), `/` always yields a float, and
//! `str(value)` spells `True`, `None`, `1.0` and `[1, 'a']` the Python way.

use std::cmp::Ordering;

use crate::{Map, Value};

// which characters Python's `repr` escapes (generated)
mod unprintable;

/// A number as Python sees it (bools included), or `None` for non-numbers.
fn as_num(v: &Value) -> Option<Num> {
    match v {
        Value::Bool(b) => Some(Num::Int(i64::from(*b))),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(Num::Int(i))
            } else if let Some(u) = n.as_u64() {
                Some(Num::Float(u as f64))
            } else {
                n.as_f64().map(Num::Float)
            }
        }
        _ => None,
    }
}

#[derive(Clone, Copy, Debug)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

fn num_cmp(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
        _ => a.as_f64().partial_cmp(&b.as_f64()),
    }
}

/// Python `a == b`.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    if let (Some(x), Some(y)) = (as_num(a), as_num(b)) {
        return num_cmp(x, y) == Some(Ordering::Equal);
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
        return num_cmp(x, y);
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
        Value::Number(n) if n.is_f64() => "float",
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
            if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else if let Some(u) = n.as_u64() {
                out.push_str(&u.to_string());
            } else {
                out.push_str(&float_repr(n.as_f64().unwrap_or(f64::NAN)));
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
    // Rust's `{:e}` gives the shortest round-trip digits: "1.2345e6", "-5e-7"
    let sci = format!("{f:e}");
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

/// Python arithmetic `left op right` on numbers (bools excluded, as harel does).
/// `Err` carries harel's `ExpressionError` message.
pub fn arith(op: crate::definition::ArithOp, left: &Value, right: &Value) -> Result<Value, String> {
    use crate::definition::ArithOp;
    let num = |v: &Value| -> Result<Num, String> {
        match v {
            Value::Number(_) => as_num(v).ok_or_else(|| "bad number".to_string()),
            other => Err(format!(
                "`{}` needs numbers, got {} {}",
                op.symbol(),
                type_name(other),
                repr(other)
            )),
        }
    };
    let (l, r) = (num(left)?, num(right)?);
    if op == ArithOp::Div && r.as_f64() == 0.0 {
        return Err("division by zero".into());
    }
    let int_result = match (op, l, r) {
        (ArithOp::Add, Num::Int(a), Num::Int(b)) => a.checked_add(b),
        (ArithOp::Sub, Num::Int(a), Num::Int(b)) => a.checked_sub(b),
        (ArithOp::Mul, Num::Int(a), Num::Int(b)) => a.checked_mul(b),
        _ => None,
    };
    if let Some(i) = int_result {
        return Ok(Value::from(i));
    }
    let (a, b) = (l.as_f64(), r.as_f64());
    let f = match op {
        ArithOp::Add => a + b,
        ArithOp::Sub => a - b,
        ArithOp::Mul => a * b,
        ArithOp::Div => a / b,
    };
    Ok(serde_json::Number::from_f64(f)
        .map(Value::Number)
        .unwrap_or(Value::Null))
}

/// A float as a JSON value (`null` for NaN/inf, which JSON cannot carry).
pub fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// Read a number as seconds (ints and floats; bools count as Python would).
pub fn as_seconds(v: &Value) -> Option<f64> {
    as_num(v).map(Num::as_f64)
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
        use crate::definition::ArithOp;
        assert_eq!(arith(ArithOp::Add, &json!(1), &json!(2)), Ok(json!(3)));
        assert_eq!(arith(ArithOp::Div, &json!(4), &json!(2)), Ok(json!(2.0)));
        assert_eq!(arith(ArithOp::Mul, &json!(1.5), &json!(2)), Ok(json!(3.0)));
        assert!(arith(ArithOp::Div, &json!(1), &json!(0)).is_err());
        assert!(arith(ArithOp::Add, &json!(true), &json!(1)).is_err());
    }
}
