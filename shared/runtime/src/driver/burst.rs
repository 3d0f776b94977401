//! Coalescing: consecutive events of one execution stepped in memory, in order, and
//! written in one commit, so a burst costs one load and one commit instead of one of each
//! per event.
//!
//! Each step is the step it would be alone (the same engine run, actions, idempotency
//! keys, trace step and processed mark); only the writes are merged: the marks and trace
//! steps one per event, every step's outbox entries and spawn intents in order, the timer
//! ops in order (the store keeps the last per path). The execution's `version` therefore
//! counts commits, not events. Where the next step would take the commit over the
//! backend's limits ([`ExecutionStore::check_commit`]: on DynamoDB a transaction's 100
//! items and 4 MB), the steps before it are written first and the burst goes on from it.
//!
//! [`ExecutionStore::check_commit`]: stm_store::ExecutionStore::check_commit

use stm_core::{Definition, Event, Execution};
use stm_store::Commit;

use super::{armed, outbox_entries, spawn_entries, Driver, DriverError, StepReport, Undo};

/// Steps of one execution applied in memory and not yet written.
#[derive(Debug, Default)]
pub struct Burst {
    commit: Commit,
    /// Each step's report and how many of the commit's emits and spawns are its own.
    steps: Vec<(StepReport, usize, usize)>,
}

impl Burst {
    pub fn new() -> Self {
        Burst::default()
    }

    /// How many steps wait to be written.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

/// What one commit of a burst wrote.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct BurstWritten {
    /// One report per step, in order, each with its own outbox entries.
    pub steps: Vec<StepReport>,
    /// The timers the commit left armed: the last op per path over all its steps, as the
    /// store applies them (a later step's cancel leaves an earlier arm out).
    pub armed_timers: Vec<(String, f64)>,
}

/// Why [`Driver::burst_step`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BurstStepError {
    /// The event's own step failed (an engine or action-host error that fails the
    /// record): the execution is as it was before it and the burst is untouched.
    #[error(transparent)]
    Step(DriverError),
    /// Writing the earlier steps to make room failed: none of them is written, the burst
    /// is empty, and the execution must be reloaded before it is stepped again.
    #[error(transparent)]
    Commit(DriverError),
}

/// How far each part of a commit reaches, to split it again.
struct Lengths {
    emits: usize,
    marks: usize,
    timers: usize,
    spawns: usize,
    traces: usize,
    unpark: usize,
}

fn lengths(c: &Commit) -> Lengths {
    Lengths {
        emits: c.emits.len(),
        marks: c.processed_event_ids.len(),
        timers: c.timers.len(),
        spawns: c.spawns.len(),
        traces: c.traces.len(),
        unpark: c.unpark.len(),
    }
}

/// The parts of `c` past `at` (what was absorbed after it), taken out of `c`.
fn split_off(c: &mut Commit, at: &Lengths) -> Commit {
    Commit {
        emits: c.emits.split_off(at.emits),
        processed_event_ids: c.processed_event_ids.split_off(at.marks),
        timers: c.timers.split_off(at.timers),
        spawns: c.spawns.split_off(at.spawns),
        traces: c.traces.split_off(at.traces),
        unpark: c.unpark.split_off(at.unpark),
        // a burst never parks an event, nor ends a run without stepping one
        park: None,
        ends_parking: false,
        trace_context: c.trace_context.clone(),
    }
}

impl Driver {
    /// Step `event` on `exe` (on `defn`, its version; the event's plan a
    /// [`Plan::Step`](super::Plan::Step)) into
    /// `burst`, written later by [`commit_burst`](Self::commit_burst). Returns what it
    /// had to write first, when this step would have taken the commit over the store's
    /// limits (usually nothing).
    pub async fn burst_step(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: &Event,
        burst: &mut Burst,
    ) -> Result<Option<BurstWritten>, BurstStepError> {
        let step = self.burst_step_unparking(defn, exe, event, burst, None).await?;
        Ok(step.map(|(written, _)| written))
    }

    /// [`burst_step`](Self::burst_step) of a parked event released from its row: its
    /// commit deletes the row (`unpark`). When the steps before it had to be written
    /// first, also the execution as that commit left it (as it was before this step, at
    /// the version `exe` now has).
    pub(crate) async fn burst_step_unparking(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: &Event,
        burst: &mut Burst,
        unpark: Option<stm_store::Unpark>,
    ) -> Result<Option<(BurstWritten, Execution)>, BurstStepError> {
        let before = exe.clone();
        // a stale Timeout is judged against the burst's own timer ops before the table's
        let step = match self
            .prepare_checked(
                defn,
                exe,
                Some(event),
                Undo::Snapshot(&before),
                &burst.commit.timers,
            )
            .await
        {
            Ok(mut step) => {
                step.commit.unpark.extend(unpark);
                step
            }
            Err(err) => {
                *exe = before;
                return Err(BurstStepError::Step(err));
            }
        };
        let mark = lengths(&burst.commit);
        let emits = step.commit.emits.len();
        let spawns = step.commit.spawns.len();
        burst.commit.absorb(step.commit);
        if burst.steps.is_empty() || self.store.check_commit(exe, &burst.commit).is_ok() {
            burst.steps.push((step.report, emits, spawns));
            return Ok(None);
        }
        // over the limit with this step: write the steps before it, on the execution as
        // it was before it, and go on from this one (alone, it is checked at its commit)
        let this = split_off(&mut burst.commit, &mark);
        let mut earlier = before;
        let written = self
            .commit_burst(&mut earlier, burst)
            .await
            .map_err(BurstStepError::Commit)?;
        exe.version = earlier.version;
        burst.commit = this;
        burst.steps.push((step.report, emits, spawns));
        Ok(Some((written, earlier)))
    }

    /// Write the burst's steps in one commit (CAS on `exe.version`, bumped once) and
    /// empty it. On an error nothing of the burst is written, and it is empty all the same.
    pub async fn commit_burst(
        &self,
        exe: &mut Execution,
        burst: &mut Burst,
    ) -> Result<BurstWritten, DriverError> {
        if burst.steps.is_empty() {
            return Ok(BurstWritten::default());
        }
        let commit = std::mem::take(&mut burst.commit);
        let steps = std::mem::take(&mut burst.steps);
        let emits = commit.emits.clone();
        let spawns = commit.spawns.clone();
        let armed_timers = armed(&commit.timers);
        let written = self.store.commit(exe, commit).await?;
        let mut entries = outbox_entries(&written.outbox, emits).into_iter();
        let mut spawn_rows = spawn_entries(&exe.id, &written.spawns, spawns).into_iter();
        let steps = steps
            .into_iter()
            .map(|(mut report, emits, spawns)| {
                report.outbox = entries.by_ref().take(emits).collect();
                report.outbox_seqs = report.outbox.iter().map(|e| e.seq).collect();
                report.spawns = spawn_rows.by_ref().take(spawns).collect();
                report
            })
            .collect();
        Ok(BurstWritten { steps, armed_timers })
    }
}
