//! Shared by the end-to-end tests: the scenario machines, a queue-driven stack over any
//! store and queue, the comparison with the embedded runner, the seam of the stores that
//! fail on purpose (`hooked_store`), the queue that records its releases (`releases`) and
//! the test's view of the queue under test.
#![allow(dead_code)]

pub mod faulty;
pub mod hooked_store;
pub mod queue_view;
pub mod releases;
pub mod scenarios;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use stm_core::{Event, Execution, Map};
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::{
    ActionRegistry, Clock, Control, Definitions, Driver, ManualClock, Queue, Worker, WorkerSettings,
};
use stm_store::ExecutionStore;

pub const START: f64 = 1_700_000_000.0;

/// The interpreter with harel 0.9.0 and boto3: `STM_PYTHON`, else the repo's venv.
#[allow(unused_imports)] // a test binary that compares nothing with harel leaves it unused
pub use stm_testkit::python;

pub fn machines_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/machines/scenarios.stm")
}

pub fn definitions() -> Definitions {
    definitions_of("scenarios.stm")
}

/// The machines of `tests/machines/NAME`, validated.
pub fn definitions_of(name: &str) -> Definitions {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/machines")
        .join(name);
    let mut defs = Definitions::new();
    for defn in
        stm_runtime::config::load_file(&file).unwrap_or_else(|e| panic!("{name} loads and validates: {e}"))
    {
        defs.register(defn);
    }
    defs
}

/// The machines of `source`, validated as a `.stm` file is. Each call writes a file of its
/// own (tests run in parallel: one that rewrote a shared file while another read it made
/// the reader see it empty), and removes it once loaded.
pub fn definitions_from(source: &str) -> Definitions {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!("stm-runtime-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join(format!("machines-{}.stm", CALLS.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&file, source).expect("machines written");
    let loaded = stm_runtime::config::load_file(&file);
    let _ = std::fs::remove_file(&file);
    let mut defs = Definitions::new();
    for defn in loaded.unwrap_or_else(|e| panic!("the test machines load and validate: {e}")) {
        defs.register(defn);
    }
    defs
}

/// The queue-driven system: worker (through the event-source emulation), relay, sweeper,
/// control plane, on one manual clock.
#[allow(missing_debug_implementations)] // a test fixture: its parts are shown one by one
pub struct Stack {
    pub store: Arc<dyn ExecutionStore>,
    pub queue: Arc<dyn Queue>,
    pub worker: Worker,
    pub control: Control,
    pub clock: Arc<ManualClock>,
    pub settings: EventSourceSettings,
}

impl Stack {
    pub fn new(store: Arc<dyn ExecutionStore>, queue: Arc<dyn Queue>) -> Self {
        let clock = Arc::new(ManualClock::new(START));
        Stack::with_clock(store, queue, clock.clone(), clock)
    }

    /// A stack whose driver records a trace step per event (`STM_TRACE=true`).
    pub fn traced(store: Arc<dyn ExecutionStore>, queue: Arc<dyn Queue>) -> Self {
        let clock = Arc::new(ManualClock::new(START));
        let mut stack = Stack::with_clock(store, queue, clock.clone(), clock);
        stack.worker.driver = stack.worker.driver.clone().with_trace(true);
        stack.control.driver = stack.control.driver.clone().with_trace(true);
        stack
    }

    /// A stack whose driver runs on the wall clock (latency measurements).
    pub fn realtime(store: Arc<dyn ExecutionStore>, queue: Arc<dyn Queue>) -> Self {
        Stack::with_clock(
            store,
            queue,
            Arc::new(stm_runtime::SystemClock),
            Arc::new(ManualClock::new(START)),
        )
    }

    /// The same tables, queue and clock with other machines: a new deploy of the worker.
    pub fn redeploy(&self, definitions: Definitions) -> Stack {
        let clock = self.clock.clone();
        Stack::with_definitions(
            self.store.clone(),
            self.queue.clone(),
            clock.clone(),
            clock,
            definitions,
        )
    }

    fn with_clock(
        store: Arc<dyn ExecutionStore>,
        queue: Arc<dyn Queue>,
        driver_clock: Arc<dyn Clock>,
        clock: Arc<ManualClock>,
    ) -> Self {
        Stack::with_definitions(store, queue, driver_clock, clock, definitions())
    }

    fn with_definitions(
        store: Arc<dyn ExecutionStore>,
        queue: Arc<dyn Queue>,
        driver_clock: Arc<dyn Clock>,
        clock: Arc<ManualClock>,
        definitions: Definitions,
    ) -> Self {
        let driver =
            Driver::new(store.clone(), definitions, ActionRegistry::with_builtins()).with_clock(driver_clock);
        let worker = Worker::new(
            driver.clone(),
            queue.clone(),
            WorkerSettings {
                inline_flush: true,
                suspend_recheck_seconds: 1,
                suspend_recheck_max_seconds: 1,
                poison_retry_seconds: 1,
                // no back-off: a throttled, conflicting or failing record comes straight
                // back, since this stack waits for redeliveries in real time
                retry_seconds: 0,
                retry_max_seconds: 0,
                ..WorkerSettings::default()
            },
        );
        let control = Control::new(driver, queue.clone());
        let settings = EventSourceSettings {
            batch_size: 10,
            visibility_seconds: 2,
            wait_seconds: 0,
        };
        Stack {
            store,
            queue,
            worker,
            control,
            clock,
            settings,
        }
    }

    /// Run worker, relay and sweeper until nothing moves.
    pub async fn drain(&self) {
        let clock = self.clock.clone();
        eventsource::drain(
            self.queue.as_ref(),
            &self.worker,
            &self.settings,
            move || clock.now(),
            200,
        )
        .await
        .expect("drain");
    }

    pub async fn load(&self, id: &str) -> Execution {
        self.store
            .load(id)
            .await
            .expect("load")
            .unwrap_or_else(|| panic!("no execution {id}"))
    }

    /// Create execution `id` of `machine` and run its start (inline, as `stm run` does).
    pub async fn start(&self, machine: &str, id: &str) -> Execution {
        let mut exe = self
            .worker
            .driver
            .new_execution(machine, None, Some(id))
            .await
            .expect("new execution");
        self.worker
            .driver
            .run_step(&mut exe, None)
            .await
            .expect("started");
        exe
    }

    /// The events waiting on execution `id` (parked), oldest first.
    pub async fn parked(&self, id: &str) -> Vec<stm_core::Event> {
        let exe = self.load(id).await;
        stm_store::waiting_on(self.store.as_ref(), &exe, usize::MAX)
            .await
            .expect("parked events")
    }

    pub async fn children(&self, exe: &Execution) -> Vec<Execution> {
        let mut out = Vec::new();
        for id in exe.children.keys() {
            if let Some(child) = self.store.load(id).await.expect("load child") {
                out.push(child);
            }
        }
        out
    }
}

pub fn event(kind: &str, data: Value) -> Event {
    Event::with_data(kind, data.as_object().cloned().unwrap_or_default())
}

pub fn object(v: Value) -> Map {
    v.as_object().cloned().unwrap_or_default()
}

/// What must match between the two runners: everything a user sees of the state, not
/// the bookkeeping (versions, timestamps, event counters) that differs by path.
pub fn observable(exe: &Execution) -> Value {
    let children: Map = exe
        .children
        .iter()
        .map(|(id, cs)| {
            (
                id.clone(),
                json!({"finished": cs.finished, "outcome": cs.outcome, "result": cs.result}),
            )
        })
        .collect();
    json!({
        "status": exe.status.as_str(),
        "outcome": exe.outcome,
        "error": exe.error,
        "active_path": exe.active_path,
        "context": exe.context,
        "history": exe.history,
        "children": children,
        "deferred": exe.deferred.iter().map(|e| e.kind.clone()).collect::<Vec<_>>(),
    })
}

/// A fresh table prefix and FIFO queue (+ DLQ) on the test process's moto server.
pub struct MotoParts {
    pub store: Arc<stm_store::DynamoDbStore>,
    pub client: aws_sdk_sqs::Client,
    pub urls: stm_runtime::queue::QueueUrls,
    pub endpoint: String,
    pub prefix: String,
}

pub async fn moto_parts(tag: &str, visibility: i32, max_receive: u32) -> MotoParts {
    moto_parts_with(tag, visibility, max_receive, |options| options).await
}

/// [`moto_parts`] with the store's options as `options` makes them from the defaults (the
/// prefix already set).
pub async fn moto_parts_with(
    tag: &str,
    visibility: i32,
    max_receive: u32,
    options: impl FnOnce(stm_store::CreateOptions) -> stm_store::CreateOptions,
) -> MotoParts {
    use stm_runtime::queue::SqsQueue;
    let moto = stm_testkit::moto().await;
    let prefix = stm_testkit::unique_prefix(tag);
    let options = options(stm_store::CreateOptions {
        prefix: prefix.clone(),
        ..Default::default()
    });
    let store = stm_store::DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("tables");
    let client = SqsQueue::client(Some(moto.endpoint()), stm_testkit::REGION).await;
    let urls = SqsQueue::ensure(&client, &format!("{prefix}-events"), visibility, max_receive)
        .await
        .expect("queue");
    MotoParts {
        store: Arc::new(store),
        client,
        urls,
        endpoint: moto.endpoint().to_string(),
        prefix,
    }
}
