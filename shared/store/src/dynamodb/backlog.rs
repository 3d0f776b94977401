//! The relay's bounded reads of the outbox and spawn tables: the lowest pending seqs with
//! memory bounded by how many are wanted (the keys alone are scanned, page by page, and
//! only the lowest kept), the rows of given seqs by key, and acks 25 to a request.

use std::collections::{BinaryHeap, HashMap};

use aws_sdk_dynamodb::types::KeysAndAttributes;

use super::item::{get_i64, Item};
use super::rows::{seq_keys, RANDOM_BITS};
use super::{build_err, sdk_error, DynamoDbStore, MAX_BATCH_GET_KEYS};
use crate::{PendingRows, PendingSeq, StoreError};

impl DynamoDbStore {
    /// The seqs of `table`'s rows below `below`, offered to `lowest`, which keeps the
    /// `limit` lowest of everything offered.
    async fn keep_lowest_seqs(
        &self,
        table: &str,
        spawn: bool,
        below: i64,
        limit: usize,
        lowest: &mut BinaryHeap<PendingSeq>,
    ) -> Result<(), StoreError> {
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(table)
                .projection_expression("#s")
                .filter_expression("#s < :below")
                .expression_attribute_names("#s", "seq")
                .expression_attribute_values(":below", super::item::n_i64(below))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| sdk_error("Scan", e))?;
            for item in out.items() {
                let Some(seq) = get_i64(item, "seq") else {
                    continue;
                };
                let candidate = PendingSeq { seq, spawn };
                if lowest.len() < limit {
                    lowest.push(candidate);
                } else if lowest.peek().is_some_and(|highest| candidate < *highest) {
                    lowest.pop();
                    lowest.push(candidate);
                }
            }
            match out.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(()),
            }
        }
    }

    pub(super) async fn lowest_pending_seqs(
        &self,
        limit: usize,
        settled_before: f64,
    ) -> Result<Vec<PendingSeq>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        // our seqs start at the commit's clock (milliseconds, shifted); harel's counter's
        // are far below any of them and always pass
        let below = if settled_before.is_finite() && settled_before > 0.0 {
            ((settled_before * 1000.0) as i64).saturating_mul(1 << RANDOM_BITS)
        } else {
            i64::MAX
        };
        let mut lowest = BinaryHeap::with_capacity(limit.min(1 << 16));
        let (spawns, outbox) = (self.tables.spawns.clone(), self.tables.outbox.clone());
        // the outbox first (see `ExecutionStore::oldest_pending_seqs`'s default): an event
        // scanned there was committed after its regions' spawn intents, which the spawns
        // scan then finds
        self.keep_lowest_seqs(&outbox, false, below, limit, &mut lowest)
            .await?;
        self.keep_lowest_seqs(&spawns, true, below, limit, &mut lowest)
            .await?;
        Ok(lowest.into_sorted_vec())
    }

    /// The rows of these seqs still pending: consistent `BatchGetItem`s of 100 keys.
    pub(super) async fn rows_by_seq(
        &self,
        spawns: &[i64],
        outbox: &[i64],
    ) -> Result<PendingRows, StoreError> {
        let keyed = |table: &String, seqs: &[i64]| {
            seq_keys(seqs.iter().copied())
                .into_iter()
                .map(|key| (table.clone(), key))
                .collect::<Vec<_>>()
        };
        let mut keys = keyed(&self.tables.spawns, spawns);
        keys.extend(keyed(&self.tables.outbox, outbox));
        let mut found: Vec<(String, Item)> = Vec::new();
        for chunk in keys.chunks(MAX_BATCH_GET_KEYS) {
            let mut by_table: HashMap<String, Vec<Item>> = HashMap::new();
            for (table, key) in chunk {
                by_table.entry(table.clone()).or_default().push(key.clone());
            }
            let mut request = HashMap::new();
            for (table, keys) in by_table {
                let keys = KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .consistent_read(true)
                    .build()
                    .map_err(build_err)?;
                request.insert(table, keys);
            }
            for (table, items) in self.batch_get(request).await? {
                found.extend(items.into_iter().map(|item| (table.clone(), item)));
            }
        }
        let mut rows = PendingRows::default();
        for (table, item) in &found {
            if *table == self.tables.spawns {
                rows.spawns.extend(super::store::spawn_entries(item)?);
            } else {
                rows.outbox.push(super::store::outbox_entry(item)?);
            }
        }
        // stable: a packed row's intents keep their order
        rows.spawns.sort_by_key(|s| s.seq);
        rows.outbox.sort_by_key(|o| o.seq);
        Ok(rows)
    }

    /// Delete these rows, `BatchWriteItem`s of 25 (one request for a commit's few rows).
    pub(super) async fn delete_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<(), StoreError> {
        let (spawn_table, outbox_table) = (self.tables.spawns.clone(), self.tables.outbox.clone());
        self.delete_keys(&spawn_table, seq_keys(spawns.iter().copied()))
            .await?;
        self.delete_keys(&outbox_table, seq_keys(outbox.iter().copied()))
            .await
    }
}
