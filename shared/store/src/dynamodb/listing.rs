//! `list_executions`: the pages and their cursors (harel's typed keys, and harel
//! 0.9.0's offsets), summaries, the query's filters and one call of the scan.

use std::collections::HashMap;

use base64::Engine as _;
use stm_core::{pyjson, Execution, Value};

use super::item::{corrupt, get_i64, key_from_typed_json, key_to_typed_json, req_s, s, Item};
use super::{sdk_error, DynamoDbStore};
use crate::{Corruption, ExecutionPage, ExecutionSummary, ListQuery, StoreError};

impl DynamoDbStore {
    /// [`ExecutionStore::list_executions`](crate::ExecutionStore::list_executions): scan
    /// until the page holds `limit` matches or the table ends; a harel 0.9.0 cursor pages
    /// by offset.
    pub(super) async fn list_page(&self, query: &ListQuery) -> Result<ExecutionPage, StoreError> {
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

    fn summary_of(&self, item: &Item) -> Result<ExecutionSummary, StoreError> {
        let data = req_s(item, "data", "execution (listing)")?;
        let exe =
            Execution::from_json(data).map_err(|e| corrupt("execution (listing)", Corruption::Record(e)))?;
        let mut summary = ExecutionSummary::of(&exe);
        summary.version = get_i64(item, "version").unwrap_or(0);
        Ok(summary)
    }

    fn matches(query: &ListQuery, s: &ExecutionSummary) -> bool {
        query.status.as_ref().is_none_or(|st| st.contains(&s.status))
            && query.definition_id.as_ref().is_none_or(|d| &s.definition_id == d)
            && (!query.roots_only || s.parent_id.is_none())
    }

    /// One Scan call of the listing (`limit` items examined at most): the matches, each
    /// with its key, and the scan's `LastEvaluatedKey`.
    pub(super) async fn list_scan(
        &self,
        query: &ListQuery,
        start: Option<Item>,
        limit: Option<i32>,
    ) -> Result<(Vec<(Item, ExecutionSummary)>, Option<Item>), StoreError> {
        let mut req = self
            .client
            .scan()
            .table_name(&self.tables.executions)
            .projection_expression("#id,#dat,#v")
            .expression_attribute_names("#id", "id")
            .expression_attribute_names("#dat", "data")
            .expression_attribute_names("#v", "version")
            .set_limit(limit)
            .set_exclusive_start_key(start);
        if let Some(def) = &query.definition_id {
            req = req
                .expression_attribute_names("#def", "definition_id")
                .filter_expression("#def = :def")
                .expression_attribute_values(":def", s(def));
        }
        let out = req.send().await.map_err(|e| sdk_error("Scan", e))?;
        let mut found = Vec::new();
        for item in out.items() {
            let summary = self.summary_of(item)?;
            if Self::matches(query, &summary) {
                let key = item
                    .get("id")
                    .cloned()
                    .map(|id| HashMap::from([("id".to_string(), id)]));
                found.push((key.unwrap_or_default(), summary));
            }
        }
        let next = out.last_evaluated_key().filter(|k| !k.is_empty()).cloned();
        Ok((found, next))
    }

    /// harel 0.9.0's listing for its own cursors: drain the scan, page by offset.
    pub(super) async fn list_by_offset(
        &self,
        query: &ListQuery,
        offset: usize,
        limit: usize,
    ) -> Result<ExecutionPage, StoreError> {
        let mut all = Vec::new();
        let mut start = None;
        loop {
            let (found, next) = self.list_scan(query, start, None).await?;
            all.extend(found.into_iter().map(|(_, summary)| summary));
            match next {
                Some(key) => start = Some(key),
                None => break,
            }
        }
        let items: Vec<_> = all.iter().skip(offset).take(limit).cloned().collect();
        let next_cursor = (offset + limit < all.len())
            .then(|| base64::engine::general_purpose::URL_SAFE.encode((offset + limit).to_string()));
        Ok(ExecutionPage { items, next_cursor })
    }
}
