//! Python's `+`, `*` and `**` over JSON values, as harel's `harel.lib` built-ins apply
//! them to whatever inputs they are given: bools are ints, a string or a list times an
//! int repeats, two strings or two lists concatenate, and every other mix raises Python's
//! `TypeError` with Python's message. (The `.stm` language's own `set` arithmetic is
//! stricter, as harel's is: numbers only.)
//!
//! Within 64 bits: an int result Python would hold as a big int is an `OverflowError`
//! here, a limit of stm's numbers.

use stm_core::engine::ActionError;
use stm_core::pyvalue;
use stm_core::Value;

/// The longest string or list a repetition may build: more could never be committed (a
/// DynamoDB item holds at most 400 KB).
const MAX_REPEATED_LEN: usize = 400 * 1024;

#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

/// The number Python sees in `v` (a bool is an int), or `None` for a non-number.
fn num(v: &Value) -> Option<Num> {
    match v {
        Value::Bool(b) => Some(Num::Int(i64::from(*b))),
        Value::Number(n) => n.as_i64().map(Num::Int).or_else(|| n.as_f64().map(Num::Float)),
        _ => None,
    }
}

fn to_f64(n: Num) -> f64 {
    match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    }
}

fn int_value(i: Option<i64>, op: &str) -> Result<Value, ActionError> {
    i.map(Value::from).ok_or_else(|| {
        ActionError::new(
            "OverflowError",
            format!("the result of `{op}` does not fit in 64 bits"),
        )
    })
}

fn unsupported(op: &str, a: &Value, b: &Value) -> ActionError {
    ActionError::new(
        "TypeError",
        format!(
            "unsupported operand type(s) for {op}: '{}' and '{}'",
            pyvalue::type_name(a),
            pyvalue::type_name(b)
        ),
    )
}

/// `a + b`.
pub(crate) fn add(a: &Value, b: &Value) -> Result<Value, ActionError> {
    match (num(a), num(b), a, b) {
        (Some(Num::Int(x)), Some(Num::Int(y)), _, _) => int_value(x.checked_add(y), "+"),
        (Some(x), Some(y), _, _) => Ok(pyvalue::float(to_f64(x) + to_f64(y))),
        (_, _, Value::String(x), Value::String(y)) => Ok(Value::from(format!("{x}{y}"))),
        (_, _, Value::Array(x), Value::Array(y)) => Ok(Value::Array([x.as_slice(), y.as_slice()].concat())),
        (_, _, Value::String(_) | Value::Array(_), _) => {
            let kind = pyvalue::type_name(a);
            Err(ActionError::new(
                "TypeError",
                format!(
                    "can only concatenate {kind} (not \"{}\") to {kind}",
                    pyvalue::type_name(b)
                ),
            ))
        }
        _ => Err(unsupported("+", a, b)),
    }
}

/// `a * b`.
pub(crate) fn mul(a: &Value, b: &Value) -> Result<Value, ActionError> {
    match (num(a), num(b)) {
        (Some(Num::Int(x)), Some(Num::Int(y))) => int_value(x.checked_mul(y), "*"),
        (Some(x), Some(y)) => Ok(pyvalue::float(to_f64(x) * to_f64(y))),
        // a sequence and a count, either way round
        (None, _) if matches!(a, Value::String(_) | Value::Array(_)) => repeat(a, b),
        (_, None) if matches!(b, Value::String(_) | Value::Array(_)) => repeat(b, a),
        _ => Err(unsupported("*", a, b)),
    }
}

/// `sequence * count`.
fn repeat(sequence: &Value, count: &Value) -> Result<Value, ActionError> {
    let n = match (num(count), count) {
        (Some(Num::Int(n)), _) => n,
        (_, Value::Object(_) | Value::Null) => return Err(unsupported("*", sequence, count)),
        _ => {
            return Err(ActionError::new(
                "TypeError",
                format!(
                    "can't multiply sequence by non-int of type '{}'",
                    pyvalue::type_name(count)
                ),
            ))
        }
    };
    let n = usize::try_from(n).unwrap_or(0);
    let too_long = |len: usize| {
        len.checked_mul(n)
            .is_none_or(|total| total > MAX_REPEATED_LEN)
            .then(|| {
                ActionError::new(
                    "MemoryError",
                    format!(
                        "repeating a {} of {len} {n} times exceeds DynamoDB's 400 KB item limit",
                        pyvalue::type_name(sequence)
                    ),
                )
            })
    };
    match sequence {
        Value::String(s) => match too_long(s.len()) {
            Some(err) => Err(err),
            None => Ok(Value::from(s.repeat(n))),
        },
        Value::Array(items) => match too_long(items.len()) {
            Some(err) => Err(err),
            None => Ok(Value::Array(
                items.iter().cloned().cycle().take(items.len() * n).collect(),
            )),
        },
        _ => Err(unsupported("*", sequence, count)),
    }
}

/// `a ** n` for an int exponent `n` (the only power the built-ins take).
pub(crate) fn pow(a: &Value, n: i64) -> Result<Value, ActionError> {
    let exponent = Value::from(n);
    let zero_to_negative =
        || ActionError::new("ZeroDivisionError", "0.0 cannot be raised to a negative power");
    match num(a) {
        None => Err(unsupported("** or pow()", a, &exponent)),
        Some(Num::Int(x)) if n >= 0 => {
            let n = u32::try_from(n).ok();
            int_value(n.and_then(|n| x.checked_pow(n)), "**")
        }
        Some(x) => {
            let base = to_f64(x);
            if base == 0.0 && n < 0 {
                return Err(zero_to_negative());
            }
            let result = base.powf(n as f64);
            if result.is_infinite() && base.is_finite() {
                return Err(ActionError::new(
                    "OverflowError",
                    "(34, 'Numerical result out of range')",
                ));
            }
            Ok(pyvalue::float(result))
        }
    }
}
