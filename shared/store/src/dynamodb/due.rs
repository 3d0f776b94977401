//! The timer sweep: what is due is read from a sparse, sharded index on due time, so a
//! sweep costs what is due, not what exists. A rarer full scan still fires timers written
//! by harel 0.9.0 (which knows nothing of the index).
//!
//! # harel's sweep and its cost
//!
//! harel's `due_timers` is a `Scan` of the whole `timers` table with the filter
//! `fire_at <= :now`. A filter does not reduce what a scan reads (or bills): with 1,000,000
//! pending 30-day timers (~80 bytes each, ~78 MB) every sweep reads all of them, about
//! 19,000 read request units for a consistent scan in ~80 sequential 1 MB pages, to find
//! the handful that are due. Once a minute that is ~27 M RRU a day (~$3.40 a day at
//! us-east-1 on-demand prices, $0.125 per million RRU), and seconds of latency per sweep.
//!
//! Measured on moto (`tests/timer_sweep.rs`, `measure_sweep_cost`; 100,000 pending, 10 due;
//! items read = `ScannedCount` summed over the responses; RRU estimated from item sizes):
//!
//! | sweep | requests | items read | est. RRU |
//! |---|---|---|---|
//! | due index (16 shard queries) | 16 | 10 | 8 |
//! | harel's full scan | 9 | 100,020 | 1,939 |
//!
//! ```text
//! cargo test -p stm-store --test timer_sweep -- --ignored --nocapture
//! ```
//!
//! # The index
//!
//! Every timer item we write carries [`TIMER_SHARD_ATTRIBUTE`] (`due_shard`, S), written
//! in the same `Put` of the same commit transaction (no extra call). The `timers` table has
//! a global secondary index [`TIMER_DUE_INDEX`] (`due_index`): partition key `due_shard`
//! (S), sort key `fire_at` (N), projection `KEYS_ONLY`. `KEYS_ONLY` always includes the
//! table's keys, so an index entry is `execution_id, path, due_shard, fire_at`: everything
//! the sweeper needs, no read of the table. The index is **sparse**: items without
//! `due_shard` (harel's) are not in it.
//!
//! A sweep reads the shards with `KeyConditionExpression: due_shard = :b AND fire_at <=
//! :now`. A `Query` reads only the entries its key condition selects, so the items read
//! are the due timers and nothing else (`ScannedCount` = `Count`).
//!
//! It reads them a page at a time ([`DueCursor`], `due_page`): the first page queries
//! every shard at once for at most [`SHARD_PAGE`] entries each, and the page given is the
//! earliest entries across shards (a merge on `fire_at`, then execution and path); a
//! shard is queried again, from its `LastEvaluatedKey`, only once its entries are all
//! given. So a sweep holds at most 64 × [`SHARD_PAGE`] entries whatever is due (10^6
//! timers due at once were ~150 MB in a 128 MB function when a sweep read them all
//! first), fires in due order across shards, and a sweep cut by its deadline has fired
//! the most overdue. A full scan is read the same way, a 1 MB page at a time; one cut
//! short is taken up where it stopped by the instance's next sweep.
//!
//! ## Why hash shards (and not one bucket, or time buckets)
//!
//! - **One constant bucket** (`due`) makes the whole index one partition key value. Every
//!   timer write (an arm, a re-arm moving `fire_at`, a cancel, the sweeper's delete) is an
//!   index write on that one value, capped at a partition's 1,000 WCU/s. DynamoDB's
//!   split-for-heat cannot spread it either: new timers are written at the high end of the
//!   sort key (`now + delay`, ever increasing), the pattern a split by sort key does not
//!   help. And a throttled index throttles the **table** write (the commit transaction):
//!   the hot index partition would cap the whole system's commits that touch timers.
//! - **Time buckets** (`due#2024-06-01T12`) let a sweep read only past buckets, but an
//!   overdue timer in an old bucket is only found if the sweeper remembers which old buckets
//!   are non-empty (state to keep and repair), and all new 30-day timers still land in one
//!   bucket (the same hot partition).
//! - **Hash shards** `due#0 .. due#63`, chosen by a stable hash of `(execution_id, path)`
//!   ([`timer_shard`]): writes spread evenly over 64 partition key values, and each shard's
//!   sort key answers "due by now" directly, however overdue. No state, no bookkeeping.
//!
//! ## The quota math ([`TIMER_SHARDS`] = 64)
//!
//! - **Writes.** A GSI partition serves 1,000 WCU/s (as a table's does). An index entry is
//!   ~100–200 bytes: 1 write unit. Arming or cancelling a timer is one index write, a
//!   re-arm that moves `fire_at` two (delete + put, the sort key changes). 64 shards put
//!   the ceiling at ~64,000 index writes/s: 100,000 events/s of which 10% arm a timer (and
//!   its exit cancels it) is ~20,000 writes/s, ~31% of each shard's limit (the scale
//!   simulator, `scripts/scale.sh`, measured 134% with 16 shards). Each timer write costs
//!   one extra WRU in the index (on-demand, ~$0.625 per million).
//! - **Reads.** A sweep is 64 eventually consistent `Query` calls; each bills 0.5 RRU per
//!   4 KB read, at least 0.5: ~32 RRU per sweep while fewer than ~20 timers per shard are
//!   due (~46,000 RRU a day at one sweep a minute, about a cent), and 0.5 RRU per ~20–40
//!   more due timers beyond that. A partition's 3,000 RCU/s lets one shard's query read
//!   ~24 MB/s, so a backlog (a stalled sweeper) drains fast.
//! - **Calls.** 64 requests per sweep, sent together: the latency of about one request.
//!   More shards raise the write ceiling and the per-sweep floor (calls, 0.5 RRU each);
//!   fewer lower both.
//!
//! Changing [`TIMER_SHARDS`] is safe: the full scan below finds due timers in any shard
//! (or none), so timers written under another shard count still fire during a rollout.
//!
//! ## Consistency
//!
//! A GSI is eventually consistent (every GSI read is: AWS, "DynamoDB read consistency",
//! <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html>;
//! typically well under a second behind): a timer armed an instant before a sweep, already
//! due, fires on the next sweep. A timer cancelled or re-armed an instant before (its state
//! left, or left and re-entered) may still be listed with its old `fire_at`. The sweeper
//! therefore confirms every listed timer with a consistent `GetItem`
//! ([`ExecutionStore::armed_timer`](crate::ExecutionStore::armed_timer)) before it publishes
//! the `Timeout`, and skips one no longer armed with the listed `fire_at`; its guarded
//! `delete_timer` (`fire_at = :f`) leaves a new arm alone all the same. (The strict test
//! layer serves lagged index reads to prove it: `tests/stale_timers.rs` of the runtime.)
//!
//! # Held timers (suspended executions)
//!
//! `suspend` rewrites each of the execution's timers without `due_shard` and with
//! [`TIMER_HELD_ATTRIBUTE`] (`held`, BOOL `true`), in its status commit
//! ([`crate::TimerOp::Hold`]): the entry leaves the index, and the full scan's filter
//! (`attribute_not_exists(held)`) passes over it. Leaving SUSPENDED (`resume`, a forceful
//! cancel) puts them back with their shard in that commit. Without it a suspended
//! execution's overdue timer stayed first in its shard: every sweep read it, read the
//! execution, kept it, and 10^5 of them took every sweep's time. What the execution's
//! timers are is a consistent `Query` of its partition of `timers` (the operator's
//! `dynamodb:Query` on the table). harel knows nothing of `held`: its sweeper's scan still
//! lists a held timer, as it listed every timer of a suspended execution before; a held
//! timer returns to our index only by our `resume` (or forceful cancel).
//!
//! # The full-scan fallback (harel's timers)
//!
//! A timer written by harel 0.9.0 (or re-armed by it: harel's `Put` replaces the item and
//! drops `due_shard`) is not in the index. So `due_timers` still runs harel's filtered
//! full scan, **rarely**: when [`super::CreateOptions::timer_full_scan_interval`] (default
//! 10 minutes) has elapsed since the last full scan by **any** instance. The schedule is
//! shared through one item of the `counters` table (`id = "timers_full_scan"`, `at` N,
//! epoch seconds): a sweep that finds the interval elapsed claims it with a conditional
//! `UpdateItem` (`SET at = :now` if `at` is absent or older than the interval) and scans
//! only if the claim wins. A cold start of the sweeper Lambda therefore does not rescan
//! (the claim fails), concurrent sweepers do not scan together, and the claim is one
//! write per interval per instance (the local clock skips the attempt in between). The
//! full scan returns every due timer (ours too), so that sweep skips the index. If the
//! claim write itself fails (say the role lacks `dynamodb:UpdateItem` on `counters`), the
//! instance scans on its own schedule: never less often than the interval.
//!
//! With the default, a harel-written timer fires at most ~10 minutes late (plus the sweep
//! period), and 1,000,000 timers cost a full scan every 10 minutes instead of every minute
//! (~2.7 M RRU a day, a tenth of harel's read bill). Set the interval to `None` when no harel process writes timers to these
//! tables (the sweep is then index-only), or to zero for harel's behaviour (a full scan
//! every sweep).
//!
//! When the table has no index (created by harel, or by an older template), the index is
//! still backfilling, or the role may not query it, every sweep is a full scan (logged);
//! the index is tried again once per interval.
//!
//! # Permissions
//!
//! The sweeper needs `dynamodb:Query` on `arn:...:table/{prefix}_timers/index/due_index`
//! and `dynamodb:UpdateItem` on the `counters` table (the claim), besides harel's
//! `Scan`/`DeleteItem` on `timers`.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use aws_sdk_dynamodb::Client;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use sha2::{Digest, Sha256};

use super::item::{get_f64, missing, n_f64, req_s, s, Item};
use super::schema::{TIMER_DUE_INDEX, TIMER_HELD_ATTRIBUTE, TIMER_SHARDS, TIMER_SHARD_ATTRIBUTE};
use super::{sdk_error, DynamoDbStore, RetryPolicy};
use crate::due::{due_order, CursorState};
use crate::{AttributeType, DueCursor, DueTimer, StoreError};

/// The default [`super::CreateOptions::timer_full_scan_interval`].
pub const DEFAULT_TIMER_FULL_SCAN_INTERVAL: Duration = Duration::from_secs(600);

/// The `counters` item that schedules the full scan across instances.
const FULL_SCAN_CLAIM_ID: &str = "timers_full_scan";

/// The shard of timer `(execution_id, path)`: `due#k`, `k` = the first 8 bytes of
/// SHA-256(`execution_id` NUL `path`), big-endian, mod [`TIMER_SHARDS`]. Stable across
/// processes and versions (Python: `int.from_bytes(hashlib.sha256(f"{e}\0{p}".encode())
/// .digest()[:8], "big") % 16`); readers query every shard, so any writer may pick any.
pub fn timer_shard(execution_id: &str, path: &str) -> String {
    let mut h = Sha256::new();
    h.update(execution_id.as_bytes());
    h.update([0u8]);
    h.update(path.as_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    format!("due#{}", u64::from_be_bytes(first) % u64::from(TIMER_SHARDS))
}

/// What one sweep read (summed over its requests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepStats {
    /// The sweep was the full filtered scan (harel's), not the index.
    pub full_scan: bool,
    /// The index was missing (or not yet readable), so the sweep fell back to the scan.
    pub index_missing: bool,
    /// `Query`/`Scan` requests sent (claim writes not included).
    pub requests: u32,
    /// Items DynamoDB read to answer (`ScannedCount`): what the sweep is billed for.
    pub items_read: u64,
    /// Items returned (`Count`).
    pub items_returned: u64,
}

/// The full-scan schedule of one store instance.
#[derive(Debug, Default)]
pub(super) struct FullScanState {
    /// Wall-clock epoch seconds before which no claim is attempted.
    next_claim: f64,
    /// The index was found missing; it is not tried again before this time.
    index_missing_until: Option<f64>,
    /// A full scan a sweep's deadline cut short: where its last page read started (`Some
    /// (None)`: the table's start). The next sweep goes on from there.
    scan_left_at: Option<Option<Item>>,
}

/// The wall clock, in epoch seconds.
pub(super) fn wall_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

enum QueryError {
    IndexMissing(String),
    Other(StoreError),
}

/// Whether a Query error says the index does not exist or cannot be read (yet) (DynamoDB:
/// `ValidationException` "The table does not have the specified index" / "Cannot read from
/// backfilling global secondary index"; `AccessDeniedException` on `.../index/due_index`,
/// a role not yet granted `dynamodb:Query` on it; moto: `ResourceNotFoundException`
/// "Invalid index").
pub(super) fn index_missing<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> bool {
    let SdkError::ServiceError(se) = err else {
        return false;
    };
    let code = se.err().code().unwrap_or_default();
    let msg = se.err().message().unwrap_or_default().to_ascii_lowercase();
    matches!(
        code,
        "ValidationException" | "ResourceNotFoundException" | "AccessDeniedException"
    ) && msg.contains("index")
}

fn timer_of(item: &Item) -> Result<DueTimer, StoreError> {
    let what = "timer item";
    Ok(DueTimer {
        execution_id: req_s(item, "execution_id", what)?.to_string(),
        path: req_s(item, "path", what)?.to_string(),
        fire_at: get_f64(item, "fire_at").ok_or_else(|| missing(what, "fire_at", AttributeType::Number))?,
    })
}

/// One page of one shard's due entries, from `start`: the entries, where the next page
/// starts (`None`: the shard has no more), and what the read cost.
///
/// A transient failure (throttling, a 5xx, a lost answer) is retried with the store's
/// bounded backoff, as a commit is: a read is idempotent, and a sweep needs every shard.
/// Without it one throttled shard failed the whole sweep, so under sustained
/// throttling almost no sweep completed (the fault suite at 20% with one SDK attempt
/// spent hundreds of rounds on sweeps: 97% of them failed).
async fn query_page(
    client: Client,
    table: String,
    shard: String,
    now: f64,
    start: Option<Item>,
    limit: Option<i32>,
    retry: RetryPolicy,
) -> Result<(Vec<DueTimer>, Option<Item>, SweepStats), QueryError> {
    let now_value = n_f64("now", now).map_err(QueryError::Other)?;
    let mut attempt = 1;
    let page = loop {
        let result = client
            .query()
            .table_name(&table)
            .index_name(TIMER_DUE_INDEX)
            .key_condition_expression("#s = :s AND #f <= :now")
            .expression_attribute_names("#s", TIMER_SHARD_ATTRIBUTE)
            .expression_attribute_names("#f", "fire_at")
            .expression_attribute_values(":s", s(&shard))
            .expression_attribute_values(":now", now_value.clone())
            .set_exclusive_start_key(start.clone())
            .set_limit(limit)
            .send()
            .await;
        match result {
            Err(err) if !index_missing(&err) => {
                let err = sdk_error("Query", err);
                if matches!(err, StoreError::Retryable { .. }) && attempt < retry.max_attempts.max(1) {
                    tokio::time::sleep(retry.backoff(attempt)).await;
                    attempt += 1;
                    continue;
                }
                return Err(QueryError::Other(err));
            }
            other => break other,
        }
    };
    let page = match page {
        Ok(page) => page,
        Err(err) => {
            return Err(QueryError::IndexMissing(
                err.as_service_error()
                    .and_then(|e| e.message())
                    .unwrap_or_default()
                    .to_string(),
            ))
        }
    };
    let stats = SweepStats {
        requests: 1,
        items_read: page.scanned_count().max(0) as u64,
        items_returned: page.count().max(0) as u64,
        ..SweepStats::default()
    };
    let timers = page
        .items()
        .iter()
        .map(timer_of)
        .collect::<Result<Vec<_>, _>>()
        .map_err(QueryError::Other)?;
    let next = page.last_evaluated_key().filter(|key| !key.is_empty()).cloned();
    Ok((timers, next, stats))
}

/// One shard's due entries (all pages).
async fn query_shard(
    client: Client,
    table: String,
    shard: String,
    now: f64,
    retry: RetryPolicy,
) -> Result<(Vec<DueTimer>, SweepStats), QueryError> {
    let mut stats = SweepStats::default();
    let mut out = Vec::new();
    let mut start: Option<Item> = None;
    loop {
        let (timers, next, page) = query_page(
            client.clone(),
            table.clone(),
            shard.clone(),
            now,
            start,
            None,
            retry,
        )
        .await?;
        stats.add(page);
        out.extend(timers);
        match next {
            Some(key) => start = Some(key),
            None => return Ok((out, stats)),
        }
    }
}

impl SweepStats {
    fn add(&mut self, page: SweepStats) {
        self.requests += page.requests;
        self.items_read += page.items_read;
        self.items_returned += page.items_returned;
    }
}

/// How many entries one shard's page of a sweep takes at most: 64 shards' pages are then
/// at most 6,400 timers (~1 MB) in memory, whatever is due.
pub const SHARD_PAGE: usize = 100;

/// A sweep's place in what is due ([`crate::DueCursor`] on DynamoDB): a position in each
/// shard of the due index, or in the full scan, with the entries read and not yet given.
#[derive(Debug)]
pub(crate) struct Positions {
    /// The 64 shards, or the full scan alone.
    sources: Vec<Source>,
}

/// One shard (or the full scan): the entries read and not yet given, and where its next
/// page starts.
#[derive(Debug)]
struct Source {
    /// `None`: the full scan of the table.
    shard: Option<String>,
    buffer: VecDeque<DueTimer>,
    start: Option<Item>,
    done: bool,
}

impl Source {
    fn new(shard: Option<String>, start: Option<Item>) -> Self {
        Source {
            shard,
            buffer: VecDeque::new(),
            start,
            done: false,
        }
    }

    /// Whether it must be read before the earliest entry can be told.
    fn needs_page(&self) -> bool {
        self.buffer.is_empty() && !self.done
    }
}

impl Positions {
    fn index() -> Self {
        Positions {
            sources: (0..TIMER_SHARDS)
                .map(|k| Source::new(Some(format!("due#{k}")), None))
                .collect(),
        }
    }

    fn full_scan(from: Option<Item>) -> Self {
        Positions {
            sources: vec![Source::new(None, from)],
        }
    }

    /// Whether it reads the full scan (whose one source has no shard).
    fn is_full_scan(&self) -> bool {
        self.sources.first().is_some_and(|s| s.shard.is_none())
    }

    /// The source whose first entry comes first in due order, if every source that may
    /// hold an earlier one has been read.
    fn earliest(&self) -> Option<usize> {
        if self.sources.iter().any(Source::needs_page) {
            return None;
        }
        (0..self.sources.len())
            .filter(|i| !self.sources[*i].buffer.is_empty())
            .min_by(|a, b| due_order(&self.sources[*a].buffer[0], &self.sources[*b].buffer[0]))
    }
}

impl DynamoDbStore {
    fn full_scan_state(&self) -> std::sync::MutexGuard<'_, FullScanState> {
        self.full_scan.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long the index is left alone after it was found missing.
    fn reprobe_after(&self) -> f64 {
        self.timer_full_scan_interval
            .unwrap_or(DEFAULT_TIMER_FULL_SCAN_INTERVAL)
            .as_secs_f64()
    }

    /// Whether the `timers` table had a readable due index when last looked at (at
    /// [`ensure_tables`](Self::ensure_tables) / [`check_tables`](Self::check_tables), or a
    /// sweep whose index query failed). `false`: every sweep is harel's full scan of
    /// the table, which finds every timer, ours and harel's, just at the cost of reading
    /// all of them (a harel-made `timers` table has no index).
    pub fn has_due_index(&self) -> bool {
        self.full_scan_state().index_missing_until.is_none()
    }

    /// Record whether the `timers` table has a readable due index (from `DescribeTable`).
    pub(super) fn set_due_index_present(&self, present: bool) {
        let until = (!present).then(|| wall_now() + self.reprobe_after());
        self.full_scan_state().index_missing_until = until;
    }

    /// The due timers (`fire_at <= now`, earliest first) and what reading them cost: the
    /// index, or the full scan when it is scheduled or the index is missing. This is
    /// [`ExecutionStore::due_timers`](crate::ExecutionStore::due_timers); see the module docs.
    pub async fn due_timers_with_stats(&self, now: f64) -> Result<(Vec<DueTimer>, SweepStats), StoreError> {
        let missing = {
            let state = self.full_scan_state();
            state.index_missing_until.is_some_and(|until| wall_now() < until)
        };
        if missing {
            let (timers, mut stats) = self.due_timers_full_scan(now).await?;
            stats.index_missing = true;
            return Ok((timers, stats));
        }
        if self.claim_full_scan().await {
            return self.due_timers_full_scan(now).await;
        }
        match self.query_due_index(now).await {
            Ok(found) => Ok(found),
            Err(QueryError::IndexMissing(why)) => {
                tracing::warn!(
                    table = %self.tables.timers,
                    index = TIMER_DUE_INDEX,
                    %why,
                    "the timers table has no readable due index: sweeping with a full scan"
                );
                self.set_due_index_present(false);
                let (timers, mut stats) = self.due_timers_full_scan(now).await?;
                stats.index_missing = true;
                Ok((timers, stats))
            }
            Err(QueryError::Other(err)) => Err(err),
        }
    }

    /// The due timers from the index only (one parallel `Query` per shard): never sees
    /// timers written by harel. For measurements and tests; the sweeper calls
    /// [`due_timers_with_stats`](Self::due_timers_with_stats).
    pub async fn due_timers_indexed(&self, now: f64) -> Result<(Vec<DueTimer>, SweepStats), StoreError> {
        match self.query_due_index(now).await {
            Ok(found) => Ok(found),
            Err(QueryError::IndexMissing(why)) => Err(StoreError::backend(format!(
                "Query on {}.{TIMER_DUE_INDEX}: {why}",
                self.tables.timers
            ))),
            Err(QueryError::Other(err)) => Err(err),
        }
    }

    async fn query_due_index(&self, now: f64) -> Result<(Vec<DueTimer>, SweepStats), QueryError> {
        let mut tasks = tokio::task::JoinSet::new();
        for k in 0..TIMER_SHARDS {
            tasks.spawn(query_shard(
                self.client.clone(),
                self.tables.timers.clone(),
                format!("due#{k}"),
                now,
                self.retry,
            ));
        }
        let mut out = Vec::new();
        let mut stats = SweepStats::default();
        let mut failure = None;
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(Ok((timers, shard))) => {
                    out.extend(timers);
                    stats.add(shard);
                }
                Ok(Err(err)) => {
                    // an index that is missing is the answer that matters most
                    if failure.is_none() || matches!(err, QueryError::IndexMissing(_)) {
                        failure = Some(err);
                    }
                }
                Err(join) => {
                    failure.get_or_insert(QueryError::Other(StoreError::backend(format!(
                        "a due-index query task failed: {join}"
                    ))));
                }
            }
        }
        if let Some(err) = failure {
            return Err(err);
        }
        out.sort_by(|a, b| a.fire_at.total_cmp(&b.fire_at));
        Ok((out, stats))
    }

    /// harel's sweep: a consistent `Scan` of the whole table filtered on `fire_at <= now`
    /// (all pages), which also finds timers outside the index (harel's).
    pub async fn due_timers_full_scan(&self, now: f64) -> Result<(Vec<DueTimer>, SweepStats), StoreError> {
        let mut stats = SweepStats {
            full_scan: true,
            ..SweepStats::default()
        };
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let (timers, next, page) = self.scan_page(now, start).await?;
            stats.add(page);
            out.extend(timers);
            match next {
                Some(key) => start = Some(key),
                None => break,
            }
        }
        out.sort_by(|a, b| a.fire_at.total_cmp(&b.fire_at));
        Ok((out, stats))
    }

    /// One page of the full scan from `start` (up to 1 MB of the table read): its due
    /// timers in due order, and where the next page starts.
    async fn scan_page(
        &self,
        now: f64,
        start: Option<Item>,
    ) -> Result<(Vec<DueTimer>, Option<Item>, SweepStats), StoreError> {
        let page = self
            .client
            .scan()
            .table_name(&self.tables.timers)
            .consistent_read(true)
            // a held timer (its execution suspended) waits for its resume
            .filter_expression("#f <= :now AND attribute_not_exists(#h)")
            .projection_expression("#e, #p, #f")
            .expression_attribute_names("#e", "execution_id")
            .expression_attribute_names("#p", "path")
            .expression_attribute_names("#f", "fire_at")
            .expression_attribute_names("#h", TIMER_HELD_ATTRIBUTE)
            .expression_attribute_values(":now", n_f64("now", now)?)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| sdk_error("Scan", e))?;
        let stats = SweepStats {
            full_scan: true,
            requests: 1,
            items_read: page.scanned_count().max(0) as u64,
            items_returned: page.count().max(0) as u64,
            ..SweepStats::default()
        };
        let mut timers = page.items().iter().map(timer_of).collect::<Result<Vec<_>, _>>()?;
        timers.sort_by(due_order);
        let next = page.last_evaluated_key().filter(|key| !key.is_empty()).cloned();
        Ok((timers, next, stats))
    }

    /// [`ExecutionStore::due_page`](crate::ExecutionStore::due_page): the sweep's first
    /// page decides what it reads (the index, or the full scan when scheduled, cut short
    /// before, or the index is missing), then each page takes the earliest entries of the
    /// 64 shards, reading a shard's next page only once its entries are all given.
    pub(super) async fn due_page_at(
        &self,
        now: f64,
        cursor: &mut DueCursor,
        limit: usize,
    ) -> Result<Vec<DueTimer>, StoreError> {
        if !matches!(cursor.state, CursorState::DynamoDb(_)) {
            cursor.state = CursorState::DynamoDb(Box::new(self.positions_for_sweep().await));
        }
        let CursorState::DynamoDb(positions) = &mut cursor.state else {
            unreachable!("set just above");
        };
        let limit = limit.max(1);
        let mut page = Vec::new();
        while page.len() < limit {
            let wanted: Vec<usize> = (0..positions.sources.len())
                .filter(|i| positions.sources[*i].needs_page())
                .collect();
            if !wanted.is_empty() {
                match self.read_pages(now, positions, &wanted, limit).await {
                    Ok(()) => {}
                    Err(QueryError::IndexMissing(why)) => {
                        tracing::warn!(
                            table = %self.tables.timers, index = TIMER_DUE_INDEX, %why,
                            "the timers table has no readable due index: sweeping with a full scan"
                        );
                        self.set_due_index_present(false);
                        **positions = Positions::full_scan(None);
                    }
                    Err(QueryError::Other(err)) => return Err(err),
                }
                continue;
            }
            let Some(first) = positions.earliest() else {
                break;
            };
            // take from this source while it stays the earliest
            while page.len() < limit {
                let Some(timer) = positions.sources[first].buffer.pop_front() else {
                    break;
                };
                page.push(timer);
                if positions.earliest() != Some(first) {
                    break;
                }
            }
        }
        Ok(page)
    }

    /// Where a sweep starts: a full scan cut short by an earlier sweep's deadline goes on
    /// where it stopped; else the full scan when the index is missing or the scan is due
    /// (the claim), else the index.
    async fn positions_for_sweep(&self) -> Positions {
        let (missing, left_at) = {
            let state = self.full_scan_state();
            (
                state.index_missing_until.is_some_and(|until| wall_now() < until),
                state.scan_left_at.clone(),
            )
        };
        if let Some(from) = left_at {
            return Positions::full_scan(from);
        }
        if missing {
            return Positions::full_scan(None);
        }
        if self.claim_full_scan().await {
            return Positions::full_scan(None);
        }
        Positions::index()
    }

    /// Read the next page of each of `wanted` (all at once). A full scan records where its
    /// page started, so a sweep cut by its deadline leaves the next one to go on from
    /// there (a page half given is read again: what was fired is deleted by then).
    async fn read_pages(
        &self,
        now: f64,
        positions: &mut Positions,
        wanted: &[usize],
        limit: usize,
    ) -> Result<(), QueryError> {
        if positions.is_full_scan() {
            let source = &mut positions.sources[0];
            self.full_scan_state().scan_left_at = Some(source.start.clone());
            let (timers, next, _) = self
                .scan_page(now, source.start.take())
                .await
                .map_err(QueryError::Other)?;
            source.buffer.extend(timers);
            source.done = next.is_none();
            source.start = next;
            if source.done {
                self.full_scan_state().scan_left_at = None;
            }
            return Ok(());
        }
        let shard_limit = i32::try_from(limit.min(SHARD_PAGE)).unwrap_or(1);
        let mut tasks = tokio::task::JoinSet::new();
        for &i in wanted {
            let source = &mut positions.sources[i];
            let shard = source.shard.clone().unwrap_or_default();
            tasks.spawn({
                let query = query_page(
                    self.client.clone(),
                    self.tables.timers.clone(),
                    shard,
                    now,
                    source.start.take(),
                    Some(shard_limit),
                    self.retry,
                );
                async move { (i, query.await) }
            });
        }
        let mut failure = None;
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((i, Ok((timers, next, _)))) => {
                    let source = &mut positions.sources[i];
                    source.buffer.extend(timers);
                    source.done = next.is_none();
                    source.start = next;
                }
                Ok((_, Err(err))) => {
                    if failure.is_none() || matches!(err, QueryError::IndexMissing(_)) {
                        failure = Some(err);
                    }
                }
                Err(join) => {
                    failure.get_or_insert(QueryError::Other(StoreError::backend(format!(
                        "a due-index query task failed: {join}"
                    ))));
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// Whether this sweep is the scheduled full scan: the interval elapsed (locally, then
    /// across instances through the claim item). A claim write that fails for another
    /// reason than the condition (no `dynamodb:UpdateItem` on `counters`, throttling) is
    /// logged and the scan runs on the local schedule alone: harel's timers still fire.
    async fn claim_full_scan(&self) -> bool {
        let Some(interval) = self.timer_full_scan_interval else {
            return false;
        };
        if interval.is_zero() {
            return true;
        }
        let interval = interval.as_secs_f64();
        let now = wall_now();
        if now < self.full_scan_state().next_claim {
            return false;
        }
        let (Ok(at), Ok(cutoff)) = (n_f64("now", now), n_f64("cutoff", now - interval)) else {
            return false;
        };
        let result = self
            .client
            .update_item()
            .table_name(&self.tables.counters)
            .key("id", s(FULL_SCAN_CLAIM_ID))
            .update_expression("SET #at = :at")
            .condition_expression("attribute_not_exists(#at) OR #at <= :cutoff")
            .expression_attribute_names("#at", "at")
            .expression_attribute_values(":at", at)
            .expression_attribute_values(":cutoff", cutoff)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let mut state = self.full_scan_state();
        match result {
            Ok(_) => {
                state.next_claim = now + interval;
                true
            }
            Err(err) => {
                let last = match &err {
                    SdkError::ServiceError(se) => match se.err() {
                        aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(e) => {
                            Some(e.item().and_then(|i| get_f64(i, "at")).unwrap_or(now))
                        }
                        _ => None,
                    },
                    _ => None,
                };
                match last {
                    // another instance scanned at `last`: the next one is due an interval later
                    Some(last) => {
                        state.next_claim = last.min(now) + interval;
                        false
                    }
                    None => {
                        tracing::warn!(
                            error = %sdk_error("UpdateItem", err),
                            "claiming the timer full scan failed: scanning on this instance's schedule"
                        );
                        state.next_claim = now + interval;
                        true
                    }
                }
            }
        }
    }
}
