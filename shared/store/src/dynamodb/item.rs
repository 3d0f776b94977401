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

use crate::StoreError;

/// A DynamoDB item or key.
pub type Item = HashMap<String, AttributeValue>;

pub fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub fn n_i64(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// A float as a DynamoDB number, spelled as Python's `repr` (DynamoDB rejects NaN and
/// infinities, so they are an error here rather than a 400 later).
pub fn n_f64(what: &str, v: f64) -> Result<AttributeValue, StoreError> {
    if !v.is_finite() {
        return Err(StoreError::backend(format!(
            "{what} must be a finite number, got {v}"
        )));
    }
    Ok(AttributeValue::N(float_repr(v)))
}

/// `S` or `NULL` (harel writes a missing `target_id` as `NULL`).
pub fn s_or_null(v: Option<&str>) -> AttributeValue {
    match v {
        Some(v) => s(v),
        None => AttributeValue::Null(true),
    }
}

pub fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Some(v),
        _ => None,
    }
}

pub fn get_i64(item: &Item, name: &str) -> Option<i64> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => parse_i64(v),
        _ => None,
    }
}

pub fn get_f64(item: &Item, name: &str) -> Option<f64> {
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
pub fn req_s<'a>(item: &'a Item, name: &str, what: &str) -> Result<&'a str, StoreError> {
    get_s(item, name).ok_or_else(|| corrupt(what, format!("no string attribute `{name}`")))
}

pub fn req_i64(item: &Item, name: &str, what: &str) -> Result<i64, StoreError> {
    get_i64(item, name).ok_or_else(|| corrupt(what, format!("no integer attribute `{name}`")))
}

pub fn corrupt(what: impl Into<String>, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        what: what.into(),
        reason: reason.into(),
    }
}

fn b64(b: &Blob) -> String {
    base64::engine::general_purpose::STANDARD.encode(b.as_ref())
}

/// A key in DynamoDB's typed JSON form, `{"id": {"S": "x"}}`: what boto3 returns as
/// `LastEvaluatedKey` and harel's cursor encodes.
pub fn key_to_typed_json(key: &Item) -> Value {
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
pub fn key_from_typed_json(v: &Value) -> Option<Item> {
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
pub fn item_size(item: &Item) -> usize {
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
