//! The store and the queue as a crashing process sees them: each call counts its
//! boundary, crashes at an armed point, and fails once the process is dead.

use async_trait::async_trait;
use stm_runtime::queue::{HookedQueue, QueueCall, QueueError, QueueHook};
use stm_store::{StoreError, Written};

use crate::common::hooked_store::{Call, HookedStore, StoreHook};
use crate::plan::{Actor, Boundary, CrashPlan};

fn dead_store() -> StoreError {
    StoreError::backend("injected crash: this process is dead")
}

fn dead_queue(operation: &str) -> QueueError {
    QueueError::failed(operation, "injected crash: this process is dead")
}

/// The store as a crashing process sees it.
pub(crate) type CrashingStore = HookedStore<CrashPlan>;

impl CrashPlan {
    /// Fail unless alive, and die (failing) if `boundary` is armed here.
    fn gate(&self, boundary: Option<Boundary>) -> Result<(), StoreError> {
        if self.is_dead() || boundary.is_some_and(|b| self.reach(b)) {
            return Err(dead_store());
        }
        Ok(())
    }
}

#[async_trait]
impl StoreHook for CrashPlan {
    async fn before(&self, call: &Call<'_>) -> Result<(), StoreError> {
        self.gate(match call {
            _ if call.is_load() => Some(Boundary::BeforeLoad),
            Call::Commit { .. } => Some(Boundary::BeforeCommit),
            // only the relay's passes read rows by seq
            Call::PendingRows => Some(Boundary::BetweenRelayReads),
            // only the sweeper deletes timers, right after it published the Timeout
            Call::DeleteTimer => Some(Boundary::AfterSweepPublish),
            // the rest (the worker's timer claim before its commit included) only fail
            // once the process is dead
            _ => None,
        })
    }

    fn committed(&self, written: &Written) -> Result<(), StoreError> {
        self.record_spawn_rows(&written.spawns);
        // the write is durable; the process dies before it can use the result
        self.gate(Some(Boundary::AfterCommit))
    }
}

/// The queue as a crashing process sees it.
pub(crate) type CrashingQueue = HookedQueue<CrashPlan>;

#[async_trait]
impl QueueHook for CrashPlan {
    /// Every call fails once the process is dead (a publish: each of its messages).
    async fn before(&self, call: &QueueCall<'_>) -> Result<(), QueueError> {
        if self.is_dead() {
            return Err(dead_queue(call.operation()));
        }
        Ok(())
    }

    async fn after(&self, call: &QueueCall<'_>) {
        // the sweeper's publish is followed by its delete_timer (boundary 5), everyone
        // else's by the outbox / spawn acks (boundary 4)
        // a publish that was in flight in another relay lane when this process died went
        // out, but the process is gone: it reaches nothing
        if matches!(call, QueueCall::PublishBatch { .. }) && self.actor() != Actor::Sweeper && !self.is_dead()
        {
            self.reach(Boundary::AfterPublish);
        }
    }
}
