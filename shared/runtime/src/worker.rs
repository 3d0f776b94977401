//! The worker: one SQS FIFO batch -> statechart steps, under the FIFO batch rules below.
//!
//! Per record, in order: parse; a spawn intent creates (and starts) the child
//! idempotently; an event is loaded with its processed mark (`load_for_event`, one store
//! call) and its [`plan`] carried out, delivering by queue:
//! - unknown execution or already processed: acknowledged as a no-op (a duplicate first
//!   publishes the execution's last block of rows again);
//! - lifecycle: `SUSPENDED` parks the event on the execution's item until `resume` (only
//!   an event the item has no room for waits in SQS, hidden and reported failed),
//!   `CANCELLED` drains, `CANCELLING` drains everything but `Cancel`, `PENDING` drains
//!   everything but `Start` (as harel's worker does);
//! - a version not deployed parks it; parked events are released first, each commit's
//!   rows published before the next commit;
//! - a domain event for a parent with live regions is broadcast: one outbox entry per
//!   region, committed with the parent's processed mark;
//! - otherwise the driver runs the engine and the actions and commits once with the
//!   CAS. An action error nothing in the model handles fails the execution (`FAILED` +
//!   `error`), which is a committed step, not a failed record.
//!
//! Every dropped event gets an info line with a `reason` field: `event dropped: …` for the
//! lifecycle drains above, and `ID did not take KIND` for what the engine took no
//! transition on (a DONE or FAILED execution, a `Start` for a started one, a domain event
//! nothing in the active configuration takes: most often a broadcast reaching a region
//! whose state does not take it, which is normal); that step still commits, as harel's does.
//!
//! **Coalescing** (`WorkerSettings::coalesce`, on by default; module `burst`): the records
//! of one message group in a batch that are events for the same execution are loaded
//! once ([`stm_store::ExecutionStore::load_for_events`]: the execution and every record's
//! mark) and stepped in memory, in order, each under every rule above, into one commit
//! (several where the store's limits cut it). The execution's `version` then counts
//! commits, not events; each event still gets its own processed mark and trace step, and
//! the inline flush publishes the commit's entries in order.
//!
//! After each commit the **inline flush** publishes that commit's outbox and spawn
//! entries and acks them. If part of them cannot be published, the record is reported
//! failed although its step is committed: the redelivery is a duplicate that publishes
//! everything pending, in order, before the group's next event (`Worker::flush`).
//!
//! **The batch rule** (Powertools' `SqsFifoPartialProcessor` with `skip_group_on_error`).
//! A poison message, a lost CAS (`StoreConflict`), a throttled or failing store and a
//! definition this worker does not have are failed records. Once a record fails, it and
//! every later record of *its message group* are reported (the later ones as
//! [`Failed::Skipped`], never attempted), so FIFO order within a group never breaks; the
//! records of other groups go on being processed, because SQS FIFO orders messages only
//! within a group, and reporting them too would only make them age toward the
//! dead-letter queue behind failures that are not theirs. The set of failed groups is a
//! local of one [`Worker::handle_batch_until`] call, never state of the worker: kept
//! across invocations it would hold back a group whose failure was already redelivered
//! (the bug of Powertools TypeScript issue 3673). A record without a `MessageGroupId`
//! counts as the group `""` (only a foreign producer or a standard queue sends one; an
//! event without a group is poison anyway).
//!
//! **Release.** A reported record is hidden for a time chosen by why it failed
//! (`ChangeMessageVisibility`), and every receive counts toward the queue's
//! `maxReceiveCount` (100 in the template), after which SQS dead-letters it; see
//! `release_seconds`:
//! - a throttle, a store fault or an error: `retry_seconds` doubling with the receive
//!   count up to `retry_max_seconds` (1 s to 5 min: 100 receives take ~7.7 h, so a
//!   sustained throttle is ridden out instead of dead-lettered within minutes);
//! - a lost CAS: at once for its first `QUICK_CONFLICT_RECEIVES` (3) receives (someone else
//!   moved the execution; the retry usually wins), then the same back-off;
//! - `SUSPENDED`: the park back-off (5 s to 15 min); a poison message: 10 s;
//! - a skipped record: the delay of the failed record of its group (FIFO cannot hand it
//!   out before that record anyway; released at once it would only burn a receive);
//! - a record not started for lack of time ([`Failed::OutOfTime`]): at once.
//!
//! **The invocation deadline.** [`Worker::handle_batch_until`] checks the time left before
//! each record (but the first, so every invocation makes progress): below
//! `WorkerSettings::record_reserve` it stops, and the records left are reported as
//! [`Failed::OutOfTime`] and released at once. One slow record then costs only the records
//! behind it a redelivery, instead of timing out the invocation, whose committed records
//! would all be redelivered (as duplicates) with the rest.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use stm_core::{Definition, Event, Execution, Status};

use crate::doorbell::Doorbell;
use crate::driver::{plan, Arrival, Driver, DriverError, Plan, SpawnParents, StepReport};
use crate::queue::{Incoming, Queue};
use crate::relay::{self, RelaySummary};
use crate::telemetry;

// coalescing a run of records for one execution into few commits
mod burst;
mod logging;
mod outcome;
mod release;

use logging::log_unknown;
pub(crate) use logging::StepLog;
use outcome::{classify, log_failure};
pub use outcome::{BatchOutcome, Cause, Failed, Handled, Record, RecordError};
pub(crate) use release::release_seconds;
pub use release::retry_seconds;

/// How the worker treats what it cannot finish now.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSettings {
    /// Publish each commit's outbox/spawns right after it (else only the relay does).
    pub inline_flush: bool,
    /// Coalesce a burst: consecutive records of one execution in a batch are stepped in
    /// memory, in order, with one load and one commit (module docs).
    pub coalesce: bool,
    /// How long a message for a `SUSPENDED` execution is first hidden before it is
    /// re-checked; each further receive doubles it, up to `suspend_recheck_max_seconds`.
    pub suspend_recheck_seconds: i32,
    /// The longest a parked message is hidden at a time (SQS allows 12 hours).
    pub suspend_recheck_max_seconds: i32,
    /// How long a poison message is hidden between its receives.
    pub poison_retry_seconds: i32,
    /// How long a record that failed for a transient reason (a throttle, a store fault)
    /// or an error is first hidden; each further receive doubles it, up to
    /// `retry_max_seconds`. 0 retries at once.
    pub retry_seconds: i32,
    /// The longest such a record is hidden at a time (SQS allows 12 hours).
    pub retry_max_seconds: i32,
    /// The invocation time kept for one record: with less left before the deadline, no
    /// further record is started ([`Failed::OutOfTime`]).
    pub record_reserve: Duration,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            inline_flush: true,
            coalesce: true,
            suspend_recheck_seconds: 5,
            suspend_recheck_max_seconds: 900,
            poison_retry_seconds: 10,
            retry_seconds: 1,
            retry_max_seconds: 300,
            // one record's worst case without a slow remote action: the load (one
            // BatchGetItem), the commit (one TransactWriteItems) and the inline flush (a
            record_reserve: record_reserve(crate::remote::DEFAULT_TIMEOUT),
        }
    }
}

/// The time one more record may need at worst: one remote action running into its
/// `action_timeout`, plus one store or queue call running into the SDK's operation timeout.
/// A typical record takes milliseconds; the reserve is for the one that stalls, so it can
/// still finish (and its commit be acknowledged) before Lambda's deadline.
/// `shared/deploytest/tests/template/functions.rs` checks it fits inside the worker's timeout.
pub fn record_reserve(action_timeout: Duration) -> Duration {
    action_timeout + stm_aws::OPERATION_TIMEOUT
}

/// The worker: the driver, the queue, the settings. Build once per process.
#[derive(Clone)]
pub struct Worker {
    pub driver: Driver,
    pub queue: Arc<dyn Queue>,
    pub settings: WorkerSettings,
    /// Precise timers: where the doorbells for near timers go (`None`: the sweep only).
    pub doorbell: Option<Arc<dyn Doorbell>>,
    /// Where the inline flush puts status events (`None`: they wait for the relay).
    pub status_bus: Option<Arc<dyn crate::status::StatusBus>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("driver", &self.driver)
            .field("settings", &self.settings)
            .field("doorbell", &self.doorbell.is_some())
            .field("status_bus", &self.status_bus)
            .finish_non_exhaustive()
    }
}

impl Worker {
    pub fn new(driver: Driver, queue: Arc<dyn Queue>, settings: WorkerSettings) -> Self {
        Worker {
            driver,
            queue,
            settings,
            doorbell: None,
            status_bus: None,
        }
    }

    /// Put the status events its commits write ([`crate::status`]) on `bus` in the inline
    /// flush, as it publishes their other rows.
    pub fn with_status_bus(mut self, bus: Arc<dyn crate::status::StatusBus>) -> Self {
        self.status_bus = Some(bus);
        self
    }

    /// Ring a doorbell for every timer a commit arms within the next 15 minutes
    /// ([`crate::doorbell`]).
    pub fn with_doorbell(mut self, doorbell: Arc<dyn Doorbell>) -> Self {
        self.doorbell = Some(doorbell);
        self
    }

    /// Best effort: a doorbell that is not sent leaves its timer to the sweep.
    async fn ring(&self, execution_id: &str, report: &StepReport) {
        let Some(doorbell) = &self.doorbell else {
            return;
        };
        if report.armed_timers.is_empty() {
            return;
        }
        let now = self.driver.clock.now();
        let near = crate::doorbell::near_timers(execution_id, &report.armed_timers, now);
        if !near.is_empty() {
            doorbell.ring(&near, now).await;
        }
    }

    /// Handle `records` in order under the FIFO batch rule, with no deadline.
    pub async fn handle_batch(&self, records: &[Record]) -> BatchOutcome {
        self.handle_batch_until(records, None).await
    }

    /// One invocation's batch, as the Lambda handler and the local event source run it:
    /// [`Worker::handle_batch_until`], its metrics logged (Embedded Metric Format), and the
    /// message ids to report in `batchItemFailures`.
    pub async fn handle_invocation(&self, records: &[Record], deadline: Option<Instant>) -> Vec<String> {
        let outcome = self.handle_batch_until(records, deadline).await;
        outcome.metrics().emit();
        outcome.failed_ids()
    }

    /// Handle `records` in order under the FIFO batch rule (module docs): a failure holds
    /// back only the later records of its own group; and once less than
    /// `record_reserve` is left before `deadline`, the records not started yet are
    /// reported [`Failed::OutOfTime`].
    pub async fn handle_batch_until(&self, records: &[Record], deadline: Option<Instant>) -> BatchOutcome {
        let work = stm_aws::as_function("worker", async {
            let mut outcome = BatchOutcome::default();
            // group -> the delay its failed record was released with. A local: it must die
            // with this invocation (Powertools TypeScript issue 3673 kept it in the processor
            // and held back the next invocation's records of a once-failed group)
            let mut failed_groups: HashMap<&str, i32> = HashMap::new();
            let mut out_of_time = false;
            // the parents this batch's spawn intents read (a fan-out's arrive together)
            let mut parents = SpawnParents::default();
            // what a burst decided for its later records, each reported at its own turn
            let mut decided: Vec<Option<Result<Handled, Failed>>> = records.iter().map(|_| None).collect();
            for (index, record) in records.iter().enumerate() {
                if let Some(result) = decided[index].take() {
                    outcome.records.push((record.message_id.clone(), result));
                    continue;
                }
                let group = record.group_id.as_deref().unwrap_or("");
                if let Some(&seconds) = failed_groups.get(group) {
                    let span = record_span(record);
                    span.in_scope(|| tracing::debug!("an earlier record of its group failed; skipped"));
                    self.release(record, seconds).instrument(span).await;
                    outcome
                        .records
                        .push((record.message_id.clone(), Err(Failed::Skipped)));
                    continue;
                }
                if out_of_time || (index > 0 && self.too_late(deadline)) {
                    if !out_of_time {
                        out_of_time = true;
                        let left =
                            deadline.map_or(Duration::ZERO, |d| d.saturating_duration_since(Instant::now()));
                        tracing::warn!(
                            left_ms = left.as_millis() as u64,
                            reserve_ms = self.settings.record_reserve.as_millis() as u64,
                            not_started = records.len() - index,
                            "the invocation deadline is near: the records not started yet are released for redelivery"
                        );
                    }
                    self.release(record, 0).instrument(record_span(record)).await;
                    outcome
                        .records
                        .push((record.message_id.clone(), Err(Failed::OutOfTime)));
                    continue;
                }
                // a burst's results are for a prefix of its records, ending at its first
                // failure (or where the deadline stopped it): the records after it come
                // round at their turn, and are skipped (or reported out of time)
                let (indices, results) = match self.burst_at(records, index) {
                    Some(run) => {
                        // each record its own span under its sender's, open while the burst
                        // runs; the burst's work (and what it sends) under the first one's
                        let contexts: Vec<telemetry::TraceContext> = run
                            .indices
                            .iter()
                            .map(|&at| telemetry::handling(records[at].trace))
                            .collect();
                        let members: Vec<tracing::Span> = run
                            .indices
                            .iter()
                            .zip(&contexts)
                            .map(|(&at, ctx)| {
                                let span = handling_span(&records[at], ctx);
                                span.record("execution_id", run.target_id.as_str());
                                span
                            })
                            .collect();
                        let span = tracing::info_span!(
                            parent: &members[0],
                            "burst",
                            group_id = group,
                            execution_id = %run.target_id,
                            records = run.indices.len(),
                        );
                        let results = telemetry::in_context_under(
                            contexts[0],
                            records[run.indices[0]].trace,
                            self.handle_burst(&run, deadline, &mut outcome.flushed),
                        )
                        .instrument(span)
                        .await;
                        drop(members);
                        (run.indices, results)
                    }
                    None => {
                        let ctx = telemetry::handling(record.trace);
                        let result = telemetry::in_context_under(
                            ctx,
                            record.trace,
                            self.handle_record(record, &mut parents, &mut outcome.flushed),
                        )
                        .instrument(handling_span(record, &ctx))
                        .await;
                        (vec![index], vec![result])
                    }
                };
                for (at, result) in indices.into_iter().zip(results) {
                    let record = &records[at];
                    if let Err(why) = &result {
                        let span = record_span(record);
                        span.in_scope(|| log_failure(why));
                        let seconds = release_seconds(&self.settings, why, record.receive_count);
                        failed_groups.insert(record.group_id.as_deref().unwrap_or(""), seconds);
                        self.release(record, seconds).instrument(span).await;
                    }
                    decided[at] = Some(result);
                }
                let result = decided[index]
                    .take()
                    .unwrap_or_else(|| Err(Failed::Error(Cause::new(RecordError::NotHandled))));
                outcome.records.push((record.message_id.clone(), result));
            }
            outcome
        });
        // no store retry starts that could outlast the invocation
        stm_aws::within_deadline(deadline, work).await
    }

    /// Less than one record's reserve left before `deadline`.
    fn too_late(&self, deadline: Option<Instant>) -> bool {
        deadline.is_some_and(|d| d.saturating_duration_since(Instant::now()) < self.settings.record_reserve)
    }

    /// Hide a failed record for `seconds` ([`release_seconds`]; 0 makes it visible again
    /// at once). Best effort: if this fails, the queue's visibility timeout does the
    /// same, later.
    async fn release(&self, record: &Record, seconds: i32) {
        let Some(receipt) = record.receipt_handle.as_deref().filter(|r| !r.is_empty()) else {
            return;
        };
        if let Err(err) = self.queue.change_visibility(receipt, seconds).await {
            tracing::debug!(error = %err, "could not change the visibility");
        }
    }

    async fn handle_record(
        &self,
        record: &Record,
        parents: &mut SpawnParents,
        flushed: &mut RelaySummary,
    ) -> Result<Handled, Failed> {
        let incoming = Incoming::parse(
            &record.body,
            record.group_id.as_deref(),
            record.kind.as_deref(),
            &record.message_id,
        )
        .map_err(|p| Failed::Poison(Cause::new(RecordError::Unreadable(p))))?;
        let execution_id = match &incoming {
            Incoming::Spawn(entry) => entry.child_id.as_str(),
            Incoming::Event { target_id, .. } => target_id.as_str(),
        };
        tracing::Span::current().record("execution_id", execution_id);
        self.handle_incoming(incoming, parents, flushed).await
    }

    async fn handle_incoming(
        &self,
        incoming: Incoming,
        parents: &mut SpawnParents,
        flushed: &mut RelaySummary,
    ) -> Result<Handled, Failed> {
        match incoming {
            Incoming::Spawn(entry) => {
                let report = self
                    .driver
                    .create_spawn_remembering(&entry, parents)
                    .await
                    .map_err(classify)?;
                let created = report.is_some();
                match report {
                    Some(report) => {
                        self.ring(&entry.child_id, &report).await;
                        self.flush(&entry.child_id, &report, flushed).await?
                    }
                    None => self.flush_pending(&entry.child_id, flushed).await?,
                }
                Ok(Handled::Spawned {
                    child_id: entry.child_id,
                    created,
                })
            }
            Incoming::Event { target_id, event } => self.handle_event(&target_id, &event, flushed).await,
        }
    }

    async fn handle_event(
        &self,
        target_id: &str,
        event: &Event,
        flushed: &mut RelaySummary,
    ) -> Result<Handled, Failed> {
        let (exe, processed) = self
            .driver
            .store
            .load_for_event(target_id, &event.id)
            .instrument(tracing::info_span!("load", execution_id = target_id))
            .await
            .map_err(|e| classify(e.into()))?;
        let Some(mut exe) = exe else {
            log_unknown(target_id, event);
            return Ok(Handled::UnknownExecution);
        };
        let (plan, machine) = self.plan(&exe, event, processed);
        self.carry_out(plan, machine, &mut exe, event, flushed).await
    }

    /// The plan of `event`, from the queue, for the loaded `exe`, and the machine it steps
    /// on, looked up once for both (an error is `carry_out`'s to report, where a step needs
    /// the machine: a drained or duplicate event does not).
    fn plan(&self, exe: &Execution, event: &Event, processed: bool) -> (Plan, Machine) {
        let machine = self.driver.definition_for(exe);
        let deployed = !matches!(machine, Err(DriverError::VersionMissing { .. }));
        (
            plan(Arrival::Queue, Some(exe), event, processed, deployed),
            machine,
        )
    }

    /// Carry out `plan` for `event` on the loaded `exe`, delivering by queue: each commit's
    /// rows are published (the inline flush) before the record is done.
    async fn carry_out(
        &self,
        plan: Plan,
        machine: Machine,
        exe: &mut Execution,
        event: &Event,
        flushed: &mut RelaySummary,
    ) -> Result<Handled, Failed> {
        let started = std::time::Instant::now();
        let from = exe.active_path.clone();
        let (report, regions) = match plan {
            Plan::Unknown => {
                log_unknown(&exe.id, event);
                return Ok(Handled::UnknownExecution);
            }
            Plan::Duplicate => {
                self.flush_pending(&exe.id, flushed).await?;
                return Ok(Handled::Duplicate);
            }
            Plan::Drain { reason } => {
                log_drained(exe, event, reason);
                return Ok(Handled::Drained { status: exe.status });
            }
            Plan::ParkWhileSuspended => return self.park_suspended(exe, event).await,
            Plan::ParkForVersion => {
                let report = self.driver.park_for_version(exe, event).await.map_err(classify)?;
                // the driver logged it; the recheck timer may be near enough for a doorbell
                self.ring(&exe.id, &report).await;
                return Ok(Handled::ParkedForVersion {
                    execution_id: exe.id.clone(),
                    version: exe.definition_version,
                });
            }
            Plan::Release => {
                let defn = machine.map_err(classify)?;
                if self.release_parked(&defn, exe, event, flushed).await? == Release::TookTheEvent {
                    return Ok(Handled::Processed {
                        execution_id: exe.id.clone(),
                        status: exe.status,
                    });
                }
                // what was released may have finished regions, or moved the execution; its
                // machine is the same (a release is only planned on a deployed version)
                let next = crate::driver::plan(Arrival::Queue, Some(exe), event, false, true);
                return Box::pin(self.carry_out(next, Ok(defn), exe, event, flushed)).await;
            }
            Plan::Recheck => {
                // its redelivery after a release's last commit publishes the last block
                self.flush_pending(&exe.id, flushed).await?;
                let defn = machine.map_err(classify)?;
                (self.driver.recheck(&defn, exe).await.map_err(classify)?, 0)
            }
            Plan::Broadcast { regions } => {
                let defn = machine.map_err(classify)?;
                let report = self
                    .driver
                    .commit_broadcast(&defn, exe, event, &regions)
                    .await
                    .map_err(classify)?;
                (report, regions.len())
            }
            Plan::Step => {
                let defn = machine.map_err(classify)?;
                let report = self
                    .driver
                    .step_on(&defn, exe, Some(event))
                    .await
                    .map_err(classify)?;
                (report, 0)
            }
        };
        StepLog::after(from, exe).log(exe, event, regions, started.elapsed());
        if let Some(reason) = &report.dropped {
            self.log_dropped(exe, event, reason);
        }
        self.ring(&exe.id, &report).await;
        self.flush(&exe.id, &report, flushed).await?;
        Ok(if regions > 0 {
            Handled::Broadcast {
                execution_id: exe.id.clone(),
                regions,
            }
        } else {
            Handled::Processed {
                execution_id: exe.id.clone(),
                status: exe.status,
            }
        })
    }

    /// An event for a `SUSPENDED` execution: kept in a row of its own until `resume` (the
    /// driver's parking). Only an event whose row would pass DynamoDB's 400 KB waits in SQS
    /// instead, hidden with the park back-off, and says so.
    async fn park_suspended(&self, exe: &mut Execution, event: &Event) -> Result<Handled, Failed> {
        match self.driver.park_while_suspended(exe, event).await {
            Ok(true) => Ok(Handled::ParkedWhileSuspended {
                execution_id: exe.id.clone(),
            }),
            Ok(false) => Ok(Handled::Drained { status: exe.status }),
            Err(DriverError::Store(stm_store::StoreError::TooLarge(why))) => {
                tracing::warn!(
                    execution_id = %exe.id,
                    event_id = %event.id,
                    reason = %why,
                    "event left in SQS: execution {} is SUSPENDED and the event is too large to keep \
                     in a row; resume it before the queue's retention runs out",
                    exe.id
                );
                Err(Failed::Parked)
            }
            Err(err) => Err(classify(err)),
        }
    }

    /// Before `event` steps on `exe`: the events parked on it (a resumed execution's, or
    /// those of a version deployed again), released in order, in bursts of one commit each,
    /// each commit's rows published before the next commit. The promise's invariant is that a
    /// group's next event is handled only after every earlier commit's rows are published,
    /// or are the rows the execution item records (its last block), which a redelivery
    /// publishes first. A release makes several commits for one record, so:
    ///
    /// - the last block is published before the first release commit repoints the item
    ///   (a release that stopped half-way, its record redelivered, left it there);
    /// - `event` itself is first parked behind them (its row, no outbox rows) and
    ///   released last: every redelivery of it then finds it parked (the release resumes,
    ///   last block first) or processed (a duplicate, which publishes the last block),
    ///   never neither, as it would after a crash between the last release commit and its
    ///   own step;
    /// - each release commit's rows go out before the next commit, and the first that
    ///   cannot fails the record, with every earlier commit's rows already published;
    /// - the `@parked` recheck publishes the last block even with nothing left to release,
    ///   so that its redelivery after the release's last commit does.
    ///
    /// An execution pinned to a version this deploy does not have releases nothing: the
    /// driver's gate parks the event instead.
    async fn release_parked(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: &Event,
        flushed: &mut RelaySummary,
    ) -> Result<Release, Failed> {
        self.flush_pending(&exe.id, flushed).await?;
        let mut takes_event = false;
        if !crate::driver::is_recheck(event) {
            match Box::pin(self.driver.keep_parked(exe, event, Vec::new())).await {
                // kept now, or kept already (a redelivery): it steps last among them
                Ok(_) => takes_event = true,
                // no room for its row: it steps after the released ones, as it did
                // before (a crash between the two then leaves the last release commit's
                // rows to the scheduled relay)
                Err(DriverError::Store(stm_store::StoreError::TooLarge(why))) => tracing::warn!(
                    execution_id = %exe.id,
                    event_id = %event.id,
                    reason = %why,
                    "the event steps after the released ones without being parked first: its row is too large"
                ),
                Err(err) => return Err(classify(err)),
            }
        }
        crate::driver::log_release(exe);
        let mut releasing = crate::driver::Releasing::default();
        while let Some(report) = Box::pin(self.driver.release_next(defn, exe, &mut releasing))
            .await
            .map_err(classify)?
        {
            self.ring(&exe.id, &report).await;
            self.flush(&exe.id, &report, flushed).await?;
        }
        Ok(if takes_event {
            Release::TookTheEvent
        } else {
            Release::Released
        })
    }

    /// The line for an event the engine took no transition on. Worded as the plain fact it
    /// is, not as a warning: most of these are a broadcast reaching a region whose state
    /// does not take it (the parent's events go to every live region), which is how
    /// orthogonal regions work. The `reason` field names the state that did not take it.
    fn log_dropped(&self, exe: &Execution, event: &Event, reason: &str) {
        let undeclared = self
            .driver
            .definition_for(exe)
            .is_ok_and(|defn| !defn.event_kinds().contains(&event.kind));
        // a region (a child that is no invoked machine) gets its parent's events by broadcast
        let region_of = exe
            .parent_id
            .as_deref()
            .filter(|_| exe.definition_fqn.is_none() && exe.status == Status::Running);
        let note = if undeclared {
            " (its machine declares no such event)".to_string()
        } else if let Some(parent) = region_of {
            format!(" (normal for a region: {parent}'s events reach each of its regions)")
        } else {
            String::new()
        };
        tracing::info!(
            execution_id = %exe.id,
            event_id = %event.id,
            kind = %event.kind,
            %reason,
            "{} did not take {}{note}",
            exe.id,
            event.kind,
        );
    }

    /// A redelivery of what was applied already: the instance that committed it may have
    /// died before its inline flush, leaving that commit's outbox entries and spawn intents
    /// pending. Deliver them now, in seq order, before the group's next message is handled:
    /// otherwise that message's inline flush overtakes them, and a broadcast reaches a
    /// region whose spawn intent is still pending (no execution yet: dropped) or an
    /// execution gets two emitted events in reverse order. They are found by key: the
    /// execution item records its last commit's block of rows, and every earlier commit's
    /// rows were published before its group moved on (a flush that fails fails its record).
    /// If they cannot be published, the redelivery is reported failed (retried), so the
    /// group waits rather than reorders. Without the inline flush the relay delivers
    /// everything, in order, and there is nothing to do.
    async fn flush_pending(&self, execution_id: &str, flushed: &mut RelaySummary) -> Result<(), Failed> {
        if !self.settings.inline_flush {
            return Ok(());
        }
        let summary = relay::deliver_last_block(
            self.driver.store.as_ref(),
            self.queue.as_ref(),
            self.status_bus.as_deref(),
            execution_id,
        )
        .await
        .map_err(|source| {
            Failed::Retryable(Cause::new(RecordError::PendingUnreadable {
                execution_id: execution_id.to_string(),
                source,
            }))
        })?;
        flushed.add(&summary);
        if summary.failed > 0 {
            let entries = summary.failed;
            return Err(Failed::Retryable(Cause::new(RecordError::PendingUnpublished {
                entries,
            })));
        }
        Ok(())
    }

    /// The inline flush: publish what this commit enqueued and ack it.
    ///
    /// If part of it cannot be published, the record is reported failed although its step
    /// is committed: the redelivery is then a duplicate, which publishes everything
    /// pending in order ([`Self::flush_pending`]) before the group's next event. Acking it
    /// instead would let the next event's flush overtake these entries (a broadcast could
    /// reach a region whose spawn intent is still pending, and be dropped).
    async fn flush(
        &self,
        execution_id: &str,
        report: &StepReport,
        flushed: &mut RelaySummary,
    ) -> Result<(), Failed> {
        if !self.settings.inline_flush || !report.enqueued() {
            return Ok(());
        }
        let span = tracing::info_span!(
            "publish",
            outbox = report.outbox.len(),
            spawns = report.spawns.len()
        );
        let summary = relay::deliver(
            self.driver.store.as_ref(),
            self.queue.as_ref(),
            self.status_bus.as_deref(),
            &report.spawns,
            &report.outbox,
        )
        .instrument(span)
        .await;
        flushed.add(&summary);
        if summary.failed > 0 {
            let entries = summary.failed;
            return Err(Failed::Retryable(Cause::new(RecordError::Unpublished {
                entries,
            })));
        }
        if summary.unacked > 0 {
            // published, in order: only the ack is missing, and the relay's re-publish of
            // them is deduplicated by SQS or by the processed marks
            tracing::warn!(%execution_id, unacked = summary.unacked, "inline flush published but could not ack; the relay will");
        }
        Ok(())
    }
}

/// The span of one record's handling: every line logged meanwhile (the worker's, the
/// driver's, an action's) carries its message and group ids, and its execution's id once
/// the body is read, so a log query finds one message's lines by a field.
fn record_span(record: &Record) -> tracing::Span {
    tracing::info_span!(
        "record",
        message_id = %record.message_id,
        group_id = record.group_id.as_deref().unwrap_or("-"),
        execution_id = tracing::field::Empty,
    )
}

/// [`record_span`] of the record's handling, with its trace context: the span a
/// collector shows (see [`telemetry`]), whose parent is the span that sent the record.
fn handling_span(record: &Record, ctx: &telemetry::TraceContext) -> tracing::Span {
    tracing::info_span!(
        "record",
        message_id = %record.message_id,
        group_id = record.group_id.as_deref().unwrap_or("-"),
        execution_id = tracing::field::Empty,
        receive_count = record.receive_count,
        trace_id = %telemetry::trace_id_field(ctx),
        span_id = %telemetry::span_id_field(ctx),
        parent_span_id = telemetry::parent_field(record.trace).as_deref(),
    )
}

/// The machine an execution steps on, as `Driver::definition_for` found it.
type Machine = Result<Arc<Definition>, DriverError>;

/// What [`Worker::release_parked`] did before an event's own step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    /// The parked events stepped; the event is planned again, on its own.
    Released,
    /// The event was parked behind them and stepped among them: its step is done.
    TookTheEvent,
}

/// The line for an event the lifecycle drains ([`Plan::Drain`]): a warning for a
/// `PENDING` execution's (its Start may be lost), else information.
fn log_drained(exe: &Execution, event: &Event, reason: &'static str) {
    // tracing's level is part of the call site, so one line is written at two levels
    macro_rules! dropped {
        ($level:ident) => {
            tracing::$level!(
                execution_id = %exe.id,
                event_id = %event.id,
                kind = %event.kind,
                reason,
                "event dropped: execution {} is {}",
                exe.id,
                exe.status
            )
        };
    }
    if exe.status == Status::Pending {
        dropped!(warn);
    } else {
        dropped!(info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_reserve_covers_one_stalled_action_and_one_stalled_call() {
        let reserve = WorkerSettings::default().record_reserve;
        assert_eq!(reserve, Duration::from_secs(10) + stm_aws::OPERATION_TIMEOUT);
        assert_eq!(record_reserve(Duration::from_secs(3)), Duration::from_secs(15));
    }
}
