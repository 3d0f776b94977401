//! The numbers DynamoDB can hold: at most 38 significant digits, zero or a magnitude from
//! 1E-130 to below 1E+126, wherever a write sends one.

use serde_json::Value;

use super::limits::{MAX_NUMBER_DIGITS, MAX_NUMBER_EXPONENT, MIN_NUMBER_EXPONENT};
use crate::strict::Refusal;

/// Why DynamoDB refuses the number `text`: `(rule, AWS's message)`, `None` if it holds it.
/// Text that is not a number at all is left to moto, which refuses it with AWS's message.
///
/// The messages are DynamoDB's: a `ValidationException` with them answers a `PutItem`,
/// `UpdateItem`, `DeleteItem` or `BatchWriteItem`; inside `TransactWriteItems` the
/// transaction is cancelled with a `ValidationError` reason carrying them (the API
/// reference's `TransactionCanceledException` lists "Number overflow. Attempting to store
/// a number with magnitude larger than supported range" among that code's messages).
pub fn number_refusal(text: &str) -> Option<(&'static str, &'static str)> {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, "0"));
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: Vec<u8> = whole.bytes().chain(fraction.bytes()).collect();
    let exponent_digits = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
    if digits.is_empty()
        || !digits.iter().all(u8::is_ascii_digit)
        || exponent_digits.is_empty()
        || !exponent_digits.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let Some(first) = digits.iter().position(|d| *d != b'0') else {
        return None; // zero
    };
    let last = digits.iter().rposition(|d| *d != b'0').unwrap_or(first);
    // an exponent beyond any range only counts by its sign
    let magnitude: i64 = exponent_digits
        .bytes()
        .fold(0i64, |n, b| (n * 10 + i64::from(b - b'0')).min(1_000_000_000));
    let exponent = if exponent.starts_with('-') {
        -magnitude
    } else {
        magnitude
    };
    // the power of ten of the first significant digit
    let scale = exponent + whole.len() as i64 - first as i64 - 1;
    if scale > MAX_NUMBER_EXPONENT {
        Some((
            "dynamodb.number.range",
            "Number overflow. Attempting to store a number with magnitude larger than supported range",
        ))
    } else if scale < MIN_NUMBER_EXPONENT {
        Some((
            "dynamodb.number.range",
            "Number underflow. Attempting to store a number with magnitude smaller than supported range",
        ))
    } else if last - first + 1 > MAX_NUMBER_DIGITS {
        Some((
            "dynamodb.number.precision",
            "Attempting to store more than 38 significant digits in a Number",
        ))
    } else {
        None
    }
}

/// The first number DynamoDB refuses in an attribute value, nested ones included.
fn refused_number_in(value: &Value) -> Option<(&'static str, &'static str)> {
    let (kind, inner) = value.as_object()?.iter().next()?;
    match kind.as_str() {
        "N" => number_refusal(inner.as_str()?),
        "NS" => inner
            .as_array()?
            .iter()
            .filter_map(Value::as_str)
            .find_map(number_refusal),
        "L" => inner.as_array()?.iter().find_map(refused_number_in),
        "M" => refused_number_in_map(inner),
        _ => None,
    }
}

/// The first refused number among a map of attribute values (an item, a key, the
/// expression attribute values).
pub(super) fn refused_number_in_map(values: &Value) -> Option<(&'static str, &'static str)> {
    values.as_object()?.values().find_map(refused_number_in)
}

/// The first number a write request (or one action of a transaction) sends that DynamoDB
/// refuses: in its item, key, expression values (its update and its condition), and the
/// legacy `AttributeUpdates` and `Expected`.
pub(super) fn refused_number_in_request(request: &Value) -> Option<(&'static str, &'static str)> {
    let legacy = |field: &str| {
        request[field].as_object().and_then(|m| {
            m.values().find_map(|entry| {
                entry.get("Value").and_then(refused_number_in).or_else(|| {
                    entry["AttributeValueList"]
                        .as_array()
                        .and_then(|list| list.iter().find_map(refused_number_in))
                })
            })
        })
    };
    refused_number_in_map(&request["Item"])
        .or_else(|| refused_number_in_map(&request["Key"]))
        .or_else(|| refused_number_in_map(&request["ExpressionAttributeValues"]))
        .or_else(|| legacy("AttributeUpdates"))
        .or_else(|| legacy("Expected"))
}

/// A write request's numbers, refused as a whole request (`ValidationException`).
pub(super) fn check_numbers(request: &Value) -> Result<(), Refusal> {
    match refused_number_in_request(request) {
        Some((rule, message)) => Err(Refusal::dynamodb_validation(rule, message)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_follow_dynamodbs_range_and_precision() {
        const OVERFLOW: &str =
            "Number overflow. Attempting to store a number with magnitude larger than supported range";
        const UNDERFLOW: &str =
            "Number underflow. Attempting to store a number with magnitude smaller than supported range";
        const PRECISION: &str = "Attempting to store more than 38 significant digits in a Number";
        let thirty_eight = "12345678901234567890123456789012345678";
        for (text, refused) in [
            ("0", None),
            ("-0.0e-999", None),
            ("1E-130", None),
            ("-1E-130", None),
            ("9.9999999999999999999999999999999999999E+125", None),
            ("-9.9999999999999999999999999999999999999E+125", None),
            (thirty_eight, None),
            // leading and trailing zeros are trimmed before counting
            (&*format!("000.{thirty_eight}000"), None),
            (&*format!("{thirty_eight}{}", "0".repeat(80)), None),
            ("1E+126", Some(OVERFLOW)),
            ("-10e125", Some(OVERFLOW)),
            (&*format!("1{}", "0".repeat(129)), Some(OVERFLOW)),
            ("1e999999999999999999999999", Some(OVERFLOW)),
            ("1E-131", Some(UNDERFLOW)),
            ("-0.01e-129", Some(UNDERFLOW)),
            (&*format!("{thirty_eight}9"), Some(PRECISION)),
            (&*format!("1.{}1", "0".repeat(37)), Some(PRECISION)),
            // not a number: moto's to refuse
            ("abc", None),
            ("1e", None),
            ("", None),
        ] {
            assert_eq!(number_refusal(text).map(|(_, m)| m), refused, "{text}");
        }
        assert_eq!(
            number_refusal("1e200").map(|(rule, _)| rule),
            Some("dynamodb.number.range")
        );
        assert_eq!(
            number_refusal(&format!("{thirty_eight}9")).map(|(rule, _)| rule),
            Some("dynamodb.number.precision")
        );
        // nested, in a set, and in a transaction's condition values
        let nested = json!({"M": {"a": {"L": [{"N": "1"}, {"NS": ["2", "1e200"]}]}}});
        assert_eq!(refused_number_in(&nested).map(|(_, m)| m), Some(OVERFLOW));
        let request = json!({"Key": {"id": {"S": "x"}}, "ConditionExpression": "n < :n",
                             "ExpressionAttributeValues": {":n": {"N": "1e-200"}}});
        assert_eq!(
            refused_number_in_request(&request).map(|(_, m)| m),
            Some(UNDERFLOW)
        );
        let legacy = json!({"Expected": {"n": {"AttributeValueList": [{"N": "1e300"}]}}});
        assert_eq!(refused_number_in_request(&legacy).map(|(_, m)| m), Some(OVERFLOW));
    }
}
