//! The rules on one item: its key attributes (present, non-empty, within their sizes, an
//! index key never empty) and its size; and its identity, for the rules on one item twice.

use serde_json::Value;

use super::limits::{MAX_ITEM_BYTES, MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES};
use super::schema::TableSchema;
use super::sizes::{decoded_len, item_size};
use crate::strict::Refusal;

/// The key attributes of `key` (an item or a key) against the table's schema.
pub(super) fn check_key(schema: &TableSchema, key: &Value, whole_item: bool) -> Result<(), Refusal> {
    let attrs: Vec<(&str, usize)> = std::iter::once((schema.partition_key.as_str(), MAX_PARTITION_KEY_BYTES))
        .chain(schema.sort_key.as_deref().map(|s| (s, MAX_SORT_KEY_BYTES)))
        .collect();
    for (name, limit) in attrs {
        let Some(value) = key.get(name) else {
            return Err(Refusal::dynamodb_validation(
                "dynamodb.key.missing",
                format!("One or more parameter values were invalid: Missing the key {name} in the item"),
            ));
        };
        let (kind, size) = match value.as_object().and_then(|m| m.iter().next()) {
            Some((k, Value::String(s))) if k == "S" => (k.as_str(), s.len()),
            Some((k, Value::String(s))) if k == "B" => (k.as_str(), decoded_len(s)),
            Some((k, _)) => (k.as_str(), 1),
            None => ("", 0),
        };
        if size == 0 && matches!(kind, "S" | "B") {
            return Err(Refusal::dynamodb_validation(
                "dynamodb.key.empty",
                format!(
                    "One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty {} value. Key: {name}",
                    if kind == "S" { "string" } else { "binary" }
                ),
            ));
        }
        if size > limit {
            // AWS's wording, verbatim (with its missing space)
            let message = if limit == MAX_PARTITION_KEY_BYTES {
                format!("One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of{MAX_PARTITION_KEY_BYTES} bytes (key {name}: {size} bytes)")
            } else {
                format!("One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of {MAX_SORT_KEY_BYTES} bytes (key {name}: {size} bytes)")
            };
            return Err(Refusal::dynamodb_validation("dynamodb.key.size", message));
        }
    }
    if whole_item {
        // an index key attribute may be absent (a sparse index), never empty
        for (index, names) in &schema.global_indexes {
            for name in names {
                let empty = match key
                    .get(name)
                    .and_then(|v| v.as_object())
                    .and_then(|m| m.iter().next())
                {
                    Some((k, Value::String(s))) if k == "S" || k == "B" => s.is_empty(),
                    _ => false,
                };
                if empty {
                    return Err(Refusal::dynamodb_validation(
                        "dynamodb.key.empty",
                        format!("One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty string value. IndexName: {index}, IndexKey: {name}"),
                    ));
                }
            }
        }
    }
    Ok(())
}

pub(super) fn check_item_size(item: &Value) -> Result<(), Refusal> {
    let size = item_size(item);
    if size > MAX_ITEM_BYTES {
        return Err(Refusal::dynamodb_validation(
            "dynamodb.item.size",
            format!(
                "Item size has exceeded the maximum allowed size ({size} bytes; at most {MAX_ITEM_BYTES})"
            ),
        ));
    }
    Ok(())
}

/// The key of a transaction or batch action, as `(table, key attributes)` for duplicates.
pub(super) fn item_identity(schema: &TableSchema, table: &str, key: &Value) -> String {
    let part = |name: &str| key.get(name).map(Value::to_string).unwrap_or_default();
    format!(
        "{table}|{}|{}",
        part(&schema.partition_key),
        schema.sort_key.as_deref().map(part).unwrap_or_default()
    )
}
