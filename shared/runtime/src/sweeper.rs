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
//! A page at a time: a sweep reads [`SWEEP_PAGE`] due timers in due order (the earliest
//! first across the due index's shards), fires them, then reads the next, until none is
//! due or its deadline is near ([`SweepBudget`]). What it holds is one page, however many
//! are due, and a sweep cut short has fired the most overdue; the next goes on.
//!
//! A suspended execution's timer stays armed (it fires once resumed), as in harel's
//! embedded runner: publishing it would only park the message until the DLQ took it.
//! `suspend` holds its timers out of the due listing (`stm_store::TimerOp::Hold`) and
//! leaving SUSPENDED lists them again, so a sweep does not read them at every run: 2×10^5
//! suspended executions with overdue timers kept every sweep from reaching a running
//! execution's timer. One the listing still gives (suspended by an older version, or
//! listed by the lagging index just before the hold) is read, kept armed, and counted in
//! [`SweepSummary::suspended`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt as _};
use stm_core::Status;
use stm_store::{DueCursor, DueTimer, ExecutionStore, StoreError};

use crate::queue::{OutgoingMessage, Queue};
use crate::telemetry::{self, TraceContext};
use tracing::Instrument;

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

/// How many executions' due timers one sweep fires at once (each two reads side by side,
/// a publish and a delete: about 27 ms in all, so one after another a sweep fired ~40
/// timers a second). Each of these slots takes the page's next execution as soon as its
/// last is done. At most two requests of each timer are in flight, 512 connections,
/// within Lambda's 1,024 file descriptors (*Lambda quotas*, "Function configuration,
/// deployment, and execution"). Until 2026-12-06: 32.
pub const SWEEP_CONCURRENCY: usize = 256;

/// How many due timers a sweep reads and fires at a time: what it holds is this page and
/// the due index's read-ahead (`stm_store::DueCursor`), whatever is due (about 1 MB).
/// Sixteen times [`SWEEP_CONCURRENCY`], so its slots stay busy through most of a page:
/// the next page is read once the last of this one is done, which keeps an execution's
/// timers in order across pages, and leaves the slots idle while the page's slowest
/// finish.
pub const SWEEP_PAGE: usize = 16 * SWEEP_CONCURRENCY;

/// How long before the invocation's deadline the scheduled sweep stops reading pages: the
/// page in hand is fired within it (sixteen rounds of [`SWEEP_CONCURRENCY`], each a few
/// round trips: about half a second, with the store's bounded retries).
pub const SWEEP_DEADLINE_MARGIN: Duration = Duration::from_secs(5);

/// What one sweep takes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepBudget {
    /// No page is read from this instant on (the page in hand is still fired): what is
    /// left waits for the next sweep, the earliest first.
    pub deadline: Option<Instant>,
    /// Timers read and fired at a time ([`SWEEP_PAGE`]).
    pub page: usize,
}

impl SweepBudget {
    /// No deadline, [`SWEEP_PAGE`] at a time.
    pub const UNBOUNDED: SweepBudget = SweepBudget {
        deadline: None,
        page: SWEEP_PAGE,
    };

    /// The scheduled sweep's: [`SWEEP_DEADLINE_MARGIN`] before the invocation's deadline.
    pub fn before(deadline: Option<Instant>) -> SweepBudget {
        SweepBudget {
            deadline: deadline.map(|d| d.checked_sub(SWEEP_DEADLINE_MARGIN).unwrap_or(d)),
            page: SWEEP_PAGE,
        }
    }

    fn spent(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

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
    /// The sweep reached its deadline with timers maybe still due: the next sweep goes on
    /// with them, the earliest first.
    pub cut: bool,
}

impl SweepSummary {
    fn add(&mut self, part: SweepSummary) {
        self.fired += part.fired;
        self.suspended += part.suspended;
        self.orphaned += part.orphaned;
        self.failed += part.failed;
        self.stale += part.stale;
    }
}

/// Fire every timer due at `now` (no deadline).
pub async fn sweep(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    now: f64,
) -> Result<SweepSummary, SweepError> {
    sweep_within(store, queue, now, SweepBudget::UNBOUNDED).await
}

/// Fire the timers due at `now`, a page at a time in due order, until none is left or the
/// budget's deadline comes: the earliest first across the index's shards, so a sweep cut
/// short has fired the most overdue, and what it holds is one page.
pub async fn sweep_within(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    now: f64,
    budget: SweepBudget,
) -> Result<SweepSummary, SweepError> {
    stm_aws::as_function("sweeper", async {
        let mut summary = SweepSummary::default();
        let mut cursor = DueCursor::default();
        let page_size = budget.page.max(1);
        loop {
            if budget.spent() {
                summary.cut = true;
                break;
            }
            let page = store.due_page(now, &mut cursor, page_size).await?;
            summary.due += page.len();
            let last = page.len() < page_size;
            fire_page(store, queue, page, &mut summary).await;
            if last {
                break;
            }
        }
        if summary.due > 0 {
            tracing::info!(
                due = summary.due,
                fired = summary.fired,
                suspended = summary.suspended,
                orphaned = summary.orphaned,
                failed = summary.failed,
                stale = summary.stale,
                cut = summary.cut,
                "sweep"
            );
        }
        Ok(summary)
    })
    .await
}

/// Fire one page: an execution's timers in order (earliest first, as the page gives them:
/// its Timeouts reach its group in that order), different executions side by side. The
/// page is done before the next is read, so the order holds across pages too.
async fn fire_page(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    page: Vec<DueTimer>,
    summary: &mut SweepSummary,
) {
    let mut by_execution: Vec<Vec<DueTimer>> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for timer in page {
        match index.get(timer.execution_id.as_str()) {
            Some(&i) => by_execution[i].push(timer),
            None => {
                index.insert(timer.execution_id.clone(), by_execution.len());
                by_execution.push(vec![timer]);
            }
        }
    }
    let mut groups = by_execution.into_iter();
    let mut fired = FuturesUnordered::new();
    // the slots: each runs one execution's timers at a time, then takes the next (the
    // simulator times a slot's requests one after another, the slots side by side)
    let strands = crate::relay::new_strands();
    let mut free: Vec<usize> = (0..SWEEP_CONCURRENCY).rev().collect();
    loop {
        while let Some(&slot) = free.last() {
            let Some(timers) = groups.next() else { break };
            free.pop();
            let work = fire_in_order(store, queue, timers);
            fired.push(async move {
                let part = crate::relay::in_strand(strands, slot, SWEEP_CONCURRENCY, work).await;
                (slot, part)
            });
        }
        let Some((slot, part)) = fired.next().await else {
            break;
        };
        free.push(slot);
        summary.add(part);
    }
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
        store.armed_timer_in_trace(&timer.execution_id, &timer.path),
        store.load(&timer.execution_id)
    );
    let trace = match armed {
        Ok(Some((fire_at, trace))) if fire_at == timer.fire_at => trace,
        Ok(armed) => {
            let armed = armed.map(|(fire_at, _)| fire_at);
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
    };
    fire_loaded(store, queue, timer, loaded, trace.as_deref(), summary).await;
}

/// [`fire_one`] with the timer's execution already read (the doorbell handler reads it
/// together with the armed timer, saving a round trip); its `Timeout` continues `trace`,
/// the arming commit's trace context.
pub(crate) async fn fire_loaded(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    timer: &DueTimer,
    loaded: Result<Option<stm_core::Execution>, StoreError>,
    trace: Option<&str>,
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
            // in the arming commit's trace: a `fire` span under it; the `Timeout` names
            // the arming commit as its sender (the fire span beside its record, as the
            // relay's, so a trace step's parent is always another step's span)
            let fired = trace
                .and_then(TraceContext::from_traceparent)
                .map(|armed| (armed, armed.child()));
            let span = fired.map_or_else(tracing::Span::none, |(armed, ctx)| {
                tracing::info_span!(
                    "fire",
                    execution_id = %timer.execution_id,
                    path = %timer.path,
                    trace_id = %telemetry::trace_id_field(&ctx),
                    span_id = %telemetry::span_id_field(&ctx),
                    parent_span_id = %telemetry::span_id_field(&armed),
                )
            });
            let sender = fired.map(|(armed, _)| armed.traceparent());
            let message = OutgoingMessage::timeout_in_trace(
                &timer.execution_id,
                &timer.path,
                timer.fire_at,
                sender.as_deref(),
            );
            let failures = queue
                .publish_batch(std::slice::from_ref(&message))
                .instrument(span)
                .await;
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
/// the schedule event's `time`, which may be late or replayed) that stops reading
/// [`SWEEP_DEADLINE_MARGIN`] before the invocation's `deadline`, its metrics logged.
pub async fn scheduled_sweep(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    now: f64,
    deadline: Option<Instant>,
) -> Result<SweepSummary, SweepError> {
    let summary = sweep_within(store, queue, now, SweepBudget::before(deadline)).await?;
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
