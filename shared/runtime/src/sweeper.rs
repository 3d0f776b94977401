//! The timer sweeper: due timers -> `Timeout` events on the execution's group -> the
//! `fire_at`-guarded delete.
//!
//! Publish before delete: a crash between the two re-sends the same `Timeout` (its event id
//! and deduplication id derive from execution, path and fire_at), which SQS or the worker's
//! dedupe mark drops. The guarded delete keeps a timer that was re-armed meanwhile.
//!
//! Confirm before publish: the due timers come from the timers' due index, a global
//! secondary index, and every read of a GSI is eventually consistent (AWS, "DynamoDB read
//! consistency": <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html>).
//! A timer cancelled, or re-armed by a state left and re-entered, an instant before the
//! sweep can still be listed with its old `fire_at`; its `Timeout` would time the new
//! visit out early. So each listed timer is read again, consistently (one `GetItem`, side
//! by side with the execution's), and fired only if it is still armed with the listed
//! `fire_at`; otherwise it is counted `stale` and left alone (the new arming fires when
//! due). A `Timeout` published and then overtaken by a re-entry is the worker's to ignore
//! (`Driver`'s stale-timeout check).
//!
//! A suspended execution's timer stays armed (it fires once resumed), as in harel's
//! embedded runner: publishing it would only park the message until the DLQ took it.

use std::collections::HashMap;

use futures_util::stream::{FuturesUnordered, StreamExt as _};
use stm_core::Status;
use stm_store::{DueTimer, ExecutionStore, StoreError};

use crate::queue::{OutgoingMessage, Queue};

/// What becomes of a due timer, given its execution as read now: the one rule both the
/// sweeper (which publishes the `Timeout`) and the embedded runner (which steps it inline)
/// follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimerFate {
    /// Deliver its `Timeout`, then delete it (guarded).
    Fire,
    /// Its execution is suspended: it stays armed and fires once resumed.
    KeepArmed,
    /// Its execution is gone (purged): delete it, deliver nothing.
    Orphaned,
}

impl TimerFate {
    pub(crate) fn of(exe: Option<&stm_core::Execution>) -> Self {
        match exe {
            Some(exe) if exe.status == Status::Suspended => TimerFate::KeepArmed,
            Some(_) => TimerFate::Fire,
            None => TimerFate::Orphaned,
        }
    }
}

/// Why a sweep stopped: the store could not list the due timers (one timer that cannot be
/// confirmed, published or deleted is no error: it is counted in [`SweepSummary::failed`]
/// and stays for the next sweep).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SweepError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SweepError {
    /// The Python exception harel raises for the same failure (the function's `errorType`).
    pub fn python_type(&self) -> &'static str {
        match self {
            SweepError::Store(e) => e.python_type(),
        }
    }
}

/// How many executions' due timers one sweep fires at once (each a load, a publish and a
/// delete: about 20 ms in all, so one after another a sweep fired ~50 timers a second).
pub const SWEEP_CONCURRENCY: usize = 32;

/// What one sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SweepSummary {
    /// Due timers found.
    pub due: usize,
    /// `Timeout` events published and timers deleted.
    pub fired: usize,
    /// Timers kept because their execution is suspended.
    pub suspended: usize,
    /// Timers of executions that no longer exist, deleted without an event.
    pub orphaned: usize,
    /// Timers whose publish or delete failed: they stay for the next sweep.
    pub failed: usize,
    /// Listed by the (eventually consistent) index but no longer armed with that
    /// `fire_at` (cancelled or re-armed since): nothing published.
    pub stale: usize,
}

/// Fire every timer due at `now`.
pub async fn sweep(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    now: f64,
) -> Result<SweepSummary, SweepError> {
    stm_aws::as_function("sweeper", async {
        let due = store.due_timers(now).await?;
        let mut summary = SweepSummary {
            due: due.len(),
            ..SweepSummary::default()
        };
        // an execution's timers in order (earliest first, as `due_timers` gives them: its
        // Timeouts reach its group in that order), different executions side by side
        let mut by_execution: Vec<Vec<DueTimer>> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for timer in &due {
            match index.get(timer.execution_id.as_str()) {
                Some(&i) => by_execution[i].push(timer.clone()),
                None => {
                    index.insert(&timer.execution_id, by_execution.len());
                    by_execution.push(vec![timer.clone()]);
                }
            }
        }
        let mut groups = by_execution.into_iter();
        let mut fired = FuturesUnordered::new();
        loop {
            while fired.len() < SWEEP_CONCURRENCY {
                match groups.next() {
                    Some(timers) => fired.push(fire_in_order(store, queue, timers)),
                    None => break,
                }
            }
            let Some(part) = fired.next().await else { break };
            summary.fired += part.fired;
            summary.suspended += part.suspended;
            summary.orphaned += part.orphaned;
            summary.failed += part.failed;
            summary.stale += part.stale;
        }
        if summary.due > 0 {
            tracing::info!(
                due = summary.due,
                fired = summary.fired,
                suspended = summary.suspended,
                orphaned = summary.orphaned,
                failed = summary.failed,
                stale = summary.stale,
                "sweep"
            );
        }
        Ok(summary)
    })
    .await
}

/// Fire one execution's due timers, one after another.
async fn fire_in_order(store: &dyn ExecutionStore, queue: &dyn Queue, timers: Vec<DueTimer>) -> SweepSummary {
    let mut part = SweepSummary::default();
    for timer in &timers {
        fire_one(store, queue, timer, &mut part).await;
    }
    part
}

/// Fire one due timer: its `Timeout` on the execution's group, then the guarded delete.
/// Only if it is still armed with `timer.fire_at` (a consistent read: the listing may be
/// stale, see the module docs); otherwise it is counted in `summary.stale`. A suspended
/// execution's timer stays; a gone execution's is deleted without an event. Failures are
/// counted in `summary.failed` (the timer stays for the next sweep).
pub(crate) async fn fire_one(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    timer: &DueTimer,
    summary: &mut SweepSummary,
) {
    // read together: one round trip, as the doorbell's check (the execution is only used
    // if the timer is still armed)
    let (armed, loaded) = tokio::join!(
        store.armed_timer(&timer.execution_id, &timer.path),
        store.load(&timer.execution_id)
    );
    match armed {
        Ok(Some(fire_at)) if fire_at == timer.fire_at => {}
        Ok(armed) => {
            tracing::info!(
                execution_id = %timer.execution_id, path = %timer.path, listed = timer.fire_at,
                armed = ?armed, "a stale due-index entry: the timer was cancelled or re-armed; not fired"
            );
            summary.stale += 1;
            return;
        }
        Err(err) => {
            tracing::warn!(
                execution_id = %timer.execution_id, path = %timer.path, error = %err,
                "could not confirm a due timer; it stays for the next sweep"
            );
            summary.failed += 1;
            return;
        }
    }
    fire_loaded(store, queue, timer, loaded, summary).await;
}

/// [`fire_one`] with the timer's execution already read (the doorbell handler reads it
/// together with the armed timer, saving a round trip).
pub(crate) async fn fire_loaded(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    timer: &DueTimer,
    loaded: Result<Option<stm_core::Execution>, StoreError>,
    summary: &mut SweepSummary,
) {
    let exe = match loaded {
        Ok(exe) => exe,
        Err(err) => {
            tracing::warn!(execution_id = %timer.execution_id, error = %err, "could not load a timer's execution");
            summary.failed += 1;
            return;
        }
    };
    match TimerFate::of(exe.as_ref()) {
        TimerFate::KeepArmed => {
            summary.suspended += 1;
            return;
        }
        TimerFate::Fire => {
            let message = OutgoingMessage::timeout(&timer.execution_id, &timer.path, timer.fire_at);
            let failures = queue.publish_batch(std::slice::from_ref(&message)).await;
            if let Some(failure) = failures.first() {
                tracing::warn!(
                    execution_id = %timer.execution_id, path = %timer.path, code = %failure.code,
                    error = %failure.message, "could not publish a Timeout; the timer stays"
                );
                summary.failed += 1;
                return;
            }
            summary.fired += 1;
        }
        TimerFate::Orphaned => summary.orphaned += 1,
    }
    if let Err(err) = store
        .delete_timer(&timer.execution_id, &timer.path, timer.fire_at)
        .await
    {
        // published but not deleted: the next sweep re-sends it, and that copy is dropped
        tracing::warn!(execution_id = %timer.execution_id, path = %timer.path, error = %err, "could not delete a fired timer");
        summary.failed += 1;
    }
}

/// One run of the scheduled sweeper function: a sweep at `now` (the function's clock, not
/// the schedule event's `time`, which may be late or replayed), its metrics logged.
pub async fn scheduled_sweep(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    now: f64,
) -> Result<SweepSummary, SweepError> {
    let summary = sweep(store, queue, now).await?;
    summary.metrics().emit();
    Ok(summary)
}

impl SweepSummary {
    /// The sweep as CloudWatch metrics (Embedded Metric Format).
    pub fn metrics(&self) -> crate::metrics::MetricSet {
        let mut m = crate::metrics::MetricSet::for_function("sweeper");
        m.count("TimersFired", self.fired as f64);
        m.count("TimersFailed", self.failed as f64);
        m.count("TimersSuspended", self.suspended as f64);
        m.count("TimersStale", self.stale as f64);
        m
    }
}
