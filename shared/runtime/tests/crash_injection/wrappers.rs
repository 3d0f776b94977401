//! The store and the queue as a crashing process sees them: each call counts its
//! boundary, crashes at an armed point, and fails once the process is dead.

use std::sync::Arc;

use async_trait::async_trait;
use stm_core::{Execution, Map};
use stm_runtime::queue::QueueError;
use stm_runtime::queue::{PublishFailure, ReceivedMessage};
use stm_runtime::{OutgoingMessage, Queue};
use stm_store::{
    Commit, DueTimer, ExecutionPage, ExecutionStore, ListQuery, OutboxEntry, PendingRows, PendingSeq,
    SpawnEntry, StoreError, Written,
};

use crate::plan::{Actor, Boundary, CrashPlan};

fn dead_store() -> StoreError {
    StoreError::backend("injected crash: this process is dead")
}

fn dead_queue(operation: &str) -> QueueError {
    QueueError::failed(operation, "injected crash: this process is dead")
}

/// The store as a crashing process sees it.
pub(crate) struct CrashingStore {
    pub(crate) inner: Arc<dyn ExecutionStore>,
    pub(crate) plan: CrashPlan,
}

impl CrashingStore {
    fn alive(&self) -> Result<(), StoreError> {
        if self.plan.is_dead() {
            Err(dead_store())
        } else {
            Ok(())
        }
    }

    /// Fail unless alive, and die (failing) if `boundary` is armed here.
    fn gate(&self, boundary: Boundary) -> Result<(), StoreError> {
        self.alive()?;
        if self.plan.reach(boundary) {
            return Err(dead_store());
        }
        Ok(())
    }
}

#[async_trait]
impl ExecutionStore for CrashingStore {
    async fn load(&self, id: &str) -> Result<Option<Execution>, StoreError> {
        self.gate(Boundary::BeforeLoad)?;
        self.inner.load(id).await
    }

    async fn load_for_event(
        &self,
        id: &str,
        event_id: &str,
    ) -> Result<(Option<Execution>, bool), StoreError> {
        self.gate(Boundary::BeforeLoad)?;
        self.inner.load_for_event(id, event_id).await
    }
    fn check_commit(&self, exe: &Execution, commit: &Commit) -> Result<(), StoreError> {
        self.inner.check_commit(exe, commit)
    }
    async fn load_for_events(
        &self,
        id: &str,
        event_ids: &[&str],
    ) -> Result<(Option<Execution>, Vec<bool>), StoreError> {
        self.gate(Boundary::BeforeLoad)?;
        self.inner.load_for_events(id, event_ids).await
    }

    async fn commit(&self, exe: &mut Execution, commit: Commit) -> Result<Written, StoreError> {
        self.gate(Boundary::BeforeCommit)?;
        let seqs = self.inner.commit(exe, commit).await?;
        self.plan.record_spawn_rows(&seqs.spawns);
        // the write is durable; the process dies before it can use the result
        self.gate(Boundary::AfterCommit)?;
        Ok(seqs)
    }

    async fn is_processed(&self, id: &str, event_id: &str) -> Result<bool, StoreError> {
        self.alive()?;
        self.inner.is_processed(id, event_id).await
    }

    async fn list_executions(&self, query: &ListQuery) -> Result<ExecutionPage, StoreError> {
        self.alive()?;
        self.inner.list_executions(query).await
    }

    async fn pending_outbox(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        self.alive()?;
        self.inner.pending_outbox().await
    }

    async fn ack_outbox(&self, seq: i64) -> Result<(), StoreError> {
        self.alive()?;
        self.inner.ack_outbox(seq).await
    }

    async fn pending_spawns(&self) -> Result<Vec<SpawnEntry>, StoreError> {
        self.alive()?;
        self.inner.pending_spawns().await
    }

    async fn ack_spawn(&self, seq: i64) -> Result<(), StoreError> {
        self.alive()?;
        self.inner.ack_spawn(seq).await
    }
    async fn pending_rows_of(&self, id: &str) -> Result<PendingRows, StoreError> {
        self.alive()?;
        self.inner.pending_rows_of(id).await
    }

    async fn oldest_pending_seqs(
        &self,
        limit: usize,
        settled_before: f64,
    ) -> Result<Vec<PendingSeq>, StoreError> {
        self.alive()?;
        self.inner.oldest_pending_seqs(limit, settled_before).await
    }

    async fn pending_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<PendingRows, StoreError> {
        // only the relay's passes read rows by seq
        self.gate(Boundary::BetweenRelayReads)?;
        self.inner.pending_rows(spawns, outbox).await
    }

    async fn ack_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<(), StoreError> {
        self.alive()?;
        self.inner.ack_rows(spawns, outbox).await
    }

    async fn due_timers(&self, now: f64) -> Result<Vec<DueTimer>, StoreError> {
        self.alive()?;
        self.inner.due_timers(now).await
    }

    async fn delete_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<(), StoreError> {
        // only the sweeper deletes timers, right after it published the Timeout
        self.gate(Boundary::AfterSweepPublish)?;
        self.inner.delete_timer(id, path, fire_at).await
    }

    async fn armed_timer(&self, id: &str, path: &str) -> Result<Option<f64>, StoreError> {
        self.alive()?;
        self.inner.armed_timer(id, path).await
    }

    async fn claim_timer(
        &self,
        id: &str,
        path: &str,
        fire_at: f64,
    ) -> Result<stm_store::TimerClaim, StoreError> {
        // the worker's, before its commit: a dead process claims nothing
        self.alive()?;
        self.inner.claim_timer(id, path, fire_at).await
    }

    async fn read_trace(&self, id: &str) -> Result<Vec<Map>, StoreError> {
        self.alive()?;
        self.inner.read_trace(id).await
    }

    async fn append_trace(&self, id: &str, entry: Map) -> Result<(), StoreError> {
        self.alive()?;
        self.inner.append_trace(id, entry).await
    }

    async fn purge(&self, id: &str, expected_version: i64) -> Result<bool, StoreError> {
        self.alive()?;
        self.inner.purge(id, expected_version).await
    }

    async fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.alive()?;
        self.inner.ids_with_prefix(prefix).await
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
