//! The commit path: the limits checked before any call ([`limits`]), the side items
//! serialized ([`prepare`]), the request with its idempotency token ([`plan`]), one
//! attempt of it and the classification of its failures ([`send`]), and here the loop
//! of attempts: conflicts told from our own landed retries, a stale trace slot or a taken
//! seq block retried at once, transient faults with backoff.

mod limits;
mod plan;
mod prepare;
mod send;

use stm_core::Execution;

use super::item::{get_i64, get_s, Item};
use super::recent::Recent;
use super::rows::{self, Rows, ROWS_ATTRIBUTE};
use super::schema::{STATE_KEY_ATTRIBUTE, STATE_SINCE_ATTRIBUTE};
use super::{random_u64, DynamoDbStore, COMMIT_TOKEN_ATTRIBUTE, RECENT_ATTRIBUTE};
use crate::states::StateEntry;
use crate::{Commit, StoreError, Written};
use plan::PlanInput;
pub(super) use prepare::MORE_SPAWNS_ATTRIBUTE;
use send::Attempt;

/// What a commit carries over from the stored item: the processed window (the item
/// layout), the last rows block, the state index entry.
type CarriedOver = (Option<Recent>, Option<Rows>, Option<StateEntry>);

impl DynamoDbStore {
    /// [`ExecutionStore::commit`](crate::ExecutionStore::commit): check the limits, take
    /// the rows' seqs and the trace slot, then send the request until it lands, is refused
    /// for good, or loses the CAS (see the module docs of `dynamodb`).
    pub(in crate::dynamodb) async fn commit_execution(
        &self,
        exe: &mut Execution,
        commit: Commit,
    ) -> Result<Written, StoreError> {
        let old = exe.version;
        let new = old + 1;
        exe.version = new;
        let data = exe.to_json();
        exe.version = old;
        let mut prepared = self.prepare(exe, data, &commit);
        self.check_limits(exe, &prepared, new)?;
        let (window, previous_rows, previous_state) = self.carried_over(&exe.id, old).await?;
        // the state index entry: its time in the state carries over while the state stays
        let state = self
            .state_index
            .then(|| StateEntry::at_commit(exe, previous_state.as_ref(), super::due::wall_now()))
            .flatten();
        // on the item layout the marks ride in the execution put: the window it held, plus
        // this commit's
        prepared.recent = window.map(|previous| previous.with(&prepared.processed));
        // the rows' block follows the execution's last one (see `rows`); the item keeps
        // recording the last block through commits that write no rows
        let next_block = |floor: Option<i64>| {
            let (events, spawns) = (prepared.events.len(), prepared.spawn_rows.len());
            (events + spawns > 0).then(|| Rows::next(floor, events, spawns, rows::now_millis(), random_u64()))
        };
        let block = next_block(Rows::floor(previous_rows));

        let hint = self.hint(&exe.id, old).or(if old == 0 { Some(-1) } else { None });
        // the index of the commit's first trace step; the others follow it
        let trace_idx = match (prepared.trace_entries.is_empty(), hint) {
            (true, _) => None,
            (false, Some(last)) => Some(last + 1),
            (false, None) => Some(self.max_trace_idx(&exe.id).await? + 1),
        };
        // A new token (generation) for every request after one that was definitely refused;
        // the same request and token again after one that may have landed. Every token
        // sent is remembered: finding one of them on the stored item means that attempt
        // landed.
        let mut input = PlanInput {
            exe,
            prepared: &prepared,
            old,
            block,
            carried: previous_rows,
            state: state.as_ref(),
            trace_idx,
            stored_idx: prepared.last_trace_idx(trace_idx).or(hint),
            generation: 0,
        };
        let mut plan = self.plan(&input)?;
        let mut tokens_sent: Vec<String> = Vec::new();
        let mut attempt = 0u32;
        let mut slot_retries = 0u32;
        let mut seq_retries = 0u32;
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
                    self.forget_hint(&exe.id);
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
                    input.trace_idx = Some(self.max_trace_idx(&exe.id).await? + 1);
                    input.stored_idx = prepared.last_trace_idx(input.trace_idx);
                    input.generation += 1;
                    plan = self.plan(&input)?;
                }
                Attempt::TraceSlotTaken => {
                    return Err(StoreError::backend(format!(
                        "the trace slot of {} stayed taken after {slot_retries} re-reads",
                        exe.id
                    )))
                }
                Attempt::SeqTaken if seq_retries < 5 => {
                    // another commit's block met ours (same millisecond, same random bits):
                    // nothing was written; a new block
                    seq_retries += 1;
                    attempt -= 1;
                    let floor = input.block.map(|b| b.floor_after_collision(random_u64()));
                    input.block = next_block(floor);
                    input.generation += 1;
                    plan = self.plan(&input)?;
                }
                Attempt::SeqTaken => {
                    return Err(StoreError::retryable(format!(
                        "the seqs of {}'s rows were taken {seq_retries} times in a row",
                        exe.id
                    )))
                }
                Attempt::Retry { msg, maybe_applied } => {
                    if attempt >= self.retry.max_attempts.max(1) {
                        return Err(StoreError::retryable(format!("{msg} (after {attempt} attempts)")));
                    }
                    let pause = self.retry.backoff(attempt);
                    if !stm_aws::time_for(pause + stm_aws::OPERATION_TIMEOUT) {
                        // another attempt could outlast the invocation: SQS redelivers
                        // the record instead, with all its time
                        return Err(StoreError::retryable(format!(
                            "{msg} (after {attempt} attempts; no time for another before the \
                             invocation's deadline)"
                        )));
                    }
                    tracing::debug!(id = %exe.id, attempt, %msg, maybe_applied, "transient commit failure, retrying");
                    tokio::time::sleep(pause).await;
                    if !maybe_applied {
                        input.generation += 1;
                        plan = self.plan(&input)?;
                    }
                }
                Attempt::Fail(err) => return Err(err),
            }
        }
        let (block, stored_idx) = (input.block, input.stored_idx);
        exe.version = new;
        self.remember_hint(
            &exe.id,
            new,
            stored_idx,
            prepared.recent,
            block.or(previous_rows),
            state,
        );
        // each intent's seq is its row's (a packed row holds several)
        Ok(block.map_or_else(Written::default, |b| Written {
            outbox: b.outbox_seqs().collect(),
            spawns: b
                .spawn_seqs()
                .zip(&prepared.spawn_rows)
                .flat_map(|(seq, row)| std::iter::repeat_n(seq, row.len()))
                .collect(),
        }))
    }

    /// What a commit from version `old` of `id` carries over from the stored item: the
    /// state index entry whose time in the state it keeps, the
    /// processed window it continues ([`DedupeMarks::OnItem`](super::DedupeMarks::OnItem) only) and the rows block the
    /// next one follows. Read (one `GetItem` of both) only when no load of this store left
    /// them as a hint. A missing item or one at another version gives what the commit's CAS
    /// will refuse anyway.
    async fn carried_over(&self, id: &str, old: i64) -> Result<CarriedOver, StoreError> {
        let on_item = self.on_item();
        if old == 0 {
            return Ok((on_item.then(Recent::default), None, None));
        }
        let window = on_item.then(|| self.recent_hint(id, old));
        if let (Some(rows), Some(state), None | Some(Some(_))) =
            (self.rows_hint(id, old), self.state_hint(id, old), &window)
        {
            return Ok((window.flatten(), rows, state));
        }
        let attributes: &[&str] = if on_item {
            &[
                RECENT_ATTRIBUTE,
                ROWS_ATTRIBUTE,
                STATE_KEY_ATTRIBUTE,
                STATE_SINCE_ATTRIBUTE,
            ]
        } else {
            &[ROWS_ATTRIBUTE, STATE_KEY_ATTRIBUTE, STATE_SINCE_ATTRIBUTE]
        };
        let Some(item) = self.get_execution_attributes(id, attributes).await? else {
            return Ok((on_item.then(Recent::default), None, None));
        };
        let window = if on_item {
            Some(Recent::of_item(&item, id)?.unwrap_or_else(Recent::carried_over))
        } else {
            None
        };
        Ok((window, Rows::of_item(&item, id)?, StateEntry::of_item(&item)))
    }

    /// The stored version and commit token of `id` (the conflict fallback).
    async fn stored_version(&self, id: &str) -> Result<Option<Item>, StoreError> {
        self.get_execution_attributes(id, &["version", COMMIT_TOKEN_ATTRIBUTE])
            .await
    }
}
