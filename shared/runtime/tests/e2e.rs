//! End-to-end scenarios through the real handlers: the worker under the SQS event-source
//! emulation, the relay and the sweeper, over MemoryStore + MemoryQueue and over DynamoDB +
//! SQS FIFO (moto over HTTP). Each scenario runs through both runners, which carry out
//! the same plan for each event and differ only in delivery: the queue-driven stack, and
//! the embedded runner (`stm run`: `Driver::create`/`process`) delivering inline. For the
//! root and every child they must agree on the final state, on the steps in order (the
//! trace), and on the rows each step wrote (its emits and spawn intents), in order.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::hooked_store::{Call, HookedStore, StoreHook};
use common::{event, object, observable, Stack};
use serde_json::{json, Value};
use stm_core::{Event, Execution, Status};
use stm_runtime::queue::SqsQueue;
use stm_runtime::{ActionRegistry, Driver, ManualClock, MemoryQueue};
use stm_store::{ExecutionStore, MemoryStore, StoreError};

/// The rows each step wrote, per execution, in commit order: `emit KIND to TARGET` and
/// `spawn CHILD`. A step's commit carries its trace step (both runners trace here); a
/// commit without one is delivery, which is where the runners differ by design (the
/// worker's broadcast fan-out and a queued `Start`, written as rows; inline, stepped).
#[derive(Default)]
struct Rows(Mutex<BTreeMap<String, Vec<String>>>);

#[async_trait]
impl StoreHook for Arc<Rows> {
    async fn before(&self, call: &Call<'_>) -> Result<(), StoreError> {
        // no store call fails in these scenarios: a commit asked is a commit made
        if let Call::Commit { exe, commit } = call {
            if !commit.traces.is_empty() {
                let rows = commit
                    .emits
                    .iter()
                    .map(|(to, e)| format!("emit {} to {}", e.kind, to.as_deref().unwrap_or("-")))
                    .chain(commit.spawns.iter().map(|s| format!("spawn {}", s.child_id)));
                let mut all = self.0.lock().expect("rows");
                all.entry(exe.id.clone()).or_default().extend(rows);
            }
        }
        Ok(())
    }
}

impl Rows {
    fn of(&self, id: &str) -> Vec<String> {
        self.0.lock().expect("rows").get(id).cloned().unwrap_or_default()
    }
}

/// A store that records [`Rows`]: over `inner`, with the recorder to read them back.
fn recording(inner: Arc<dyn ExecutionStore>) -> (Arc<HookedStore<Arc<Rows>>>, Arc<Rows>) {
    let rows = Arc::new(Rows::default());
    (Arc::new(HookedStore::new(inner, rows.clone())), rows)
}

/// The steps of `id` in order, as both runners must agree on them: the event and its
/// data, where it took the execution from and to, the actions it ran and the context it
/// left.
async fn steps(store: &dyn ExecutionStore, id: &str) -> Vec<Value> {
    store
        .read_trace(id)
        .await
        .expect("trace")
        .into_iter()
        .map(|step| {
            json!([
                step["event_kind"],
                step["event_data"],
                step["from_path"],
                step["to_path"],
                step["actions"],
                step["context_out"]
            ])
        })
        .collect()
}

/// The embedded runner over its own recording MemoryStore, tracing, on its own clock.
struct Inline {
    store: Arc<HookedStore<Arc<Rows>>>,
    rows: Arc<Rows>,
    driver: Driver,
    clock: Arc<ManualClock>,
}

impl Inline {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::new(common::START));
        let (store, rows) = recording(Arc::new(MemoryStore::new()));
        let driver = Driver::new(
            store.clone(),
            common::definitions(),
            ActionRegistry::with_builtins(),
        )
        .with_clock(clock.clone())
        .with_trace(true);
        Inline {
            store,
            rows,
            driver,
            clock,
        }
    }
}

/// The queue-driven stack over `store` and `queue`, tracing, with the recorder of its rows.
fn traced_stack(store: Arc<dyn ExecutionStore>, queue: Arc<dyn stm_runtime::Queue>) -> (Stack, Arc<Rows>) {
    let (store, rows) = recording(store);
    (Stack::traced(store, queue), rows)
}

#[allow(clippy::large_enum_variant)] // a handful of test steps
enum Step {
    Send(Event),
    /// Move the clock on, then fire what is due (the sweeper / `fire_due_timers`).
    Advance(f64),
}

/// Run `steps` on a fresh `definition` execution `id` through both runners and compare
/// the root and every child: state, steps and rows.
async fn compare(
    stack: &Stack,
    rows: &Rows,
    definition: &str,
    id: &str,
    seed: Option<Value>,
    steps: &[Step],
) -> Value {
    stack
        .control
        .create(definition, seed.clone().map(object), Some(id))
        .await
        .expect("create");
    stack.drain().await;
    for step in steps {
        match step {
            Step::Send(ev) => stack.control.send(id, ev).await.expect("send"),
            Step::Advance(seconds) => stack.clock.advance(*seconds),
        }
        stack.drain().await;
    }
    let inline = Inline::new();
    inline
        .driver
        .create(definition, seed.map(object), Some(id))
        .await
        .expect("embedded create");
    for step in steps {
        match step {
            Step::Send(ev) => {
                inline.driver.process(id, ev).await.expect("embedded process");
            }
            Step::Advance(seconds) => {
                inline.clock.advance(*seconds);
                inline.driver.fire_due_timers().await.expect("embedded timers");
            }
        }
    }
    let queued = stack.load(id).await;
    let mut executions = vec![queued.clone()];
    executions.extend(stack.children(&queued).await);
    for exe in &executions {
        let twin: Execution = inline
            .store
            .load(&exe.id)
            .await
            .expect("load")
            .unwrap_or_else(|| panic!("{definition}: no embedded {}", exe.id));
        assert_eq!(
            observable(exe),
            observable(&twin),
            "{definition}: {} differs",
            exe.id
        );
        assert_eq!(
            self::steps(stack.store.as_ref(), &exe.id).await,
            self::steps(inline.store.as_ref(), &exe.id).await,
            "{definition}: the steps of {} differ (queued, then inline)",
            exe.id
        );
        assert_eq!(
            rows.of(&exe.id),
            inline.rows.of(&exe.id),
            "{definition}: the rows of {} differ (queued, then inline)",
            exe.id
        );
    }
    observable(&queued)
}

async fn scenarios(stack: &Stack, rows: &Rows, tag: &str) {
    let id = |name: &str| format!("{tag}-{name}");

    let flat = compare(
        stack,
        rows,
        "Flat",
        &id("flat"),
        None,
        &[
            Step::Send(event("Go", json!({}))),
            Step::Send(event("Finish", json!({}))),
        ],
    )
    .await;
    assert_eq!(flat["status"], "DONE");
    assert_eq!(flat["context"]["n"], 1);

    let fork = compare(
        stack,
        rows,
        "Fork",
        &id("fork"),
        None,
        &[
            Step::Send(event("Go", json!({}))),
            Step::Send(event("PaymentOk", json!({"receipt": "r-1"}))),
            Step::Send(event("Packed", json!({}))),
        ],
    )
    .await;
    assert_eq!(fork["status"], "DONE", "{fork}");
    assert_eq!(fork["outcome"], "success");

    let fanout = compare(
        stack,
        rows,
        "FanOut",
        &id("fanout"),
        Some(json!({"recipients": ["a", "b", "c"]})),
        &[],
    )
    .await;
    assert_eq!(fanout["active_path"], "AllSent", "{fanout}");
    let bounced = compare(
        stack,
        rows,
        "FanOut",
        &id("bounce"),
        Some(json!({"recipients": ["a", "bounce"]})),
        &[],
    )
    .await;
    assert_eq!(bounced["active_path"], "SomeBounced", "{bounced}");

    let timed = compare(
        stack,
        rows,
        "Timed",
        &id("timed"),
        None,
        &[Step::Advance(1.0), Step::Advance(1.5)],
    )
    .await;
    assert_eq!(timed["active_path"], "Expired", "{timed}");

    let deferring = compare(
        stack,
        rows,
        "Deferring",
        &id("defer"),
        None,
        &[
            Step::Send(event("Approve", json!({}))),
            Step::Send(event("Submit", json!({}))),
        ],
    )
    .await;
    assert_eq!(deferring["active_path"], "Published", "{deferring}");

    // a redelivered event (the same id), then events for a finished execution
    let go = event("Go", json!({}));
    let again = compare(
        stack,
        rows,
        "Flat",
        &id("again"),
        None,
        &[
            Step::Send(go.clone()),
            Step::Send(go),
            Step::Send(event("Finish", json!({}))),
            Step::Send(event("Go", json!({}))),
        ],
    )
    .await;
    assert_eq!(
        (&again["status"], &again["context"]["n"]),
        (&json!("DONE"), &json!(1)),
        "{again}"
    );

    // a broadcast after one region finished, and one to no live region at all
    let late = compare(
        stack,
        rows,
        "Fork",
        &id("late"),
        None,
        &[
            Step::Send(event("Go", json!({}))),
            Step::Send(event("PaymentOk", json!({"receipt": "r-1"}))),
            Step::Send(event("PaymentOk", json!({"receipt": "r-2"}))),
            Step::Send(event("Packed", json!({}))),
            Step::Send(event("Packed", json!({}))),
        ],
    )
    .await;
    assert_eq!(late["status"], "DONE", "{late}");
}

/// Suspend keeps the backlog on the execution (nothing waits in SQS, so no retention can
/// delete it: here 30 days pass, twice SQS's longest, on the queue's clock too where it
/// has one: `advance_queue`), while other executions go on; resume releases it; a
/// modelled Cancel is cooperative.
async fn lifecycle(stack: &Stack, tag: &str, advance_queue: impl Fn(f64)) {
    let ship = format!("{tag}-ship");
    stack
        .control
        .create("Shipment", None, Some(&ship))
        .await
        .expect("create");
    stack.drain().await;
    stack.control.suspend(&ship).await.expect("suspend");
    assert_eq!(stack.load(&ship).await.status, Status::Suspended);
    stack
        .control
        .send(&ship, &event("Deliver", json!({})))
        .await
        .expect("send");
    stack.drain().await;
    let parked = stack.load(&ship).await;
    assert_eq!(
        (parked.status, parked.active_path.as_deref()),
        (Status::Suspended, Some("Transit"))
    );
    assert_eq!(
        stack
            .parked(&ship)
            .await
            .iter()
            .map(|e| e.kind.as_str())
            .collect::<Vec<_>>(),
        ["Deliver"],
        "kept on the execution"
    );
    let nothing = stack.queue.receive(10, 0, 0).await.expect("receive");
    assert!(nothing.is_empty(), "no message waits in SQS: {nothing:?}");
    // another execution's group moves while this one is suspended
    let other = format!("{tag}-other");
    stack
        .control
        .create("Shipment", None, Some(&other))
        .await
        .expect("create");
    stack
        .control
        .send(&other, &event("Deliver", json!({})))
        .await
        .expect("send");
    stack.drain().await;
    assert_eq!(stack.load(&other).await.active_path.as_deref(), Some("Delivered"));
    stack.clock.advance(30.0 * 86_400.0);
    advance_queue(30.0 * 86_400.0);
    stack.control.resume(&ship).await.expect("resume");
    // the resume armed the recheck for now: the sweep fires it, and it steps the backlog
    stack.drain().await;
    let delivered = stack.load(&ship).await;
    assert_eq!(delivered.active_path.as_deref(), Some("Delivered"));
    assert_eq!(delivered.status, Status::Done);

    let recalled = format!("{tag}-recall");
    stack
        .control
        .create("Shipment", None, Some(&recalled))
        .await
        .expect("create");
    stack.drain().await;
    let committed = stack
        .control
        .cancel(&recalled, Some(object(json!({"reason": "customer"}))))
        .await
        .expect("cancel");
    // what the command committed, whatever a worker did since
    assert_eq!(committed, Status::Cancelling);
    let cancelling = stack.load(&recalled).await;
    assert_eq!(cancelling.status, Status::Cancelling);
    // the backlog behind the cancel drains as no-ops
    stack
        .control
        .send(&recalled, &event("Deliver", json!({})))
        .await
        .expect("send");
    stack.drain().await;
    let done = stack.load(&recalled).await;
    assert_eq!(done.active_path.as_deref(), Some("Recalled"), "{done:?}");
    assert_eq!(done.outcome.as_deref(), Some("recalled"));

    let forced = format!("{tag}-forced");
    stack
        .control
        .create("Flat", None, Some(&forced))
        .await
        .expect("create");
    stack.drain().await;
    assert_eq!(
        stack.control.cancel(&forced, None).await.expect("cancel"),
        Status::Cancelled
    );
    assert_eq!(stack.load(&forced).await.status, Status::Cancelled);
    stack
        .control
        .send(&forced, &event("Go", json!({})))
        .await
        .expect("send");
    stack.drain().await;
    assert_eq!(stack.load(&forced).await.active_path.as_deref(), Some("Idle"));
}

#[tokio::test]
async fn scenarios_over_memory() {
    let (stack, rows) = traced_stack(Arc::new(MemoryStore::new()), Arc::new(MemoryQueue::new(5)));
    scenarios(&stack, &rows, "m").await;
    lifecycle(&stack, "m", |_| {}).await;
}

/// A traced stack over moto whose tables and queue are named with `unique_prefix(tag)`,
/// the recorder of its rows, and that prefix.
async fn moto_stack(tag: &str) -> (Stack, Arc<Rows>, String) {
    let parts = common::moto_parts(tag, 2, 5).await;
    let queue = SqsQueue::new(parts.client, parts.urls.queue_url);
    let (stack, rows) = traced_stack(parts.store, Arc::new(queue));
    (stack, rows, parts.prefix)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_over_dynamodb_and_sqs() {
    let (stack, rows, prefix) = moto_stack("e2e").await;
    // on the heap: a debug build's futures of every scenario, nested by value, outgrew
    // the test thread's 2 MB stack
    Box::pin(scenarios(&stack, &rows, "d")).await;
    // the queue's clock moves with the stack's: SQS's retention counts on it (the strict
    // layer deletes what SQS would have)
    let strict = stm_testkit::moto().await.strict();
    lifecycle(&stack, "d", |seconds| {
        strict.advance_queues(
            &format!("{prefix}-events"),
            std::time::Duration::from_secs_f64(seconds),
        )
    })
    .await;
}
