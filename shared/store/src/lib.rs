//! The persistence seam: the [`ExecutionStore`] contract, the records it moves
//! (outbox entries, spawn intents, timers, trace steps), and its implementations:
//! [`MemoryStore`] for the embedded runner and tests, and `DynamoDbStore` (module
//! `dynamodb`, harel's DynamoDB tables exactly). The contract suite that both pass lives in
//! `contract` (feature `contract`).
//!
//! Feature `aws` (default): the DynamoDB store, over the SDK plumbing of `stm_aws`. Without it the
//! crate compiles no AWS SDK crate, so the embedded runner (`stm run`: `MemoryStore` and
//! the driver) builds in about a minute instead of a quarter of an hour on two cores.
//!
//! The contract is harel 0.9.0's `ExecutionStore` protocol (`engine/store/_base.py`):
//! every durable effect of one statechart step lands in **one atomic commit** guarded
//! by the execution's version (optimistic concurrency), so a stale writer leaks
//! nothing: no outbox entry, spawn, dedupe mark, timer or trace step.

#[cfg(feature = "contract")]
pub mod contract;
mod dedupe;
mod due;
#[cfg(feature = "aws")]
pub mod dynamodb;
mod error;
pub mod join;
mod memory;
pub mod parked;
pub mod route;
pub mod states;

use async_trait::async_trait;
use stm_core::{Event, Execution, Map, Status};

pub use dedupe::{DedupeMarks, RECENT_MARKS};
pub use due::DueCursor;
#[cfg(feature = "aws")]
pub use dynamodb::{table_specs, CreateOptions, DynamoDbStore, RetryPolicy, TableSpec};
pub use error::{
    AttributeType, BoxError, CancelReason, CancelledAction, Corruption, Malformation, NumberRefusal, Refusal,
    StoreError, Unstorable,
};
pub use join::{JoinReport, JoinTally};
pub use memory::MemoryStore;
pub use parked::{waiting_on, Parked, ParkedEvent, Unpark, PARKED_PAGE};
pub use route::{Route, Routes, Tally};
pub use states::InState;

/// The default size of the per-execution trace ring.
pub const DEFAULT_TRACE_MAX: usize = 200;

/// The default table prefix (harel's): the tables are `harel_executions`, ...
pub const DEFAULT_PREFIX: &str = "harel";
/// The region used when neither a flag nor `AWS_REGION` names one.
pub const DEFAULT_REGION: &str = "us-east-1";

/// Everything a commit writes besides the execution itself: one step's effects, or those
/// of a coalesced burst of steps of one execution (each step's part in order, see
/// [`Commit::absorb`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Commit {
    /// Events to deliver after the commit: `(target execution id, event)`.
    pub emits: Vec<(Option<String>, Event)>,
    /// The events this commit processed, recorded for dedupe: none for a start, one for a
    /// step, one per step for a burst (never the same id twice).
    pub processed_event_ids: Vec<String>,
    /// Applied in order; the last op on a path wins.
    pub timers: Vec<TimerOp>,
    /// Child executions to create after the commit (orthogonal regions, invokes).
    pub spawns: Vec<SpawnIntent>,
    /// The opt-in trace steps (harel's `_trace_step` dict), one per step, oldest first.
    pub traces: Vec<Map>,
    /// The event this commit parks in its row ([`parked`]): the first of a run, whose
    /// commit sets `parked_after` on the item; the others are kept by
    /// [`ExecutionStore::park`] without writing the item. Boxed: it is seldom there, and a
    /// commit is moved through every step's futures.
    pub park: Option<Box<ParkedEvent>>,
    /// The parked events this commit steps: their rows are deleted with it.
    pub unpark: Vec<Unpark>,
    /// This commit ends a run of parked events without stepping one (the item's
    /// `parked_after` goes to `None`: only holes were left): the store moves the run's
    /// guard with it, as it does for every commit of an execution with events parked
    /// ([`parked`]).
    pub ends_parking: bool,
    /// The trace context (a W3C `traceparent`) of the work that made this commit: written
    /// on its outbox and spawn rows ([`OutboxEntry::trace_context`]) and the timers it
    /// arms ([`ExecutionStore::armed_timer_in_trace`]), so whoever publishes their
    /// messages, the inline flush, the relay or the sweeper, continues that trace. Not
    /// harel's: its relay and sweeper ignore the extra attribute.
    pub trace_context: Option<String>,
}

impl Commit {
    /// Append what a later step of the same execution commits: the burst's commit is then
    /// the steps' parts in order (emits and spawns keep their order, timer ops apply in
    /// order so the later step's op on a path wins, marks and trace steps follow).
    pub fn absorb(&mut self, later: Commit) {
        self.emits.extend(later.emits);
        self.processed_event_ids.extend(later.processed_event_ids);
        self.timers.extend(later.timers);
        self.spawns.extend(later.spawns);
        self.traces.extend(later.traces);
        if later.park.is_some() {
            self.park = later.park;
        }
        self.unpark.extend(later.unpark);
        self.ends_parking |= later.ends_parking;
        // a burst's rows continue its first step's trace
        if self.trace_context.is_none() {
            self.trace_context = later.trace_context;
        }
    }
}

/// A durable-timer mutation applied atomically with a commit.
#[derive(Debug, Clone, PartialEq)]
pub enum TimerOp {
    /// Arm (upsert) the timer for `(execution, path)`; one that was held is listed as due
    /// again.
    Schedule { path: String, fire_at: f64 },
    /// Disarm it.
    Cancel { path: String },
    /// Keep it armed for `fire_at` but out of what is listed as due: its execution is
    /// being suspended, and a sweep would read it at every run and fire nothing
    /// ([`ExecutionStore::timers_of`] says which are held; a `Schedule` lists it again).
    Hold { path: String, fire_at: f64 },
}

impl TimerOp {
    /// The state path of the timer it arms or disarms.
    pub fn path(&self) -> &str {
        match self {
            TimerOp::Schedule { path, .. } | TimerOp::Cancel { path } | TimerOp::Hold { path, .. } => path,
        }
    }

    /// `ops` with only the last op per path kept, in the order of those last ops: one
    /// DynamoDB transaction may touch an item only once, and the last op is what the
    /// commit means for that timer.
    ///
    /// ```
    /// use stm_store::TimerOp;
    /// let ops = vec![
    ///     TimerOp::Schedule { path: "A".into(), fire_at: 1.0 },
    ///     TimerOp::Schedule { path: "B".into(), fire_at: 2.0 },
    ///     TimerOp::Cancel { path: "A".into() },
    /// ];
    /// assert_eq!(
    ///     TimerOp::last_per_path(ops),
    ///     vec![
    ///         TimerOp::Schedule { path: "B".into(), fire_at: 2.0 },
    ///         TimerOp::Cancel { path: "A".into() },
    ///     ]
    /// );
    /// ```
    pub fn last_per_path(ops: impl IntoIterator<Item = TimerOp>) -> Vec<TimerOp> {
        let mut out: Vec<TimerOp> = Vec::new();
        for op in ops {
            out.retain(|o| o.path() != op.path());
            out.push(op);
        }
        out
    }
}

/// A child execution to create: committed with its parent, created by the relay.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnIntent {
    pub child_id: String,
    pub root_path: String,
    pub context: Map,
}

/// The seqs of the rows a commit wrote for delivery: each emit's outbox entry and each
/// spawn intent, in the commit's order. Per execution, a later commit's seqs are higher
/// than an earlier one's, so delivering in `seq` order keeps each execution's commit order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    pub outbox: Vec<i64>,
    pub spawns: Vec<i64>,
}

/// The rows of an execution's last commit that wrote any, those not yet delivered (acked):
/// what a redelivered duplicate publishes before its group moves on
/// ([`ExecutionStore::pending_rows_of`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PendingRows {
    /// In seq order.
    pub spawns: Vec<SpawnEntry>,
    /// In seq order.
    pub outbox: Vec<OutboxEntry>,
}

impl PendingRows {
    pub fn is_empty(&self) -> bool {
        self.spawns.is_empty() && self.outbox.is_empty()
    }
}

/// A pending row's seq, whether it is a spawn intent (else an outbox entry), and its size
/// as recorded when it was written: the relay sizes its reads by it, so that what one read
/// holds is bounded in bytes, not only in rows (a packed spawn row is up to 350 KB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PendingSeq {
    pub seq: i64,
    pub spawn: bool,
    /// The row's size in bytes; [`PendingSeq::UNRECORDED_BYTES`] for a row written
    /// without one (by harel).
    pub bytes: u32,
}

impl PendingSeq {
    /// The size taken for a row whose size was not recorded: the largest an item can be
    /// (DynamoDB's 400 KB), so that a read of such rows is bounded all the same.
    pub const UNRECORDED_BYTES: u32 = 400 * 1024;

    /// The `limit` lowest of the spawn intents' and outbox entries' seqs (each with its
    /// row's size), lowest first.
    pub fn lowest(
        spawns: impl Iterator<Item = (i64, u32)>,
        outbox: impl Iterator<Item = (i64, u32)>,
        limit: usize,
    ) -> Vec<PendingSeq> {
        let mut seqs: Vec<PendingSeq> = spawns
            .map(|(seq, bytes)| PendingSeq {
                seq,
                spawn: true,
                bytes,
            })
            .chain(outbox.map(|(seq, bytes)| PendingSeq {
                seq,
                spawn: false,
                bytes,
            }))
            .collect();
        seqs.sort();
        seqs.truncate(limit);
        seqs
    }
}

/// A deferred event awaiting delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEntry {
    /// Unique among the pending rows, and higher for a later commit of the same execution:
    /// the relay delivers in `seq` order.
    pub seq: i64,
    pub target_id: Option<String>,
    pub event: Event,
    /// The trace context its commit was made in ([`Commit::trace_context`]), when the row
    /// was read back from the store and carries one.
    pub trace_context: Option<String>,
}

impl OutboxEntry {
    /// The entry's size as a store without a recorded one reports it ([`PendingSeq::bytes`]):
    /// its event's JSON (a DynamoDB row is that JSON and a few short attributes).
    pub fn json_bytes(&self) -> u32 {
        json_bytes(&self.event)
    }
}

impl SpawnEntry {
    /// The intent's size as a store without a recorded one reports it: its context's JSON.
    pub fn json_bytes(&self) -> u32 {
        json_bytes(&self.context)
    }
}

fn json_bytes(value: &impl serde::Serialize) -> u32 {
    serde_json::to_vec(value).map_or(0, |v| u32::try_from(v.len()).unwrap_or(u32::MAX))
}

/// A pending child creation.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnEntry {
    pub seq: i64,
    pub parent_id: String,
    pub child_id: String,
    pub root_path: String,
    pub context: Map,
    /// As [`OutboxEntry::trace_context`].
    pub trace_context: Option<String>,
}

/// What [`ExecutionStore::claim_timer`] found: whether a `Timeout` is its timer's
/// current arming.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum TimerClaim {
    /// The timer was armed with this `fire_at`: the `Timeout` is the current arming's,
    /// and the timer is now deleted (the step that applies it consumes it).
    Claimed,
    /// The timer is armed with another `fire_at` (kept): the `Timeout` is an earlier
    /// arming's, its state left and re-entered since.
    Rearmed(f64),
    /// No timer is armed for the path (fired and deleted, or cancelled).
    Absent,
    /// The store cannot tell (it keeps no timers it could read).
    Unknown,
}

/// A timer armed for an execution ([`ExecutionStore::timers_of`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ArmedTimer {
    pub path: String,
    pub fire_at: f64,
    /// Out of what is listed as due ([`TimerOp::Hold`]): its execution is suspended.
    pub held: bool,
}

/// A timer that is due.
#[derive(Debug, Clone, PartialEq)]
pub struct DueTimer {
    pub execution_id: String,
    pub path: String,
    pub fire_at: f64,
}

/// A lightweight projection of an execution for list views (harel's `ExecutionSummary`).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionSummary {
    pub id: String,
    pub definition_id: String,
    pub status: Status,
    pub outcome: Option<String>,
    pub active_path: Option<String>,
    pub version: i64,
    pub parent_id: Option<String>,
    pub finished_at: Option<f64>,
    /// The version of its machine it is pinned to (`None`: unpinned, as harel writes it).
    pub definition_version: Option<stm_core::version::Version>,
    /// Events wait on it (for its version to be deployed, or for a resume).
    pub parked: bool,
}

impl ExecutionSummary {
    pub fn of(exe: &Execution) -> Self {
        ExecutionSummary {
            id: exe.id.clone(),
            definition_id: exe.definition_id.clone(),
            status: exe.status,
            outcome: exe.outcome.clone(),
            active_path: exe.active_path.clone(),
            version: exe.version,
            parent_id: exe.parent_id.clone(),
            finished_at: exe.finished_at,
            definition_version: exe.definition_version,
            parked: exe.has_parked(),
        }
    }
}

/// Filters and paging for [`ExecutionStore::list_executions`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListQuery {
    /// Any of these statuses (none: all).
    pub status: Option<Vec<Status>>,
    pub definition_id: Option<String>,
    pub roots_only: bool,
    /// Page size (0 means the default, 100).
    pub limit: usize,
    /// The opaque `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecutionPage {
    pub items: Vec<ExecutionSummary>,
    pub next_cursor: Option<String>,
}

/// The durable store. Implementations: [`MemoryStore`] and the DynamoDB store.
#[async_trait]
pub trait ExecutionStore: Send + Sync {
    /// The execution `id`, or `None`.
    async fn load(&self, id: &str) -> Result<Option<Execution>, StoreError>;

    /// The execution and whether it already processed `event_id`, in one round trip
    /// where the backend allows.
    async fn load_for_event(&self, id: &str, event_id: &str)
        -> Result<(Option<Execution>, bool), StoreError>;

    /// The execution and, for each of `event_ids` in order, whether it already processed
    /// it: what a burst of events for one execution needs, in one round trip where the
    /// backend allows (DynamoDB: one `BatchGetItem`). The default asks for each.
    async fn load_for_events(
        &self,
        id: &str,
        event_ids: &[&str],
    ) -> Result<(Option<Execution>, Vec<bool>), StoreError> {
        let Some((first, rest)) = event_ids.split_first() else {
            return Ok((self.load(id).await?, Vec::new()));
        };
        let (exe, processed) = self.load_for_event(id, first).await?;
        let mut marks = vec![processed];
        for event_id in rest {
            marks.push(exe.is_some() && self.is_processed(id, event_id).await?);
        }
        Ok((exe, marks))
    }

    /// Whether `commit` of `exe` fits in one atomic write of this backend (DynamoDB: a
    /// transaction's 100 items and 4 MB, an item's 400 KB), checked without a call: a
    /// burst is cut where the next step would not fit. `Err(StoreError::TooLarge)` says
    /// what is over. No default: a store that wraps another must forward it, or a burst
    /// would grow past the wrapped store's limits.
    fn check_commit(&self, exe: &Execution, commit: &Commit) -> Result<(), StoreError>;

    /// Atomically write `exe` (CAS on `exe.version`, which is bumped on success and
    /// left as it was on failure) with everything in `commit`. Returns the seqs of the
    /// outbox entries and spawn intents it wrote, in order.
    async fn commit(&self, exe: &mut Execution, commit: Commit) -> Result<Written, StoreError>;

    /// `commit` with no side effects.
    async fn save(&self, exe: &mut Execution) -> Result<(), StoreError> {
        self.commit(exe, Commit::default()).await.map(|_| ())
    }

    async fn is_processed(&self, id: &str, event_id: &str) -> Result<bool, StoreError>;

    async fn list_executions(&self, query: &ListQuery) -> Result<ExecutionPage, StoreError>;

    /// Undelivered outbox entries, oldest (lowest seq) first.
    async fn pending_outbox(&self) -> Result<Vec<OutboxEntry>, StoreError>;
    async fn ack_outbox(&self, seq: i64) -> Result<(), StoreError>;

    /// Undelivered spawn intents, oldest first.
    async fn pending_spawns(&self) -> Result<Vec<SpawnEntry>, StoreError>;
    async fn ack_spawn(&self, seq: i64) -> Result<(), StoreError>;

    /// The rows that `id`'s last commit with any rows wrote, those still pending, read by
    /// key (never by scanning the tables): a redelivered duplicate publishes them before
    /// its group's next event. Earlier commits' rows were published before the group moved
    /// past them, so these are the only ones of `id` whose order can still matter.
    async fn pending_rows_of(&self, id: &str) -> Result<PendingRows, StoreError>;

    /// The seqs of at most `limit` pending rows, spawn intents and outbox entries together,
    /// lowest first, leaving out rows committed at `settled_before` (epoch seconds) or
    /// later where the store can tell: the relay's bounded pass. Memory is bounded by
    /// `limit`, not by the backlog (DynamoDB: the keys alone are scanned, page by page).
    /// Leaving out the newest rows keeps each execution's order although a scan is not a
    /// snapshot: a row committed before `settled_before` follows its execution's earlier
    /// rows, which existed when the scan began, so the scan sees them too. Read the outbox
    /// before the spawn intents: an event read there was committed after the spawn intents
    /// of the regions it goes to, so the second read finds those still pending (or they
    /// were published already); the other way round, a commit landing between the reads
    /// gives an event without its region's intent. No default, as for every method a
    /// wrapper must forward: a default would read everything.
    async fn oldest_pending_seqs(
        &self,
        limit: usize,
        settled_before: f64,
    ) -> Result<Vec<PendingSeq>, StoreError>;

    /// The rows of these seqs that are still pending, read by key, each list in seq order.
    async fn pending_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<PendingRows, StoreError>;

    /// Ack these rows together (DynamoDB: 25 deletes a request). An error may leave some
    /// of them pending; acking one again is harmless.
    async fn ack_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<(), StoreError>;

    /// The executions of machine `definition_id` now in one of `paths` (each an exact
    /// state path), not DONE or CANCELLED, that entered it at or before `entered_by` when
    /// given ([`states`]). The cost grows with the matches, never with the
    /// table (DynamoDB: the sharded state index). DynamoDB's index is eventually
    /// consistent: a caller acting on an answer re-reads each execution first. No default:
    /// a store that wraps another forwards it.
    async fn in_states(
        &self,
        definition_id: &str,
        paths: &[String],
        entered_by: Option<f64>,
    ) -> Result<Vec<InState>, StoreError>;

    /// Timers with `fire_at <= now`, earliest first: all of them at once (the embedded
    /// runner's and the tests'; the sweeper reads [`due_page`](Self::due_page)s).
    async fn due_timers(&self, now: f64) -> Result<Vec<DueTimer>, StoreError>;

    /// The next due timers (`fire_at <= now`): at most `limit`, in due order (`fire_at`,
    /// then the execution and the path), after those `cursor` has given in this sweep. A
    /// page shorter than `limit` is the last. A sweep reads a page, fires it, then reads
    /// the next, so what it holds is bounded by `limit` whatever is due, and a sweep cut
    /// by its deadline has fired the earliest timers. No default: a store that wraps
    /// another forwards it (or, holding a view of what is due, answers with
    /// [`DueCursor::page_of`]).
    async fn due_page(
        &self,
        now: f64,
        cursor: &mut DueCursor,
        limit: usize,
    ) -> Result<Vec<DueTimer>, StoreError>;

    /// Remove the timer only if it still holds `fire_at` (a re-schedule survives).
    async fn delete_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<(), StoreError>;

    /// The `fire_at` of the timer armed for `(id, path)`, if any (a strongly consistent
    /// point read): a precise timer's doorbell checks it before firing, so a timer
    /// cancelled or re-armed since is not fired early, and the sweeper confirms each timer
    /// its eventually consistent index listed. A store that wraps another forwards it (no
    /// default: reading every timer instead would grow with the table).
    async fn armed_timer(&self, id: &str, path: &str) -> Result<Option<f64>, StoreError>;

    /// [`armed_timer`](Self::armed_timer), with the trace context of the commit that armed
    /// the timer ([`Commit::trace_context`]), read in the same request: the `Timeout` the
    /// sweeper sends continues that trace. The default knows no context (a store that
    /// wraps another forwards it).
    async fn armed_timer_in_trace(
        &self,
        id: &str,
        path: &str,
    ) -> Result<Option<(f64, Option<String>)>, StoreError> {
        Ok(self.armed_timer(id, path).await?.map(|fire_at| (fire_at, None)))
    }

    /// Every timer armed for execution `id`, held or not (a strongly consistent read of
    /// that execution's timers only): what suspending holds and resuming lists again. No
    /// default: a store that wraps another forwards it.
    async fn timers_of(&self, id: &str) -> Result<Vec<ArmedTimer>, StoreError>;

    /// Claim the timer of `(id, path)` for a `Timeout` fired for `fire_at`: delete it if it
    /// is armed with that `fire_at`, else say what is armed (the delete a conditional write,
    /// read and decided together, so a re-arm cannot slip between a check and the delete;
    /// a store may read first and write only when the read finds that `fire_at`). The
    /// worker calls it before applying a `Timeout`, to ignore one whose state was left and
    /// re-entered since it was published. The default cannot tell
    /// ([`TimerClaim::Unknown`]) only where it has no timers to read; a store that wraps
    /// another forwards it (no default, so none forgets to).
    async fn claim_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<TimerClaim, StoreError>;

    /// The recorded trace steps, oldest first, each with its `index`.
    async fn read_trace(&self, id: &str) -> Result<Vec<Map>, StoreError>;

    /// Append one trace step outside a commit (same ring rule).
    async fn append_trace(&self, id: &str, entry: Map) -> Result<(), StoreError>;

    /// Delete execution `id` and everything the store keys by it (its processed marks,
    /// trace steps and timers, the outbox entries addressed to it and the spawn intents it
    /// issued) if its version is still `expected_version` (harel 0.9.0's `purge`).
    ///
    /// `Ok(true)`: it was deleted. `Ok(false)`: it moved on (nothing is touched) or is
    /// already gone; in the second case its leftover rows are still swept, so a purge that
    /// died between the execution and its rows is finished by a retry. A stale copy can
    /// never bring it back: its commit fails the CAS as for any absent execution.
    async fn purge(&self, id: &str, expected_version: i64) -> Result<bool, StoreError>;

    /// Take the number of the next event parked for `id` (module [`parked`]): from 1, a
    /// new one each call (a number taken and never written is a hole a release steps
    /// over).
    async fn take_park_number(&self, id: &str) -> Result<u64, StoreError>;

    /// The last number taken for `id` (0: none yet), a strongly consistent read.
    async fn last_park_number(&self, id: &str) -> Result<u64, StoreError>;

    /// Keep `parked` for `id` in its row, if `id` is still at `version` (its item is not
    /// written). [`Parked::AlreadyKept`]: its event was kept already (a redelivery);
    /// a moved version: [`StoreError::Conflict`].
    async fn park(&self, id: &str, version: i64, parked: &ParkedEvent) -> Result<Parked, StoreError>;

    /// The events kept for `id` numbered after `after` through `through`, in number order,
    /// at most [`PARKED_PAGE`] numbers read (a number without a row is left out); strongly
    /// consistent.
    async fn parked_events(&self, id: &str, after: u64, through: u64)
        -> Result<Vec<ParkedEvent>, StoreError>;

    /// Record one instance's end in its counted join's rows (module [`join`]): `Some` with
    /// the join's tally when every instance has now reported (this report or an earlier
    /// one: a report recorded again answers as the first did once the join is full), so
    /// its delivery can tell the parent at once. Idempotent.
    async fn report_to_join(&self, report: &JoinReport) -> Result<Option<JoinTally>, StoreError>;

    /// Every machine's route ([`route`]): empty when none was ever written.
    async fn routes(&self) -> Result<Routes, StoreError>;

    /// Write `routes` if the stored generation is still `read` (what [`routes`] gave),
    /// as generation `read + 1`: `false`, writing nothing, when another write came first.
    ///
    /// [`routes`]: ExecutionStore::routes
    async fn put_routes(&self, routes: &Routes, read: u64) -> Result<bool, StoreError>;

    /// Add each `(key, tally)` to its tally item ([`route::tally_key`]); the items expire
    /// on their own once `expires` (seconds since the epoch) has passed.
    async fn add_tallies(&self, adds: &[(String, Tally)], expires: i64) -> Result<(), StoreError>;

    /// The sum of the tally items `keys` (a missing one counts nothing).
    async fn tally(&self, keys: &[String]) -> Result<Tally, StoreError>;

    /// The ids of the stored executions that begin with `prefix`, matched literally
    /// (no character is a wildcard): a tree's descendants are found by `"{root id}:"`.
    async fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError>;

    /// The ids that begin with any of `prefixes`: [`ids_with_prefix`] for each, which a
    /// store may answer in one pass (DynamoDB: one Scan for a whole page of purge
    /// candidates instead of one per tree).
    ///
    /// [`ids_with_prefix`]: ExecutionStore::ids_with_prefix
    async fn ids_with_any_prefix(&self, prefixes: &[String]) -> Result<Vec<String>, StoreError> {
        let mut ids = Vec::new();
        for prefix in prefixes {
            for id in self.ids_with_prefix(prefix).await? {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        Ok(ids)
    }
}
