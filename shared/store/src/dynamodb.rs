//! [`DynamoDbStore`]: the [`ExecutionStore`](crate::ExecutionStore) over DynamoDB,
//! implementing harel 0.9.0's DynamoDB store (its `engine/store/dynamodb.py`; the team's
//! specification of it is what ARCHITECTURE.md's glossary calls "the seed") exactly where
//! the tables are concerned, so a harel process and ours share one set of tables.
//!
//! # Tables and items
//!
//! Seven tables `{prefix}_{name}` ([`table_specs`]), all on-demand. Item shapes are
//! harel's, attribute for attribute:
//!
//! | table | item |
//! |---|---|
//! | executions | `id` S, `data` S (the Execution JSON), `version` N, `definition_id` S, plus our `trace_idx` N and `commit_token` S (below), `rows` L (the last block of seqs, below), `ttl` N on a finished one with [`DynamoDbStore::with_finished_ttl`], and `recent` B with [`DedupeMarks::OnItem`] |
//! | outbox | `seq` N, `target_id` S or NULL, `event` S (the Event JSON) |
//! | spawns | `seq` N, `parent_id` S, `child_id` S, `root_path` S, `context` S (`json.dumps`) |
//! | timers | `execution_id` S, `path` S, `fire_at` N, plus our `due_shard` S (below) |
//! | processed | `execution_id` S, `event_id` S, plus `ttl` N with [`DynamoDbStore::with_processed_ttl`] |
//! | counters | `id` S (`outbox`, `spawn`: harel's seq allocator, which we leave to harel), `n` N |
//! | trace | `execution_id` S, `idx` N, `entry` S (`json.dumps`), plus `ttl` N with [`DynamoDbStore::with_finished_ttl`] |
//!
//! Strings harel writes with Python's `json.dumps` (`context`, `entry`) are written the same
//! way, byte for byte (`stm_core::pyjson`); numbers are written as Python's `repr`.
//!
//! # The commit
//!
//! As harel, **one** `TransactWriteItems` in harel's order: the execution put
//! carrying the CAS (`attribute_not_exists(id)` for version 0, `version = :ov` otherwise),
//! the outbox puts, the spawn puts, the processed put, the timer puts and deletes, the trace
//! put and the ring delete `idx - trace_max`. No call before it: the seqs are not taken
//! from the `counters` item (below).
//!
//! # Deliberate differences from harel's store (harel's readers and writers keep working)
//!
//! - **Seqs without a shared counter** (module `rows`). harel's `ADD` on one `counters`
//!   item per emitting commit makes that item the whole deployment's ceiling (DynamoDB
//!   serves 1,000 write units per second per key). A commit's block of seqs comes from the
//!   clock (milliseconds, shifted, plus random low bits), never below the execution's last
//!   block plus one, which its item records as `rows`: an execution's rows stay in commit
//!   order whatever the hosts' clocks, each row put is guarded by
//!   `attribute_not_exists(seq)` (two blocks that meet cancel the second, which takes
//!   another), and a redelivered duplicate finds its commit's rows by key. harel reads the
//!   rows as its own and sorts them after the ones its counter gives.
//! - **Conflicts without a read.** The CAS put asks for
//!   `ReturnValuesOnConditionCheckFailure = ALL_OLD`; the stored version comes from the
//!   cancellation reason's item. A `GetItem` is only the fallback when there is none (the
//!   execution is gone, or an emulator does not return it).
//! - **Classified cancellations.** Only `ConditionalCheckFailed` on the execution (index 0)
//!   is a [`StoreError::Conflict`]. `TransactionConflict`, throttling and other transient
//!   faults are retried with bounded, jittered exponential backoff ([`RetryPolicy`]), then
//!   reported as [`StoreError::Retryable`]. A `ValidationException`, or a `ValidationError`
//!   among the reasons (moto: `ValidationException`), is never retried: DynamoDB refuses
//!   the same request every time, so it is a [`StoreError::TooLarge`] naming each refused
//!   action with DynamoDB's code and message, and the caller fails the step at once
//!   instead of redelivering it for hours. Anything else is a [`StoreError::Backend`]
//!   carrying DynamoDB's message.
//! - **Idempotent retries.** Every commit carries a `ClientRequestToken` (32 hex digits of
//!   a SHA-256 over the execution id, the version being written, the data, the allocated
//!   seqs and trace index, and a retry generation), so the SDK's or our own retry after an
//!   ambiguous failure (a timeout, a dropped connection, a 5xx) is the identical request
//!   and a no-op inside DynamoDB's 10-minute window. After a failure that certainly wrote
//!   nothing (a cancellation, throttling) the generation moves on: the retry is a new
//!   request, never answered from the idempotency cache with the old failure. The token is
//!   also stored on the execution item as `commit_token`: when a retried commit finds its
//!   CAS failed against an item holding one of *its own* tokens at the version it was
//!   writing, that attempt landed and the commit succeeds. That covers what the request
//!   token cannot: the single-put path below, retries after the window, and emulators that
//!   ignore the token.
//! - **Single-item commits use `PutItem`.** A commit with no side effects (the execution
//!   only) is a conditional `PutItem` with the same CAS and `ALL_OLD`: as atomic as a
//!   one-item transaction, at half the write capacity (transactions bill two units per
//!   item).
//! - **The trace index without a read.** harel derives the next trace `idx` with a
//!   `Query` per traced commit. We keep the last written index in the execution item as a
//!   top-level `trace_idx` attribute (written in the same put, invisible to harel, which
//!   only reads `data`). `load`/`load_for_event` project it and remember it per
//!   (execution, version); a traced commit from that version writes `trace_idx + 1` with no
//!   extra call. When it is unknown (an item written by harel, or an execution loaded by
//!   another store instance) we fall back to harel's `Query` (consistent). The trace put
//!   is guarded by `attribute_not_exists(idx)`, so a stale hint (someone appended with
//!   harel's `append_trace`) can never overwrite a step: the transaction is cancelled on
//!   that item, we re-read the max with the `Query` and try again.
//! - **Timer ops on one path collapse** to the last one in the commit (a transaction may
//!   not touch an item twice; the last op is what a sequential store would leave).
//! - **Consistent reads** for `load`, `load_for_event`, `is_processed`, the trace reads and
//!   the relay/sweeper scans, where a stale read would cost a conflict or a late delivery.
//! - **Limits are checked before any call**: an execution (or any other) item over 400 KB,
//!   more than 100 items or 4 MB in the transaction, and a number DynamoDB cannot hold (a
//!   timer's `fire_at`, now plus a timeout read from the context, of 1E+126 or more or not
//!   finite: DynamoDB's numbers have at most 38 significant digits and a magnitude from
//!   1E-130 to below 1E+126) give [`StoreError::TooLarge`].
//! - **Listing fills its pages.** The cursor is harel's form: URL-safe base64 of the
//!   `json.dumps` of a typed DynamoDB key (`{"id": {"S": ...}}`), used as the next
//!   `ExclusiveStartKey`. We keep scanning (at least 100 items examined per call) until the
//!   page holds `limit` matches or the table ends; a page that fills up mid-batch ends with
//!   its last item's key, so no match is skipped or repeated. A harel 0.9.0 cursor (base64
//!   of an integer offset; it drains the scan and pages by offset) is accepted too.
//! - **Timers are swept through an index** ([`due`]): our timer items carry `due_shard`,
//!   the partition key of the `timers` table's sparse GSI `due_index` (sort key `fire_at`),
//!   and `due_timers` queries the 64 shards for `fire_at <= now` instead of scanning the
//!   table; harel's full scan still runs, rarely (default every 10 minutes, shared across
//!   instances), for timers harel wrote. harel's scan reads our items as its own.
//! - **Processed marks can expire**: with a retention configured, processed items carry a
//!   `ttl` (epoch seconds), the attribute the template enables TTL on.
//! - **Processed marks can live on the execution item** ([`DedupeMarks::OnItem`], not the
//!   default): no `processed` puts; the execution put carries the last 10 marks, so a
//!   commit of a step with no other effect is a single conditional `PutItem` and a load
//!   for an event one consistent `GetItem`. A weaker dedupe guarantee; see there.

mod backlog;
mod commit;
pub mod due;
pub(crate) mod item;
mod join;
mod listing;
mod load;
mod parked;
mod provision;
mod purge;
mod recent;
mod routes;
mod rows;
pub mod schema;
mod states;
mod store;
pub use states::{state_index_key, state_key, SMALL_STATE_INDEX};
mod timers;
mod trace;
mod ttl;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::Client;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;

use crate::{StoreError, DEFAULT_PREFIX, DEFAULT_TRACE_MAX};
pub use due::{timer_shard, SweepStats, DEFAULT_TIMER_FULL_SCAN_INTERVAL};
use item::{s, Item};
use recent::Recent;
pub use schema::{
    table_specs, IndexSpec, KeyAttr, KeyType, Projection, TableSpec, STATE_INDEX, STATE_SHARDS,
    TIMER_DUE_INDEX, TIMER_SHARDS, TIMER_SHARD_ATTRIBUTE, TTL_ATTRIBUTE,
};
use stm_aws::{CallCounter, Readable};

/// DynamoDB's item size limit.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
/// DynamoDB's limit on the items of one `TransactWriteItems`.
pub const MAX_TRANSACTION_ITEMS: usize = 100;
/// DynamoDB's limit on the size of one `TransactWriteItems`.
pub(crate) const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;
/// DynamoDB's limit on the keys of one `BatchGetItem` ("as many as 100 items").
pub const MAX_BATCH_GET_KEYS: usize = 100;

/// The extra execution-item attribute holding the last trace index (see the module docs).
pub const TRACE_IDX_ATTRIBUTE: &str = "trace_idx";
/// The extra execution-item attribute holding the token of the commit that wrote it.
pub const COMMIT_TOKEN_ATTRIBUTE: &str = "commit_token";
/// The extra execution-item attribute holding the last processed events with
/// [`DedupeMarks::OnItem`] (see there).
pub const RECENT_ATTRIBUTE: &str = "recent";
pub use crate::dedupe::{DedupeMarks, RECENT_MARKS};

/// Cancellation reason codes that a retry can cure.
const TRANSIENT_REASONS: &[&str] = &[
    "TransactionConflict",
    "ThrottlingError",
    "ProvisionedThroughputExceeded",
    "RequestLimitExceeded",
];

/// Error codes of transient service faults, worth another try.
const TRANSIENT_CODES: &[&str] = &[
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionInProgressException",
    "TransactionConflictException",
    "LimitExceededException",
];

/// How many executions' hints a store remembers.
const TRACE_HINTS_CAP: usize = 10_000;

/// What is known of one execution item at `version` without reading it.
#[derive(Debug, Clone)]
struct Hint {
    version: i64,
    /// The last trace idx stored in the item.
    trace_idx: Option<i64>,
    /// The processed window a commit from this version continues ([`DedupeMarks::OnItem`]).
    recent: Option<Recent>,
    /// The item's `rows` block (`None`: it has none).
    rows: Option<rows::Rows>,
    /// The item's state index entry (`None`: it has none).
    state: Option<crate::states::StateEntry>,
}

/// How a commit (and a batch read's unprocessed keys) retries transient faults, on top of
/// the SDK's own retries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// The backoff ceiling before the second attempt; it doubles each time (full jitter).
    pub base_delay: Duration,
    /// The largest backoff.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(25),
            max_delay: Duration::from_secs(1),
        }
    }
}

impl RetryPolicy {
    /// The sleep before attempt `attempt + 1` (`attempt` counts from 1): uniform in
    /// `[0, min(max, base * 2^(attempt-1))]`.
    fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self
            .base_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(self.max_delay);
        ceiling.mul_f64(jitter())
    }
}

/// A number in [0, 1).
fn jitter() -> f64 {
    (random_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Random bits from the std hasher's random keys (no RNG dependency).
fn random_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// Options of [`DynamoDbStore::create_with`].
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// The table prefix (default `harel`).
    pub prefix: String,
    /// Create the tables if absent (default). With `false` only check that they exist with
    /// the right keys (production: the tables come from `template.yaml`).
    pub create_schema: bool,
    /// Tries to reach the endpoint before giving up (default 30).
    pub connect_attempts: u32,
    /// The pause between them (default 1 s).
    pub connect_delay: Duration,
    /// The trace ring size (default 200; 0 keeps everything).
    pub trace_max: usize,
    /// Count the client's calls.
    pub call_counter: Option<CallCounter>,
    /// The SDK's own retries of each call (default: the SDK's standard mode, 3 attempts).
    pub sdk_retry: Option<aws_sdk_dynamodb::config::retry::RetryConfig>,
    /// The store's retries of transient commit failures.
    pub retry: RetryPolicy,
    /// How often `due_timers` runs harel's full scan besides the index (for timers
    /// written by harel, which are not in the index), shared across instances: default 10
    /// minutes; `None` never (index only); zero every sweep (harel's). See [`due`].
    pub timer_full_scan_interval: Option<Duration>,
    /// Where the processed marks are kept (default: harel's `processed` table).
    pub dedupe_marks: DedupeMarks,
    /// The shared config files' profile whose credentials to use (default: `AWS_PROFILE`'s,
    /// else `default`); the operator CLI's `--profile`.
    pub profile: Option<String>,
    /// Write each execution's state index entry with it (default). A deployment's functions
    /// write it only when deployed with `StateIndex=true` (`STM_STATE_INDEX`): the two
    /// attributes, about 80 bytes, can take an execution item near 1 KB to a second write
    /// unit on every commit.
    pub state_index: bool,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            prefix: DEFAULT_PREFIX.to_string(),
            create_schema: true,
            connect_attempts: 30,
            connect_delay: Duration::from_secs(1),
            trace_max: DEFAULT_TRACE_MAX,
            call_counter: None,
            sdk_retry: None,
            retry: RetryPolicy::default(),
            timer_full_scan_interval: Some(DEFAULT_TIMER_FULL_SCAN_INTERVAL),
            dedupe_marks: DedupeMarks::Table,
            profile: None,
            state_index: true,
        }
    }
}

struct Tables {
    executions: String,
    outbox: String,
    spawns: String,
    timers: String,
    processed: String,
    counters: String,
    trace: String,
}

impl Tables {
    fn new(prefix: &str) -> Self {
        let t = |name: &str| format!("{prefix}_{name}");
        Tables {
            executions: t("executions"),
            outbox: t("outbox"),
            spawns: t("spawns"),
            timers: t("timers"),
            processed: t("processed"),
            counters: t("counters"),
            trace: t("trace"),
        }
    }
}

/// The DynamoDB [`ExecutionStore`](crate::ExecutionStore); see the module docs.
pub struct DynamoDbStore {
    client: Client,
    prefix: String,
    tables: Tables,
    trace_max: usize,
    processed_ttl: Option<Duration>,
    finished_ttl: Option<Duration>,
    retry: RetryPolicy,
    counter: Option<CallCounter>,
    /// What the store knows of an execution item's version without reading it.
    hints: Mutex<HashMap<String, Hint>>,
    timer_full_scan_interval: Option<Duration>,
    dedupe_marks: DedupeMarks,
    full_scan: Mutex<due::FullScanState>,
    state_index: bool,
    small_state_index: i32,
}

impl std::fmt::Debug for DynamoDbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoDbStore")
            .field("prefix", &self.prefix)
            .field("trace_max", &self.trace_max)
            .field("processed_ttl", &self.processed_ttl)
            .field("finished_ttl", &self.finished_ttl)
            .field("retry", &self.retry)
            .field("timer_full_scan_interval", &self.timer_full_scan_interval)
            .field("dedupe_marks", &self.dedupe_marks)
            .finish_non_exhaustive()
    }
}

impl DynamoDbStore {
    /// A store over an injected client, with the default prefix (`harel`) and trace ring
    /// (200). It touches nothing: call [`ensure_tables`](Self::ensure_tables) or
    /// [`check_tables`](Self::check_tables) as needed.
    pub fn new(client: Client) -> Self {
        DynamoDbStore {
            client,
            prefix: DEFAULT_PREFIX.to_string(),
            tables: Tables::new(DEFAULT_PREFIX),
            trace_max: DEFAULT_TRACE_MAX,
            processed_ttl: None,
            finished_ttl: None,
            retry: RetryPolicy::default(),
            counter: None,
            hints: Mutex::new(HashMap::new()),
            timer_full_scan_interval: Some(DEFAULT_TIMER_FULL_SCAN_INTERVAL),
            dedupe_marks: DedupeMarks::Table,
            full_scan: Mutex::new(due::FullScanState::default()),
            state_index: true,
            small_state_index: SMALL_STATE_INDEX,
        }
    }

    /// Use the tables `{prefix}_*`. The prefix follows harel's rule: an identifier of at
    /// most 30 characters.
    pub fn with_prefix(mut self, prefix: &str) -> Result<Self, StoreError> {
        if !schema::valid_prefix(prefix) {
            return Err(StoreError::backend(format!(
                "prefix must be an identifier (a letter or _, then letters, digits or _; at most 30 \
                 characters), got {prefix:?}"
            )));
        }
        self.prefix = prefix.to_string();
        self.tables = Tables::new(prefix);
        Ok(self)
    }

    /// Keep the last `trace_max` trace steps per execution (0: all).
    pub fn with_trace_max(mut self, trace_max: usize) -> Self {
        self.trace_max = trace_max;
        self
    }

    /// Stamp processed marks with a `ttl` attribute `retention` from now, for DynamoDB's
    /// TTL to delete them. Off by default (the marks are kept).
    pub fn with_processed_ttl(mut self, retention: Duration) -> Self {
        self.processed_ttl = Some(retention);
        self
    }

    /// Retention without a purge job: stamp a `ttl` attribute (epoch seconds) on an
    /// execution item when a commit finishes it (DONE or CANCELLED: `finished_at` plus
    /// `retention`), and on every trace row (its write time plus `retention`), for
    /// DynamoDB's TTL to delete them at no write cost. A FAILED execution gets none: it is
    /// a dead letter awaiting redrive. A later commit that revives an execution writes the
    /// item without it. A trace row expires `retention` after it was written, so it never
    /// outlives its finished execution, but a run longer than `retention` loses its oldest
    /// steps while it runs. Off by default (harel keeps everything until a purge).
    pub fn with_finished_ttl(mut self, retention: Duration) -> Self {
        self.finished_ttl = Some(retention);
        self
    }

    /// How often `due_timers` also runs the full scan (see [`CreateOptions`] and [`due`]).
    pub fn with_timer_full_scan_interval(mut self, interval: Option<Duration>) -> Self {
        self.timer_full_scan_interval = interval;
        self
    }

    /// Up to how many entries a look at the state index reads it whole, in one `Scan`
    /// page, instead of by its shards (default [`SMALL_STATE_INDEX`]; 0: always by
    /// shards).
    pub fn with_small_state_index(mut self, entries: i32) -> Self {
        self.small_state_index = entries.max(0);
        self
    }

    /// Where the processed marks are kept (see [`DedupeMarks`]; default `Table`).
    ///
    /// ```
    /// use stm_store::{DedupeMarks, DynamoDbStore, RECENT_MARKS};
    /// let conf = aws_sdk_dynamodb::Config::builder()
    ///     .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
    ///     .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
    ///     .build();
    /// let store = DynamoDbStore::new(aws_sdk_dynamodb::Client::from_conf(conf))
    ///     .with_dedupe_marks(DedupeMarks::OnItem);
    /// assert_eq!(store.dedupe_marks(), DedupeMarks::OnItem);
    /// assert_eq!(store.dedupe_window(), Some(RECENT_MARKS));
    /// ```
    pub fn with_dedupe_marks(mut self, marks: DedupeMarks) -> Self {
        self.dedupe_marks = marks;
        self
    }

    pub fn dedupe_marks(&self) -> DedupeMarks {
        self.dedupe_marks
    }

    /// Whether commits write the state index entry ([`CreateOptions::state_index`]).
    pub fn with_state_index(mut self, on: bool) -> Self {
        self.state_index = on;
        self
    }

    /// How many of an execution's last processed events are surely recognised as
    /// duplicates: `None` for all of them (the `Table` layout, until the marks' TTL),
    /// [`RECENT_MARKS`] for [`DedupeMarks::OnItem`].
    pub fn dedupe_window(&self) -> Option<usize> {
        match self.dedupe_marks {
            DedupeMarks::Table => None,
            DedupeMarks::OnItem => Some(RECENT_MARKS),
        }
    }

    /// The store's own retries of transient commit failures.
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Count this store's DynamoDB calls in `counter` (the client is rebuilt with the
    /// counting interceptor; other clones of the original client are not counted).
    pub fn with_call_counter(mut self, counter: CallCounter) -> Self {
        let conf = self
            .client
            .config()
            .to_builder()
            .interceptor(counter.clone())
            .build();
        self.client = Client::from_conf(conf);
        self.counter = Some(counter);
        self
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The call counter given with [`with_call_counter`](Self::with_call_counter).
    pub fn call_counter(&self) -> Option<&CallCounter> {
        self.counter.as_ref()
    }

    /// Whether the marks live on the execution item ([`DedupeMarks::OnItem`]).
    fn on_item(&self) -> bool {
        self.dedupe_marks == DedupeMarks::OnItem
    }

    /// The full name of table `name` (`executions`, `outbox`, ...).
    pub fn table_name(&self, name: &str) -> String {
        format!("{}_{name}", self.prefix)
    }

    // ---- hints ------------------------------------------------------------------------

    fn hints(&self) -> std::sync::MutexGuard<'_, HashMap<String, Hint>> {
        self.hints.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remember what the item of `id` at `version` holds: its last trace idx and the
    /// processed window a commit from it continues (either may be unknown), and its rows
    /// block and state index entry (known: the whole item was read or written).
    fn remember_hint(
        &self,
        id: &str,
        version: i64,
        trace_idx: Option<i64>,
        recent: Option<Recent>,
        rows: Option<rows::Rows>,
        state: Option<crate::states::StateEntry>,
    ) {
        let mut hints = self.hints();
        if hints.len() >= TRACE_HINTS_CAP && !hints.contains_key(id) {
            hints.clear();
        }
        hints.insert(
            id.to_string(),
            Hint {
                version,
                trace_idx,
                recent,
                rows,
                state,
            },
        );
    }

    /// Drop what is known of `id`'s item (it was purged: a new execution may reuse the id;
    /// or a commit lost its CAS: the item is newer than anything known).
    fn forget_hint(&self, id: &str) {
        self.hints().remove(id);
    }

    /// Forget only where `id`'s trace ends (a trace step was appended outside a commit,
    /// which does not change the item's version).
    fn forget_trace_hint(&self, id: &str) {
        if let Some(hint) = self.hints().get_mut(id) {
            hint.trace_idx = None;
        }
    }

    /// The rows block of `id`'s item at `version`: `None` if unknown, `Some(None)` if it
    /// has none.
    fn rows_hint(&self, id: &str, version: i64) -> Option<Option<rows::Rows>> {
        self.hints()
            .get(id)
            .filter(|h| h.version == version)
            .map(|h| h.rows)
    }

    /// The state index entry of `id`'s item at `version`: `None` if unknown, `Some(None)`
    /// if it has none.
    fn state_hint(&self, id: &str, version: i64) -> Option<Option<crate::states::StateEntry>> {
        self.hints()
            .get(id)
            .filter(|h| h.version == version)
            .map(|h| h.state.clone())
    }

    /// The last trace idx stored in the execution item at `version`, if known.
    fn hint(&self, id: &str, version: i64) -> Option<i64> {
        self.hints()
            .get(id)
            .filter(|h| h.version == version)
            .and_then(|h| h.trace_idx)
    }

    /// The processed window a commit from `id`'s item at `version` continues, if known.
    fn recent_hint(&self, id: &str, version: i64) -> Option<Recent> {
        self.hints()
            .get(id)
            .filter(|h| h.version == version)
            .and_then(|h| h.recent.clone())
    }

    // ---- small operations -------------------------------------------------------------

    fn processed_key(id: &str, event_id: &str) -> Item {
        HashMap::from([
            ("execution_id".to_string(), s(id)),
            ("event_id".to_string(), s(event_id)),
        ])
    }

    /// One strongly consistent `GetItem` of execution `id`, projecting `attributes`.
    async fn get_execution_attributes(
        &self,
        id: &str,
        attributes: &[&str],
    ) -> Result<Option<Item>, StoreError> {
        let mut request = self
            .client
            .get_item()
            .table_name(&self.tables.executions)
            .key("id", s(id));
        let mut projection = Vec::with_capacity(attributes.len());
        for (i, name) in attributes.iter().enumerate() {
            let placeholder = format!("#a{i}");
            request = request.expression_attribute_names(&placeholder, *name);
            projection.push(placeholder);
        }
        let out = request
            .projection_expression(projection.join(", "))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem", e))?;
        Ok(out.item().cloned())
    }
}

/// An SDK error as a [`StoreError`]: transient faults (unreachable, timeouts, throttling,
/// 5xx) are [`StoreError::Retryable`], the rest [`StoreError::Backend`].
fn sdk_error<E>(op: &str, err: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let msg = format!("{op}: {}", Readable(&err));
    let transient = match &err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => true,
        SdkError::ServiceError(se) => {
            se.err().code().is_some_and(|c| TRANSIENT_CODES.contains(&c))
                || se.raw().status().is_server_error()
        }
        _ => false,
    };
    let error = if transient {
        StoreError::retryable(msg)
    } else {
        StoreError::backend(msg)
    };
    error.with_source(err)
}

fn build_err(err: aws_smithy_types::error::operation::BuildError) -> StoreError {
    StoreError::backend(format!("building a DynamoDB request: {err}"))
}
