//! The layer itself: [`StrictLayer::start`] binds a port per principal and runs the
//! connections on a thread of their own; the rest is its API for tests (endpoints,
//! refusal counts, the meter, lagging indexes, moved queue clocks, slow requests).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;

use super::dynamodb::Metering;
use super::entry_faults::{EntryFaultCounts, EntryFaults};
use super::index_lag::{IndexLag, IndexView};
use super::policies::Policies;
use super::principal::Principal;
use super::retention::QueueClocks;
use super::serve::serve;
use super::shared::Shared;
use crate::meter::PartitionMeter;

/// The layer; see the module docs ([`crate::strict`]). It runs on its own thread and
/// runtime, for the life of the process (the test process's moto server is behind it).
pub struct StrictLayer {
    endpoints: BTreeMap<Principal, String>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for StrictLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StrictLayer")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

impl StrictLayer {
    /// Start the layer in front of `upstream` (`http://host:port`).
    ///
    /// # Panics
    /// When no loopback port is free, or `template.yaml` cannot be read (every role
    /// check would be meaningless).
    pub fn start(upstream: &str) -> StrictLayer {
        let upstream = upstream
            .strip_prefix("http://")
            .unwrap_or(upstream)
            .trim_end_matches('/')
            .to_string();
        let policies = Policies::load();
        if let Err(why) = &policies {
            panic!("stm-testkit: the strict layer cannot read the roles: {why}");
        }
        let shared = Arc::new(Shared {
            upstream,
            policies,
            schemas: Mutex::default(),
            queues: Mutex::default(),
            refusals: Mutex::default(),
            metering: Metering::new(),
            index_lag: IndexLag::default(),
            queue_clocks: QueueClocks::default(),
            expired: Mutex::default(),
            slow: Mutex::default(),
            entry_faults: EntryFaults::default(),
            partial_batch_gets: std::sync::atomic::AtomicUsize::new(0),
        });
        let mut listeners = Vec::new();
        let mut endpoints = BTreeMap::new();
        for principal in Principal::ALL {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("strict layer: bind loopback");
            listener.set_nonblocking(true).expect("strict layer: nonblocking");
            let port = listener.local_addr().expect("strict layer: local addr").port();
            endpoints.insert(principal, format!("http://127.0.0.1:{port}"));
            listeners.push((principal, listener));
        }
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("strict-aws-layer".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("strict layer: runtime");
                rt.block_on(async move {
                    let mut tasks = Vec::new();
                    for (principal, listener) in listeners {
                        let shared = thread_shared.clone();
                        tasks.push(tokio::spawn(async move {
                            let listener = TcpListener::from_std(listener).expect("strict layer: listener");
                            loop {
                                let Ok((stream, _)) = listener.accept().await else {
                                    continue;
                                };
                                let shared = shared.clone();
                                tokio::spawn(async move {
                                    let _ = serve(stream, principal, &shared).await;
                                });
                            }
                        }));
                    }
                    for t in tasks {
                        let _ = t.await;
                    }
                });
            })
            .expect("strict layer: thread");
        StrictLayer { endpoints, shared }
    }

    /// The endpoint a client acting as `principal` uses.
    pub fn endpoint(&self, principal: Principal) -> &str {
        self.endpoints
            .get(&principal)
            .map(String::as_str)
            .unwrap_or_default()
    }

    /// How many `BatchGetItem` answers moto gave in part, the keys past 16 MB of items in
    /// `UnprocessedKeys` (as DynamoDB does; the fault mode's partial answers not counted).
    pub fn partial_batch_gets(&self) -> usize {
        self.shared
            .partial_batch_gets
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Refusals so far, by rule (`iam`, `sqs.group_id.format`, ...).
    pub fn refusals(&self) -> BTreeMap<String, usize> {
        self.shared
            .refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The partition meter: the read and write units of every DynamoDB request moto
    /// answered with 200, per table and key, on the clock of
    /// [`meter_clock`](Self::meter_clock) ([`dynamodb::Metering::observe`] says what is
    /// charged). A clone shares the counts; the tests of one process share the layer, so a
    /// test reads its own tables ([`PartitionMeter::report_where`]).
    ///
    /// [`dynamodb::Metering::observe`]: super::dynamodb::Metering::observe
    pub fn meter(&self) -> PartitionMeter {
        self.shared.metering.meter()
    }

    /// The meter's clock now: wall-clock seconds since the layer started.
    pub fn meter_clock(&self) -> f64 {
        self.shared.metering.now()
    }

    /// From now on, a `Query` on a global secondary index of a table whose name starts
    /// with `table_prefix` sees the index as it was `lag` ago, as on AWS, where every GSI
    /// read is eventually consistent (see [`index_lag`]). Other tables are not affected:
    /// a test lags its own prefix. The lag is wall-clock time.
    ///
    /// [`index_lag`]: super::index_lag
    pub fn lag_indexes(&self, table_prefix: &str, lag: std::time::Duration) {
        self.shared
            .index_lag
            .set(table_prefix, IndexView::Behind(lag.as_secs_f64()));
    }

    /// From now on, the GSIs of the tables named with `table_prefix` show the tables as they
    /// are at this instant, whatever is written later, until [`live_indexes`](Self::live_indexes)
    /// (or [`lag_indexes`](Self::lag_indexes)): propagation at its slowest, held still so a
    /// test can act while the index is stale.
    pub fn hold_indexes(&self, table_prefix: &str) {
        let now = self.shared.metering.now();
        self.shared.index_lag.set(table_prefix, IndexView::HeldAt(now));
    }

    /// Move on by `by` the clock of every queue whose name starts with `queue_prefix`, for
    /// SQS's retention: from now on a receive on such a queue deletes, and does not hand
    /// out, a message whose age on that clock has reached the queue's
    /// `MessageRetentionPeriod` (see [`retention`]). Moves add up; other queues keep the
    /// wall clock (moto's own retention).
    ///
    /// [`retention`]: super::retention
    pub fn advance_queues(&self, queue_prefix: &str, by: std::time::Duration) {
        self.shared.queue_clocks.advance(queue_prefix, by.as_secs_f64());
    }

    /// From now on, every request naming a table or queue whose name starts with `prefix`
    /// is held `by` before it goes to moto: a slow AWS (a throttled partition, a far
    /// Region), for tests of work under a deadline. [`normal_speed`](Self::normal_speed)
    /// ends it.
    pub fn slow_requests(&self, prefix: &str, by: std::time::Duration) {
        self.shared
            .slow
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(prefix.to_string(), by);
    }

    /// Requests naming `prefix`'s tables and queues are no longer held.
    pub fn normal_speed(&self, prefix: &str) {
        self.shared
            .slow
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(prefix);
    }

    /// Messages deleted by SQS's retention on moved queues so far, by queue name.
    pub fn expired_messages(&self) -> BTreeMap<String, usize> {
        self.shared
            .expired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The GSIs of the tables named with `table_prefix` answer from the live table again
    /// (moto's own behaviour).
    pub fn live_indexes(&self, table_prefix: &str) {
        self.shared.index_lag.clear(table_prefix);
    }

    /// The fault mode per entry (see [`entry_faults`]): from now on, each batch request on
    /// a table, queue or bus whose name starts with `prefix` (`SendMessageBatch`,
    /// `PutEvents`, `BatchGetItem`, `BatchWriteItem`, `TransactWriteItems`) is, with
    /// probability `percent`, answered as AWS answers a batch it did only in part: failed
    /// entries, unprocessed keys or items, a transaction cancelled for throttling. Drawn
    /// from `seed`; `percent` 0 stops it (the counts stay).
    ///
    /// [`entry_faults`]: super::entry_faults
    pub fn fault_entries(&self, prefix: &str, percent: f64, seed: u64) {
        self.shared.entry_faults.set(prefix, percent, seed);
    }

    /// Under `prefix`, the requests of `operation` (e.g. `BatchWriteItem`) are answered in
    /// part with probability `percent` instead of [`fault_entries`](Self::fault_entries)'
    /// (which must come first; calling it again resets this): for an operation whose
    /// requests are rarely large enough to be answered in part.
    pub fn fault_entries_of(&self, prefix: &str, operation: &str, percent: f64) {
        self.shared.entry_faults.set_operation(prefix, operation, percent);
    }

    /// What the fault mode per entry did under `prefix`: entries failed and let through
    /// later, by kind ([`super::entry_faults::KINDS`]).
    pub fn entry_faults(&self, prefix: &str) -> EntryFaultCounts {
        self.shared.entry_faults.counts(prefix)
    }
}
