//! The seams that let a replay run the real code one call at a time: each actor (a
//! worker, the relay, the sweeper) gets its own view of the store and the queue, which
//! stops before each call that is a step of the model, says which call it is, and waits
//! for the replay's permit. Calls that are not a step of their own (the spawn path's read
//! of the parent, the relay's read of the rows it just listed, the sweeper's load beside
//! its timer's re-read) go through at once. The due index's lag is the replay's to set.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use stm_core::Execution;
use stm_runtime::queue::{HookedQueue, QueueCall, QueueError, QueueHook};
use stm_runtime::MemoryQueue;
use stm_store::{
    Commit, DueCursor, DueTimer, ExecutionPage, ExecutionStore, InState, ListQuery, MemoryStore, OutboxEntry,
    PendingRows, PendingSeq, SpawnEntry, StoreError, TimerClaim, Written,
};
use tokio::sync::{mpsc, Semaphore};

/// One actor's stop before its next call.
#[derive(Debug)]
pub struct Gate {
    calls: mpsc::UnboundedSender<&'static str>,
    permits: Semaphore,
}

impl Gate {
    /// A gate, and the receiver of the calls it stops before.
    pub fn new() -> (Arc<Gate>, mpsc::UnboundedReceiver<&'static str>) {
        let (calls, rx) = mpsc::unbounded_channel();
        (
            Arc::new(Gate {
                calls,
                permits: Semaphore::new(0),
            }),
            rx,
        )
    }

    /// Let the actor make the call it stopped before.
    pub fn open(&self) {
        self.permits.add_permits(1);
    }

    async fn pause(&self, call: &'static str) {
        // the replay dropped its receiver: nobody steps this actor any more, let it run
        if self.calls.send(call).is_err() {
            return;
        }
        if let Ok(permit) = self.permits.acquire().await {
            permit.forget();
        }
    }
}

/// The due index the sweeper reads: the timers as the index last saw them.
pub type IndexView = Arc<Mutex<Vec<DueTimer>>>;

/// The store as one actor sees it.
#[derive(Debug)]
pub struct GatedStore {
    pub inner: Arc<MemoryStore>,
    pub gate: Arc<Gate>,
    pub index: IndexView,
    /// Ids whose plain `load` is no step of its own (the parent a spawn intent reads).
    pub free_loads: Vec<String>,
    /// A planted change (tests of the replay itself): commits lose their processed marks.
    pub drop_marks: bool,
}

impl GatedStore {
    async fn pause(&self, call: &'static str) {
        self.gate.pause(call).await;
    }
}

#[async_trait]
impl ExecutionStore for GatedStore {
    async fn load(&self, id: &str) -> Result<Option<Execution>, StoreError> {
        if !self.free_loads.iter().any(|free| free == id) {
            self.pause("load").await;
        }
        self.inner.load(id).await
    }

    async fn load_for_event(
        &self,
        id: &str,
        event_id: &str,
    ) -> Result<(Option<Execution>, bool), StoreError> {
        self.pause("load").await;
        self.inner.load_for_event(id, event_id).await
    }

    async fn load_for_events(
        &self,
        id: &str,
        event_ids: &[&str],
    ) -> Result<(Option<Execution>, Vec<bool>), StoreError> {
        self.pause("load").await;
        self.inner.load_for_events(id, event_ids).await
    }

    fn check_commit(&self, exe: &Execution, commit: &Commit) -> Result<(), StoreError> {
        self.inner.check_commit(exe, commit)
    }

    async fn commit(&self, exe: &mut Execution, mut commit: Commit) -> Result<Written, StoreError> {
        self.pause("commit").await;
        if self.drop_marks {
            commit.processed_event_ids.clear();
        }
        self.inner.commit(exe, commit).await
    }

    async fn is_processed(&self, id: &str, event_id: &str) -> Result<bool, StoreError> {
        self.inner.is_processed(id, event_id).await
    }

    async fn report_to_join(
        &self,
        report: &stm_store::JoinReport,
    ) -> Result<Option<stm_store::JoinTally>, StoreError> {
        self.pause("report_to_join").await;
        self.inner.report_to_join(report).await
    }

    async fn list_executions(&self, query: &ListQuery) -> Result<ExecutionPage, StoreError> {
        self.inner.list_executions(query).await
    }

    async fn take_park_number(&self, id: &str) -> Result<u64, StoreError> {
        self.inner.take_park_number(id).await
    }

    async fn last_park_number(&self, id: &str) -> Result<u64, StoreError> {
        self.inner.last_park_number(id).await
    }

    /// The model's park: one step, as the first of a run's commit is; a redelivery of an
    /// event kept already writes nothing, and is no step (the model's worker is done with
    /// it).
    async fn park(
        &self,
        id: &str,
        version: i64,
        parked: &stm_store::ParkedEvent,
    ) -> Result<stm_store::Parked, StoreError> {
        if !self.inner.is_kept(id, &parked.event.id) {
            self.pause("commit").await;
        }
        self.inner.park(id, version, parked).await
    }

    async fn parked_events(
        &self,
        id: &str,
        after: u64,
        through: u64,
    ) -> Result<Vec<stm_store::ParkedEvent>, StoreError> {
        self.inner.parked_events(id, after, through).await
    }

    async fn pending_outbox(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        self.inner.pending_outbox().await
    }

    async fn ack_outbox(&self, seq: i64) -> Result<(), StoreError> {
        self.pause("ack_rows").await;
        self.inner.ack_outbox(seq).await
    }

    async fn pending_spawns(&self) -> Result<Vec<SpawnEntry>, StoreError> {
        self.inner.pending_spawns().await
    }

    async fn ack_spawn(&self, seq: i64) -> Result<(), StoreError> {
        self.pause("ack_rows").await;
        self.inner.ack_spawn(seq).await
    }

    async fn pending_rows_of(&self, id: &str) -> Result<PendingRows, StoreError> {
        self.pause("pending_rows_of").await;
        self.inner.pending_rows_of(id).await
    }

    async fn oldest_pending_seqs(
        &self,
        limit: usize,
        settled_before: f64,
    ) -> Result<Vec<PendingSeq>, StoreError> {
        self.pause("oldest_pending_seqs").await;
        self.inner.oldest_pending_seqs(limit, settled_before).await
    }

    async fn pending_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<PendingRows, StoreError> {
        self.inner.pending_rows(spawns, outbox).await
    }

    async fn ack_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<(), StoreError> {
        self.pause("ack_rows").await;
        self.inner.ack_rows(spawns, outbox).await
    }

    async fn in_states(
        &self,
        definition_id: &str,
        paths: &[String],
        entered_by: Option<f64>,
    ) -> Result<Vec<InState>, StoreError> {
        self.inner.in_states(definition_id, paths, entered_by).await
    }

    /// The lagging index's answer, not the table's: earliest first, then by path (the
    /// model's order; one `fire_at` for two paths of an execution is the index's to order).
    async fn due_timers(&self, now: f64) -> Result<Vec<DueTimer>, StoreError> {
        self.pause("due_timers").await;
        let mut listed = self.index.lock().unwrap_or_else(|e| e.into_inner()).clone();
        listed.retain(|t| t.fire_at <= now);
        listed.sort_by(|a, b| a.fire_at.total_cmp(&b.fire_at).then_with(|| a.path.cmp(&b.path)));
        Ok(listed)
    }

    /// A page of the lagging index's answer (the model's sweeper reads one page: it lists
    /// at most two timers).
    async fn due_page(
        &self,
        now: f64,
        cursor: &mut DueCursor,
        limit: usize,
    ) -> Result<Vec<DueTimer>, StoreError> {
        self.pause("due_timers").await;
        let listed = self.index.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Ok(cursor.page_of(listed.into_iter().filter(|t| t.fire_at <= now), limit))
    }

    async fn delete_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<(), StoreError> {
        self.pause("delete_timer").await;
        self.inner.delete_timer(id, path, fire_at).await
    }

    async fn armed_timer(&self, id: &str, path: &str) -> Result<Option<f64>, StoreError> {
        self.pause("armed_timer").await;
        self.inner.armed_timer(id, path).await
    }

    async fn armed_timer_in_trace(
        &self,
        id: &str,
        path: &str,
    ) -> Result<Option<(f64, Option<String>)>, StoreError> {
        self.pause("armed_timer").await;
        self.inner.armed_timer_in_trace(id, path).await
    }

    /// No step of its own: `commit_status` reads the timers with its load.
    async fn timers_of(&self, id: &str) -> Result<Vec<stm_store::ArmedTimer>, StoreError> {
        self.inner.timers_of(id).await
    }

    async fn claim_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<TimerClaim, StoreError> {
        self.pause("claim_timer").await;
        self.inner.claim_timer(id, path, fire_at).await
    }

    async fn read_trace(&self, id: &str) -> Result<Vec<stm_core::Map>, StoreError> {
        self.inner.read_trace(id).await
    }

    async fn append_trace(&self, id: &str, entry: stm_core::Map) -> Result<(), StoreError> {
        self.inner.append_trace(id, entry).await
    }

    async fn purge(&self, id: &str, expected_version: i64) -> Result<bool, StoreError> {
        self.inner.purge(id, expected_version).await
    }

    async fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.inner.ids_with_prefix(prefix).await
    }

    // the model's machines have no routes: these are the inner store's, ungated
    async fn routes(&self) -> Result<stm_store::Routes, StoreError> {
        self.inner.routes().await
    }

    async fn put_routes(&self, routes: &stm_store::Routes, read: u64) -> Result<bool, StoreError> {
        self.inner.put_routes(routes, read).await
    }

    async fn add_tallies(&self, adds: &[(String, stm_store::Tally)], expires: i64) -> Result<(), StoreError> {
        self.inner.add_tallies(adds, expires).await
    }

    async fn tally(&self, keys: &[String]) -> Result<stm_store::Tally, StoreError> {
        self.inner.tally(keys).await
    }
}

/// The queue as one actor sees it: its publishes and visibility changes are steps.
pub type GatedQueue = HookedQueue<QueueGate, MemoryQueue>;

/// A [`GatedQueue`]'s hook: the actor's gate.
#[derive(Debug)]
pub struct QueueGate(pub Arc<Gate>);

#[async_trait]
impl QueueHook for QueueGate {
    async fn before(&self, call: &QueueCall<'_>) -> Result<(), QueueError> {
        match call {
            QueueCall::PublishBatch { .. } => self.0.pause("publish_batch").await,
            QueueCall::ChangeVisibility { .. } => self.0.pause("change_visibility").await,
            QueueCall::Receive { .. } | QueueCall::Delete { .. } => {}
        }
        Ok(())
    }
}
