//! [`DynamoDbStore`]: the [`ExecutionStore`] over DynamoDB, implementing the store seed
//! (`000_06f3f9b241542c1f`, harel 0.9.0's `engine/store/dynamodb.py`) exactly where the
//! tables are concerned, so a harel process and ours share one set of tables.
//!
//! # Tables and items
//!
//! Seven tables `{prefix}_{name}` ([`table_specs`]), all on-demand. Item shapes are
//! harel's, attribute for attribute:
//!
//! | table | item |
//! |---|---|
//! | executions | `id` S, `data` S (the Execution JSON), `version` N, `definition_id` S, plus our `trace_idx` N and `commit_token` S (below) |
//! | outbox | `seq` N, `target_id` S or NULL, `event` S (the Event JSON) |
//! | spawns | `seq` N, `parent_id` S, `child_id` S, `root_path` S, `context` S (`json.dumps`) |
//! | timers | `execution_id` S, `path` S, `fire_at` N, plus our `due_shard` S (below) |
//! | processed | `execution_id` S, `event_id` S, plus `ttl` N with [`DynamoDbStore::with_processed_ttl`] |
//! | counters | `id` S (`outbox`, `spawn`), `n` N |
//! | trace | `execution_id` S, `idx` N, `entry` S (`json.dumps`) |
//!
//! Strings harel writes with Python's `json.dumps` (`context`, `entry`) are written the same
//! way, byte for byte ([`crate::pyjson`]); numbers are written as Python's `repr`.
//!
//! # The commit
//!
//! As the seed: seq blocks from the `ADD n :k` counters first (one `UpdateItem` per kind,
//! only when there are emits or spawns), then **one** `TransactWriteItems` in the seed's
//! order: the execution put carrying the CAS (`attribute_not_exists(id)` for version 0,
//! `version = :ov` otherwise), the outbox puts, the spawn puts, the processed put, the timer
//! puts and deletes, the trace put and the ring delete `idx - trace_max`.
//!
//! # Deliberate differences from the seed (harel's readers and writers keep working)
//!
//! - **Conflicts without a read.** The CAS put asks for
//!   `ReturnValuesOnConditionCheckFailure = ALL_OLD`; the stored version comes from the
//!   cancellation reason's item. A `GetItem` is only the fallback when there is none (the
//!   execution is gone, or an emulator does not return it).
//! - **Classified cancellations.** Only `ConditionalCheckFailed` on the execution (index 0)
//!   is a [`StoreError::Conflict`]. `TransactionConflict`, throttling and other transient
//!   faults are retried with bounded, jittered exponential backoff ([`RetryPolicy`]), then
//!   reported as [`StoreError::Retryable`]; anything else (a `ValidationError`, ...) is a
//!   [`StoreError::Backend`] carrying DynamoDB's message.
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
//! - **The trace index without a read.** The seed derives the next trace `idx` with a
//!   `Query` per traced commit. We keep the last written index in the execution item as a
//!   top-level `trace_idx` attribute (written in the same put, invisible to harel, which
//!   only reads `data`). `load`/`load_for_event` project it and remember it per
//!   (execution, version); a traced commit from that version writes `trace_idx + 1` with no
//!   extra call. When it is unknown (an item written by harel, or an execution loaded by
//!   another store instance) we fall back to the seed's `Query` (consistent). The trace put
//!   is guarded by `attribute_not_exists(idx)`, so a stale hint (someone appended with
//!   harel's `append_trace`) can never overwrite a step: the transaction is cancelled on
//!   that item, we re-read the max with the `Query` and try again.
//! - **Timer ops on one path collapse** to the last one in the commit (a transaction may
//!   not touch an item twice; the last op is what a sequential store would leave).
//! - **Consistent reads** for `load`, `load_for_event`, `is_processed`, the trace reads and
//!   the relay/sweeper scans, where a stale read would cost a conflict or a late delivery.
//! - **Limits are checked before any call**: an execution (or any other) item over 400 KB,
//!   more than 100 items or 4 MB in the transaction give [`StoreError::TooLarge`].
//! - **Listing fills its pages.** The cursor is the seed's form: URL-safe base64 of the
//!   `json.dumps` of a typed DynamoDB key (`{"id": {"S": ...}}`), used as the next
//!   `ExclusiveStartKey`. We keep scanning (at least 100 items examined per call) until the
//!   page holds `limit` matches or the table ends; a page that fills up mid-batch ends with
//!   its last item's key, so no match is skipped or repeated. A harel 0.9.0 cursor (base64
//!   of an integer offset; it drains the scan and pages by offset) is accepted too.
//! - **Timers are swept through an index** ([`due`]): our timer items carry `due_shard`,
//!   the partition key of the `timers` table's sparse GSI `due_index` (sort key `fire_at`),
//!   and `due_timers` queries the 16 shards for `fire_at <= now` instead of scanning the
//!   table; the seed's full scan still runs, rarely (default every 10 minutes, shared across
//!   instances), for timers harel wrote. harel's scan reads our items as its own.
//! - **Processed marks can expire**: with a retention configured, processed items carry a
//!   `ttl` (epoch seconds), the attribute the template enables TTL on.

pub mod due;
pub(crate) mod item;
pub mod schema;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use crate::aws::Readable;
use aws_sdk_dynamodb::operation::describe_table::{DescribeTableError, DescribeTableOutput};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, Delete, GlobalSecondaryIndex, IndexStatus, KeySchemaElement,
    KeyType as DdbKeyType, KeysAndAttributes, Projection as DdbProjection, ProjectionType, Put, ReturnValue,
    ReturnValuesOnConditionCheckFailure, ScalarAttributeType, TableStatus, TransactWriteItem,
};
use aws_sdk_dynamodb::Client;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use base64::Engine as _;
use sha2::{Digest, Sha256};
use stm_core::{Event, Execution, Map, Value};

use crate::aws::{sdk_config, CallCounter};
use crate::pyjson;
use crate::{
    Commit, DueTimer, ExecutionPage, ExecutionStore, ExecutionSummary, ListQuery, OutboxEntry, SpawnEntry,
    StoreError, TimerOp, DEFAULT_TRACE_MAX,
};
pub use due::{timer_shard, SweepStats, DEFAULT_TIMER_FULL_SCAN_INTERVAL};
use item::{
    corrupt, get_i64, get_s, item_size, key_from_typed_json, key_to_typed_json, n_f64, n_i64, req_i64, req_s,
    s, s_or_null, Item,
};
pub use schema::{
    table_specs, IndexSpec, KeyAttr, KeyType, Projection, TableSpec, PROCESSED_TTL_ATTRIBUTE,
    TIMER_DUE_INDEX, TIMER_SHARDS, TIMER_SHARD_ATTRIBUTE,
};

pub use crate::{DEFAULT_PREFIX, DEFAULT_REGION};
/// DynamoDB's item size limit.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
/// DynamoDB's limit on the items of one `TransactWriteItems`.
pub const MAX_TRANSACTION_ITEMS: usize = 100;
/// DynamoDB's limit on the size of one `TransactWriteItems`.
pub const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;

/// The extra execution-item attribute holding the last trace index (see the module docs).
pub const TRACE_IDX_ATTRIBUTE: &str = "trace_idx";
/// The extra execution-item attribute holding the token of the commit that wrote it.
pub const COMMIT_TOKEN_ATTRIBUTE: &str = "commit_token";

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

/// Cancellation reason codes that a retry can cure.
const TRANSIENT_REASONS: &[&str] = &[
    "TransactionConflict",
    "ThrottlingError",
    "ProvisionedThroughputExceeded",
    "RequestLimitExceeded",
];

/// How many (execution, version) → trace index hints a store remembers.
const TRACE_HINTS_CAP: usize = 10_000;

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

/// A number in [0, 1) from the std hasher's random keys (no RNG dependency).
fn jitter() -> f64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
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
    /// How often `due_timers` runs the seed's full scan besides the index (for timers
    /// written by harel, which are not in the index), shared across instances: default 10
    /// minutes; `None` never (index only); zero every sweep (the seed). See [`due`].
    pub timer_full_scan_interval: Option<Duration>,
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

/// The DynamoDB [`ExecutionStore`]; see the module docs.
pub struct DynamoDbStore {
    client: Client,
    prefix: String,
    tables: Tables,
    trace_max: usize,
    processed_ttl: Option<Duration>,
    retry: RetryPolicy,
    counter: Option<CallCounter>,
    /// execution id -> (version, last trace idx stored in that version's item).
    trace_hints: Mutex<HashMap<String, (i64, i64)>>,
    timer_full_scan_interval: Option<Duration>,
    full_scan: Mutex<due::FullScanState>,
}

impl std::fmt::Debug for DynamoDbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoDbStore")
            .field("prefix", &self.prefix)
            .field("trace_max", &self.trace_max)
            .field("processed_ttl", &self.processed_ttl)
            .field("retry", &self.retry)
            .field("timer_full_scan_interval", &self.timer_full_scan_interval)
            .finish_non_exhaustive()
    }
}

impl DynamoDbStore {
    /// Ack an outbox or spawn entry: delete it by its `seq` key.
    async fn delete_by_seq(&self, table: &str, seq: i64) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(table)
            .key("seq", n_i64(seq))
            .send()
            .await
            .map_err(|e| sdk_error("DeleteItem", e))?;
        Ok(())
    }

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
            retry: RetryPolicy::default(),
            counter: None,
            trace_hints: Mutex::new(HashMap::new()),
            timer_full_scan_interval: Some(DEFAULT_TIMER_FULL_SCAN_INTERVAL),
            full_scan: Mutex::new(due::FullScanState::default()),
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

    /// How often `due_timers` also runs the full scan (see [`CreateOptions`] and [`due`]).
    pub fn with_timer_full_scan_interval(mut self, interval: Option<Duration>) -> Self {
        self.timer_full_scan_interval = interval;
        self
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

    pub fn trace_max(&self) -> usize {
        self.trace_max
    }

    /// The call counter given with [`with_call_counter`](Self::with_call_counter).
    pub fn call_counter(&self) -> Option<&CallCounter> {
        self.counter.as_ref()
    }

    /// The size DynamoDB counts for the item a commit of `exe` writes (the one checked
    /// against the 400 KB limit).
    pub fn execution_item_size(&self, exe: &Execution) -> usize {
        let mut next = exe.clone();
        next.version += 1;
        let hint = self.hint(&exe.id, exe.version);
        item_size(&self.exe_item(&next, &next.to_json(), next.version, hint, &"0".repeat(32)))
    }

    /// The full name of table `name` (`executions`, `outbox`, ...).
    pub fn table_name(&self, name: &str) -> String {
        format!("{}_{name}", self.prefix)
    }

    /// Build a client for `endpoint_url` (an emulator, with dummy credentials) or real AWS
    /// (`None`, the default credential chain) in `region`, and make sure the tables exist,
    /// retrying until the endpoint answers.
    pub async fn create(endpoint_url: Option<&str>, region: &str) -> Result<Self, StoreError> {
        Self::create_with(endpoint_url, region, CreateOptions::default()).await
    }

    /// [`create`](Self::create) with options.
    pub async fn create_with(
        endpoint_url: Option<&str>,
        region: &str,
        options: CreateOptions,
    ) -> Result<Self, StoreError> {
        let config = sdk_config(endpoint_url, region).await;
        let mut builder = aws_sdk_dynamodb::config::Builder::from(&config);
        if let Some(tag) = crate::aws::function_tag() {
            builder.push_interceptor(tag);
        }
        if let Some(retry) = options.sdk_retry {
            builder = builder.retry_config(retry);
        }
        let mut store = DynamoDbStore::new(Client::from_conf(builder.build()))
            .with_prefix(&options.prefix)?
            .with_trace_max(options.trace_max)
            .with_retry_policy(options.retry)
            .with_timer_full_scan_interval(options.timer_full_scan_interval);
        if let Some(counter) = options.call_counter {
            store = store.with_call_counter(counter);
        }
        let attempts = options.connect_attempts.max(1);
        let mut last = None;
        for attempt in 1..=attempts {
            let result = if options.create_schema {
                store.ensure_tables().await
            } else {
                store.check_tables().await
            };
            match result {
                Ok(()) => return Ok(store),
                // unreachable (connection refused, timeout) or busy: wait and try again
                Err(StoreError::Retryable { message: why, .. }) => {
                    tracing::debug!(attempt, %why, "DynamoDB not reachable yet");
                    last = Some(why);
                    if attempt < attempts {
                        tokio::time::sleep(options.connect_delay).await;
                    }
                }
                Err(other) => return Err(other),
            }
        }
        Err(StoreError::backend(format!(
            "DynamoDB at {} not reachable after {attempts} attempts: {}",
            endpoint_url.unwrap_or("the default AWS endpoint"),
            last.unwrap_or_default()
        )))
    }

    /// Create the seven tables (and the `timers` due index) if absent and wait until the
    /// new ones are `ACTIVE`. An existing table (harel creates the same seven with its own
    /// `CreateTable` calls) is joined as it is when it has the seed's key schema, and
    /// refused with a message naming it and both schemas when it has not. An existing
    /// `timers` table without the index is left as it is (logged, and
    /// [`has_due_index`](Self::has_due_index) says so): sweeps then fall back to the
    /// seed's full scan.
    pub async fn ensure_tables(&self) -> Result<(), StoreError> {
        let mut created = Vec::new();
        let mut existing = Vec::new();
        for spec in table_specs() {
            let name = spec.table_name(&self.prefix);
            let mut req = self
                .client
                .create_table()
                .table_name(&name)
                .billing_mode(BillingMode::PayPerRequest);
            for (i, key) in spec.keys().into_iter().enumerate() {
                let role = if i == 0 {
                    DdbKeyType::Hash
                } else {
                    DdbKeyType::Range
                };
                req = req.key_schema(key_element(key, role)?);
            }
            for attr in spec.attribute_definitions() {
                let ty = match attr.ty {
                    KeyType::String => ScalarAttributeType::S,
                    KeyType::Number => ScalarAttributeType::N,
                };
                req = req.attribute_definitions(
                    AttributeDefinition::builder()
                        .attribute_name(attr.name)
                        .attribute_type(ty)
                        .build()
                        .map_err(build_err)?,
                );
            }
            for index in spec.indexes {
                let mut gsi = GlobalSecondaryIndex::builder().index_name(index.name).projection(
                    DdbProjection::builder()
                        .projection_type(match index.projection {
                            Projection::KeysOnly => ProjectionType::KeysOnly,
                        })
                        .build(),
                );
                for (i, key) in index.keys().into_iter().enumerate() {
                    let role = if i == 0 {
                        DdbKeyType::Hash
                    } else {
                        DdbKeyType::Range
                    };
                    gsi = gsi.key_schema(key_element(key, role)?);
                }
                req = req.global_secondary_indexes(gsi.build().map_err(build_err)?);
            }
            match req.send().await {
                Ok(_) => created.push(name),
                // there already (harel's CreateTable, the template, an earlier run): joined
                // below if it is keyed as ours
                Err(err) if err.code() == Some("ResourceInUseException") => existing.push(spec),
                Err(err) => return Err(sdk_error("CreateTable", err)),
            }
        }
        for name in created {
            self.wait_active(&name).await?;
        }
        // An existing table is used as it is, never altered: harel's have the seed's keys
        // and none of our additions (the due index), which are optional. Keys are not: both
        // stores address every item by them, so a table keyed otherwise is refused by name.
        let timers_existed = existing.iter().any(|spec| spec.name == "timers");
        for (spec, name, out) in self.describe_tables(existing).await? {
            let out = out.map_err(|e| sdk_error("DescribeTable", e))?;
            check_key_schema(&spec, &name, &out)?;
            if name == self.tables.timers {
                self.note_due_index(&out);
            }
        }
        if timers_existed {
            Ok(())
        } else {
            self.detect_due_index().await
        }
    }

    /// `DescribeTable` of each of `specs`' tables, all at once (one round trip, not one per
    /// table), answered in `specs`' order whatever order they come back in.
    async fn describe_tables(
        &self,
        specs: Vec<TableSpec>,
    ) -> Result<
        Vec<(
            TableSpec,
            String,
            Result<DescribeTableOutput, SdkError<DescribeTableError, HttpResponse>>,
        )>,
        StoreError,
    > {
        let mut calls = tokio::task::JoinSet::new();
        for (index, spec) in specs.into_iter().enumerate() {
            let name = spec.table_name(&self.prefix);
            let client = self.client.clone();
            calls.spawn(async move {
                let out = client.describe_table().table_name(&name).send().await;
                (index, spec, name, out)
            });
        }
        let mut answers = Vec::with_capacity(calls.len());
        while let Some(joined) = calls.join_next().await {
            let answer =
                joined.map_err(|e| StoreError::backend(format!("a DescribeTable task failed: {e}")))?;
            answers.push(answer);
        }
        answers.sort_by_key(|(index, ..)| *index);
        Ok(answers
            .into_iter()
            .map(|(_, spec, name, out)| (spec, name, out))
            .collect())
    }

    /// Whether the `timers` table has an `ACTIVE` due index: remembered, so that sweeps of
    /// a table without it go straight to the full scan (logged once here).
    async fn detect_due_index(&self) -> Result<(), StoreError> {
        let out = self
            .client
            .describe_table()
            .table_name(&self.tables.timers)
            .send()
            .await
            .map_err(|e| sdk_error("DescribeTable", e))?;
        self.note_due_index(&out);
        Ok(())
    }

    /// Record, from a `DescribeTable` of `timers`, whether the due index is usable.
    fn note_due_index(&self, out: &DescribeTableOutput) {
        let present = out.table().is_some_and(|t| {
            t.global_secondary_indexes().iter().any(|g| {
                g.index_name() == Some(TIMER_DUE_INDEX)
                    && g.index_status().is_none_or(|s| *s == IndexStatus::Active)
            })
        });
        if !present {
            tracing::warn!(
                table = %self.tables.timers,
                index = TIMER_DUE_INDEX,
                "the timers table has no ACTIVE due index: every timer sweep is a full scan \
                 (deploy template.yaml with the index)"
            );
        }
        self.set_due_index_present(present);
    }

    async fn wait_active(&self, table: &str) -> Result<(), StoreError> {
        for _ in 0..240 {
            let out = self
                .client
                .describe_table()
                .table_name(table)
                .send()
                .await
                .map_err(|e| sdk_error("DescribeTable", e))?;
            let status = out.table().and_then(|t| t.table_status().cloned());
            let indexes_active = out_indexes_active(&out);
            if status == Some(TableStatus::Active) && indexes_active {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Err(StoreError::backend(format!(
            "table {table} did not become ACTIVE within 120 s"
        )))
    }

    /// Check that the seven tables exist with the seed's keys (for `create_schema = false`).
    /// A `timers` table without the due index passes (harel's tables have none): sweeps
    /// then fall back to the full scan (logged).
    pub async fn check_tables(&self) -> Result<(), StoreError> {
        // the seven DescribeTable calls at once: they are most of a function's cold start
        // (one round trip instead of eight in a row), and the `timers` answer doubles as
        // the due-index check; problems are reported in the tables' declared order
        for (spec, name, out) in self.describe_tables(table_specs()).await? {
            let out = match out {
                Ok(out) => out,
                Err(err) if err.code() == Some("ResourceNotFoundException") => {
                    return Err(StoreError::backend(format!(
                        "table {name} does not exist (the schema is not created with create_schema = false: \
                         deploy template.yaml)"
                    )))
                }
                Err(err) => return Err(sdk_error("DescribeTable", err)),
            };
            check_key_schema(&spec, &name, &out)?;
            if name == self.tables.timers {
                self.note_due_index(&out);
            }
        }
        Ok(())
    }

    // ---- trace hints ------------------------------------------------------------------

    fn hints(&self) -> std::sync::MutexGuard<'_, HashMap<String, (i64, i64)>> {
        self.trace_hints.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn remember_hint(&self, id: &str, version: i64, idx: Option<i64>) {
        let mut hints = self.hints();
        match idx {
            Some(idx) => {
                if hints.len() >= TRACE_HINTS_CAP && !hints.contains_key(id) {
                    hints.clear();
                }
                hints.insert(id.to_string(), (version, idx));
            }
            None => {
                hints.remove(id);
            }
        }
    }

    /// The last trace idx stored in the execution item at `version`, if known.
    fn hint(&self, id: &str, version: i64) -> Option<i64> {
        self.hints()
            .get(id)
            .and_then(|(v, idx)| (*v == version).then_some(*idx))
    }

    // ---- small operations -------------------------------------------------------------

    /// Reserve `count` ids from counter `name`; the first.
    async fn next_seq(&self, name: &str, count: usize) -> Result<i64, StoreError> {
        let out = self
            .client
            .update_item()
            .table_name(&self.tables.counters)
            .key("id", s(name))
            .update_expression("ADD n :k")
            .expression_attribute_values(":k", n_i64(count as i64))
            .return_values(ReturnValue::UpdatedNew)
            .send()
            .await
            .map_err(|e| sdk_error("UpdateItem", e))?;
        let total = out
            .attributes()
            .and_then(|a| get_i64(a, "n"))
            .ok_or_else(|| corrupt(format!("counter {name}"), "no number `n` returned"))?;
        Ok(total - count as i64 + 1)
    }

    /// The highest trace idx of `id`, or -1 (a consistent Query, newest first, one row).
    async fn max_trace_idx(&self, id: &str) -> Result<i64, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.tables.trace)
            .key_condition_expression("execution_id = :e")
            .expression_attribute_values(":e", s(id))
            .projection_expression("idx")
            .scan_index_forward(false)
            .limit(1)
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("Query", e))?;
        Ok(out.items().first().and_then(|i| get_i64(i, "idx")).unwrap_or(-1))
    }

    /// Every item of `table` (all pages), consistent, optionally filtered.
    async fn scan_all(
        &self,
        table: &str,
        filter: Option<(&str, &str, aws_sdk_dynamodb::types::AttributeValue)>,
    ) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut req = self
                .client
                .scan()
                .table_name(table)
                .consistent_read(true)
                .set_exclusive_start_key(start);
            if let Some((expr, name, value)) = &filter {
                req = req
                    .filter_expression(*expr)
                    .expression_attribute_values(*name, value.clone());
            }
            let out = req.send().await.map_err(|e| sdk_error("Scan", e))?;
            items.extend(out.items().iter().cloned());
            match out.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(items),
            }
        }
    }

    fn parse_execution(&self, item: &Item, id: &str) -> Result<Execution, StoreError> {
        let data = req_s(item, "data", &format!("execution {id}"))?;
        let exe =
            Execution::from_json(data).map_err(|e| corrupt(format!("execution {id}"), e.to_string()))?;
        self.remember_hint(id, exe.version, get_i64(item, TRACE_IDX_ATTRIBUTE));
        Ok(exe)
    }

    fn processed_key(id: &str, event_id: &str) -> Item {
        HashMap::from([
            ("execution_id".to_string(), s(id)),
            ("event_id".to_string(), s(event_id)),
        ])
    }

    fn processed_ttl_value(&self) -> Option<i64> {
        let retention = self.processed_ttl?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        Some((now + retention).as_secs() as i64)
    }

    // ---- listing ----------------------------------------------------------------------

    fn summary_of(&self, item: &Item) -> Result<ExecutionSummary, StoreError> {
        let data = req_s(item, "data", "execution (listing)")?;
        let exe = Execution::from_json(data).map_err(|e| corrupt("execution (listing)", e.to_string()))?;
        let mut summary = ExecutionSummary::of(&exe);
        summary.version = get_i64(item, "version").unwrap_or(0);
        Ok(summary)
    }

    fn matches(query: &ListQuery, s: &ExecutionSummary) -> bool {
        query.status.as_ref().is_none_or(|st| st.contains(&s.status))
            && query.definition_id.as_ref().is_none_or(|d| &s.definition_id == d)
            && (!query.roots_only || s.parent_id.is_none())
    }

    /// One Scan call of the listing (`limit` items examined at most): the matches, each
    /// with its key, and the scan's `LastEvaluatedKey`.
    async fn list_scan(
        &self,
        query: &ListQuery,
        start: Option<Item>,
        limit: Option<i32>,
    ) -> Result<(Vec<(Item, ExecutionSummary)>, Option<Item>), StoreError> {
        let mut req = self
            .client
            .scan()
            .table_name(&self.tables.executions)
            .projection_expression("#id,#dat,#v")
            .expression_attribute_names("#id", "id")
            .expression_attribute_names("#dat", "data")
            .expression_attribute_names("#v", "version")
            .set_limit(limit)
            .set_exclusive_start_key(start);
        if let Some(def) = &query.definition_id {
            req = req
                .expression_attribute_names("#def", "definition_id")
                .filter_expression("#def = :def")
                .expression_attribute_values(":def", s(def));
        }
        let out = req.send().await.map_err(|e| sdk_error("Scan", e))?;
        let mut found = Vec::new();
        for item in out.items() {
            let summary = self.summary_of(item)?;
            if Self::matches(query, &summary) {
                let key = item
                    .get("id")
                    .cloned()
                    .map(|id| HashMap::from([("id".to_string(), id)]));
                found.push((key.unwrap_or_default(), summary));
            }
        }
        let next = out.last_evaluated_key().filter(|k| !k.is_empty()).cloned();
        Ok((found, next))
    }

    /// harel 0.9.0's listing for its own cursors: drain the scan, page by offset.
    async fn list_by_offset(
        &self,
        query: &ListQuery,
        offset: usize,
        limit: usize,
    ) -> Result<ExecutionPage, StoreError> {
        let mut all = Vec::new();
        let mut start = None;
        loop {
            let (found, next) = self.list_scan(query, start, None).await?;
            all.extend(found.into_iter().map(|(_, summary)| summary));
            match next {
                Some(key) => start = Some(key),
                None => break,
            }
        }
        let items: Vec<_> = all.iter().skip(offset).take(limit).cloned().collect();
        let next_cursor = (offset + limit < all.len())
            .then(|| base64::engine::general_purpose::URL_SAFE.encode((offset + limit).to_string()));
        Ok(ExecutionPage { items, next_cursor })
    }

    // ---- the commit -------------------------------------------------------------------

    /// Send the commit once. `trace_pos` is the trace put's index in the transaction.
    async fn send_commit(&self, plan: &Plan) -> Attempt {
        if let Some(put) = &plan.single_put {
            let result = self
                .client
                .put_item()
                .table_name(put.table_name())
                .set_item(Some(put.item().clone()))
                .set_condition_expression(put.condition_expression().map(str::to_string))
                .set_expression_attribute_values(put.expression_attribute_values().cloned())
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                .send()
                .await;
            return match result {
                Ok(_) => Attempt::Done,
                Err(SdkError::ServiceError(se)) => match se.err() {
                    PutItemError::ConditionalCheckFailedException(e) => Attempt::Conflict(e.item().cloned()),
                    other => classify_service("PutItem", other.code(), se.raw(), &Readable(other)),
                },
                Err(err) => classify_other("PutItem", &err),
            };
        }
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(plan.tx.clone()))
            .client_request_token(&plan.token)
            .send()
            .await;
        match result {
            Ok(_) => Attempt::Done,
            Err(SdkError::ServiceError(se)) => match se.err() {
                TransactWriteItemsError::TransactionCanceledException(tc) => {
                    let reasons = tc.cancellation_reasons();
                    let code = |i: usize| reasons.get(i).and_then(|r| r.code()).unwrap_or("None");
                    let listed: Vec<&str> = (0..reasons.len()).map(code).collect();
                    let msg = format!(
                        "TransactWriteItems cancelled [{}]: {}",
                        listed.join(", "),
                        tc.message().unwrap_or_default()
                    );
                    if code(0) == "ConditionalCheckFailed" {
                        Attempt::Conflict(reasons.first().and_then(|r| r.item()).cloned())
                    } else if plan
                        .trace_pos
                        .is_some_and(|p| code(p) == "ConditionalCheckFailed")
                    {
                        Attempt::TraceSlotTaken
                    } else if listed.iter().any(|c| *c != "None")
                        && listed
                            .iter()
                            .all(|c| *c == "None" || TRANSIENT_REASONS.contains(c))
                    {
                        // cancelled: nothing was written, the next try is a new transaction
                        Attempt::Retry {
                            msg,
                            maybe_applied: false,
                        }
                    } else {
                        Attempt::Fail(StoreError::backend(msg))
                    }
                }
                // raised by older emulators instead of a cancellation; by DynamoDB when the
                // token was used for a different transaction (another writer's commit of
                // the same version): both mean the CAS was lost
                other
                    if matches!(
                        other.code(),
                        Some("ConditionalCheckFailedException" | "IdempotentParameterMismatchException")
                    ) =>
                {
                    Attempt::Conflict(None)
                }
                other => classify_service("TransactWriteItems", other.code(), se.raw(), &Readable(other)),
            },
            Err(err) => classify_other("TransactWriteItems", &err),
        }
    }

    /// The stored version and commit token of `id` (the conflict fallback).
    async fn stored_version(&self, id: &str) -> Result<Option<Item>, StoreError> {
        self.get_execution_attributes(id, &["version", COMMIT_TOKEN_ATTRIBUTE])
            .await
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

/// One commit, ready to send.
struct Plan {
    tx: Vec<TransactWriteItem>,
    /// The execution put alone, when it is the whole commit.
    single_put: Option<Put>,
    trace_pos: Option<usize>,
    token: String,
}

enum Attempt {
    Done,
    /// The CAS failed; the stored item if DynamoDB returned it.
    Conflict(Option<Item>),
    /// The trace put's slot was already taken (a stale trace hint).
    TraceSlotTaken,
    /// A transient failure. `maybe_applied`: the write may have landed (a timeout, a 5xx),
    /// so the retry must be the identical request (same token); otherwise it was
    /// definitely refused and the retry is a new request (new token).
    Retry {
        msg: String,
        maybe_applied: bool,
    },
    Fail(StoreError),
}

fn classify_service(
    op: &str,
    code: Option<&str>,
    raw: &HttpResponse,
    err: &dyn std::fmt::Display,
) -> Attempt {
    let msg = format!("{op}: {err}");
    if raw.status().is_server_error() || code == Some("TransactionInProgressException") {
        // the request may have been (or is being) applied
        Attempt::Retry {
            msg,
            maybe_applied: true,
        }
    } else if code.is_some_and(|c| TRANSIENT_CODES.contains(&c)) {
        // throttled or conflicting: refused before any write
        Attempt::Retry {
            msg,
            maybe_applied: false,
        }
    } else {
        Attempt::Fail(StoreError::backend(msg))
    }
}

fn classify_other<E>(op: &str, err: &SdkError<E, HttpResponse>) -> Attempt
where
    E: std::error::Error + ProvideErrorMetadata + 'static,
{
    let msg = format!("{op}: {}", Readable(err));
    match err {
        // the request may or may not have been applied: the retry is idempotent (token)
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            Attempt::Retry {
                msg,
                maybe_applied: true,
            }
        }
        _ => Attempt::Fail(StoreError::backend(msg)),
    }
}

/// Refuse an existing table whose keys are not `spec`'s: the same attribute names in the
/// same roles (partition, sort), of the same types. Both stores (ours and harel's) address
/// every item by these keys, so a table keyed otherwise cannot be shared; the message
/// names the table, what it has and what is needed. Other attributes and indexes are not
/// looked at (harel's tables have none of our optional additions).
fn check_key_schema(spec: &TableSpec, name: &str, out: &DescribeTableOutput) -> Result<(), StoreError> {
    let table = out.table();
    let types: HashMap<&str, &str> = table
        .map(|t| t.attribute_definitions())
        .unwrap_or_default()
        .iter()
        .map(|d| (d.attribute_name(), d.attribute_type().as_str()))
        .collect();
    let mut found: Vec<(String, &str, String)> = table
        .map(|t| t.key_schema())
        .unwrap_or_default()
        .iter()
        .map(|k| {
            let role = if k.key_type() == &DdbKeyType::Hash {
                "HASH"
            } else {
                "RANGE"
            };
            let ty = types.get(k.attribute_name()).copied().unwrap_or("?");
            (k.attribute_name().to_string(), role, ty.to_string())
        })
        .collect();
    found.sort_by_key(|(_, role, _)| *role != "HASH");
    let want: Vec<(String, &str, String)> = spec
        .keys()
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let role = if i == 0 { "HASH" } else { "RANGE" };
            (k.name.to_string(), role, k.ty.as_str().to_string())
        })
        .collect();
    if found == want {
        return Ok(());
    }
    let show = |keys: &[(String, &str, String)]| {
        if keys.is_empty() {
            return "no keys".to_string();
        }
        keys.iter()
            .map(|(n, role, ty)| format!("{n} ({role}, {ty})"))
            .collect::<Vec<_>>()
            .join(" + ")
    };
    Err(StoreError::backend(format!(
        "table {name} exists with the key schema {} but stm and harel 0.9.0 key it by {}: \
         delete it or use another table prefix (--prefix, STM_TABLE_PREFIX)",
        show(&found),
        show(&want)
    )))
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

fn key_element(key: KeyAttr, role: DdbKeyType) -> Result<KeySchemaElement, StoreError> {
    KeySchemaElement::builder()
        .attribute_name(key.name)
        .key_type(role)
        .build()
        .map_err(build_err)
}

/// Whether every global secondary index in a `DescribeTable` answer is `ACTIVE`.
fn out_indexes_active(out: &aws_sdk_dynamodb::operation::describe_table::DescribeTableOutput) -> bool {
    out.table().is_none_or(|t| {
        t.global_secondary_indexes()
            .iter()
            .all(|g| g.index_status().is_none_or(|s| *s == IndexStatus::Active))
    })
}

fn build_err(err: aws_smithy_types::error::operation::BuildError) -> StoreError {
    StoreError::backend(format!("building a DynamoDB request: {err}"))
}

fn too_large(what: &str, bytes: usize, limit: usize) -> StoreError {
    StoreError::TooLarge(format!(
        "{what} is {bytes} bytes, over DynamoDB's limit of {limit} bytes (shrink the context or the event data)"
    ))
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The timer ops with only the last op per path kept, in the order of those last ops.
fn collapse_timers(ops: Vec<TimerOp>) -> Vec<TimerOp> {
    let path = |op: &TimerOp| match op {
        TimerOp::Schedule { path, .. } | TimerOp::Cancel { path } => path.clone(),
    };
    let mut out: Vec<TimerOp> = Vec::with_capacity(ops.len());
    for op in ops {
        let p = path(&op);
        out.retain(|o| path(o) != p);
        out.push(op);
    }
    out
}

/// The side items of a commit, serialized, before seqs are known.
struct Prepared {
    data: String,
    events: Vec<(Option<String>, String)>,
    spawns: Vec<(String, String, String)>,
    processed: Option<String>,
    timers: Vec<TimerOp>,
    trace_entry: Option<String>,
}

impl DynamoDbStore {
    fn exe_item(&self, exe: &Execution, data: &str, new: i64, trace_idx: Option<i64>, token: &str) -> Item {
        let mut item = HashMap::from([
            ("id".to_string(), s(&exe.id)),
            ("data".to_string(), s(data)),
            ("version".to_string(), n_i64(new)),
            ("definition_id".to_string(), s(&exe.definition_id)),
            (COMMIT_TOKEN_ATTRIBUTE.to_string(), s(token)),
        ]);
        if let Some(idx) = trace_idx {
            item.insert(TRACE_IDX_ATTRIBUTE.to_string(), n_i64(idx));
        }
        item
    }

    /// Reject what DynamoDB would, before spending a call.
    fn check_limits(&self, exe: &Execution, p: &Prepared, new: i64) -> Result<(), StoreError> {
        let placeholder_token = "0".repeat(32);
        let exe_bytes = item_size(&self.exe_item(exe, &p.data, new, Some(i64::MAX), &placeholder_token));
        if exe_bytes > MAX_ITEM_BYTES {
            return Err(too_large(
                &format!("execution {} item", exe.id),
                exe_bytes,
                MAX_ITEM_BYTES,
            ));
        }
        let mut total = exe_bytes;
        let seq_bytes = 3 + 21;
        for (target, event) in &p.events {
            let bytes =
                seq_bytes + "target_id".len() + target.as_ref().map_or(1, String::len) + 5 + event.len();
            if bytes > MAX_ITEM_BYTES {
                return Err(too_large("an emitted event's outbox item", bytes, MAX_ITEM_BYTES));
            }
            total += bytes;
        }
        for (child, root, ctx) in &p.spawns {
            let bytes = seq_bytes + 9 + exe.id.len() + 8 + child.len() + 9 + root.len() + 7 + ctx.len();
            if bytes > MAX_ITEM_BYTES {
                return Err(too_large(
                    &format!("the spawn item of child {child}"),
                    bytes,
                    MAX_ITEM_BYTES,
                ));
            }
            total += bytes;
        }
        if let Some(entry) = &p.trace_entry {
            let bytes = 12 + exe.id.len() + 3 + 21 + 5 + entry.len();
            if bytes > MAX_ITEM_BYTES {
                return Err(too_large("the trace step item", bytes, MAX_ITEM_BYTES));
            }
            total += bytes;
        }
        let count = 1
            + p.events.len()
            + p.spawns.len()
            + usize::from(p.processed.is_some())
            + p.timers.len()
            + p.trace_entry
                .as_ref()
                .map_or(0, |_| if self.trace_max > 0 { 2 } else { 1 });
        if count > MAX_TRANSACTION_ITEMS {
            return Err(StoreError::TooLarge(format!(
                "the commit of {} needs {count} transaction items, over DynamoDB's limit of \
                 {MAX_TRANSACTION_ITEMS} (too many emits, spawns or timers in one step)",
                exe.id
            )));
        }
        if total > MAX_TRANSACTION_BYTES {
            return Err(too_large(
                &format!("the commit of {}", exe.id),
                total,
                MAX_TRANSACTION_BYTES,
            ));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn plan(
        &self,
        exe: &Execution,
        p: &Prepared,
        old: i64,
        outbox_base: i64,
        spawn_base: i64,
        trace_idx: Option<i64>,
        stored_idx: Option<i64>,
        generation: u32,
    ) -> Result<Plan, StoreError> {
        let new = old + 1;
        let t = &self.tables;
        let mut hasher = Sha256::new();
        for part in [
            exe.id.as_str(),
            &new.to_string(),
            &p.data,
            &outbox_base.to_string(),
            &spawn_base.to_string(),
            &format!("{trace_idx:?}"),
            p.processed.as_deref().unwrap_or(""),
            &format!("{:?}", p.timers),
            &generation.to_string(),
        ] {
            hasher.update(part.as_bytes());
            hasher.update([0u8]);
        }
        let token = to_hex(&hasher.finalize()[..16]);

        let mut put = Put::builder()
            .table_name(&t.executions)
            .set_item(Some(self.exe_item(exe, &p.data, new, stored_idx, &token)))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        put = if old == 0 {
            put.condition_expression("attribute_not_exists(id)")
        } else {
            put.condition_expression("version = :ov")
                .expression_attribute_values(":ov", n_i64(old))
        };
        let put = put.build().map_err(build_err)?;
        let mut tx = vec![TransactWriteItem::builder().put(put.clone()).build()];
        let put_of = |table: &str, item: Item| -> Result<TransactWriteItem, StoreError> {
            let put = Put::builder()
                .table_name(table)
                .set_item(Some(item))
                .build()
                .map_err(build_err)?;
            Ok(TransactWriteItem::builder().put(put).build())
        };
        for (i, (target, event)) in p.events.iter().enumerate() {
            tx.push(put_of(
                &t.outbox,
                HashMap::from([
                    ("seq".to_string(), n_i64(outbox_base + i as i64)),
                    ("target_id".to_string(), s_or_null(target.as_deref())),
                    ("event".to_string(), s(event)),
                ]),
            )?);
        }
        for (i, (child, root, ctx)) in p.spawns.iter().enumerate() {
            tx.push(put_of(
                &t.spawns,
                HashMap::from([
                    ("seq".to_string(), n_i64(spawn_base + i as i64)),
                    ("parent_id".to_string(), s(&exe.id)),
                    ("child_id".to_string(), s(child)),
                    ("root_path".to_string(), s(root)),
                    ("context".to_string(), s(ctx)),
                ]),
            )?);
        }
        if let Some(event_id) = &p.processed {
            let mut mark = Self::processed_key(&exe.id, event_id);
            if let Some(ttl) = self.processed_ttl_value() {
                mark.insert(PROCESSED_TTL_ATTRIBUTE.to_string(), n_i64(ttl));
            }
            tx.push(put_of(&t.processed, mark)?);
        }
        for op in &p.timers {
            match op {
                TimerOp::Schedule { path, fire_at } => tx.push(put_of(
                    &t.timers,
                    HashMap::from([
                        ("execution_id".to_string(), s(&exe.id)),
                        ("path".to_string(), s(path)),
                        ("fire_at".to_string(), n_f64("a timer's fire_at", *fire_at)?),
                        // the due index's partition key (see `due`)
                        (TIMER_SHARD_ATTRIBUTE.to_string(), s(timer_shard(&exe.id, path))),
                    ]),
                )?),
                TimerOp::Cancel { path } => {
                    let del = Delete::builder()
                        .table_name(&t.timers)
                        .key("execution_id", s(&exe.id))
                        .key("path", s(path))
                        .build()
                        .map_err(build_err)?;
                    tx.push(TransactWriteItem::builder().delete(del).build());
                }
            }
        }
        let mut trace_pos = None;
        if let (Some(entry), Some(idx)) = (&p.trace_entry, trace_idx) {
            trace_pos = Some(tx.len());
            let put = Put::builder()
                .table_name(&t.trace)
                .item("execution_id", s(&exe.id))
                .item("idx", n_i64(idx))
                .item("entry", s(entry))
                // the slot must be free: a stale trace_idx hint can never overwrite a step
                .condition_expression("attribute_not_exists(idx)")
                .build()
                .map_err(build_err)?;
            tx.push(TransactWriteItem::builder().put(put).build());
            let max = self.trace_max as i64;
            if max > 0 && idx - max >= 0 {
                let del = Delete::builder()
                    .table_name(&t.trace)
                    .key("execution_id", s(&exe.id))
                    .key("idx", n_i64(idx - max))
                    .build()
                    .map_err(build_err)?;
                tx.push(TransactWriteItem::builder().delete(del).build());
            }
        }
        let single_put = (tx.len() == 1).then_some(put);
        Ok(Plan {
            tx,
            single_put,
            trace_pos,
            token,
        })
    }
}

#[async_trait]
impl ExecutionStore for DynamoDbStore {
    async fn load(&self, id: &str) -> Result<Option<Execution>, StoreError> {
        let item = self
            .get_execution_attributes(id, &["data", TRACE_IDX_ATTRIBUTE])
            .await?;
        item.map(|item| self.parse_execution(&item, id)).transpose()
    }

    async fn load_for_event(
        &self,
        id: &str,
        event_id: &str,
    ) -> Result<(Option<Execution>, bool), StoreError> {
        let exe_keys = KeysAndAttributes::builder()
            .keys(HashMap::from([("id".to_string(), s(id))]))
            .projection_expression("#d, #ti")
            .expression_attribute_names("#d", "data")
            .expression_attribute_names("#ti", TRACE_IDX_ATTRIBUTE)
            .consistent_read(true)
            .build()
            .map_err(build_err)?;
        let mark_keys = KeysAndAttributes::builder()
            .keys(Self::processed_key(id, event_id))
            .projection_expression("execution_id")
            .consistent_read(true)
            .build()
            .map_err(build_err)?;
        let mut request = HashMap::from([
            (self.tables.executions.clone(), exe_keys),
            (self.tables.processed.clone(), mark_keys),
        ]);
        let mut exe_item: Option<Item> = None;
        let mut processed = false;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let out = self
                .client
                .batch_get_item()
                .set_request_items(Some(request))
                .send()
                .await
                .map_err(|e| sdk_error("BatchGetItem", e))?;
            if let Some(responses) = out.responses() {
                if let Some(item) = responses
                    .get(&self.tables.executions)
                    .and_then(|items| items.first())
                {
                    exe_item = Some(item.clone());
                }
                processed |= responses
                    .get(&self.tables.processed)
                    .is_some_and(|items| !items.is_empty());
            }
            match out.unprocessed_keys() {
                Some(rest) if !rest.is_empty() => {
                    if attempt >= self.retry.max_attempts.max(1) {
                        return Err(StoreError::retryable(format!(
                            "BatchGetItem left keys unprocessed after {attempt} attempts"
                        )));
                    }
                    tokio::time::sleep(self.retry.backoff(attempt)).await;
                    request = rest.clone();
                }
                _ => break,
            }
        }
        let exe = exe_item.map(|item| self.parse_execution(&item, id)).transpose()?;
        Ok((exe, processed))
    }

    async fn commit(&self, exe: &mut Execution, commit: Commit) -> Result<Vec<i64>, StoreError> {
        let old = exe.version;
        let new = old + 1;
        exe.version = new;
        let data = exe.to_json();
        exe.version = old;
        let Commit {
            emits,
            processed_event_id,
            timers,
            spawns,
            trace,
        } = commit;
        let mut events = Vec::with_capacity(emits.len());
        for (target, event) in &emits {
            let json = serde_json::to_string(event)
                .map_err(|e| StoreError::backend(format!("serializing an emitted event: {e}")))?;
            events.push((target.clone(), json));
        }
        let prepared = Prepared {
            data,
            events,
            spawns: spawns
                .into_iter()
                .map(|sp| {
                    (
                        sp.child_id,
                        sp.root_path,
                        pyjson::dumps(&Value::Object(sp.context)),
                    )
                })
                .collect(),
            processed: processed_event_id,
            timers: collapse_timers(timers),
            trace_entry: trace.map(|t| pyjson::dumps(&Value::Object(t))),
        };
        self.check_limits(exe, &prepared, new)?;

        // seq blocks first (a block wasted by a cancelled transaction is harmless)
        let outbox_base = if prepared.events.is_empty() {
            0
        } else {
            self.next_seq("outbox", prepared.events.len()).await?
        };
        let spawn_base = if prepared.spawns.is_empty() {
            0
        } else {
            self.next_seq("spawn", prepared.spawns.len()).await?
        };

        let hint = self.hint(&exe.id, old).or(if old == 0 { Some(-1) } else { None });
        let mut trace_idx = match (&prepared.trace_entry, hint) {
            (None, _) => None,
            (Some(_), Some(last)) => Some(last + 1),
            (Some(_), None) => Some(self.max_trace_idx(&exe.id).await? + 1),
        };
        // A new token (generation) for every request after one that was definitely refused;
        // the same request and token again after one that may have landed. Every token
        // sent is remembered: finding one of them on the stored item means that attempt
        // landed.
        let mut generation = 0u32;
        let mut stored_idx = trace_idx.or(hint);
        let mut plan = self.plan(
            exe,
            &prepared,
            old,
            outbox_base,
            spawn_base,
            trace_idx,
            stored_idx,
            generation,
        )?;
        let mut tokens_sent: Vec<String> = Vec::new();
        let mut attempt = 0u32;
        let mut slot_retries = 0u32;
        loop {
            attempt += 1;
            if !tokens_sent.contains(&plan.token) {
                tokens_sent.push(plan.token.clone());
            }
            match self.send_commit(&plan).await {
                Attempt::Done => break,
                Attempt::Conflict(stored) => {
                    let stored = match stored {
                        Some(item) => Some(item),
                        None => self.stored_version(&exe.id).await?,
                    };
                    let found = stored.as_ref().and_then(|i| get_i64(i, "version"));
                    let token = stored.as_ref().and_then(|i| get_s(i, COMMIT_TOKEN_ATTRIBUTE));
                    if found == Some(new) && token.is_some_and(|t| tokens_sent.iter().any(|s| s == t)) {
                        // an earlier attempt of this very commit landed (its answer was lost)
                        break;
                    }
                    self.remember_hint(&exe.id, 0, None);
                    return Err(StoreError::Conflict {
                        id: exe.id.clone(),
                        expected: old,
                        found,
                    });
                }
                Attempt::TraceSlotTaken if slot_retries < 3 => {
                    // a stale trace_idx: read the real end of the trace and try again
                    slot_retries += 1;
                    attempt -= 1;
                    trace_idx = Some(self.max_trace_idx(&exe.id).await? + 1);
                    stored_idx = trace_idx;
                    generation += 1;
                    plan = self.plan(
                        exe,
                        &prepared,
                        old,
                        outbox_base,
                        spawn_base,
                        trace_idx,
                        stored_idx,
                        generation,
                    )?;
                }
                Attempt::TraceSlotTaken => {
                    return Err(StoreError::backend(format!(
                        "the trace slot of {} stayed taken after {slot_retries} re-reads",
                        exe.id
                    )))
                }
                Attempt::Retry { msg, maybe_applied } => {
                    if attempt >= self.retry.max_attempts.max(1) {
                        return Err(StoreError::retryable(format!("{msg} (after {attempt} attempts)")));
                    }
                    tracing::debug!(id = %exe.id, attempt, %msg, maybe_applied, "transient commit failure, retrying");
                    tokio::time::sleep(self.retry.backoff(attempt)).await;
                    if !maybe_applied {
                        generation += 1;
                        plan = self.plan(
                            exe,
                            &prepared,
                            old,
                            outbox_base,
                            spawn_base,
                            trace_idx,
                            stored_idx,
                            generation,
                        )?;
                    }
                }
                Attempt::Fail(err) => return Err(err),
            }
        }
        exe.version = new;
        self.remember_hint(&exe.id, new, stored_idx);
        Ok((0..prepared.events.len() as i64)
            .map(|i| outbox_base + i)
            .collect())
    }

    async fn is_processed(&self, id: &str, event_id: &str) -> Result<bool, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.processed)
            .set_key(Some(Self::processed_key(id, event_id)))
            .projection_expression("execution_id")
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem", e))?;
        Ok(out.item().is_some())
    }

    async fn list_executions(&self, query: &ListQuery) -> Result<ExecutionPage, StoreError> {
        let limit = if query.limit == 0 { 100 } else { query.limit };
        let mut start: Option<Item> = None;
        if let Some(cursor) = query.cursor.as_deref().filter(|c| !c.is_empty()) {
            let bad = || StoreError::backend(format!("bad list cursor {cursor:?}"));
            let raw = base64::engine::general_purpose::URL_SAFE
                .decode(cursor)
                .map_err(|_| bad())?;
            let text = String::from_utf8(raw).map_err(|_| bad())?;
            if let Ok(offset) = text.trim().parse::<usize>() {
                return self.list_by_offset(query, offset, limit).await; // a harel 0.9.0 cursor
            }
            let json: Value = serde_json::from_str(&text).map_err(|_| bad())?;
            start = Some(key_from_typed_json(&json).ok_or_else(bad)?);
        }
        let encode = |key: &Item| {
            let typed = pyjson::dumps(&key_to_typed_json(key));
            base64::engine::general_purpose::URL_SAFE.encode(typed)
        };
        let mut items = Vec::new();
        loop {
            // examine a reasonable batch per call; a page cut short mid-batch resumes after
            // its last item (a key is a valid ExclusiveStartKey), so no match is skipped
            let examine = (limit - items.len()).max(100).min(i32::MAX as usize) as i32;
            let (found, next) = self.list_scan(query, start.take(), Some(examine)).await?;
            let mut found = found.into_iter();
            while let Some((key, summary)) = found.next() {
                items.push(summary);
                if items.len() == limit {
                    let more = found.len() > 0 || next.is_some();
                    let next_cursor = more.then(|| encode(&key));
                    return Ok(ExecutionPage { items, next_cursor });
                }
            }
            match next {
                Some(key) => start = Some(key),
                None => {
                    return Ok(ExecutionPage {
                        items,
                        next_cursor: None,
                    })
                }
            }
        }
    }

    async fn pending_outbox(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        let mut out = Vec::new();
        for item in self.scan_all(&self.tables.outbox, None).await? {
            let seq = req_i64(&item, "seq", "outbox item")?;
            let what = format!("outbox item {seq}");
            let event: Event = serde_json::from_str(req_s(&item, "event", &what)?)
                .map_err(|e| corrupt(what.clone(), e.to_string()))?;
            out.push(OutboxEntry {
                seq,
                target_id: get_s(&item, "target_id").map(str::to_string),
                event,
            });
        }
        out.sort_by_key(|e| e.seq);
        Ok(out)
    }

    async fn ack_outbox(&self, seq: i64) -> Result<(), StoreError> {
        self.delete_by_seq(&self.tables.outbox, seq).await
    }

    async fn pending_spawns(&self) -> Result<Vec<SpawnEntry>, StoreError> {
        let mut out = Vec::new();
        for item in self.scan_all(&self.tables.spawns, None).await? {
            let seq = req_i64(&item, "seq", "spawn item")?;
            let what = format!("spawn item {seq}");
            let context: Map = serde_json::from_str(req_s(&item, "context", &what)?)
                .map_err(|e| corrupt(what.clone(), e.to_string()))?;
            out.push(SpawnEntry {
                seq,
                parent_id: req_s(&item, "parent_id", &what)?.to_string(),
                child_id: req_s(&item, "child_id", &what)?.to_string(),
                root_path: req_s(&item, "root_path", &what)?.to_string(),
                context,
            });
        }
        out.sort_by_key(|e| e.seq);
        Ok(out)
    }

    async fn ack_spawn(&self, seq: i64) -> Result<(), StoreError> {
        self.delete_by_seq(&self.tables.spawns, seq).await
    }

    /// The due index, and the full scan when scheduled (see [`due`]).
    async fn due_timers(&self, now: f64) -> Result<Vec<DueTimer>, StoreError> {
        Ok(self.due_timers_with_stats(now).await?.0)
    }

    async fn delete_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<(), StoreError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.tables.timers)
            .key("execution_id", s(id))
            .key("path", s(path))
            .condition_expression("fire_at = :f")
            .expression_attribute_values(":f", n_f64("fire_at", fire_at)?)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // re-scheduled (or already gone) since the sweep read it: leave it
            Err(err) if err.code() == Some("ConditionalCheckFailedException") => Ok(()),
            Err(err) => Err(sdk_error("DeleteItem", err)),
        }
    }

    async fn armed_timer(&self, id: &str, path: &str) -> Result<Option<f64>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.timers)
            .key("execution_id", s(id))
            .key("path", s(path))
            .projection_expression("fire_at")
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem", e))?;
        match out.item() {
            None => Ok(None),
            Some(item) => item::get_f64(item, "fire_at")
                .map(Some)
                .ok_or_else(|| corrupt(format!("timer {id}/{path}"), "no number `fire_at`")),
        }
    }

    async fn read_trace(&self, id: &str) -> Result<Vec<Map>, StoreError> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.tables.trace)
                .key_condition_expression("execution_id = :e")
                .expression_attribute_values(":e", s(id))
                .scan_index_forward(true)
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| sdk_error("Query", e))?;
            for item in page.items() {
                let idx = req_i64(item, "idx", "trace item")?;
                let what = format!("trace step {idx} of {id}");
                let mut entry: Map = serde_json::from_str(req_s(item, "entry", &what)?)
                    .map_err(|e| corrupt(what.clone(), e.to_string()))?;
                entry.insert("index".into(), Value::from(idx));
                out.push(entry);
            }
            match page.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(out),
            }
        }
    }

    async fn append_trace(&self, id: &str, entry: Map) -> Result<(), StoreError> {
        let idx = match entry.get("index").and_then(Value::as_i64) {
            Some(idx) => idx,
            None => self.max_trace_idx(id).await? + 1,
        };
        self.client
            .put_item()
            .table_name(&self.tables.trace)
            .item("execution_id", s(id))
            .item("idx", n_i64(idx))
            .item("entry", s(pyjson::dumps(&Value::Object(entry))))
            .send()
            .await
            .map_err(|e| sdk_error("PutItem", e))?;
        // the execution item's trace_idx no longer says where the trace ends: drop it, so the
        // next traced commit reads the max (harel's appender cannot do this; the guarded
        // trace put covers it)
        self.remember_hint(id, 0, None);
        let dropped = self
            .client
            .update_item()
            .table_name(&self.tables.executions)
            .key("id", s(id))
            .update_expression("REMOVE #ti")
            .condition_expression("attribute_exists(#ti)")
            .expression_attribute_names("#ti", TRACE_IDX_ATTRIBUTE)
            .send()
            .await;
        match dropped {
            Ok(_) => {}
            Err(err) if err.code() == Some("ConditionalCheckFailedException") => {}
            Err(err) => return Err(sdk_error("UpdateItem", err)),
        }
        let max = self.trace_max as i64;
        if max > 0 && idx - max >= 0 {
            self.client
                .delete_item()
                .table_name(&self.tables.trace)
                .key("execution_id", s(id))
                .key("idx", n_i64(idx - max))
                .send()
                .await
                .map_err(|e| sdk_error("DeleteItem", e))?;
        }
        Ok(())
    }
}
