//! A domain event for a parent with live regions goes to the regions, not the parent
//! ([`Plan::Broadcast`](super::Plan::Broadcast)): the queue-delivered broadcast commit (the worker's), the
//! regions loaded for the inline one, and the parent's `ttl` re-armed, since a broadcast
//! is activity.

use stm_core::engine;
use stm_core::{Definition, Event, Execution};
use stm_store::{Commit, TimerOp};

use super::error::check_event_size;
use super::plan::region_ids;
use super::step::{armed, outbox_entries};
use super::{Driver, DriverError, StepReport};

impl Driver {
    /// The queue-delivered broadcast ([`Plan::Broadcast`](super::Plan::Broadcast) carried out by the worker,
    /// and for an event released from the parked list): a domain event for a parent whose
    /// regions are live becomes one outbox entry per region, committed atomically with the
    /// parent's processed mark (and, for a machine with `ttl`, the re-armed budget: the
    /// broadcast is activity). Nothing runs on the parent itself. `defn` is `exe`'s
    /// version.
    pub async fn commit_broadcast(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: &Event,
        region_ids: &[String],
    ) -> Result<StepReport, DriverError> {
        self.broadcast_unparking(defn, exe, event, region_ids, None).await
    }

    /// [`commit_broadcast`](Self::commit_broadcast) of a parked event released from its
    /// row: `unpark`, the row and claim its commit deletes.
    pub(crate) async fn broadcast_unparking(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: &Event,
        region_ids: &[String],
        unpark: Option<stm_store::Unpark>,
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
            unpark: unpark.into_iter().collect(),
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

    /// The regions of `exe` that a domain event is broadcast to ([`region_ids`]) that have
    /// a record: the embedded runner's broadcast, loaded.
    pub(crate) async fn live_regions(&self, exe: &Execution) -> Result<Vec<Execution>, DriverError> {
        let mut live = Vec::new();
        for id in region_ids(exe) {
            if let Some(child) = self.store.load(&id).await? {
                live.push(child);
            }
        }
        Ok(live)
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
