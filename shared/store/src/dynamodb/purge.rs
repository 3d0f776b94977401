//! `purge` and the id-prefix lookups on DynamoDB, as harel 0.9.0's `DynamoDBStore` does them:
//!
//! - the execution item goes first, by a `DeleteItem` conditioned on its version; a failed
//!   condition is told apart (moved on: touch nothing; absent: a retry, sweep the rest) by a
//!   consistent `GetItem`;
//! - then its `processed`, `trace` and `timers` partitions, found by `Query` (all pages,
//!   keys only) and deleted 25 keys per `BatchWriteItem`, the unprocessed ones re-sent with
//!   backoff. Not in the execution's transaction: `TransactWriteItems` takes 100 items and
//!   these partitions are unbounded. The execution goes first, so a crash between the two
//!   leaves only rows nothing reaches, which a retry still finds and deletes;
//! - then its parked events' rows and claims and their counter (module `parked`), read by
//!   key a page of numbers at a time down from the last number taken, to the first page
//!   with none (the rows still there follow the last one released);
//! - then the outbox entries addressed to it and the spawn intents it issued, found by a
//!   filtered `Scan` (those tables are keyed by `seq`; both hold only what the relay has not
//!   delivered yet, so they stay small).
//!
//! A hash key cannot be range-queried, so `ids_with_prefix` is a filtered `Scan` of the
//! executions table; `ids_with_any_prefix` answers a whole page of purge candidates with
//! one such scan instead of one per tree.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};

use super::item::{s, Item};
use super::{build_err, sdk_error, DynamoDbStore};
use crate::StoreError;

/// `BatchWriteItem` takes at most 25 requests
/// (<https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html>).
const BATCH_WRITE_MAX: usize = 25;

impl DynamoDbStore {
    /// harel's `purge(execution_id, expected_version)`; see [`crate::ExecutionStore::purge`].
    pub(super) async fn purge_execution(&self, id: &str, expected_version: i64) -> Result<bool, StoreError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.tables.executions)
            .key("id", s(id))
            .condition_expression("#v = :v")
            .expression_attribute_names("#v", "version")
            .expression_attribute_values(":v", super::item::n_i64(expected_version))
            .send()
            .await;
        let deleted = match result {
            Ok(_) => true,
            Err(err) if err.code() == Some("ConditionalCheckFailedException") => {
                if self.get_execution_attributes(id, &["id"]).await?.is_some() {
                    return Ok(false); // moved on since it was read: touch nothing
                }
                false // already gone: sweep what an interrupted purge left
            }
            Err(err) => return Err(sdk_error("DeleteItem", err)),
        };
        self.forget_hint(id);
        for (table, sort_key) in [
            (&self.tables.processed, "event_id"),
            (&self.tables.trace, "idx"),
            (&self.tables.timers, "path"),
        ] {
            let keys = self.partition_keys(table, sort_key, id).await?;
            self.delete_keys(table, keys).await?;
        }
        self.purge_parked(id).await?;
        for (table, attribute) in [
            (&self.tables.outbox, "target_id"),
            (&self.tables.spawns, "parent_id"),
        ] {
            let keys = self.seq_keys_where(table, attribute, id).await?;
            self.delete_keys(table, keys).await?;
        }
        Ok(deleted)
    }

    /// Delete `id`'s parked rows, their claims and their counter.
    async fn purge_parked(&self, id: &str) -> Result<(), StoreError> {
        let mut through = self.last_park_number_of(id).await?;
        let key = |k: String| -> Item { HashMap::from([("id".to_string(), s(k))]) };
        while through > 0 {
            let after = through.saturating_sub(crate::PARKED_PAGE);
            let page = self.parked_events_of(id, after, through).await?;
            if page.is_empty() {
                break;
            }
            let keys: Vec<Item> = page
                .iter()
                .flat_map(|p| {
                    [
                        key(crate::parked::row_key(id, p.number)),
                        key(crate::parked::claim_key(id, &p.event.id)),
                    ]
                })
                .collect();
            self.delete_keys(&self.tables.counters, keys).await?;
            through = after;
        }
        let counter = vec![key(crate::parked::counter_key(id))];
        self.delete_keys(&self.tables.counters, counter).await
    }

    /// Every key of `table`'s partition `execution_id` (Query, all pages, keys only).
    async fn partition_keys(
        &self,
        table: &str,
        sort_key: &str,
        execution_id: &str,
    ) -> Result<Vec<Item>, StoreError> {
        let mut keys = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(table)
                .key_condition_expression("execution_id = :e")
                .expression_attribute_values(":e", s(execution_id))
                .projection_expression("execution_id, #sk")
                .expression_attribute_names("#sk", sort_key)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| sdk_error("Query", e))?;
            keys.extend(out.items().iter().cloned());
            match out.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(keys),
            }
        }
    }

    /// The `seq` keys of `table`'s items whose `attribute` is `value` (a filtered Scan).
    async fn seq_keys_where(
        &self,
        table: &str,
        attribute: &str,
        value: &str,
    ) -> Result<Vec<Item>, StoreError> {
        let filter = format!("{attribute} = :v");
        let items = self
            .scan_all(table, Some((filter.as_str(), ":v", s(value))))
            .await?;
        Ok(items
            .into_iter()
            .filter_map(|item| {
                item.get("seq")
                    .cloned()
                    .map(|seq| HashMap::from([("seq".to_string(), seq)]))
            })
            .collect())
    }

    /// Delete `keys` from `table`, 25 per `BatchWriteItem`; unprocessed items are re-sent
    /// with the store's backoff (AWS's advice for `UnprocessedItems`), and still
    /// unprocessed after the last attempt is a retryable error: the purge is re-run.
    pub(super) async fn delete_keys(&self, table: &str, keys: Vec<Item>) -> Result<(), StoreError> {
        for chunk in keys.chunks(BATCH_WRITE_MAX) {
            let mut requests = Vec::with_capacity(chunk.len());
            for key in chunk {
                let delete = DeleteRequest::builder()
                    .set_key(Some(key.clone()))
                    .build()
                    .map_err(build_err)?;
                requests.push(WriteRequest::builder().delete_request(delete).build());
            }
            let mut pending = HashMap::from([(table.to_string(), requests)]);
            let mut attempt = 0;
            loop {
                attempt += 1;
                let out = self
                    .client
                    .batch_write_item()
                    .set_request_items(Some(pending))
                    .send()
                    .await
                    .map_err(|e| sdk_error("BatchWriteItem", e))?;
                match out.unprocessed_items() {
                    Some(rest) if rest.values().any(|r| !r.is_empty()) => {
                        if attempt >= self.retry.max_attempts.max(1) {
                            return Err(StoreError::retryable(format!(
                                "BatchWriteItem left deletes in {table} unprocessed after {attempt} attempts"
                            )));
                        }
                        tokio::time::sleep(self.retry.backoff(attempt)).await;
                        pending = rest.clone();
                    }
                    _ => break,
                }
            }
        }
        Ok(())
    }

    /// The execution ids that begin with any of `prefixes`: one Scan of the executions
    /// table (all pages, the id only), filtered by `begins_with` for a single prefix and
    /// matched here for several (a filter expression is capped at 4 KB).
    pub(super) async fn scan_ids_with_prefixes(
        &self,
        prefixes: &[String],
    ) -> Result<Vec<String>, StoreError> {
        if prefixes.is_empty() {
            return Ok(Vec::new());
        }
        let mut ids = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut request = self
                .client
                .scan()
                .table_name(&self.tables.executions)
                .projection_expression("#i")
                .expression_attribute_names("#i", "id")
                .consistent_read(true)
                .set_exclusive_start_key(start);
            if let [prefix] = prefixes {
                request = request
                    .filter_expression("begins_with(#i, :p)")
                    .expression_attribute_values(":p", s(prefix));
            }
            let out = request.send().await.map_err(|e| sdk_error("Scan", e))?;
            for item in out.items() {
                if let Some(id) = item.get("id").and_then(|v| v.as_s().ok()) {
                    if prefixes.iter().any(|p| id.starts_with(p.as_str())) {
                        ids.push(id.clone());
                    }
                }
            }
            match out.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(ids),
            }
        }
    }
}
