//! Python's `+`, `*` and `**` over JSON values, as harel's `harel.lib` built-ins apply
//! them to whatever inputs they are given: bools are ints, a string or a list times an
//! int repeats, two strings or two lists concatenate, and every other mix raises Python's
//! `TypeError` with Python's message. (The `.stm` language's own `set` arithmetic is
//! stricter, as harel's is: numbers only.)
//!
//! Numbers are Python's (`stm_core::pynum`): ints of any size, an int mixed with a float
//! converted first.

use stm_core::engine::ActionError;
use stm_core::pynum::{Num, NumError};
use stm_core::pyvalue;
use stm_core::Value;

/// The longest string or list a repetition may build: more could never be committed (a
/// DynamoDB item holds at most 400 KB).
const MAX_REPEATED_LEN: usize = 400 * 1024;

/// The number Python sees in `v` (a bool is an int), or `None` for a non-number.
fn num(v: &Value) -> Option<Num> {
    Num::from_value(v)
}

fn raised(e: NumError) -> ActionError {
    ActionError::new(e.type_name, e.message)
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
        (Some(x), Some(y), _, _) => x.add(&y).map(Num::into_value).map_err(raised),
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
        (Some(x), Some(y)) => x.mul(&y).map(Num::into_value).map_err(raised),
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
        // a count past 64 bits repeats nothing when negative and outgrows memory otherwise
        (Some(big @ Num::Big(_)), _) => {
            if big.is_negative() {
                0
            } else {
                i64::MAX
            }
        }
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
    match num(a) {
        None => Err(unsupported("** or pow()", a, &Value::from(n))),
        Some(x) => x.pow_int(n).map(Num::into_value).map_err(raised),
    }
}
