//! A commit's side items serialized before its seqs are known ([`Prepared`]): the
//! outbox events, the spawn intents and how they are packed into rows, the processed
//! marks, the timer ops collapsed to one per path, and the trace steps.

use std::ops::Range;

use stm_core::{pyjson, Value};

use crate::dynamodb::recent::Recent;
use crate::dynamodb::{DynamoDbStore, MAX_TRANSACTION_ITEMS};
use crate::{Commit, TimerOp};

/// The side items of a commit, serialized, before seqs are known.
pub(super) struct Prepared {
    pub(super) data: String,
    pub(super) events: Vec<(Option<String>, String)>,
    pub(super) spawns: Vec<(String, String, String)>,
    /// The spawn rows: which intents each holds, in order (one each, unless the commit
    /// would go over a transaction's 100 items: then as many as fit an item, see
    /// [`MORE_SPAWNS_ATTRIBUTE`]).
    pub(super) spawn_rows: Vec<Range<usize>>,
    pub(super) processed: Vec<String>,
    pub(super) timers: Vec<TimerOp>,
    pub(super) trace_entries: Vec<String>,
    /// [`DedupeMarks::OnItem`]: the processed window the execution item is written with
    /// (the previous one plus `processed`), set once the previous one is known.
    pub(super) recent: Option<Recent>,
    /// The event this commit parks (its row and claim, two items) and the parked events
    /// it steps (their rows' and claims' deletes, two items each).
    pub(super) park: Option<crate::ParkedEvent>,
    pub(super) unpark: Vec<crate::Unpark>,
    /// The commit moves the parked events' guard: the execution has events parked before
    /// or after it (module `parked` of the DynamoDB store).
    pub(super) parked_guard: bool,
    /// [`Commit::trace_context`], written on each row that has room for it
    /// ([`Prepared::row_trace`]).
    pub(super) trace_context: Option<String>,
}

impl Prepared {
    /// The trace context a row whose largest attributes are `payload_bytes` long carries:
    /// the commit's, unless the row is within a kilobyte of the item limit (it then goes
    /// without, so that tracing never refuses a row harel would write).
    pub(super) fn row_trace(&self, payload_bytes: usize) -> Option<&str> {
        self.trace_context
            .as_deref()
            .filter(|_| payload_bytes + 1024 <= crate::dynamodb::MAX_ITEM_BYTES)
    }

    /// The items the parked rows and their guard add to the transaction.
    pub(super) fn parked_items(&self) -> usize {
        parked_items(self.park.is_some(), self.unpark.len(), self.parked_guard)
    }
}

/// The items a commit's parked rows add: the parked event's row and claim, each released
/// event's two deletes, and the guard's update.
fn parked_items(parks: bool, unparks: usize, guard: bool) -> usize {
    2 * (usize::from(parks) + unparks) + usize::from(guard)
}

/// The extra spawn-row attribute holding the intents packed after the row's own: a JSON
/// list of `[child_id, root_path, context]` (the context as the row's own, `json.dumps`).
/// A wide fan-out's intents (a child per item of a list) would take an item each, and one
/// transaction holds 100: packed, a thousand fit a few rows and the step stays one atomic
/// commit. harel's relay reads such a row as its first intent only.
pub(in crate::dynamodb) const MORE_SPAWNS_ATTRIBUTE: &str = "more_spawns";

/// How large a packed spawn row grows (under the 400 KB item limit, with room for its
/// first intent's attributes).
const PACKED_ROW_BYTES: usize = 350 * 1024;

/// The spawn rows for `spawns` when the commit's other items are `others`: one intent a
/// row while the commit fits a transaction's item limit, else packed by size.
fn spawn_rows(spawns: &[(String, String, String)], others: usize) -> Vec<Range<usize>> {
    if others + spawns.len() <= MAX_TRANSACTION_ITEMS {
        return (0..spawns.len()).map(|i| i..i + 1).collect();
    }
    let mut rows: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, (child, root, ctx)) in spawns.iter().enumerate() {
        // the JSON list's quotes, commas and escapes, roughly: a row is cut well before
        // the item limit, which `check_side_items` checks exactly on the serialized row
        let intent = child.len() + root.len() + ctx.len() * 2 + 16;
        if i > start && bytes + intent > PACKED_ROW_BYTES {
            rows.push(start..i);
            start = i;
            bytes = 0;
        }
        bytes += intent;
    }
    if start < spawns.len() {
        rows.push(start..spawns.len());
    }
    rows
}

/// The `more_spawns` attribute's text for the intents after a row's first.
pub(super) fn more_spawns_json(rest: &[(String, String, String)]) -> String {
    let list: Vec<Value> = rest
        .iter()
        .map(|(child, root, ctx)| {
            Value::Array(vec![
                Value::String(child.clone()),
                Value::String(root.clone()),
                Value::String(ctx.clone()),
            ])
        })
        .collect();
    pyjson::dumps(&Value::Array(list))
}

impl Prepared {
    /// The index of the commit's last trace step, given its first's.
    pub(super) fn last_trace_idx(&self, first: Option<i64>) -> Option<i64> {
        first.map(|idx| idx + self.trace_entries.len().saturating_sub(1) as i64)
    }
}

impl DynamoDbStore {
    /// Serialize `commit`'s side items for `data` (the execution's JSON at its new version).
    /// Timer ops are collapsed to the last per path: one transaction may not touch an item
    /// twice.
    pub(super) fn prepare(&self, exe: &stm_core::Execution, data: String, commit: &Commit) -> Prepared {
        let parked_guard = crate::parked::moves_guard(exe, commit);
        let spawns: Vec<(String, String, String)> = commit
            .spawns
            .iter()
            .map(|sp| {
                (
                    sp.child_id.clone(),
                    sp.root_path.clone(),
                    pyjson::dumps(&Value::Object(sp.context.clone())),
                )
            })
            .collect();
        let timers = TimerOp::last_per_path(commit.timers.clone());
        let marks = if self.on_item() {
            0
        } else {
            commit.processed_event_ids.len()
        };
        let traces = commit.traces.len() * if self.trace_max > 0 { 2 } else { 1 };
        let parked = parked_items(commit.park.is_some(), commit.unpark.len(), parked_guard);
        let others = 1 + commit.emits.len() + marks + timers.len() + traces + parked;
        Prepared {
            data,
            events: commit
                .emits
                .iter()
                .map(|(target, event)| (target.clone(), event.to_json()))
                .collect(),
            spawn_rows: spawn_rows(&spawns, others),
            spawns,
            processed: commit.processed_event_ids.clone(),
            timers,
            trace_entries: commit
                .traces
                .iter()
                .map(|t| pyjson::dumps(&Value::Object(t.clone())))
                .collect(),
            recent: None,
            park: commit.park.as_deref().cloned(),
            unpark: commit.unpark.clone(),
            parked_guard,
            trace_context: commit.trace_context.clone(),
        }
    }
}
