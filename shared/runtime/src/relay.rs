//! The relay: committed outbox events and spawn intents -> the queue -> acked.
//!
//! Used twice: by the worker right after a commit (the *inline flush*, only that commit's
//! entries, so an emitted event reaches its target in well under a second) and by the
//! scheduled relay function (every pending entry, the safety net for a crash or a failed
//! publish between commit and flush).
//!
//! Order: by `seq`, spawn intents before events within a read (see
//! [`relay_pending_until`]). A message whose group already had a
//! failure in this run is held back (it stays pending) so that FIFO order within a group
//! never breaks: e.g. a broadcast event must not reach a region whose spawn intent failed
//! to publish. Order is kept per message group only, which is all FIFO keeps: a read's
//! messages go out in *lanes*, each group in one lane (by a hash of its id), a lane's
//! batches one after another and the lanes side by side ([`RELAY_LANES`]); the next read
//! starts once every lane of this one is done.
//!
//! A status event's row (no target, `status::is_notice`) goes to the status bus
//! instead, when the caller has one and the bus's level publishes its status (else the row
//! is deleted unsent). Without a bus, the inline flush and the operator leave it pending,
//! for the scheduled relay; the scheduled relay without a bus (a deployment that publishes
//! no status events) deletes it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use stm_store::{ExecutionStore, OutboxEntry, PendingSeq, SpawnEntry, StoreError};

use crate::queue::{message_problem, BatchSize, OutgoingMessage, Queue, MAX_BATCH};
use crate::status::{is_notice, notice_status, BusEvent, StatusBus};
use crate::telemetry::{self, TraceContext};

/// Why a scheduled relay run stopped: the store could not list or read the pending rows.
/// Whatever it had not delivered stays pending for the next run. A publish or an ack that
/// fails is no error: it is counted in the [`RelaySummary`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RelayError {
    /// The Python exception harel raises for the same failure (the function's `errorType`).
    pub fn python_type(&self) -> &'static str {
        match self {
            RelayError::Store(e) => e.python_type(),
        }
    }
}

/// What one delivery did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RelaySummary {
    /// Entries published and acked.
    pub forwarded: usize,
    /// Entries the queue refused, or held back behind a refused one of the same group;
    /// they stay pending for the next run.
    pub failed: usize,
    /// Entries published whose ack failed: they stay pending, and a re-publish is dropped
    /// by SQS's deduplication (within 5 minutes) or by the worker's dedupe mark.
    pub unacked: usize,
    /// Pending entries left after this run (failed + unacked + entries without a target
    /// that could not be acked + status events left for a relay with a status bus).
    pub remaining: usize,
}

impl RelaySummary {
    /// Count `other`'s entries into this summary (the worker totals its inline flushes).
    pub(crate) fn add(&mut self, other: &RelaySummary) {
        self.forwarded += other.forwarded;
        self.failed += other.failed;
        self.unacked += other.unacked;
        self.remaining += other.remaining;
    }
}

/// How many pending rows one pass of the scheduled relay takes, lowest seqs first: the
/// memory a pass holds is these seqs (16 bytes each) and one read of rows at a time, not
/// the backlog.
pub const RELAY_PASS_ROWS: usize = 100_000;

/// The rows one read of a pass takes by key at most (`BatchGetItem`s of 100 keys side by
/// side): enough for every lane of its delivery to fill its batches.
pub const RELAY_READ_ROWS: usize = 2_000;

/// How many lanes one delivery publishes in at most. A message group belongs to one lane,
/// so its order holds; the lanes' `SendMessageBatch`es and acks run side by side, so a
/// backlog of many groups goes out about this many times faster than one batch after
/// another (a relay run of 10^6 rows is bound by its publishes and acks, 18 ms each per 10
/// rows).
pub const RELAY_LANES: usize = 16;

/// The messages a lane is given on average at least: a delivery of fewer takes fewer lanes
/// (a commit's few rows go out in one lane: one batch, no more requests than without
/// lanes), and a lane's last batch, part-full, costs a small share of its requests.
pub const LANE_MESSAGES: usize = 100;

/// The bytes one read of a pass takes at most, by the rows' recorded sizes (a read takes
/// one row at least): what the relay holds of the rows at once is bounded by this, not by
/// their count (100 packed spawn rows are 35 MB, in a function of 128 MB), and a read stays
/// far below the 16 MB DynamoDB answers to one `BatchGetItem`.
pub const RELAY_READ_BYTES: usize = 4 * 1024 * 1024;

/// How much of the backlog the scheduled relay holds at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayBounds {
    /// The seqs one pass takes ([`RELAY_PASS_ROWS`]).
    pub pass_rows: usize,
    /// The rows one read takes by key at most ([`RELAY_READ_ROWS`]).
    pub read_rows: usize,
    /// The bytes one read takes at most ([`RELAY_READ_BYTES`]).
    pub read_bytes: usize,
    /// The messages each lane of a read's delivery is given on average at least
    /// ([`LANE_MESSAGES`]; at most [`RELAY_LANES`] lanes).
    pub lane_messages: usize,
}

impl RelayBounds {
    /// The scheduled relay's bounds.
    pub const DEFAULT: RelayBounds = RelayBounds {
        pass_rows: RELAY_PASS_ROWS,
        read_rows: RELAY_READ_ROWS,
        read_bytes: RELAY_READ_BYTES,
        lane_messages: LANE_MESSAGES,
    };

    /// `seqs` (a pass's, lowest first) cut into reads: each as many rows as fit in
    /// `read_rows` and `read_bytes`, and one row at least.
    fn reads<'s>(&self, seqs: &'s [PendingSeq]) -> impl Iterator<Item = &'s [PendingSeq]> {
        let (rows, bytes) = (self.read_rows.max(1), self.read_bytes);
        let mut rest = seqs;
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let mut taken = 0usize;
            let mut end = 0;
            while end < rest.len() && end < rows {
                let next = rest[end].bytes as usize;
                if end > 0 && taken + next > bytes {
                    break;
                }
                taken += next;
                end += 1;
            }
            let (read, after) = rest.split_at(end);
            rest = after;
            Some(read)
        })
    }
}

impl Default for RelayBounds {
    fn default() -> Self {
        RelayBounds::DEFAULT
    }
}

/// How recent a row the scheduled relay leaves for its next run: a scan is not a snapshot,
/// and a row committed after the scan began could otherwise be forwarded before an
/// earlier row of its execution that the scan had already passed (see
/// [`ExecutionStore::oldest_pending_seqs`]). Its next run is a minute later.
pub const RELAY_SETTLE_SECONDS: f64 = 5.0;

/// Publish `spawns` then `outbox` (each already in seq order) and ack what was delivered;
/// the status events among `outbox` go to `bus` (without one they stay pending, for the
/// scheduled relay).
pub async fn deliver(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    bus: Option<&dyn StatusBus>,
    spawns: &[SpawnEntry],
    outbox: &[OutboxEntry],
) -> RelaySummary {
    let mut delivery = Delivery::new(bus, WithoutBus::Leave, LANE_MESSAGES);
    delivery.deliver(store, queue, spawns, outbox).await;
    delivery.summary
}

/// Publish the rows of `execution_id`'s last commit that wrote any, those still pending
/// (read by key: the execution item records their block; every earlier commit's rows were
/// published before its group moved on), then ack them as [`deliver`] does. The worker
/// runs it before a redelivered event's group moves on, and the control plane before a
/// command that must not overtake them: both read and publish the block here, so they
/// cannot differ in what they publish or in its order.
pub async fn deliver_last_block(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    bus: Option<&dyn StatusBus>,
    execution_id: &str,
) -> Result<RelaySummary, StoreError> {
    let pending = store.pending_rows_of(execution_id).await?;
    if pending.is_empty() {
        return Ok(RelaySummary::default());
    }
    Ok(deliver(store, queue, bus, &pending.spawns, &pending.outbox).await)
}

/// A `relay` span for each of `rows` that carries its commit's trace context, under that
/// commit's span. The row's message keeps naming the commit as its sender: the relay's
/// span sits beside the record it causes, not between, so that a trace step's parent is
/// always another step's span (`stm trace --spans` draws the tree from the steps alone).
fn relay_spans(rows: &stm_store::PendingRows) -> Vec<tracing::Span> {
    let spawns = rows
        .spawns
        .iter()
        .map(|row| (&row.trace_context, row.seq, row.child_id.as_str()));
    let outbox = rows.outbox.iter().map(|row| {
        let target = row.target_id.as_deref().unwrap_or("-");
        (&row.trace_context, row.seq, target)
    });
    spawns
        .chain(outbox)
        .filter_map(|(trace, seq, target)| {
            let committed = trace.as_deref().and_then(TraceContext::from_traceparent)?;
            let ctx = committed.child();
            Some(tracing::info_span!(
                "relay",
                seq,
                target_id = target,
                trace_id = %telemetry::trace_id_field(&ctx),
                span_id = %telemetry::span_id_field(&ctx),
                parent_span_id = %telemetry::span_id_field(&committed),
            ))
        })
        .collect()
}

/// Deliveries that keep each message group's order across them: once an entry of a group
/// fails, the group's later entries wait (they stay pending) for the next run.
struct Delivery<'b> {
    blocked: HashSet<String>,
    summary: RelaySummary,
    /// Rows acked (deleted) so far: forwarded ones, and those acked unsent (an emit
    /// without a target, a status event the bus's level leaves out). A pass that acked
    /// none found only rows that stay.
    acked_rows: usize,
    bus: Option<&'b dyn StatusBus>,
    without_bus: WithoutBus,
    /// Each lane's messages on average at least ([`RelayBounds::lane_messages`]).
    lane_messages: usize,
}

/// What a delivery without a status bus does with a status event's row.
#[derive(Clone, Copy)]
enum WithoutBus {
    /// Leave it pending (an inline flush, the operator: the scheduled relay decides).
    Leave,
    /// Delete it unsent (the scheduled relay of a deployment without status events).
    Drop,
}

/// What a published entry acks.
enum Ackable {
    Spawn(i64),
    Outbox(i64),
}

impl<'b> Delivery<'b> {
    fn new(bus: Option<&'b dyn StatusBus>, without_bus: WithoutBus, lane_messages: usize) -> Self {
        Delivery {
            blocked: HashSet::new(),
            summary: RelaySummary::default(),
            acked_rows: 0,
            bus,
            without_bus,
            lane_messages: lane_messages.max(1),
        }
    }

    async fn deliver(
        &mut self,
        store: &dyn ExecutionStore,
        queue: &dyn Queue,
        spawns: &[SpawnEntry],
        outbox: &[OutboxEntry],
    ) {
        let mut pending: Vec<(OutgoingMessage, Ackable)> = Vec::with_capacity(spawns.len() + outbox.len());
        // a packed spawn row holds several intents under one seq, maybe in several lanes:
        // it is acked once all of them are published, never before (its row is what keeps
        // the rest pending)
        let mut unpublished: HashMap<i64, usize> = HashMap::new();
        for spawn in spawns {
            *unpublished.entry(spawn.seq).or_default() += 1;
            pending.push((OutgoingMessage::spawn(spawn), Ackable::Spawn(spawn.seq)));
        }
        let unpublished = Mutex::new(unpublished);
        let mut no_target: Vec<Ackable> = Vec::new();
        let mut notices: Vec<&OutboxEntry> = Vec::new();
        let mut reports = Vec::new();
        for entry in outbox {
            if is_notice(entry) {
                notices.push(entry);
                continue;
            }
            if let Some(report) = crate::join::report_of(entry) {
                reports.push((entry, report));
                continue;
            }
            match OutgoingMessage::outbox(entry) {
                Some(message) => pending.push((message, Ackable::Outbox(entry.seq))),
                // an emit without a target goes nowhere (harel acks it too)
                None => no_target.push(Ackable::Outbox(entry.seq)),
            }
        }
        self.ack(store, &no_target, 0).await;
        // each group in one lane, in its order; the lanes side by side
        let lanes = pending.len().div_ceil(self.lane_messages).clamp(1, RELAY_LANES);
        let mut split: Vec<Vec<(OutgoingMessage, Ackable)>> = (0..lanes).map(|_| Vec::new()).collect();
        for entry in pending {
            split[lane_of(&entry.0.group_id, lanes)].push(entry);
        }
        let delivery = new_strands();
        let (blocked, unpublished) = (&self.blocked, &unpublished);
        let published = futures_util::future::join_all(
            split
                .into_iter()
                .enumerate()
                .filter(|(_, messages)| !messages.is_empty())
                .map(|(index, messages)| {
                    in_strand(
                        delivery,
                        index,
                        lanes,
                        publish_lane(store, queue, blocked, unpublished, messages),
                    )
                }),
        )
        .await;
        for lane in published {
            self.summary.add(&lane.summary);
            self.acked_rows += lane.acked_rows;
            self.blocked.extend(lane.blocked);
        }
        self.announce(store, &notices).await;
        // after the lanes: a report's deferred events and tally go to its parent's group,
        // behind whatever this delivery sent it
        self.report(store, queue, reports).await;
    }

    /// Record the counted joins' reports (`crate::join`) and ack their rows; a report that
    /// failed stays pending (counted in `failed` and `remaining`).
    async fn report(
        &mut self,
        store: &dyn ExecutionStore,
        queue: &dyn Queue,
        reports: Vec<(&OutboxEntry, stm_store::JoinReport)>,
    ) {
        if reports.is_empty() {
            return;
        }
        let reported = crate::join::deliver_reports(store, queue, reports).await;
        self.summary.failed += reported.left;
        self.summary.remaining += reported.left;
        let done: Vec<Ackable> = reported.done.iter().map(|seq| Ackable::Outbox(*seq)).collect();
        let delivered = done.len();
        self.ack(store, &done, delivered).await;
    }

    /// Put the status events the bus's level publishes on the bus, and ack what it took
    /// and what its level leaves out; refused ones stay pending (counted in `remaining`,
    /// not `failed`). Without a bus: [`WithoutBus`]. They belong to no message group: a
    /// refused one holds nothing back.
    async fn announce(&mut self, store: &dyn ExecutionStore, notices: &[&OutboxEntry]) {
        if notices.is_empty() {
            return;
        }
        let (notices, unsent): (Vec<&OutboxEntry>, Vec<&OutboxEntry>) = match self.bus {
            Some(bus) => notices
                .iter()
                .partition(|n| notice_status(&n.event).is_some_and(|s| bus.level().publishes(s))),
            None => match self.without_bus {
                WithoutBus::Leave => {
                    self.summary.remaining += notices.len();
                    return;
                }
                WithoutBus::Drop => (Vec::new(), notices.to_vec()),
            },
        };
        let dropped: Vec<Ackable> = unsent.iter().map(|n| Ackable::Outbox(n.seq)).collect();
        self.ack(store, &dropped, 0).await;
        let Some(bus) = self.bus.filter(|_| !notices.is_empty()) else {
            return;
        };
        let events: Vec<BusEvent> = notices.iter().map(|n| BusEvent::of_notice(&n.event)).collect();
        let failures = bus.put(&events).await;
        let failed_at: HashSet<usize> = failures.iter().map(|f| f.index).collect();
        for failure in &failures {
            tracing::warn!(
                code = %failure.code, error = %failure.message,
                "status event refused; it stays pending for the next relay run"
            );
        }
        // pending, but not failed: a worker's record must not come back (and hold its
        // group) because the bus is down; the scheduled relay puts them later
        self.summary.remaining += failed_at.len();
        let delivered: Vec<&OutboxEntry> = notices
            .iter()
            .enumerate()
            .filter(|(i, _)| !failed_at.contains(i))
            .map(|(_, n)| *n)
            .collect();
        // counted once on the bus, before the rows go: a crash between the two counts
        // them again on the next run, which only brings a rollback sooner
        if let Some(tallies) = bus.tallies() {
            tallies.count(store, &delivered).await;
        }
        let done: Vec<Ackable> = delivered.iter().map(|n| Ackable::Outbox(n.seq)).collect();
        let sent = done.len();
        self.ack(store, &done, sent).await;
    }

    /// Ack `rows` together, and count `published` entries forwarded (a packed row's
    /// intents are its own entries), or unacked if the ack fails.
    async fn ack(&mut self, store: &dyn ExecutionStore, rows: &[Ackable], published: usize) {
        let (mut spawns, mut outbox) = (Vec::new(), Vec::new());
        for row in rows {
            match row {
                Ackable::Spawn(seq) => spawns.push(*seq),
                Ackable::Outbox(seq) => outbox.push(*seq),
            }
        }
        self.acked_rows += ack_rows(store, &spawns, &outbox, published, &mut self.summary).await;
    }
}

/// Ack these rows together, and count `published` entries forwarded, or unacked if the
/// ack fails; the rows acked.
async fn ack_rows(
    store: &dyn ExecutionStore,
    spawns: &[i64],
    outbox: &[i64],
    published: usize,
    summary: &mut RelaySummary,
) -> usize {
    let rows = spawns.len() + outbox.len();
    if rows == 0 {
        summary.forwarded += published;
        return 0;
    }
    match store.ack_rows(spawns, outbox).await {
        Ok(()) => {
            summary.forwarded += published;
            rows
        }
        Err(err) => {
            tracing::warn!(error = %err, rows, "ack failed; the entries stay pending (a re-publish is deduplicated)");
            // a row without a target was never published, but stays pending all the same
            summary.unacked += published.max(rows);
            summary.remaining += published.max(rows);
            0
        }
    }
}

/// Which lane of which delivery a future runs in ([`current_lane`]): the relay's lanes, and
/// the sweeper's slots of a page (`sweeper::SWEEP_CONCURRENCY` executions' timers at once,
/// each slot taking the next execution when its last is done).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayLane {
    /// The delivery, numbered in this process from 0.
    pub delivery: u64,
    /// The lane, from 0.
    pub index: usize,
    /// How many lanes the delivery has.
    pub of: usize,
}

tokio::task_local! {
    static LANE: RelayLane;
}

static NEXT_DELIVERY: AtomicU64 = AtomicU64::new(0);

/// The relay's lane the calling code runs in, if any: a store or a queue under the relay
/// can tell the lanes' requests apart, which run side by side (the scale simulator times
/// them so).
pub fn current_lane() -> Option<RelayLane> {
    LANE.try_with(|lane| *lane).ok()
}

/// A new set of side-by-side strands (a delivery's lanes, a sweep page's slots), numbered
/// in this process.
pub(crate) fn new_strands() -> u64 {
    NEXT_DELIVERY.fetch_add(1, Ordering::Relaxed)
}

/// `work` run as strand `index` of `of` in the set `strands` ([`current_lane`]).
pub(crate) async fn in_strand<F: std::future::Future>(
    strands: u64,
    index: usize,
    of: usize,
    work: F,
) -> F::Output {
    LANE.scope(
        RelayLane {
            delivery: strands,
            index,
            of,
        },
        work,
    )
    .await
}

/// The lane of a message group among `lanes`: FNV-1a of its id, the same in every process.
fn lane_of(group_id: &str, lanes: usize) -> usize {
    let hash = group_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % lanes as u64) as usize
}

/// What one lane of a delivery did.
#[derive(Default)]
struct Published {
    summary: RelaySummary,
    acked_rows: usize,
    /// Groups of this lane that had a failure: their later messages wait.
    blocked: HashSet<String>,
}

/// Publish one lane's messages in their order, one `SendMessageBatch` after another, and
/// ack each batch's rows (a spawn row once the last of its intents in any lane is out,
/// `unpublished` counting them down); a failure holds back the rest of its group.
async fn publish_lane(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    blocked_before: &HashSet<String>,
    unpublished: &Mutex<HashMap<i64, usize>>,
    messages: Vec<(OutgoingMessage, Ackable)>,
) -> Published {
    // a spawn row one of whose intents is not published stays pending: the next run
    // publishes its intents again
    let keep_pending = |seq: i64| {
        unpublished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(seq, usize::MAX);
    };
    let mut lane = Published::default();
    let mut rest = messages.into_iter().peekable();
    while rest.peek().is_some() {
        // one chunk is one SendMessageBatch (the queue's own cut, `plan_batches`, keeps it
        // whole), so a failure in it holds back the rest of its group: by count and bytes.
        // Its messages and their rows side by side: the messages go to the queue as they
        // are, not copied
        let mut messages: Vec<OutgoingMessage> = Vec::with_capacity(MAX_BATCH);
        let mut ackables: Vec<Ackable> = Vec::with_capacity(MAX_BATCH);
        let mut size = BatchSize::default();
        while let Some((message, ackable)) = rest.peek() {
            let held = blocked_before.contains(&message.group_id) || lane.blocked.contains(&message.group_id);
            let problem = if held { None } else { message_problem(message) };
            if let Some((code, problem)) = &problem {
                // SQS would refuse it whatever we do (the driver refuses such messages at
                // commit; this one predates that or came from elsewhere): it stays
                // pending, loudly, and its group's later entries wait behind it
                tracing::error!(
                    group_id = %message.group_id, %code, error = %problem,
                    "a pending entry can never be published; it stays pending and holds back its group"
                );
                lane.blocked.insert(message.group_id.clone());
            }
            if held || problem.is_some() {
                if let Ackable::Spawn(seq) = ackable {
                    keep_pending(*seq);
                }
                rest.next();
                lane.summary.failed += 1;
                lane.summary.remaining += 1;
                continue;
            }
            let bytes = message.sqs_bytes();
            if !size.admits(bytes) {
                break;
            }
            size.add(bytes);
            if let Some((message, ackable)) = rest.next() {
                messages.push(message);
                ackables.push(ackable);
            }
        }
        if messages.is_empty() {
            continue;
        }
        let failures = queue.publish_batch(&messages).await;
        let failed_at: HashSet<usize> = failures.iter().map(|f| f.index).collect();
        for failure in &failures {
            if let Some(message) = messages.get(failure.index) {
                tracing::warn!(
                    group_id = %message.group_id, code = %failure.code, error = %failure.message,
                    "publish failed; the entry stays pending for the next relay run"
                );
            }
        }
        let (mut spawns_done, mut outbox_done) = (Vec::new(), Vec::with_capacity(messages.len()));
        let mut published = 0;
        for (i, (message, ackable)) in messages.into_iter().zip(ackables).enumerate() {
            if failed_at.contains(&i) {
                // hold back the rest of this group (a later chunk) so its order survives.
                // A later message of the group inside this very chunk was already
                // accepted by SQS and cannot be recalled: it is acked (at-least-once
                // either way).
                lane.blocked.insert(message.group_id);
                if let Ackable::Spawn(seq) = ackable {
                    keep_pending(seq);
                }
                lane.summary.failed += 1;
                lane.summary.remaining += 1;
                continue;
            }
            published += 1;
            match ackable {
                Ackable::Spawn(seq) => {
                    let mut counts = unpublished.lock().unwrap_or_else(|e| e.into_inner());
                    let left = counts.entry(seq).or_default();
                    *left = left.saturating_sub(1);
                    if *left == 0 {
                        spawns_done.push(seq);
                    }
                }
                Ackable::Outbox(seq) => outbox_done.push(seq),
            }
        }
        lane.acked_rows += ack_rows(store, &spawns_done, &outbox_done, published, &mut lane.summary).await;
    }
    lane
}

/// The scheduled relay with no deadline and no settling time: every pending spawn intent
/// and outbox entry, in seq order (the local stack's and the tests' pass).
pub async fn relay_pending(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
) -> Result<RelaySummary, RelayError> {
    relay_pending_until(store, queue, None, None, f64::INFINITY, RelayBounds::default()).await
}

/// The scheduled relay: the pending rows committed before `settled_before` (epoch
/// seconds), in seq order, in passes of `bounds.pass_rows` read by key `bounds.read_rows`
/// at a time, until they are done or `deadline` comes (the rest waits for the next run);
/// status events go to `bus` (without one they are deleted unsent: a deployment without
/// status events still gets the rows the operator commands write).
/// Memory stays bounded whatever the backlog.
pub async fn relay_pending_until(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    bus: Option<&dyn StatusBus>,
    deadline: Option<Instant>,
    settled_before: f64,
    bounds: RelayBounds,
) -> Result<RelaySummary, RelayError> {
    let pass_rows = bounds.pass_rows.max(1);
    let run = stm_aws::as_function("relay", async {
        let mut delivery = Delivery::new(bus, WithoutBus::Drop, bounds.lane_messages);
        // a page is started only if it can end before the deadline: as long as the
        // longest page so far took (a page forwarded half-way would be sent again, and an
        // invocation past its deadline is killed mid-page)
        let mut longest_page = Duration::ZERO;
        let out_of_time = |longest_page: Duration| {
            deadline.is_some_and(|d| d.saturating_duration_since(Instant::now()) <= longest_page)
        };
        'passes: loop {
            // spawn intents and outbox entries together, lowest seqs first: a commit's spawn
            // intents take its block's first seqs, and an event's region was spawned by an
            // earlier commit, so no event is forwarded before its region's intent
            if out_of_time(longest_page) {
                break;
            }
            let seqs = store.oldest_pending_seqs(pass_rows, settled_before).await?;
            let acked_before = delivery.acked_rows;
            for read in bounds.reads(&seqs) {
                if out_of_time(longest_page) {
                    break 'passes;
                }
                let page_started = Instant::now();
                let spawns: Vec<i64> = read.iter().filter(|s| s.spawn).map(|s| s.seq).collect();
                let outbox: Vec<i64> = read.iter().filter(|s| !s.spawn).map(|s| s.seq).collect();
                let rows = store.pending_rows(&spawns, &outbox).await?;
                // each row its `relay` span in its commit's trace, open while its page is
                // published
                let spans = relay_spans(&rows);
                delivery.deliver(store, queue, &rows.spawns, &rows.outbox).await;
                drop(spans);
                longest_page = longest_page.max(page_started.elapsed());
            }
            // a short pass saw everything settled; a pass that acked nothing would only find
            // the same rows again (one that acked only rows it did not send, a status event
            // left out or an emit without a target, did move on: the next pass finds others)
            if seqs.len() < pass_rows || delivery.acked_rows == acked_before {
                break;
            }
        }
        let summary = delivery.summary;
        if summary.forwarded > 0 || summary.failed > 0 {
            tracing::info!(
                forwarded = summary.forwarded,
                failed = summary.failed,
                unacked = summary.unacked,
                remaining = summary.remaining,
                "relay run"
            );
        }
        Ok(summary)
    });
    stm_aws::within_deadline(deadline, run).await
}

/// One run of the scheduled relay function: a pass over the rows committed before `now`
/// (epoch seconds) less [`RELAY_SETTLE_SECONDS`], until `deadline`, its metrics logged.
pub async fn scheduled_pass(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    bus: Option<&dyn StatusBus>,
    now: f64,
    deadline: Option<Instant>,
) -> Result<RelaySummary, RelayError> {
    let settled_before = now - RELAY_SETTLE_SECONDS;
    let summary = relay_pending_until(
        store,
        queue,
        bus,
        deadline,
        settled_before,
        RelayBounds::default(),
    )
    .await?;
    summary.metrics().emit();
    Ok(summary)
}

impl RelaySummary {
    /// The run as CloudWatch metrics (Embedded Metric Format): forwarded and remaining.
    pub fn metrics(&self) -> crate::metrics::MetricSet {
        let mut m = crate::metrics::MetricSet::for_function("relay");
        m.count("RelayForwarded", self.forwarded as f64);
        m.count("RelayRemaining", self.remaining as f64);
        m.count("RelayFailed", (self.failed + self.unacked) as f64);
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drawn passes of drawn row sizes (tiny to past the budget) under drawn bounds: the
    /// reads cover the pass in order; each holds one row at least, at most `read_rows`,
    /// and more than one only within `read_bytes`; and each is as long as the bounds let
    /// it be (the next row would break one of them).
    #[test]
    fn reads_are_bounded_by_rows_and_bytes_and_as_full_as_they_may_be() {
        let mut rng = stm_testkit::Rng::new(0x4EAD_B0D5);
        for _ in 0..2_000 {
            let bounds = RelayBounds {
                pass_rows: 0,
                read_rows: rng.between(1, 12) as usize,
                read_bytes: rng.spread(5_000) as usize,
                lane_messages: LANE_MESSAGES,
            };
            let seqs: Vec<PendingSeq> = (0..rng.below(40))
                .map(|seq| PendingSeq {
                    seq: seq as i64,
                    spawn: rng.chance(50),
                    bytes: rng.spread(3_000) as u32,
                })
                .collect();
            let reads: Vec<&[PendingSeq]> = bounds.reads(&seqs).collect();
            assert_eq!(reads.concat(), seqs, "{bounds:?}");
            let mut at = 0;
            for read in &reads {
                at += read.len();
                let bytes: usize = read.iter().map(|s| s.bytes as usize).sum();
                assert!(!read.is_empty() && read.len() <= bounds.read_rows, "{bounds:?}");
                assert!(
                    read.len() == 1 || bytes <= bounds.read_bytes,
                    "{bounds:?}: {bytes}"
                );
                if let Some(next) = seqs.get(at) {
                    assert!(
                        read.len() == bounds.read_rows || bytes + next.bytes as usize > bounds.read_bytes,
                        "{bounds:?}: the read could have taken seq {}",
                        next.seq
                    );
                }
            }
        }
    }
}
