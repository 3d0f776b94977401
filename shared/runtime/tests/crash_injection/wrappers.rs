//! The store and the queue as a crashing process sees them: each call counts its
//! boundary, crashes at an armed point, and fails once the process is dead.

use std::sync::Arc;

use async_trait::async_trait;
use stm_runtime::queue::QueueError;
use stm_runtime::queue::{PublishFailure, ReceivedMessage};
use stm_runtime::{OutgoingMessage, Queue};
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
pub(crate) struct CrashingQueue {
    pub(crate) inner: Arc<dyn Queue>,
    pub(crate) plan: CrashPlan,
}

#[async_trait]
impl Queue for CrashingQueue {
    async fn publish_batch(&self, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        if self.plan.is_dead() {
            return (0..messages.len())
                .map(|index| PublishFailure {
                    index,
                    code: "InjectedCrash".into(),
                    message: "this process is dead".into(),
                })
                .collect();
        }
        let failures = self.inner.publish_batch(messages).await;
        // the sweeper's publish is followed by its delete_timer (boundary 5), everyone
        // else's by the outbox / spawn acks (boundary 4)
        if self.plan.actor() != Actor::Sweeper {
            self.plan.reach(Boundary::AfterPublish);
        }
        failures
    }

    async fn receive(
        &self,
        max: usize,
        visibility_seconds: i32,
        wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, QueueError> {
        if self.plan.is_dead() {
            return Err(dead_queue("ReceiveMessage"));
        }
        self.inner.receive(max, visibility_seconds, wait_seconds).await
    }

    async fn delete(&self, receipt_handle: &str) -> Result<(), QueueError> {
        if self.plan.is_dead() {
            return Err(dead_queue("DeleteMessage"));
        }
        self.inner.delete(receipt_handle).await
    }

    async fn change_visibility(&self, receipt_handle: &str, seconds: i32) -> Result<(), QueueError> {
        if self.plan.is_dead() {
            return Err(dead_queue("ChangeMessageVisibility"));
        }
        self.inner.change_visibility(receipt_handle, seconds).await
    }
}
