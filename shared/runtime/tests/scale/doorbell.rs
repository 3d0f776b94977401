//! The precise-timer doorbells in simulated time: the standard SQS queue the worker rings
//! for every timer a commit arms within `doorbell::HORIZON_SECONDS` (`Worker::ring`, the
//! worker's [`Doorbell`]), and the sweeper function's SQS trigger on that queue (template
//! `Sweeper`'s `Doorbells` event: `BatchSize`, `ScalingConfig.MaximumConcurrency` =
//! `DoorbellMaxConcurrency`), whose invocations the simulation drives through the real
//! `doorbell::handle_doorbells` (`sim.rs`).
//!
//! Production sends them with `SqsDoorbell`, which needs an SQS client: [`SimDoorbells`]
//! is its stand-in, cutting the same `SendMessageBatch` requests (`MAX_BATCH` entries and
//! `MAX_BATCH_BYTES` a request, a message over `MAX_MESSAGE_BYTES` not sent) and delaying
//! each message by the real `doorbell::delay_seconds`.
//!
//! A standard queue's requests are counted under their own names ([`SEND`], [`RECEIVE`],
//! [`DELETE`], [`CHANGE_VISIBILITY`]), apart from the FIFO event queue's: SQS gives standard
//! queues "a nearly unlimited number of API calls per second, per API action
//! (SendMessage, ReceiveMessage, or DeleteMessage)" (*Getting started with Amazon SQS
//! standard queues*,
//! <https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/DistributedQueues.html>),
//! so they count in a run's SQS requests per event but against no quota (`quotas.rs`).
//! What bounds the doorbells is the trigger's concurrency: at most `DoorbellMaxConcurrency`
//! invocations at once, each holding its instance from its receive to its delete, waits
//! for `fire_at` included. Every instance up to that is taken as warm and ready: the event
//! source's scaling from its first few pollers is not modelled.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use stm_runtime::doorbell::{delay_seconds, doorbell_body, Doorbell};
use stm_runtime::queue::{
    sqs_message_bytes, PublishFailure, QueueError, ReceivedMessage, MAX_BATCH, MAX_BATCH_BYTES,
    MAX_MESSAGE_BYTES,
};
use stm_runtime::{Clock, ManualClock, OutgoingMessage, Queue, Record};
use stm_store::DueTimer;

use crate::config::lock;
use crate::queue::SimQueue;

/// The doorbell queue's requests, as the run's SQS tally names them (a standard queue: no
/// per-action quota, see the module docs).
pub(crate) const SEND: &str = "SendMessageBatch (doorbell queue)";
pub(crate) const RECEIVE: &str = "ReceiveMessage (doorbell queue)";
pub(crate) const DELETE: &str = "DeleteMessageBatch (doorbell queue)";
pub(crate) const CHANGE_VISIBILITY: &str = "ChangeMessageVisibility (doorbell queue)";

/// Whole microseconds: the order of simulated times.
fn micros(t: f64) -> i64 {
    (t * 1e6).round() as i64
}

/// One doorbell message.
#[derive(Debug, Clone)]
struct Bell {
    message_id: String,
    body: String,
    receive_count: u32,
}

#[derive(Debug, Default)]
struct BellState {
    /// The messages not in flight, by (when visible, send order): a receive takes the
    /// earliest visible first (a standard queue promises no order; this one is the
    /// kindest to `fire_at`).
    waiting: BTreeMap<(i64, u64), Bell>,
    /// Received and not yet deleted, by message id, with when they were received.
    in_flight: HashMap<String, (Bell, f64)>,
    next_id: u64,
    /// Receipt handle -> when a `ChangeMessageVisibility` makes it visible again.
    released: HashMap<String, f64>,
    /// Invocations received and not yet finished (their end is not known yet).
    open: usize,
    /// The finished invocations' ends (an instance is busy until then).
    ends: BinaryHeap<Reverse<i64>>,
    /// Doorbells sent.
    rung: u64,
}

/// The doorbell queue and its trigger's instances, in simulated time.
#[derive(Debug)]
pub(crate) struct SimDoorbells {
    clock: Arc<ManualClock>,
    /// The run's SQS tally and its handlers' request log (the event queue's).
    queue: Arc<SimQueue>,
    state: Mutex<BellState>,
    /// `DoorbellMaxConcurrency`: invocations at once.
    pub(crate) max_concurrency: usize,
    /// The trigger's `BatchSize`: records an invocation takes at most.
    batch_size: usize,
    /// The timer queue's `VisibilityTimeout`: when a record reported failed comes back.
    visibility_seconds: f64,
}

impl SimDoorbells {
    pub(crate) fn new(
        clock: Arc<ManualClock>,
        queue: Arc<SimQueue>,
        max_concurrency: usize,
        batch_size: usize,
        visibility_seconds: f64,
    ) -> Self {
        SimDoorbells {
            clock,
            queue,
            state: Mutex::default(),
            max_concurrency: max_concurrency.max(1),
            batch_size: batch_size.clamp(1, MAX_BATCH),
            visibility_seconds,
        }
    }

    /// Doorbells sent so far.
    pub(crate) fn rung(&self) -> u64 {
        lock(&self.state).rung
    }

    /// Doorbells not yet deleted (waiting or in flight).
    pub(crate) fn len(&self) -> usize {
        let st = lock(&self.state);
        st.waiting.len() + st.in_flight.len()
    }

    /// Instances in an invocation now (after a receive: those that end later).
    pub(crate) fn busy(&self) -> usize {
        let st = lock(&self.state);
        st.open + st.ends.len()
    }

    /// When the trigger's next receive can start: a doorbell is visible and an instance
    /// is free (`None`: nothing waits, or every instance is in an invocation whose end is
    /// not known yet).
    pub(crate) fn next_receive(&self) -> Option<f64> {
        let st = lock(&self.state);
        let (&(visible, _), _) = st.waiting.first_key_value()?;
        let visible = visible as f64 / 1e6;
        let busy = st.open + st.ends.len();
        if busy < self.max_concurrency {
            return Some(visible);
        }
        if st.open >= self.max_concurrency {
            return None;
        }
        // the instance freed first among those a receive needs: the (busy - max + 1)th
        // earliest end
        let mut ends: Vec<i64> = st.ends.iter().map(|Reverse(e)| *e).collect();
        ends.sort_unstable();
        let free = ends[busy - self.max_concurrency] as f64 / 1e6;
        Some(visible.max(free))
    }

    /// The trigger's receive at `at`: up to its batch size of the doorbells visible then,
    /// if an instance is free; the invocation stays open until [`finish`](Self::finish).
    pub(crate) fn receive(&self, at: f64) -> Vec<Record> {
        let mut st = lock(&self.state);
        let now = micros(at);
        while st.ends.peek().is_some_and(|Reverse(end)| *end <= now) {
            st.ends.pop();
        }
        if st.open + st.ends.len() >= self.max_concurrency {
            return Vec::new();
        }
        let mut records = Vec::new();
        while records.len() < self.batch_size {
            let Some(entry) = st.waiting.first_entry() else {
                break;
            };
            if entry.key().0 > now {
                break;
            }
            let mut bell = entry.remove();
            bell.receive_count += 1;
            records.push(Record {
                message_id: bell.message_id.clone(),
                receipt_handle: Some(format!("{}#{}", bell.message_id, bell.receive_count)),
                body: bell.body.clone(),
                group_id: None,
                kind: None,
                receive_count: bell.receive_count,
                trace: None,
            });
            st.in_flight.insert(bell.message_id.clone(), (bell, at));
        }
        if !records.is_empty() {
            st.open += 1;
        }
        records
    }

    /// An invocation's end at `end`: the records not reported `failed` deleted, the failed
    /// ones visible again when a `ChangeMessageVisibility` said, else after the queue's
    /// visibility timeout; its instance is free from `end`.
    pub(crate) fn finish(&self, records: &[Record], failed: &[String], end: f64) {
        let mut st = lock(&self.state);
        for record in records {
            let Some((bell, received_at)) = st.in_flight.remove(&record.message_id) else {
                continue;
            };
            let receipt = record.receipt_handle.clone().unwrap_or_default();
            let released = st.released.remove(&receipt);
            if failed.contains(&record.message_id) {
                let visible = released.unwrap_or(received_at + self.visibility_seconds);
                st.next_id += 1;
                let seq = st.next_id;
                st.waiting.insert((micros(visible), seq), bell);
            }
        }
        st.open = st.open.saturating_sub(1);
        st.ends.push(Reverse(micros(end)));
    }
}

#[async_trait]
impl Doorbell for SimDoorbells {
    /// As `SqsDoorbell::ring`: the timers' doorbells in `SendMessageBatch` requests cut by
    /// count and bytes, each delayed `delay_seconds(fire_at, now)`; one over SQS's message
    /// limit is not sent (the sweep fires its timer).
    async fn ring(&self, timers: &[DueTimer], now: f64) -> usize {
        let mut failed = 0;
        let mut requests = 0u64;
        let mut sent = 0u64;
        let (mut entries, mut bytes) = (0usize, 0usize);
        let mut st = lock(&self.state);
        for timer in timers {
            let body = doorbell_body(timer);
            let size = sqs_message_bytes(body.len(), false);
            if size > MAX_MESSAGE_BYTES {
                failed += 1;
                continue;
            }
            if requests == 0 || entries >= MAX_BATCH || bytes.saturating_add(size) > MAX_BATCH_BYTES {
                requests += 1;
                (entries, bytes) = (0, 0);
            }
            entries += 1;
            bytes += size;
            sent += 1;
            let visible = now + f64::from(delay_seconds(timer.fire_at, now));
            st.next_id += 1;
            let seq = st.next_id;
            let bell = Bell {
                message_id: format!("d-{seq}"),
                body,
                receive_count: 0,
            };
            st.waiting.insert((micros(visible), seq), bell);
        }
        st.rung += sent;
        drop(st);
        // in the worker's time (it waits for the answer before its inline flush)
        self.queue
            .standard_requests(SEND, "SendMessageBatch", requests, sent);
        failed
    }
}

/// The doorbell queue as the handler sees it: `handle_doorbells` re-delays an early
/// doorbell on it (`ChangeMessageVisibility`); nothing else is asked of it here.
#[async_trait]
impl Queue for SimDoorbells {
    /// Nothing publishes events on the doorbell queue: the worker rings it through
    /// [`Doorbell::ring`].
    async fn publish_batch(&self, _messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        Vec::new()
    }

    /// The simulation hands each invocation its records itself ([`SimDoorbells::receive`]).
    async fn receive(
        &self,
        _max: usize,
        _visibility_seconds: i32,
        _wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, QueueError> {
        Ok(Vec::new())
    }

    /// The trigger deletes what the handler did not report failed ([`SimDoorbells::finish`]).
    async fn delete(&self, _receipt_handle: &str) -> Result<(), QueueError> {
        Ok(())
    }

    async fn change_visibility(&self, receipt_handle: &str, seconds: i32) -> Result<(), QueueError> {
        self.queue
            .standard_requests(CHANGE_VISIBILITY, "ChangeMessageVisibility", 1, 1);
        let at = self.clock.now() + f64::from(seconds.max(0));
        lock(&self.state).released.insert(receipt_handle.to_string(), at);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timer(n: usize, fire_at: f64) -> DueTimer {
        DueTimer {
            execution_id: format!("e{n}"),
            path: "Tick".into(),
            fire_at,
        }
    }

    fn bells(max_concurrency: usize) -> (Arc<ManualClock>, Arc<SimQueue>, SimDoorbells) {
        let clock = Arc::new(ManualClock::new(100.0));
        let queue = Arc::new(SimQueue::new(clock.clone(), 10));
        let doorbells = SimDoorbells::new(clock.clone(), queue.clone(), max_concurrency, 10, 300.0);
        (clock, queue, doorbells)
    }

    /// A commit's near timers go out as `SqsDoorbell` sends them, ten to a
    /// `SendMessageBatch` on the standard queue (not the event queue's send), each visible
    /// after its whole seconds of delay, rounded down.
    #[tokio::test]
    async fn a_ring_is_one_send_per_ten_doorbells_each_delayed_to_its_second() {
        let (_, queue, doorbells) = bells(20);
        let timers: Vec<DueTimer> = (0..12).map(|n| timer(n, 101.5)).collect();
        assert_eq!(doorbells.ring(&timers, 100.0).await, 0);
        let loads = queue.action_loads();
        let sends = loads.iter().find(|a| a.action == SEND).expect("doorbell sends");
        assert_eq!((sends.requests, sends.peak_messages_per_second), (2, 12));
        assert!(
            loads.iter().all(|a| a.action != "SendMessageBatch"),
            "a doorbell counted as an event-queue send: {loads:?}"
        );
        // 1.5 s out: delayed 1 s, then the handler waits the half second left
        assert_eq!(doorbells.next_receive(), Some(101.0));
        assert!(doorbells.receive(100.9).is_empty(), "received before its delay");
        assert_eq!(doorbells.receive(101.0).len(), 10, "one invocation's batch");
    }

    /// At most `DoorbellMaxConcurrency` invocations at once: with every instance in an
    /// invocation no receive starts, and the next starts when the first one ends.
    #[tokio::test]
    async fn invocations_keep_to_the_trigger_concurrency() {
        let (_, _, doorbells) = bells(2);
        let timers: Vec<DueTimer> = (0..30).map(|n| timer(n, 100.5)).collect();
        doorbells.ring(&timers, 100.0).await;
        let first = doorbells.receive(100.0);
        let second = doorbells.receive(100.0);
        assert_eq!((first.len(), second.len()), (10, 10));
        assert!(doorbells.receive(100.0).is_empty(), "a third instance");
        assert_eq!(doorbells.next_receive(), None, "both ends unknown");
        doorbells.finish(&first, &[], 100.7);
        doorbells.finish(&second, &[], 100.6);
        assert_eq!(doorbells.next_receive(), Some(100.6), "the instance freed first");
        assert!(doorbells.receive(100.5).is_empty(), "both instances still busy");
        assert_eq!(doorbells.receive(100.6).len(), 10);
        assert_eq!(doorbells.len(), 10, "the open invocation's ten in flight");
    }

    /// A record reported failed comes back after the queue's visibility timeout; one the
    /// handler re-delayed, when it said; the rest are deleted.
    #[tokio::test]
    async fn failed_records_come_back_and_the_rest_are_deleted() {
        let (clock, _, doorbells) = bells(5);
        let timers: Vec<DueTimer> = (0..3).map(|n| timer(n, 100.2)).collect();
        doorbells.ring(&timers, 100.0).await;
        let records = doorbells.receive(100.0);
        assert_eq!(records.len(), 3);
        clock.set(100.1);
        let receipt = records[1].receipt_handle.clone().expect("receipt");
        doorbells.change_visibility(&receipt, 4).await.expect("re-delay");
        let failed = vec![records[0].message_id.clone(), records[1].message_id.clone()];
        doorbells.finish(&records, &failed, 100.2);
        assert_eq!(doorbells.len(), 2);
        assert_eq!(doorbells.next_receive(), Some(104.1), "the re-delayed one first");
        let again = doorbells.receive(104.1);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].receive_count, 2);
        assert_eq!(doorbells.next_receive(), Some(400.0), "the other waits out 300 s");
    }
}
