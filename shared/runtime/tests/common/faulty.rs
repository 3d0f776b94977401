//! A MemoryStore that throttles, conflicts or stalls on demand (the batch rules and the
//! coalescing tests).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use stm_core::{Execution, Map};
use stm_store::{
    Commit, DueTimer, ExecutionPage, ExecutionStore, ListQuery, MemoryStore, OutboxEntry, PendingRows,
    PendingSeq, SpawnEntry, StoreError, Written,
};

/// MemoryStore, but once `faulty` is on: loading `throttled` fails as a throttle that
/// outlived the retries, committing `conflicting` loses the CAS, and loading `slow`
/// takes `delay`.
#[derive(Default)]
pub struct Faulty {
    pub inner: MemoryStore,
    pub faulty: AtomicBool,
    pub throttled: Vec<&'static str>,
    pub conflicting: Vec<&'static str>,
    pub slow: Vec<&'static str>,
    pub delay: Duration,
    /// Commits that land right after the next read of the pending spawn intents or outbox
    /// (a worker committing while a relay is between its two reads), applied once.
    pub between_reads: std::sync::Mutex<Vec<(String, Commit)>>,
}

impl Faulty {
    pub fn on(&self) -> bool {
        self.faulty.load(Ordering::SeqCst)
    }

    async fn land_between_reads(&self) {
        let commits = std::mem::take(&mut *self.between_reads.lock().unwrap_or_else(|e| e.into_inner()));
        for (id, commit) in commits {
            let mut exe = self.inner.load(&id).await.expect("load").expect("the execution");
            self.inner
                .commit(&mut exe, commit)
                .await
                .expect("the commit between the reads");
        }
    }
}

#[async_trait]
impl ExecutionStore for Faulty {
    async fn load(&self, id: &str) -> Result<Option<Execution>, StoreError> {
        self.inner.load(id).await
    }
    async fn load_for_event(
        &self,
        id: &str,
        event_id: &str,
    ) -> Result<(Option<Execution>, bool), StoreError> {
        if self.on() && self.throttled.contains(&id) {
            return Err(StoreError::retryable(
                "ThrottlingException: Rate of requests exceeds the allowed throughput",
            ));
        }
        if self.on() && self.slow.contains(&id) {
            tokio::time::sleep(self.delay).await;
        }
        self.inner.load_for_event(id, event_id).await
    }
    fn check_commit(&self, exe: &Execution, commit: &Commit) -> Result<(), StoreError> {
        self.inner.check_commit(exe, commit)
    }
    async fn commit(&self, exe: &mut Execution, commit: Commit) -> Result<Written, StoreError> {
        if self.on() && self.conflicting.contains(&exe.id.as_str()) {
            return Err(StoreError::Conflict {
                id: exe.id.clone(),
                expected: exe.version,
                found: Some(exe.version + 1),
            });
        }
        self.inner.commit(exe, commit).await
    }
    async fn is_processed(&self, id: &str, event_id: &str) -> Result<bool, StoreError> {
        self.inner.is_processed(id, event_id).await
    }
    async fn list_executions(&self, query: &ListQuery) -> Result<ExecutionPage, StoreError> {
        self.inner.list_executions(query).await
    }
    async fn pending_outbox(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        let read = self.inner.pending_outbox().await;
        self.land_between_reads().await;
        read
    }
    async fn ack_outbox(&self, seq: i64) -> Result<(), StoreError> {
        self.inner.ack_outbox(seq).await
    }
    async fn pending_spawns(&self) -> Result<Vec<SpawnEntry>, StoreError> {
        let read = self.inner.pending_spawns().await;
        self.land_between_reads().await;
        read
    }
    async fn ack_spawn(&self, seq: i64) -> Result<(), StoreError> {
        self.inner.ack_spawn(seq).await
    }
    async fn pending_rows_of(&self, id: &str) -> Result<PendingRows, StoreError> {
        self.inner.pending_rows_of(id).await
    }
    async fn oldest_pending_seqs(
        &self,
        limit: usize,
        _settled_before: f64,
    ) -> Result<Vec<PendingSeq>, StoreError> {
        // through this store's own reads, outbox first, so a commit can land between them
        let outbox = self.pending_outbox().await?;
        let spawns = self.pending_spawns().await?;
        Ok(PendingSeq::lowest(
            spawns.iter().map(|s| s.seq),
            outbox.iter().map(|o| o.seq),
            limit,
        ))
    }
    async fn pending_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<PendingRows, StoreError> {
        self.inner.pending_rows(spawns, outbox).await
    }
    async fn ack_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<(), StoreError> {
        self.inner.ack_rows(spawns, outbox).await
    }
    async fn due_timers(&self, now: f64) -> Result<Vec<DueTimer>, StoreError> {
        self.inner.due_timers(now).await
    }
    async fn delete_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<(), StoreError> {
        self.inner.delete_timer(id, path, fire_at).await
    }
    async fn armed_timer(&self, id: &str, path: &str) -> Result<Option<f64>, StoreError> {
        self.inner.armed_timer(id, path).await
    }

    async fn claim_timer(
        &self,
        id: &str,
        path: &str,
        fire_at: f64,
    ) -> Result<stm_store::TimerClaim, StoreError> {
        self.inner.claim_timer(id, path, fire_at).await
    }
    async fn read_trace(&self, id: &str) -> Result<Vec<Map>, StoreError> {
        self.inner.read_trace(id).await
    }
    async fn append_trace(&self, id: &str, entry: Map) -> Result<(), StoreError> {
        self.inner.append_trace(id, entry).await
    }

    async fn purge(&self, id: &str, expected_version: i64) -> Result<bool, StoreError> {
        self.inner.purge(id, expected_version).await
    }

    async fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.inner.ids_with_prefix(prefix).await
    }
}
