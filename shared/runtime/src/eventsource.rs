//! The Lambda SQS event source mapping, emulated: what the local stack (`stm local`) and
//! the end-to-end tests run the worker under, so the worker sees exactly what Lambda gives
//! it.
//!
//! A poll receives up to `batch_size` messages (hidden for the visibility timeout), hands
//! them to the worker as the records Lambda's event would carry
//! ([`Worker::handle_invocation`], the body of the worker's Lambda handler), and deletes
//! every record not reported failed (the partial-batch contract). Reported records
//! stay: they reappear after their visibility timeout (or sooner, if the worker released
//! them), and SQS's redrive policy moves one to the dead-letter queue after
//! `maxReceiveCount` receives. The relay and the sweeper run on schedules.
//!
//! Lambda's own event types stay in the Lambda crate, which proves that a record read from
//! Lambda's SQS event equals the record built here from the received message.

use std::collections::HashSet;
use std::time::Duration;

use crate::queue::{Queue, QueueError, ReceivedMessage};
use crate::relay::{self, RelayError, RelaySummary};
use crate::sweeper::{self, SweepError, SweepSummary};
use crate::worker::{Record, Worker};

/// Why a poll or a drain stopped: the queue's receive failed, or the relay or the sweep
/// it ran did. (A handled record the queue cannot delete is no error: it reappears, and
/// the worker dedupes it.)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EventSourceError {
    /// The receive failed; a queue that cannot serve (missing, not FIFO) is the
    /// deployment's problem, and the words say which, as the local stack's log always has.
    #[error(
        "{kind} error: {0}",
        kind = if .0.is_deployment() { "configuration" } else { "queue" }
    )]
    Receive(#[source] QueueError),
    #[error(transparent)]
    Relay(#[from] RelayError),
    #[error(transparent)]
    Sweep(#[from] SweepError),
}

/// The event source mapping's knobs.
#[derive(Debug, Clone, PartialEq)]
pub struct EventSourceSettings {
    /// Records per invocation (SQS FIFO allows at most 10).
    pub batch_size: usize,
    /// The visibility timeout of a received batch (Lambda uses the queue's).
    pub visibility_seconds: i32,
    /// Long-poll wait per receive.
    pub wait_seconds: i32,
}

impl Default for EventSourceSettings {
    fn default() -> Self {
        EventSourceSettings {
            batch_size: 10,
            visibility_seconds: 30,
            wait_seconds: 1,
        }
    }
}

/// What one poll did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PollOutcome {
    pub received: usize,
    pub deleted: usize,
    /// The message ids the handler reported failed.
    pub failed: Vec<String>,
}

/// Receive one batch, invoke the worker's handler with it, delete what succeeded.
pub async fn poll_once(
    queue: &dyn Queue,
    worker: &Worker,
    settings: &EventSourceSettings,
) -> Result<PollOutcome, EventSourceError> {
    let messages = queue
        .receive(
            settings.batch_size,
            settings.visibility_seconds,
            settings.wait_seconds,
        )
        .await
        .map_err(EventSourceError::Receive)?;
    if messages.is_empty() {
        return Ok(PollOutcome::default());
    }
    Ok(invoke_worker(queue, worker, &messages).await)
}

/// One worker invocation on a received batch, as Lambda's event source makes it: the
/// handler with the batch's records, then the partial-batch settle.
async fn invoke_worker(queue: &dyn Queue, worker: &Worker, messages: &[ReceivedMessage]) -> PollOutcome {
    let records: Vec<Record> = messages.iter().map(Record::from_received).collect();
    let failed = worker.handle_invocation(&records, None).await;
    settle(queue, messages, &failed).await
}

/// The partial-batch contract, as the event source mapping applies it: delete every
/// message the handler did not report failed; the reported ones stay for redelivery.
async fn settle(queue: &dyn Queue, messages: &[ReceivedMessage], failed_ids: &[String]) -> PollOutcome {
    let failed: HashSet<&str> = failed_ids.iter().map(String::as_str).collect();
    let mut outcome = PollOutcome {
        received: messages.len(),
        ..PollOutcome::default()
    };
    for m in messages {
        if failed.contains(m.message_id.as_str()) {
            outcome.failed.push(m.message_id.clone());
            continue;
        }
        match queue.delete(&m.receipt_handle).await {
            Ok(()) => outcome.deleted += 1,
            // the message reappears after its visibility timeout; the handler dedupes it
            Err(err) => {
                tracing::warn!(message_id = %m.message_id, error = %err, "could not delete a handled message")
            }
        }
    }
    outcome
}

/// What [`drain`] did, summed over its rounds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DrainOutcome {
    pub polls: usize,
    pub handled: usize,
    pub failed: usize,
    pub relayed: RelaySummary,
    pub swept: SweepSummary,
}

/// Run the stack until it is quiet: poll, and when a poll finds nothing, run the relay
/// and the sweeper (at `now()`); stop once a full round moved nothing (or after
/// `max_rounds`). For tests and one-shot local runs.
pub async fn drain(
    queue: &dyn Queue,
    worker: &Worker,
    settings: &EventSourceSettings,
    now: impl Fn() -> f64,
    max_rounds: usize,
) -> Result<DrainOutcome, EventSourceError> {
    let mut total = DrainOutcome::default();
    let store = worker.driver.store.as_ref();
    for _ in 0..max_rounds {
        let polled = poll_once(queue, worker, settings).await?;
        total.polls += 1;
        total.handled += polled.deleted;
        total.failed += polled.failed.len();
        if polled.received > 0 {
            continue;
        }
        let bus = worker.status_bus.as_deref();
        let relayed = relay::relay_pending_until(
            store,
            queue,
            bus,
            None,
            f64::INFINITY,
            relay::RelayBounds::default(),
        )
        .await?;
        let swept = sweeper::sweep(store, queue, now()).await?;
        let moved = relayed.forwarded + swept.fired;
        total.relayed.forwarded += relayed.forwarded;
        total.relayed.failed += relayed.failed;
        total.swept.fired += swept.fired;
        if moved == 0 {
            return Ok(total);
        }
    }
    Ok(total)
}

/// The schedules of the local stack.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedules {
    pub relay_every: Duration,
    pub sweep_every: Duration,
}

/// Receive one batch of precise-timer doorbells (a standard queue), invoke the sweeper's
/// doorbell handler with it as Lambda would, delete what succeeded.
pub async fn poll_doorbells_once(
    doorbells: &dyn Queue,
    store: &dyn stm_store::ExecutionStore,
    queue: &dyn Queue,
    now: &(dyn Fn() -> f64 + Send + Sync),
    wait_seconds: i32,
) -> Result<PollOutcome, EventSourceError> {
    let messages = doorbells
        .receive(10, 30, wait_seconds)
        .await
        .map_err(EventSourceError::Receive)?;
    if messages.is_empty() {
        return Ok(PollOutcome::default());
    }
    Ok(answer_doorbells(doorbells, store, queue, &messages, now).await)
}

/// One sweeper invocation on a received batch of doorbells, then the partial-batch settle.
async fn answer_doorbells(
    doorbells: &dyn Queue,
    store: &dyn stm_store::ExecutionStore,
    queue: &dyn Queue,
    messages: &[ReceivedMessage],
    now: &(dyn Fn() -> f64 + Send + Sync),
) -> PollOutcome {
    let records: Vec<Record> = messages.iter().map(Record::from_received).collect();
    let (failed, _) = crate::doorbell::handle_doorbells(store, queue, &records, now, Some(doorbells)).await;
    settle(doorbells, messages, &failed).await
}

/// Batches the local stack hands to a function at once, per queue: Lambda's SQS pollers
/// start with five concurrent invocations (*Configuring scaling behavior for SQS event
/// source mappings*). A handler waiting out one batch (a doorbell's sub-second remainder,
/// a record's DynamoDB calls) must not hold up the batches of other message groups; SQS
/// keeps one batch of a FIFO group in flight at a time, so a group's order holds.
const START_INVOCATIONS: usize = 5;

/// Between empty short polls (`wait_seconds` 0), a pause, so an idle poller does not
/// spin. (Short polls keep moto responsive: its long polls hold the server.)
async fn idle(wait_seconds: i32) {
    if wait_seconds <= 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Poll `queue` until `stop` turns true with up to [`START_INVOCATIONS`] handlers running
/// at once: a free invocation first, then a batch for it, handed to `invoke` on a task of
/// its own. `what` names the poller in its log. The invocations under way finish their
/// batches before it returns.
async fn poll_concurrently<F, Fut>(
    queue: std::sync::Arc<dyn Queue>,
    batch_size: usize,
    visibility_seconds: i32,
    wait_seconds: i32,
    what: &'static str,
    mut stop: tokio::sync::watch::Receiver<bool>,
    invoke: F,
) where
    F: Fn(Vec<ReceivedMessage>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let invocations = std::sync::Arc::new(tokio::sync::Semaphore::new(START_INVOCATIONS));
    let mut running = tokio::task::JoinSet::new();
    loop {
        if *stop.borrow() {
            break;
        }
        let Ok(invocation) = invocations.clone().acquire_owned().await else {
            break;
        };
        while running.try_join_next().is_some() {}
        match queue.receive(batch_size, visibility_seconds, wait_seconds).await {
            Ok(messages) if messages.is_empty() => idle(wait_seconds).await,
            Ok(messages) => {
                let handled = invoke(messages);
                running.spawn(async move {
                    handled.await;
                    drop(invocation);
                });
            }
            Err(err) => {
                // a warning, not an error: nothing is lost (the messages stay queued) and
                // the poller tries again, as Lambda's does; an emulator kept busy by
                // thousands of children at once times a receive out now and then
                tracing::warn!(error = %err, poller = what, "receive failed; retrying in 1 s");
                tokio::select! {
                    _ = stop.changed() => break,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
    while running.join_next().await.is_some() {}
}

/// Run the worker poller, the relay and the sweeper until `stop` turns true: the whole
/// system on one machine, each handler called as Lambda would call it.
pub async fn run(
    queue: std::sync::Arc<dyn Queue>,
    worker: Worker,
    settings: EventSourceSettings,
    schedules: Schedules,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(), EventSourceError> {
    run_with_doorbells(queue, worker, settings, schedules, None, stop).await
}

/// [`run`], plus a poller of the precise-timer doorbell queue calling the sweeper's
/// doorbell handler (its SQS trigger on AWS).
pub async fn run_with_doorbells(
    queue: std::sync::Arc<dyn Queue>,
    worker: Worker,
    settings: EventSourceSettings,
    schedules: Schedules,
    doorbells: Option<std::sync::Arc<dyn Queue>>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(), EventSourceError> {
    let store = worker.driver.store.clone();
    let clock = worker.driver.clock.clone();
    let status_bus = worker.status_bus.clone();
    let wait_seconds = settings.wait_seconds;
    let doorbell_poller = doorbells.map(|doorbells| {
        let (store, queue, clock) = (store.clone(), queue.clone(), clock.clone());
        tokio::spawn(poll_concurrently(
            doorbells.clone(),
            10,
            30,
            wait_seconds,
            "doorbells",
            stop.clone(),
            move |messages| {
                let (doorbells, store, queue, clock) =
                    (doorbells.clone(), store.clone(), queue.clone(), clock.clone());
                async move {
                    let now = move || clock.now();
                    answer_doorbells(
                        doorbells.as_ref(),
                        store.as_ref(),
                        queue.as_ref(),
                        &messages,
                        &now,
                    )
                    .await;
                }
            },
        ))
    });
    // the poller runs on its own task: a schedule tick must never cancel a batch midway
    let worker_queue = queue.clone();
    let poller = tokio::spawn(poll_concurrently(
        queue.clone(),
        settings.batch_size,
        settings.visibility_seconds,
        settings.wait_seconds,
        "worker",
        stop.clone(),
        move |messages| {
            let (queue, worker) = (worker_queue.clone(), worker.clone());
            async move {
                let outcome = invoke_worker(queue.as_ref(), &worker, &messages).await;
                tracing::debug!(
                    received = outcome.received,
                    deleted = outcome.deleted,
                    failed = outcome.failed.len(),
                    "worker invocation"
                );
            }
        },
    ));
    let mut relay_tick = tokio::time::interval(schedules.relay_every);
    let mut sweep_tick = tokio::time::interval(schedules.sweep_every);
    relay_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    sweep_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if *stop.borrow() {
            break;
        }
        tokio::select! {
            _ = stop.changed() => break,
            _ = relay_tick.tick() => {
                // the relay function's status bus is the worker's (one configuration)
                let bus = status_bus.as_deref();
                let run = relay::relay_pending_until(
                    store.as_ref(),
                    queue.as_ref(),
                    bus,
                    None,
                    f64::INFINITY,
                    relay::RelayBounds::default(),
                );
                if let Err(err) = run.await {
                    tracing::error!(error = %err, "relay run failed");
                }
            }
            _ = sweep_tick.tick() => {
                if let Err(err) = sweeper::sweep(store.as_ref(), queue.as_ref(), clock.now()).await {
                    tracing::error!(error = %err, "sweep failed");
                }
                // the canaries' rollbacks: the sweeper function's schedule does the same
                let bus = status_bus.as_deref();
                if let Err(err) = crate::rollout::evaluate_on(store.as_ref(), bus, clock.now()).await {
                    tracing::error!(error = %err, "the rollouts' evaluation failed");
                }
            }
        }
    }
    // let the pollers finish their current batch
    let _ = poller.await;
    if let Some(doorbell_poller) = doorbell_poller {
        let _ = doorbell_poller.await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::queue::{MemoryQueue, OutgoingMessage};

    /// What the test's invocations saw: how many ran at once (now, and at most), the groups
    /// in flight, the messages handled.
    #[derive(Default)]
    struct Probe {
        running: AtomicUsize,
        most: AtomicUsize,
        groups_in_flight: Mutex<Vec<String>>,
        handled: AtomicUsize,
    }

    /// The local poller hands up to five batches to the function at once, as Lambda's
    /// pollers start, and never two of one FIFO group: eight groups' messages, one a batch,
    /// each invocation held a while.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn five_invocations_at_once_and_one_batch_of_a_group_at_a_time() {
        let queue: Arc<dyn Queue> = Arc::new(MemoryQueue::default());
        let mut messages = Vec::new();
        for group in 0..8 {
            for n in 0..3 {
                let mut event = stm_core::Event::new("Ping");
                event.id = format!("g{group}-{n}");
                messages.push(OutgoingMessage::event(&format!("g{group}"), &event));
            }
        }
        assert!(queue.publish_batch(&messages).await.is_empty());
        let probe = Arc::new(Probe::default());
        let (stop_tx, stop) = tokio::sync::watch::channel(false);
        let poller = {
            let (queue, probe) = (queue.clone(), probe.clone());
            tokio::spawn(poll_concurrently(
                queue.clone(),
                1,
                30,
                0,
                "test",
                stop,
                move |received| {
                    let (queue, probe) = (queue.clone(), probe.clone());
                    async move {
                        let group = received[0].group_id.clone().unwrap_or_default();
                        {
                            let mut in_flight = probe.groups_in_flight.lock().expect("groups");
                            assert!(!in_flight.contains(&group), "two batches of {group} at once");
                            in_flight.push(group.clone());
                        }
                        let now = probe.running.fetch_add(1, Ordering::SeqCst) + 1;
                        probe.most.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(30)).await;
                        probe.running.fetch_sub(1, Ordering::SeqCst);
                        probe
                            .groups_in_flight
                            .lock()
                            .expect("groups")
                            .retain(|g| *g != group);
                        settle(queue.as_ref(), &received, &[]).await;
                        probe.handled.fetch_add(received.len(), Ordering::SeqCst);
                    }
                },
            ))
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while probe.handled.load(Ordering::SeqCst) < 24 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop_tx.send(true).expect("stop");
        poller.await.expect("the poller ends");
        assert_eq!(probe.handled.load(Ordering::SeqCst), 24, "every message handled");
        assert_eq!(
            probe.most.load(Ordering::SeqCst),
            START_INVOCATIONS,
            "invocations at once"
        );
    }
}
