//! The shape of a transaction (`TransactWriteItems`, `TransactGetItems`): at most 100
//! actions and 4 MB, one action per item, a client request token of 1 to 36 characters;
//! an item-level validation failure cancels it with a reason per action.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::expressions::check_expressions;
use super::items::{check_key, item_identity};
use super::limits::{
    MAX_CLIENT_REQUEST_TOKEN_CHARS, MAX_ITEM_BYTES, MAX_TRANSACTION_ACTIONS, MAX_TRANSACTION_BYTES,
};
use super::numbers::refused_number_in_request;
use super::schema::TableSchema;
use super::sizes::item_size;
use crate::strict::Refusal;

pub(super) fn check_transaction(
    operation: &str,
    body: &Value,
    schemas: &BTreeMap<String, TableSchema>,
) -> Result<(), Refusal> {
    let items = body["TransactItems"].as_array().cloned().unwrap_or_default();
    if items.len() > MAX_TRANSACTION_ACTIONS {
        return Err(Refusal::dynamodb_validation(
            "dynamodb.transaction.actions",
            format!("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to {MAX_TRANSACTION_ACTIONS} ({} actions)", items.len()),
        ));
    }
    if let Some(token) = body["ClientRequestToken"].as_str() {
        let n = token.chars().count();
        if !(1..=MAX_CLIENT_REQUEST_TOKEN_CHARS).contains(&n) {
            return Err(Refusal::dynamodb_validation(
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
        if let Some(s) = schemas.get(table) {
            check_key(s, key, whole)?;
            if !seen.insert(item_identity(s, table, key)) {
                return Err(Refusal::dynamodb_validation(
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
        return Err(Refusal::dynamodb_validation(
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
