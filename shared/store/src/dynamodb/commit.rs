//! The commit path: the seq blocks, the size limits, the transaction (or single `PutItem`)
//! with its idempotency token, one attempt of it and the classification of its failures.

use std::collections::HashMap;
use std::ops::Range;
use std::time::Duration;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    CancellationReason, Delete, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use sha2::{Digest, Sha256};
use stm_core::{Execution, Status};

use super::item::{float_refusal, item_size, n_f64, n_i64, s, s_or_null, Item};
use super::recent::Recent;
use super::rows::{Rows, ROWS_ATTRIBUTE};
use super::schema::{TIMER_SHARD_ATTRIBUTE, TTL_ATTRIBUTE};
use super::{
    build_err, timer_shard, DedupeMarks, DynamoDbStore, COMMIT_TOKEN_ATTRIBUTE, MAX_ITEM_BYTES,
    MAX_TRANSACTION_BYTES, MAX_TRANSACTION_ITEMS, RECENT_ATTRIBUTE, TRACE_IDX_ATTRIBUTE, TRANSIENT_CODES,
};
use crate::aws::Readable;
use crate::{Commit, StoreError, TimerOp};
use stm_core::{pyjson, Value};

/// Cancellation reason codes that a retry can cure.
const TRANSIENT_REASONS: &[&str] = &[
    "TransactionConflict",
    "ThrottlingError",
    "ProvisionedThroughputExceeded",
    "RequestLimitExceeded",
];

/// Cancellation reason codes of an action DynamoDB refuses as invalid: `ValidationError`
/// (AWS: an item too large, a number overflow, a type mismatch, ... see
/// `TransactionCanceledException` in the DynamoDB API reference) and `ValidationException`
/// (moto's spelling). The same transaction is refused every time.
const VALIDATION_REASONS: &[&str] = &["ValidationError", "ValidationException"];

/// What a commit DynamoDB refuses as invalid says before DynamoDB's own words.
const REFUSED_AS_INVALID: &str = "DynamoDB refused the commit as invalid, so no retry can succeed \
     (fix the cause, then redrive the execution)";

impl DynamoDbStore {
    /// The size DynamoDB counts for the item a commit of `exe` writes (the one checked
    /// against the 400 KB limit).
    pub fn execution_item_size(&self, exe: &Execution) -> usize {
        let mut next = exe.clone();
        next.version += 1;
        let hint = self.hint(&exe.id, exe.version);
        let mut item = self.exe_item(&next, &next.to_json(), next.version, hint, &"0".repeat(32), None);
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

    fn processed_ttl_value(&self) -> Option<i64> {
        expiry(now_seconds()?, self.processed_ttl?)
    }

    /// The `ttl` of `exe`'s item: `finished_at` plus the retention, for a DONE or
    /// CANCELLED execution when one is configured (see `with_finished_ttl`).
    fn finished_ttl_value(&self, exe: &Execution) -> Option<i64> {
        let retention = self.finished_ttl?;
        if !matches!(exe.status, Status::Done | Status::Cancelled) {
            return None;
        }
        expiry(exe.finished_at.or_else(now_seconds)?, retention)
    }

    /// The `ttl` of a trace row written now.
    pub(super) fn trace_ttl_value(&self) -> Option<i64> {
        expiry(now_seconds()?, self.finished_ttl?)
    }

    // ---- the commit -------------------------------------------------------------------

    /// Send the commit once.
    pub(super) async fn send_commit(&self, plan: &Plan) -> Attempt {
        if let Some(put) = &plan.single_put {
            let result = self
                .client
                .put_item()
                .table_name(put.table_name())
                .set_item(Some(put.item().clone()))
                .set_condition_expression(put.condition_expression().map(str::to_string))
                .set_expression_attribute_values(put.expression_attribute_values().cloned())
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                .send()
                .await;
            return match result {
                Ok(_) => Attempt::Done,
                Err(SdkError::ServiceError(se)) => match se.err() {
                    PutItemError::ConditionalCheckFailedException(e) => Attempt::Conflict(e.item().cloned()),
                    other => classify_service("PutItem", other.code(), se.raw(), &Readable(other)),
                },
                Err(err) => classify_other("PutItem", &err),
            };
        }
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(plan.tx.clone()))
            .client_request_token(&plan.token)
            .send()
            .await;
        match result {
            Ok(_) => Attempt::Done,
            Err(SdkError::ServiceError(se)) => match se.err() {
                TransactWriteItemsError::TransactionCanceledException(tc) => {
                    let reasons = tc.cancellation_reasons();
                    let code = |i: usize| reasons.get(i).and_then(|r| r.code()).unwrap_or("None");
                    let listed: Vec<&str> = (0..reasons.len()).map(code).collect();
                    let msg = format!(
                        "TransactWriteItems cancelled [{}]: {}",
                        listed.join(", "),
                        tc.message().unwrap_or_default()
                    );
                    if code(0) == "ConditionalCheckFailed" {
                        Attempt::Conflict(reasons.first().and_then(|r| r.item()).cloned())
                    } else if listed.iter().any(|c| VALIDATION_REASONS.contains(c)) {
                        // never transient, whatever else the reasons say
                        Attempt::Fail(StoreError::TooLarge(format!(
                            "{REFUSED_AS_INVALID}: {}",
                            refused_actions(&plan.tx, reasons)
                        )))
                    } else if plan
                        .trace_positions
                        .iter()
                        .any(|p| code(*p) == "ConditionalCheckFailed")
                    {
                        Attempt::TraceSlotTaken
                    } else if plan
                        .row_positions
                        .iter()
                        .any(|p| code(*p) == "ConditionalCheckFailed")
                    {
                        Attempt::SeqTaken
                    } else if listed.iter().any(|c| *c != "None")
                        && listed
                            .iter()
                            .all(|c| *c == "None" || TRANSIENT_REASONS.contains(c))
                    {
                        // cancelled: nothing was written, the next try is a new transaction
                        Attempt::Retry {
                            msg,
                            maybe_applied: false,
                        }
                    } else {
                        Attempt::Fail(StoreError::backend(msg))
                    }
                }
                // raised by older emulators instead of a cancellation; by DynamoDB when the
                // token was used for a different transaction (another writer's commit of
                // the same version): both mean the CAS was lost
                other
                    if matches!(
                        other.code(),
                        Some("ConditionalCheckFailedException" | "IdempotentParameterMismatchException")
                    ) =>
                {
                    Attempt::Conflict(None)
                }
                other => classify_service("TransactWriteItems", other.code(), se.raw(), &Readable(other)),
            },
            Err(err) => classify_other("TransactWriteItems", &err),
        }
    }

    /// The stored version and commit token of `id` (the conflict fallback).
    pub(super) async fn stored_version(&self, id: &str) -> Result<Option<Item>, StoreError> {
        self.get_execution_attributes(id, &["version", COMMIT_TOKEN_ATTRIBUTE])
            .await
    }
}

/// One commit, ready to send.
pub(super) struct Plan {
    tx: Vec<TransactWriteItem>,
    /// The execution put alone, when it is the whole commit.
    single_put: Option<Put>,
    /// Where the trace puts are in the transaction.
    trace_positions: Vec<usize>,
    /// Where the outbox and spawn puts are.
    row_positions: Vec<usize>,
    pub(super) token: String,
}

pub(super) enum Attempt {
    Done,
    /// The CAS failed; the stored item if DynamoDB returned it.
    Conflict(Option<Item>),
    /// The trace put's slot was already taken (a stale trace hint).
    TraceSlotTaken,
    /// A row's seq was taken by another commit's row.
    SeqTaken,
    /// A transient failure. `maybe_applied`: the write may have landed (a timeout, a 5xx),
    /// so the retry must be the identical request (same token); otherwise it was
    /// definitely refused and the retry is a new request (new token).
    Retry {
        msg: String,
        maybe_applied: bool,
    },
    Fail(StoreError),
}

/// The refused actions of a cancelled transaction, DynamoDB's words for each:
/// `TransactWriteItems cancelled [None, ValidationError]: action 2 (Put on t_timers):
/// ValidationError: Number overflow. ...`.
fn refused_actions(tx: &[TransactWriteItem], reasons: &[CancellationReason]) -> String {
    let code = |r: &CancellationReason| r.code().unwrap_or("None").to_string();
    let listed: Vec<String> = reasons.iter().map(code).collect();
    let refused: Vec<String> = reasons
        .iter()
        .enumerate()
        .filter(|(_, r)| r.code().is_some_and(|c| c != "None"))
        .map(|(i, r)| {
            let action = tx.get(i).map_or_else(String::new, |a| {
                let (kind, table) = if let Some(p) = a.put() {
                    ("Put", p.table_name())
                } else if let Some(d) = a.delete() {
                    ("Delete", d.table_name())
                } else if let Some(u) = a.update() {
                    ("Update", u.table_name())
                } else if let Some(c) = a.condition_check() {
                    ("ConditionCheck", c.table_name())
                } else {
                    ("an action", "")
                };
                format!(" ({kind} on {table})")
            });
            let message = r.message().map_or_else(String::new, |m| format!(": {m}"));
            format!("action {}{action}: {}{message}", i + 1, code(r))
        })
        .collect();
    format!(
        "TransactWriteItems cancelled [{}]: {}",
        listed.join(", "),
        refused.join("; ")
    )
}

fn classify_service(
    op: &str,
    code: Option<&str>,
    raw: &HttpResponse,
    err: &dyn std::fmt::Display,
) -> Attempt {
    let msg = format!("{op}: {err}");
    if code == Some("ValidationException") {
        // the request as it is: the same one is refused every time
        Attempt::Fail(StoreError::TooLarge(format!("{REFUSED_AS_INVALID}: {msg}")))
    } else if raw.status().is_server_error() || code == Some("TransactionInProgressException") {
        // the request may have been (or is being) applied
        Attempt::Retry {
            msg,
            maybe_applied: true,
        }
    } else if code.is_some_and(|c| TRANSIENT_CODES.contains(&c)) {
        // throttled or conflicting: refused before any write
        Attempt::Retry {
            msg,
            maybe_applied: false,
        }
    } else {
        Attempt::Fail(StoreError::backend(msg))
    }
}

fn classify_other<E>(op: &str, err: &SdkError<E, HttpResponse>) -> Attempt
where
    E: std::error::Error + ProvideErrorMetadata + 'static,
{
    let msg = format!("{op}: {}", Readable(err));
    match err {
        // the request may or may not have been applied: the retry is idempotent (token)
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            Attempt::Retry {
                msg,
                maybe_applied: true,
            }
        }
        _ => Attempt::Fail(StoreError::backend(msg)),
    }
}

fn too_large(what: &str, bytes: usize, limit: usize) -> StoreError {
    StoreError::TooLarge(format!(
        "{what} is {bytes} bytes, over DynamoDB's limit of {limit} bytes (shrink the context or the event data)"
    ))
}

/// Refuse a timer whose `fire_at` DynamoDB cannot store as a number (a timeout from the
/// context of 1E+126 seconds or more, or not a finite number), before any call: the
/// `ValidationException` it would get is the same on every retry.
fn check_timer_numbers(exe: &Execution, p: &Prepared) -> Result<(), StoreError> {
    for op in &p.timers {
        let TimerOp::Schedule { path, fire_at } = op else {
            continue;
        };
        let text = stm_core::pyvalue::float_repr(*fire_at);
        if let Some(why) = float_refusal(*fire_at, &text) {
            return Err(StoreError::TooLarge(format!(
                "the timer of {} at {path} would fire at {text} (epoch seconds), which DynamoDB \
                 cannot store as a number ({why}): give the state a timeout of at most {} seconds",
                exe.id,
                stm_core::validate::MAX_TIMEOUT_SECONDS
            )));
        }
    }
    Ok(())
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The timer ops with only the last op per path kept, in the order of those last ops.
pub(super) fn collapse_timers(ops: Vec<TimerOp>) -> Vec<TimerOp> {
    let path = |op: &TimerOp| match op {
        TimerOp::Schedule { path, .. } | TimerOp::Cancel { path } => path.clone(),
    };
    let mut out: Vec<TimerOp> = Vec::with_capacity(ops.len());
    for op in ops {
        let p = path(&op);
        out.retain(|o| path(o) != p);
        out.push(op);
    }
    out
}

/// The wall clock, epoch seconds.
fn now_seconds() -> Option<f64> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some(now.as_secs_f64())
}

/// `from` plus `retention`, whole epoch seconds (what DynamoDB's TTL reads).
fn expiry(from: f64, retention: Duration) -> Option<i64> {
    let at = from + retention.as_secs_f64();
    at.is_finite().then_some(at as i64)
}

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
}

/// The extra spawn-row attribute holding the intents packed after the row's own: a JSON
/// list of `[child_id, root_path, context]` (the context as the row's own, `json.dumps`).
/// A wide fan-out's intents (a child per item of a list) would take an item each, and one
/// transaction holds 100: packed, a thousand fit a few rows and the step stays one atomic
/// commit. harel's relay reads such a row as its first intent only.
pub const MORE_SPAWNS_ATTRIBUTE: &str = "more_spawns";

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
    pub(super) fn prepare(&self, data: String, commit: &Commit) -> Prepared {
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
        let timers = collapse_timers(commit.timers.clone());
        let marks = if self.on_item() {
            0
        } else {
            commit.processed_event_ids.len()
        };
        let traces = commit.traces.len() * if self.trace_max > 0 { 2 } else { 1 };
        let others = 1 + commit.emits.len() + marks + timers.len() + traces;
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
        }
    }

    /// Whether the marks live on the execution item ([`DedupeMarks::OnItem`]).
    pub(super) fn on_item(&self) -> bool {
        self.dedupe_marks == DedupeMarks::OnItem
    }

    fn exe_item(
        &self,
        exe: &Execution,
        data: &str,
        new: i64,
        trace_idx: Option<i64>,
        token: &str,
        recent: Option<&Recent>,
    ) -> Item {
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
        if let Some(recent) = recent {
            item.insert(RECENT_ATTRIBUTE.to_string(), recent.to_attribute());
        }
        item
    }

    /// Reject what DynamoDB would, before spending a call.
    pub(super) fn check_limits(&self, exe: &Execution, p: &Prepared, new: i64) -> Result<(), StoreError> {
        let exe_bytes = self.execution_put_bytes(exe, &p.data, new);
        if exe_bytes > MAX_ITEM_BYTES {
            return Err(too_large(
                &format!("execution {} item", exe.id),
                exe_bytes,
                MAX_ITEM_BYTES,
            ));
        }
        self.check_side_items(exe, p, exe_bytes)
    }

    /// The size DynamoDB counts for the execution put of `data` at version `new`, its
    /// trace index and (on the item layout) its window at their largest.
    pub(super) fn execution_put_bytes(&self, exe: &Execution, data: &str, new: i64) -> usize {
        let placeholder_token = "0".repeat(32);
        let mut item = self.exe_item(exe, data, new, Some(i64::MAX), &placeholder_token, None);
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
    pub(super) fn check_side_items(
        &self,
        exe: &Execution,
        p: &Prepared,
        exe_bytes: usize,
    ) -> Result<(), StoreError> {
        check_timer_numbers(exe, p)?;
        let on_item = self.on_item();
        let mut total = exe_bytes;
        let seq_bytes = 3 + 21;
        for (target, event) in &p.events {
            let bytes =
                seq_bytes + "target_id".len() + target.as_ref().map_or(1, String::len) + 5 + event.len();
            if bytes > MAX_ITEM_BYTES {
                return Err(too_large("an emitted event's outbox item", bytes, MAX_ITEM_BYTES));
            }
            total += bytes;
        }
        for row in &p.spawn_rows {
            let (child, root, ctx) = &p.spawns[row.start];
            let mut bytes = seq_bytes + 9 + exe.id.len() + 8 + child.len() + 9 + root.len() + 7 + ctx.len();
            if row.len() > 1 {
                bytes +=
                    MORE_SPAWNS_ATTRIBUTE.len() + more_spawns_json(&p.spawns[row.start + 1..row.end]).len();
            }
            if bytes > MAX_ITEM_BYTES {
                return Err(too_large(
                    &format!("the spawn item of child {child}"),
                    bytes,
                    MAX_ITEM_BYTES,
                ));
            }
            total += bytes;
        }
        for entry in &p.trace_entries {
            let bytes = 12 + exe.id.len() + 3 + 21 + 5 + entry.len();
            if bytes > MAX_ITEM_BYTES {
                return Err(too_large("the trace step item", bytes, MAX_ITEM_BYTES));
            }
            total += bytes;
        }
        let mark_items = if on_item { 0 } else { p.processed.len() };
        for event_id in p.processed.iter().take(mark_items) {
            total += 12 + exe.id.len() + 8 + event_id.len() + TTL_ATTRIBUTE.len() + 21;
        }
        if self.trace_max > 0 && p.trace_entries.len() > self.trace_max {
            // the ring delete of one of them would hit another's put in the same transaction
            return Err(StoreError::TooLarge(format!(
                "the commit of {} holds {} trace steps, more than the trace ring's {}",
                exe.id,
                p.trace_entries.len(),
                self.trace_max
            )));
        }
        let count = 1
            + p.events.len()
            + p.spawn_rows.len()
            + mark_items
            + p.timers.len()
            + p.trace_entries.len() * if self.trace_max > 0 { 2 } else { 1 };
        if count > MAX_TRANSACTION_ITEMS {
            return Err(StoreError::TooLarge(format!(
                "the commit of {} needs {count} transaction items, over DynamoDB's limit of \
                 {MAX_TRANSACTION_ITEMS} (too many emits, spawns or timers in one step)",
                exe.id
            )));
        }
        if total > MAX_TRANSACTION_BYTES {
            return Err(too_large(
                &format!("the commit of {}", exe.id),
                total,
                MAX_TRANSACTION_BYTES,
            ));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn plan(
        &self,
        exe: &Execution,
        p: &Prepared,
        old: i64,
        block: Option<Rows>,
        carried: Option<Rows>,
        trace_idx: Option<i64>,
        stored_idx: Option<i64>,
        generation: u32,
    ) -> Result<Plan, StoreError> {
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
            &generation.to_string(),
        ] {
            hasher.update(part.as_bytes());
            hasher.update([0u8]);
        }
        let token = to_hex(&hasher.finalize()[..16]);

        let mut item = self.exe_item(exe, &p.data, new, stored_idx, &token, p.recent.as_ref());
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
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(seq)")
                .build()
                .map_err(build_err)?;
            Ok(TransactWriteItem::builder().put(put).build())
        };
        let outbox_seqs: Vec<i64> = block.iter().flat_map(|b| b.outbox_seqs()).collect();
        let spawn_seqs: Vec<i64> = block.iter().flat_map(|b| b.spawn_seqs()).collect();
        let first_row = tx.len();
        for (i, (target, event)) in p.events.iter().enumerate() {
            tx.push(row_put_of(
                &t.outbox,
                HashMap::from([
                    ("seq".to_string(), n_i64(outbox_seqs[i])),
                    ("target_id".to_string(), s_or_null(target.as_deref())),
                    ("event".to_string(), s(event)),
                ]),
            )?);
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
            if row.len() > 1 {
                let rest = more_spawns_json(&p.spawns[row.start + 1..row.end]);
                item.insert(MORE_SPAWNS_ATTRIBUTE.to_string(), s(&rest));
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
        for op in &p.timers {
            match op {
                TimerOp::Schedule { path, fire_at } => tx.push(put_of(
                    &t.timers,
                    HashMap::from([
                        ("execution_id".to_string(), s(&exe.id)),
                        ("path".to_string(), s(path)),
                        ("fire_at".to_string(), n_f64("a timer's fire_at", *fire_at)?),
                        // the due index's partition key (see `due`)
                        (TIMER_SHARD_ATTRIBUTE.to_string(), s(timer_shard(&exe.id, path))),
                    ]),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn put(table: &str) -> TransactWriteItem {
        let put = Put::builder()
            .table_name(table)
            .item("id", s("x"))
            .build()
            .expect("a put");
        TransactWriteItem::builder().put(put).build()
    }

    #[test]
    fn a_refused_transaction_names_each_refused_action_in_dynamodbs_words() {
        let tx = vec![put("t_executions"), put("t_processed"), put("t_timers")];
        let reasons = vec![
            CancellationReason::builder().code("None").build(),
            CancellationReason::builder().build(),
            CancellationReason::builder()
                .code("ValidationError")
                .message("Number overflow. Attempting to store a number with magnitude larger than supported range")
                .build(),
        ];
        assert_eq!(
            refused_actions(&tx, &reasons),
            "TransactWriteItems cancelled [None, None, ValidationError]: action 3 (Put on t_timers): \
             ValidationError: Number overflow. Attempting to store a number with magnitude larger \
             than supported range"
        );
        // more reasons than actions (an emulator's answer): still every reason, no panic
        let reasons = vec![
            CancellationReason::builder().code("None").build(),
            CancellationReason::builder().code("ValidationException").build(),
        ];
        assert_eq!(
            refused_actions(&tx[..1], &reasons),
            "TransactWriteItems cancelled [None, ValidationException]: action 2: ValidationException"
        );
    }
}
