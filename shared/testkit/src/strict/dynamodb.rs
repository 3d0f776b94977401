//! The DynamoDB rules moto skips, checked on the JSON request bodies: key values, item
//! size, transaction shape, reserved words, consistent reads on a GSI, batch sizes and the
//! client request token. Table key schemas come from moto (`DescribeTable`), read by the
//! layer before the check.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::Refusal;

/// A partition key value: at most 2,048 bytes.
pub const MAX_PARTITION_KEY_BYTES: usize = 2048;
/// A sort key value: at most 1,024 bytes.
pub const MAX_SORT_KEY_BYTES: usize = 1024;
/// An item: at most 400 KB, attribute names included.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
/// A transaction: at most 100 actions...
pub const MAX_TRANSACTION_ACTIONS: usize = 100;
/// ... and 4 MB in all.
pub const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;
/// `BatchGetItem`: at most 100 keys.
pub const MAX_BATCH_GET_KEYS: usize = 100;
/// `BatchWriteItem`: at most 25 requests.
pub const MAX_BATCH_WRITE_REQUESTS: usize = 25;
/// `ClientRequestToken`: 1 to 36 characters.
pub const MAX_CLIENT_REQUEST_TOKEN_CHARS: usize = 36;

/// DynamoDB's reserved words (AWS's list, "Reserved words in DynamoDB").
const RESERVED_WORDS: &str = include_str!("dynamodb_reserved_words.txt");

/// How many reserved words the layer knows.
pub fn reserved_word_count() -> usize {
    reserved_words().len()
}

fn reserved_words() -> &'static BTreeSet<&'static str> {
    static WORDS: std::sync::OnceLock<BTreeSet<&'static str>> = std::sync::OnceLock::new();
    WORDS.get_or_init(|| {
        RESERVED_WORDS
            .lines()
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .collect()
    })
}

/// A table's keys and indexes (from `DescribeTable`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableSchema {
    pub partition_key: String,
    pub sort_key: Option<String>,
    /// Global secondary index name -> its key attributes.
    pub global_indexes: BTreeMap<String, Vec<String>>,
    /// Local secondary index names.
    pub local_indexes: BTreeSet<String>,
}

impl TableSchema {
    /// From a `DescribeTable` answer's `Table`.
    pub fn from_description(table: &Value) -> Option<TableSchema> {
        let keys = |schema: &Value| -> Vec<(String, String)> {
            schema
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|k| {
                    Some((
                        k["AttributeName"].as_str()?.to_string(),
                        k["KeyType"].as_str()?.to_string(),
                    ))
                })
                .collect()
        };
        let own = keys(&table["KeySchema"]);
        let partition_key = own.iter().find(|(_, t)| t == "HASH")?.0.clone();
        let sort_key = own.iter().find(|(_, t)| t == "RANGE").map(|(n, _)| n.clone());
        let mut global_indexes = BTreeMap::new();
        for index in table["GlobalSecondaryIndexes"].as_array().into_iter().flatten() {
            if let Some(name) = index["IndexName"].as_str() {
                global_indexes.insert(
                    name.to_string(),
                    keys(&index["KeySchema"]).into_iter().map(|(n, _)| n).collect(),
                );
            }
        }
        let local_indexes = table["LocalSecondaryIndexes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["IndexName"].as_str().map(str::to_string))
            .collect();
        Some(TableSchema {
            partition_key,
            sort_key,
            global_indexes,
            local_indexes,
        })
    }
}

fn validation(rule: &'static str, message: impl Into<String>) -> Refusal {
    Refusal::dynamodb_validation(rule, message.into())
}

/// The tables a request names, whose schemas the check needs.
pub fn tables_named(operation: &str, body: &Value) -> Vec<String> {
    let mut out = BTreeSet::new();
    if let Some(t) = body["TableName"].as_str() {
        out.insert(t.to_string());
    }
    if matches!(operation, "BatchGetItem" | "BatchWriteItem") {
        if let Some(map) = body["RequestItems"].as_object() {
            out.extend(map.keys().cloned());
        }
    }
    for item in body["TransactItems"].as_array().into_iter().flatten() {
        if let Some((_, action)) = item.as_object().and_then(|m| m.iter().next()) {
            if let Some(t) = action["TableName"].as_str() {
                out.insert(t.to_string());
            }
        }
    }
    out.into_iter().collect()
}

fn decoded_len(base64: &str) -> usize {
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

/// The key attributes of `key` (an item or a key) against the table's schema.
fn check_key(schema: &TableSchema, key: &Value, whole_item: bool) -> Result<(), Refusal> {
    let attrs: Vec<(&str, usize)> = std::iter::once((schema.partition_key.as_str(), MAX_PARTITION_KEY_BYTES))
        .chain(schema.sort_key.as_deref().map(|s| (s, MAX_SORT_KEY_BYTES)))
        .collect();
    for (name, limit) in attrs {
        let Some(value) = key.get(name) else {
            return Err(validation(
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
            return Err(validation(
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
            return Err(validation("dynamodb.key.size", message));
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
                    return Err(validation(
                        "dynamodb.key.empty",
                        format!("One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty string value. IndexName: {index}, IndexKey: {name}"),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn check_item_size(item: &Value) -> Result<(), Refusal> {
    let size = item_size(item);
    if size > MAX_ITEM_BYTES {
        return Err(validation(
            "dynamodb.item.size",
            format!(
                "Item size has exceeded the maximum allowed size ({size} bytes; at most {MAX_ITEM_BYTES})"
            ),
        ));
    }
    Ok(())
}

/// The first reserved word an expression uses as a bare attribute name.
fn reserved_word_in(expression: &str) -> Option<String> {
    const SYNTAX: [&str; 9] = [
        "AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE",
    ];
    let chars: Vec<char> = expression.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '#' || c == ':' {
            // a placeholder: skip its name
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let is_function = chars.get(j) == Some(&'(');
            let upper = word.to_ascii_uppercase();
            if !is_function && !SYNTAX.contains(&upper.as_str()) && reserved_words().contains(upper.as_str())
            {
                return Some(word);
            }
            continue;
        }
        if c.is_ascii_digit() {
            // a list index such as [0]
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            continue;
        }
        i += 1;
    }
    None
}

const EXPRESSIONS: [&str; 5] = [
    "KeyConditionExpression",
    "FilterExpression",
    "ProjectionExpression",
    "ConditionExpression",
    "UpdateExpression",
];

fn check_expressions(request: &Value) -> Result<(), Refusal> {
    for field in EXPRESSIONS {
        if let Some(expression) = request[field].as_str() {
            if let Some(word) = reserved_word_in(expression) {
                return Err(validation(
                    "dynamodb.expression.reserved_word",
                    format!(
                        "Invalid {field}: Attribute name is a reserved keyword; reserved keyword: {word}"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn schema<'a>(schemas: &'a BTreeMap<String, TableSchema>, table: &str) -> Option<&'a TableSchema> {
    schemas.get(table)
}

/// The key of a transaction or batch action, as `(table, key attributes)` for duplicates.
fn item_identity(schema: &TableSchema, table: &str, key: &Value) -> String {
    let part = |name: &str| key.get(name).map(Value::to_string).unwrap_or_default();
    format!(
        "{table}|{}|{}",
        part(&schema.partition_key),
        schema.sort_key.as_deref().map(part).unwrap_or_default()
    )
}

/// The verdict on one DynamoDB request, given the schemas of the tables it names (a table
/// moto does not know is left for moto to refuse).
pub fn check(operation: &str, body: &Value, schemas: &BTreeMap<String, TableSchema>) -> Result<(), Refusal> {
    let table = body["TableName"].as_str().unwrap_or_default();
    check_expressions(body)?;
    match operation {
        "PutItem" => {
            if let Some(s) = schema(schemas, table) {
                check_key(s, &body["Item"], true)?;
            }
            check_item_size(&body["Item"])?;
        }
        "GetItem" | "DeleteItem" | "UpdateItem" => {
            if let Some(s) = schema(schemas, table) {
                check_key(s, &body["Key"], false)?;
            }
        }
        "Query" | "Scan" if body["ConsistentRead"] == json!(true) => {
            let index = body["IndexName"].as_str().unwrap_or_default();
            if schema(schemas, table).is_some_and(|s| s.global_indexes.contains_key(index)) {
                return Err(validation(
                    "dynamodb.consistent_read.gsi",
                    "Consistent reads are not supported on global secondary indexes",
                ));
            }
        }
        "BatchGetItem" => {
            let mut keys = 0;
            for (t, request) in body["RequestItems"].as_object().into_iter().flatten() {
                check_expressions(request)?;
                for key in request["Keys"].as_array().into_iter().flatten() {
                    keys += 1;
                    if let Some(s) = schema(schemas, t) {
                        check_key(s, key, false)?;
                    }
                }
            }
            if keys > MAX_BATCH_GET_KEYS {
                return Err(validation(
                    "dynamodb.batch_get.keys",
                    format!("Too many items requested for the BatchGetItem call ({keys}; at most {MAX_BATCH_GET_KEYS})"),
                ));
            }
        }
        "BatchWriteItem" => {
            let mut requests = 0;
            let mut seen = BTreeSet::new();
            for (t, list) in body["RequestItems"].as_object().into_iter().flatten() {
                for request in list.as_array().into_iter().flatten() {
                    requests += 1;
                    let (key, item) = if let Some(put) = request.get("PutRequest") {
                        (&put["Item"], true)
                    } else {
                        (&request["DeleteRequest"]["Key"], false)
                    };
                    if item {
                        check_item_size(key)?;
                    }
                    if let Some(s) = schema(schemas, t) {
                        check_key(s, key, item)?;
                        if !seen.insert(item_identity(s, t, key)) {
                            return Err(validation(
                                "dynamodb.batch_write.duplicates",
                                "Provided list of item keys contains duplicates",
                            ));
                        }
                    }
                }
            }
            if requests > MAX_BATCH_WRITE_REQUESTS {
                return Err(validation(
                    "dynamodb.batch_write.requests",
                    format!("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: [Member must have length less than or equal to {MAX_BATCH_WRITE_REQUESTS}, Member must have length greater than or equal to 1] ({requests} requests)"),
                ));
            }
        }
        "TransactWriteItems" | "TransactGetItems" => check_transaction(operation, body, schemas)?,
        _ => {}
    }
    Ok(())
}

fn check_transaction(
    operation: &str,
    body: &Value,
    schemas: &BTreeMap<String, TableSchema>,
) -> Result<(), Refusal> {
    let items = body["TransactItems"].as_array().cloned().unwrap_or_default();
    if items.len() > MAX_TRANSACTION_ACTIONS {
        return Err(validation(
            "dynamodb.transaction.actions",
            format!("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to {MAX_TRANSACTION_ACTIONS} ({} actions)", items.len()),
        ));
    }
    if let Some(token) = body["ClientRequestToken"].as_str() {
        let n = token.chars().count();
        if !(1..=MAX_CLIENT_REQUEST_TOKEN_CHARS).contains(&n) {
            return Err(validation(
                "dynamodb.transaction.client_request_token",
                format!("1 validation error detected: Value '{token}' at 'clientRequestToken' failed to satisfy constraint: Member must have length less than or equal to {MAX_CLIENT_REQUEST_TOKEN_CHARS} ({n} characters)"),
            ));
        }
    }
    let mut seen = BTreeSet::new();
    let mut total = 0usize;
    let mut oversized = None;
    for (i, item) in items.iter().enumerate() {
        let Some((kind, action)) = item.as_object().and_then(|m| m.iter().next()) else {
            continue;
        };
        check_expressions(action)?;
        let table = action["TableName"].as_str().unwrap_or_default();
        let (key, whole) = if kind == "Put" {
            (&action["Item"], true)
        } else {
            (&action["Key"], false)
        };
        if let Some(s) = schema(schemas, table) {
            check_key(s, key, whole)?;
            if !seen.insert(item_identity(s, table, key)) {
                return Err(validation(
                    "dynamodb.transaction.one_item_twice",
                    "Transaction request cannot include multiple operations on one item",
                ));
            }
        }
        let size = if whole {
            item_size(key)
        } else {
            item_size(key) + item_size(&action["ExpressionAttributeValues"])
        };
        if whole && size > MAX_ITEM_BYTES && oversized.is_none() {
            oversized = Some(i);
        }
        total += size;
    }
    if total > MAX_TRANSACTION_BYTES {
        return Err(validation(
            "dynamodb.transaction.bytes",
            format!("Transaction request size exceeded the maximum of {MAX_TRANSACTION_BYTES} bytes ({total} bytes)"),
        ));
    }
    if let (Some(index), "TransactWriteItems") = (oversized, operation) {
        // an item-level validation failure cancels the transaction with a reason per item
        return Err(Refusal::transaction_cancelled(
            "dynamodb.item.size",
            items.len(),
            index,
            "ValidationError",
            "Item size has exceeded the maximum allowed size",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_words_are_found_as_bare_names_only() {
        assert_eq!(reserved_word_in("SET status = :s"), Some("status".into()));
        assert_eq!(reserved_word_in("SET #status = :s"), None);
        assert_eq!(
            reserved_word_in("attribute_not_exists(id) AND version = :v"),
            None
        );
        assert_eq!(reserved_word_in("attribute_not_exists(id) AND #v = :v"), None);
        assert_eq!(reserved_word_in("ADD n :k"), None);
        assert_eq!(
            reserved_word_in("size(#a) > :n AND data.items[0] = :x"),
            Some("data".into())
        );
        assert!(reserved_word_count() > 500, "{}", reserved_word_count());
    }

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
