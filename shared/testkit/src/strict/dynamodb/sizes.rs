//! The size DynamoDB counts for an attribute value and for an item ("Item sizes and
//! formats"): what the item, transaction and meter rules weigh.

use serde_json::Value;

pub(super) fn decoded_len(base64: &str) -> usize {
    let trimmed = base64.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

/// A number's size: 1 byte per two significant digits, plus 1.
fn number_size(text: &str) -> usize {
    let digits: String = text
        .trim_start_matches(['-', '+'])
        .split(['e', 'E'])
        .next()
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len().max(1);
    significant.div_ceil(2) + 1
}

/// The size DynamoDB counts for an attribute value ("Item sizes and formats").
pub fn value_size(v: &Value) -> usize {
    let Some((kind, inner)) = v.as_object().and_then(|m| m.iter().next()) else {
        return 0;
    };
    match kind.as_str() {
        "S" => inner.as_str().map_or(0, str::len),
        "N" => inner.as_str().map_or(0, number_size),
        "B" => inner.as_str().map_or(0, decoded_len),
        "BOOL" | "NULL" => 1,
        "SS" => inner
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::len)
            .sum(),
        "NS" => inner
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(number_size)
            .sum(),
        "BS" => inner
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(decoded_len)
            .sum(),
        "L" => {
            3 + inner
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| value_size(e) + 1)
                .sum::<usize>()
        }
        "M" => {
            3 + inner
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, e)| k.len() + value_size(e) + 1)
                .sum::<usize>()
        }
        _ => 0,
    }
}

/// An item's size: every attribute's name and value.
pub fn item_size(item: &Value) -> usize {
    item.as_object()
        .into_iter()
        .flatten()
        .map(|(name, v)| name.len() + value_size(v))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_follow_the_documented_formulas() {
        assert_eq!(value_size(&json!({"S": "abc"})), 3);
        assert_eq!(value_size(&json!({"N": "12345"})), 4);
        assert_eq!(value_size(&json!({"N": "-0.001"})), 2);
        assert_eq!(value_size(&json!({"BOOL": true})), 1);
        assert_eq!(value_size(&json!({"L": [{"S": "ab"}]})), 6);
        assert_eq!(value_size(&json!({"M": {"k": {"S": "ab"}}})), 7);
        assert_eq!(
            item_size(&json!({"id": {"S": "x"}, "n": {"N": "1"}})),
            (2 + 1) + (1 + 2)
        );
    }
}
