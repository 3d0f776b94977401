//! Native JSON ⇄ DynamoDB attribute values, the typed wire form (`{"S": "..."}`) used by
//! the list cursor, typed getters, and DynamoDB's item-size accounting.
//!
//! Numbers travel as DynamoDB's decimal strings and come back exactly: integers (`seq`,
//! `idx`, `version`) parse as `i64`, `fire_at` as the `f64` whose shortest representation
//! was written (Python's `repr`, as harel writes `Decimal(str(fire_at))`).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_types::Blob;
use base64::Engine as _;
use stm_core::pyvalue::float_repr;
use stm_core::{Map, Value};

use crate::{AttributeType, Corruption, Malformation, NumberRefusal, StoreError, Unstorable};

/// A DynamoDB item or key.
pub(crate) type Item = HashMap<String, AttributeValue>;

pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(crate) fn n_i64(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// A float as a DynamoDB number, spelled as Python's `repr`. One DynamoDB cannot hold
/// (NaN, an infinity, a magnitude of 1E+126 or more: see [`number_refusal`]) is a
/// [`StoreError::TooLarge`] here, before any call, rather than a `ValidationException`
/// that no retry cures.
pub(crate) fn n_f64(what: &str, v: f64) -> Result<AttributeValue, StoreError> {
    let text = float_repr(v);
    if let Some(why) = float_refusal(v, &text) {
        return Err(StoreError::TooLarge(Unstorable::Number {
            what: what.to_string(),
            value: v,
            why,
        }));
    }
    Ok(AttributeValue::N(text))
}

/// DynamoDB's numbers ("Supported data types and naming rules in Amazon DynamoDB",
/// Number: <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html#HowItWorks.DataTypes.Number>):
/// at most 38 significant digits, leading and trailing zeros trimmed...
pub(crate) const MAX_NUMBER_DIGITS: usize = 38;
/// ... and zero or a magnitude from 1E-130 ...
pub(crate) const MIN_NUMBER_EXPONENT: i64 = -130;
/// ... to 9.9999999999999999999999999999999999999E+125, positive or negative.
pub(crate) const MAX_NUMBER_EXPONENT: i64 = 125;

/// Why DynamoDB would refuse `v`, spelled `text` (its `repr`), as a number; `None` if it
/// holds it. A finite float's `repr` has at most 17 significant digits, so only its
/// magnitude can be out of range.
pub(crate) fn float_refusal(v: f64, text: &str) -> Option<NumberRefusal> {
    if !v.is_finite() {
        return Some(NumberRefusal::NotFinite);
    }
    number_refusal(text)
}

/// Why DynamoDB would refuse the decimal `text` as a number (see [`MAX_NUMBER_DIGITS`]);
/// `None` if it holds it. Text that is not a decimal number at all is not judged here
/// (the store writes only numbers it formatted itself).
pub(crate) fn number_refusal(text: &str) -> Option<NumberRefusal> {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, e),
        None => (unsigned, "0"),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = || int_part.bytes().chain(frac_part.bytes());
    if int_part.len() + frac_part.len() == 0 || !digits().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let exponent_digits = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
    if exponent_digits.is_empty() || !exponent_digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // an exponent past any number's range saturates: only its sign matters then
    let magnitude = exponent_digits
        .bytes()
        .fold(0i64, |n, b| {
            n.saturating_mul(10).saturating_add(i64::from(b - b'0'))
        })
        .min(1 << 40);
    let exponent = if exponent.starts_with('-') {
        -magnitude
    } else {
        magnitude
    };
    let leading = digits().take_while(|b| *b == b'0').count();
    let all = int_part.len() + frac_part.len();
    if leading == all {
        return None; // zero, however it is spelled
    }
    let trailing = digits().rev().take_while(|b| *b == b'0').count();
    // the power of ten of the first significant digit
    let adjusted = exponent + int_part.len() as i64 - leading as i64 - 1;
    if adjusted > MAX_NUMBER_EXPONENT {
        Some(NumberRefusal::TooLarge)
    } else if adjusted < MIN_NUMBER_EXPONENT {
        Some(NumberRefusal::TooSmall)
    } else if all - leading - trailing > MAX_NUMBER_DIGITS {
        Some(NumberRefusal::TooPrecise)
    } else {
        None
    }
}

/// `S` or `NULL` (harel writes a missing `target_id` as `NULL`).
pub(crate) fn s_or_null(v: Option<&str>) -> AttributeValue {
    match v {
        Some(v) => s(v),
        None => AttributeValue::Null(true),
    }
}

pub(crate) fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Some(v),
        _ => None,
    }
}

pub(crate) fn get_i64(item: &Item, name: &str) -> Option<i64> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => parse_i64(v),
        _ => None,
    }
}

pub(crate) fn get_f64(item: &Item, name: &str) -> Option<f64> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v.parse().ok(),
        _ => None,
    }
}

/// An integral DynamoDB number (`"5"`, and `"5.0"` or `"5E+0"` as some writers spell it).
fn parse_i64(v: &str) -> Option<i64> {
    v.parse::<i64>().ok().or_else(|| {
        let f: f64 = v.parse().ok()?;
        (f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15).then_some(f as i64)
    })
}

/// The required string attribute `name`, or a [`StoreError::Corrupt`] naming `what`.
pub(crate) fn req_s<'a>(item: &'a Item, name: &'static str, what: &str) -> Result<&'a str, StoreError> {
    get_s(item, name).ok_or_else(|| missing(what, name, AttributeType::String))
}

pub(crate) fn req_i64(item: &Item, name: &'static str, what: &str) -> Result<i64, StoreError> {
    get_i64(item, name).ok_or_else(|| missing(what, name, AttributeType::Integer))
}

/// Record `what` cannot be read back, for `reason`.
pub(crate) fn corrupt(what: impl Into<String>, reason: Corruption) -> StoreError {
    StoreError::Corrupt {
        what: what.into(),
        reason,
    }
}

/// Record `what` lacks the required attribute `attribute` of type `expected`.
pub(crate) fn missing(
    what: impl Into<String>,
    attribute: &'static str,
    expected: AttributeType,
) -> StoreError {
    corrupt(what, Corruption::Missing { attribute, expected })
}

/// Record `what` has an attribute of the store's own, `attribute`, that does not hold
/// what it must.
pub(crate) fn malformed(
    what: impl Into<String>,
    attribute: &'static str,
    problem: Malformation,
) -> StoreError {
    corrupt(what, Corruption::Malformed { attribute, problem })
}

fn b64(b: &Blob) -> String {
    base64::engine::general_purpose::STANDARD.encode(b.as_ref())
}

/// A key in DynamoDB's typed JSON form, `{"id": {"S": "x"}}`: what boto3 returns as
/// `LastEvaluatedKey` and harel's cursor encodes.
pub(crate) fn key_to_typed_json(key: &Item) -> Value {
    let mut names: Vec<&String> = key.keys().collect();
    names.sort();
    let mut out = Map::new();
    for name in names {
        let mut typed = Map::new();
        match &key[name] {
            AttributeValue::S(v) => {
                typed.insert("S".into(), Value::String(v.clone()));
            }
            AttributeValue::N(v) => {
                typed.insert("N".into(), Value::String(v.clone()));
            }
            AttributeValue::B(v) => {
                typed.insert("B".into(), Value::String(b64(v)));
            }
            other => {
                typed.insert("NULL".into(), Value::Bool(true));
                tracing::warn!(?other, "unexpected key attribute type in a cursor");
            }
        }
        out.insert(name.clone(), Value::Object(typed));
    }
    Value::Object(out)
}

/// The inverse of [`key_to_typed_json`].
pub(crate) fn key_from_typed_json(v: &Value) -> Option<Item> {
    let mut out = Item::new();
    for (name, typed) in v.as_object()? {
        let typed = typed.as_object()?;
        let (ty, val) = typed.iter().next()?;
        let av = match (ty.as_str(), val) {
            ("S", Value::String(t)) => AttributeValue::S(t.clone()),
            ("N", Value::String(t)) => AttributeValue::N(t.clone()),
            ("B", Value::String(t)) => AttributeValue::B(Blob::new(
                base64::engine::general_purpose::STANDARD.decode(t).ok()?,
            )),
            _ => return None,
        };
        out.insert(name.clone(), av);
    }
    Some(out)
}

/// An item's size as DynamoDB counts it against the 400 KB limit: each attribute name's
/// UTF-8 length plus its value's size (strings and binaries by length, numbers at most
/// 21 bytes, 3 bytes of overhead per list or map plus 1 per element).
pub(crate) fn item_size(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

fn value_size(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(t) => t.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::L(items) => 3 + items.iter().map(|i| 1 + value_size(i)).sum::<usize>(),
        AttributeValue::M(map) => {
            3 + map
                .iter()
                .map(|(k, v)| 1 + k.len() + value_size(v))
                .sum::<usize>()
        }
        AttributeValue::Ss(items) => items.iter().map(String::len).sum(),
        AttributeValue::Ns(items) => items.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(items) => items.iter().map(|b| b.as_ref().len()).sum(),
        _ => 0,
    }
}

/// "Approximately (number of significant digits / 2) + 1 bytes", at most 21.
fn number_size(n: &str) -> usize {
    let digits = n
        .chars()
        .take_while(|c| *c != 'e' && *c != 'E')
        .filter(char::is_ascii_digit)
        .count();
    (digits.div_ceil(2) + 1).min(21)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_round_trip_exactly() {
        for f in [1_700_000_000.123_456_7_f64, 0.1, 1e-7, 1e16, 123.0, -2.5] {
            let AttributeValue::N(text) = n_f64("x", f).unwrap_or(AttributeValue::Null(true)) else {
                panic!("not a number")
            };
            assert_eq!(text.parse::<f64>().ok(), Some(f), "{text}");
        }
        let mut item = Item::new();
        item.insert("v".into(), n_i64(i64::MAX));
        assert_eq!(get_i64(&item, "v"), Some(i64::MAX));
        item.insert("v".into(), AttributeValue::N("7.0".into()));
        assert_eq!(get_i64(&item, "v"), Some(7));
        assert!(n_f64("x", f64::NAN).is_err());
    }

    #[test]
    fn numbers_dynamodb_cannot_hold_are_refused_before_any_call() {
        for (text, refusal) in [
            ("0", None),
            ("-0.000", None),
            ("0e999999999999999999999", None),
            ("9.9999999999999999999999999999999999999E+125", None),
            ("-9.9999999999999999999999999999999999999E+125", None),
            ("1E-130", None),
            ("-0.0001e-126", None),
            ("12345678901234567890123456789012345678", None),
            // trailing and leading zeros do not count
            ("1234567890123456789012345678901234567800000", None),
            ("0.0001234567890123456789012345678901234567800", None),
            ("1e+126", Some("its magnitude is 1E+126 or more")),
            ("-10E125", Some("its magnitude is 1E+126 or more")),
            (
                "1e99999999999999999999999",
                Some("its magnitude is 1E+126 or more"),
            ),
            ("1E-131", Some("its magnitude is below 1E-130")),
            ("0.1e-130", Some("its magnitude is below 1E-130")),
            (
                "1e-99999999999999999999999",
                Some("its magnitude is below 1E-130"),
            ),
            (
                "123456789012345678901234567890123456789",
                Some("it has more than 38 significant digits"),
            ),
            (
                "1.00000000000000000000000000000000000001",
                Some("it has more than 38 significant digits"),
            ),
            // not a number: not judged here
            ("abc", None),
            ("1e", None),
            ("", None),
        ] {
            assert_eq!(
                number_refusal(text).map(|why| why.to_string()).as_deref(),
                refusal,
                "{text}"
            );
        }
        // what the store writes for a float: its repr, at most 17 significant digits, so
        // only the magnitude can be out of range
        for (v, refused) in [
            (f64::MAX, true),
            (1e126, true),
            (9.999_999_999_999_9e125, false),
            (f64::MIN_POSITIVE, true),
            (5e-324, true),
            (1e-130, false),
            (1_700_000_000.123_456_7, false),
            (-1e200, true),
            (f64::INFINITY, true),
            (f64::NAN, true),
        ] {
            let written = n_f64("fire_at", v);
            assert_eq!(written.is_err(), refused, "{v:e}: {written:?}");
            if let Err(StoreError::TooLarge(why)) = written {
                let message = why.to_string();
                assert!(
                    message.starts_with(&format!(
                        "fire_at is {}, which DynamoDB cannot store",
                        float_repr(v)
                    )),
                    "{message}"
                );
            }
        }
    }

    #[test]
    fn typed_keys_round_trip() {
        let mut key = Item::new();
        key.insert("id".into(), s("abc"));
        key.insert("seq".into(), n_i64(42));
        let typed = key_to_typed_json(&key);
        assert_eq!(typed, json!({"id": {"S": "abc"}, "seq": {"N": "42"}}));
        assert_eq!(key_from_typed_json(&typed), Some(key));
    }

    #[test]
    fn sizes() {
        let mut item = Item::new();
        item.insert("id".into(), s("abcd"));
        item.insert("version".into(), n_i64(12345));
        assert_eq!(item_size(&item), 2 + 4 + 7 + 4);
    }
}
