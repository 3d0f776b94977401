//! The verdict on one DynamoDB request: the tables it names, then the rules by operation
//! (table names, keys and items, numbers, consistent reads on a GSI, batch sizes,
//! transactions), expressions on every one.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::expressions::check_expressions;
use super::items::{check_item_size, check_key, item_identity};
use super::limits::{MAX_BATCH_GET_KEYS, MAX_BATCH_WRITE_REQUESTS, TABLE_NAME_CHARS};
use super::numbers::{check_numbers, refused_number_in_map};
use super::schema::TableSchema;
use super::transaction::check_transaction;
use crate::strict::Refusal;

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

/// A table name DynamoDB would refuse, with its words (`CreateTable`'s `TableName`).
fn check_table_name(name: &str) -> Result<(), Refusal> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if TABLE_NAME_CHARS.contains(&name.len()) && name.chars().all(allowed) {
        return Ok(());
    }
    Err(Refusal::dynamodb_validation(
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
            if let Some(s) = schemas.get(table) {
                check_key(s, &body["Item"], true)?;
            }
            check_item_size(&body["Item"])?;
            check_numbers(body)?;
        }
        "GetItem" | "DeleteItem" | "UpdateItem" => {
            if let Some(s) = schemas.get(table) {
                check_key(s, &body["Key"], false)?;
            }
            if operation != "GetItem" {
                check_numbers(body)?;
            }
        }
        "Query" | "Scan" if body["ConsistentRead"] == json!(true) => {
            let index = body["IndexName"].as_str().unwrap_or_default();
            if schemas
                .get(table)
                .is_some_and(|s| s.global_indexes.contains_key(index))
            {
                return Err(Refusal::dynamodb_validation(
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
                    if let Some(s) = schemas.get(t) {
                        check_key(s, key, false)?;
                    }
                }
            }
            if keys > MAX_BATCH_GET_KEYS {
                return Err(Refusal::dynamodb_validation(
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
                        return Err(Refusal::dynamodb_validation(rule, message));
                    }
                    if let Some(s) = schemas.get(t) {
                        check_key(s, key, item)?;
                        if !seen.insert(item_identity(s, t, key)) {
                            return Err(Refusal::dynamodb_validation(
                                "dynamodb.batch_write.duplicates",
                                "Provided list of item keys contains duplicates",
                            ));
                        }
                    }
                }
            }
            if requests > MAX_BATCH_WRITE_REQUESTS {
                return Err(Refusal::dynamodb_validation(
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
