//! Python's numeric tower over JSON numbers: unbounded ints, floats, and the exact
//! mixed arithmetic and comparisons Python gives them.
//!
//! A JSON number keeps its text (serde_json's `arbitrary_precision`), so an int of any
//! size keeps every digit, and a non-finite float is held as the text Python's
//! `json.dumps` writes: `Infinity`, `-Infinity`, `NaN`. [`Num`] reads that text with a
//! fast path for ints within 64 bits, which is nearly every number a machine sees.
//!
//! The rules are Python's:
//! - an int and a float compare exactly (`9007199254740993 != 9007199254740992.0`);
//! - `int / int` is correctly rounded (`9007199254740993 / 3 == 3002399751580331.0`);
//! - an int mixed with a float is converted to the nearest float first, and one too
//!   large for a float raises `OverflowError`;
//! - float arithmetic overflows to `inf` without raising, as Python's does.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use num_bigint::{BigInt, BigUint, Sign};
use num_integer::Integer;
use num_traits::{FromPrimitive, ToPrimitive, Zero};
use serde_json::Number;

use crate::Value;

/// How Python's `json.dumps` spells the non-finite floats.
pub const INFINITY: &str = "Infinity";
pub const NEG_INFINITY: &str = "-Infinity";
pub const NAN: &str = "NaN";

/// The number texts that hold the non-finite floats in a [`Value`].
const INFINITY_TEXT: &str = "1e+999";
const NEG_INFINITY_TEXT: &str = "-1e+999";
const NAN_TEXT: &str = "0e+999";

/// An int may grow to this many bits: more digits than a DynamoDB item can hold (400 KB)
/// could never be committed, so a result past it is a `MemoryError`, not a hang.
pub const MAX_INT_BITS: u64 = 1 << 20;

/// A number as Python sees it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Num {
    /// An int within 64 bits (a bool is one too).
    Int(i64),
    /// An int outside 64 bits (never one that fits an `i64`).
    Big(BigInt),
    Float(f64),
}

/// A Python exception a numeric operation raises: its type name and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumError {
    pub type_name: &'static str,
    pub message: String,
}

impl NumError {
    pub(crate) fn new(type_name: &'static str, message: impl Into<String>) -> NumError {
        NumError {
            type_name,
            message: message.into(),
        }
    }

    fn int_too_large() -> NumError {
        NumError::new("OverflowError", "int too large to convert to float")
    }

    fn too_many_bits() -> NumError {
        NumError::new(
            "MemoryError",
            format!("the int would have more than {MAX_INT_BITS} bits, more than an execution can store"),
        )
    }
}

impl fmt::Display for NumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.type_name, self.message)
    }
}

impl std::error::Error for NumError {}

/// Whether a JSON number's text is a float's (ints are bare digits).
pub fn is_float_text(text: &str) -> bool {
    text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E'))
}

/// The float a JSON number's text stands for (`1e400` is `inf`, as in Python).
pub fn parse_float(text: &str) -> f64 {
    if text == NAN_TEXT {
        return f64::NAN;
    }
    text.parse().unwrap_or(f64::NAN)
}

impl Num {
    /// The number in a JSON value, a bool counting as an int; `None` for a non-number.
    pub fn from_value(v: &Value) -> Option<Num> {
        match v {
            Value::Bool(b) => Some(Num::Int(i64::from(*b))),
            Value::Number(n) => Some(Num::from_number(n)),
            _ => None,
        }
    }

    /// The number a JSON number holds.
    pub fn from_number(n: &Number) -> Num {
        let text = n.as_str();
        if is_float_text(text) {
            return Num::Float(parse_float(text));
        }
        match text.parse::<i64>() {
            Ok(i) => Num::Int(i),
            Err(_) => BigInt::from_str(text)
                .map(Num::from_big)
                .unwrap_or(Num::Float(f64::NAN)),
        }
    }

    /// An int, in the small form when it fits.
    pub fn from_big(b: BigInt) -> Num {
        match b.to_i64() {
            Some(i) => Num::Int(i),
            None => Num::Big(b),
        }
    }

    /// The JSON value: ints as their digits, floats as their shortest round-trip text,
    /// non-finite floats as the texts the module documentation gives.
    pub fn into_value(self) -> Value {
        match self {
            Num::Int(i) => Value::from(i),
            Num::Big(b) => Value::Number(Number::from_string_unchecked(b.to_string())),
            Num::Float(f) => float_value(f),
        }
    }

    pub fn is_float(&self) -> bool {
        matches!(self, Num::Float(_))
    }

    /// Python's `float(n)`: the nearest float, or `OverflowError` for an int too large.
    pub fn to_f64(&self) -> Result<f64, NumError> {
        match self {
            Num::Int(i) => Ok(int_to_f64(*i)),
            Num::Float(f) => Ok(*f),
            Num::Big(b) => {
                round_to_f64(b.sign(), b.magnitude(), false, 0).ok_or_else(NumError::int_too_large)
            }
        }
    }

    /// Whether this number is below zero.
    pub fn is_negative(&self) -> bool {
        match self {
            Num::Int(i) => *i < 0,
            Num::Big(b) => b.sign() == Sign::Minus,
            Num::Float(f) => *f < 0.0,
        }
    }

    /// Whether this number is zero (`0`, `0.0` or `-0.0`).
    pub fn is_zero(&self) -> bool {
        match self {
            Num::Int(i) => *i == 0,
            Num::Big(_) => false,
            Num::Float(f) => *f == 0.0,
        }
    }

    /// Python's ordering: exact across ints and floats; `None` when a NaN is involved.
    pub fn py_cmp(&self, other: &Num) -> Option<Ordering> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => Some(a.cmp(b)),
            (Num::Float(a), Num::Float(b)) => a.partial_cmp(b),
            (Num::Float(f), int) => int.cmp_float(*f).map(Ordering::reverse),
            (int, Num::Float(f)) => int.cmp_float(*f),
            (a, b) => Some(a.to_big().cmp(&b.to_big())),
        }
    }

    /// An int's ordering against a float, exactly.
    fn cmp_float(&self, f: f64) -> Option<Ordering> {
        if f.is_nan() {
            return None;
        }
        if f.is_infinite() {
            return Some(if f > 0.0 {
                Ordering::Less
            } else {
                Ordering::Greater
            });
        }
        if let Num::Int(i) = self {
            // both sides exact as floats: compare there
            if i.unsigned_abs() <= 1 << 53 {
                return (*i as f64).partial_cmp(&f);
            }
        }
        let floor = f.floor();
        let whole = BigInt::from_f64(floor)?;
        Some(match self.to_big().cmp(&whole) {
            Ordering::Equal if f > floor => Ordering::Less,
            other => other,
        })
    }

    fn to_big(&self) -> BigInt {
        match self {
            Num::Int(i) => BigInt::from(*i),
            Num::Big(b) => b.clone(),
            Num::Float(f) => BigInt::from_f64(*f).unwrap_or_default(),
        }
    }

    /// Python's `a + b`.
    pub fn add(&self, other: &Num) -> Result<Num, NumError> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => Ok(a
                .checked_add(*b)
                .map_or_else(|| Num::Big(BigInt::from(*a) + b), Num::Int)),
            (Num::Float(_), _) | (_, Num::Float(_)) => Ok(Num::Float(self.to_f64()? + other.to_f64()?)),
            (a, b) => checked_int(a.to_big() + b.to_big()),
        }
    }

    /// Python's `a - b`.
    pub fn sub(&self, other: &Num) -> Result<Num, NumError> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => Ok(a
                .checked_sub(*b)
                .map_or_else(|| Num::Big(BigInt::from(*a) - b), Num::Int)),
            (Num::Float(_), _) | (_, Num::Float(_)) => Ok(Num::Float(self.to_f64()? - other.to_f64()?)),
            (a, b) => checked_int(a.to_big() - b.to_big()),
        }
    }

    /// Python's `a * b`.
    pub fn mul(&self, other: &Num) -> Result<Num, NumError> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => match a.checked_mul(*b) {
                Some(p) => Ok(Num::Int(p)),
                None => checked_int(BigInt::from(*a) * b),
            },
            (Num::Float(_), _) | (_, Num::Float(_)) => Ok(Num::Float(self.to_f64()? * other.to_f64()?)),
            (a, b) => {
                if a.bits() + b.bits() > MAX_INT_BITS + 1 {
                    return Err(NumError::too_many_bits());
                }
                checked_int(a.to_big() * b.to_big())
            }
        }
    }

    /// Python's `a / b`: always a float; `int / int` correctly rounded.
    pub fn true_div(&self, other: &Num) -> Result<Num, NumError> {
        if other.is_zero() {
            let message = if self.is_float() || other.is_float() {
                "float division by zero"
            } else {
                "division by zero"
            };
            return Err(NumError::new("ZeroDivisionError", message));
        }
        match (self, other) {
            (Num::Float(_), _) | (_, Num::Float(_)) => Ok(Num::Float(self.to_f64()? / other.to_f64()?)),
            (Num::Int(a), Num::Int(b)) if a.unsigned_abs() <= 1 << 53 && b.unsigned_abs() <= 1 << 53 => {
                // both exact as floats: one IEEE division rounds correctly
                Ok(Num::Float(*a as f64 / *b as f64))
            }
            (a, b) => int_true_div(&a.to_big(), &b.to_big()).map(Num::Float),
        }
    }

    /// Python's `a ** n` for an int exponent: an int for an int base and `n >= 0`, else
    /// a float (`OverflowError` where the float power overflows).
    pub fn pow_int(&self, n: i64) -> Result<Num, NumError> {
        if n >= 0 && !self.is_float() {
            let base = self.to_big();
            if base.magnitude().bits() > 1
                && base.bits().saturating_mul(n.unsigned_abs()) > MAX_INT_BITS + n.unsigned_abs()
            {
                return Err(NumError::too_many_bits());
            }
            let n = u32::try_from(n).map_err(|_| NumError::too_many_bits())?;
            return checked_int(num_traits::pow::Pow::pow(base, n));
        }
        let base = self.to_f64()?;
        if base == 0.0 && n < 0 {
            return Err(NumError::new(
                "ZeroDivisionError",
                "0.0 cannot be raised to a negative power",
            ));
        }
        let result = base.powf(n as f64);
        if result.is_infinite() && base.is_finite() {
            return Err(NumError::new(
                "OverflowError",
                "(34, 'Numerical result out of range')",
            ));
        }
        Ok(Num::Float(result))
    }

    fn bits(&self) -> u64 {
        match self {
            Num::Int(i) => 64 - i.unsigned_abs().leading_zeros() as u64,
            Num::Big(b) => b.bits(),
            Num::Float(_) => 64,
        }
    }
}

/// An int result, refused past [`MAX_INT_BITS`].
fn checked_int(b: BigInt) -> Result<Num, NumError> {
    if b.bits() > MAX_INT_BITS {
        return Err(NumError::too_many_bits());
    }
    Ok(Num::from_big(b))
}

/// Python's `int(text)` for decimal digits with an optional sign, as a JSON value of any
/// size; `None` when the text is not such an int or has more digits than Python reads
/// (4300).
pub fn int_value(text: &str) -> Option<Value> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || digits.len() > 4300 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if let Ok(i) = text.parse::<i64>() {
        return Some(Value::from(i));
    }
    BigInt::from_str(text).ok().map(|b| Num::from_big(b).into_value())
}

/// A numeric literal as Python's `int()` (or, with `float`, `float()`) reads one, with
/// its underscores removed (allowed only between two digits), in the form Rust parses;
/// `None` for what Python refuses. Rust reads `inf`, `infinity` and `nan` in any case,
/// as Python does.
pub fn python_digits(text: &str, float: bool) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'_' => {
                let digit = |j: Option<&u8>| j.is_some_and(u8::is_ascii_digit);
                if !(i > 0 && digit(bytes.get(i - 1)) && digit(bytes.get(i + 1))) {
                    return None;
                }
            }
            b'0'..=b'9' | b'+' | b'-' => out.push(b as char),
            _ if float => out.push(b as char),
            _ => return None,
        }
    }
    // nothing but a sign is no number for Python
    if out.is_empty() || out == "+" || out == "-" {
        return None;
    }
    if !float && out[1..].contains(['+', '-']) {
        return None;
    }
    Some(out)
}

/// A float as a JSON value, a non-finite one included (see the module documentation).
pub fn float_value(f: f64) -> Value {
    match Number::from_f64(f) {
        Some(n) => Value::Number(n),
        None => {
            let text = if f.is_nan() {
                NAN_TEXT
            } else if f > 0.0 {
                INFINITY_TEXT
            } else {
                NEG_INFINITY_TEXT
            };
            Value::Number(Number::from_string_unchecked(text.to_string()))
        }
    }
}

/// `i as f64` rounds to nearest, ties to even, as Python's `float(int)` does.
fn int_to_f64(i: i64) -> f64 {
    i as f64
}

/// Python's correctly rounded `a / b` for ints (`b != 0`).
fn int_true_div(a: &BigInt, b: &BigInt) -> Result<f64, NumError> {
    let negative = (a.sign() == Sign::Minus) != (b.sign() == Sign::Minus);
    let (n, d) = (a.magnitude(), b.magnitude());
    if n.is_zero() {
        return Ok(if negative { -0.0 } else { 0.0 });
    }
    // scale so the integer quotient carries at least 66 bits: 53 to keep, the rest (and
    // a sticky remainder) to round by
    let shift = 66 + d.bits() as i64 - n.bits() as i64;
    let (num, den) = if shift >= 0 {
        (n << shift as u64, d.clone())
    } else {
        (n.clone(), d << (-shift) as u64)
    };
    let (q, r) = num.div_rem(&den);
    let sign = if negative { Sign::Minus } else { Sign::Plus };
    round_to_f64(sign, &q, !r.is_zero(), shift)
        .ok_or_else(|| NumError::new("OverflowError", "integer division result too large for a float"))
}

/// The float nearest `q * 2**-shift` (plus a little when `sticky`: a remainder was
/// dropped), ties to even; `None` when it overflows.
fn round_to_f64(sign: Sign, q: &BigUint, sticky: bool, shift: i64) -> Option<f64> {
    if q.is_zero() {
        return Some(0.0);
    }
    let q_bits = q.bits() as i64;
    // the value lies in [2**exp, 2**(exp + 1))
    let exp = q_bits - 1 - shift;
    if exp > 1023 {
        return None;
    }
    // significant bits the result keeps: 53, fewer below the normal range
    let keep = if exp >= -1022 { 53 } else { 53 - (-1022 - exp) };
    if keep <= 0 {
        // below half the smallest subnormal, or exactly half of it (ties to even: 0)
        let half_smallest = keep == 0 && (sticky || q.count_ones() > 1);
        let f = if half_smallest { 5e-324 } else { 0.0 };
        return Some(if sign == Sign::Minus { -f } else { f });
    }
    let drop = q_bits - keep;
    let mut mantissa;
    if drop > 0 {
        mantissa = (q >> drop as u64).to_u64()?;
        let dropped = q - (BigUint::from(mantissa) << drop as u64);
        let half = BigUint::from(1u8) << (drop - 1) as u64;
        let round_up = match dropped.cmp(&half) {
            Ordering::Greater => true,
            Ordering::Equal => sticky || mantissa & 1 == 1,
            Ordering::Less => false,
        };
        if round_up {
            mantissa += 1;
        }
    } else {
        mantissa = (q << (-drop) as u64).to_u64()?;
    }
    let f = ldexp(mantissa as f64, drop - shift);
    if f.is_infinite() {
        return None;
    }
    Some(if sign == Sign::Minus { -f } else { f })
}

/// `m * 2**e`, exact when the result is representable (`m` below 2**54).
fn ldexp(mut m: f64, mut e: i64) -> f64 {
    // powers of two within the normal range, applied in steps, so no step rounds
    while e > 1000 {
        m *= 2f64.powi(1000);
        e -= 1000;
    }
    while e < -1000 {
        m *= 2f64.powi(-1000);
        e += 1000;
    }
    m * 2f64.powi(e as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big(text: &str) -> Num {
        Num::from_big(BigInt::from_str(text).unwrap_or_default())
    }

    #[test]
    fn ints_grow_past_64_bits() {
        let max = Num::Int(i64::MAX);
        assert_eq!(max.add(&Num::Int(1)), Ok(big("9223372036854775808")));
        assert_eq!(
            big("100000000000000000000").add(&Num::Int(1)),
            Ok(big("100000000000000000001"))
        );
        assert_eq!(
            big("9223372036854775808").sub(&Num::Int(1)),
            Ok(Num::Int(i64::MAX))
        );
        assert_eq!(
            Num::Int(10).pow_int(30),
            Ok(big("1000000000000000000000000000000"))
        );
    }

    #[test]
    fn int_and_float_compare_exactly() {
        let f = Num::Float(9007199254740992.0);
        assert_eq!(big("9007199254740993").py_cmp(&f), Some(Ordering::Greater));
        assert_eq!(Num::Int(9007199254740993).py_cmp(&f), Some(Ordering::Greater));
        assert_eq!(Num::Int(9007199254740992).py_cmp(&f), Some(Ordering::Equal));
        assert_eq!(Num::Int(1).py_cmp(&Num::Float(1.5)), Some(Ordering::Less));
        assert_eq!(Num::Int(-2).py_cmp(&Num::Float(-1.5)), Some(Ordering::Less));
        assert_eq!(Num::Int(1).py_cmp(&Num::Float(f64::NAN)), None);
        assert_eq!(
            big(&"9".repeat(400)).py_cmp(&Num::Float(f64::INFINITY)),
            Some(Ordering::Less)
        );
    }

    #[test]
    fn int_division_rounds_correctly() {
        assert_eq!(
            Num::Int(9007199254740993).true_div(&Num::Int(3)),
            Ok(Num::Float(3002399751580331.0))
        );
        assert_eq!(Num::Int(1).true_div(&Num::Int(3)), Ok(Num::Float(1.0 / 3.0)));
        assert_eq!(Num::Int(-7).true_div(&Num::Int(2)), Ok(Num::Float(-3.5)));
        let huge = big(&format!("1{}", "0".repeat(400)));
        assert_eq!(
            huge.true_div(&Num::Int(3)).map_err(|e| e.type_name),
            Err("OverflowError")
        );
        assert_eq!(
            huge.true_div(&huge.mul(&Num::Int(10)).unwrap_or(Num::Int(1))),
            Ok(Num::Float(0.1))
        );
        assert_eq!(
            Num::Int(1).true_div(&Num::Int(0)).map_err(|e| e.message),
            Err("division by zero".into())
        );
        assert_eq!(
            Num::Int(1).true_div(&Num::Float(0.0)).map_err(|e| e.message),
            Err("float division by zero".into())
        );
    }

    #[test]
    fn mixed_arithmetic_converts_the_int() {
        let huge = big(&format!("1{}", "0".repeat(400)));
        assert_eq!(
            huge.add(&Num::Float(0.5)),
            Err(NumError::new(
                "OverflowError",
                "int too large to convert to float"
            ))
        );
        assert_eq!(
            Num::Float(1e308).mul(&Num::Int(10)),
            Ok(Num::Float(f64::INFINITY))
        );
        assert_eq!(big("9007199254740993").to_f64(), Ok(9007199254740992.0));
        assert_eq!(big("9007199254740995").to_f64(), Ok(9007199254740996.0));
    }

    #[test]
    fn numbers_keep_their_text() {
        assert_eq!(Num::Float(f64::INFINITY).into_value().to_string(), "1e+999");
        assert_eq!(Num::Float(f64::NEG_INFINITY).into_value().to_string(), "-1e+999");
        assert!(
            matches!(Num::from_value(&Num::Float(f64::NAN).into_value()), Some(Num::Float(f)) if f.is_nan())
        );
        // the texts survive serde_json's own conversions (`json!`, `to_value`)
        let inf = Num::Float(f64::INFINITY).into_value();
        assert_eq!(serde_json::json!({"v": inf}).to_string(), r#"{"v":1e+999}"#);
        assert_eq!(
            big("100000000000000000001").into_value().to_string(),
            "100000000000000000001"
        );
        let n: Number = Number::from_string_unchecked("1e400".into());
        assert_eq!(Num::from_number(&n), Num::Float(f64::INFINITY));
    }
}
