//! The `Scan` calls behind `list_executions`: summaries, the query's filters, one page of
//! the scan, and harel 0.9.0's offset cursors.

use std::collections::HashMap;

use base64::Engine as _;
use stm_core::Execution;

use super::item::{corrupt, get_i64, req_s, s, Item};
use super::{sdk_error, DynamoDbStore};
use crate::{ExecutionPage, ExecutionSummary, ListQuery, StoreError};

impl DynamoDbStore {
    // ---- listing ----------------------------------------------------------------------

    fn summary_of(&self, item: &Item) -> Result<ExecutionSummary, StoreError> {
        let data = req_s(item, "data", "execution (listing)")?;
        let exe = Execution::from_json(data).map_err(|e| corrupt("execution (listing)", e.to_string()))?;
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
