//! The worker's side of coalescing: a run of consecutive records of one message group,
//! each an event for the same execution, is loaded once (the execution and every
//! record's processed mark, one call) and stepped in memory, in order, into as few
//! commits as the store's limits allow ([`crate::driver::Burst`]).
//!
//! Each record still goes through every rule it would meet alone (its plan), in order, on the
//! execution as the records before it left it: dedupe (a mark, or the same id earlier in
//! the run), the lifecycle gates (`SUSPENDED` parks it and holds back the rest of its
//! group, `CANCELLED`/`CANCELLING`/`PENDING` drain it), and the one-event path for a
//! broadcast to live regions or for the parking gate. Before any record that is not a
//! plain step, the steps gathered so far are written, so the order of commits, inline
//! flushes and acknowledgements is the records' order.
//!
//! Failure follows the batch rule: a failed commit fails the burst's first record (the
//! rest of its group is skipped and comes back, the whole burst is retried); a record
//! whose step fails fails after the steps before it are written; an inline flush that
//! cannot publish fails the last record of that commit (its redelivery is a duplicate,
//! which publishes everything pending first).

use std::time::{Duration, Instant};

use stm_core::{Event, Execution};
use stm_store::StoreError;

use super::{classify, log_unknown, Failed, Handled, Record, StepLog, Worker};
use crate::driver::{Burst, BurstStepError, BurstWritten, DriverError, Plan, StepReport};
use crate::queue::Incoming;
use crate::relay::RelaySummary;

/// A run of records that may be coalesced: their events, all for `target_id`, and where
/// the records are in the batch.
pub(super) struct Run {
    pub(super) target_id: String,
    events: Vec<Event>,
    pub(super) indices: Vec<usize>,
}

impl Worker {
    /// The run of records from `index` on that may be coalesced: the record at `index`
    /// and the later records of its message group, in order, up to the first that is not
    /// a well-formed event for the same execution; `None` (one record at a time) when
    /// coalescing is off or that is only one record. SQS returns a FIFO group's messages
    /// in order but need not place them side by side in a batch; the other groups' records
    /// in between are independent of this one, so stepping it first reorders nothing
    /// FIFO orders.
    pub(super) fn burst_at(&self, records: &[Record], index: usize) -> Option<Run> {
        if !self.settings.coalesce {
            return None;
        }
        let group = records.get(index)?.group_id.as_deref()?;
        let mut members = records
            .iter()
            .enumerate()
            .skip(index)
            .filter(|(_, r)| r.group_id.as_deref() == Some(group));
        // cheap test first: most records are the only one of their group in the batch
        let (first_at, first) = members.next()?;
        let (second_at, _) = members.next()?;
        let mut run: Option<Run> = None;
        for (at, record) in [(first_at, first)]
            .into_iter()
            .chain(std::iter::once((second_at, &records[second_at])))
            .chain(members)
        {
            let parsed = Incoming::parse(
                &record.body,
                record.group_id.as_deref(),
                record.kind.as_deref(),
                &record.message_id,
            );
            let Ok(Incoming::Event { target_id, event }) = parsed else {
                break;
            };
            match &mut run {
                None => {
                    run = Some(Run {
                        target_id,
                        events: vec![event],
                        indices: vec![at],
                    })
                }
                Some(run) if run.target_id == target_id => {
                    run.events.push(event);
                    run.indices.push(at);
                }
                Some(_) => break,
            }
        }
        run.filter(|run| run.events.len() >= 2)
    }

    /// Handle a run (see the module docs): the results of a prefix of its records, in
    /// order, ending at the first failure (or where the deadline stopped it); at least one.
    pub(super) async fn handle_burst(
        &self,
        run: &Run,
        deadline: Option<Instant>,
        flushed: &mut RelaySummary,
    ) -> Vec<Result<Handled, Failed>> {
        let ids: Vec<&str> = run.events.iter().map(|e| e.id.as_str()).collect();
        let (exe, marks) = match self.driver.store.load_for_events(&run.target_id, &ids).await {
            Ok(loaded) => loaded,
            Err(err) => return vec![Err(classify(err.into()))],
        };
        let Some(mut exe) = exe else {
            return run
                .events
                .iter()
                .map(|event| {
                    log_unknown(&run.target_id, event);
                    Ok(Handled::UnknownExecution)
                })
                .collect();
        };
        let mut pending = Pending::default();
        let mut results = Vec::with_capacity(run.events.len());
        for (k, event) in run.events.iter().enumerate() {
            if k > 0 && self.too_late(deadline) {
                // the rest is reported out of time by the batch loop
                break;
            }
            let duplicate = marks.get(k).copied().unwrap_or(false) || ids[..k].contains(&event.id.as_str());
            let (plan, machine) = self.plan(&exe, event, duplicate);
            // a plain step joins the burst; anything else takes the one-event path
            let plain = match (&plan, &machine) {
                (Plan::Step, Ok(defn)) => Some(defn.clone()),
                _ => None,
            };
            if let Some(defn) = plain {
                if pending.burst.is_empty() {
                    pending.first = k;
                }
                let from = exe.active_path.clone();
                let started = Instant::now();
                match self
                    .driver
                    .burst_step(&defn, &mut exe, event, &mut pending.burst)
                    .await
                {
                    Ok(written) => {
                        pending
                            .steps
                            .push((StepLog::after(from, &exe), started.elapsed()));
                        if let Some(written) = written {
                            if !self
                                .written(&exe, run, &mut pending, written, &mut results, flushed)
                                .await
                            {
                                return results;
                            }
                        }
                    }
                    Err(BurstStepError::Step(err)) => {
                        if self
                            .write(&mut exe, run, &mut pending, &mut results, flushed)
                            .await
                        {
                            results.push(Err(classify(err)));
                        }
                        return results;
                    }
                    Err(BurstStepError::Commit(err)) => {
                        self.not_written(run, &mut pending, err, &mut results, flushed)
                            .await;
                        return results;
                    }
                }
                continue;
            }
            // not a plain step: what was gathered goes first
            if !self
                .write(&mut exe, run, &mut pending, &mut results, flushed)
                .await
            {
                return results;
            }
            let result = self.carry_out(plan, machine, &mut exe, event, flushed).await;
            let failed = result.is_err();
            results.push(result);
            if failed {
                return results;
            }
        }
        self.write(&mut exe, run, &mut pending, &mut results, flushed)
            .await;
        results
    }

    /// Commit the gathered steps and report them ([`Self::written`]); `false` when the
    /// run must stop (the failure is the last result, or the rest of the run was handled
    /// one record at a time).
    async fn write(
        &self,
        exe: &mut Execution,
        run: &Run,
        pending: &mut Pending,
        results: &mut Vec<Result<Handled, Failed>>,
        flushed: &mut RelaySummary,
    ) -> bool {
        if pending.burst.is_empty() {
            return true;
        }
        match self.driver.commit_burst(exe, &mut pending.burst).await {
            Ok(written) => self.written(exe, run, pending, written, results, flushed).await,
            Err(err) => {
                self.not_written(run, pending, err, results, flushed).await;
                false
            }
        }
    }

    /// A commit of gathered steps failed and wrote nothing. Usually its first record
    /// fails: the rest of the group is skipped and the whole burst comes back. But a
    /// commit the store refuses whatever the retry (one step over an item's or a
    /// transaction's limits) would come back the same every time and hold the group until
    /// the dead-letter queue: the run's records from the first gathered one on are then
    /// handled one at a time instead, where such a step fails its execution with the
    /// reason ([`Driver::run_step`](crate::driver::Driver::run_step)) and the others step
    /// as they would alone.
    async fn not_written(
        &self,
        run: &Run,
        pending: &mut Pending,
        err: DriverError,
        results: &mut Vec<Result<Handled, Failed>>,
        flushed: &mut RelaySummary,
    ) {
        pending.steps.clear();
        if !matches!(err, DriverError::Store(StoreError::TooLarge(_))) {
            results.push(Err(classify(err)));
            return;
        }
        tracing::info!(execution_id = %run.target_id, error = %err, "a coalesced commit is over the store's limits; stepping its records one at a time");
        for event in &run.events[pending.first..] {
            let result = self.handle_event(&run.target_id, event, flushed).await;
            let failed = result.is_err();
            results.push(result);
            if failed {
                return;
            }
        }
    }

    /// Log, ring and flush what one commit of the burst wrote (the oldest gathered
    /// steps), and record their results.
    async fn written(
        &self,
        exe: &Execution,
        run: &Run,
        pending: &mut Pending,
        written: BurstWritten,
        results: &mut Vec<Result<Handled, Failed>>,
        flushed: &mut RelaySummary,
    ) -> bool {
        let BurstWritten {
            steps: reports,
            armed_timers,
        } = written;
        let count = reports.len();
        let first = pending.first;
        let steps: Vec<(StepLog, Duration)> = pending.steps.drain(..count.min(pending.steps.len())).collect();
        pending.first += count;
        let mut merged = StepReport::default();
        for (i, report) in reports.into_iter().enumerate() {
            let event = &run.events[first + i];
            if let Some((step, took)) = steps.get(i) {
                let step = StepLog {
                    version: exe.version,
                    ..step.clone()
                };
                step.log(exe, event, 0, *took);
                if let Some(reason) = &report.dropped {
                    self.log_dropped(exe, event, reason);
                }
            }
            results.push(Ok(Handled::Processed {
                execution_id: exe.id.clone(),
                status: steps.get(i).map_or(exe.status, |(step, _)| step.status),
            }));
            merged.absorb(report);
        }
        merged.armed_timers = armed_timers;
        self.ring(&exe.id, &merged).await;
        if let Err(why) = self.flush(&exe.id, &merged, flushed).await {
            // committed, but not all published: the last record of the commit comes back
            // as a duplicate, which publishes everything pending before the group goes on
            results.pop();
            results.push(Err(why));
            return false;
        }
        true
    }
}

/// The steps gathered and not written yet.
#[derive(Default)]
struct Pending {
    burst: Burst,
    /// The index in the run of the first gathered step's record.
    first: usize,
    /// Each gathered step's log line and how long it took.
    steps: Vec<(StepLog, Duration)>,
}
