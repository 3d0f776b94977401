//! A counted join's reports delivered (`FanOutJoin=counted`): an instance's `Finished`
//! that carries its [`JoinSlot`] is recorded in the join's rows
//! ([`ExecutionStore::report_to_join`]) instead of being sent to its parent, and the report
//! that completes the join sends the parent one `Finished` with the whole tally
//! (`__joined__`). The parent's item is read and written once for the join, not once per
//! ten reports: its collection (10,000 recipients are about 70 KB) is what a rewrite costs.
//!
//! A report whose instance still held deferred events sends those to the parent first, as a
//! `Finished` of no child (the engine appends them, as from any child's report), so they
//! reach the parent before the tally can.
//!
//! Every part is idempotent: a report recorded twice is one element of its row; a tally
//! sent twice finds the join complete and changes nothing; a deferred-only `Finished` sent
//! twice is dropped by the parent's dedupe mark (its event id is the report's).

use stm_core::execution::counted_join::{Joined, JOINED_KEY, JOIN_SLOT_KEY};
use stm_core::{Event, JoinSlot, Map, Value};
use stm_store::{ExecutionStore, JoinReport, OutboxEntry};

use crate::queue::{OutgoingMessage, Queue};

/// Reports recorded side by side in one delivery.
const REPORTS_AT_ONCE: usize = 16;

/// The join report `entry` carries, if it is one: a `Finished` to its parent with a slot.
pub(crate) fn report_of(entry: &OutboxEntry) -> Option<JoinReport> {
    if entry.event.kind != "Finished" || entry.target_id.is_none() {
        return None;
    }
    let slot = JoinSlot::from_value(entry.event.data.get(JOIN_SLOT_KEY)?)?;
    let outcome = entry
        .event
        .data
        .get("outcome")
        .and_then(Value::as_str)
        .map(str::to_string);
    Some(JoinReport { slot, outcome })
}

/// What delivering the reports did: the rows done (to ack), and the rows left pending.
#[derive(Debug, Default)]
pub(crate) struct Reported {
    pub(crate) done: Vec<i64>,
    pub(crate) left: usize,
}

/// Deliver each report of `reports` (see the module); a report that failed stays pending
/// for the next run.
pub(crate) async fn deliver_reports(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    reports: Vec<(&OutboxEntry, JoinReport)>,
) -> Reported {
    let mut reported = Reported::default();
    // a chunk at a time, side by side (a stream's closures would not be `Send` for every
    // lifetime, which the spawned pollers need)
    for chunk in reports.chunks(REPORTS_AT_ONCE) {
        let outcomes = futures_util::future::join_all(
            chunk
                .iter()
                .map(|(entry, report)| deliver_one(store, queue, entry, report)),
        )
        .await;
        for ((entry, _), ok) in chunk.iter().zip(outcomes) {
            if ok {
                reported.done.push(entry.seq);
            } else {
                reported.left += 1;
            }
        }
    }
    reported
}

async fn deliver_one(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    entry: &OutboxEntry,
    report: &JoinReport,
) -> bool {
    if let Some(deferred) = entry.event.data.get("__deferred__") {
        let mut data = Map::new();
        data.insert("__deferred__".into(), deferred.clone());
        let event = Event::with_data("Finished", data).with_id(entry.event.id.clone());
        if !publish(queue, entry, event).await {
            return false;
        }
    }
    match store.report_to_join(report).await {
        Ok(None) => true,
        Ok(Some(tally)) => {
            let joined = Joined {
                prefix: report.slot.prefix.clone(),
                tally,
            };
            let mut data = Map::new();
            data.insert(
                JOINED_KEY.into(),
                serde_json::to_value(&joined).unwrap_or(Value::Null),
            );
            let event = Event::with_data("Finished", data).with_id(format!("joined:{}", report.slot.prefix));
            publish(queue, entry, event).await
        }
        Err(err) => {
            tracing::warn!(
                error = %err, join = %report.slot.prefix, index = report.slot.index,
                "recording a join report failed; its row stays pending for the next relay run"
            );
            false
        }
    }
}

/// Send `event` to the parent `entry` is addressed to, deduplicated by `entry`'s row.
async fn publish(queue: &dyn Queue, entry: &OutboxEntry, event: Event) -> bool {
    let row = OutboxEntry {
        seq: entry.seq,
        target_id: entry.target_id.clone(),
        event,
        trace_context: None,
    };
    let Some(message) = OutgoingMessage::outbox(&row) else {
        return false;
    };
    let failures = queue.publish_batch(std::slice::from_ref(&message)).await;
    for failure in &failures {
        tracing::warn!(
            group_id = %message.group_id, code = %failure.code, error = %failure.message,
            "publish to a joining parent failed; the report stays pending for the next relay run"
        );
    }
    failures.is_empty()
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use stm_store::MemoryStore;

    use super::*;
    use crate::MemoryQueue;

    /// Instance `index`'s report of a join of `total`, as the child's commit writes it.
    fn report_row(seq: i64, index: u64, total: u64, deferred: bool) -> OutboxEntry {
        let mut data = Map::new();
        data.insert("child_id".into(), Value::from(format!("p:Fan:0:{index}")));
        let outcome = if index == 1 { "failed" } else { "success" };
        data.insert("outcome".into(), Value::from(outcome));
        let slot = JoinSlot {
            prefix: "p:Fan:0:".into(),
            index,
            total,
        };
        data.insert(JOIN_SLOT_KEY.into(), slot.to_value());
        if deferred {
            data.insert(
                "__deferred__".into(),
                json!([{"kind": "Ping", "id": "ping-1", "data": {}}]),
            );
        }
        OutboxEntry {
            seq,
            target_id: Some("p".into()),
            event: Event::with_data("Finished", data).with_id(format!("finished-{index}")),
            trace_context: None,
        }
    }

    fn reports(rows: &[OutboxEntry]) -> Vec<(&OutboxEntry, JoinReport)> {
        rows.iter()
            .map(|r| (r, report_of(r).expect("a join report")))
            .collect()
    }

    /// The events sent to the parent, in order.
    fn to_parent(queue: &MemoryQueue) -> Vec<Value> {
        queue
            .snapshot()
            .iter()
            .filter(|m| m.group_id == "p")
            .map(|m| serde_json::from_str(&m.body).expect("an event body"))
            .collect()
    }

    /// Three instances report, the last with deferred events, then all three again (a
    /// relay run after a crash): nothing reaches the parent before the join is full, the
    /// deferred events reach it once as a `Finished` of no child, before the tally; the tally is sent once the last instance reported, each
    /// time with the same event id (the parent's dedupe drops the repeats); every row is
    /// done.
    #[tokio::test]
    async fn reports_reach_the_parent_as_one_tally_behind_their_deferred_events() {
        let store = MemoryStore::new();
        let queue = MemoryQueue::default();
        // the report that completes the join is the one with deferred events
        let rows: Vec<OutboxEntry> = (0..3).map(|i| report_row(10 + i as i64, i, 3, i == 2)).collect();
        let first = deliver_reports(&store, &queue, reports(&rows[..2])).await;
        assert_eq!((first.done.len(), first.left), (2, 0));
        assert!(
            to_parent(&queue).is_empty(),
            "nothing for the parent before the join is full"
        );
        let last = deliver_reports(&store, &queue, reports(&rows[2..])).await;
        assert_eq!(last.done, vec![12]);
        let again = deliver_reports(&store, &queue, reports(&rows)).await;
        assert_eq!(again.done.len(), 3);
        let sent = to_parent(&queue);
        let tallies: Vec<&Value> = sent
            .iter()
            .filter(|e| e["data"].get(JOINED_KEY).is_some())
            .collect();
        assert!(!tallies.is_empty(), "the tally was sent: {sent:?}");
        assert!(
            tallies.iter().all(|t| t["id"] == json!("joined:p:Fan:0:")),
            "{tallies:?}"
        );
        let tally = &tallies[0]["data"][JOINED_KEY];
        assert_eq!(tally["outcomes"], json!({"success": 2, "failed": 1}));
        assert_eq!(tally["others"], json!([[1, "failed"]]));
        assert_eq!(
            sent[0]["data"],
            json!({"__deferred__": [{"kind": "Ping", "id": "ping-1", "data": {}}]}),
            "the deferred events went first, as a Finished of no child: {sent:?}"
        );
        assert!(
            sent[1]["data"].get(JOINED_KEY).is_some(),
            "then the tally: {sent:?}"
        );
    }
}
