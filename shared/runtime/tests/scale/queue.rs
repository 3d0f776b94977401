//! The simulated SQS FIFO queue: message groups, visibility, receive counts and the
//! batches one group hands to an invocation, in simulated time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use stm_core::Event;
use stm_runtime::queue::QueueError;
use stm_runtime::queue::{plan_batches, PublishFailure, ReceivedMessage, SPAWN_KIND};
use stm_runtime::worker::BatchOutcome;
use stm_runtime::{Clock, ManualClock, OutgoingMessage, Queue, Record};

use crate::config::{lock, VISIBILITY_SECONDS};
use crate::metered::{Beside, Call};
use crate::quotas::SQS_ACTION_TPS;

/// Whole microseconds: the queue's order of simulated times.
fn micros(t: f64) -> i64 {
    (t * 1e6).round() as i64
}

/// An SQS action in one whole second of simulated time.
type ActionSecond = (&'static str, i64);

#[derive(Debug, Clone)]
pub(crate) struct Queued {
    message_id: String,
    message: OutgoingMessage,
    receive_count: u32,
    visible_at: f64,
    /// When it was sent: its latency runs from here to the delete.
    sent_at: f64,
}

#[derive(Debug, Default)]
struct Group {
    messages: VecDeque<Queued>,
    /// When the group's last batch ends (its next cannot start before).
    free_at: f64,
    /// The time of its live entry in the ready heap.
    scheduled: Option<i64>,
}

#[derive(Debug, Default)]
struct QueueState {
    groups: HashMap<String, Group>,
    /// When the event source's next receive may start: its receives are paced at the
    /// queue's per-action quota ([`SQS_ACTION_TPS`]), past which SQS throttles them.
    receive_at: f64,
    /// The producer's sends so far (every tenth starts a `SendMessageBatch`).
    produced: u64,
    ready: BinaryHeap<Reverse<(i64, u64, String)>>,
    tie: u64,
    next_id: u64,
    dedupe: HashSet<String>,
    /// Receipt handle -> when the worker's release makes it visible again.
    released: HashMap<String, f64>,
    queued: usize,
}

/// SQS FIFO in simulated time: per-group order, one receive of a group in flight at a time,
/// deduplication, visibility. A receive takes up to the event source's batch size
/// (`WorkerBatchSize`, at most 10 for FIFO) of the messages ready at its time: as many of
/// the first group's as it can, then other ready groups' (the Knowledge Center's "Why
/// doesn't my Amazon SQS FIFO queue return all messages or messages in other message
/// groups?": a receive "can also return messages from other available message groups";
/// Lambda's SQS parameters: no batching window on a FIFO source). The event source
/// receives at most [`SQS_ACTION_TPS`] times a second, so under load a receive carries
/// more groups instead of the quota throttling it.
///
/// It counts every SQS request and the messages it carried by action and second (what the
/// queue's per-action quota is compared with): the handlers' (a `SendMessageBatch` per
/// request `plan_batches` cuts, a `ChangeMessageVisibility`), also logged for their time
/// ([`take_calls`](SimQueue::take_calls)); the producer's sends, ten to a
/// `SendMessageBatch` ([`SimQueue::inject`]); and the event source's receives and deletes,
/// which the simulation counts with [`tally`](SimQueue::tally).
///
/// Not `MemoryQueue`: its deduplication window and visibility run on the wall clock and
/// its receive scans the whole queue, quadratic at 10^5 messages.
#[derive(Debug)]
pub(crate) struct SimQueue {
    state: Mutex<QueueState>,
    clock: Arc<ManualClock>,
    /// Count what is published but keep nothing (the relay backlog's pass).
    pub(crate) discard: AtomicBool,
    /// The clock's advance per request (a serial caller; 0: none).
    pub(crate) serial: Mutex<f64>,
    /// (action, second) -> (requests, messages).
    actions: Mutex<BTreeMap<ActionSecond, (u64, u64)>>,
    /// The most messages a receive takes (the event source's batch size).
    batch_size: usize,
    /// The handlers' requests since the last `take_calls`, by action.
    calls: Mutex<Vec<Call>>,
    /// Each deleted message's seconds from its send to its delete.
    pub(crate) latencies: Mutex<Vec<f64>>,
}

/// One SQS action's requests in a run: all of them, its busiest second's, and the most
/// messages they carried in one second.
#[derive(Debug, Clone)]
pub(crate) struct ActionLoad {
    pub(crate) action: &'static str,
    pub(crate) requests: u64,
    pub(crate) peak_per_second: u64,
    pub(crate) peak_messages_per_second: u64,
}

/// What one receive of the event source took: its records in the order handed to the
/// worker, and each group's messages, kept until [`SimQueue::settle`].
#[derive(Debug, Default)]
pub(crate) struct Received {
    pub(crate) records: Vec<Record>,
    taken: Vec<(String, Vec<Queued>)>,
}

impl SimQueue {
    pub(crate) fn new(clock: Arc<ManualClock>, batch_size: usize) -> Self {
        SimQueue {
            batch_size: batch_size.clamp(1, 10),
            state: Mutex::default(),
            clock,
            discard: AtomicBool::new(false),
            serial: Mutex::new(0.0),
            actions: Mutex::default(),
            calls: Mutex::default(),
            latencies: Mutex::default(),
        }
    }

    /// Count `n` requests of `action` now (not in any handler's time), carrying
    /// `messages` messages in all.
    pub(crate) fn tally(&self, action: &'static str, n: u64, messages: u64) {
        let second = self.clock.now().floor() as i64;
        let mut actions = lock(&self.actions);
        let counts = actions.entry((action, second)).or_default();
        counts.0 += n;
        counts.1 += messages;
    }

    /// Each action's requests since the last reset, and its busiest second's.
    pub(crate) fn action_loads(&self) -> Vec<ActionLoad> {
        let mut loads: BTreeMap<&'static str, ActionLoad> = BTreeMap::new();
        for (&(action, _), &(n, messages)) in lock(&self.actions).iter() {
            let load = loads.entry(action).or_insert(ActionLoad {
                action,
                requests: 0,
                peak_per_second: 0,
                peak_messages_per_second: 0,
            });
            load.requests += n;
            load.peak_per_second = load.peak_per_second.max(n);
            load.peak_messages_per_second = load.peak_messages_per_second.max(messages);
        }
        loads.into_values().collect()
    }

    /// The handlers' requests since the last call, by action.
    pub(crate) fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut *lock(&self.calls))
    }

    /// A handler's `n` requests of another service (`PutEvents`): counted by action and in
    /// the handler's time, not as SQS requests.
    pub(crate) fn handler_call(&self, action: &'static str, n: u64, entries: u64) {
        self.tally(action, n, entries);
        lock(&self.calls).extend((0..n).map(|_| Call::now(action, Beside::Serial)));
    }

    /// A handler's `n` requests of `action`, carrying `messages`: counted, and in its time.
    fn count_requests(&self, action: &'static str, n: u64, messages: u64) {
        self.standard_requests(action, action, n, messages);
    }

    /// A handler's `n` requests on another queue (the doorbells' standard queue, whose
    /// requests no FIFO quota counts): tallied as `action`, in the handler's time as the
    /// latency table's `kind`.
    pub(crate) fn standard_requests(&self, action: &'static str, kind: &'static str, n: u64, messages: u64) {
        self.tally(action, n, messages);
        let calls: Vec<Call> = (0..n).map(|_| Call::now(kind, Beside::Serial)).collect();
        let step = *lock(&self.serial);
        if step > 0.0 {
            let side_by_side = calls.first().map_or(1, Call::side_by_side);
            self.clock.advance(step * n as f64 / side_by_side as f64);
        }
        lock(&self.calls).extend(calls);
    }

    pub(crate) fn reset_counts(&self) {
        lock(&self.actions).clear();
        lock(&self.calls).clear();
        lock(&self.latencies).clear();
    }

    pub(crate) fn len(&self) -> usize {
        lock(&self.state).queued
    }

    fn schedule(st: &mut QueueState, group_id: &str) {
        let Some(group) = st.groups.get_mut(group_id) else {
            return;
        };
        let Some(head) = group.messages.front() else {
            group.scheduled = None;
            return;
        };
        let at = micros(head.visible_at.max(group.free_at));
        if group.scheduled == Some(at) {
            return;
        }
        group.scheduled = Some(at);
        st.tie += 1;
        let tie = st.tie;
        st.ready.push(Reverse((at, tie, group_id.to_string())));
    }

    fn push(st: &mut QueueState, message: OutgoingMessage, at: f64) {
        if !st.dedupe.insert(message.deduplication_id.clone()) {
            return; // SQS accepts and drops a duplicate within its window
        }
        st.next_id += 1;
        let message_id = format!("m-{}", st.next_id);
        let group_id = message.group_id.clone();
        st.groups
            .entry(group_id.clone())
            .or_default()
            .messages
            .push_back(Queued {
                message_id,
                message,
                receive_count: 0,
                visible_at: at,
                sent_at: at,
            });
        st.queued += 1;
        let idle = st.groups.get(&group_id).is_some_and(|g| g.scheduled.is_none());
        if idle {
            SimQueue::schedule(st, &group_id);
        }
    }

    /// A producer's send: ten to a `SendMessageBatch`, as docs/performance.md tells a
    /// producer past SQS's per-action quota to send (`Control::send_batch` does).
    pub(crate) fn inject(&self, target: &str, event: &Event) {
        let now = self.clock.now();
        let mut st = lock(&self.state);
        let starts_batch = st.produced.is_multiple_of(10);
        st.produced += 1;
        self.tally("SendMessageBatch", u64::from(starts_batch), 1);
        SimQueue::push(&mut st, OutgoingMessage::event(target, event), now);
    }

    /// When the event source's next receive can start: a group is ready and the receive's
    /// pace allows it.
    pub(crate) fn next_ready(&self) -> Option<f64> {
        let mut st = lock(&self.state);
        loop {
            let Reverse((at, _, group)) = st.ready.peek()?;
            if st.groups.get(group).and_then(|g| g.scheduled) == Some(*at) {
                return Some((*at as f64 / 1e6).max(st.receive_at));
            }
            st.ready.pop();
        }
    }

    /// The event source's receive at `at`: up to its batch size of the messages ready
    /// then, the group ready first first, as many of each group's as fit (what a group
    /// does not get waits for the receive's delete, as SQS holds a group with messages in
    /// flight).
    pub(crate) fn take_batch(&self, at: f64) -> Option<Received> {
        let mut st = lock(&self.state);
        let until = micros(at);
        if until < micros(st.receive_at) {
            return None; // the quota's pace: not yet
        }
        let mut received = Received::default();
        while received.records.len() < self.batch_size {
            let Some(Reverse((ready, _, group_id))) = st.ready.peek().cloned() else {
                break;
            };
            if ready > until {
                break;
            }
            st.ready.pop();
            let Some(group) = st.groups.get_mut(&group_id) else {
                continue;
            };
            if group.scheduled != Some(ready) {
                continue; // an entry a later schedule replaced
            }
            group.scheduled = None;
            let mut taken = Vec::new();
            while received.records.len() + taken.len() < self.batch_size
                && group
                    .messages
                    .front()
                    .is_some_and(|m| micros(m.visible_at) <= until)
            {
                if let Some(mut m) = group.messages.pop_front() {
                    m.receive_count += 1;
                    taken.push(m);
                }
            }
            received.records.extend(taken.iter().map(|m| Record {
                message_id: m.message_id.clone(),
                receipt_handle: Some(format!("{}#{}", m.message_id, m.receive_count)),
                body: m.message.body.clone(),
                group_id: Some(group_id.clone()),
                kind: m.message.spawn.then(|| SPAWN_KIND.to_string()),
                receive_count: m.receive_count,
                trace: m.message.trace,
            }));
            received.taken.push((group_id, taken));
        }
        if received.taken.is_empty() {
            return None;
        }
        st.receive_at = st.receive_at.max(at) + 1.0 / SQS_ACTION_TPS;
        Some(received)
    }

    /// After the worker's batch: the failed records go back to the front of their group
    /// (visible when the worker released them), the rest are deleted; each group of the
    /// receive is busy until `free_at`.
    pub(crate) fn settle(&self, received: Received, outcome: &BatchOutcome, now: f64, free_at: f64) {
        let failed: HashSet<String> = outcome.failed_ids().into_iter().collect();
        let mut st = lock(&self.state);
        for (group_id, taken) in received.taken {
            self.settle_group(&mut st, &group_id, taken, &failed, now, free_at);
        }
    }

    fn settle_group(
        &self,
        st: &mut QueueState,
        group_id: &str,
        taken: Vec<Queued>,
        failed: &HashSet<String>,
        now: f64,
        free_at: f64,
    ) {
        let mut back = Vec::new();
        for mut m in taken {
            let receipt = format!("{}#{}", m.message_id, m.receive_count);
            let released = st.released.remove(&receipt);
            if failed.contains(&m.message_id) {
                m.visible_at = released.unwrap_or(now + VISIBILITY_SECONDS);
                back.push(m);
            } else {
                st.queued -= 1;
                lock(&self.latencies).push(free_at - m.sent_at);
            }
        }
        if let Some(group) = st.groups.get_mut(group_id) {
            for m in back.into_iter().rev() {
                group.messages.push_front(m);
            }
            group.free_at = free_at;
            // kept when empty: its next batch still waits for `free_at`
            SimQueue::schedule(st, group_id);
        }
    }
}

#[async_trait]
impl Queue for SimQueue {
    async fn publish_batch(&self, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        let plan = plan_batches(messages);
        let now = self.clock.now();
        let sent = plan.batches.iter().map(Vec::len).sum::<usize>();
        self.count_requests("SendMessageBatch", plan.batches.len() as u64, sent as u64);
        if !self.discard.load(Ordering::SeqCst) {
            let mut st = lock(&self.state);
            for &index in plan.batches.iter().flatten() {
                SimQueue::push(&mut st, messages[index].clone(), now);
            }
        }
        plan.refused
    }

    /// The simulator hands each group's batch to the worker itself ([`SimQueue::take_batch`]).
    async fn receive(
        &self,
        _max: usize,
        _visibility_seconds: i32,
        _wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, QueueError> {
        Ok(Vec::new())
    }

    async fn delete(&self, _receipt_handle: &str) -> Result<(), QueueError> {
        Ok(())
    }

    async fn change_visibility(&self, receipt_handle: &str, seconds: i32) -> Result<(), QueueError> {
        self.count_requests("ChangeMessageVisibility", 1, 1);
        let at = self.clock.now() + f64::from(seconds.max(0));
        lock(&self.state).released.insert(receipt_handle.to_string(), at);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receive fills its batch from several ready groups, each group's messages in order
    /// and the first group's first; what a group did not get waits for the receive's
    /// delete; and the next receive waits for the quota's pace.
    #[test]
    fn a_receive_takes_several_groups_and_holds_what_did_not_fit() {
        let clock = Arc::new(ManualClock::new(100.0));
        let queue = SimQueue::new(clock.clone(), 10);
        for group in ["a", "b", "c"] {
            for n in 0..4 {
                let mut event = Event::new("Ping");
                event.id = format!("{group}{n}");
                queue.inject(group, &event);
            }
        }
        let at = queue.next_ready().expect("ready");
        let received = queue.take_batch(at).expect("a receive");
        let ids: Vec<String> = received
            .records
            .iter()
            .map(|r| {
                let body: serde_json::Value = serde_json::from_str(&r.body).expect("json");
                body["id"].as_str().unwrap_or_default().to_string()
            })
            .collect();
        assert_eq!(ids, ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3", "c0", "c1"]);
        // c's last two wait for the delete: no receive takes them while c is in flight
        assert_eq!(queue.next_ready(), None, "c is in flight");
        queue.settle(received, &BatchOutcome::default(), at, at + 0.05);
        let next = queue.next_ready().expect("c's rest");
        assert!((next - (at + 0.05)).abs() < 1e-6, "{next}");
        // the producer's twelve sends went out as two batches
        let sends = queue
            .action_loads()
            .into_iter()
            .find(|a| a.action == "SendMessageBatch")
            .expect("sends");
        assert_eq!((sends.requests, sends.peak_messages_per_second), (2, 12));
    }

    /// Receives are paced at the quota: a group ready at once still waits for the slot
    /// after the last receive.
    #[test]
    fn receives_keep_to_the_quota() {
        let clock = Arc::new(ManualClock::new(100.0));
        let queue = SimQueue::new(clock.clone(), 1);
        queue.inject("a", &Event::new("Ping"));
        queue.inject("b", &Event::new("Ping"));
        let first = queue.next_ready().expect("ready");
        queue.take_batch(first).expect("a");
        let second = queue.next_ready().expect("b");
        assert!(
            (second - (first + 1.0 / SQS_ACTION_TPS)).abs() < 1e-9,
            "{first} {second}"
        );
        assert!(queue.take_batch(first).is_none(), "b taken before its slot");
    }
}
