//! DynamoDB's limits, checked before any call: an item's 400 KB, a transaction's 100 items
//! and 4 MB, the trace ring, and the numbers DynamoDB can hold. What is over is a
//! [`StoreError::TooLarge`] saying which limit and what to do.

use crate::dynamodb::rows::TRACE_CONTEXT_BYTES;
use stm_core::Execution;

use super::prepare::{more_spawns_json, Prepared, MORE_SPAWNS_ATTRIBUTE};
use crate::dynamodb::item::{float_refusal, item_size};
use crate::dynamodb::recent::Recent;
use crate::dynamodb::rows::{Rows, ROWS_ATTRIBUTE};
use crate::dynamodb::schema::TTL_ATTRIBUTE;
use crate::dynamodb::{
    DynamoDbStore, MAX_ITEM_BYTES, MAX_TRANSACTION_BYTES, MAX_TRANSACTION_ITEMS, RECENT_ATTRIBUTE,
};
use crate::states::StateEntry;
use crate::{Commit, StoreError, TimerOp, Unstorable};

/// `exe`'s state index entry with the longest time a commit can write: what a size check
/// counts.
fn largest_state(exe: &Execution) -> Option<StateEntry> {
    let mut entry = StateEntry::at_commit(exe, None, 0.0)?;
    entry.since = 9_999_999_999.999_998;
    Some(entry)
}

impl DynamoDbStore {
    /// The size DynamoDB counts for the item a commit of `exe` writes (the one checked
    /// against the 400 KB limit).
    pub fn execution_item_size(&self, exe: &Execution) -> usize {
        let mut next = exe.clone();
        next.version += 1;
        let hint = self.hint(&exe.id, exe.version);
        // the state entry the commit would write: its time carried from the item's, as known
        let previous = self.state_hint(&exe.id, exe.version).flatten();
        let state = self
            .state_index
            .then(|| StateEntry::at_commit(&next, previous.as_ref(), crate::dynamodb::due::wall_now()))
            .flatten();
        let mut item = self
            .exe_item(
                &next,
                &next.to_json(),
                next.version,
                hint,
                &"0".repeat(32),
                state.as_ref(),
                None,
            )
            .unwrap_or_default();
        if let Some(rows) = self.rows_hint(&exe.id, exe.version).flatten() {
            item.insert(ROWS_ATTRIBUTE.to_string(), rows.to_attribute());
        }
        let bytes = item_size(&item);
        if !self.on_item() {
            return bytes;
        }
        // the processed window at its largest, as `check_limits` counts it
        bytes + RECENT_ATTRIBUTE.len() + Recent::max_attribute_bytes()
    }

    /// [`ExecutionStore::check_commit`](crate::ExecutionStore::check_commit): whether the
    /// commit fits, checked without a call.
    pub(in crate::dynamodb) fn check_commit_fits(
        &self,
        exe: &Execution,
        commit: &Commit,
    ) -> Result<(), StoreError> {
        // Called for each step of a burst: the execution is serialized only when the side
        // items leave too little room for an execution item of the largest size (its own
        // limit is checked at the commit, exactly, as for any commit).
        let side = self.prepare(exe, String::new(), commit);
        if self.check_side_items(exe, &side, MAX_ITEM_BYTES).is_ok() {
            return Ok(());
        }
        // `data` at the current version: the new one is at most one digit longer
        let exe_bytes = self.execution_put_bytes(exe, &exe.to_json(), exe.version + 1) + 1;
        self.check_side_items(exe, &side, exe_bytes)
    }

    /// Reject what DynamoDB would, before spending a call.
    pub(super) fn check_limits(&self, exe: &Execution, p: &Prepared, new: i64) -> Result<(), StoreError> {
        let exe_bytes = self.execution_put_bytes(exe, &p.data, new);
        if exe_bytes > MAX_ITEM_BYTES {
            return Err(item_too_large(format!("execution {} item", exe.id), exe_bytes));
        }
        self.check_side_items(exe, p, exe_bytes)
    }

    /// The size DynamoDB counts for the execution put of `data` at version `new`, its
    /// trace index and (on the item layout) its window at their largest.
    fn execution_put_bytes(&self, exe: &Execution, data: &str, new: i64) -> usize {
        let placeholder_token = "0".repeat(32);
        let state = largest_state(exe).filter(|_| self.state_index);
        let mut item = self
            .exe_item(
                exe,
                data,
                new,
                Some(i64::MAX),
                &placeholder_token,
                state.as_ref(),
                None,
            )
            .unwrap_or_default();
        item.insert(ROWS_ATTRIBUTE.to_string(), Rows::LARGEST.to_attribute());
        let mut bytes = item_size(&item);
        if self.on_item() {
            // a binary counts its length
            bytes += RECENT_ATTRIBUTE.len() + Recent::max_attribute_bytes();
        }
        bytes
    }

    /// [`check_limits`](Self::check_limits) without the execution item's own check: the
    /// side items, the item count and the transaction's bytes with `exe_bytes` for the
    /// execution put.
    fn check_side_items(&self, exe: &Execution, p: &Prepared, exe_bytes: usize) -> Result<(), StoreError> {
        check_timer_numbers(exe, p)?;
        let on_item = self.on_item();
        let mut total = exe_bytes;
        // `seq` and `row_bytes` (two numbers, 21 bytes at most each)
        let seq_bytes = 3 + 21 + crate::dynamodb::rows::ROW_BYTES_ATTRIBUTE.len() + 21;
        for (target, event) in &p.events {
            let traced = p.row_trace(event.len()).map_or(0, |_| TRACE_CONTEXT_BYTES);
            let bytes = seq_bytes
                + "target_id".len()
                + target.as_ref().map_or(1, String::len)
                + 5
                + event.len()
                + traced;
            if bytes > MAX_ITEM_BYTES {
                return Err(item_too_large(
                    "an emitted event's outbox item".to_string(),
                    bytes,
                ));
            }
            total += bytes;
        }
        for row in &p.spawn_rows {
            let (child, root, ctx) = &p.spawns[row.start];
            let mut bytes = seq_bytes + 9 + exe.id.len() + 8 + child.len() + 9 + root.len() + 7 + ctx.len();
            let mut payload = ctx.len();
            if row.len() > 1 {
                let rest = more_spawns_json(&p.spawns[row.start + 1..row.end]).len();
                bytes += MORE_SPAWNS_ATTRIBUTE.len() + rest;
                payload += rest;
            }
            bytes += p.row_trace(payload).map_or(0, |_| TRACE_CONTEXT_BYTES);
            if bytes > MAX_ITEM_BYTES {
                return Err(item_too_large(format!("the spawn item of child {child}"), bytes));
            }
            total += bytes;
        }
        for entry in &p.trace_entries {
            let bytes = 12 + exe.id.len() + 3 + 21 + 5 + entry.len();
            if bytes > MAX_ITEM_BYTES {
                return Err(item_too_large("the trace step item".to_string(), bytes));
            }
            total += bytes;
        }
        if let Some(parked) = &p.park {
            // the row (key, event) and the claim (key, number)
            let event = parked.event.to_json().len();
            let bytes = 2 + 9 + 20 + 1 + exe.id.len() + 5 + event;
            if bytes > MAX_ITEM_BYTES {
                return Err(item_too_large(
                    format!("the parked row of event {}", parked.event.id),
                    bytes,
                ));
            }
            total += bytes + 2 + 12 + exe.id.len() + parked.event.id.len() + 1 + 21;
        }
        let mark_items = if on_item { 0 } else { p.processed.len() };
        for event_id in p.processed.iter().take(mark_items) {
            total += 12 + exe.id.len() + 8 + event_id.len() + TTL_ATTRIBUTE.len() + 21;
        }
        if self.trace_max > 0 && p.trace_entries.len() > self.trace_max {
            // the ring delete of one of them would hit another's put in the same transaction
            return Err(StoreError::TooLarge(Unstorable::TraceSteps {
                execution_id: exe.id.clone(),
                steps: p.trace_entries.len(),
                ring: self.trace_max,
            }));
        }
        let count = 1
            + p.events.len()
            + p.spawn_rows.len()
            + mark_items
            + p.timers.len()
            + p.trace_entries.len() * if self.trace_max > 0 { 2 } else { 1 }
            + p.parked_items();
        if count > MAX_TRANSACTION_ITEMS {
            return Err(StoreError::TooLarge(Unstorable::Transaction {
                execution_id: exe.id.clone(),
                items: count,
                limit: MAX_TRANSACTION_ITEMS,
            }));
        }
        if total > MAX_TRANSACTION_BYTES {
            return Err(StoreError::TooLarge(Unstorable::TransactionBytes {
                execution_id: exe.id.clone(),
                bytes: total,
                limit: MAX_TRANSACTION_BYTES,
            }));
        }
        Ok(())
    }
}

/// Refuse a timer whose `fire_at` DynamoDB cannot store as a number (a timeout from the
/// context of 1E+126 seconds or more, or not a finite number), before any call: the
/// `ValidationException` it would get is the same on every retry.
fn check_timer_numbers(exe: &Execution, p: &Prepared) -> Result<(), StoreError> {
    for op in &p.timers {
        let (TimerOp::Schedule { path, fire_at } | TimerOp::Hold { path, fire_at }) = op else {
            continue;
        };
        let text = stm_core::pyvalue::float_repr(*fire_at);
        if let Some(why) = float_refusal(*fire_at, &text) {
            return Err(StoreError::TooLarge(Unstorable::Timer {
                execution_id: exe.id.clone(),
                path: path.clone(),
                fire_at: *fire_at,
                why,
            }));
        }
    }
    Ok(())
}

/// An item over DynamoDB's item size limit.
fn item_too_large(what: String, bytes: usize) -> StoreError {
    StoreError::TooLarge(Unstorable::Item {
        what,
        bytes,
        limit: MAX_ITEM_BYTES,
    })
}
