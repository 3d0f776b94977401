//! The DynamoDB rules moto skips, checked on the JSON request bodies: key values, item
//! size, numbers, transaction shape, reserved words, consistent reads on a GSI, batch
//! sizes and the client request token. Table key schemas come from moto (`DescribeTable`), read by the
//! layer before the check.
//!
//! And the layer's [`PartitionMeter`] ([`Metering`]): every request moto answers with 200 is
//! charged by DynamoDB's accounting to the keys it read or wrote (see [`Metering::observe`]
//! for what is exact and what is an estimate).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{json, Value};

use super::Refusal;
use crate::meter::{read_units, PartitionMeter};

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

/// A number: at most 38 significant digits (leading and trailing zeros trimmed) ...
///
/// AWS, "Supported data types and naming rules in Amazon DynamoDB", Number
/// (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html#HowItWorks.DataTypes.Number>):
/// "Numbers can have up to 38 digits of precision. Exceeding this results in an
/// exception", positive range 1E-130 to 9.9999999999999999999999999999999999999E+125,
/// negative range the same, or zero.
pub const MAX_NUMBER_DIGITS: usize = 38;
/// ... whose first significant digit is at 10^-130 ...
pub const MIN_NUMBER_EXPONENT: i64 = -130;
/// ... to 10^125 (below 1E+126).
pub const MAX_NUMBER_EXPONENT: i64 = 125;

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
    /// Global secondary index name -> its key attributes, the partition key first.
    pub global_indexes: BTreeMap<String, Vec<String>>,
    /// Global secondary index name -> what its entries carry besides the keys.
    pub index_projections: BTreeMap<String, Projection>,
    /// Local secondary index names.
    pub local_indexes: BTreeSet<String>,
}

/// What a global secondary index's entries carry besides the table's and the index's keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Projection {
    KeysOnly,
    /// These attributes too.
    Include(Vec<String>),
    /// The whole item.
    #[default]
    All,
}

impl Projection {
    fn from_description(projection: &Value) -> Projection {
        match projection["ProjectionType"].as_str() {
            Some("KEYS_ONLY") => Projection::KeysOnly,
            Some("INCLUDE") => Projection::Include(
                projection["NonKeyAttributes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str().map(str::to_string))
                    .collect(),
            ),
            _ => Projection::All,
        }
    }
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
        let mut index_projections = BTreeMap::new();
        for index in table["GlobalSecondaryIndexes"].as_array().into_iter().flatten() {
            if let Some(name) = index["IndexName"].as_str() {
                let mut index_keys = keys(&index["KeySchema"]);
                // the partition key first, whatever order the description lists them in
                index_keys.sort_by_key(|(_, kind)| kind != "HASH");
                global_indexes.insert(name.to_string(), index_keys.into_iter().map(|(n, _)| n).collect());
                index_projections.insert(
                    name.to_string(),
                    Projection::from_description(&index["Projection"]),
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
            index_projections,
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
fn refused_number_in_map(values: &Value) -> Option<(&'static str, &'static str)> {
    values.as_object()?.values().find_map(refused_number_in)
}

/// The first number a write request (or one action of a transaction) sends that DynamoDB
/// refuses: in its item, key, expression values (its update and its condition), and the
/// legacy `AttributeUpdates` and `Expected`.
fn refused_number_in_request(request: &Value) -> Option<(&'static str, &'static str)> {
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
fn check_numbers(request: &Value) -> Result<(), Refusal> {
    match refused_number_in_request(request) {
        Some((rule, message)) => Err(validation(rule, message)),
        None => Ok(()),
    }
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

/// A table name: 3 to 255 characters, each a letter, a digit, `_`, `-` or `.`.
pub const TABLE_NAME_CHARS: std::ops::RangeInclusive<usize> = 3..=255;

/// A table name DynamoDB would refuse, with its words (`CreateTable`'s `TableName`).
fn check_table_name(name: &str) -> Result<(), Refusal> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if TABLE_NAME_CHARS.contains(&name.len()) && name.chars().all(allowed) {
        return Ok(());
    }
    Err(validation(
        "dynamodb.table_name",
        format!(
            "1 validation error detected: Value '{name}' at 'tableName' failed to satisfy constraint: \
             Member must have length between 3 and 255 and satisfy regular expression pattern: [a-zA-Z0-9_.-]+"
        ),
    ))
}

/// The verdict on one DynamoDB request, given the schemas of the tables it names (a table
/// moto does not know is left for moto to refuse).
pub fn check(operation: &str, body: &Value, schemas: &BTreeMap<String, TableSchema>) -> Result<(), Refusal> {
    let table = body["TableName"].as_str().unwrap_or_default();
    check_expressions(body)?;
    match operation {
        "CreateTable" => check_table_name(table)?,
        "PutItem" => {
            if let Some(s) = schema(schemas, table) {
                check_key(s, &body["Item"], true)?;
            }
            check_item_size(&body["Item"])?;
            check_numbers(body)?;
        }
        "GetItem" | "DeleteItem" | "UpdateItem" => {
            if let Some(s) = schema(schemas, table) {
                check_key(s, &body["Key"], false)?;
            }
            if operation != "GetItem" {
                check_numbers(body)?;
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
                    if let Some((rule, message)) = refused_number_in_map(key) {
                        return Err(validation(rule, message));
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
    // the first action an item-level validation refuses: (index, rule, message)
    let mut invalid: Option<(usize, &'static str, &'static str)> = None;
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
        if invalid.is_none() && operation == "TransactWriteItems" {
            if whole && size > MAX_ITEM_BYTES {
                invalid = Some((
                    i,
                    "dynamodb.item.size",
                    "Item size has exceeded the maximum allowed size",
                ));
            } else if let Some((rule, message)) = refused_number_in_request(action) {
                invalid = Some((i, rule, message));
            }
        }
        total += size;
    }
    if total > MAX_TRANSACTION_BYTES {
        return Err(validation(
            "dynamodb.transaction.bytes",
            format!("Transaction request size exceeded the maximum of {MAX_TRANSACTION_BYTES} bytes ({total} bytes)"),
        ));
    }
    if let Some((index, rule, message)) = invalid {
        // an item-level validation failure cancels the transaction with a reason per item
        return Err(Refusal::transaction_cancelled(
            rule,
            items.len(),
            index,
            "ValidationError",
            message,
        ));
    }
    Ok(())
}

// --- Metering -------------------------------------------------------------------------

/// How many items [`Metering`] remembers: past it, it forgets them all and starts again (a
/// long test process writes far fewer; the cap only bounds a runaway one).
const MAX_REMEMBERED_ITEMS: usize = 200_000;

/// The label of a key whose partition key value a `Query` names in a way the meter does
/// not parse.
pub const UNPARSED_QUERY_KEY: &str = "(query)";
/// The label every `Scan` is charged to.
pub const SCAN_KEY: &str = "(scan)";

/// What the meter knows of an item it saw written or read whole.
#[derive(Debug, Clone, Default, PartialEq)]
struct Stored {
    /// The item's size (for an item only updated, the meter's estimate).
    bytes: usize,
    /// Index name -> the item's entry in it.
    entries: BTreeMap<String, IndexEntry>,
}

/// An item's entry in a global secondary index.
#[derive(Debug, Clone, PartialEq)]
struct IndexEntry {
    /// `attribute=value` of the index's partition key: what an index write is charged to.
    partition: String,
    /// The whole index key: when it changes, the index takes a delete and a put.
    key: String,
    /// The projected attributes' size, keys included.
    bytes: usize,
}

/// What a write leaves of the item.
#[derive(Debug)]
enum After {
    /// This item (a put, or an update whose answer carries the new item).
    Item(Stored),
    /// No item.
    Gone,
    /// An update without the new item in hand: an estimate of its size, and the attribute
    /// names its update expression names (whether it may change an index key).
    Updated {
        estimate: usize,
        names: BTreeSet<String>,
    },
}

/// The strict layer's [`PartitionMeter`], its clock (seconds since the layer started), and
/// the sizes and index entries of the items it saw written: the size AWS bills for an
/// update or a delete is the stored item's, which the request does not carry.
#[derive(Debug)]
pub struct Metering {
    meter: PartitionMeter,
    started: Instant,
    remembered: Mutex<HashMap<(String, String), Stored>>,
}

impl Default for Metering {
    fn default() -> Self {
        Metering::new()
    }
}

impl Metering {
    /// A meter whose clock starts now.
    pub fn new() -> Metering {
        Metering {
            meter: PartitionMeter::new(),
            started: Instant::now(),
            remembered: Mutex::default(),
        }
    }

    /// The meter (a clone shares its counts).
    pub fn meter(&self) -> PartitionMeter {
        self.meter.clone()
    }

    /// The meter's clock: wall-clock seconds since the layer started.
    pub fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Stored>> {
        self.remembered.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn recall(&self, table: &str, key: &str) -> Option<Stored> {
        self.remembered()
            .get(&(table.to_string(), key.to_string()))
            .cloned()
    }

    fn remember(&self, table: &str, key: &str, item: Option<Stored>) {
        let mut remembered = self.remembered();
        let slot = (table.to_string(), key.to_string());
        match item {
            Some(item) => {
                if remembered.len() >= MAX_REMEMBERED_ITEMS && !remembered.contains_key(&slot) {
                    remembered.clear();
                }
                remembered.insert(slot, item);
            }
            None => {
                remembered.remove(&slot);
            }
        }
    }

    /// Charge one DynamoDB request that moto answered with 200 (`answer`: the response
    /// body), at `at` on the meter's clock. The request is counted under `operation`
    /// whatever its shape; a part of a request the meter cannot read (a malformed body, a
    /// table whose schema the layer does not have, a key it cannot find) is charged
    /// nothing, never a panic, and a read whose answer it cannot read is charged as one of
    /// a missing item. Refused requests are not charged, though AWS bills a write whose
    /// condition fails as if it had written.
    ///
    /// What is charged:
    /// - `PutItem`: a write of the larger of the new item and the item it replaced (as
    ///   AWS bills it), the replaced one when the meter saw it written (or `ReturnValues`
    ///   `ALL_OLD` returns it);
    /// - `UpdateItem`: the larger of the item before (as above) and after: the new item
    ///   when `ReturnValues` is `ALL_NEW`, else an estimate, the key's and the expression
    ///   values' sizes, since the request does not carry the stored item;
    /// - `DeleteItem`: the deleted item's size when known, else the one-unit minimum;
    /// - `TransactWriteItems`: the same per action, transactional (twice); a
    ///   `ConditionCheck` is a transactional read of the checked item (its size when known,
    ///   else one unit of 4 KB);
    /// - `BatchWriteItem`: a plain write per put or delete moto processed;
    /// - `GetItem`, `BatchGetItem`, `TransactGetItems`: a read per requested key of the
    ///   item returned (a missing one at the minimum), consistent as the request asks,
    ///   transactional for `TransactGetItems`; a projection returns part of an item while
    ///   AWS bills the whole, so a known item's size is charged when larger;
    /// - `Query`, `Scan`: one read per request of the bytes of the items returned (each a
    ///   known item's size when larger), plus, for the items a filter dropped
    ///   (`ScannedCount - Count`), the returned items' average: AWS bills what it reads,
    ///   before the filter. A `Query` is charged to its partition key value, a `Scan` to
    ///   [`SCAN_KEY`];
    /// - a global secondary index: a write to `<table>/<index>` on the index's partition
    ///   key (`attribute=value`) for each entry a write adds or removes, two when it moves
    ///   the entry to another key, one when it rewrites it in place (none for a
    ///   `KEYS_ONLY` index whose key did not change). Index writes are plain writes, also
    ///   in a transaction, of the projected attributes' size. An update without the new
    ///   item in hand rewrites the known entry in place.
    pub fn observe(
        &self,
        operation: &str,
        request: &Value,
        answer: &Value,
        schemas: &BTreeMap<String, TableSchema>,
        at: f64,
    ) {
        self.meter
            .request_on(operation, &tables_named(operation, request));
        match operation {
            "PutItem" | "UpdateItem" | "DeleteItem" => {
                self.charge_single_write(operation, request, answer, schemas, at);
            }
            "TransactWriteItems" => self.charge_transact_write(request, schemas, at),
            "BatchWriteItem" => self.charge_batch_write(request, answer, schemas, at),
            "GetItem" => {
                self.charge_get(request, answer, schemas, at);
            }
            "BatchGetItem" => self.charge_batch_get(request, answer, schemas, at),
            "TransactGetItems" => self.charge_transact_get(request, answer, schemas, at),
            "Query" | "Scan" => {
                self.charge_query(operation, request, answer, schemas, at);
            }
            "CreateTable" | "DeleteTable" => {
                // a table made again under the same name holds none of the old items
                if let Some(table) = request["TableName"].as_str() {
                    self.remembered().retain(|(t, _), _| t != table);
                }
            }
            _ => {}
        }
    }

    /// Whether [`observe`](Self::observe) reads moto's answer to this request (the layer
    /// parses it only then).
    pub fn reads_answer(operation: &str, request: &Value) -> bool {
        match operation {
            "GetItem" | "BatchGetItem" | "TransactGetItems" | "Query" | "Scan" | "BatchWriteItem" => true,
            "PutItem" | "UpdateItem" | "DeleteItem" => {
                matches!(request["ReturnValues"].as_str(), Some("ALL_OLD" | "ALL_NEW"))
            }
            _ => false,
        }
    }

    fn charge_single_write(
        &self,
        operation: &str,
        request: &Value,
        answer: &Value,
        schemas: &BTreeMap<String, TableSchema>,
        at: f64,
    ) -> Option<()> {
        let table = request["TableName"].as_str()?;
        let schema = schemas.get(table)?;
        let key = key_label(
            schema,
            if operation == "PutItem" {
                &request["Item"]
            } else {
                &request["Key"]
            },
        )?;
        let returns = request["ReturnValues"].as_str().unwrap_or("NONE");
        let returned = answer.get("Attributes").filter(|a| a.is_object());
        let old = if returns == "ALL_OLD" {
            returned.map(|item| stored_of(schema, item))
        } else {
            self.recall(table, &key)
        };
        let after = match operation {
            "PutItem" => After::Item(stored_of(schema, &request["Item"])),
            "DeleteItem" => After::Gone,
            _ => match returned {
                Some(item) if returns == "ALL_NEW" => After::Item(stored_of(schema, item)),
                _ => updated(request),
            },
        };
        self.charge_write(table, schema, &key, old, after, false, at);
        Some(())
    }

    fn charge_transact_write(&self, request: &Value, schemas: &BTreeMap<String, TableSchema>, at: f64) {
        for action in request["TransactItems"].as_array().into_iter().flatten() {
            let Some((kind, body)) = action.as_object().and_then(|m| m.iter().next()) else {
                continue;
            };
            let Some(table) = body["TableName"].as_str() else {
                continue;
            };
            let Some(schema) = schemas.get(table) else {
                continue;
            };
            let item_or_key = if kind == "Put" {
                &body["Item"]
            } else {
                &body["Key"]
            };
            let Some(key) = key_label(schema, item_or_key) else {
                continue;
            };
            let old = self.recall(table, &key);
            let after = match kind.as_str() {
                "Put" => After::Item(stored_of(schema, &body["Item"])),
                "Update" => updated(body),
                "Delete" => After::Gone,
                "ConditionCheck" => {
                    let bytes = old.map_or(0, |o| o.bytes);
                    self.meter.read(table, &key, bytes, true, true, at);
                    continue;
                }
                _ => continue,
            };
            self.charge_write(table, schema, &key, old, after, true, at);
        }
    }

    fn charge_batch_write(
        &self,
        request: &Value,
        answer: &Value,
        schemas: &BTreeMap<String, TableSchema>,
        at: f64,
    ) {
        for (table, writes) in request["RequestItems"].as_object().into_iter().flatten() {
            let Some(schema) = schemas.get(table) else {
                continue;
            };
            let item_or_key = |write: &Value| -> Value {
                match write.get("PutRequest") {
                    Some(put) => put["Item"].clone(),
                    None => write["DeleteRequest"]["Key"].clone(),
                }
            };
            // what moto left unprocessed was not written
            let unprocessed: BTreeSet<String> = answer["UnprocessedItems"][table]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|w| key_label(schema, &item_or_key(w)))
                .collect();
            for write in writes.as_array().into_iter().flatten() {
                let Some(key) = key_label(schema, &item_or_key(write)) else {
                    continue;
                };
                if unprocessed.contains(&key) {
                    continue;
                }
                let after = match write.get("PutRequest") {
                    Some(put) => After::Item(stored_of(schema, &put["Item"])),
                    None => After::Gone,
                };
                let old = self.recall(table, &key);
                self.charge_write(table, schema, &key, old, after, false, at);
            }
        }
    }

    /// Charge a write of `key`'s item and its index entries, and remember what it left.
    #[allow(clippy::too_many_arguments)]
    fn charge_write(
        &self,
        table: &str,
        schema: &TableSchema,
        key: &str,
        old: Option<Stored>,
        after: After,
        transactional: bool,
        at: f64,
    ) {
        let old_bytes = old.as_ref().map_or(0, |o| o.bytes);
        let bytes = match &after {
            After::Item(new) => old_bytes.max(new.bytes),
            After::Gone => old_bytes,
            After::Updated { estimate, .. } => old_bytes.max(*estimate),
        };
        self.meter.write(table, key, bytes, transactional, at);
        for (index, attributes) in &schema.global_indexes {
            let index_table = format!("{table}/{index}");
            let keys_only = matches!(schema.index_projections.get(index), Some(Projection::KeysOnly));
            let before = old.as_ref().and_then(|o| o.entries.get(index));
            let charge = |entry: &IndexEntry| {
                self.meter
                    .write(&index_table, &entry.partition, entry.bytes, false, at);
            };
            match &after {
                After::Item(new) => match (before, new.entries.get(index)) {
                    (Some(was), Some(now)) if was.key == now.key => {
                        if !keys_only {
                            charge(now);
                        }
                    }
                    (Some(was), Some(now)) => {
                        charge(was);
                        charge(now);
                    }
                    (Some(was), None) => charge(was),
                    (None, Some(now)) => charge(now),
                    (None, None) => {}
                },
                After::Gone => {
                    if let Some(was) = before {
                        charge(was);
                    }
                }
                After::Updated { names, .. } => {
                    if let Some(was) = before {
                        if !keys_only || attributes.iter().any(|a| names.contains(a)) {
                            charge(was);
                        }
                    }
                }
            }
        }
        let left = match after {
            After::Item(new) => Some(new),
            After::Gone => None,
            After::Updated { estimate, .. } => Some(Stored {
                bytes: bytes.max(estimate),
                entries: old.map(|o| o.entries).unwrap_or_default(),
            }),
        };
        self.remember(table, key, left);
    }

    /// The size a read of `key`'s item is billed on: the returned item's, or the item's
    /// the meter knows when larger (a projection returns part of an item; AWS bills all
    /// of it).
    fn billed_size(&self, table: &str, key: Option<&str>, returned: usize) -> usize {
        let known = key.and_then(|k| self.recall(table, k)).map_or(0, |s| s.bytes);
        returned.max(known)
    }

    /// A whole item a read returned is one the meter now knows.
    fn learn(&self, table: &str, schema: &TableSchema, request: &Value, item: &Value) {
        let whole = request.get("ProjectionExpression").is_none() && request.get("AttributesToGet").is_none();
        if whole && item.is_object() {
            if let Some(key) = key_label(schema, item) {
                self.remember(table, &key, Some(stored_of(schema, item)));
            }
        }
    }

    fn charge_get(
        &self,
        request: &Value,
        answer: &Value,
        schemas: &BTreeMap<String, TableSchema>,
        at: f64,
    ) -> Option<()> {
        let table = request["TableName"].as_str()?;
        let schema = schemas.get(table)?;
        let key = key_label(schema, &request["Key"])?;
        let item = answer.get("Item").filter(|i| i.is_object());
        let bytes = self.billed_size(table, Some(&key), item.map_or(0, item_size));
        self.meter
            .read(table, &key, bytes, consistent(request), false, at);
        if let Some(item) = item {
            self.learn(table, schema, request, item);
        }
        Some(())
    }

    fn charge_batch_get(
        &self,
        request: &Value,
        answer: &Value,
        schemas: &BTreeMap<String, TableSchema>,
        at: f64,
    ) {
        for (table, asked) in request["RequestItems"].as_object().into_iter().flatten() {
            let Some(schema) = schemas.get(table) else {
                continue;
            };
            let unprocessed: BTreeSet<String> = answer["UnprocessedKeys"][table]["Keys"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|k| key_label(schema, k))
                .collect();
            let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
            // items a projection stripped of their keys cannot be matched to one: they go to
            // the requested keys left unmatched, in order
            let mut unkeyed: Vec<usize> = Vec::new();
            for item in answer["Responses"][table].as_array().into_iter().flatten() {
                match key_label(schema, item) {
                    Some(key) => {
                        by_key.insert(key, item_size(item));
                        self.learn(table, schema, asked, item);
                    }
                    None => unkeyed.push(item_size(item)),
                }
            }
            let mut unkeyed = unkeyed.into_iter();
            for requested in asked["Keys"].as_array().into_iter().flatten() {
                let Some(key) = key_label(schema, requested) else {
                    continue;
                };
                if unprocessed.contains(&key) {
                    continue;
                }
                let returned = by_key.remove(&key).or_else(|| unkeyed.next()).unwrap_or(0);
                let bytes = self.billed_size(table, Some(&key), returned);
                self.meter.read(table, &key, bytes, consistent(asked), false, at);
            }
        }
    }

    fn charge_transact_get(
        &self,
        request: &Value,
        answer: &Value,
        schemas: &BTreeMap<String, TableSchema>,
        at: f64,
    ) {
        let responses = answer["Responses"].as_array();
        for (i, action) in request["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let get = &action["Get"];
            let Some(table) = get["TableName"].as_str() else {
                continue;
            };
            let Some(schema) = schemas.get(table) else {
                continue;
            };
            let Some(key) = key_label(schema, &get["Key"]) else {
                continue;
            };
            let item = responses
                .and_then(|r| r.get(i))
                .and_then(|r| r.get("Item"))
                .filter(|item| item.is_object());
            let bytes = self.billed_size(table, Some(&key), item.map_or(0, item_size));
            self.meter.read(table, &key, bytes, true, true, at);
            if let Some(item) = item {
                self.learn(table, schema, get, item);
            }
        }
    }

    fn charge_query(
        &self,
        operation: &str,
        request: &Value,
        answer: &Value,
        schemas: &BTreeMap<String, TableSchema>,
        at: f64,
    ) -> Option<()> {
        let table = request["TableName"].as_str()?;
        let schema = schemas.get(table)?;
        let global_index = request["IndexName"]
            .as_str()
            .and_then(|i| Some((i, schema.global_indexes.get(i)?.first()?)));
        // a local secondary index lives in the table's partitions
        let (metered_table, partition_key) = match global_index {
            Some((index, partition_key)) => (format!("{table}/{index}"), partition_key.as_str()),
            None => (table.to_string(), schema.partition_key.as_str()),
        };
        let key = if operation == "Query" {
            request["KeyConditionExpression"]
                .as_str()
                .and_then(|e| {
                    partition_value_in(
                        e,
                        partition_key,
                        &request["ExpressionAttributeNames"],
                        &request["ExpressionAttributeValues"],
                    )
                })
                .unwrap_or_else(|| UNPARSED_QUERY_KEY.to_string())
        } else {
            SCAN_KEY.to_string()
        };
        let items: &[Value] = answer["Items"].as_array().map_or(&[], Vec::as_slice);
        let returned: usize = items
            .iter()
            .map(|item| {
                let item_key = if global_index.is_none() {
                    key_label(schema, item)
                } else {
                    None
                };
                self.billed_size(table, item_key.as_deref(), item_size(item))
            })
            .sum();
        let count = answer["Count"].as_u64().unwrap_or(items.len() as u64);
        let scanned = answer["ScannedCount"].as_u64().unwrap_or(count);
        let dropped = usize::try_from(scanned.saturating_sub(count)).unwrap_or(0);
        let average = returned.checked_div(items.len()).unwrap_or(0);
        let bytes = returned.saturating_add(dropped.saturating_mul(average));
        self.meter.read_units(
            &metered_table,
            &key,
            read_units(bytes, consistent(request), false),
            at,
        );
        Some(())
    }
}

fn consistent(request: &Value) -> bool {
    request["ConsistentRead"].as_bool() == Some(true)
}

/// The estimate of an update without the new item in hand: what the request itself writes
/// (its key and the values its expressions use).
fn updated(request: &Value) -> After {
    let values: usize = request["ExpressionAttributeValues"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, v)| value_size(v))
        .sum();
    // what the update changes (a condition only reads)
    let mut names = request["UpdateExpression"]
        .as_str()
        .map(|e| names_in(e, &request["ExpressionAttributeNames"]))
        .unwrap_or_default();
    // the legacy `AttributeUpdates` names its attributes as keys
    if let Some(updates) = request["AttributeUpdates"].as_object() {
        names.extend(updates.keys().cloned());
    }
    After::Updated {
        estimate: item_size(&request["Key"]) + values,
        names,
    }
}

/// The attribute names an expression names, `#aliases` resolved.
fn names_in(expression: &str, aliases: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut word = String::new();
    for c in expression.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' || c == '#' || c == ':' {
            word.push(c);
            continue;
        }
        if let Some(alias) = word.strip_prefix('#') {
            if let Some(name) = aliases[format!("#{alias}")].as_str() {
                out.insert(name.to_string());
            }
        } else if !word.is_empty() && !word.starts_with(':') {
            out.insert(word.clone());
        }
        word.clear();
    }
    out
}

/// The text of a scalar attribute value (`S`, `N` or `B`, as sent).
fn scalar_text(value: &Value) -> Option<&str> {
    let (kind, inner) = value.as_object()?.iter().next()?;
    matches!(kind.as_str(), "S" | "N" | "B")
        .then(|| inner.as_str())
        .flatten()
}

/// `attribute=value` of one key attribute of `item`.
fn attribute_label(item: &Value, attribute: &str) -> Option<String> {
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

/// What the meter keeps of an item: its size and its index entries.
fn stored_of(schema: &TableSchema, item: &Value) -> Stored {
    Stored {
        bytes: item_size(item),
        entries: index_entries(schema, item),
    }
}

/// The item's entry in each global secondary index whose key attributes it carries (an
/// item without them is not in the index: a sparse index).
fn index_entries(schema: &TableSchema, item: &Value) -> BTreeMap<String, IndexEntry> {
    let mut out = BTreeMap::new();
    for (index, attributes) in &schema.global_indexes {
        let labels: Option<Vec<String>> = attributes.iter().map(|a| attribute_label(item, a)).collect();
        let Some(labels) = labels else {
            continue;
        };
        let Some(partition) = labels.first().cloned() else {
            continue;
        };
        let projection = schema.index_projections.get(index).cloned().unwrap_or_default();
        let bytes = match projection {
            Projection::All => item_size(item),
            Projection::KeysOnly | Projection::Include(_) => {
                let mut names: BTreeSet<&str> = attributes.iter().map(String::as_str).collect();
                names.insert(&schema.partition_key);
                names.extend(schema.sort_key.as_deref());
                if let Projection::Include(more) = &projection {
                    names.extend(more.iter().map(String::as_str));
                }
                names
                    .into_iter()
                    .filter_map(|n| Some(n.len() + value_size(item.get(n)?)))
                    .sum()
            }
        };
        out.insert(
            index.clone(),
            IndexEntry {
                partition,
                key: labels.join("|"),
                bytes,
            },
        );
    }
    out
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

    fn timers_schema() -> BTreeMap<String, TableSchema> {
        let description = json!({
            "KeySchema": [
                {"AttributeName": "execution_id", "KeyType": "HASH"},
                {"AttributeName": "path", "KeyType": "RANGE"},
            ],
            "GlobalSecondaryIndexes": [{
                "IndexName": "due_index",
                // listed sort key first: the schema still puts the partition key first
                "KeySchema": [
                    {"AttributeName": "fire_at", "KeyType": "RANGE"},
                    {"AttributeName": "due_shard", "KeyType": "HASH"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }],
        });
        let schema = TableSchema::from_description(&description).expect("a key schema");
        assert_eq!(schema.global_indexes["due_index"], ["due_shard", "fire_at"]);
        assert_eq!(schema.index_projections["due_index"], Projection::KeysOnly);
        BTreeMap::from([("timers".to_string(), schema)])
    }

    #[test]
    fn a_request_the_meter_cannot_read_is_counted_and_charged_nothing() {
        let metering = Metering::new();
        let schemas = timers_schema();
        let malformed = [
            ("PutItem", Value::Null, Value::Null),
            (
                "PutItem",
                json!({"TableName": "timers", "Item": "not an item"}),
                Value::Null,
            ),
            (
                "PutItem",
                json!({"TableName": "timers", "Item": {"execution_id": {"S": "e"}}}),
                Value::Null,
            ),
            (
                "PutItem",
                json!({"TableName": "unknown", "Item": {"id": {"S": "e"}}}),
                Value::Null,
            ),
            (
                "UpdateItem",
                json!({"TableName": 7, "Key": []}),
                json!({"Attributes": 3}),
            ),
            (
                "DeleteItem",
                json!({"TableName": "timers", "Key": {"execution_id": {"N": 1}}}),
                Value::Null,
            ),
            (
                "TransactWriteItems",
                json!({"TransactItems": [1, {"Put": 2}, {"Update": {"TableName": "timers"}}]}),
                Value::Null,
            ),
            (
                "TransactWriteItems",
                json!({"TransactItems": {"Put": {}}}),
                Value::Null,
            ),
            (
                "BatchWriteItem",
                json!({"RequestItems": {"timers": [{"PutRequest": 1}, 2]}}),
                json!([]),
            ),
            ("BatchWriteItem", json!({"RequestItems": []}), Value::Null),
            (
                "GetItem",
                json!({"TableName": "timers", "Key": {"path": {"S": "a"}}}),
                json!({"Item": 5}),
            ),
            (
                "BatchGetItem",
                json!({"RequestItems": {"timers": {"Keys": 3}}}),
                json!({"Responses": {"timers": 4}}),
            ),
            (
                "TransactGetItems",
                json!({"TransactItems": [{"Get": {"TableName": "timers", "Key": 1}}]}),
                json!({"Responses": 2}),
            ),
            ("Query", json!({"TableName": []}), Value::Null),
            ("Scan", json!({"TableName": "unknown"}), json!({"Items": [1, 2]})),
        ];
        for (operation, request, answer) in &malformed {
            metering.observe(operation, request, answer, &schemas, 1.0);
        }
        let report = metering.meter().report();
        assert_eq!(report.total_requests(), malformed.len() as u64);
        assert_eq!(report.requests["PutItem"], 4);
        assert_eq!(report.total_units(), (0.0, 0.0), "{:?}", report.units_per_table);
    }

    #[test]
    fn a_scan_or_a_query_whose_answer_is_malformed_is_charged_the_minimum() {
        let metering = Metering::new();
        let schemas = timers_schema();
        let request = json!({"TableName": "timers", "ConsistentRead": true});
        metering.observe(
            "Scan",
            &request,
            &json!({"Items": "x", "Count": "y"}),
            &schemas,
            1.0,
        );
        assert_eq!(metering.meter().key_units("timers", SCAN_KEY), (1.0, 0.0));
    }

    #[test]
    fn an_update_without_the_new_item_rewrites_an_index_entry_only_when_it_may_change() {
        let metering = Metering::new();
        let schemas = timers_schema();
        let key = json!({"execution_id": {"S": "e"}, "path": {"S": "a"}});
        let mut item = key.clone();
        item["due_shard"] = json!({"S": "7"});
        item["fire_at"] = json!({"N": "10"});
        metering.observe(
            "PutItem",
            &json!({"TableName": "timers", "Item": item}),
            &Value::Null,
            &schemas,
            1.0,
        );
        let meter = metering.meter();
        let shard = || meter.key_units("timers/due_index", "due_shard=7");
        assert_eq!(shard(), (0.0, 1.0));
        // a KEYS_ONLY entry does not change when the update names no index key
        let other = json!({"TableName": "timers", "Key": key, "UpdateExpression": "SET #n = :n",
                           "ExpressionAttributeNames": {"#n": "note"}, "ExpressionAttributeValues": {":n": {"S": "x"}}});
        metering.observe("UpdateItem", &other, &Value::Null, &schemas, 2.0);
        assert_eq!(shard(), (0.0, 1.0));
        // one that names an index key (through an alias) rewrites it
        let moved = json!({"TableName": "timers", "Key": key, "UpdateExpression": "SET #f = :f",
                           "ExpressionAttributeNames": {"#f": "fire_at"}, "ExpressionAttributeValues": {":f": {"N": "20"}}});
        metering.observe("UpdateItem", &moved, &Value::Null, &schemas, 3.0);
        assert_eq!(shard(), (0.0, 2.0));
        metering.observe(
            "DeleteItem",
            &json!({"TableName": "timers", "Key": key}),
            &Value::Null,
            &schemas,
            4.0,
        );
        assert_eq!(shard(), (0.0, 3.0));
        // the item is gone: deleting it again touches no index entry
        metering.observe(
            "DeleteItem",
            &json!({"TableName": "timers", "Key": key}),
            &Value::Null,
            &schemas,
            5.0,
        );
        assert_eq!(shard(), (0.0, 3.0));
        assert_eq!(meter.key_units("timers", "execution_id=e|path=a"), (0.0, 5.0));
    }

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
