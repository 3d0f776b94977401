//! Parking: an execution pinned to a version this deploy does not retain keeps its
//! events, in order, and steps them once the version is back.
//!
//! Not failed and not poison: a deploy that dropped a version still in use loses
//! nothing, and putting the version back releases the events. Each parked event is a row
//! of its own in the store (module `parked` of `stm_store`), numbered in arrival order,
//! with a claim by its id, so that a redelivery while it waits is recognised without
//! reading the others; its processed mark is written only when it finally steps. Only
//! the first event of a run writes the item (a commit that sets `parked_after`, with the
//! recheck timer `@parked` armed); the others write their row in a transaction that checks
//! the item's version, so that one racing a resume is retried on the resumed execution.
//! A parked event therefore costs its own size in writes, whatever the item's. The
//! release happens on the execution's next event or on the recheck, whichever comes
//! first: the parked events step in order, in bursts written in one commit each (up to
//! `release_burst`, within the store's limits), each commit deleting its events' rows, so
//! the item is written once per burst and a crash half-way resumes where it stopped.
//!
//! A `SUSPENDED` execution's events wait the same way ([`Driver::park_while_suspended`]):
//! never in SQS, whose retention (14 days at most) would delete an event that waits
//! longer, and where a waiting message holds its group and counts receives toward the
//! dead-letter queue. `resume` arms the recheck at once, and the recheck (or the next
//! event) releases them in order.
//!
//! Items written before parked rows may hold their events in `parked_events`: a release
//! steps those first, and nothing appends there any more.

use std::collections::VecDeque;

use stm_core::{Definition, Event, Execution};
use stm_store::{Commit, Parked, ParkedEvent, TimerOp, Unpark};

use super::plan::{is_recheck, route, Arrival, Plan, PARKED_PATH};
use super::{Burst, BurstStepError, BurstWritten, Driver, DriverError, StepReport};

/// Seconds from one recheck of a parked execution to the next, when no event comes.
pub(crate) const PARKED_RECHECK_SECONDS: f64 = 300.0;

/// The line a release starts with (the embedded runner's and the worker's).
pub(crate) fn log_release(exe: &Execution) {
    tracing::info!(
        execution_id = %exe.id,
        version = %exe.definition_version.map_or("-".to_string(), |v| v.to_string()),
        parked_on_item = exe.parked_events.len(),
        parked_after = exe.parked_after.unwrap_or(0),
        "releasing parked events in order: the execution runs on a deployed version again"
    );
}

impl Driver {
    /// Keep `event` for `exe`, which is `SUSPENDED`, until a resume releases it: in its
    /// row ([`keep_parked`](Self::keep_parked)), its processed mark left for when it
    /// steps. `false`: nothing to keep (the recheck timer, which `resume` arms again). A
    /// redelivery of an event already kept changes nothing.
    pub(crate) async fn park_while_suspended(
        &self,
        exe: &mut Execution,
        event: &Event,
    ) -> Result<bool, DriverError> {
        if is_recheck(event) {
            return Ok(false);
        }
        if let Some(number) = Box::pin(self.keep_parked(exe, event, Vec::new())).await? {
            tracing::info!(
                execution_id = %exe.id,
                event_id = %event.id,
                kind = %event.kind,
                number,
                "event parked: execution {} is SUSPENDED; it steps when the execution is resumed",
                exe.id
            );
        }
        Ok(true)
    }

    /// Keep `event` for `exe` in a row of its own: the first of a run in a commit of the
    /// item that sets `parked_after` and arms `timers`, any other without writing the item
    /// (its row and claim, if the item is still at its version: a lost race is a
    /// conflict, and the retry finds the item as it is now; `timers` are not armed). The number it was kept
    /// under, or `None` if it was kept already (a redelivery). On failure `exe` is left as
    /// it was.
    pub(crate) async fn keep_parked(
        &self,
        exe: &mut Execution,
        event: &Event,
        timers: Vec<TimerOp>,
    ) -> Result<Option<u64>, DriverError> {
        if exe.parked_events.iter().any(|p| p.id == event.id) {
            return Ok(None);
        }
        let number = self.store.take_park_number(&exe.id).await?;
        let parked = ParkedEvent {
            number,
            event: event.clone(),
        };
        if exe.parked_after.is_some() {
            return Ok(match self.store.park(&exe.id, exe.version, &parked).await? {
                Parked::AlreadyKept => None,
                _ => Some(number),
            });
        }
        // every number before this one was released, or is a hole a park left
        exe.parked_after = Some(number - 1);
        exe.stamp(self.clock.now());
        let commit = Commit {
            timers,
            park: Some(Box::new(parked)),
            ..Commit::default()
        };
        if let Err(err) = self.store.commit(exe, commit).await {
            exe.parked_after = None;
            return Err(err.into());
        }
        Ok(Some(number))
    }

    /// Keep `event` on `exe`, whose version this deploy does not have ([`Plan::ParkForVersion`](super::Plan::ParkForVersion)):
    /// appended to the parked events with the recheck timer armed, in a commit of its own.
    /// A redelivery of an event already kept, or a recheck with nothing waiting, changes
    /// nothing.
    pub(crate) async fn park_for_version(
        &self,
        exe: &mut Execution,
        event: &Event,
    ) -> Result<StepReport, DriverError> {
        let recheck = is_recheck(event);
        let version = exe
            .definition_version
            .map_or_else(|| "-".to_string(), |v| v.to_string());
        let parked = StepReport {
            parked: true,
            ..StepReport::default()
        };
        if recheck && !exe.has_parked() {
            // a recheck with nothing waiting
            return Ok(parked);
        }
        let now = self.clock.now();
        let fire_at = now + PARKED_RECHECK_SECONDS;
        let rearm = vec![TimerOp::Schedule {
            path: PARKED_PATH.into(),
            fire_at,
        }];
        if recheck {
            // still not deployed: look again later
            exe.stamp(now);
            let commit = Commit {
                timers: rearm,
                ..Commit::default()
            };
            self.store.commit(exe, commit).await?;
            return Ok(StepReport {
                armed_timers: vec![(PARKED_PATH.into(), fire_at)],
                ..parked
            });
        }
        // the first of a run arms the recheck with its commit; the others find it armed
        let first = exe.parked_after.is_none();
        let timers = if first { rearm } else { Vec::new() };
        let Some(number) = Box::pin(self.keep_parked(exe, event, timers)).await? else {
            // a redelivery of a parked event
            return Ok(parked);
        };
        tracing::warn!(
            execution_id = %exe.id,
            definition_id = %exe.definition_id,
            version = %version,
            event_id = %event.id,
            kind = %event.kind,
            number,
            "event parked: execution {} is pinned to version {version} of {}, which this deploy \
             does not have; it waits until that version is deployed again or the execution is migrated",
            exe.id,
            exe.definition_id,
        );
        Ok(StepReport {
            armed_timers: if first {
                vec![(PARKED_PATH.into(), fire_at)]
            } else {
                Vec::new()
            },
            ..parked
        })
    }

    /// The parked recheck with nothing left to release ([`Plan::Recheck`](super::Plan::Recheck)): no step,
    /// but a running execution whose machine has a `ttl` and that has none armed (a redrive
    /// leaves it to the worker, whose clock it runs on) gets it, armed from now.
    pub(crate) async fn recheck(
        &self,
        defn: &Definition,
        exe: &mut Execution,
    ) -> Result<StepReport, DriverError> {
        Ok(StepReport {
            armed_timers: self.arm_missing_ttl(defn, exe).await?.into_iter().collect(),
            ..StepReport::default()
        })
    }

    /// Arm `exe`'s missing `ttl` from now; the timer armed, if any.
    async fn arm_missing_ttl(
        &self,
        defn: &Definition,
        exe: &mut Execution,
    ) -> Result<Option<(String, f64)>, DriverError> {
        let Some(delay) = stm_core::engine::ttl_delay(defn, exe) else {
            return Ok(None);
        };
        if exe.expires_at.is_some() {
            return Ok(None);
        }
        let now = self.clock.now();
        let fire_at = now + delay;
        exe.expires_at = Some(fire_at);
        exe.stamp(now);
        let path = stm_core::engine::TTL_PATH.to_string();
        let commit = Commit {
            timers: vec![TimerOp::Schedule {
                path: path.clone(),
                fire_at,
            }],
            ..Commit::default()
        };
        self.store.commit(exe, commit).await?;
        Ok(Some((path, fire_at)))
    }

    /// Step every parked event of `exe`, oldest first, in bursts of a commit each, and deliver
    /// after the whole release (the embedded runner's [`Plan::Release`](super::Plan::Release)). (The recheck timer is
    /// left to lapse: firing with nothing parked, it changes nothing.)
    pub(crate) async fn release_parked(
        &self,
        defn: &Definition,
        exe: &mut Execution,
    ) -> Result<StepReport, DriverError> {
        let mut report = StepReport::default();
        if !exe.has_parked() {
            return Ok(report);
        }
        log_release(exe);
        let mut releasing = Releasing::default();
        while let Some(step) = Box::pin(self.release_next(defn, exe, &mut releasing)).await? {
            report.absorb(step);
        }
        Ok(report)
    }

    /// Step the oldest parked events of `exe` into one commit, which also deletes their
    /// rows, and write it (`None`: nothing is left). At most the driver's `release_burst`
    /// events a commit, fewer where the store's limits cut it (a transaction's 100 items),
    /// and a broadcast to live regions alone; so a release writes the item once per
    /// burst, not once per event. One commit a call, so that a caller that delivers by
    /// queue publishes each commit's rows before the next commit (`Worker::release_parked`);
    /// the embedded runner delivers after the whole release. `releasing` holds what the
    /// release carries between calls: the rows read ahead (a page at a time) and the steps
    /// not written yet.
    pub(crate) async fn release_next(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        releasing: &mut Releasing,
    ) -> Result<Option<StepReport>, DriverError> {
        loop {
            if releasing.burst.len() >= self.release_burst {
                return Box::pin(self.write_release(defn, exe, releasing)).await.map(Some);
            }
            let Some(event) = self.peek_parked(exe, releasing).await? else {
                if !releasing.burst.is_empty() {
                    return Box::pin(self.write_release(defn, exe, releasing)).await.map(Some);
                }
                if releasing.moved {
                    // only holes were left (numbers taken by parks that lost a race or
                    // died): the run ends with a commit of its own
                    releasing.moved = false;
                    exe.stamp(self.clock.now());
                    let end = Commit {
                        ends_parking: exe.parked_after.is_none(),
                        ..Commit::default()
                    };
                    self.store.commit(exe, end).await?;
                }
                return Ok(None);
            };
            // released events were parked from the queue or by a caller: routed as those are
            let regions = match route(Arrival::Queue, exe, &event) {
                // a broadcast is a commit of its own: the steps before it first
                Plan::Broadcast { .. } if !releasing.burst.is_empty() => {
                    return Box::pin(self.write_release(defn, exe, releasing)).await.map(Some);
                }
                Plan::Broadcast { regions } => Some(regions),
                _ => None,
            };
            let unpark = self.take_parked(exe, releasing);
            releasing.moved = false;
            if let Some(regions) = regions {
                let mut step =
                    Box::pin(self.broadcast_unparking(defn, exe, &event, &regions, unpark)).await?;
                step.released.push(event.id);
                return Ok(Some(step));
            }
            if releasing.burst.is_empty() {
                releasing.before = Some(Box::new(exe.clone()));
                releasing.first = Some(Box::new((event.clone(), unpark.clone())));
            }
            // on the heap: a step's future is large, and this one sits under the worker's
            let step =
                Box::pin(self.burst_step_unparking(defn, exe, &event, &mut releasing.burst, unpark.clone()));
            match step.await {
                Ok(None) => releasing.ids.push(event.id),
                Ok(Some((written, alone))) => {
                    // the steps before this one did not leave it room: written, and this
                    // one begins the next burst, from the execution that commit left
                    let earlier = std::mem::replace(&mut releasing.ids, vec![event.id.clone()]);
                    releasing.before = Some(Box::new(alone));
                    releasing.first = Some(Box::new((event, unpark)));
                    return Ok(Some(release_report(written, earlier)));
                }
                Err(BurstStepError::Step(err) | BurstStepError::Commit(err)) => return Err(err),
            }
        }
    }

    /// Write the release's steps not written yet, in one commit. A single step that the
    /// store refuses whatever the retry (an item over 400 KB, say) is stepped again alone
    /// on the execution as it was, the way a step is: the execution fails where it was,
    /// with the reason.
    async fn write_release(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        releasing: &mut Releasing,
    ) -> Result<StepReport, DriverError> {
        let steps = releasing.burst.len();
        let ids = std::mem::take(&mut releasing.ids);
        let (before, first) = (releasing.before.take(), releasing.first.take());
        let written = Box::pin(self.commit_burst(exe, &mut releasing.burst)).await;
        match (written, before, first) {
            (Ok(written), _, _) => Ok(release_report(written, ids)),
            (Err(DriverError::Store(stm_store::StoreError::TooLarge(_))), Some(before), Some(first))
                if steps == 1 =>
            {
                let (event, unpark) = *first;
                *exe = *before;
                let mut step = Box::pin(self.step_unparking(defn, exe, Some(&event), unpark)).await?;
                step.released.push(event.id);
                Ok(step)
            }
            (Err(err), _, _) => Err(err),
        }
    }

    /// The next event to release, read ahead and not taken yet (`None`: none is left; if
    /// only holes were, the cursor is cleared, and `releasing.moved` says so).
    async fn peek_parked(
        &self,
        exe: &mut Execution,
        releasing: &mut Releasing,
    ) -> Result<Option<Event>, DriverError> {
        if let Some(event) = exe.parked_events.first() {
            // an item written before parked rows: its list first
            return Ok(Some(event.clone()));
        }
        loop {
            let Some(after) = exe.parked_after else {
                return Ok(None);
            };
            if let Some(parked) = releasing.ahead.front() {
                return Ok(Some(parked.event.clone()));
            }
            let through = match releasing.through {
                Some(through) => through,
                None => {
                    let through = self.store.last_park_number(&exe.id).await?;
                    releasing.through = Some(through);
                    through
                }
            };
            if after >= through {
                exe.parked_after = None;
                releasing.moved = true;
                return Ok(None);
            }
            let page = self.store.parked_events(&exe.id, after, through).await?;
            if page.is_empty() {
                // a page of holes: the cursor moves past them with the next commit
                exe.parked_after = Some(after.saturating_add(stm_store::PARKED_PAGE).min(through));
                releasing.moved = true;
            }
            releasing.ahead = page.into();
        }
    }

    /// Take the event [`peek_parked`](Self::peek_parked) gave off its list, or move the
    /// cursor past its row: what the step's commit writes. The row's delete, if it has
    /// one.
    fn take_parked(&self, exe: &mut Execution, releasing: &mut Releasing) -> Option<Unpark> {
        if !exe.parked_events.is_empty() {
            exe.parked_events.remove(0);
            return None;
        }
        let parked = releasing.ahead.pop_front()?;
        // its commit moves the cursor past it (or ends the run, when it is the last)
        let through = releasing.through.unwrap_or(parked.number);
        exe.parked_after = (parked.number < through).then_some(parked.number);
        Some(Unpark {
            number: parked.number,
            event_id: parked.event.id,
        })
    }
}

/// How many parked events a release steps into one commit at most: each adds its row's
/// and its claim's deletes and its processed mark to the commit, besides what its step
/// writes, and DynamoDB's transaction holds 100 items (the store's limit check cuts a
/// burst sooner where the steps write more).
pub(crate) const RELEASE_BURST: usize = 16;

/// One release commit's report: its steps' in order, the timers it left armed, the
/// events it released.
fn release_report(written: BurstWritten, released: Vec<String>) -> StepReport {
    let mut report = StepReport::default();
    for step in written.steps {
        report.absorb(step);
    }
    report.armed_timers = written.armed_timers;
    report.released = released;
    report
}

/// A release in progress: the last number taken when it began (read once: nothing is
/// parked for a running execution while it releases), the rows read ahead, and the steps
/// applied to the execution and not written yet.
#[derive(Debug, Default)]
pub(crate) struct Releasing {
    through: Option<u64>,
    ahead: VecDeque<ParkedEvent>,
    burst: Burst,
    /// The ids of the burst's events, in order.
    ids: Vec<String>,
    /// The execution before the burst's first step, and that step's event and row: a step
    /// that alone cannot be written is stepped again from there (`write_release`).
    before: Option<Box<Execution>>,
    first: Option<Box<(Event, Option<Unpark>)>>,
    /// The cursor moved past holes, with nothing stepped to write it yet.
    moved: bool,
}
