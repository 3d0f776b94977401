//! The [`ExecutionStore`] implementation of [`DynamoDbStore`], over the other parts.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::KeysAndAttributes;
use base64::Engine as _;
use stm_core::{Event, Execution, Map, Value};

use super::commit::{collapse_timers, Attempt, Prepared};
use super::item::{
    self, corrupt, get_i64, get_s, key_from_typed_json, key_to_typed_json, n_f64, n_i64, req_i64, req_s, s,
    Item,
};
use super::{build_err, sdk_error, DynamoDbStore, COMMIT_TOKEN_ATTRIBUTE, TRACE_IDX_ATTRIBUTE};
use crate::{
    Commit, DueTimer, ExecutionPage, ExecutionStore, ListQuery, OutboxEntry, SpawnEntry, StoreError,
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

    fn parse_execution(&self, item: &Item, id: &str) -> Result<Execution, StoreError> {
        let data = req_s(item, "data", &format!("execution {id}"))?;
        let exe =
            Execution::from_json(data).map_err(|e| corrupt(format!("execution {id}"), e.to_string()))?;
        self.remember_hint(id, exe.version, get_i64(item, TRACE_IDX_ATTRIBUTE));
        Ok(exe)
    }
}

#[async_trait]
impl ExecutionStore for DynamoDbStore {
    async fn load(&self, id: &str) -> Result<Option<Execution>, StoreError> {
        let item = self
            .get_execution_attributes(id, &["data", TRACE_IDX_ATTRIBUTE])
            .await?;
        item.map(|item| self.parse_execution(&item, id)).transpose()
    }

    async fn load_for_event(
        &self,
        id: &str,
        event_id: &str,
    ) -> Result<(Option<Execution>, bool), StoreError> {
        let exe_keys = KeysAndAttributes::builder()
            .keys(HashMap::from([("id".to_string(), s(id))]))
            .projection_expression("#d, #ti")
            .expression_attribute_names("#d", "data")
            .expression_attribute_names("#ti", TRACE_IDX_ATTRIBUTE)
            .consistent_read(true)
            .build()
            .map_err(build_err)?;
        let mark_keys = KeysAndAttributes::builder()
            .keys(Self::processed_key(id, event_id))
            .projection_expression("execution_id")
            .consistent_read(true)
            .build()
            .map_err(build_err)?;
        let mut request = HashMap::from([
            (self.tables.executions.clone(), exe_keys),
            (self.tables.processed.clone(), mark_keys),
        ]);
        let mut exe_item: Option<Item> = None;
        let mut processed = false;
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
                if let Some(item) = responses
                    .get(&self.tables.executions)
                    .and_then(|items| items.first())
                {
                    exe_item = Some(item.clone());
                }
                processed |= responses
                    .get(&self.tables.processed)
                    .is_some_and(|items| !items.is_empty());
            }
            match out.unprocessed_keys() {
                Some(rest) if !rest.is_empty() => {
                    if attempt >= self.retry.max_attempts.max(1) {
                        return Err(StoreError::retryable(format!(
                            "BatchGetItem left keys unprocessed after {attempt} attempts"
                        )));
                    }
                    tokio::time::sleep(self.retry.backoff(attempt)).await;
                    request = rest.clone();
                }
                _ => break,
            }
        }
        let exe = exe_item.map(|item| self.parse_execution(&item, id)).transpose()?;
        Ok((exe, processed))
    }

    async fn commit(&self, exe: &mut Execution, commit: Commit) -> Result<Vec<i64>, StoreError> {
        let old = exe.version;
        let new = old + 1;
        exe.version = new;
        let data = exe.to_json();
        exe.version = old;
        let Commit {
            emits,
            processed_event_id,
            timers,
            spawns,
            trace,
        } = commit;
        let mut events = Vec::with_capacity(emits.len());
        for (target, event) in &emits {
            events.push((target.clone(), event.to_json()));
        }
        let prepared = Prepared {
            data,
            events,
            spawns: spawns
                .into_iter()
                .map(|sp| {
                    (
                        sp.child_id,
                        sp.root_path,
                        pyjson::dumps(&Value::Object(sp.context)),
                    )
                })
                .collect(),
            processed: processed_event_id,
            timers: collapse_timers(timers),
            trace_entry: trace.map(|t| pyjson::dumps(&Value::Object(t))),
        };
        self.check_limits(exe, &prepared, new)?;

        // seq blocks first (a block wasted by a cancelled transaction is harmless)
        let outbox_base = if prepared.events.is_empty() {
            0
        } else {
            self.next_seq("outbox", prepared.events.len()).await?
        };
        let spawn_base = if prepared.spawns.is_empty() {
            0
        } else {
            self.next_seq("spawn", prepared.spawns.len()).await?
        };

        let hint = self.hint(&exe.id, old).or(if old == 0 { Some(-1) } else { None });
        let mut trace_idx = match (&prepared.trace_entry, hint) {
            (None, _) => None,
            (Some(_), Some(last)) => Some(last + 1),
            (Some(_), None) => Some(self.max_trace_idx(&exe.id).await? + 1),
        };
        // A new token (generation) for every request after one that was definitely refused;
        // the same request and token again after one that may have landed. Every token
        // sent is remembered: finding one of them on the stored item means that attempt
        // landed.
        let mut generation = 0u32;
        let mut stored_idx = trace_idx.or(hint);
        let mut plan = self.plan(
            exe,
            &prepared,
            old,
            outbox_base,
            spawn_base,
            trace_idx,
            stored_idx,
            generation,
        )?;
        let mut tokens_sent: Vec<String> = Vec::new();
        let mut attempt = 0u32;
        let mut slot_retries = 0u32;
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
                    self.remember_hint(&exe.id, 0, None);
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
                    stored_idx = trace_idx;
                    generation += 1;
                    plan = self.plan(
                        exe,
                        &prepared,
                        old,
                        outbox_base,
                        spawn_base,
                        trace_idx,
                        stored_idx,
                        generation,
                    )?;
                }
                Attempt::TraceSlotTaken => {
                    return Err(StoreError::backend(format!(
                        "the trace slot of {} stayed taken after {slot_retries} re-reads",
                        exe.id
                    )))
                }
                Attempt::Retry { msg, maybe_applied } => {
                    if attempt >= self.retry.max_attempts.max(1) {
                        return Err(StoreError::retryable(format!("{msg} (after {attempt} attempts)")));
                    }
                    tracing::debug!(id = %exe.id, attempt, %msg, maybe_applied, "transient commit failure, retrying");
                    tokio::time::sleep(self.retry.backoff(attempt)).await;
                    if !maybe_applied {
                        generation += 1;
                        plan = self.plan(
                            exe,
                            &prepared,
                            old,
                            outbox_base,
                            spawn_base,
                            trace_idx,
                            stored_idx,
                            generation,
                        )?;
                    }
                }
                Attempt::Fail(err) => return Err(err),
            }
        }
        exe.version = new;
        self.remember_hint(&exe.id, new, stored_idx);
        Ok((0..prepared.events.len() as i64)
            .map(|i| outbox_base + i)
            .collect())
    }

    async fn is_processed(&self, id: &str, event_id: &str) -> Result<bool, StoreError> {
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
        let mut out = Vec::new();
        for item in self.scan_all(&self.tables.outbox, None).await? {
            let seq = req_i64(&item, "seq", "outbox item")?;
            let what = format!("outbox item {seq}");
            let event = Event::from_json(req_s(&item, "event", &what)?)
                .map_err(|e| corrupt(what.clone(), e.to_string()))?;
            out.push(OutboxEntry {
                seq,
                target_id: get_s(&item, "target_id").map(str::to_string),
                event,
            });
        }
        out.sort_by_key(|e| e.seq);
        Ok(out)
    }

    async fn ack_outbox(&self, seq: i64) -> Result<(), StoreError> {
        self.delete_by_seq(&self.tables.outbox, seq).await
    }

    async fn pending_spawns(&self) -> Result<Vec<SpawnEntry>, StoreError> {
        let mut out = Vec::new();
        for item in self.scan_all(&self.tables.spawns, None).await? {
            let seq = req_i64(&item, "seq", "spawn item")?;
            let what = format!("spawn item {seq}");
            let context = pyjson::loads_object(req_s(&item, "context", &what)?, "a spawn's context")
                .map_err(|e| corrupt(what.clone(), e.to_string()))?;
            out.push(SpawnEntry {
                seq,
                parent_id: req_s(&item, "parent_id", &what)?.to_string(),
                child_id: req_s(&item, "child_id", &what)?.to_string(),
                root_path: req_s(&item, "root_path", &what)?.to_string(),
                context,
            });
        }
        out.sort_by_key(|e| e.seq);
        Ok(out)
    }

    async fn ack_spawn(&self, seq: i64) -> Result<(), StoreError> {
        self.delete_by_seq(&self.tables.spawns, seq).await
    }

    /// The due index, and the full scan when scheduled (see [`due`](super::due)).
    async fn due_timers(&self, now: f64) -> Result<Vec<DueTimer>, StoreError> {
        Ok(self.due_timers_with_stats(now).await?.0)
    }

    async fn delete_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<(), StoreError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.tables.timers)
            .key("execution_id", s(id))
            .key("path", s(path))
            .condition_expression("fire_at = :f")
            .expression_attribute_values(":f", n_f64("fire_at", fire_at)?)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // re-scheduled (or already gone) since the sweep read it: leave it
            Err(err) if err.code() == Some("ConditionalCheckFailedException") => Ok(()),
            Err(err) => Err(sdk_error("DeleteItem", err)),
        }
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
        self.remember_hint(id, 0, None);
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
