//! The item sizes the meter bills: estimated from what is stored, as the module above
//! says (DynamoDB counts attribute names and values; a number is about its digits).

use std::collections::HashMap;

use stm_core::{Execution, Map, Value};
use stm_store::Written;

/// The pending rows as the meter sizes them.
#[derive(Debug, Default)]
pub(super) struct RowBook {
    /// (table, seq) -> the row's size.
    sizes: HashMap<(&'static str, i64), usize>,
    /// table -> the pending rows' bytes in all.
    bytes: HashMap<&'static str, usize>,
    /// execution id -> the seqs of its last commit that wrote rows.
    pub(super) last_block: HashMap<String, Written>,
}

impl RowBook {
    pub(super) fn add(&mut self, table: &'static str, seq: i64, bytes: usize) {
        if let Some(old) = self.sizes.insert((table, seq), bytes) {
            *self.bytes.entry(table).or_default() -= old;
        }
        *self.bytes.entry(table).or_default() += bytes;
    }

    /// The row's size, forgotten (0 if it was not pending).
    pub(super) fn remove(&mut self, table: &'static str, seq: i64) -> usize {
        let bytes = self.sizes.remove(&(table, seq)).unwrap_or(0);
        if let Some(total) = self.bytes.get_mut(table) {
            *total -= bytes;
        }
        bytes
    }

    pub(super) fn size(&self, table: &'static str, seq: i64) -> usize {
        self.sizes.get(&(table, seq)).copied().unwrap_or(0)
    }

    pub(super) fn table_bytes(&self, table: &'static str) -> usize {
        self.bytes.get(table).copied().unwrap_or(0)
    }
}

pub(super) fn exe_item_bytes(exe: &Execution) -> usize {
    exe.to_json().len() + exe.id.len() + exe.definition_id.len() + 80
}

pub(super) fn mark_bytes(id: &str, event_id: &str) -> usize {
    "execution_id".len() + id.len() + "event_id".len() + event_id.len()
}

pub(super) fn outbox_row_bytes(target: Option<&str>, event_json: usize) -> usize {
    24 + "target_id".len() + target.map_or(1, str::len) + "event".len() + event_json
}

pub(super) fn spawn_row_bytes(parent: &str, child: &str, root: &str, context: &Map) -> usize {
    let ctx = stm_core::pyjson::dumps(&Value::Object(context.clone())).len();
    24 + "parent_id".len()
        + parent.len()
        + "child_id".len()
        + child.len()
        + "root_path".len()
        + root.len()
        + "context".len()
        + ctx
}

pub(super) fn timer_bytes(id: &str, path: &str) -> usize {
    "execution_id".len() + id.len() + "path".len() + path.len() + "fire_at".len() + 18 + "due_shard".len() + 6
}

pub(super) fn trace_row_bytes(id: &str, entry: &Map) -> usize {
    "execution_id".len()
        + id.len()
        + "idx".len()
        + 8
        + "entry".len()
        + stm_core::pyjson::dumps(&Value::Object(entry.clone())).len()
}
