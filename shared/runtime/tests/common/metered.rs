//! [`MeteredStore`]: a `MemoryStore` that charges a [`PartitionMeter`] with what the
//! DynamoDB store (`stm_store::dynamodb`, the default table layout for the dedupe marks)
//! sends for each trait call, at the simulated time of a shared [`ManualClock`]. The scale
//! simulator (tests/scale.rs) runs the real worker, relay and sweeper over it.
//!
//! The request pattern, per call (read from `dynamodb/load.rs`, `dynamodb/commit/plan.rs`, `dynamodb/due.rs`):
//! - `load`: one consistent `GetItem` of the execution;
//! - `load_for_event(s)`: one consistent `BatchGetItem`: the execution and one processed
//!   mark per (distinct) event, each item billed on its own (a missing one as 0 bytes);
//! - `commit`: one `TransactWriteItems` (the execution put, each outbox row, each spawn
//!   row, each processed mark, each timer put or delete, each trace put and its ring
//!   delete: every item billed twice), or one plain `PutItem` when the commit has no side
//!   item at all. A timer put also writes the timers table's global secondary index
//!   `due_index` under its shard (`due_shard`, [`timer_shard`]): one index write for a new
//!   entry, two when `fire_at` (the index's sort key) moves, one for a removed entry; index
//!   writes are billed as plain writes. An execution whose state index entry changes
//!   (another state, or DONE/CANCELLED: [`state_index_key`]) writes the `executions`
//!   table's `state_index` too: the old entry's delete and the new one's put, each under
//!   its own key; a commit that stays in its state writes nothing there (a GSI is written
//!   only when the item's index key changes). The DynamoDB store's refusals before any call
//!   (over 100 transaction items, an item over 400 KB) are refused here the same way, with
//!   its message;
//! - `ack_outbox` / `ack_spawn` / `delete_timer`: one `DeleteItem` each (a conditional one
//!   for the timer, plus its index entry); `ack_rows`: `BatchWriteItem`s of 25 deletes per
//!   table;
//! - `pending_outbox` / `pending_spawns`: a consistent `Scan` of the whole table;
//!   `oldest_pending_seqs`: a consistent `Scan` of both whole tables (projected to the
//!   seq, but a scan is billed on the items it reads, filter and projection or not). A
//!   scan goes in pages of 1 MB, each billed on its bytes (one unit per 4 KB started, at
//!   least one) to a key of its own, `(scan page N)` (a page reads one key range: the
//!   meter's stand-in for the partition it reads);
//! - `pending_rows`: consistent `BatchGetItem`s of 100 keys, each item billed on its own (a
//!   row acked meanwhile as 0 bytes);
//! - `due_timers`: one eventually consistent `Query` per shard of the due index (a page per
//!   MB), billed on the due entries it reads (at least half a unit), to the shard's key. The
//!   DynamoDB store also runs a full `Scan` of the timers table once per 10 minutes (for
//!   timers harel wrote): charged here pro rata, a 600th of it per simulated second
//!   between sweeps, to the key `(full scan)`, in units only (its few requests per 10
//!   minutes are left out of the request counts);
//! - `pending_rows_of`: one `GetItem` (the execution's rows block), plus a `BatchGetItem`
//!   of the block's rows (its last commit's with rows, acked ones too) when it has one;
//!   `is_processed`, `armed_timer`: one `GetItem`.
//!
//! For a serial caller (the relay's pass, which nothing else runs beside in the
//! simulation), [`MeteredStore::set_serial`] advances the clock by the latency model's
//! time per request, so its load spreads over the seconds it would take.
//!
//! Item sizes are estimated from what is stored (DynamoDB counts attribute names and
//! values; a number is about its digits):
//! - execution: its JSON `data` plus the `id` and `definition_id` attributes (their values
//!   again) plus 80 bytes for the attribute names, the version, the 32-byte commit token
//!   and the rows block;
//! - processed mark: `execution_id` + id + `event_id` + event id (~66 bytes);
//! - outbox row: `seq` and its number (~24 bytes), `target_id` + target, `event` + the
//!   event's JSON (~40 bytes + the JSON);
//! - spawn row: `seq`, `parent_id`, `child_id`, `root_path`, `context` and their values;
//! - timer: `execution_id` + id, `path` + path, `fire_at` + ~18 digits, `due_shard` +
//!   `due#k` (~82 bytes); its index entry the same attributes (under 1 KB: one unit);
//! - trace row: `execution_id` + id, `idx` and its number, `entry` + the entry's JSON.
//!
//! There is no `counters` item: the rows' seqs come from the clock, no shared item is
//! written by every commit.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use stm_core::{Execution, Map};
use stm_runtime::{Clock, ManualClock};
// DynamoDB's limits and the store's constants, as the DynamoDB store has them
use stm_store::dynamodb::{
    state_index_key, state_key, timer_shard, DEFAULT_TIMER_FULL_SCAN_INTERVAL, MAX_BATCH_GET_KEYS,
    MAX_ITEM_BYTES, MAX_TRANSACTION_ITEMS, STATE_SHARDS, TIMER_SHARDS,
};
use stm_store::{
    Commit, DueCursor, DueTimer, ExecutionPage, ExecutionStore, ListQuery, MemoryStore, OutboxEntry,
    PendingRows, PendingSeq, SpawnEntry, StoreError, TimerOp, Written,
};
use stm_testkit::heap::{uncounted, Transient, UncountedScope};
use stm_testkit::meter::PartitionMeter;

// this file is loaded by `#[path]`, so its child needs one too
#[path = "metered/sizes.rs"]
mod sizes;
use sizes::{
    exe_item_bytes, mark_bytes, outbox_row_bytes, spawn_row_bytes, timer_bytes, trace_row_bytes, RowBook,
};

pub const EXECUTIONS: &str = "executions";
pub const PROCESSED: &str = "processed";
pub const OUTBOX: &str = "outbox";
pub const SPAWNS: &str = "spawns";
pub const TIMERS: &str = "timers";
pub const DUE_INDEX: &str = "timers.due_index";
pub const STATE_INDEX: &str = "executions.state_index";
pub const TRACE: &str = "trace";
/// A counted join's rows (`stm_store::join`).
pub const COUNTERS: &str = "counters";

/// A `Scan` or `Query` page.
const PAGE_BYTES: usize = 1024 * 1024;
/// The parallel segments of the DynamoDB store's scan of a rows table (its
/// `SCAN_SEGMENTS`): the pages of one scan go that many at a time.
const SCAN_SEGMENTS: usize = 8;
/// Deletes per `BatchWriteItem` (DynamoDB's limit, the store's `BATCH_WRITE_MAX`).
const BATCH_WRITE_ITEMS: usize = 25;
/// A timer item's size when none was seen yet (bench/cost_inputs.json).
const TYPICAL_TIMER_BYTES: usize = 82;

/// A `MemoryStore` that bills the meter as the DynamoDB store would (module docs).
#[derive(Debug)]
pub struct MeteredStore {
    pub inner: MemoryStore,
    pub meter: PartitionMeter,
    clock: Arc<ManualClock>,
    /// Off: nothing is charged (a simulation's setup).
    enabled: AtomicBool,
    /// Execution id -> its item's size as last written.
    exe_sizes: Mutex<HashMap<String, usize>>,
    /// The pending rows' sizes, the tables' bytes, each execution's last rows block.
    rows: Mutex<RowBook>,
    /// The clock's advance per request (0: none; see `set_serial`).
    serial: Mutex<f64>,
    /// Timer item bytes written so far and how many (the mean sizes the full scan).
    timer_bytes: Mutex<(usize, usize)>,
    /// When the last sweep's share of the full scan was charged.
    last_sweep: Mutex<Option<f64>>,
    /// The requests charged since the last [`take_calls`](Self::take_calls), in order:
    /// what a caller's time is sampled from.
    calls: Mutex<Vec<Call>>,
}

/// One request in a caller's time: its kind, its place among all the simulation's
/// requests (the store's and the queue's logs merge by it), and what it runs beside.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub kind: &'static str,
    pub order: u64,
    pub beside: Beside,
}

/// How a request runs beside its neighbours in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beside {
    /// One after another.
    Serial,
    /// In a lane of a relay delivery: the delivery's lanes run side by side, each lane's
    /// requests one after another.
    Lane(stm_runtime::relay::RelayLane),
    /// One of `group`'s requests, spread over `width` chains side by side (a parallel
    /// scan's segments, a read's `BatchGetItem`s).
    Chains { group: u64, width: usize },
}

impl Call {
    /// A request of `kind` now: in the relay's lane if it runs in one, else `beside`.
    pub fn now(kind: &'static str, beside: Beside) -> Call {
        static ORDER: AtomicU64 = AtomicU64::new(0);
        let beside = stm_runtime::relay::current_lane().map_or(beside, Beside::Lane);
        Call {
            kind,
            order: ORDER.fetch_add(1, Ordering::Relaxed),
            beside,
        }
    }

    /// A new group of requests side by side.
    pub fn chains(width: usize) -> Beside {
        static GROUP: AtomicU64 = AtomicU64::new(0);
        Beside::Chains {
            group: GROUP.fetch_add(1, Ordering::Relaxed),
            width: width.max(1),
        }
    }

    /// How many requests run side by side with this one: the clock's advance per request
    /// of a serial caller is divided by it.
    pub fn side_by_side(&self) -> usize {
        match self.beside {
            Beside::Serial => 1,
            Beside::Lane(lane) => lane.of,
            Beside::Chains { width, .. } => width,
        }
    }
}

impl MeteredStore {
    /// What reading `due` from the due index costs: one `Query` per shard read (every
    /// shard when `all_shards`), billed on the entries it reads (eventually consistent),
    /// and the full scan's share since the last sweep (module docs).
    fn meter_due(&self, due: &[DueTimer], now: f64, all_shards: bool) {
        let mut per_shard: HashMap<String, usize> = HashMap::new();
        for timer in due {
            *per_shard
                .entry(timer_shard(&timer.execution_id, &timer.path))
                .or_default() += timer_bytes(&timer.execution_id, &timer.path);
        }
        // the shards' queries go out together (the DynamoDB store's `read_pages`)
        let queried = if all_shards {
            TIMER_SHARDS as usize
        } else {
            per_shard.len()
        };
        let together = Call::chains(queried);
        for k in 0..TIMER_SHARDS {
            let shard = format!("due#{k}");
            let bytes = per_shard.get(&shard).copied();
            if bytes.is_none() && !all_shards {
                continue;
            }
            self.query_index(DUE_INDEX, &shard, bytes.unwrap_or(0), together);
        }
        if !all_shards {
            return;
        }
        let since = lock(&self.last_sweep)
            .replace(now)
            .map(|last| (now - last).max(0.0));
        if let (Some(seconds), true) = (since, self.on()) {
            let table_bytes = self.inner.timer_count() * self.mean_timer_bytes();
            let scan_units = table_bytes.div_ceil(4096).max(1) as f64;
            uncounted(|| {
                self.meter.read_units(
                    TIMERS,
                    "(full scan)",
                    scan_units * seconds / DEFAULT_TIMER_FULL_SCAN_INTERVAL.as_secs_f64(),
                    self.now(),
                )
            });
        }
    }

    /// An eventually consistent `Query` of one key of a global secondary index that reads
    /// `bytes` of entries: a request per MB page, billed on the bytes (at least half a unit)
    /// when it is read (the clock: a long sweep's pages spread over its seconds).
    fn query_index(&self, index: &str, key: &str, bytes: usize, beside: Beside) {
        for _ in 0..bytes.div_ceil(PAGE_BYTES).max(1) {
            self.request_beside("Query", beside);
        }
        if self.on() {
            let units = bytes.div_ceil(4096).max(1) as f64 / 2.0;
            let at = self.now();
            uncounted(|| self.meter.read_units(index, key, units, at));
        }
    }

    pub fn new(clock: Arc<ManualClock>) -> Self {
        MeteredStore {
            inner: MemoryStore::new(),
            meter: PartitionMeter::new(),
            clock,
            enabled: AtomicBool::new(true),
            exe_sizes: Mutex::default(),
            rows: Mutex::default(),
            serial: Mutex::new(0.0),
            timer_bytes: Mutex::default(),
            last_sweep: Mutex::default(),
            calls: Mutex::default(),
        }
    }

    /// The requests charged since the last call, in order.
    pub fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut *lock(&self.calls))
    }

    /// Charge (on) or not (off, a setup).
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::SeqCst);
    }

    /// Forget what was charged (the meter and the request count).
    pub fn reset(&self) {
        self.meter.reset();
        *lock(&self.last_sweep) = None;
        lock(&self.calls).clear();
    }

    /// A serial caller: every request advances the clock by `seconds` (0: off).
    pub fn set_serial(&self, seconds: f64) {
        *lock(&self.serial) = seconds;
    }

    /// The pending rows' bytes in all, outbox and spawns.
    pub fn rows_bytes(&self) -> usize {
        let book = lock(&self.rows);
        book.table_bytes(OUTBOX) + book.table_bytes(SPAWNS)
    }

    /// Whether it charges now.
    pub fn on(&self) -> bool {
        self.enabled.load(Ordering::SeqCst)
    }

    fn now(&self) -> f64 {
        self.clock.now()
    }

    fn request(&self, op: &'static str) {
        self.request_beside(op, Beside::Serial);
    }

    /// A request that runs `beside` others (see [`Call::now`]).
    fn request_beside(&self, op: &'static str, beside: Beside) {
        if self.on() {
            let call = Call::now(op, beside);
            uncounted(|| {
                self.meter.request(op);
                lock(&self.calls).push(call);
            });
            let step = *lock(&self.serial);
            if step > 0.0 {
                self.clock.advance(step / call.side_by_side() as f64);
            }
        }
    }

    fn read(&self, table: &str, key: &str, bytes: usize) {
        if self.on() {
            uncounted(|| self.meter.read(table, key, bytes, true, false, self.now()));
        }
    }

    fn write(&self, table: &str, key: &str, bytes: usize, transactional: bool) {
        if self.on() {
            uncounted(|| self.meter.write(table, key, bytes, transactional, self.now()));
        }
    }

    /// The execution item's size: as last written, else from the stored execution.
    async fn exe_size(&self, id: &str, loaded: Option<&Execution>) -> usize {
        if let Some(bytes) = lock(&self.exe_sizes).get(id) {
            return *bytes;
        }
        let bytes = match loaded {
            Some(exe) => exe_item_bytes(exe),
            None => match self.inner.load(id).await {
                Ok(Some(exe)) => exe_item_bytes(&exe),
                _ => 0,
            },
        };
        if bytes > 0 {
            uncounted(|| lock(&self.exe_sizes).insert(id.to_string(), bytes));
        }
        bytes
    }

    /// A consistent `Scan` of all of `table` (its pending rows' bytes), in 1 MB pages.
    fn scan(&self, table: &'static str, bytes: usize) {
        self.scan_in(table, bytes, 1);
    }

    /// A scan of `table` in `segments` parallel segments: its pages billed as
    /// [`scan`](Self::scan)'s, and timed that many at a time.
    fn scan_in(&self, table: &'static str, bytes: usize, segments: usize) {
        let pages = bytes.div_ceil(PAGE_BYTES).max(1);
        let segments = if segments > 1 {
            Call::chains(segments)
        } else {
            Beside::Serial
        };
        for page in 0..pages {
            let page_bytes = bytes.saturating_sub(page * PAGE_BYTES).min(PAGE_BYTES);
            self.request_beside("Scan", segments);
            if self.on() {
                let units = page_bytes.div_ceil(4096).max(1) as f64;
                uncounted(|| {
                    self.meter
                        .read_units(table, &format!("(scan page {page})"), units, self.now())
                });
            }
        }
    }

    /// Consistent `BatchGetItem`s of these rows by key, 100 keys a request.
    fn batch_get_rows(&self, keys: &[(&'static str, i64)]) {
        let sizes: Vec<usize> = {
            let book = lock(&self.rows);
            keys.iter().map(|(table, seq)| book.size(table, *seq)).collect()
        };
        let side_by_side = Call::chains(keys.len().div_ceil(MAX_BATCH_GET_KEYS));
        for chunk in keys
            .iter()
            .zip(sizes)
            .collect::<Vec<_>>()
            .chunks(MAX_BATCH_GET_KEYS)
        {
            self.request_beside("BatchGetItem", side_by_side);
            for ((table, seq), bytes) in chunk {
                self.read(table, &seq.to_string(), *bytes);
            }
        }
    }

    /// `BatchWriteItem`s of 25 deletes of these rows of `table`.
    fn batch_delete_rows(&self, table: &'static str, seqs: &[i64]) {
        for chunk in seqs.chunks(BATCH_WRITE_ITEMS) {
            self.request("BatchWriteItem");
            for seq in chunk {
                let bytes = lock(&self.rows).remove(table, *seq);
                self.write(table, &seq.to_string(), bytes, false);
            }
        }
    }

    /// What the DynamoDB store refuses before sending a commit (`check_side_items`), the
    /// execution's item being `exe_bytes`.
    fn check_limits(&self, exe: &Execution, exe_bytes: usize, commit: &Commit) -> Result<(), StoreError> {
        if exe_bytes > MAX_ITEM_BYTES {
            return Err(StoreError::TooLarge(stm_store::Unstorable::Item {
                what: format!("execution {} item", exe.id),
                bytes: exe_bytes,
                limit: MAX_ITEM_BYTES,
            }));
        }
        let others = 1
            + commit.emits.len()
            + commit.processed_event_ids.len()
            + TimerOp::last_per_path(commit.timers.iter().cloned()).len()
            + commit.traces.len() * 2;
        // past a transaction's items the store packs the spawn intents into rows of up to
        // ~350 KB each (`more_spawns`): count those rows (the charges below stay one row
        // an intent, an upper bound on a packed fan-out's units)
        let spawn_rows = if others + commit.spawns.len() <= MAX_TRANSACTION_ITEMS {
            commit.spawns.len()
        } else {
            let bytes: usize = commit
                .spawns
                .iter()
                .map(|s| {
                    s.child_id.len()
                        + s.root_path.len()
                        + serde_json::to_string(&s.context).map_or(0, |c| c.len()) * 2
                        + 16
                })
                .sum();
            bytes.div_ceil(350 * 1024).max(1)
        };
        let count = others + spawn_rows;
        if count > MAX_TRANSACTION_ITEMS {
            return Err(StoreError::TooLarge(stm_store::Unstorable::Transaction {
                execution_id: exe.id.clone(),
                items: count,
                limit: MAX_TRANSACTION_ITEMS,
            }));
        }
        Ok(())
    }

    /// Index writes of a timer item going from `before` to `after` (its `fire_at`).
    fn index_writes(&self, shard: &str, before: Option<f64>, after: Option<f64>) {
        let writes = match (before, after) {
            (None, None) => 0,
            (Some(_), None) | (None, Some(_)) => 1,
            (Some(a), Some(b)) if a == b => 0,
            // the sort key moved: the old entry is deleted and a new one put
            (Some(_), Some(_)) => 2,
        };
        for _ in 0..writes {
            self.write(DUE_INDEX, shard, 100, false);
        }
    }

    fn note_timer_bytes(&self, bytes: usize) {
        let mut t = lock(&self.timer_bytes);
        t.0 += bytes;
        t.1 += 1;
    }

    fn mean_timer_bytes(&self) -> usize {
        let t = lock(&self.timer_bytes);
        t.0.checked_div(t.1).unwrap_or(TYPICAL_TIMER_BYTES)
    }
}

/// What the in-memory store does in DynamoDB's place (sorting every pending row to answer
/// a bounded read, say): its peak is DynamoDB's, not the calling function's, whose peak
/// memory counts only what the call hands back ([`Transient`]).
fn dynamodb_work() -> Transient {
    Transient::begin()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[async_trait]
impl ExecutionStore for MeteredStore {
    async fn load(&self, id: &str) -> Result<Option<Execution>, StoreError> {
        let exe = self.inner.load(id).await?;
        self.request("GetItem");
        let bytes = match &exe {
            Some(e) => self.exe_size(id, Some(e)).await,
            None => 0,
        };
        self.read(EXECUTIONS, id, bytes);
        Ok(exe)
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
        let _work = dynamodb_work();
        let (exe, marks) = self.inner.load_for_events(id, event_ids).await?;
        self.request("BatchGetItem");
        let bytes = match &exe {
            Some(e) => self.exe_size(id, Some(e)).await,
            None => 0,
        };
        self.read(EXECUTIONS, id, bytes);
        let mut seen: Vec<&str> = Vec::with_capacity(event_ids.len());
        for (event_id, marked) in event_ids.iter().zip(&marks) {
            if seen.contains(event_id) {
                continue;
            }
            seen.push(event_id);
            let bytes = if *marked { mark_bytes(id, event_id) } else { 0 };
            self.read(PROCESSED, &format!("{id}|{event_id}"), bytes);
        }
        Ok((exe, marks))
    }

    fn check_commit(&self, exe: &Execution, commit: &Commit) -> Result<(), StoreError> {
        self.check_limits(exe, exe_item_bytes(exe), commit)?;
        self.inner.check_commit(exe, commit)
    }

    async fn commit(&self, exe: &mut Execution, commit: Commit) -> Result<Written, StoreError> {
        // the item as written (at its next version), refused before any call as the
        // DynamoDB store does
        exe.version += 1;
        let exe_bytes = exe_item_bytes(exe);
        exe.version -= 1;
        self.check_limits(exe, exe_bytes, &commit)?;
        let id = exe.id.clone();
        let timers = TimerOp::last_per_path(commit.timers.iter().cloned());
        let mut timers_before = Vec::with_capacity(timers.len());
        for op in &timers {
            let path = op.path();
            timers_before.push(self.inner.armed_timer(&id, path).await?);
        }
        let traced_before = if commit.traces.is_empty() {
            0
        } else {
            self.inner.read_trace(&id).await?.len()
        };
        let emits: Vec<usize> = commit
            .emits
            .iter()
            .map(|(target, event)| outbox_row_bytes(target.as_deref(), event.to_json().len()))
            .collect();
        let spawns: Vec<usize> = commit
            .spawns
            .iter()
            .map(|s| spawn_row_bytes(&id, &s.child_id, &s.root_path, &s.context))
            .collect();
        let marks: Vec<String> = commit.processed_event_ids.clone();
        let traces: Vec<usize> = commit.traces.iter().map(|t| trace_row_bytes(&id, t)).collect();
        let parked: Vec<(String, usize)> = commit
            .park
            .iter()
            .map(|p| (format!("parked#e#{}#{id}", p.number), parked_row_bytes(&id, p)))
            .chain(commit.park.iter().map(|p| {
                let key = format!("parked#c#{id}#{}", p.event.id);
                let bytes = 40 + key.len();
                (key, bytes)
            }))
            .collect();
        let mut unparked: Vec<(String, usize)> = Vec::new();
        for released in &commit.unpark {
            // a delete costs the item's size: the row's, read back from the store
            let row = self
                .inner
                .parked_events(&id, released.number - 1, released.number)
                .await?;
            let bytes = row.first().map_or(100, |p| parked_row_bytes(&id, p));
            unparked.push((format!("parked#e#{}#{id}", released.number), bytes));
            let claim = format!("parked#c#{id}#{}", released.event_id);
            let claim_bytes = 40 + claim.len();
            unparked.push((claim, claim_bytes));
        }
        // the run's guard (the counter), moved with every commit while events are parked
        let guard = stm_store::parked::moves_guard(exe, &commit);
        let side_items = usize::from(guard)
            + emits.len()
            + spawns.len()
            + marks.len()
            + timers.len()
            + traces.len()
            + parked.len()
            + unparked.len();

        // the state index entry before and after: an index write only when it changes
        let state_before = self.inner.load(&id).await?.as_ref().and_then(state_index_key);

        let written = self.inner.commit(exe, commit).await?;

        // the meter's book of sizes is the simulation's, not the function's memory
        let _book = UncountedScope::begin();
        lock(&self.exe_sizes).insert(id.clone(), exe_bytes);
        {
            let mut book = lock(&self.rows);
            for (seq, bytes) in written.outbox.iter().zip(&emits) {
                book.add(OUTBOX, *seq, *bytes);
            }
            for (seq, bytes) in written.spawns.iter().zip(&spawns) {
                book.add(SPAWNS, *seq, *bytes);
            }
            if !written.outbox.is_empty() || !written.spawns.is_empty() {
                book.last_block.insert(id.clone(), written.clone());
            }
        }
        let tx = side_items > 0;
        self.request(if tx { "TransactWriteItems" } else { "PutItem" });
        self.write(EXECUTIONS, &id, exe_bytes, tx);
        let state_after = state_index_key(exe);
        if state_before != state_after {
            // the old entry's delete and the new one's put, each on its own key
            for key in [state_before, state_after].into_iter().flatten() {
                self.write(STATE_INDEX, &key, 100, false);
            }
        }
        for (seq, bytes) in written.outbox.iter().zip(&emits) {
            self.write(OUTBOX, &seq.to_string(), *bytes, tx);
        }
        for (seq, bytes) in written.spawns.iter().zip(&spawns) {
            self.write(SPAWNS, &seq.to_string(), *bytes, tx);
        }
        for event_id in &marks {
            self.write(
                PROCESSED,
                &format!("{id}|{event_id}"),
                mark_bytes(&id, event_id),
                tx,
            );
        }
        for (op, before) in timers.iter().zip(timers_before) {
            let (path, after) = match op {
                TimerOp::Schedule { path, fire_at } => (path, Some(*fire_at)),
                // a held timer's item is written, its index entry removed
                TimerOp::Cancel { path } | TimerOp::Hold { path, .. } => (path, None),
            };
            let bytes = timer_bytes(&id, path);
            if after.is_some() {
                self.note_timer_bytes(bytes);
            }
            self.write(TIMERS, &format!("{id}|{path}"), bytes, tx);
            self.index_writes(&timer_shard(&id, path), before, after);
        }
        for (key, bytes) in parked.iter().chain(&unparked) {
            self.write(COUNTERS, key, *bytes, tx);
        }
        if guard {
            self.write(COUNTERS, &format!("parked#n#{id}"), 60 + id.len(), tx);
        }
        for (i, bytes) in traces.iter().enumerate() {
            let idx = traced_before + i;
            self.write(TRACE, &format!("{id}|{idx}"), *bytes, tx);
            if idx >= stm_store::DEFAULT_TRACE_MAX {
                // the ring's delete of the step that falls out
                let gone = idx - stm_store::DEFAULT_TRACE_MAX;
                self.write(TRACE, &format!("{id}|{gone}"), *bytes, tx);
            }
        }
        Ok(written)
    }

    async fn take_park_number(&self, id: &str) -> Result<u64, StoreError> {
        let number = self.inner.take_park_number(id).await?;
        self.request("UpdateItem");
        self.write(COUNTERS, &format!("parked#n#{id}"), 60 + id.len(), false);
        Ok(number)
    }

    async fn last_park_number(&self, id: &str) -> Result<u64, StoreError> {
        self.request("GetItem");
        self.read(COUNTERS, &format!("parked#n#{id}"), 60 + id.len());
        self.inner.last_park_number(id).await
    }

    /// The row and claim (two transactional writes of the event's size and a claim's), and
    /// the check of the execution's version (metered as a read of its item: the item is
    /// not written).
    async fn park(
        &self,
        id: &str,
        version: i64,
        parked: &stm_store::ParkedEvent,
    ) -> Result<stm_store::Parked, StoreError> {
        let answer = self.inner.park(id, version, parked).await?;
        self.request("TransactWriteItems");
        // the check of the run's guard (the counter, a small item), charged as a
        // transactional write: AWS does not say which a ConditionCheck is billed as
        self.write(COUNTERS, &format!("parked#n#{id}"), 60 + id.len(), true);
        self.write(
            COUNTERS,
            &format!("parked#e#{}#{id}", parked.number),
            parked_row_bytes(id, parked),
            true,
        );
        self.write(
            COUNTERS,
            &format!("parked#c#{id}#{}", parked.event.id),
            40 + id.len() + parked.event.id.len(),
            true,
        );
        Ok(answer)
    }

    async fn parked_events(
        &self,
        id: &str,
        after: u64,
        through: u64,
    ) -> Result<Vec<stm_store::ParkedEvent>, StoreError> {
        let page = self.inner.parked_events(id, after, through).await?;
        self.request("BatchGetItem");
        for parked in &page {
            self.read(
                COUNTERS,
                &format!("parked#e#{}#{id}", parked.number),
                parked_row_bytes(id, parked),
            );
        }
        Ok(page)
    }

    async fn report_to_join(
        &self,
        report: &stm_store::JoinReport,
    ) -> Result<Option<stm_store::JoinTally>, StoreError> {
        let slot = &report.slot;
        let shard = slot.index / stm_store::join::SHARD;
        let shards = slot.total.div_ceil(stm_store::join::SHARD);
        // a shard row's set holds up to SHARD `index=outcome` elements: charged full, as
        // its last writes are (UpdateItem's units are the item's larger size)
        let row_bytes = 40 + 14 * stm_store::join::SHARD as usize;
        let before = self.inner.report_to_join(report).await?;
        self.request("UpdateItem");
        self.write(
            COUNTERS,
            &format!("join:{}#{shard}", slot.prefix),
            row_bytes,
            false,
        );
        if before.is_some()
            || (slot.index % stm_store::join::SHARD) + 1 == stm_store::join::SHARD.min(slot.total)
        {
            // (approximately) the shard's filling report also adds it to the root row
            self.request("UpdateItem");
            self.write(
                COUNTERS,
                &format!("join:{}", slot.prefix),
                40 + 6 * shards as usize,
                false,
            );
        }
        if before.is_some() {
            self.request("BatchGetItem");
            for s in 0..shards {
                self.read(COUNTERS, &format!("join:{}#{s}", slot.prefix), row_bytes);
            }
        }
        Ok(before)
    }

    async fn is_processed(&self, id: &str, event_id: &str) -> Result<bool, StoreError> {
        let marked = self.inner.is_processed(id, event_id).await?;
        self.request("GetItem");
        let bytes = if marked { mark_bytes(id, event_id) } else { 0 };
        self.read(PROCESSED, &format!("{id}|{event_id}"), bytes);
        Ok(marked)
    }

    /// The operator's look by state (a bulk command's selection): a small index (at most
    /// `SMALL_STATE_INDEX` entries found) as one `Scan` page, a larger one as the shard
    /// queries of each state (`STATE_SHARDS` a state), each billed on the entries it reads
    /// (~100 bytes each, eventually consistent, at least half a unit) to its shard's key.
    async fn in_states(
        &self,
        definition_id: &str,
        paths: &[String],
        entered_by: Option<f64>,
    ) -> Result<Vec<stm_store::InState>, StoreError> {
        let _work = dynamodb_work();
        let found = self.inner.in_states(definition_id, paths, entered_by).await?;
        const ENTRY_BYTES: usize = 100;
        if found.len() <= stm_store::dynamodb::SMALL_STATE_INDEX as usize {
            self.scan(STATE_INDEX, found.len() * ENTRY_BYTES);
            return Ok(found);
        }
        let mut per_key: HashMap<String, usize> = HashMap::new();
        for entry in &found {
            if let Some(exe) = self.inner.load(&entry.id).await? {
                if let Some(key) = state_index_key(&exe) {
                    *per_key.entry(key).or_default() += ENTRY_BYTES;
                }
            }
        }
        for path in paths {
            for shard in 0..u64::from(STATE_SHARDS) {
                let key = state_key(definition_id, path, shard);
                self.query_index(
                    STATE_INDEX,
                    &key,
                    per_key.get(&key).copied().unwrap_or(0),
                    Beside::Serial,
                );
            }
        }
        Ok(found)
    }

    async fn list_executions(&self, query: &ListQuery) -> Result<ExecutionPage, StoreError> {
        let _work = dynamodb_work();
        let page = self.inner.list_executions(query).await?;
        // a Scan page of the executions table, billed on what it returned (approximate:
        // a filtered scan reads more than it returns)
        let mut bytes = 0;
        for item in &page.items {
            bytes += self.exe_size(&item.id, None).await;
        }
        self.scan(EXECUTIONS, bytes);
        Ok(page)
    }

    async fn pending_outbox(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        let _work = dynamodb_work();
        let rows = self.inner.pending_outbox().await?;
        let bytes = lock(&self.rows).table_bytes(OUTBOX);
        self.scan(OUTBOX, bytes);
        Ok(rows)
    }

    async fn ack_outbox(&self, seq: i64) -> Result<(), StoreError> {
        self.inner.ack_outbox(seq).await?;
        let bytes = lock(&self.rows).remove(OUTBOX, seq);
        self.request("DeleteItem");
        self.write(OUTBOX, &seq.to_string(), bytes, false);
        Ok(())
    }

    async fn pending_spawns(&self) -> Result<Vec<SpawnEntry>, StoreError> {
        let _work = dynamodb_work();
        let rows = self.inner.pending_spawns().await?;
        let bytes = lock(&self.rows).table_bytes(SPAWNS);
        self.scan(SPAWNS, bytes);
        Ok(rows)
    }

    async fn ack_spawn(&self, seq: i64) -> Result<(), StoreError> {
        self.inner.ack_spawn(seq).await?;
        let bytes = lock(&self.rows).remove(SPAWNS, seq);
        self.request("DeleteItem");
        self.write(SPAWNS, &seq.to_string(), bytes, false);
        Ok(())
    }

    async fn pending_rows_of(&self, id: &str) -> Result<PendingRows, StoreError> {
        let rows = self.inner.pending_rows_of(id).await?;
        self.request("GetItem");
        let bytes = self.exe_size(id, None).await;
        self.read(EXECUTIONS, id, bytes);
        let block = lock(&self.rows).last_block.get(id).cloned();
        if let Some(block) = block {
            // the block's rows by key, those acked since too
            let keys: Vec<(&'static str, i64)> = block
                .spawns
                .iter()
                .map(|seq| (SPAWNS, *seq))
                .chain(block.outbox.iter().map(|seq| (OUTBOX, *seq)))
                .collect();
            self.batch_get_rows(&keys);
        }
        Ok(rows)
    }

    async fn oldest_pending_seqs(
        &self,
        limit: usize,
        settled_before: f64,
    ) -> Result<Vec<PendingSeq>, StoreError> {
        let _work = dynamodb_work();
        let seqs = self.inner.oldest_pending_seqs(limit, settled_before).await?;
        if limit > 0 {
            // both tables scanned whole, the lowest `limit` seqs kept
            let (spawns, outbox) = {
                let book = lock(&self.rows);
                (book.table_bytes(SPAWNS), book.table_bytes(OUTBOX))
            };
            self.scan_in(SPAWNS, spawns, SCAN_SEGMENTS);
            self.scan_in(OUTBOX, outbox, SCAN_SEGMENTS);
        }
        Ok(seqs)
    }

    async fn pending_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<PendingRows, StoreError> {
        let _work = dynamodb_work();
        let rows = self.inner.pending_rows(spawns, outbox).await?;
        let keys: Vec<(&'static str, i64)> = spawns
            .iter()
            .map(|seq| (SPAWNS, *seq))
            .chain(outbox.iter().map(|seq| (OUTBOX, *seq)))
            .collect();
        self.batch_get_rows(&keys);
        Ok(rows)
    }

    async fn ack_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<(), StoreError> {
        self.inner.ack_rows(spawns, outbox).await?;
        self.batch_delete_rows(SPAWNS, spawns);
        self.batch_delete_rows(OUTBOX, outbox);
        Ok(())
    }

    async fn due_timers(&self, now: f64) -> Result<Vec<DueTimer>, StoreError> {
        let _work = dynamodb_work();
        let due = self.inner.due_timers(now).await?;
        self.meter_due(&due, now, true);
        Ok(due)
    }

    /// A sweep's first page reads every shard; a later one the shards it takes from.
    async fn due_page(
        &self,
        now: f64,
        cursor: &mut DueCursor,
        limit: usize,
    ) -> Result<Vec<DueTimer>, StoreError> {
        let _work = dynamodb_work();
        let first = cursor.is_start();
        let due = self.inner.due_page(now, cursor, limit).await?;
        self.meter_due(&due, now, first);
        Ok(due)
    }

    async fn claim_timer(
        &self,
        id: &str,
        path: &str,
        fire_at: f64,
    ) -> Result<stm_store::TimerClaim, StoreError> {
        // one conditional DeleteItem, as the DynamoDB store sends it; the index entry goes
        // with the timer when it was the armed one
        let claim = self.inner.claim_timer(id, path, fire_at).await?;
        self.request("DeleteItem");
        self.write(TIMERS, &format!("{id}|{path}"), timer_bytes(id, path), false);
        if claim == stm_store::TimerClaim::Claimed {
            self.index_writes(&timer_shard(id, path), Some(fire_at), None);
        }
        Ok(claim)
    }

    async fn delete_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<(), StoreError> {
        let before = self.inner.armed_timer(id, path).await?;
        self.inner.delete_timer(id, path, fire_at).await?;
        self.request("DeleteItem");
        self.write(TIMERS, &format!("{id}|{path}"), timer_bytes(id, path), false);
        if before == Some(fire_at) {
            self.index_writes(&timer_shard(id, path), before, None);
        }
        Ok(())
    }

    async fn armed_timer(&self, id: &str, path: &str) -> Result<Option<f64>, StoreError> {
        Ok(self
            .armed_timer_in_trace(id, path)
            .await?
            .map(|(fire_at, _)| fire_at))
    }

    async fn armed_timer_in_trace(
        &self,
        id: &str,
        path: &str,
    ) -> Result<Option<(f64, Option<String>)>, StoreError> {
        let armed = self.inner.armed_timer_in_trace(id, path).await?;
        self.request("GetItem");
        let bytes = if armed.is_some() { timer_bytes(id, path) } else { 0 };
        self.read(TIMERS, &format!("{id}|{path}"), bytes);
        Ok(armed)
    }

    /// One consistent `Query` of the execution's timers.
    async fn timers_of(&self, id: &str) -> Result<Vec<stm_store::ArmedTimer>, StoreError> {
        let armed = self.inner.timers_of(id).await?;
        self.request("Query");
        let bytes = armed.iter().map(|t| timer_bytes(id, &t.path)).sum();
        self.read(TIMERS, id, bytes);
        Ok(armed)
    }

    async fn read_trace(&self, id: &str) -> Result<Vec<Map>, StoreError> {
        let steps = self.inner.read_trace(id).await?;
        let bytes: usize = steps.iter().map(|s| trace_row_bytes(id, s)).sum();
        for _ in 0..bytes.div_ceil(PAGE_BYTES).max(1) {
            self.request("Query");
        }
        if self.on() {
            self.meter
                .read_units(TRACE, id, bytes.div_ceil(4096).max(1) as f64, self.now());
        }
        Ok(steps)
    }

    async fn append_trace(&self, id: &str, entry: Map) -> Result<(), StoreError> {
        let bytes = trace_row_bytes(id, &entry);
        self.inner.append_trace(id, entry).await?;
        // the put, the execution item's `trace_idx` removal (the ring's delete left out)
        self.request("PutItem");
        self.write(TRACE, id, bytes, false);
        self.request("UpdateItem");
        let exe = self.exe_size(id, None).await;
        self.write(EXECUTIONS, id, exe, false);
        Ok(())
    }

    async fn purge(&self, id: &str, expected_version: i64) -> Result<bool, StoreError> {
        // approximate: the execution's conditional delete only (its rows' queries and
        // deletes are left out; the simulator purges nothing)
        let bytes = self.exe_size(id, None).await;
        let deleted = self.inner.purge(id, expected_version).await?;
        self.request("DeleteItem");
        self.write(EXECUTIONS, id, bytes, false);
        lock(&self.exe_sizes).remove(id);
        Ok(deleted)
    }

    async fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.ids_with_any_prefix(&[prefix.to_string()]).await
    }

    async fn routes(&self) -> Result<stm_store::Routes, StoreError> {
        let routes = self.inner.routes().await?;
        // one consistent GetItem of the routes item: its JSON and generation
        self.request("GetItem");
        let bytes = 20 + serde_json::to_string(&routes).map_or(0, |t| t.len());
        self.read(COUNTERS, stm_store::route::ROUTES_KEY, bytes);
        Ok(routes)
    }

    async fn put_routes(&self, routes: &stm_store::Routes, read: u64) -> Result<bool, StoreError> {
        let written = self.inner.put_routes(routes, read).await?;
        self.request("PutItem");
        let bytes = 20 + serde_json::to_string(routes).map_or(0, |t| t.len());
        self.write(COUNTERS, stm_store::route::ROUTES_KEY, bytes, false);
        Ok(written)
    }

    async fn add_tallies(&self, adds: &[(String, stm_store::Tally)], expires: i64) -> Result<(), StoreError> {
        self.inner.add_tallies(adds, expires).await?;
        for (key, _) in adds {
            // an UpdateItem with ADD of two numbers and the ttl: one small item
            self.request("UpdateItem");
            self.write(COUNTERS, key, key.len() + 40, false);
        }
        Ok(())
    }

    async fn tally(&self, keys: &[String]) -> Result<stm_store::Tally, StoreError> {
        let sum = self.inner.tally(keys).await?;
        for chunk in keys.chunks(100) {
            self.request("BatchGetItem");
            for key in chunk {
                self.read(COUNTERS, key, key.len() + 40);
            }
        }
        Ok(sum)
    }

    async fn ids_with_any_prefix(&self, prefixes: &[String]) -> Result<Vec<String>, StoreError> {
        let ids = self.inner.ids_with_any_prefix(prefixes).await?;
        // a Scan of the whole executions table (projected to the id, billed on the items)
        let mut bytes = 0;
        for exe in self.inner.all_executions() {
            bytes += self.exe_size(&exe.id, Some(&exe)).await;
        }
        self.scan(EXECUTIONS, bytes);
        Ok(ids)
    }
}

/// The execution item's size as the DynamoDB store writes it.
#[allow(dead_code)] // the scale simulation reads the sizes it books; a test reads this
pub fn item_bytes(exe: &Execution) -> usize {
    exe_item_bytes(exe)
}

/// A parked event's row: its key and the event's JSON.
fn parked_row_bytes(id: &str, parked: &stm_store::ParkedEvent) -> usize {
    2 + 9 + 20 + 1 + id.len() + 5 + parked.event.to_json().len()
}
