//! Parking: an execution pinned to a version this deploy does not retain keeps its
//! events, in order, on its own item, and steps them once the version is back.
//!
//! Not failed and not poison: a deploy that dropped a version still in use loses
//! nothing, and putting the version back releases the events. Parking commits the
//! execution (CAS, as a step does) with the event appended to `parked_events` and a
//! recheck timer (`@parked`) armed; the event's processed mark is written only when it
//! finally steps, so a redelivery while it waits is recognised by its id in the list.
//! The release happens on the execution's next event or on the recheck, whichever
//! comes first: each parked event steps in its own commit, which also takes it off the
//! list, so a crash half-way resumes where it stopped.
//!
//! A `SUSPENDED` execution's events wait on the same list ([`Driver::park_while_suspended`]):
//! never in SQS, whose retention (14 days at most) would delete an event that waits
//! longer, and where a waiting message holds its group and counts receives toward the
//! dead-letter queue. `resume` arms the recheck at once, and the recheck (or the next
//! event) releases them in order.
//!
//! The list lives in the execution's item, so it counts toward DynamoDB's 400 KB item
//! size: an event that would not fit fails as a too-large write does.

use stm_core::{Definition, Event, Execution};
use stm_store::{Commit, TimerOp};

use super::plan::{is_recheck, route, Arrival, Plan, PARKED_PATH};
use super::{Driver, DriverError, StepReport};

/// Seconds from one recheck of a parked execution to the next, when no event comes.
pub(crate) const PARKED_RECHECK_SECONDS: f64 = 300.0;

/// The line a release starts with (the embedded runner's and the worker's).
pub(crate) fn log_release(exe: &Execution) {
    tracing::info!(
        execution_id = %exe.id,
        version = %exe.definition_version.map_or("-".to_string(), |v| v.to_string()),
        parked = exe.parked_events.len(),
        "releasing parked events in order: the execution runs on a deployed version again"
    );
}

impl Driver {
    /// Keep `event` on `exe`, which is `SUSPENDED`, until a resume releases it: appended
    /// to `parked_events` in a commit of its own (CAS, as a step), its processed mark left
    /// for when it steps. `false`: nothing to keep (the recheck timer, which `resume` arms
    /// again). A redelivery of an event already kept changes nothing.
    pub(crate) async fn park_while_suspended(
        &self,
        exe: &mut Execution,
        event: &Event,
    ) -> Result<bool, DriverError> {
        if is_recheck(event) {
            return Ok(false);
        }
        if exe.parked_events.iter().any(|p| p.id == event.id) {
            return Ok(true);
        }
        self.append_parked(exe, event).await?;
        tracing::info!(
            execution_id = %exe.id,
            event_id = %event.id,
            kind = %event.kind,
            parked = exe.parked_events.len(),
            "event parked: execution {} is SUSPENDED; it steps when the execution is resumed",
            exe.id
        );
        Ok(true)
    }

    /// Append `event` to `exe`'s parked events in a commit of its own (CAS, no rows, its
    /// processed mark left for when it steps); on failure `exe` is left as it was.
    pub(crate) async fn append_parked(&self, exe: &mut Execution, event: &Event) -> Result<(), DriverError> {
        exe.parked_events.push(event.clone());
        exe.stamp(self.clock.now());
        if let Err(err) = self.store.commit(exe, Commit::default()).await {
            exe.parked_events.pop();
            return Err(err.into());
        }
        Ok(())
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
        if exe.parked_events.iter().any(|p| p.id == event.id) || (recheck && exe.parked_events.is_empty()) {
            // a redelivery of a parked event, or a recheck with nothing waiting
            return Ok(parked);
        }
        if !recheck {
            exe.parked_events.push(event.clone());
        }
        let now = self.clock.now();
        let fire_at = now + PARKED_RECHECK_SECONDS;
        exe.stamp(now);
        let commit = Commit {
            timers: vec![TimerOp::Schedule {
                path: PARKED_PATH.into(),
                fire_at,
            }],
            ..Commit::default()
        };
        self.store.commit(exe, commit).await?;
        tracing::warn!(
            execution_id = %exe.id,
            definition_id = %exe.definition_id,
            version = %version,
            event_id = %event.id,
            kind = %event.kind,
            parked = exe.parked_events.len(),
            "event parked: execution {} is pinned to version {version} of {}, which this deploy \
             does not have; it waits until that version is deployed again or the execution is migrated",
            exe.id,
            exe.definition_id,
        );
        Ok(StepReport {
            armed_timers: vec![(PARKED_PATH.into(), fire_at)],
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

    /// Step every parked event of `exe`, oldest first, each in its own commit, and deliver
    /// after the whole release (the embedded runner's [`Plan::Release`](super::Plan::Release)). (The recheck timer is
    /// left to lapse: firing with nothing parked, it changes nothing.)
    pub(crate) async fn release_parked(
        &self,
        defn: &Definition,
        exe: &mut Execution,
    ) -> Result<StepReport, DriverError> {
        let mut report = StepReport::default();
        if exe.parked_events.is_empty() {
            return Ok(report);
        }
        log_release(exe);
        while let Some(step) = self.release_next(defn, exe).await? {
            report.absorb(step);
        }
        Ok(report)
    }

    /// Step the oldest parked event of `exe` in its own commit, which also takes it off
    /// the list (`None`: nothing is parked). One commit a call, so that a caller that
    /// delivers by queue publishes each commit's rows before the next commit
    /// (`Worker::release_parked`); the embedded runner delivers after the whole release.
    pub(crate) async fn release_next(
        &self,
        defn: &Definition,
        exe: &mut Execution,
    ) -> Result<Option<StepReport>, DriverError> {
        if exe.parked_events.is_empty() {
            return Ok(None);
        }
        let event = exe.parked_events.remove(0);
        // released events were parked from the queue or by a caller: routed as those are
        let step = match route(Arrival::Queue, exe, &event) {
            Plan::Broadcast { regions } => self.commit_broadcast(defn, exe, &event, &regions).await,
            _ => self.step_on(defn, exe, Some(&event)).await,
        };
        // on an error the caller drops `exe` and reloads: the stored item says what is
        // still parked
        let mut step = step?;
        step.released.push(event.id);
        Ok(Some(step))
    }
}
