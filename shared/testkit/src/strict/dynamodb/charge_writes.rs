//! What a write costs on the partition meter: the item's units (the larger of before and
//! after, twice in a transaction) and its global secondary index entries' units.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::key_labels::key_label;
use super::metering::Metering;
use super::schema::{Projection, TableSchema};
use super::stored::{stored_of, updated, After, IndexEntry, Stored};

impl Metering {
    pub(super) fn charge_single_write(
        &self,
        operation: &str,
        request: &Value,
        answer: &Value,
        schemas: &BTreeMap<String, TableSchema>,
        at: f64,
    ) -> Option<()> {
        let (table, schema, key) = single_write_target(operation, request, schemas)?;
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

    pub(super) fn charge_transact_write(
        &self,
        request: &Value,
        schemas: &BTreeMap<String, TableSchema>,
        at: f64,
    ) {
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

    pub(super) fn charge_batch_write(
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
    pub(super) fn charge_write(
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
}

/// The table, its schema and the key label of a single `PutItem`, `UpdateItem` or
/// `DeleteItem` (`None` when the meter does not know the table or cannot read the key).
pub(super) fn single_write_target<'a>(
    operation: &str,
    request: &'a Value,
    schemas: &'a BTreeMap<String, TableSchema>,
) -> Option<(&'a str, &'a TableSchema, String)> {
    let table = request["TableName"].as_str()?;
    let schema = schemas.get(table)?;
    let item_or_key = if operation == "PutItem" {
        &request["Item"]
    } else {
        &request["Key"]
    };
    Some((table, schema, key_label(schema, item_or_key)?))
}
