//! What a read costs on the partition meter: a read per key of a `GetItem`, a
//! `BatchGetItem` or a `TransactGetItems`, the bytes read per request of a `Query` or a
//! `Scan`, each on the size AWS bills (a known item's when a projection returned less).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::key_labels::{key_label, partition_value_in};
use super::metering::{Metering, SCAN_KEY, UNPARSED_QUERY_KEY};
use super::schema::TableSchema;
use super::sizes::item_size;
use super::stored::stored_of;
use crate::meter::read_units;

impl Metering {
    /// The size a read of `key`'s item is billed on: the returned item's, or the item's
    /// the meter knows when larger (a projection returns part of an item; AWS bills all
    /// of it).
    pub(super) fn billed_size(&self, table: &str, key: Option<&str>, returned: usize) -> usize {
        let known = key.and_then(|k| self.recall(table, k)).map_or(0, |s| s.bytes);
        returned.max(known)
    }

    /// A whole item a read returned is one the meter now knows.
    pub(super) fn learn(&self, table: &str, schema: &TableSchema, request: &Value, item: &Value) {
        let whole = request.get("ProjectionExpression").is_none() && request.get("AttributesToGet").is_none();
        if whole && item.is_object() {
            if let Some(key) = key_label(schema, item) {
                self.remember(table, &key, Some(stored_of(schema, item)));
            }
        }
    }

    pub(super) fn charge_get(
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

    pub(super) fn charge_batch_get(
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

    pub(super) fn charge_transact_get(
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

    pub(super) fn charge_query(
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
