//! The outbox and spawn tables' pending rows: the relay's bounded reads (the lowest
//! pending seqs with memory bounded by how many are wanted: the keys alone are scanned,
//! page by page, and only the lowest kept), the rows of given seqs by key, acks 25 to a
//! request; the whole tables read and single rows acked; and the rows decoded.

use std::collections::{BinaryHeap, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use stm_core::{pyjson, Event, Value};

use super::commit::MORE_SPAWNS_ATTRIBUTE;
use super::item::{corrupt, get_i64, get_s, malformed, n_i64, req_i64, req_s, Item};
use super::rows::{
    seq_keys, Rows, RANDOM_BITS, ROWS_ATTRIBUTE, ROW_BYTES_ATTRIBUTE, TRACE_CONTEXT_ATTRIBUTE,
};
use super::{build_err, sdk_error, DynamoDbStore, MAX_BATCH_GET_KEYS};
use crate::{Corruption, Malformation, OutboxEntry, PendingRows, PendingSeq, SpawnEntry, StoreError};

/// How many parallel segments the relay's scan of a rows table runs (DynamoDB API
/// Reference, `Scan`: `TotalSegments` from 1 to 1,000,000; "Parallel scan" in the
/// Developer Guide): each is its own chain of pages, so a backlog's keys are read that
/// many pages at a time, from as many partitions.
pub(super) const SCAN_SEGMENTS: i32 = 8;

impl DynamoDbStore {
    /// The seqs of `table`'s rows below `below` (with their recorded sizes), offered to
    /// `lowest`, which keeps the `limit` lowest of everything offered. The table is read
    /// in [`SCAN_SEGMENTS`] parallel segments, each a chain of 1 MB pages: a backlog's
    /// keys are read about that many times faster than by one chain, and what is held is
    /// still `lowest` and one page per segment.
    async fn keep_lowest_seqs(
        &self,
        table: &str,
        spawn: bool,
        below: i64,
        limit: usize,
        lowest: &mut BinaryHeap<PendingSeq>,
    ) -> Result<(), StoreError> {
        use futures_util::stream::{FuturesUnordered, StreamExt as _};
        let page = |segment: i32, start: Option<Item>| async move {
            let out = self
                .client
                .scan()
                .table_name(table)
                .projection_expression("#s, #b")
                .filter_expression("#s < :below")
                .expression_attribute_names("#s", "seq")
                .expression_attribute_names("#b", ROW_BYTES_ATTRIBUTE)
                .expression_attribute_values(":below", n_i64(below))
                .consistent_read(true)
                .segment(segment)
                .total_segments(SCAN_SEGMENTS)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| sdk_error("Scan", e))?;
            Ok::<_, StoreError>((segment, out))
        };
        let mut pages: FuturesUnordered<_> = (0..SCAN_SEGMENTS).map(|segment| page(segment, None)).collect();
        while let Some(answered) = pages.next().await {
            let (segment, out) = answered?;
            for item in out.items() {
                let Some(seq) = get_i64(item, "seq") else {
                    continue;
                };
                let bytes = get_i64(item, ROW_BYTES_ATTRIBUTE)
                    .and_then(|b| u32::try_from(b).ok())
                    .unwrap_or(PendingSeq::UNRECORDED_BYTES);
                let candidate = PendingSeq { seq, spawn, bytes };
                if lowest.len() < limit {
                    lowest.push(candidate);
                } else if lowest.peek().is_some_and(|highest| candidate < *highest) {
                    lowest.pop();
                    lowest.push(candidate);
                }
            }
            if let Some(key) = out.last_evaluated_key().filter(|k| !k.is_empty()) {
                pages.push(page(segment, Some(key.clone())));
            }
        }
        Ok(())
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

    /// The rows of these seqs still pending: consistent `BatchGetItem`s of 100 keys, side
    /// by side (a relay's read of 2,000 rows is 20 requests in about the time of one).
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
        let read = |chunk: &[(String, Item)]| {
            let mut by_table: HashMap<String, Vec<Item>> = HashMap::new();
            for (table, key) in chunk {
                by_table.entry(table.clone()).or_default().push(key.clone());
            }
            async move {
                let mut request = HashMap::new();
                for (table, keys) in by_table {
                    let keys = KeysAndAttributes::builder()
                        .set_keys(Some(keys))
                        .consistent_read(true)
                        .build()
                        .map_err(build_err)?;
                    request.insert(table, keys);
                }
                self.batch_get(request).await
            }
        };
        let answers = futures_util::future::try_join_all(keys.chunks(MAX_BATCH_GET_KEYS).map(read)).await?;
        let mut found: Vec<(String, Item)> = Vec::new();
        for answer in answers {
            for (table, items) in answer {
                found.extend(items.into_iter().map(|item| (table.clone(), item)));
            }
        }
        let mut rows = PendingRows::default();
        for (table, item) in &found {
            if *table == self.tables.spawns {
                rows.spawns.extend(spawn_entries(item)?);
            } else {
                rows.outbox.push(outbox_entry(item)?);
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

    /// [`ExecutionStore::pending_outbox`](crate::ExecutionStore::pending_outbox): the whole
    /// table, in seq order.
    pub(super) async fn outbox_entries(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        let mut out = self
            .scan_all(&self.tables.outbox, None)
            .await?
            .iter()
            .map(outbox_entry)
            .collect::<Result<Vec<_>, _>>()?;
        out.sort_by_key(|e| e.seq);
        Ok(out)
    }

    /// [`ExecutionStore::pending_spawns`](crate::ExecutionStore::pending_spawns): the whole
    /// table, every packed intent, in seq order.
    pub(super) async fn spawn_intents(&self) -> Result<Vec<SpawnEntry>, StoreError> {
        let mut out = self
            .scan_all(&self.tables.spawns, None)
            .await?
            .iter()
            .map(spawn_entries)
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect::<Vec<_>>();
        out.sort_by_key(|e| e.seq);
        Ok(out)
    }

    /// [`ExecutionStore::pending_rows_of`](crate::ExecutionStore::pending_rows_of): the rows
    /// of the block the execution item records, by key.
    pub(super) async fn last_block_rows(&self, id: &str) -> Result<PendingRows, StoreError> {
        let block = match self.get_execution_attributes(id, &[ROWS_ATTRIBUTE]).await? {
            Some(item) => Rows::of_item(&item, id)?,
            None => None,
        };
        let Some(block) = block else {
            return Ok(PendingRows::default());
        };
        let spawns: Vec<i64> = block.spawn_seqs().collect();
        let outbox: Vec<i64> = block.outbox_seqs().collect();
        self.rows_by_seq(&spawns, &outbox).await
    }

    /// Ack an outbox or spawn entry: delete it by its `seq` key.
    pub(super) async fn delete_by_seq(&self, table: &str, seq: i64) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(table)
            .key("seq", n_i64(seq))
            .send()
            .await
            .map_err(|e| sdk_error("DeleteItem", e))?;
        Ok(())
    }

    /// Every item of `table` (all pages), consistent, optionally filtered.
    pub(super) async fn scan_all(
        &self,
        table: &str,
        filter: Option<(&str, &str, AttributeValue)>,
    ) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut req = self
                .client
                .scan()
                .table_name(table)
                .consistent_read(true)
                .set_exclusive_start_key(start);
            if let Some((expr, name, value)) = &filter {
                req = req
                    .filter_expression(*expr)
                    .expression_attribute_values(*name, value.clone());
            }
            let out = req.send().await.map_err(|e| sdk_error("Scan", e))?;
            items.extend(out.items().iter().cloned());
            match out.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(items),
            }
        }
    }
}

/// The outbox entry in `item`.
fn outbox_entry(item: &Item) -> Result<OutboxEntry, StoreError> {
    let seq = req_i64(item, "seq", "outbox item")?;
    let what = format!("outbox item {seq}");
    let event = Event::from_json(req_s(item, "event", &what)?)
        .map_err(|e| corrupt(what.clone(), Corruption::Record(e)))?;
    Ok(OutboxEntry {
        seq,
        target_id: get_s(item, "target_id").map(str::to_string),
        event,
        trace_context: get_s(item, TRACE_CONTEXT_ATTRIBUTE).map(str::to_string),
    })
}

/// The spawn intents in `item`: its own, then those packed after it
/// ([`MORE_SPAWNS_ATTRIBUTE`]), all with its seq.
fn spawn_entries(item: &Item) -> Result<Vec<SpawnEntry>, StoreError> {
    let seq = req_i64(item, "seq", "spawn item")?;
    let what = format!("spawn item {seq}");
    let parent_id = req_s(item, "parent_id", &what)?.to_string();
    let trace_context = get_s(item, TRACE_CONTEXT_ATTRIBUTE).map(str::to_string);
    let context = |text: &str| {
        pyjson::loads_object(text, "a spawn's context").map_err(|source| {
            corrupt(
                what.clone(),
                Corruption::Json {
                    attribute: None,
                    source,
                },
            )
        })
    };
    let mut entries = vec![SpawnEntry {
        seq,
        parent_id: parent_id.clone(),
        child_id: req_s(item, "child_id", &what)?.to_string(),
        root_path: req_s(item, "root_path", &what)?.to_string(),
        context: context(req_s(item, "context", &what)?)?,
        trace_context: trace_context.clone(),
    }];
    if let Some(more) = get_s(item, MORE_SPAWNS_ATTRIBUTE) {
        let bad = |problem| malformed(what.clone(), MORE_SPAWNS_ATTRIBUTE, problem);
        let json = pyjson::loads(more).map_err(|source| {
            corrupt(
                what.clone(),
                Corruption::Json {
                    attribute: Some(MORE_SPAWNS_ATTRIBUTE),
                    source,
                },
            )
        })?;
        let Value::Array(list) = json else {
            return Err(bad(Malformation::NotList));
        };
        for intent in list {
            let Value::Array(parts) = intent else {
                return Err(bad(Malformation::IntentNotList));
            };
            let [Value::String(child_id), Value::String(root_path), Value::String(ctx)] = &parts[..] else {
                return Err(bad(Malformation::NotIntent));
            };
            entries.push(SpawnEntry {
                seq,
                parent_id: parent_id.clone(),
                child_id: child_id.clone(),
                root_path: root_path.clone(),
                context: context(ctx)?,
                trace_context: trace_context.clone(),
            });
        }
    }
    Ok(entries)
}
