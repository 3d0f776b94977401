//! A commit as a request ([`Plan`]): the execution put with its CAS and idempotency
//! token, the outbox and spawn row puts, the processed marks, the timer puts and deletes,
//! the trace puts and the ring's deletes.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{
    AttributeValue, Delete, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use sha2::{Digest, Sha256};
use stm_core::Execution;

use super::prepare::{more_spawns_json, Prepared, MORE_SPAWNS_ATTRIBUTE};
use crate::dynamodb::item::{n_f64, n_i64, s, s_or_null, Item};
use crate::dynamodb::recent::Recent;
use crate::dynamodb::rows::{with_row_bytes, Rows, ROWS_ATTRIBUTE, TRACE_CONTEXT_ATTRIBUTE};
use crate::dynamodb::schema::{TIMER_HELD_ATTRIBUTE, TIMER_SHARD_ATTRIBUTE, TTL_ATTRIBUTE};
use crate::dynamodb::{
    build_err, timer_shard, DynamoDbStore, COMMIT_TOKEN_ATTRIBUTE, RECENT_ATTRIBUTE, TRACE_IDX_ATTRIBUTE,
};
use crate::states::StateEntry;
use crate::{StoreError, TimerOp};

/// One commit, ready to send.
pub(super) struct Plan {
    pub(super) tx: Vec<TransactWriteItem>,
    /// The execution put alone, when it is the whole commit.
    pub(super) single_put: Option<Put>,
    /// Where the trace puts are in the transaction.
    pub(super) trace_positions: Vec<usize>,
    /// Where the outbox and spawn puts are.
    pub(super) row_positions: Vec<usize>,
    pub(super) token: String,
}

/// What [`DynamoDbStore::plan`] builds a request from: the prepared commit and where its
/// rows, trace steps and token go. The commit loop keeps one and updates it between
/// attempts (a new block, trace slot or retry generation).
#[derive(Clone, Copy)]
pub(super) struct PlanInput<'a> {
    pub(super) exe: &'a Execution,
    pub(super) prepared: &'a Prepared,
    /// The version the CAS expects; the commit writes `old + 1`.
    pub(super) old: i64,
    /// The seqs of this commit's rows (`None`: it writes none).
    pub(super) block: Option<Rows>,
    /// The execution's last block, which the item keeps recording when `block` is `None`.
    pub(super) carried: Option<Rows>,
    /// The execution's state index entry (`None`: DONE, CANCELLED or stateless: the
    /// item leaves the index).
    pub(super) state: Option<&'a StateEntry>,
    /// The idx of the commit's first trace step (`None`: it writes none).
    pub(super) trace_idx: Option<i64>,
    /// The last trace idx the item records (`trace_idx`'s last step, or the one before).
    pub(super) stored_idx: Option<i64>,
    /// Counts the requests after one that was definitely refused: part of the token, so
    /// such a retry is a new request.
    pub(super) generation: u32,
}

impl DynamoDbStore {
    /// The execution item of `exe` at version `new`, holding `data`, the last trace idx,
    /// the commit's token, its state index entry and (on the item layout) the processed
    /// window.
    #[allow(clippy::too_many_arguments)] // each is one attribute of the item
    pub(super) fn exe_item(
        &self,
        exe: &Execution,
        data: &str,
        new: i64,
        trace_idx: Option<i64>,
        token: &str,
        state: Option<&StateEntry>,
        recent: Option<&Recent>,
    ) -> Result<Item, StoreError> {
        let mut item = HashMap::from([
            ("id".to_string(), s(&exe.id)),
            ("data".to_string(), s(data)),
            ("version".to_string(), n_i64(new)),
            ("definition_id".to_string(), s(&exe.definition_id)),
            (COMMIT_TOKEN_ATTRIBUTE.to_string(), s(token)),
        ]);
        if let Some(idx) = trace_idx {
            item.insert(TRACE_IDX_ATTRIBUTE.to_string(), n_i64(idx));
        }
        if let Some(ttl) = self.finished_ttl_value(exe) {
            item.insert(TTL_ATTRIBUTE.to_string(), n_i64(ttl));
        }
        if let Some(state) = state {
            item.extend(state.to_attributes(&exe.id)?);
        }
        if let Some(recent) = recent {
            item.insert(RECENT_ATTRIBUTE.to_string(), recent.to_attribute());
        }
        Ok(item)
    }

    /// The request for `input`: the transaction in harel's order (see the module docs
    /// of `dynamodb`), or the execution put alone when it is the whole commit.
    pub(super) fn plan(&self, input: &PlanInput<'_>) -> Result<Plan, StoreError> {
        let PlanInput {
            exe,
            prepared: p,
            old,
            block,
            carried,
            state,
            trace_idx,
            stored_idx,
            generation,
        } = *input;
        let new = old + 1;
        let t = &self.tables;
        let mut hasher = Sha256::new();
        for part in [
            exe.id.as_str(),
            &new.to_string(),
            &p.data,
            &format!("{block:?}"),
            &format!("{trace_idx:?}"),
            &p.processed.join("\u{0}"),
            &p.trace_entries.len().to_string(),
            &format!("{:?}", p.timers),
            &format!("{:?}{:?}", p.park.as_ref().map(|x| x.number), p.unpark),
            &generation.to_string(),
        ] {
            hasher.update(part.as_bytes());
            hasher.update([0u8]);
        }
        let token = to_hex(&hasher.finalize()[..16]);

        let mut item = self.exe_item(exe, &p.data, new, stored_idx, &token, state, p.recent.as_ref())?;
        if let Some(rows) = block.or(carried) {
            item.insert(ROWS_ATTRIBUTE.to_string(), rows.to_attribute());
        }
        let mut put = Put::builder()
            .table_name(&t.executions)
            .set_item(Some(item))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        put = if old == 0 {
            put.condition_expression("attribute_not_exists(id)")
        } else {
            put.condition_expression("version = :ov")
                .expression_attribute_values(":ov", n_i64(old))
        };
        let put = put.build().map_err(build_err)?;
        let mut tx = vec![TransactWriteItem::builder().put(put.clone()).build()];
        let put_of = |table: &str, item: Item| -> Result<TransactWriteItem, StoreError> {
            let put = Put::builder()
                .table_name(table)
                .set_item(Some(item))
                .build()
                .map_err(build_err)?;
            Ok(TransactWriteItem::builder().put(put).build())
        };
        // a row never overwrites another commit's (see `rows`)
        let row_put_of = |table: &str, item: Item| -> Result<TransactWriteItem, StoreError> {
            let put = Put::builder()
                .table_name(table)
                .set_item(Some(with_row_bytes(item)))
                .condition_expression("attribute_not_exists(seq)")
                .build()
                .map_err(build_err)?;
            Ok(TransactWriteItem::builder().put(put).build())
        };
        let outbox_seqs: Vec<i64> = block.iter().flat_map(|b| b.outbox_seqs()).collect();
        let spawn_seqs: Vec<i64> = block.iter().flat_map(|b| b.spawn_seqs()).collect();
        let first_row = tx.len();
        for (i, (target, event)) in p.events.iter().enumerate() {
            let mut item = HashMap::from([
                ("seq".to_string(), n_i64(outbox_seqs[i])),
                ("target_id".to_string(), s_or_null(target.as_deref())),
                ("event".to_string(), s(event)),
            ]);
            if let Some(trace) = p.row_trace(event.len()) {
                item.insert(TRACE_CONTEXT_ATTRIBUTE.to_string(), s(trace));
            }
            tx.push(row_put_of(&t.outbox, item)?);
        }
        for (i, row) in p.spawn_rows.iter().enumerate() {
            let (child, root, ctx) = &p.spawns[row.start];
            let mut item = HashMap::from([
                ("seq".to_string(), n_i64(spawn_seqs[i])),
                ("parent_id".to_string(), s(&exe.id)),
                ("child_id".to_string(), s(child)),
                ("root_path".to_string(), s(root)),
                ("context".to_string(), s(ctx)),
            ]);
            let mut payload = ctx.len();
            if row.len() > 1 {
                let rest = more_spawns_json(&p.spawns[row.start + 1..row.end]);
                payload += rest.len();
                item.insert(MORE_SPAWNS_ATTRIBUTE.to_string(), s(&rest));
            }
            if let Some(trace) = p.row_trace(payload) {
                item.insert(TRACE_CONTEXT_ATTRIBUTE.to_string(), s(trace));
            }
            tx.push(row_put_of(&t.spawns, item)?);
        }
        let row_positions: Vec<usize> = (first_row..tx.len()).collect();
        // on the item, the marks are in the execution put's window
        let marks: &[String] = if self.on_item() { &[] } else { &p.processed };
        for event_id in marks {
            let mut mark = Self::processed_key(&exe.id, event_id);
            if let Some(ttl) = self.processed_ttl_value() {
                mark.insert(TTL_ATTRIBUTE.to_string(), n_i64(ttl));
            }
            tx.push(put_of(&t.processed, mark)?);
        }
        // a timer item carries its arming's trace context: the sweeper's `Timeout` continues it
        let traced = |mut item: Item| {
            if let Some(trace) = &p.trace_context {
                item.insert(TRACE_CONTEXT_ATTRIBUTE.to_string(), s(trace));
            }
            item
        };
        for op in &p.timers {
            match op {
                TimerOp::Schedule { path, fire_at } => tx.push(put_of(
                    &t.timers,
                    traced(HashMap::from([
                        ("execution_id".to_string(), s(&exe.id)),
                        ("path".to_string(), s(path)),
                        ("fire_at".to_string(), n_f64("a timer's fire_at", *fire_at)?),
                        // the due index's partition key (see `due`)
                        (TIMER_SHARD_ATTRIBUTE.to_string(), s(timer_shard(&exe.id, path))),
                    ])),
                )?),
                // armed, out of the due index (no shard): its execution is suspended
                TimerOp::Hold { path, fire_at } => tx.push(put_of(
                    &t.timers,
                    traced(HashMap::from([
                        ("execution_id".to_string(), s(&exe.id)),
                        ("path".to_string(), s(path)),
                        ("fire_at".to_string(), n_f64("a timer's fire_at", *fire_at)?),
                        (TIMER_HELD_ATTRIBUTE.to_string(), AttributeValue::Bool(true)),
                    ])),
                )?),
                TimerOp::Cancel { path } => {
                    let del = Delete::builder()
                        .table_name(&t.timers)
                        .key("execution_id", s(&exe.id))
                        .key("path", s(path))
                        .build()
                        .map_err(build_err)?;
                    tx.push(TransactWriteItem::builder().delete(del).build());
                }
            }
        }
        if p.parked_guard {
            tx.push(self.parked_guard_update(&exe.id, new)?);
        }
        if let Some(parked) = &p.park {
            tx.extend(self.park_puts(&exe.id, parked)?);
        }
        for released in &p.unpark {
            tx.extend(self.unpark_deletes(&exe.id, released)?);
        }
        let mut trace_positions = Vec::new();
        for (i, entry) in p.trace_entries.iter().enumerate() {
            let Some(first) = trace_idx else { break };
            let idx = first + i as i64;
            trace_positions.push(tx.len());
            let mut put = Put::builder()
                .table_name(&t.trace)
                .item("execution_id", s(&exe.id))
                .item("idx", n_i64(idx))
                .item("entry", s(entry));
            if let Some(ttl) = self.trace_ttl_value() {
                put = put.item(TTL_ATTRIBUTE, n_i64(ttl));
            }
            let put = put
                // the slot must be free: a stale trace_idx hint can never overwrite a step
                .condition_expression("attribute_not_exists(idx)")
                .build()
                .map_err(build_err)?;
            tx.push(TransactWriteItem::builder().put(put).build());
            let max = self.trace_max as i64;
            if max > 0 && idx - max >= 0 {
                let del = Delete::builder()
                    .table_name(&t.trace)
                    .key("execution_id", s(&exe.id))
                    .key("idx", n_i64(idx - max))
                    .build()
                    .map_err(build_err)?;
                tx.push(TransactWriteItem::builder().delete(del).build());
            }
        }
        let single_put = (tx.len() == 1).then_some(put);
        Ok(Plan {
            tx,
            single_put,
            trace_positions,
            row_positions,
            token,
        })
    }
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
