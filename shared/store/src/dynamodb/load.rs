//! The reads of an execution: the item (its data, and what a commit from its version
//! continues, remembered as the hint), with the processed marks of the events it is asked
//! about in the same round trip where the layout allows, and `is_processed`.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::KeysAndAttributes;
use stm_core::Execution;

use super::item::{corrupt, get_i64, get_s, req_s, s, Item};
use super::recent::Recent;
use super::rows::{Rows, ROWS_ATTRIBUTE};
use super::schema::{STATE_KEY_ATTRIBUTE, STATE_SINCE_ATTRIBUTE};
use super::{build_err, sdk_error, DynamoDbStore, MAX_BATCH_GET_KEYS, RECENT_ATTRIBUTE, TRACE_IDX_ATTRIBUTE};
use crate::states::StateEntry;
use crate::{Corruption, StoreError};

impl DynamoDbStore {
    /// [`ExecutionStore::load`](crate::ExecutionStore::load): one consistent `GetItem`.
    pub(super) async fn load_execution(&self, id: &str) -> Result<Option<Execution>, StoreError> {
        let item = self.get_execution_attributes(id, self.load_attributes()).await?;
        Ok(item
            .map(|item| self.parse_execution(&item, id))
            .transpose()?
            .map(|(exe, _)| exe))
    }

    /// [`ExecutionStore::load_for_events`](crate::ExecutionStore::load_for_events): one
    /// `BatchGetItem` of the execution and the marks (the item layout: one `GetItem`).
    pub(super) async fn load_with_marks(
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
            // everything a commit from this version carries over: the hint records it
            .projection_expression("#d, #ti, #r, #sk, #ss")
            .expression_attribute_names("#d", "data")
            .expression_attribute_names("#ti", TRACE_IDX_ATTRIBUTE)
            .expression_attribute_names("#r", ROWS_ATTRIBUTE)
            .expression_attribute_names("#sk", STATE_KEY_ATTRIBUTE)
            .expression_attribute_names("#ss", STATE_SINCE_ATTRIBUTE)
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

    /// [`ExecutionStore::is_processed`](crate::ExecutionStore::is_processed): the table's
    /// mark, or on the item layout the item's window first.
    pub(super) async fn processed(&self, id: &str, event_id: &str) -> Result<bool, StoreError> {
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

    /// The execution in `item`, and (on the item layout) its processed window, both
    /// remembered as the hint for a commit from this version.
    fn parse_execution(&self, item: &Item, id: &str) -> Result<(Execution, Option<Recent>), StoreError> {
        let data = req_s(item, "data", &format!("execution {id}"))?;
        let exe = Execution::from_json(data)
            .map_err(|e| corrupt(format!("execution {id}"), Corruption::Record(e)))?;
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
            StateEntry::of_item(item),
        );
        Ok((exe, window))
    }

    /// What a load projects from the execution item.
    fn load_attributes(&self) -> &'static [&'static str] {
        if self.on_item() {
            &[
                "data",
                TRACE_IDX_ATTRIBUTE,
                ROWS_ATTRIBUTE,
                STATE_KEY_ATTRIBUTE,
                STATE_SINCE_ATTRIBUTE,
                RECENT_ATTRIBUTE,
            ]
        } else {
            &[
                "data",
                TRACE_IDX_ATTRIBUTE,
                ROWS_ATTRIBUTE,
                STATE_KEY_ATTRIBUTE,
                STATE_SINCE_ATTRIBUTE,
            ]
        }
    }

    /// One `BatchGetItem` of `request` (strongly consistent keys), its unprocessed keys
    /// re-sent: the items found, by table.
    ///
    /// An answer that read some keys and left others is progress, not a failure: DynamoDB
    /// stops at 16 MB (or 1 MB a partition) of items, and large rows fill that with fewer
    /// than 100 keys. So the rest is asked again at once, and only an answer that read
    /// nothing (throttled) spends one of the store's attempts and waits its backoff.
    pub(super) async fn batch_get(
        &self,
        mut request: HashMap<String, KeysAndAttributes>,
    ) -> Result<HashMap<String, Vec<Item>>, StoreError> {
        let mut found: HashMap<String, Vec<Item>> = HashMap::new();
        let mut attempt = 0;
        loop {
            let mut read = 0usize;
            let out = self
                .client
                .batch_get_item()
                .set_request_items(Some(request))
                .send()
                .await
                .map_err(|e| sdk_error("BatchGetItem", e))?;
            if let Some(responses) = out.responses() {
                for (table, items) in responses {
                    read += items.len();
                    found
                        .entry(table.clone())
                        .or_default()
                        .extend(items.iter().cloned());
                }
            }
            match out.unprocessed_keys() {
                Some(rest) if !rest.is_empty() => {
                    let unread: usize = rest.values().map(|k| k.keys().len()).sum();
                    if read > 0 {
                        tracing::debug!(read, unread, "BatchGetItem answered in part; asking the rest");
                    } else {
                        attempt += 1;
                        let pause = self.retry.backoff(attempt);
                        if attempt >= self.retry.max_attempts.max(1)
                            || !stm_aws::time_for(pause + stm_aws::OPERATION_TIMEOUT)
                        {
                            return Err(StoreError::retryable(format!(
                                "BatchGetItem read none of {unread} keys in {attempt} attempts"
                            )));
                        }
                        tokio::time::sleep(pause).await;
                    }
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
