//! The [`ExecutionStore`] implementation of [`DynamoDbStore`], over the other parts.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::KeysAndAttributes;
use base64::Engine as _;
use stm_core::{Event, Execution, Map, Value};

use super::commit::Attempt;
use super::item::{
    self, corrupt, get_i64, get_s, key_from_typed_json, key_to_typed_json, n_f64, n_i64, req_i64, req_s, s,
    Item,
};
use super::recent::Recent;
use super::rows::{self, Rows, ROWS_ATTRIBUTE};
use super::{
    build_err, random_u64, sdk_error, DynamoDbStore, COMMIT_TOKEN_ATTRIBUTE, MAX_BATCH_GET_KEYS,
    MAX_ITEM_BYTES, RECENT_ATTRIBUTE, TRACE_IDX_ATTRIBUTE,
};
use crate::{
    Commit, DueTimer, ExecutionPage, ExecutionStore, ListQuery, OutboxEntry, PendingRows, PendingSeq,
    SpawnEntry, StoreError, TimerClaim, Written,
};
use stm_core::pyjson;

impl DynamoDbStore {
    /// Ack an outbox or spawn entry: delete it by its `seq` key.
    async fn delete_by_seq(&self, table: &str, seq: i64) -> Result<(), StoreError> {
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
        filter: Option<(&str, &str, aws_sdk_dynamodb::types::AttributeValue)>,
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

    /// The execution in `item`, and (on the item layout) its processed window, both
    /// remembered as the hint for a commit from this version.
    fn parse_execution(&self, item: &Item, id: &str) -> Result<(Execution, Option<Recent>), StoreError> {
        let data = req_s(item, "data", &format!("execution {id}"))?;
        let exe =
            Execution::from_json(data).map_err(|e| corrupt(format!("execution {id}"), e.to_string()))?;
        // the Table layout ignores the attribute: it is the item layout's alone
        let window = if self.on_item() {
            Recent::of_item(item, id)?
        } else {
            None
        };
        let continued = self
            .on_item()
            .then(|| window.clone().unwrap_or_else(Recent::carried_over));
        let rows = Rows::of_item(item, id)?;
        self.remember_hint(
            id,
            exe.version,
            get_i64(item, TRACE_IDX_ATTRIBUTE),
            continued,
            rows,
        );
        Ok((exe, window))
    }

    /// What a load projects from the execution item.
    fn load_attributes(&self) -> &'static [&'static str] {
        if self.on_item() {
            &["data", TRACE_IDX_ATTRIBUTE, ROWS_ATTRIBUTE, RECENT_ATTRIBUTE]
        } else {
            &["data", TRACE_IDX_ATTRIBUTE, ROWS_ATTRIBUTE]
        }
    }

    /// One `BatchGetItem` of `request` (strongly consistent keys), its unprocessed keys
    /// re-sent with the store's backoff: the items found, by table.
    pub(super) async fn batch_get(
        &self,
        mut request: HashMap<String, KeysAndAttributes>,
    ) -> Result<HashMap<String, Vec<Item>>, StoreError> {
        let mut found: HashMap<String, Vec<Item>> = HashMap::new();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let out = self
                .client
                .batch_get_item()
                .set_request_items(Some(request))
                .send()
                .await
                .map_err(|e| sdk_error("BatchGetItem", e))?;
            if let Some(responses) = out.responses() {
                for (table, items) in responses {
                    found
                        .entry(table.clone())
                        .or_default()
                        .extend(items.iter().cloned());
                }
            }
            match out.unprocessed_keys() {
                Some(rest) if !rest.is_empty() => {
                    let pause = self.retry.backoff(attempt);
                    if attempt >= self.retry.max_attempts.max(1)
                        || !crate::aws::time_for(pause + crate::aws::OPERATION_TIMEOUT)
                    {
                        return Err(StoreError::retryable(format!(
                            "BatchGetItem left keys unprocessed after {attempt} attempts"
                        )));
                    }
                    tokio::time::sleep(pause).await;
                    request = rest.clone();
                }
                _ => return Ok(found),
            }
        }
    }

    /// The `processed` table's keys of `event_ids` (distinct) for execution `id`.
    fn marks_request(&self, id: &str, event_ids: &[&str]) -> Result<Option<KeysAndAttributes>, StoreError> {
        // BatchGetItem refuses the same key twice in one request
        let mut distinct: Vec<&str> = Vec::with_capacity(event_ids.len());
        for event_id in event_ids {
            if !distinct.contains(event_id) {
                distinct.push(event_id);
            }
        }
        if distinct.is_empty() {
            return Ok(None);
        }
        let mut marks = KeysAndAttributes::builder()
            .projection_expression("event_id")
            .consistent_read(true);
        for event_id in &distinct {
            marks = marks.keys(Self::processed_key(id, event_id));
        }
        marks.build().map(Some).map_err(build_err)
    }

    /// The event ids of the marks found in `found` (a [`batch_get`](Self::batch_get)).
    fn found_marks(&self, found: &HashMap<String, Vec<Item>>) -> Vec<String> {
        found
            .get(&self.tables.processed)
            .into_iter()
            .flatten()
            .filter_map(|m| get_s(m, "event_id").map(str::to_string))
            .collect()
    }

    /// [`DedupeMarks::OnItem`](super::DedupeMarks::OnItem)'s load: one strongly
    /// consistent `GetItem`; the table is asked only for the events the item's window
    /// cannot answer (an item without a window, or one carried over from the table
    /// layout that is not full yet, see `recent`).
    async fn load_on_item(
        &self,
        id: &str,
        event_ids: &[&str],
    ) -> Result<(Option<Execution>, Vec<bool>), StoreError> {
        let Some(item) = self.get_execution_attributes(id, self.load_attributes()).await? else {
            // no execution: its events are dropped whatever was processed
            return Ok((None, vec![false; event_ids.len()]));
        };
        let (exe, window) = self.parse_execution(&item, id)?;
        let mut processed: Vec<bool> = event_ids
            .iter()
            .map(|e| window.as_ref().is_some_and(|w| w.contains(e)))
            .collect();
        if window.as_ref().is_none_or(|w| w.table) {
            let unknown: Vec<&str> = event_ids
                .iter()
                .zip(&processed)
                .filter(|(_, p)| !**p)
                .map(|(e, _)| *e)
                .collect();
            if let Some(marks) = self.marks_request(id, &unknown)? {
                let found = self
                    .batch_get(HashMap::from([(self.tables.processed.clone(), marks)]))
                    .await?;
                let found = self.found_marks(&found);
                for (e, p) in event_ids.iter().zip(processed.iter_mut()) {
                    *p = *p || found.iter().any(|f| f == e);
                }
            }
        }
        Ok((Some(exe), processed))
    }

    /// What a commit from version `old` of `id` carries over from the stored item: the
    /// processed window it continues ([`DedupeMarks::OnItem`] only) and the rows block the
    /// next one follows. Read (one `GetItem` of both) only when no load of this store left
    /// them as a hint. A missing item or one at another version gives what the commit's CAS
    /// will refuse anyway.
    async fn carried_over(&self, id: &str, old: i64) -> Result<(Option<Recent>, Option<Rows>), StoreError> {
        let on_item = self.on_item();
        if old == 0 {
            return Ok((on_item.then(Recent::default), None));
        }
        let window = on_item.then(|| self.recent_hint(id, old));
        if let (Some(rows), None | Some(Some(_))) = (self.rows_hint(id, old), &window) {
            return Ok((window.flatten(), rows));
        }
        let attributes: &[&str] = if on_item {
            &[RECENT_ATTRIBUTE, ROWS_ATTRIBUTE]
        } else {
            &[ROWS_ATTRIBUTE]
        };
        let Some(item) = self.get_execution_attributes(id, attributes).await? else {
            return Ok((on_item.then(Recent::default), None));
        };
        let window = if on_item {
            Some(Recent::of_item(&item, id)?.unwrap_or_else(Recent::carried_over))
        } else {
            None
        };
        Ok((window, Rows::of_item(&item, id)?))
    }

    /// The `processed` table's answer for one event (a consistent `GetItem`).
    async fn marked_in_table(&self, id: &str, event_id: &str) -> Result<bool, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.processed)
            .set_key(Some(Self::processed_key(id, event_id)))
            .projection_expression("execution_id")
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem", e))?;
        Ok(out.item().is_some())
    }
}

#[async_trait]
impl ExecutionStore for DynamoDbStore {
    async fn load(&self, id: &str) -> Result<Option<Execution>, StoreError> {
        let item = self.get_execution_attributes(id, self.load_attributes()).await?;
        Ok(item
            .map(|item| self.parse_execution(&item, id))
            .transpose()?
            .map(|(exe, _)| exe))
    }

    async fn load_for_event(
        &self,
        id: &str,
        event_id: &str,
    ) -> Result<(Option<Execution>, bool), StoreError> {
        let (exe, marks) = self.load_for_events(id, &[event_id]).await?;
        Ok((exe, marks.first().copied().unwrap_or(false)))
    }

    async fn load_for_events(
        &self,
        id: &str,
        event_ids: &[&str],
    ) -> Result<(Option<Execution>, Vec<bool>), StoreError> {
        // one BatchGetItem reads at most 100 keys: the execution and 99 marks; a longer
        // burst is not formed (the worker's batches hold at most 10 records)
        if event_ids.len() >= MAX_BATCH_GET_KEYS {
            return Err(StoreError::backend(format!(
                "load_for_events: {} event ids for {id}, over the {} marks one BatchGetItem reads",
                event_ids.len(),
                MAX_BATCH_GET_KEYS - 1
            )));
        }
        if self.on_item() {
            return self.load_on_item(id, event_ids).await;
        }
        let exe_keys = KeysAndAttributes::builder()
            .keys(HashMap::from([("id".to_string(), s(id))]))
            .projection_expression("#d, #ti")
            .expression_attribute_names("#d", "data")
            .expression_attribute_names("#ti", TRACE_IDX_ATTRIBUTE)
            .consistent_read(true)
            .build()
            .map_err(build_err)?;
        let mut request = HashMap::from([(self.tables.executions.clone(), exe_keys)]);
        if let Some(marks) = self.marks_request(id, event_ids)? {
            request.insert(self.tables.processed.clone(), marks);
        }
        let found = self.batch_get(request).await?;
        let exe_item = found.get(&self.tables.executions).and_then(|items| items.first());
        let exe = exe_item
            .map(|item| self.parse_execution(item, id))
            .transpose()?
            .map(|(exe, _)| exe);
        let found = self.found_marks(&found);
        let processed = event_ids.iter().map(|e| found.iter().any(|f| f == e)).collect();
        Ok((exe, processed))
    }

    fn check_commit(&self, exe: &Execution, commit: &Commit) -> Result<(), StoreError> {
        // Called for each step of a burst: the execution is serialized only when the side
        // items leave too little room for an execution item of the largest size (its own
        // limit is checked at the commit, exactly, as for any commit).
        let side = self.prepare(String::new(), commit);
        if self.check_side_items(exe, &side, MAX_ITEM_BYTES).is_ok() {
            return Ok(());
        }
        // `data` at the current version: the new one is at most one digit longer
        let exe_bytes = self.execution_put_bytes(exe, &exe.to_json(), exe.version + 1) + 1;
        self.check_side_items(exe, &side, exe_bytes)
    }

    async fn commit(&self, exe: &mut Execution, commit: Commit) -> Result<Written, StoreError> {
        let old = exe.version;
        let new = old + 1;
        exe.version = new;
        let data = exe.to_json();
        exe.version = old;
        let mut prepared = self.prepare(data, &commit);
        self.check_limits(exe, &prepared, new)?;
        let (window, previous_rows) = self.carried_over(&exe.id, old).await?;
        // on the item layout the marks ride in the execution put: the window it held, plus
        // this commit's
        prepared.recent = window.map(|previous| previous.with(&prepared.processed));
        // the rows' block follows the execution's last one (see `rows`); the item keeps
        // recording the last block through commits that write no rows
        let next_block = |floor: Option<i64>| {
            let (events, spawns) = (prepared.events.len(), prepared.spawn_rows.len());
            (events + spawns > 0).then(|| Rows::next(floor, events, spawns, rows::now_millis(), random_u64()))
        };
        let mut block = next_block(Rows::floor(previous_rows));

        let hint = self.hint(&exe.id, old).or(if old == 0 { Some(-1) } else { None });
        // the index of the commit's first trace step; the others follow it
        let mut trace_idx = match (prepared.trace_entries.is_empty(), hint) {
            (true, _) => None,
            (false, Some(last)) => Some(last + 1),
            (false, None) => Some(self.max_trace_idx(&exe.id).await? + 1),
        };
        // A new token (generation) for every request after one that was definitely refused;
        // the same request and token again after one that may have landed. Every token
        // sent is remembered: finding one of them on the stored item means that attempt
        // landed.
        let mut generation = 0u32;
        let mut stored_idx = prepared.last_trace_idx(trace_idx).or(hint);
        // the request for this block, trace slot and retry generation
        let plan_for =
            |block: Option<Rows>, trace_idx: Option<i64>, stored_idx: Option<i64>, generation: u32| {
                self.plan(
                    exe,
                    &prepared,
                    old,
                    block,
                    previous_rows,
                    trace_idx,
                    stored_idx,
                    generation,
                )
            };
        let mut plan = plan_for(block, trace_idx, stored_idx, generation)?;
        let mut tokens_sent: Vec<String> = Vec::new();
        let mut attempt = 0u32;
        let mut slot_retries = 0u32;
        let mut seq_retries = 0u32;
        loop {
            attempt += 1;
            if !tokens_sent.contains(&plan.token) {
                tokens_sent.push(plan.token.clone());
            }
            match self.send_commit(&plan).await {
                Attempt::Done => break,
                Attempt::Conflict(stored) => {
                    let stored = match stored {
                        Some(item) => Some(item),
                        None => self.stored_version(&exe.id).await?,
                    };
                    let found = stored.as_ref().and_then(|i| get_i64(i, "version"));
                    let token = stored.as_ref().and_then(|i| get_s(i, COMMIT_TOKEN_ATTRIBUTE));
                    if found == Some(new) && token.is_some_and(|t| tokens_sent.iter().any(|s| s == t)) {
                        // an earlier attempt of this very commit landed (its answer was lost)
                        break;
                    }
                    self.forget_hint(&exe.id);
                    return Err(StoreError::Conflict {
                        id: exe.id.clone(),
                        expected: old,
                        found,
                    });
                }
                Attempt::TraceSlotTaken if slot_retries < 3 => {
                    // a stale trace_idx: read the real end of the trace and try again
                    slot_retries += 1;
                    attempt -= 1;
                    trace_idx = Some(self.max_trace_idx(&exe.id).await? + 1);
                    stored_idx = prepared.last_trace_idx(trace_idx);
                    generation += 1;
                    plan = plan_for(block, trace_idx, stored_idx, generation)?;
                }
                Attempt::TraceSlotTaken => {
                    return Err(StoreError::backend(format!(
                        "the trace slot of {} stayed taken after {slot_retries} re-reads",
                        exe.id
                    )))
                }
                Attempt::SeqTaken if seq_retries < 5 => {
                    // another commit's block met ours (same millisecond, same random bits):
                    // nothing was written; a new block
                    seq_retries += 1;
                    attempt -= 1;
                    let floor = block.map(|b| b.floor_after_collision(random_u64()));
                    block = next_block(floor);
                    generation += 1;
                    plan = plan_for(block, trace_idx, stored_idx, generation)?;
                }
                Attempt::SeqTaken => {
                    return Err(StoreError::retryable(format!(
                        "the seqs of {}'s rows were taken {seq_retries} times in a row",
                        exe.id
                    )))
                }
                Attempt::Retry { msg, maybe_applied } => {
                    if attempt >= self.retry.max_attempts.max(1) {
                        return Err(StoreError::retryable(format!("{msg} (after {attempt} attempts)")));
                    }
                    let pause = self.retry.backoff(attempt);
                    if !crate::aws::time_for(pause + crate::aws::OPERATION_TIMEOUT) {
                        // another attempt could outlast the invocation: SQS redelivers
                        // the record instead, with all its time
                        return Err(StoreError::retryable(format!(
                            "{msg} (after {attempt} attempts; no time for another before the \
                             invocation's deadline)"
                        )));
                    }
                    tracing::debug!(id = %exe.id, attempt, %msg, maybe_applied, "transient commit failure, retrying");
                    tokio::time::sleep(pause).await;
                    if !maybe_applied {
                        generation += 1;
                        plan = plan_for(block, trace_idx, stored_idx, generation)?;
                    }
                }
                Attempt::Fail(err) => return Err(err),
            }
        }
        exe.version = new;
        self.remember_hint(&exe.id, new, stored_idx, prepared.recent, block.or(previous_rows));
        // each intent's seq is its row's (a packed row holds several)
        Ok(block.map_or_else(Written::default, |b| Written {
            outbox: b.outbox_seqs().collect(),
            spawns: b
                .spawn_seqs()
                .zip(&prepared.spawn_rows)
                .flat_map(|(seq, row)| std::iter::repeat_n(seq, row.len()))
                .collect(),
        }))
    }

    async fn is_processed(&self, id: &str, event_id: &str) -> Result<bool, StoreError> {
        if !self.on_item() {
            return self.marked_in_table(id, event_id).await;
        }
        let Some(item) = self
            .get_execution_attributes(id, &["id", RECENT_ATTRIBUTE])
            .await?
        else {
            return Ok(false);
        };
        match Recent::of_item(&item, id)? {
            Some(window) if window.contains(event_id) => Ok(true),
            Some(window) if !window.table => Ok(false),
            // no window, or one that may not reach back to what the table remembers
            _ => self.marked_in_table(id, event_id).await,
        }
    }

    async fn list_executions(&self, query: &ListQuery) -> Result<ExecutionPage, StoreError> {
        let limit = if query.limit == 0 { 100 } else { query.limit };
        let mut start: Option<Item> = None;
        if let Some(cursor) = query.cursor.as_deref().filter(|c| !c.is_empty()) {
            let bad = || StoreError::backend(format!("bad list cursor {cursor:?}"));
            let raw = base64::engine::general_purpose::URL_SAFE
                .decode(cursor)
                .map_err(|_| bad())?;
            let text = String::from_utf8(raw).map_err(|_| bad())?;
            if let Ok(offset) = text.trim().parse::<usize>() {
                return self.list_by_offset(query, offset, limit).await; // a harel 0.9.0 cursor
            }
            let json: Value = pyjson::loads(&text).map_err(|_| bad())?;
            start = Some(key_from_typed_json(&json).ok_or_else(bad)?);
        }
        let encode = |key: &Item| {
            let typed = pyjson::dumps(&key_to_typed_json(key));
            base64::engine::general_purpose::URL_SAFE.encode(typed)
        };
        let mut items = Vec::new();
        loop {
            // examine a reasonable batch per call; a page cut short mid-batch resumes after
            // its last item (a key is a valid ExclusiveStartKey), so no match is skipped
            let examine = (limit - items.len()).max(100).min(i32::MAX as usize) as i32;
            let (found, next) = self.list_scan(query, start.take(), Some(examine)).await?;
            let mut found = found.into_iter();
            while let Some((key, summary)) = found.next() {
                items.push(summary);
                if items.len() == limit {
                    let more = found.len() > 0 || next.is_some();
                    let next_cursor = more.then(|| encode(&key));
                    return Ok(ExecutionPage { items, next_cursor });
                }
            }
            match next {
                Some(key) => start = Some(key),
                None => {
                    return Ok(ExecutionPage {
                        items,
                        next_cursor: None,
                    })
                }
            }
        }
    }

    async fn pending_outbox(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        let mut out = self
            .scan_all(&self.tables.outbox, None)
            .await?
            .iter()
            .map(outbox_entry)
            .collect::<Result<Vec<_>, _>>()?;
        out.sort_by_key(|e| e.seq);
        Ok(out)
    }

    async fn ack_outbox(&self, seq: i64) -> Result<(), StoreError> {
        self.delete_by_seq(&self.tables.outbox, seq).await
    }

    async fn pending_spawns(&self) -> Result<Vec<SpawnEntry>, StoreError> {
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

    async fn ack_spawn(&self, seq: i64) -> Result<(), StoreError> {
        self.delete_by_seq(&self.tables.spawns, seq).await
    }

    async fn pending_rows_of(&self, id: &str) -> Result<PendingRows, StoreError> {
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

    async fn oldest_pending_seqs(
        &self,
        limit: usize,
        settled_before: f64,
    ) -> Result<Vec<PendingSeq>, StoreError> {
        self.lowest_pending_seqs(limit, settled_before).await
    }

    async fn pending_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<PendingRows, StoreError> {
        self.rows_by_seq(spawns, outbox).await
    }

    async fn ack_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<(), StoreError> {
        self.delete_rows(spawns, outbox).await
    }

    /// The due index, and the full scan when scheduled (see [`due`](super::due)).
    async fn due_timers(&self, now: f64) -> Result<Vec<DueTimer>, StoreError> {
        Ok(self.due_timers_with_stats(now).await?.0)
    }

    async fn delete_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<(), StoreError> {
        // the same guarded delete: a timer re-scheduled (or already gone) since the sweep
        // read it is left
        n_f64("fire_at", fire_at)?;
        self.claim_timer(id, path, fire_at).await.map(|_| ())
    }

    async fn purge(&self, id: &str, expected_version: i64) -> Result<bool, StoreError> {
        self.purge_execution(id, expected_version).await
    }

    async fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.scan_ids_with_prefixes(&[prefix.to_string()]).await
    }

    async fn ids_with_any_prefix(&self, prefixes: &[String]) -> Result<Vec<String>, StoreError> {
        self.scan_ids_with_prefixes(prefixes).await
    }

    async fn armed_timer(&self, id: &str, path: &str) -> Result<Option<f64>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.timers)
            .key("execution_id", s(id))
            .key("path", s(path))
            .projection_expression("fire_at")
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem", e))?;
        match out.item() {
            None => Ok(None),
            Some(item) => item::get_f64(item, "fire_at")
                .map(Some)
                .ok_or_else(|| corrupt(format!("timer {id}/{path}"), "no number `fire_at`")),
        }
    }

    /// The guarded delete of [`delete_timer`](ExecutionStore::delete_timer), returning the
    /// item when the guard fails (`ReturnValuesOnConditionCheckFailure = ALL_OLD`): the
    /// worker's role may delete timers but not read them, and the answer is decided by the
    /// same write that consumes the timer.
    async fn claim_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<TimerClaim, StoreError> {
        use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
        use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
        // a number DynamoDB cannot hold is no armed timer's `fire_at`: nothing to compare
        let Ok(value) = n_f64("fire_at", fire_at) else {
            return Ok(TimerClaim::Unknown);
        };
        let result = self
            .client
            .delete_item()
            .table_name(&self.tables.timers)
            .key("execution_id", s(id))
            .key("path", s(path))
            .condition_expression("fire_at = :f")
            .expression_attribute_values(":f", value)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(TimerClaim::Claimed),
            Err(err) => {
                if let Some(DeleteItemError::ConditionalCheckFailedException(failed)) = err.as_service_error()
                {
                    return match failed.item() {
                        None => Ok(TimerClaim::Absent),
                        Some(item) => item::get_f64(item, "fire_at")
                            .map(TimerClaim::Rearmed)
                            .ok_or_else(|| corrupt(format!("timer {id}/{path}"), "no number `fire_at`")),
                    };
                }
                Err(sdk_error("DeleteItem", err))
            }
        }
    }

    async fn read_trace(&self, id: &str) -> Result<Vec<Map>, StoreError> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.tables.trace)
                .key_condition_expression("execution_id = :e")
                .expression_attribute_values(":e", s(id))
                .scan_index_forward(true)
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| sdk_error("Query", e))?;
            for item in page.items() {
                let idx = req_i64(item, "idx", "trace item")?;
                let what = format!("trace step {idx} of {id}");
                let mut entry = pyjson::loads_object(req_s(item, "entry", &what)?, "a trace entry")
                    .map_err(|e| corrupt(what.clone(), e.to_string()))?;
                entry.insert("index".into(), Value::from(idx));
                out.push(entry);
            }
            match page.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(out),
            }
        }
    }

    async fn append_trace(&self, id: &str, entry: Map) -> Result<(), StoreError> {
        let idx = match entry.get("index").and_then(Value::as_i64) {
            Some(idx) => idx,
            None => self.max_trace_idx(id).await? + 1,
        };
        let mut put = self
            .client
            .put_item()
            .table_name(&self.tables.trace)
            .item("execution_id", s(id))
            .item("idx", n_i64(idx))
            .item("entry", s(pyjson::dumps(&Value::Object(entry))));
        if let Some(ttl) = self.trace_ttl_value() {
            put = put.item(super::schema::TTL_ATTRIBUTE, n_i64(ttl));
        }
        put.send().await.map_err(|e| sdk_error("PutItem", e))?;
        // the execution item's trace_idx no longer says where the trace ends: drop it, so the
        // next traced commit reads the max (harel's appender cannot do this; the guarded
        // trace put covers it)
        self.forget_trace_hint(id);
        let dropped = self
            .client
            .update_item()
            .table_name(&self.tables.executions)
            .key("id", s(id))
            .update_expression("REMOVE #ti")
            .condition_expression("attribute_exists(#ti)")
            .expression_attribute_names("#ti", TRACE_IDX_ATTRIBUTE)
            .send()
            .await;
        match dropped {
            Ok(_) => {}
            Err(err) if err.code() == Some("ConditionalCheckFailedException") => {}
            Err(err) => return Err(sdk_error("UpdateItem", err)),
        }
        let max = self.trace_max as i64;
        if max > 0 && idx - max >= 0 {
            self.client
                .delete_item()
                .table_name(&self.tables.trace)
                .key("execution_id", s(id))
                .key("idx", n_i64(idx - max))
                .send()
                .await
                .map_err(|e| sdk_error("DeleteItem", e))?;
        }
        Ok(())
    }
}

/// The outbox entry in `item`.
pub(super) fn outbox_entry(item: &Item) -> Result<OutboxEntry, StoreError> {
    let seq = req_i64(item, "seq", "outbox item")?;
    let what = format!("outbox item {seq}");
    let event =
        Event::from_json(req_s(item, "event", &what)?).map_err(|e| corrupt(what.clone(), e.to_string()))?;
    Ok(OutboxEntry {
        seq,
        target_id: get_s(item, "target_id").map(str::to_string),
        event,
    })
}

/// The spawn intents in `item`: its own, then those packed after it
/// ([`MORE_SPAWNS_ATTRIBUTE`](super::commit::MORE_SPAWNS_ATTRIBUTE)), all with its seq.
pub(super) fn spawn_entries(item: &Item) -> Result<Vec<SpawnEntry>, StoreError> {
    let seq = req_i64(item, "seq", "spawn item")?;
    let what = format!("spawn item {seq}");
    let parent_id = req_s(item, "parent_id", &what)?.to_string();
    let context = |text: &str| {
        pyjson::loads_object(text, "a spawn's context").map_err(|e| corrupt(what.clone(), e.to_string()))
    };
    let mut entries = vec![SpawnEntry {
        seq,
        parent_id: parent_id.clone(),
        child_id: req_s(item, "child_id", &what)?.to_string(),
        root_path: req_s(item, "root_path", &what)?.to_string(),
        context: context(req_s(item, "context", &what)?)?,
    }];
    if let Some(more) = get_s(item, super::commit::MORE_SPAWNS_ATTRIBUTE) {
        let bad = |reason: &str| corrupt(what.clone(), format!("`more_spawns` {reason}"));
        let Value::Array(list) = pyjson::loads(more).map_err(|e| bad(&e.to_string()))? else {
            return Err(bad("is not a list"));
        };
        for intent in list {
            let Value::Array(parts) = intent else {
                return Err(bad("holds an intent that is not a list"));
            };
            let [Value::String(child_id), Value::String(root_path), Value::String(ctx)] = &parts[..] else {
                return Err(bad("holds an intent that is not [child_id, root_path, context]"));
            };
            entries.push(SpawnEntry {
                seq,
                parent_id: parent_id.clone(),
                child_id: child_id.clone(),
                root_path: root_path.clone(),
                context: context(ctx)?,
            });
        }
    }
    Ok(entries)
}
