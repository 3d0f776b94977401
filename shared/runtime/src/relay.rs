//! The relay: committed outbox events and spawn intents -> the queue -> acked.
//!
//! Used twice: by the worker right after a commit (the *inline flush*, only that commit's
//! entries, so an emitted event reaches its target in well under a second) and by the
//! scheduled relay function (every pending entry, the safety net for a crash or a failed
//! publish between commit and flush).
//!
//! Order: spawn intents before events, each by `seq` (the outbox is read before the spawn
//! intents, so that an event is never seen without its region's intent; see
//! [`relay_pending`]). A message whose group already had a
//! failure in this run is held back (it stays pending) so that FIFO order within a group
//! never breaks: e.g. a broadcast event must not reach a region whose spawn intent failed
//! to publish.

use std::collections::HashSet;

use stm_store::{ExecutionStore, OutboxEntry, SpawnEntry};

use crate::driver::DriverError;
use crate::queue::{message_problem, BatchSize, OutgoingMessage, Queue, MAX_BATCH};

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
    /// that could not be acked).
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

enum Ackable {
    Spawn(i64),
    Outbox(i64),
}

/// Publish `spawns` then `outbox` (each already in seq order) and ack what was delivered.
pub async fn deliver(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    spawns: &[SpawnEntry],
    outbox: &[OutboxEntry],
) -> RelaySummary {
    let mut summary = RelaySummary::default();
    let mut pending: Vec<(OutgoingMessage, Ackable)> = Vec::with_capacity(spawns.len() + outbox.len());
    for spawn in spawns {
        pending.push((OutgoingMessage::spawn(spawn), Ackable::Spawn(spawn.seq)));
    }
    for entry in outbox {
        match OutgoingMessage::outbox(entry) {
            Some(message) => pending.push((message, Ackable::Outbox(entry.seq))),
            // an emit without a target goes nowhere (harel acks it too)
            None => ack(store, &Ackable::Outbox(entry.seq), &mut summary).await,
        }
    }
    let mut blocked: HashSet<String> = HashSet::new();
    let mut rest = pending.into_iter().peekable();
    while rest.peek().is_some() {
        // one chunk is one SendMessageBatch (the queue's own cut, `plan_batches`, keeps it
        // whole), so a failure in it holds back the rest of its group: by count and bytes
        let mut chunk: Vec<(OutgoingMessage, Ackable)> = Vec::with_capacity(MAX_BATCH);
        let mut size = BatchSize::default();
        while let Some((message, _)) = rest.peek() {
            if blocked.contains(&message.group_id) {
                rest.next();
                summary.failed += 1;
                summary.remaining += 1;
                continue;
            }
            if let Some((code, problem)) = message_problem(message) {
                // SQS would refuse it whatever we do (the driver refuses such messages at
                // commit; this one predates that or came from elsewhere): it stays pending,
                // loudly, and its group's later entries wait behind it to keep their order
                tracing::error!(
                    group_id = %message.group_id, %code, error = %problem,
                    "a pending entry can never be published; it stays pending and holds back its group"
                );
                blocked.insert(message.group_id.clone());
                rest.next();
                summary.failed += 1;
                summary.remaining += 1;
                continue;
            }
            let bytes = message.sqs_bytes();
            if !size.admits(bytes) {
                break;
            }
            size.add(bytes);
            if let Some(entry) = rest.next() {
                chunk.push(entry);
            }
        }
        if chunk.is_empty() {
            continue;
        }
        let messages: Vec<OutgoingMessage> = chunk.iter().map(|(m, _)| m.clone()).collect();
        let failures = queue.publish_batch(&messages).await;
        let failed_at: HashSet<usize> = failures.iter().map(|f| f.index).collect();
        for failure in &failures {
            if let Some((message, _)) = chunk.get(failure.index) {
                tracing::warn!(
                    group_id = %message.group_id, code = %failure.code, error = %failure.message,
                    "publish failed; the entry stays pending for the next relay run"
                );
            }
        }
        for (i, (message, ackable)) in chunk.iter().enumerate() {
            if failed_at.contains(&i) {
                // hold back the rest of this group (a later chunk) so its order survives. A
                // later message of the group inside this very chunk was already accepted by
                // SQS and cannot be recalled: it is acked (at-least-once either way).
                blocked.insert(message.group_id.clone());
                summary.failed += 1;
                summary.remaining += 1;
                continue;
            }
            let before = summary.unacked;
            ack(store, ackable, &mut summary).await;
            if summary.unacked == before {
                summary.forwarded += 1;
            }
        }
    }
    summary
}

async fn ack(store: &dyn ExecutionStore, ackable: &Ackable, summary: &mut RelaySummary) {
    let result = match ackable {
        Ackable::Spawn(seq) => store.ack_spawn(*seq).await,
        Ackable::Outbox(seq) => store.ack_outbox(*seq).await,
    };
    if let Err(err) = result {
        tracing::warn!(error = %err, "ack failed; the entry stays pending (a re-publish is deduplicated)");
        summary.unacked += 1;
        summary.remaining += 1;
    }
}

/// The scheduled relay: every pending spawn intent and outbox entry, in seq order.
pub async fn relay_pending(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
) -> Result<RelaySummary, DriverError> {
    stm_store::aws::as_function("relay", async {
        // the outbox first: an event read there was committed after the spawn intents of
        // the regions it goes to, so the second read finds those still pending (or they
        // were published already). Read the other way round, a commit landing between the
        // reads gives an event without its region's intent, which reaches the region's
        // group first, finds no execution there and is dropped.
        let mut outbox = store.pending_outbox().await?;
        let mut spawns = store.pending_spawns().await?;
        spawns.sort_by_key(|s| s.seq);
        outbox.sort_by_key(|o| o.seq);
        let mut summary = RelaySummary::default();
        summary.add(&deliver(store, queue, &spawns, &outbox).await);
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
    })
    .await
}

/// The relay function's handler (feature `aws`): a scheduled (EventBridge) invocation runs
/// one relay pass.
#[cfg(feature = "aws")]
pub async fn handle_scheduled(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    event: &aws_lambda_events::eventbridge::EventBridgeEvent<serde_json::Value>,
) -> Result<RelaySummary, DriverError> {
    tracing::debug!(schedule = ?event.resources, time = ?event.time, "relay invoked");
    let summary = relay_pending(store, queue).await?;
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
