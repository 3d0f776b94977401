//! A domain event for a parent with live regions goes to the regions, not the parent:
//! which regions, the queue-delivered broadcast commit (the worker's), and the parent's
//! `ttl` re-armed, since a broadcast is activity.

use stm_core::definition::CONTROL_EVENTS;
use stm_core::engine;
use stm_core::{Definition, Event, Execution};
use stm_store::{Commit, TimerOp};

use super::error::check_event_size;
use super::step::{armed, outbox_entries};
use super::{parking, Driver, DriverError, StepReport};

impl Driver {
    /// The queue-delivered broadcast (the worker's): a domain event for a parent whose
    /// regions are live becomes one outbox entry per region, committed atomically with the
    /// parent's processed mark (and, for a machine with `ttl`, the re-armed budget: the
    /// broadcast is activity). Nothing runs on the parent itself.
    pub async fn commit_broadcast(
        &self,
        exe: &mut Execution,
        event: &Event,
        region_ids: &[String],
    ) -> Result<StepReport, DriverError> {
        match self.parking_gate(exe, event).await? {
            parking::Gate::Done(report) => Ok(report),
            parking::Gate::Go(released, defn) => {
                // what was released may have finished regions: broadcast to those still live
                let live = Driver::region_ids(exe);
                let region_ids = if released.released.is_empty() {
                    region_ids
                } else {
                    &live
                };
                let step = self.broadcast_on(&defn, exe, event, region_ids).await?;
                Ok(released.followed_by(step))
            }
        }
    }

    /// The broadcast commit of `exe` on `defn` (its version).
    pub(super) async fn broadcast_on(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: &Event,
        region_ids: &[String],
    ) -> Result<StepReport, DriverError> {
        // Refused before anything is written. The event reached us through SQS, so it
        // fits unless our serialization of it is larger than the sender's (a harel body
        // without the null time fields, within a few bytes of the limit): rare, and the
        // same each time, so the worker should not retry it (see `DriverError::MessageTooLarge`).
        if let Some(first) = region_ids.first() {
            check_event_size(first, event)?;
        }
        let now = self.clock.now();
        let timers: Vec<TimerOp> = rearm_ttl(defn, exe, now).into_iter().collect();
        exe.stamp(now);
        let emits: Vec<(Option<String>, Event)> = region_ids
            .iter()
            .map(|id| (Some(id.clone()), event.clone()))
            .collect();
        let armed_timers = armed(&timers);
        let commit = Commit {
            emits: emits.clone(),
            processed_event_ids: vec![event.id.clone()],
            timers,
            ..Commit::default()
        };
        let outbox_seqs = self.store.commit(exe, commit).await?.outbox;
        let outbox = outbox_entries(&outbox_seqs, emits);
        Ok(StepReport {
            outbox_seqs,
            outbox,
            armed_timers,
            ..StepReport::default()
        })
    }

    /// The regions a domain event for `exe` goes to when delivered by queue: every
    /// unfinished, non-submachine child, whether or not its record exists yet. (A child
    /// whose spawn intent is still on its way is created first: the intent was published
    /// to the child's FIFO group before anything the parent sends it later.)
    pub fn region_ids(exe: &Execution) -> Vec<String> {
        exe.children
            .iter()
            .filter(|(_, cs)| !cs.finished && !cs.submachine)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// The live (unfinished, not submachine) regions of `exe` that a domain event is
    /// broadcast to.
    pub(crate) async fn live_regions(&self, exe: &Execution) -> Result<Vec<Execution>, DriverError> {
        let mut live = Vec::new();
        for id in Driver::region_ids(exe) {
            if let Some(child) = self.store.load(&id).await? {
                live.push(child);
            }
        }
        Ok(live)
    }

    /// Whether `event`, for an execution with `regions` live regions, is broadcast to
    /// them rather than processed by the execution itself: a domain event, and regions.
    pub(crate) fn is_broadcast(event: &Event, regions: usize) -> bool {
        !CONTROL_EVENTS.contains(&event.kind.as_str()) && regions > 0
    }

    /// A domain event broadcast to regions never runs on the parent, but it is still
    /// activity for the parent's `ttl`: restart the budget and record the event as
    /// processed by the parent.
    pub(crate) async fn rearm_ttl_after_broadcast(
        &self,
        exe: &mut Execution,
        event: &Event,
    ) -> Result<(), DriverError> {
        let defn = self.definition_for(exe)?;
        if engine::ttl_delay(&defn, exe).is_none() || self.store.is_processed(&exe.id, &event.id).await? {
            return Ok(());
        }
        let now = self.clock.now();
        let timers = rearm_ttl(&defn, exe, now).into_iter().collect();
        exe.stamp(now);
        let commit = Commit {
            processed_event_ids: vec![event.id.clone()],
            timers,
            ..Commit::default()
        };
        self.store.commit(exe, commit).await?;
        Ok(())
    }
}

/// Restart a machine's `ttl` budget at `now` (a broadcast is activity): the new deadline
/// on `exe` and the timer op that arms it; `None` for a machine without `ttl`.
fn rearm_ttl(defn: &Definition, exe: &mut Execution, now: f64) -> Option<TimerOp> {
    let delay = engine::ttl_delay(defn, exe)?;
    exe.expires_at = Some(now + delay);
    Some(TimerOp::Schedule {
        path: engine::TTL_PATH.into(),
        fire_at: now + delay,
    })
}
