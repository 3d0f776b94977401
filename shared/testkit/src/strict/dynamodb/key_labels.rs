//! The partition meter's labels: an item's key (`id=abc`, `execution_id=abc|path=root.a`)
//! and the partition key value a `KeyConditionExpression` pins.

use serde_json::Value;

use super::schema::TableSchema;

/// The text of a scalar attribute value (`S`, `N` or `B`, as sent).
fn scalar_text(value: &Value) -> Option<&str> {
    let (kind, inner) = value.as_object()?.iter().next()?;
    matches!(kind.as_str(), "S" | "N" | "B")
        .then(|| inner.as_str())
        .flatten()
}

/// `attribute=value` of one key attribute of `item`.
pub(super) fn attribute_label(item: &Value, attribute: &str) -> Option<String> {
    Some(format!("{attribute}={}", scalar_text(item.get(attribute)?)?))
}

/// The meter's label of an item's key: `id=abc`, or `execution_id=abc|path=root.a` with a
/// sort key.
pub fn key_label(schema: &TableSchema, item: &Value) -> Option<String> {
    let partition = attribute_label(item, &schema.partition_key)?;
    match &schema.sort_key {
        Some(sort) => Some(format!("{partition}|{}", attribute_label(item, sort)?)),
        None => Some(partition),
    }
}

/// `attribute=value` of the partition key a `KeyConditionExpression` pins
/// (`pk = :v`, `#pk = :v`, `:v = pk`, in parentheses or not, beside a sort key condition).
pub fn partition_value_in(
    expression: &str,
    partition_key: &str,
    aliases: &Value,
    values: &Value,
) -> Option<String> {
    let resolve = |side: &str| -> Option<String> {
        let side = side.trim().trim_matches(|c| c == '(' || c == ')').trim();
        match side.strip_prefix('#') {
            Some(_) => aliases[side].as_str().map(str::to_string),
            None => Some(side.to_string()),
        }
    };
    let words: Vec<&str> = expression.split_whitespace().collect();
    for condition in words.split(|w| w.eq_ignore_ascii_case("AND")) {
        let condition = condition.join(" ");
        let Some(at) = condition.find('=') else {
            continue;
        };
        // `<=`, `>=` and `<>` compare a sort key, never the partition key
        if condition[..at].ends_with(['<', '>', '!']) || condition[at + 1..].starts_with(['=', '>']) {
            continue;
        }
        let (left, right) = (&condition[..at], &condition[at + 1..]);
        let (name, placeholder) = if right.trim().trim_end_matches(')').trim().starts_with(':') {
            (left, right)
        } else {
            (right, left)
        };
        if resolve(name).as_deref() != Some(partition_key) {
            continue;
        }
        let placeholder = placeholder.trim().trim_matches(|c| c == '(' || c == ')').trim();
        let value = scalar_text(values.get(placeholder)?)?;
        return Some(format!("{partition_key}={value}"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_partition_key_of_a_key_condition_is_found_in_its_usual_forms() {
        let values = json!({":v": {"S": "abc"}, ":n": {"N": "12"}, ":t": {"N": "5"}});
        let aliases = json!({"#p": "pk", "#s": "sk"});
        let found = |e: &str| partition_value_in(e, "pk", &aliases, &values);
        assert_eq!(found("pk = :v").as_deref(), Some("pk=abc"));
        assert_eq!(found("pk=:v").as_deref(), Some("pk=abc"));
        assert_eq!(found("#p = :v AND #s <= :t").as_deref(), Some("pk=abc"));
        assert_eq!(found("sk >= :t and (:n = pk)").as_deref(), Some("pk=12"));
        assert_eq!(
            found("#s BETWEEN :t AND :n AND pk = :v").as_deref(),
            Some("pk=abc")
        );
        assert_eq!(
            found("sk = :t"),
            None,
            "a sort key equality is not the partition's"
        );
        assert_eq!(found("pk = :missing"), None);
        assert_eq!(found("begins_with(pk, :v)"), None);
        assert_eq!(found(""), None);
        assert_eq!(found("= = ="), None);
    }
}
