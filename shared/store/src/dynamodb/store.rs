//! The [`ExecutionStore`] implementation of [`DynamoDbStore`]: each method is one of the
//! other parts (`load`, `commit`, `listing`, `backlog`, `timers`, `due`, `trace`, `purge`).

use async_trait::async_trait;
use stm_core::{Execution, Map};

use super::DynamoDbStore;
use crate::{
    ArmedTimer, Commit, DueCursor, DueTimer, ExecutionPage, ExecutionStore, InState, JoinReport, JoinTally,
    ListQuery, OutboxEntry, Parked, ParkedEvent, PendingRows, PendingSeq, SpawnEntry, StoreError, TimerClaim,
    Written,
};

#[async_trait]
impl ExecutionStore for DynamoDbStore {
    async fn load(&self, id: &str) -> Result<Option<Execution>, StoreError> {
        self.load_execution(id).await
    }

    async fn report_to_join(&self, report: &JoinReport) -> Result<Option<JoinTally>, StoreError> {
        self.record_join_report(report).await
    }

    async fn take_park_number(&self, id: &str) -> Result<u64, StoreError> {
        self.take_park_number_of(id).await
    }

    async fn last_park_number(&self, id: &str) -> Result<u64, StoreError> {
        self.last_park_number_of(id).await
    }

    async fn park(&self, id: &str, version: i64, parked: &ParkedEvent) -> Result<Parked, StoreError> {
        self.park_event(id, version, parked).await
    }

    async fn parked_events(
        &self,
        id: &str,
        after: u64,
        through: u64,
    ) -> Result<Vec<ParkedEvent>, StoreError> {
        self.parked_events_of(id, after, through).await
    }

    async fn load_for_event(
        &self,
        id: &str,
        event_id: &str,
    ) -> Result<(Option<Execution>, bool), StoreError> {
        let (exe, marks) = self.load_for_events(id, &[event_id]).await?;
        Ok((exe, marks.first().copied().unwrap_or(false)))
    }

    async fn load_for_events(
        &self,
        id: &str,
        event_ids: &[&str],
    ) -> Result<(Option<Execution>, Vec<bool>), StoreError> {
        self.load_with_marks(id, event_ids).await
    }

    fn check_commit(&self, exe: &Execution, commit: &Commit) -> Result<(), StoreError> {
        self.check_commit_fits(exe, commit)
    }

    async fn commit(&self, exe: &mut Execution, commit: Commit) -> Result<Written, StoreError> {
        self.commit_execution(exe, commit).await
    }

    async fn is_processed(&self, id: &str, event_id: &str) -> Result<bool, StoreError> {
        self.processed(id, event_id).await
    }

    async fn list_executions(&self, query: &ListQuery) -> Result<ExecutionPage, StoreError> {
        self.list_page(query).await
    }

    async fn pending_outbox(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        self.outbox_entries().await
    }

    async fn in_states(
        &self,
        definition_id: &str,
        paths: &[String],
        entered_by: Option<f64>,
    ) -> Result<Vec<InState>, StoreError> {
        self.query_states(definition_id, paths, entered_by).await
    }

    async fn ack_outbox(&self, seq: i64) -> Result<(), StoreError> {
        self.delete_by_seq(&self.tables.outbox, seq).await
    }

    async fn pending_spawns(&self) -> Result<Vec<SpawnEntry>, StoreError> {
        self.spawn_intents().await
    }

    async fn ack_spawn(&self, seq: i64) -> Result<(), StoreError> {
        self.delete_by_seq(&self.tables.spawns, seq).await
    }

    async fn pending_rows_of(&self, id: &str) -> Result<PendingRows, StoreError> {
        self.last_block_rows(id).await
    }

    async fn oldest_pending_seqs(
        &self,
        limit: usize,
        settled_before: f64,
    ) -> Result<Vec<PendingSeq>, StoreError> {
        self.lowest_pending_seqs(limit, settled_before).await
    }

    async fn pending_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<PendingRows, StoreError> {
        self.rows_by_seq(spawns, outbox).await
    }

    async fn ack_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<(), StoreError> {
        self.delete_rows(spawns, outbox).await
    }

    /// The due index, and the full scan when scheduled (see [`due`](super::due)).
    async fn due_timers(&self, now: f64) -> Result<Vec<DueTimer>, StoreError> {
        Ok(self.due_timers_with_stats(now).await?.0)
    }

    async fn due_page(
        &self,
        now: f64,
        cursor: &mut DueCursor,
        limit: usize,
    ) -> Result<Vec<DueTimer>, StoreError> {
        self.due_page_at(now, cursor, limit).await
    }

    async fn delete_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<(), StoreError> {
        self.delete_timer_at(id, path, fire_at).await
    }

    async fn purge(&self, id: &str, expected_version: i64) -> Result<bool, StoreError> {
        self.purge_execution(id, expected_version).await
    }

    async fn routes(&self) -> Result<crate::Routes, StoreError> {
        self.read_routes().await
    }

    async fn put_routes(&self, routes: &crate::Routes, read: u64) -> Result<bool, StoreError> {
        self.write_routes(routes, read).await
    }

    async fn add_tallies(&self, adds: &[(String, crate::Tally)], expires: i64) -> Result<(), StoreError> {
        self.add_to_tallies(adds, expires).await
    }

    async fn tally(&self, keys: &[String]) -> Result<crate::Tally, StoreError> {
        self.sum_tallies(keys).await
    }

    async fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.scan_ids_with_prefixes(&[prefix.to_string()]).await
    }

    async fn ids_with_any_prefix(&self, prefixes: &[String]) -> Result<Vec<String>, StoreError> {
        self.scan_ids_with_prefixes(prefixes).await
    }

    async fn armed_timer(&self, id: &str, path: &str) -> Result<Option<f64>, StoreError> {
        Ok(self.armed_fire_at(id, path).await?.map(|(fire_at, _)| fire_at))
    }

    async fn armed_timer_in_trace(
        &self,
        id: &str,
        path: &str,
    ) -> Result<Option<(f64, Option<String>)>, StoreError> {
        self.armed_fire_at(id, path).await
    }

    async fn claim_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<TimerClaim, StoreError> {
        self.claim_timer_at(id, path, fire_at).await
    }

    async fn timers_of(&self, id: &str) -> Result<Vec<ArmedTimer>, StoreError> {
        self.armed_timers_of(id).await
    }

    async fn read_trace(&self, id: &str) -> Result<Vec<Map>, StoreError> {
        self.trace_of(id).await
    }

    async fn append_trace(&self, id: &str, entry: Map) -> Result<(), StoreError> {
        self.append_trace_step(id, entry).await
    }
}
