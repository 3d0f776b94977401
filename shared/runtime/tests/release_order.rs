//! The promise off the main road: every row a commit writes reaches its target in commit
//! order, with the worker alone, on the paths that commit more than once per record (the
//! release of parked events) or outside the group's order (the operator's commands).
//!
//! A parent with one live region gets `Tick{n}` in order; each is broadcast to the region
//! (a row of the parent's commit), whose trace records the order the Ticks arrived in.
//! Each scenario injects one fault at a drawn commit of the parent: its publish refused,
//! the process dying right after it, or the commit throttled. Then the worker runs alone
//! (worker and sweeper, no relay): the region must have received `1..=n` in order and no
//! row may be left pending for the relay, which would deliver it late, out of order.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::{relay, sweeper, Clock, MemoryQueue, Queue, SqsQueue};
use stm_store::{ExecutionStore, MemoryStore, StoreError, Written};

use common::hooked_store::{Call, HookedStore, StoreHook};
use common::scenarios::Rng;
use common::{event, Stack};

const PARENT: &str = "p";

/// What goes wrong at the chosen commit of the parent.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// The commit lands; the publish right after it is refused (its first entry).
    PublishRefused,
    /// The commit lands; the process dies before it can use the answer.
    Crash,
    /// The commit is refused before it lands (a throttle that outlived the retries).
    Throttle,
}

/// Where a run's executions and events live.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Backend {
    Memory,
    /// DynamoDB and SQS on moto, behind the strict AWS layer.
    Moto,
}

/// The store's hook: counts the parent's commits once armed, and injects the fault at
/// commit `at`.
struct Faults {
    /// The queue whose next publish a [`Fault::PublishRefused`] fails (memory runs only).
    queue: Option<Arc<MemoryQueue>>,
    armed: AtomicBool,
    commits: AtomicUsize,
    at: usize,
    fault: Fault,
    /// The chosen commit passed `before`: its `committed` injects the fault.
    landing: AtomicBool,
    injected: AtomicBool,
}

#[async_trait]
impl StoreHook for Faults {
    async fn before(&self, call: &Call<'_>) -> Result<(), StoreError> {
        let Call::Commit { exe, .. } = call else {
            return Ok(());
        };
        if exe.id != PARENT || !self.armed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let n = self.commits.fetch_add(1, Ordering::SeqCst) + 1;
        if n != self.at {
            return Ok(());
        }
        if self.fault == Fault::Throttle {
            self.injected.store(true, Ordering::SeqCst);
            return Err(StoreError::retryable(
                "ThrottlingException: Rate of requests exceeds the allowed throughput",
            ));
        }
        self.landing.store(true, Ordering::SeqCst);
        Ok(())
    }

    fn committed(&self, _written: &Written) -> Result<(), StoreError> {
        if !self.landing.swap(false, Ordering::SeqCst) {
            return Ok(());
        }
        self.injected.store(true, Ordering::SeqCst);
        match self.fault {
            Fault::PublishRefused => {
                let queue = self.queue.as_ref().expect("a refused publish is a memory run's");
                queue.fail_next_publishes(1);
                Ok(())
            }
            Fault::Crash => Err(StoreError::retryable("the process died after its commit landed")),
            Fault::Throttle => Ok(()),
        }
    }
}

struct Run {
    stack: Stack,
    queue: Arc<dyn Queue>,
    memory_queue: Option<Arc<MemoryQueue>>,
    faults: Arc<HookedStore<Faults>>,
}

impl Run {
    /// The parent created and started, its region live; no fault armed yet.
    async fn new(at: usize, fault: Fault, backend: Backend) -> Run {
        let (store, queue, memory_queue): (Arc<dyn ExecutionStore>, Arc<dyn Queue>, _) = match backend {
            Backend::Memory => {
                let queue = Arc::new(MemoryQueue::new(1000));
                (Arc::new(MemoryStore::new()), queue.clone(), Some(queue))
            }
            Backend::Moto => {
                let parts = common::moto_parts("release", 2, 1000).await;
                let queue = SqsQueue::new(parts.client, parts.urls.queue_url);
                (parts.store, Arc::new(queue), None)
            }
        };
        let faults = Arc::new(HookedStore::new(
            store,
            Faults {
                queue: memory_queue.clone(),
                armed: AtomicBool::new(false),
                commits: AtomicUsize::new(0),
                at,
                fault,
                landing: AtomicBool::new(false),
                injected: AtomicBool::new(false),
            },
        ));
        let plain = Stack::new(faults.clone(), queue.clone());
        let mut stack = plain.redeploy(common::definitions_of("release.stm"));
        stack.worker.driver = stack.worker.driver.clone().with_trace(true);
        stack.control.driver = stack.control.driver.clone().with_trace(true);
        let run = Run {
            stack,
            queue,
            memory_queue,
            faults,
        };
        run.stack
            .control
            .create("Ticker", None, Some(PARENT))
            .await
            .expect("create");
        run.worker_alone().await;
        run.send("Go", json!({})).await;
        run.worker_alone().await;
        assert_eq!(run.region_ticks().await, Vec::<i64>::new());
        run
    }

    fn refuse_next_publish(&self) {
        let queue = self.memory_queue.as_ref().expect("a memory run");
        queue.fail_next_publishes(1);
    }

    fn arm(&self) {
        self.faults.hook.armed.store(true, Ordering::SeqCst);
    }

    fn injected(&self) -> bool {
        self.faults.hook.injected.load(Ordering::SeqCst)
    }

    async fn send(&self, kind: &str, data: serde_json::Value) {
        self.stack
            .control
            .send(PARENT, &event(kind, data))
            .await
            .expect("send");
    }

    async fn tick(&self, n: i64) {
        self.send("Tick", json!({ "n": n })).await;
    }

    /// The worker and the sweeper until nothing moves: no relay run. Two empty receives
    /// in a row count as empty (one SQS receive may miss a message just made visible).
    async fn worker_alone(&self) {
        let settings = EventSourceSettings {
            batch_size: 10,
            visibility_seconds: 2,
            wait_seconds: 0,
        };
        let mut empty = 0;
        for _ in 0..200 {
            let polled = eventsource::poll_once(self.queue.as_ref(), &self.stack.worker, &settings)
                .await
                .expect("poll");
            if polled.received > 0 {
                empty = 0;
                continue;
            }
            empty += 1;
            if empty < 2 {
                continue;
            }
            empty = 0;
            let now = self.stack.clock.now();
            let swept = sweeper::sweep(self.stack.store.as_ref(), self.queue.as_ref(), now)
                .await
                .expect("sweep");
            if swept.fired == 0 {
                return;
            }
        }
        panic!("the worker did not settle in 200 rounds");
    }

    /// One receive, handled: the first record of the queue only.
    async fn one_poll(&self) {
        let settings = EventSourceSettings {
            batch_size: 1,
            visibility_seconds: 2,
            wait_seconds: 0,
        };
        eventsource::poll_once(self.queue.as_ref(), &self.stack.worker, &settings)
            .await
            .expect("poll");
    }

    /// The parent's one region, as its item names it.
    async fn region_id(&self) -> String {
        let parent = self.stack.load(PARENT).await;
        let mut children = parent.children.keys();
        match (children.next(), children.next()) {
            (Some(id), None) => id.clone(),
            _ => panic!("the parent has one region: {:?}", parent.children),
        }
    }

    /// The `n` of every Tick the region took, in the order it took them.
    async fn region_ticks(&self) -> Vec<i64> {
        self.stack
            .store
            .read_trace(&self.region_id().await)
            .await
            .expect("trace")
            .iter()
            .filter(|step| step.get("event_kind").and_then(|k| k.as_str()) == Some("Tick"))
            .filter_map(|step| step.get("event_data")?.get("n")?.as_i64())
            .collect()
    }

    /// The rows still pending for the relay, but status events (a worker without a bus
    /// leaves those to the scheduled relay, which has one).
    async fn left_for_relay(&self) -> Vec<String> {
        let store = self.stack.store.as_ref();
        let spawns = store.pending_spawns().await.expect("spawns");
        let outbox = store.pending_outbox().await.expect("outbox");
        spawns
            .iter()
            .map(|s| format!("spawn of {}", s.child_id))
            .chain(
                outbox
                    .iter()
                    .filter(|e| e.target_id.is_some())
                    .map(|e| format!("{} to {:?}: {:?}", e.event.kind, e.target_id, e.event.data)),
            )
            .collect()
    }

    /// The worker alone delivered everything, in order; then the relay changes nothing.
    async fn assert_in_order(&self, ticks: i64, what: &str) {
        self.worker_alone().await;
        let expected: Vec<i64> = (1..=ticks).collect();
        assert_eq!(
            self.region_ticks().await,
            expected,
            "{what}: with the worker alone"
        );
        assert_eq!(
            self.left_for_relay().await,
            Vec::<String>::new(),
            "{what}: left for the relay"
        );
        relay::relay_pending(self.stack.store.as_ref(), self.queue.as_ref())
            .await
            .expect("relay");
        self.worker_alone().await;
        assert_eq!(self.region_ticks().await, expected, "{what}: after the relay");
        if let Some(queue) = &self.memory_queue {
            assert!(queue.dead_letters().is_empty(), "{what}: dead letters");
        }
    }
}

/// Suspend, park Ticks 1–5, resume, then (or not) Tick 6: the release steps the parked
/// Ticks one commit each. A fault at commit `at` of the parent after the resume.
async fn release(at: usize, fault: Fault, tick_after_resume: bool, backend: Backend) -> Run {
    let run = Run::new(at, fault, backend).await;
    run.stack.control.suspend(PARENT).await.expect("suspend");
    for n in 1..=5 {
        run.tick(n).await;
    }
    run.worker_alone().await;
    assert_eq!(run.stack.parked(PARENT).await.len(), 5);
    run.stack.control.resume(PARENT).await.expect("resume");
    run.arm();
    if tick_after_resume {
        run.tick(6).await;
    }
    run
}

/// The parent's commits after the resume in a run without a fault: the range the fault
/// is drawn from.
async fn release_commits(tick_after_resume: bool) -> usize {
    let run = release(usize::MAX, Fault::Crash, tick_after_resume, Backend::Memory).await;
    let ticks = if tick_after_resume { 6 } else { 5 };
    run.assert_in_order(ticks, "no fault").await;
    run.faults.hook.commits.load(Ordering::SeqCst)
}

#[tokio::test]
async fn a_release_keeps_order_whatever_fails_at_any_of_its_commits() {
    for tick_after_resume in [true, false] {
        let commits = release_commits(tick_after_resume).await;
        assert!(
            commits >= 5,
            "the release commits once per parked event: {commits}"
        );
        let ticks = if tick_after_resume { 6 } else { 5 };
        for fault in [Fault::PublishRefused, Fault::Crash, Fault::Throttle] {
            for at in 1..=commits {
                let run = release(at, fault, tick_after_resume, Backend::Memory).await;
                let what = format!(
                    "{fault:?} at commit {at} of {commits} (Tick 6 after the resume: {tick_after_resume})"
                );
                run.assert_in_order(ticks, &what).await;
                assert!(run.injected(), "{what}: the fault was never injected");
            }
        }
    }
}

/// A drawn mix: several faults in one run, at drawn commits of one release.
#[tokio::test]
async fn a_release_keeps_order_under_drawn_faults() {
    let seed = common::scenarios::env_u64("STM_RELEASE_SEED", 0x5eed_0043);
    let mut rng = Rng::new(seed);
    for round in 0..12 {
        let tick_after_resume = rng.chance(50);
        let fault = [Fault::PublishRefused, Fault::Crash, Fault::Throttle][rng.below(3) as usize];
        let at = 1 + rng.below(7) as usize;
        let run = release(at, fault, tick_after_resume, Backend::Memory).await;
        let ticks = if tick_after_resume { 6 } else { 5 };
        run.assert_in_order(
            ticks,
            &format!("seed {seed:#x} round {round}: {fault:?} at commit {at}"),
        )
        .await;
    }
}

/// Tick 1's publish refused (its record comes back), then the operator suspends and
/// resumes before the redelivery; then Tick 2. The operator's commits write status rows:
/// they must not leave Tick 1's row behind for the relay.
#[tokio::test]
async fn an_operator_status_change_does_not_leave_a_failed_publish_behind() {
    let run = Run::new(usize::MAX, Fault::PublishRefused, Backend::Memory).await;
    run.tick(1).await;
    run.refuse_next_publish();
    run.one_poll().await;
    assert_eq!(
        run.region_ticks().await,
        Vec::<i64>::new(),
        "Tick 1's publish was refused"
    );
    run.stack.control.suspend(PARENT).await.expect("suspend");
    run.stack.control.resume(PARENT).await.expect("resume");
    run.tick(2).await;
    run.assert_in_order(
        2,
        "suspend and resume between a refused publish and its redelivery",
    )
    .await;
}

/// The same with a cooperative cancel, whose `Cancel` is a row of the operator's commit:
/// Tick 1's row must not wait for the relay behind it.
#[tokio::test]
async fn a_cooperative_cancel_does_not_leave_a_failed_publish_behind() {
    let run = Run::new(usize::MAX, Fault::PublishRefused, Backend::Memory).await;
    run.tick(1).await;
    run.refuse_next_publish();
    run.one_poll().await;
    run.stack.control.cancel(PARENT, None).await.expect("cancel");
    run.worker_alone().await;
    assert_eq!(
        run.left_for_relay().await,
        Vec::<String>::new(),
        "left for the relay"
    );
    assert_ne!(
        run.stack.load(PARENT).await.status.as_str(),
        "CANCELLING",
        "the Cancel arrived"
    );
}

/// The release over DynamoDB and SQS on moto, behind the strict AWS layer: a crash after,
/// or a throttle of, a drawn commit of the release (a refused publish needs the memory
/// queue). Over the real store the last block is the item's `rows` attribute, read by key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_keeps_order_over_dynamodb_and_sqs() {
    let seed = common::scenarios::env_u64("STM_RELEASE_SEED", 0x5eed_0043);
    let mut rng = Rng::new(seed);
    for round in 0..4 {
        let tick_after_resume = round % 2 == 0;
        let fault = if round < 2 { Fault::Crash } else { Fault::Throttle };
        let at = 1 + rng.below(5) as usize;
        let run = release(at, fault, tick_after_resume, Backend::Moto).await;
        let ticks = if tick_after_resume { 6 } else { 5 };
        let what = format!("moto, seed {seed:#x} round {round}: {fault:?} at commit {at}");
        run.assert_in_order(ticks, &what).await;
        assert!(run.injected(), "{what}: the fault was never injected");
    }
}
