//! [`MemoryStore`]: the in-process store behind `stm run` and the tests.
//!
//! It keeps serialized-equivalent copies (clones), so unlike harel's `DictStore` a
//! caller's later mutation of an execution never leaks into the store without a
//! commit. The CAS therefore bites exactly as it does on DynamoDB.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use stm_core::{Execution, FastMap, FastSet, Map, Value};

use crate::join::{self, JoinReport, JoinTally};
use crate::states::StateEntry;
use crate::{
    ArmedTimer, Commit, DueCursor, DueTimer, ExecutionPage, ExecutionStore, ExecutionSummary, InState,
    ListQuery, OutboxEntry, Parked, ParkedEvent, PendingRows, PendingSeq, SpawnEntry, StoreError, TimerClaim,
    TimerOp, Unpark, Written, DEFAULT_TRACE_MAX,
};

#[derive(Default, Debug)]
struct Inner {
    executions: BTreeMap<String, Execution>,
    outbox: BTreeMap<i64, OutboxEntry>,
    spawns: BTreeMap<i64, SpawnEntry>,
    /// execution id -> processed event ids (nested so a lookup needs no allocation).
    processed: FastMap<String, FastSet<String>>,
    /// (execution id, path) -> (fire_at, held: out of the due listing while its
    /// execution is suspended, when it was armed: its place in `arming`).
    timers: FastMap<(String, String), Armed>,
    /// Arming order: harel's `DictStore` lists due timers in it (ties keep it).
    arming: BTreeMap<u64, (String, String)>,
    next_arming: u64,
    /// The timers not held, in due order: a sweep's page is read from it without a pass
    /// over every timer (10^6 timers due at once were a quadratic sweep).
    due_order: std::collections::BTreeSet<DueKey>,
    /// execution id -> the paths of its timers (`timers_of` without a pass over all).
    timer_paths: FastMap<String, FastSet<String>>,
    /// execution id -> (next index, steps).
    trace: BTreeMap<String, (i64, Vec<Map>)>,
    /// The last seq given: one sequence for both tables, a commit's spawn rows first, as
    /// the DynamoDB store's blocks.
    last_seq: i64,
    /// execution id -> the seqs of its last commit with rows.
    last_rows: FastMap<String, Written>,
    /// execution id -> its state index entry (the executions not DONE or CANCELLED).
    states: FastMap<String, StateEntry>,
    /// A counted join's rows ([`crate::join`]): row key -> its set.
    join_rows: FastMap<String, std::collections::BTreeSet<String>>,
    /// Parked events ([`crate::parked`]): execution id -> its rows.
    parked: FastMap<String, ParkedRows>,
    /// Every machine's route ([`crate::route`]).
    routes: crate::Routes,
    /// Tally items ([`crate::route`]): key -> its sum.
    tallies: FastMap<String, crate::Tally>,
}

/// One execution's parked rows: the last number taken, the rows by number, the claims.
#[derive(Default, Debug)]
struct ParkedRows {
    last: u64,
    rows: BTreeMap<u64, stm_core::Event>,
    claims: FastSet<String>,
}

impl ParkedRows {
    fn keep(&mut self, parked: &ParkedEvent) {
        self.claims.insert(parked.event.id.clone());
        self.rows.insert(parked.number, parked.event.clone());
    }

    fn unpark(&mut self, released: &Unpark) {
        self.rows.remove(&released.number);
        self.claims.remove(&released.event_id);
    }
}

/// An armed timer.
#[derive(Debug, Clone)]
struct Armed {
    fire_at: f64,
    held: bool,
    arming: u64,
    /// The arming commit's ([`crate::Commit::trace_context`]).
    trace_context: Option<String>,
}

/// A timer in the order a sweep fires in ([`due_order`](crate::due::due_order), the one a
/// cursor pages by).
#[derive(Debug, Clone)]
struct DueKey(DueTimer);

impl PartialEq for DueKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for DueKey {}
impl PartialOrd for DueKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for DueKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        crate::due::due_order(&self.0, &other.0)
    }
}

impl DueKey {
    fn of(key: &(String, String), fire_at: f64) -> DueKey {
        DueKey(DueTimer {
            execution_id: key.0.clone(),
            path: key.1.clone(),
            fire_at,
        })
    }
}

impl Inner {
    /// Whether `event_id` is kept parked for `id` (its claim is there).
    fn is_kept(&self, id: &str, event_id: &str) -> bool {
        self.parked
            .get(id)
            .is_some_and(|rows| rows.claims.contains(event_id))
    }

    /// The timers due at `now` that are not held, in arming order.
    fn due(&self, now: f64) -> Vec<DueTimer> {
        self.arming
            .values()
            .filter_map(|key| {
                let armed = self.timers.get(key)?;
                (armed.fire_at <= now && !armed.held).then(|| DueTimer {
                    execution_id: key.0.clone(),
                    path: key.1.clone(),
                    fire_at: armed.fire_at,
                })
            })
            .collect()
    }

    /// At most `limit` of the timers due at `now` that are not held, in due order, after
    /// `after` (the last a sweep's cursor gave).
    fn due_after(&self, now: f64, after: Option<&DueTimer>, limit: usize) -> Vec<DueTimer> {
        use std::ops::Bound;
        let start = after.map_or(Bound::Unbounded, |last| Bound::Excluded(DueKey(last.clone())));
        self.due_order
            .range((start, Bound::Unbounded))
            .take_while(|key| key.0.fire_at <= now)
            .take(limit.max(1))
            .map(|key| key.0.clone())
            .collect()
    }

    fn arm(&mut self, id: &str, path: String, fire_at: f64, held: bool, trace_context: Option<String>) {
        let key = (id.to_string(), path);
        // a re-armed timer keeps its place in arming order, as a Python dict's key does
        let arming = match self.timers.get(&key).map(|armed| armed.arming) {
            Some(arming) => {
                self.disarm(&key);
                arming
            }
            None => {
                let arming = self.next_arming;
                self.next_arming += 1;
                arming
            }
        };
        self.timer_paths
            .entry(id.to_string())
            .or_default()
            .insert(key.1.clone());
        self.arming.insert(arming, key.clone());
        if !held {
            self.due_order.insert(DueKey::of(&key, fire_at));
        }
        self.timers.insert(
            key,
            Armed {
                fire_at,
                held,
                arming,
                trace_context,
            },
        );
    }

    fn disarm(&mut self, key: &(String, String)) {
        if let Some(armed) = self.timers.remove(key) {
            self.arming.remove(&armed.arming);
            if !armed.held {
                self.due_order.remove(&DueKey::of(key, armed.fire_at));
            }
        }
        if let Some(paths) = self.timer_paths.get_mut(&key.0) {
            paths.remove(&key.1);
            if paths.is_empty() {
                self.timer_paths.remove(&key.0);
            }
        }
    }
}

/// An in-memory [`ExecutionStore`].
#[derive(Debug)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    trace_max: usize,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    /// Whether `event_id` is kept parked for `id` (its claim is there): what a park of it
    /// would answer `AlreadyKept` to, read without parking it.
    pub fn is_kept(&self, id: &str, event_id: &str) -> bool {
        self.lock().is_kept(id, event_id)
    }

    pub fn new() -> Self {
        MemoryStore::with_trace_max(DEFAULT_TRACE_MAX)
    }

    /// A store whose trace ring keeps the last `trace_max` steps (0: unbounded).
    pub fn with_trace_max(trace_max: usize) -> Self {
        MemoryStore {
            inner: Mutex::new(Inner::default()),
            trace_max,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every stored execution, by id (for tests and `stm run --json`).
    pub fn all_executions(&self) -> Vec<Execution> {
        self.lock().executions.values().cloned().collect()
    }

    /// How many timers are armed (for tests).
    pub fn timer_count(&self) -> usize {
        self.lock().timers.len()
    }

    fn record_trace(inner: &mut Inner, trace_max: usize, id: &str, mut entry: Map) {
        let (next, steps) = inner.trace.entry(id.to_string()).or_default();
        let idx = match entry.get("index").and_then(Value::as_i64) {
            Some(given) => given,
            None => *next,
        };
        *next += 1;
        entry.insert("index".into(), Value::from(idx));
        steps.push(entry);
        if trace_max > 0 && steps.len() > trace_max {
            let excess = steps.len() - trace_max;
            steps.drain(..excess);
        }
    }
}

#[async_trait]
impl ExecutionStore for MemoryStore {
    async fn load(&self, id: &str) -> Result<Option<Execution>, StoreError> {
        Ok(self.lock().executions.get(id).cloned())
    }

    async fn report_to_join(&self, report: &JoinReport) -> Result<Option<JoinTally>, StoreError> {
        let slot = &report.slot;
        let mut inner = self.lock();
        let shard = join::shard_of(slot.index);
        let row = inner
            .join_rows
            .entry(join::shard_key(&slot.prefix, shard))
            .or_default();
        row.insert(join::element(report));
        if (row.len() as u64) < join::shard_size(slot.total, shard) {
            return Ok(None);
        }
        let root = inner.join_rows.entry(join::root_key(&slot.prefix)).or_default();
        root.insert(shard.to_string());
        if (root.len() as u64) < join::shards(slot.total) {
            return Ok(None);
        }
        let rows = &inner.join_rows;
        let elements = (0..join::shards(slot.total))
            .filter_map(|s| rows.get(&join::shard_key(&slot.prefix, s)))
            .flatten()
            .map(String::as_str);
        Ok(Some(join::tally(elements)))
    }

    async fn take_park_number(&self, id: &str) -> Result<u64, StoreError> {
        let mut inner = self.lock();
        let rows = inner.parked.entry(id.to_string()).or_default();
        rows.last += 1;
        Ok(rows.last)
    }

    async fn last_park_number(&self, id: &str) -> Result<u64, StoreError> {
        Ok(self.lock().parked.get(id).map_or(0, |rows| rows.last))
    }

    async fn park(&self, id: &str, version: i64, parked: &ParkedEvent) -> Result<Parked, StoreError> {
        let mut inner = self.lock();
        // a redelivery is told first, as the DynamoDB store reads the claim's refusal first
        if inner.is_kept(id, &parked.event.id) {
            return Ok(Parked::AlreadyKept);
        }
        let found = inner.executions.get(id).map(|e| e.version);
        if found != Some(version) {
            return Err(StoreError::Conflict {
                id: id.to_string(),
                expected: version,
                found,
            });
        }
        inner.parked.entry(id.to_string()).or_default().keep(parked);
        Ok(Parked::Kept)
    }

    async fn parked_events(
        &self,
        id: &str,
        after: u64,
        through: u64,
    ) -> Result<Vec<ParkedEvent>, StoreError> {
        let inner = self.lock();
        let Some(rows) = inner.parked.get(id) else {
            return Ok(Vec::new());
        };
        Ok(rows
            .rows
            .range(crate::parked::page(after, through))
            .map(|(number, event)| ParkedEvent {
                number: *number,
                event: event.clone(),
            })
            .collect())
    }

    async fn load_for_event(
        &self,
        id: &str,
        event_id: &str,
    ) -> Result<(Option<Execution>, bool), StoreError> {
        let inner = self.lock();
        let exe = inner.executions.get(id).cloned();
        let processed = inner.processed.get(id).is_some_and(|ids| ids.contains(event_id));
        Ok((exe, processed))
    }

    async fn load_for_events(
        &self,
        id: &str,
        event_ids: &[&str],
    ) -> Result<(Option<Execution>, Vec<bool>), StoreError> {
        let inner = self.lock();
        let exe = inner.executions.get(id).cloned();
        let marks = inner.processed.get(id);
        let processed = event_ids
            .iter()
            .map(|e| marks.is_some_and(|ids| ids.contains(*e)))
            .collect();
        Ok((exe, processed))
    }

    /// No limit on what one commit holds.
    fn check_commit(&self, _exe: &Execution, _commit: &Commit) -> Result<(), StoreError> {
        Ok(())
    }

    async fn commit(&self, exe: &mut Execution, commit: Commit) -> Result<Written, StoreError> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        // one lookup for the CAS and the write
        let stored = inner.executions.get_mut(&exe.id);
        let found = stored.as_ref().map(|e| e.version);
        if found.unwrap_or(0) != exe.version {
            return Err(StoreError::Conflict {
                id: exe.id.clone(),
                expected: exe.version,
                found,
            });
        }
        exe.version += 1;
        match stored {
            // overwrite in place: reuses the stored copy's buffers
            Some(stored) => stored.clone_from(exe),
            None => {
                inner.executions.insert(exe.id.clone(), exe.clone());
            }
        }
        StateEntry::commit_into(&mut inner.states, exe, || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        });
        if commit.park.is_some() || !commit.unpark.is_empty() {
            let rows = inner.parked.entry(exe.id.clone()).or_default();
            if let Some(parked) = &commit.park {
                rows.keep(parked);
            }
            for released in &commit.unpark {
                rows.unpark(released);
            }
        }
        let mut written = Written::default();
        for spawn in commit.spawns {
            inner.last_seq += 1;
            let seq = inner.last_seq;
            written.spawns.push(seq);
            inner.spawns.insert(
                seq,
                SpawnEntry {
                    seq,
                    parent_id: exe.id.clone(),
                    child_id: spawn.child_id,
                    root_path: spawn.root_path,
                    context: spawn.context,
                    trace_context: commit.trace_context.clone(),
                },
            );
        }
        for (target_id, event) in commit.emits {
            inner.last_seq += 1;
            let seq = inner.last_seq;
            inner.outbox.insert(
                seq,
                OutboxEntry {
                    seq,
                    target_id,
                    event,
                    trace_context: commit.trace_context.clone(),
                },
            );
            written.outbox.push(seq);
        }
        if !commit.processed_event_ids.is_empty() {
            match inner.processed.get_mut(&exe.id) {
                Some(ids) => ids.extend(commit.processed_event_ids),
                None => {
                    inner
                        .processed
                        .insert(exe.id.clone(), FastSet::from_iter(commit.processed_event_ids));
                }
            }
        }
        for op in commit.timers {
            match op {
                TimerOp::Schedule { path, fire_at } => {
                    inner.arm(&exe.id, path, fire_at, false, commit.trace_context.clone())
                }
                TimerOp::Hold { path, fire_at } => {
                    inner.arm(&exe.id, path, fire_at, true, commit.trace_context.clone())
                }
                TimerOp::Cancel { path } => inner.disarm(&(exe.id.clone(), path)),
            }
        }
        for step in commit.traces {
            MemoryStore::record_trace(inner, self.trace_max, &exe.id, step);
        }
        if !written.outbox.is_empty() || !written.spawns.is_empty() {
            inner.last_rows.insert(exe.id.clone(), written.clone());
        }
        Ok(written)
    }

    async fn is_processed(&self, id: &str, event_id: &str) -> Result<bool, StoreError> {
        Ok(self
            .lock()
            .processed
            .get(id)
            .is_some_and(|ids| ids.contains(event_id)))
    }

    async fn list_executions(&self, query: &ListQuery) -> Result<ExecutionPage, StoreError> {
        use std::ops::Bound;
        let inner = self.lock();
        let limit = if query.limit == 0 { 100 } else { query.limit };
        // the cursor is the last id of the previous page, not an offset: the map is ordered
        // by id, so a page resumes after it even when executions were deleted meanwhile (a
        // purge deletes what it pages through), as a DynamoDB scan's key cursor does
        let start = match &query.cursor {
            None => Bound::Unbounded,
            Some(last) => Bound::Excluded(last.as_str()),
        };
        let mut matching = inner
            .executions
            .range::<str, _>((start, Bound::Unbounded))
            .map(|(_, e)| e)
            .filter(|e| query.status.as_ref().is_none_or(|s| s.contains(&e.status)))
            .filter(|e| query.definition_id.as_ref().is_none_or(|d| &e.definition_id == d))
            .filter(|e| !query.roots_only || e.parent_id.is_none());
        let items: Vec<ExecutionSummary> = matching.by_ref().take(limit).map(ExecutionSummary::of).collect();
        let more = matching.next().is_some();
        let next_cursor = more.then(|| items.last().map(|s| s.id.clone())).flatten();
        Ok(ExecutionPage { items, next_cursor })
    }

    async fn pending_outbox(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        Ok(self.lock().outbox.values().cloned().collect())
    }

    async fn ack_outbox(&self, seq: i64) -> Result<(), StoreError> {
        self.lock().outbox.remove(&seq);
        Ok(())
    }

    async fn pending_spawns(&self) -> Result<Vec<SpawnEntry>, StoreError> {
        Ok(self.lock().spawns.values().cloned().collect())
    }

    async fn ack_spawn(&self, seq: i64) -> Result<(), StoreError> {
        self.lock().spawns.remove(&seq);
        Ok(())
    }

    async fn oldest_pending_seqs(
        &self,
        limit: usize,
        _settled_before: f64,
    ) -> Result<Vec<PendingSeq>, StoreError> {
        // one process: no scan to race, every committed row is settled
        let inner = self.lock();
        Ok(PendingSeq::lowest(
            inner
                .spawns
                .iter()
                .take(limit)
                .map(|(seq, row)| (*seq, row.json_bytes())),
            inner
                .outbox
                .iter()
                .take(limit)
                .map(|(seq, row)| (*seq, row.json_bytes())),
            limit,
        ))
    }

    async fn pending_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<PendingRows, StoreError> {
        let inner = self.lock();
        let mut rows = PendingRows {
            spawns: spawns
                .iter()
                .filter_map(|seq| inner.spawns.get(seq).cloned())
                .collect(),
            outbox: outbox
                .iter()
                .filter_map(|seq| inner.outbox.get(seq).cloned())
                .collect(),
        };
        rows.spawns.sort_by_key(|s| s.seq);
        rows.outbox.sort_by_key(|o| o.seq);
        Ok(rows)
    }

    async fn ack_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<(), StoreError> {
        let mut inner = self.lock();
        for seq in spawns {
            inner.spawns.remove(seq);
        }
        for seq in outbox {
            inner.outbox.remove(seq);
        }
        Ok(())
    }

    async fn pending_rows_of(&self, id: &str) -> Result<PendingRows, StoreError> {
        let inner = self.lock();
        let Some(written) = inner.last_rows.get(id) else {
            return Ok(PendingRows::default());
        };
        Ok(PendingRows {
            spawns: written
                .spawns
                .iter()
                .filter_map(|seq| inner.spawns.get(seq).cloned())
                .collect(),
            outbox: written
                .outbox
                .iter()
                .filter_map(|seq| inner.outbox.get(seq).cloned())
                .collect(),
        })
    }

    async fn in_states(
        &self,
        definition_id: &str,
        paths: &[String],
        entered_by: Option<f64>,
    ) -> Result<Vec<InState>, StoreError> {
        let inner = self.lock();
        let mut found: Vec<InState> = inner
            .states
            .iter()
            .filter(|(_, entry)| entry.matches(definition_id, paths, entered_by))
            .map(|(id, entry)| InState {
                id: id.clone(),
                path: entry.path.clone(),
                since: entry.since,
            })
            .collect();
        crate::states::sort_found(&mut found, paths);
        Ok(found)
    }

    async fn due_timers(&self, now: f64) -> Result<Vec<DueTimer>, StoreError> {
        let mut due = self.lock().due(now);
        // earliest first; ties keep arming order (a stable sort)
        due.sort_by(|a, b| a.fire_at.total_cmp(&b.fire_at));
        Ok(due)
    }

    async fn due_page(
        &self,
        now: f64,
        cursor: &mut DueCursor,
        limit: usize,
    ) -> Result<Vec<DueTimer>, StoreError> {
        let page = self.lock().due_after(now, cursor.last_given(), limit);
        cursor.gave(page.last());
        Ok(page)
    }

    async fn delete_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let key = (id.to_string(), path.to_string());
        if inner.timers.get(&key).map(|t| t.fire_at) == Some(fire_at) {
            inner.disarm(&key);
        }
        Ok(())
    }

    async fn armed_timer_in_trace(
        &self,
        id: &str,
        path: &str,
    ) -> Result<Option<(f64, Option<String>)>, StoreError> {
        Ok(self
            .lock()
            .timers
            .get(&(id.to_string(), path.to_string()))
            .map(|t| (t.fire_at, t.trace_context.clone())))
    }

    async fn armed_timer(&self, id: &str, path: &str) -> Result<Option<f64>, StoreError> {
        Ok(self
            .lock()
            .timers
            .get(&(id.to_string(), path.to_string()))
            .map(|t| t.fire_at))
    }

    async fn timers_of(&self, id: &str) -> Result<Vec<ArmedTimer>, StoreError> {
        let inner = self.lock();
        let Some(paths) = inner.timer_paths.get(id) else {
            return Ok(Vec::new());
        };
        let mut armed: Vec<ArmedTimer> = paths
            .iter()
            .filter_map(|path| {
                let armed = inner.timers.get(&(id.to_string(), path.clone()))?;
                Some(ArmedTimer {
                    path: path.clone(),
                    fire_at: armed.fire_at,
                    held: armed.held,
                })
            })
            .collect();
        // by path, as DynamoDB's query of the execution's partition gives them
        armed.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(armed)
    }

    async fn claim_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<TimerClaim, StoreError> {
        let mut inner = self.lock();
        let key = (id.to_string(), path.to_string());
        Ok(match inner.timers.get(&key).map(|t| t.fire_at) {
            Some(armed) if armed == fire_at => {
                inner.disarm(&key);
                TimerClaim::Claimed
            }
            Some(armed) => TimerClaim::Rearmed(armed),
            None => TimerClaim::Absent,
        })
    }

    async fn read_trace(&self, id: &str) -> Result<Vec<Map>, StoreError> {
        Ok(self
            .lock()
            .trace
            .get(id)
            .map(|(_, steps)| steps.clone())
            .unwrap_or_default())
    }

    async fn append_trace(&self, id: &str, entry: Map) -> Result<(), StoreError> {
        let mut inner = self.lock();
        MemoryStore::record_trace(&mut inner, self.trace_max, id, entry);
        Ok(())
    }

    async fn purge(&self, id: &str, expected_version: i64) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        let deleted = match inner.executions.get(id) {
            Some(exe) if exe.version != expected_version => return Ok(false),
            Some(_) => inner.executions.remove(id).is_some(),
            None => false,
        };
        inner.processed.remove(id);
        inner.parked.remove(id);
        inner.last_rows.remove(id);
        inner.states.remove(id);
        inner.trace.remove(id);
        let paths: Vec<String> = inner
            .timer_paths
            .get(id)
            .map(|paths| paths.iter().cloned().collect())
            .unwrap_or_default();
        for path in paths {
            inner.disarm(&(id.to_string(), path));
        }
        inner.timer_paths.remove(id);
        inner
            .outbox
            .retain(|_, entry| entry.target_id.as_deref() != Some(id));
        inner.spawns.retain(|_, spawn| spawn.parent_id != id);
        Ok(deleted)
    }

    async fn routes(&self) -> Result<crate::Routes, StoreError> {
        Ok(self.lock().routes.clone())
    }

    async fn put_routes(&self, routes: &crate::Routes, read: u64) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        if inner.routes.generation != read {
            return Ok(false);
        }
        inner.routes = crate::Routes {
            generation: read + 1,
            ..routes.clone()
        };
        Ok(true)
    }

    async fn add_tallies(&self, adds: &[(String, crate::Tally)], _expires: i64) -> Result<(), StoreError> {
        let mut inner = self.lock();
        for (key, tally) in adds {
            inner.tallies.entry(key.clone()).or_default().add(*tally);
        }
        Ok(())
    }

    async fn tally(&self, keys: &[String]) -> Result<crate::Tally, StoreError> {
        let inner = self.lock();
        let mut sum = crate::Tally::default();
        for key in keys {
            if let Some(tally) = inner.tallies.get(key) {
                sum.add(*tally);
            }
        }
        Ok(sum)
    }

    async fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        use std::ops::Bound;
        // the map is ordered by id: the matches are one contiguous run from `prefix` on
        Ok(self
            .lock()
            .executions
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .map(|(id, _)| id)
            .take_while(|id| id.starts_with(prefix))
            .cloned()
            .collect())
    }
}
