//! Precise timers (`stm_runtime::doorbell`) through the real worker and the sweeper's
//! doorbell handler, on a manual clock: a near timer rings a doorbell delayed to its
//! `fire_at`; answering it fires the timer then, not at the next sweep; a doorbell whose
//! timer was cancelled or re-armed is dropped (the state is not timed out early); a timer
//! past the 15-minute horizon gets no doorbell and is left to the sweep.

mod common;

use std::sync::Arc;

use serde_json::json;
use stm_core::Status;
use stm_runtime::doorbell::{self, MemoryDoorbell};
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::{
    ActionRegistry, Clock, Control, Definitions, Driver, ManualClock, MemoryQueue, Record, Worker,
    WorkerSettings,
};
use stm_store::{DueTimer, ExecutionStore, MemoryStore};

const T0: f64 = 1_700_000_000.0;

struct Rig {
    store: Arc<MemoryStore>,
    queue: Arc<MemoryQueue>,
    clock: Arc<ManualClock>,
    bell: Arc<MemoryDoorbell>,
    worker: Worker,
    control: Control,
}

impl Rig {
    fn new() -> Rig {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/machines/timers.stm");
        let mut defs = Definitions::new();
        for defn in stm_runtime::config::load_file(&file).expect("timers.stm") {
            defs.register(defn);
        }
        let store = Arc::new(MemoryStore::new());
        let queue = Arc::new(MemoryQueue::new(50));
        let clock = Arc::new(ManualClock::new(T0));
        let driver =
            Driver::new(store.clone(), defs, ActionRegistry::with_builtins()).with_clock(clock.clone());
        let bell = MemoryDoorbell::new();
        let worker =
            Worker::new(driver.clone(), queue.clone(), WorkerSettings::default()).with_doorbell(bell.clone());
        let control = Control::new(driver, queue.clone());
        Rig {
            store,
            queue,
            clock,
            bell,
            worker,
            control,
        }
    }

    /// Deliver what is queued (the worker only: no relay, no sweep).
    async fn deliver(&self) {
        let settings = EventSourceSettings {
            wait_seconds: 0,
            ..EventSourceSettings::default()
        };
        while eventsource::poll_once(self.queue.as_ref(), &self.worker, &settings)
            .await
            .expect("poll")
            .received
            > 0
        {}
    }

    /// Answer the doorbells visible now, as the sweeper's SQS trigger would.
    async fn answer_doorbells(&self) -> (usize, usize, usize) {
        let visible = self.bell.take_visible(self.clock.now());
        let event: Vec<Record> = visible
            .iter()
            .enumerate()
            .map(|(i, timer)| doorbell_record(&format!("bell-{i}"), &doorbell::doorbell_body(timer)))
            .collect();
        let clock = self.clock.clone();
        let (failed, summary) = doorbell::handle_doorbells(
            self.store.as_ref(),
            self.queue.as_ref(),
            &event,
            &move || clock.now(),
            None,
        )
        .await;
        (visible.len(), summary.fired, failed.len())
    }

    async fn create(&self, id: &str, delay: f64) {
        let seed = json!({"delay": delay}).as_object().cloned().unwrap_or_default();
        self.control
            .create("Doorbell", Some(seed), Some(id))
            .await
            .expect("create");
        self.deliver().await;
    }

    async fn send(&self, id: &str, kind: &str) {
        self.control
            .send(id, &common::event(kind, json!({})))
            .await
            .expect("send");
        self.deliver().await;
    }

    async fn path(&self, id: &str) -> (Option<String>, Status) {
        let exe = self.store.load(id).await.expect("load").expect("exists");
        (exe.active_path, exe.status)
    }
}

#[tokio::test]
async fn a_near_timer_fires_when_its_doorbell_rings_not_at_the_next_sweep() {
    let rig = Rig::new();
    rig.create("d1", 5.0).await;
    assert_eq!(rig.bell.len(), 1, "one doorbell for the 5 s timer");
    rig.clock.set(T0 + 4.9);
    assert_eq!(rig.answer_doorbells().await, (0, 0, 0), "still delayed");
    rig.clock.set(T0 + 5.0);
    assert_eq!(rig.answer_doorbells().await, (1, 1, 0), "rung, fired");
    rig.deliver().await;
    assert_eq!(rig.path("d1").await, (Some("Expired".into()), Status::Done));
    assert!(
        rig.store
            .due_timers(f64::INFINITY)
            .await
            .expect("timers")
            .is_empty(),
        "deleted"
    );
}

#[tokio::test]
async fn a_doorbell_for_a_cancelled_or_rearmed_timer_is_dropped() {
    let rig = Rig::new();
    rig.create("d2", 5.0).await; // armed for T0 + 5
    rig.clock.set(T0 + 2.0);
    rig.send("d2", "Leave").await; // cancelled
    rig.clock.set(T0 + 3.0);
    rig.send("d2", "Back").await; // re-armed for T0 + 8
    assert_eq!(rig.bell.len(), 2);
    rig.clock.set(T0 + 5.0);
    assert_eq!(
        rig.answer_doorbells().await,
        (1, 0, 0),
        "the stale doorbell fires nothing"
    );
    rig.deliver().await;
    assert_eq!(
        rig.path("d2").await.0.as_deref(),
        Some("Waiting"),
        "not timed out early"
    );
    rig.clock.set(T0 + 8.0);
    assert_eq!(rig.answer_doorbells().await, (1, 1, 0));
    rig.deliver().await;
    assert_eq!(rig.path("d2").await.0.as_deref(), Some("Expired"));
}

#[tokio::test]
async fn a_doorbell_answered_early_waits_or_is_retried() {
    let rig = Rig::new();
    rig.create("d3", 30.0).await;
    let timer = DueTimer {
        execution_id: "d3".into(),
        path: rig.store.due_timers(f64::INFINITY).await.expect("timers")[0]
            .path
            .clone(),
        fire_at: T0 + 30.0,
    };
    // delivered far too early (a clock behind, or a bad delay): reported, retried later
    let event = [doorbell_record("early", &doorbell::doorbell_body(&timer))];
    let now = || T0 + 10.0;
    let (failed, summary) =
        doorbell::handle_doorbells(rig.store.as_ref(), rig.queue.as_ref(), &event, &now, None).await;
    assert_eq!(failed.len(), 1);
    assert_eq!(summary.fired, 0);
    // a fraction early (delays are whole seconds): it waits, then fires
    let now = || T0 + 29.95;
    let (failed, summary) =
        doorbell::handle_doorbells(rig.store.as_ref(), rig.queue.as_ref(), &event, &now, None).await;
    assert!(failed.is_empty());
    assert_eq!(summary.fired, 1);
    // a malformed doorbell is dropped with a log line, not retried forever
    let bad = [doorbell_record("bad", "{}")];
    let (failed, _) =
        doorbell::handle_doorbells(rig.store.as_ref(), rig.queue.as_ref(), &bad, &now, None).await;
    assert!(failed.is_empty());
}

/// A doorbell as the sweeper's trigger delivers it.
fn doorbell_record(message_id: &str, body: &str) -> Record {
    Record {
        message_id: message_id.into(),
        body: body.into(),
        ..Record::default()
    }
}

/// A queue that notes, on `now`, when each message was published.
struct Stamping {
    inner: Arc<MemoryQueue>,
    now: Box<dyn Fn() -> f64 + Send + Sync>,
    at: std::sync::Mutex<Vec<f64>>,
}

#[async_trait::async_trait]
impl stm_runtime::Queue for Stamping {
    async fn publish_batch(
        &self,
        messages: &[stm_runtime::OutgoingMessage],
    ) -> Vec<stm_runtime::queue::PublishFailure> {
        let at = (self.now)();
        self.at.lock().unwrap_or_else(|e| e.into_inner()).push(at);
        self.inner.publish_batch(messages).await
    }
    async fn receive(
        &self,
        max: usize,
        visibility_seconds: i32,
        wait_seconds: i32,
    ) -> Result<Vec<stm_runtime::queue::ReceivedMessage>, stm_runtime::queue::QueueError> {
        self.inner.receive(max, visibility_seconds, wait_seconds).await
    }
    async fn delete(&self, receipt_handle: &str) -> Result<(), stm_runtime::queue::QueueError> {
        self.inner.delete(receipt_handle).await
    }
    async fn change_visibility(
        &self,
        receipt_handle: &str,
        seconds: i32,
    ) -> Result<(), stm_runtime::queue::QueueError> {
        self.inner.change_visibility(receipt_handle, seconds).await
    }
}

#[tokio::test]
async fn a_doorbell_is_delayed_whole_seconds_rounded_down_and_fires_at_fire_at_never_before() {
    let rig = Rig::new();
    rig.create("d5", 4.3).await; // due at T0 + 4.3: rung with DelaySeconds 4
    assert!(rig.bell.take_visible(T0 + 3.9).is_empty(), "still delayed");
    let visible = rig.bell.take_visible(T0 + 4.0);
    assert_eq!(visible.len(), 1, "visible after 4 s, 0.3 s before it is due");
    let event = [doorbell_record("bell", &doorbell::doorbell_body(&visible[0]))];
    // the handler's clock runs from T0 + 4 in real time: it has to wait the remainder
    let started = std::time::Instant::now();
    let now = move || T0 + 4.0 + started.elapsed().as_secs_f64();
    let stamping = Stamping {
        inner: rig.queue.clone(),
        now: Box::new(now),
        at: std::sync::Mutex::default(),
    };
    let (failed, summary) =
        doorbell::handle_doorbells(rig.store.as_ref(), &stamping, &event, &now, None).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(summary.fired, 1);
    let published = stamping.at.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(published.len(), 1, "one Timeout");
    assert!(
        published[0] >= T0 + 4.3,
        "published {:.3} s before it was due",
        T0 + 4.3 - published[0]
    );
    rig.deliver().await;
    assert_eq!(rig.path("d5").await, (Some("Expired".into()), Status::Done));
}

#[tokio::test]
async fn far_timers_get_no_doorbell_and_the_sweep_still_fires_them() {
    let rig = Rig::new();
    rig.create("far", 3600.0).await;
    assert!(rig.bell.is_empty(), "past the 15-minute horizon");
    rig.clock.set(T0 + 3600.0);
    let swept = stm_runtime::sweeper::sweep(rig.store.as_ref(), rig.queue.as_ref(), T0 + 3600.0)
        .await
        .expect("sweep");
    assert_eq!(swept.fired, 1);
    rig.deliver().await;
    assert_eq!(rig.path("far").await.0.as_deref(), Some("Expired"));
}

/// The same through real SQS delays on moto: a 3 s timer fires ~3 s after it was armed, by
/// its doorbell alone (no sweep runs here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_sqs_a_doorbell_fires_its_timer_on_time() {
    use stm_runtime::doorbell::SqsDoorbell;
    use stm_runtime::{Queue, SqsQueue, SystemClock};
    use stm_store::{CreateOptions, DynamoDbStore};
    let moto = stm_testkit::moto().await;
    let prefix = stm_testkit::unique_prefix("doorbell");
    let store = Arc::new(
        DynamoDbStore::create_with(
            Some(moto.endpoint()),
            stm_testkit::REGION,
            CreateOptions {
                prefix: prefix.clone(),
                ..CreateOptions::default()
            },
        )
        .await
        .expect("tables"),
    );
    let sqs = SqsQueue::client(Some(moto.endpoint()), stm_testkit::REGION).await;
    let urls = SqsQueue::ensure(&sqs, &format!("{prefix}-events"), 30, 10)
        .await
        .expect("queue");
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(sqs.clone(), urls.queue_url.clone()));
    let bell_url = SqsDoorbell::ensure(&sqs, &format!("{prefix}-timers"))
        .await
        .expect("doorbells");
    let doorbells = SqsQueue::new(sqs.clone(), bell_url.clone());
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/machines/timers.stm");
    let mut defs = Definitions::new();
    for defn in stm_runtime::config::load_file(&file).expect("timers.stm") {
        defs.register(defn);
    }
    let driver =
        Driver::new(store.clone(), defs, ActionRegistry::with_builtins()).with_clock(Arc::new(SystemClock));
    let worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default())
        .with_doorbell(Arc::new(SqsDoorbell::new(sqs.clone(), bell_url)));
    let control = Control::new(driver, queue.clone());
    let seed = json!({"delay": 3.0}).as_object().cloned().unwrap_or_default();
    control
        .create("Doorbell", Some(seed), Some("bell-1"))
        .await
        .expect("create");
    let settings = EventSourceSettings {
        wait_seconds: 0,
        ..EventSourceSettings::default()
    };
    let now = || SystemClock.now();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut rung = 0;
    loop {
        eventsource::poll_once(queue.as_ref(), &worker, &settings)
            .await
            .expect("poll");
        let polled = eventsource::poll_doorbells_once(&doorbells, store.as_ref(), queue.as_ref(), &now, 0)
            .await
            .expect("doorbells");
        assert!(polled.failed.is_empty(), "a doorbell was not handled: {polled:?}");
        rung += polled.deleted;
        let exe = store.load("bell-1").await.expect("load").expect("exists");
        if exe.status == Status::Done {
            let due = exe.created_at.unwrap_or_default() + 3.0;
            let late = exe.finished_at.unwrap_or_default() - due;
            eprintln!("doorbell timer lateness on moto: {late:.3} s");
            assert!((0.0..3.0).contains(&late), "fired {late:.3} s after due");
            assert_eq!(rung, 1, "by its doorbell");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the timer never fired: {exe:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
