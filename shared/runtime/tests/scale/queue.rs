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

/// Whole microseconds: the queue's order of simulated times.
fn micros(t: f64) -> i64 {
    (t * 1e6).round() as i64
}

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
    ready: BinaryHeap<Reverse<(i64, u64, String)>>,
    tie: u64,
    next_id: u64,
    dedupe: HashSet<String>,
    /// Receipt handle -> when the worker's release makes it visible again.
    released: HashMap<String, f64>,
    queued: usize,
}

/// SQS FIFO in simulated time: per-group order, one batch of a group at a time, up to 10
/// messages per batch, deduplication, visibility. It counts every SQS request by action and
/// second (what the queue's per-action quota is compared with): the handlers' (a
/// `SendMessageBatch` per request `plan_batches` cuts, a `ChangeMessageVisibility`), also
/// logged for their time ([`take_calls`](SimQueue::take_calls)); the producer's sends (a
/// `SendMessage` an event, [`SimQueue::inject`]); and the event source's receives and
/// deletes, which the simulation counts with [`tally`](SimQueue::tally).
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
    /// (action, second) -> requests.
    actions: Mutex<BTreeMap<(&'static str, i64), u64>>,
    /// The handlers' requests since the last `take_calls`, by action.
    calls: Mutex<Vec<Call>>,
    /// Each deleted message's seconds from its send to its delete.
    pub(crate) latencies: Mutex<Vec<f64>>,
}

/// One SQS action's requests in a run: all of them, and its busiest second's.
#[derive(Debug, Clone)]
pub(crate) struct ActionLoad {
    pub(crate) action: &'static str,
    pub(crate) requests: u64,
    pub(crate) peak_per_second: u64,
}

impl SimQueue {
    pub(crate) fn new(clock: Arc<ManualClock>) -> Self {
        SimQueue {
            state: Mutex::default(),
            clock,
            discard: AtomicBool::new(false),
            serial: Mutex::new(0.0),
            actions: Mutex::default(),
            calls: Mutex::default(),
            latencies: Mutex::default(),
        }
    }

    /// Count `n` requests of `action` now (not in any handler's time).
    pub(crate) fn tally(&self, action: &'static str, n: u64) {
        let second = self.clock.now().floor() as i64;
        *lock(&self.actions).entry((action, second)).or_default() += n;
    }

    /// Each action's requests since the last reset, and its busiest second's.
    pub(crate) fn action_loads(&self) -> Vec<ActionLoad> {
        let mut loads: BTreeMap<&'static str, ActionLoad> = BTreeMap::new();
        for (&(action, _), &n) in lock(&self.actions).iter() {
            let load = loads.entry(action).or_insert(ActionLoad {
                action,
                requests: 0,
                peak_per_second: 0,
            });
            load.requests += n;
            load.peak_per_second = load.peak_per_second.max(n);
        }
        loads.into_values().collect()
    }

    /// The handlers' requests since the last call, by action.
    pub(crate) fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut *lock(&self.calls))
    }

    /// A handler's `n` requests of another service (`PutEvents`): counted by action and in
    /// the handler's time, not as SQS requests.
    pub(crate) fn handler_call(&self, action: &'static str, n: u64) {
        self.tally(action, n);
        lock(&self.calls).extend((0..n).map(|_| Call::now(action, Beside::Serial)));
    }

    /// A handler's `n` requests of `action`: counted, and in its time.
    fn count_requests(&self, action: &'static str, n: u64) {
        self.tally(action, n);
        let calls: Vec<Call> = (0..n).map(|_| Call::now(action, Beside::Serial)).collect();
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

    /// A producer's send: a `SendMessage` of its own.
    pub(crate) fn inject(&self, target: &str, event: &Event) {
        let now = self.clock.now();
        self.tally("SendMessage", 1);
        SimQueue::push(&mut lock(&self.state), OutgoingMessage::event(target, event), now);
    }

    /// When the next batch of any group can start.
    pub(crate) fn next_ready(&self) -> Option<f64> {
        let mut st = lock(&self.state);
        loop {
            let Reverse((at, _, group)) = st.ready.peek()?;
            if st.groups.get(group).and_then(|g| g.scheduled) == Some(*at) {
                return Some(*at as f64 / 1e6);
            }
            st.ready.pop();
        }
    }

    /// The batch of the group that is ready first, at `now`: its group, its records and
    /// the messages (kept until [`settle`](Self::settle)).
    pub(crate) fn take_batch(&self) -> Option<(String, Vec<Record>, Vec<Queued>)> {
        let mut st = lock(&self.state);
        let (at, group_id) = loop {
            let Reverse((at, _, group)) = st.ready.pop()?;
            if st.groups.get(&group).and_then(|g| g.scheduled) == Some(at) {
                break (at, group);
            }
        };
        let group = st.groups.get_mut(&group_id)?;
        group.scheduled = None;
        let mut taken = Vec::new();
        while taken.len() < 10 && group.messages.front().is_some_and(|m| micros(m.visible_at) <= at) {
            if let Some(mut m) = group.messages.pop_front() {
                m.receive_count += 1;
                taken.push(m);
            }
        }
        let records = taken
            .iter()
            .map(|m| Record {
                message_id: m.message_id.clone(),
                receipt_handle: Some(format!("{}#{}", m.message_id, m.receive_count)),
                body: m.message.body.clone(),
                group_id: Some(group_id.clone()),
                kind: m.message.spawn.then(|| SPAWN_KIND.to_string()),
                receive_count: m.receive_count,
            })
            .collect();
        Some((group_id, records, taken))
    }

    /// After the worker's batch: the failed records go back to the front of their group
    /// (visible when the worker released them), the rest are deleted; the group is busy
    /// until `free_at`.
    pub(crate) fn settle(
        &self,
        group_id: &str,
        taken: Vec<Queued>,
        outcome: &BatchOutcome,
        now: f64,
        free_at: f64,
    ) {
        let failed: HashSet<String> = outcome.failed_ids().into_iter().collect();
        let mut st = lock(&self.state);
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
            SimQueue::schedule(&mut st, group_id);
        }
    }
}

#[async_trait]
impl Queue for SimQueue {
    async fn publish_batch(&self, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        let plan = plan_batches(messages);
        let now = self.clock.now();
        self.count_requests("SendMessageBatch", plan.batches.len() as u64);
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
        self.count_requests("ChangeMessageVisibility", 1);
        let at = self.clock.now() + f64::from(seconds.max(0));
        lock(&self.state).released.insert(receipt_handle.to_string(), at);
        Ok(())
    }
}
