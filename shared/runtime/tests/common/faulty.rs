//! A MemoryStore that throttles, conflicts or stalls on demand (the batch rules and the
//! coalescing tests).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use stm_store::{Commit, ExecutionStore, MemoryStore, StoreError};

use super::hooked_store::{
    commit_through, forward_through_hook, oldest_pending_seqs_through, through, Call, Hooked, StoreHook,
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

    async fn throttle_or_stall(&self, id: &str) -> Result<(), StoreError> {
        if self.on() && self.throttled.contains(&id) {
            return Err(StoreError::retryable(
                "ThrottlingException: Rate of requests exceeds the allowed throughput",
            ));
        }
        if self.on() && self.slow.contains(&id) {
            tokio::time::sleep(self.delay).await;
        }
        Ok(())
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

impl Hooked for Faulty {
    type Hook = Faulty;
    fn inner(&self) -> &dyn ExecutionStore {
        &self.inner
    }
    fn hook(&self) -> &Faulty {
        self
    }
}

#[async_trait]
impl StoreHook for Faulty {
    async fn before(&self, call: &Call<'_>) -> Result<(), StoreError> {
        match *call {
            // a burst's load is its first event's (with no event, a plain `load`)
            Call::LoadForEvent { id } => self.throttle_or_stall(id).await,
            Call::LoadForEvents { id, event_ids } if !event_ids.is_empty() => {
                self.throttle_or_stall(id).await
            }
            Call::Commit { exe, .. } if self.on() && self.conflicting.contains(&exe.id.as_str()) => {
                Err(StoreError::Conflict {
                    id: exe.id.clone(),
                    expected: exe.version,
                    found: Some(exe.version + 1),
                })
            }
            _ => Ok(()),
        }
    }

    async fn after(&self, call: &Call<'_>) {
        if matches!(call, Call::PendingOutbox | Call::PendingSpawns) {
            self.land_between_reads().await;
        }
    }

    /// Through this store's own reads, outbox first, so a commit can land between them.
    fn reads_pending_apart(&self) -> bool {
        true
    }
}

forward_through_hook!(impl for Faulty);
