//! The trace table's reads and writes outside a commit: the end of an execution's trace,
//! its steps read back, and a step appended (harel's `append_trace`).

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use stm_core::{pyjson, Map, Value};

use super::item::{corrupt, get_i64, n_i64, req_i64, req_s, s, Item};
use super::schema::TTL_ATTRIBUTE;
use super::{sdk_error, DynamoDbStore, TRACE_IDX_ATTRIBUTE};
use crate::{Corruption, StoreError};

impl DynamoDbStore {
    /// The highest trace idx of `id`, or -1 (a consistent Query, newest first, one row).
    pub(super) async fn max_trace_idx(&self, id: &str) -> Result<i64, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.tables.trace)
            .key_condition_expression("execution_id = :e")
            .expression_attribute_values(":e", s(id))
            .projection_expression("idx")
            .scan_index_forward(false)
            .limit(1)
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("Query", e))?;
        Ok(out.items().first().and_then(|i| get_i64(i, "idx")).unwrap_or(-1))
    }

    /// [`ExecutionStore::read_trace`](crate::ExecutionStore::read_trace): a consistent
    /// `Query` of the execution's partition, oldest first.
    pub(super) async fn trace_of(&self, id: &str) -> Result<Vec<Map>, StoreError> {
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
                let mut entry = pyjson::loads_object(req_s(item, "entry", &what)?, "a trace entry").map_err(
                    |source| {
                        corrupt(
                            what.clone(),
                            Corruption::Json {
                                attribute: None,
                                source,
                            },
                        )
                    },
                )?;
                entry.insert("index".into(), Value::from(idx));
                out.push(entry);
            }
            match page.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(out),
            }
        }
    }

    /// [`ExecutionStore::append_trace`](crate::ExecutionStore::append_trace): the step's
    /// put, the ring's delete, and the item's `trace_idx` dropped (it no longer says where
    /// the trace ends).
    pub(super) async fn append_trace_step(&self, id: &str, entry: Map) -> Result<(), StoreError> {
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
            put = put.item(TTL_ATTRIBUTE, n_i64(ttl));
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
