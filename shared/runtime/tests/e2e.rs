//! End-to-end scenarios through the real handlers: the worker under the SQS event-source
//! emulation, the relay and the sweeper, over MemoryStore + MemoryQueue and over DynamoDB +
//! SQS FIFO (moto over HTTP). Each scenario's final state (root and children) must equal
//! what the embedded runner (`stm run`: `Driver::create`/`process`) gives for the same
//! machine and events.

mod common;

use std::sync::Arc;

use common::{event, object, observable, Embedded, Stack};
use serde_json::{json, Value};
use stm_core::{Event, Status};
use stm_runtime::queue::SqsQueue;
use stm_runtime::MemoryQueue;
use stm_store::{ExecutionStore, MemoryStore};

#[allow(clippy::large_enum_variant)] // a handful of test steps
enum Step {
    Send(Event),
    /// Move the clock on, then fire what is due (the sweeper / `fire_due_timers`).
    Advance(f64),
}

/// Run `steps` on a fresh `definition` execution `id` through both runners and compare
/// the root and every child.
async fn compare(stack: &Stack, definition: &str, id: &str, seed: Option<Value>, steps: &[Step]) -> Value {
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
    let embedded = Embedded::new();
    embedded
        .driver
        .create(definition, seed.map(object), Some(id))
        .await
        .expect("embedded create");
    for step in steps {
        match step {
            Step::Send(ev) => {
                embedded.driver.process(id, ev).await.expect("embedded process");
            }
            Step::Advance(seconds) => {
                embedded.clock.advance(*seconds);
                embedded.driver.fire_due_timers().await.expect("embedded timers");
            }
        }
    }
    let queued = stack.load(id).await;
    let inline = embedded
        .store
        .load(id)
        .await
        .expect("load")
        .expect("embedded execution");
    assert_eq!(
        observable(&queued),
        observable(&inline),
        "{definition}: root differs"
    );
    for child in stack.children(&queued).await {
        let twin = embedded
            .store
            .load(&child.id)
            .await
            .expect("load")
            .unwrap_or_else(|| panic!("no embedded {}", child.id));
        assert_eq!(
            observable(&child),
            observable(&twin),
            "{definition}: child {} differs",
            child.id
        );
    }
    observable(&queued)
}

async fn scenarios(stack: &Stack, tag: &str) {
    let id = |name: &str| format!("{tag}-{name}");

    let flat = compare(
        stack,
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
        "FanOut",
        &id("fanout"),
        Some(json!({"recipients": ["a", "b", "c"]})),
        &[],
    )
    .await;
    assert_eq!(fanout["active_path"], "AllSent", "{fanout}");
    let bounced = compare(
        stack,
        "FanOut",
        &id("bounce"),
        Some(json!({"recipients": ["a", "bounce"]})),
        &[],
    )
    .await;
    assert_eq!(bounced["active_path"], "SomeBounced", "{bounced}");

    let timed = compare(
        stack,
        "Timed",
        &id("timed"),
        None,
        &[Step::Advance(1.0), Step::Advance(1.5)],
    )
    .await;
    assert_eq!(timed["active_path"], "Expired", "{timed}");

    let deferring = compare(
        stack,
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
        parked
            .parked_events
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
    stack
        .control
        .cancel(&recalled, Some(object(json!({"reason": "customer"}))))
        .await
        .expect("cancel");
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
    stack.control.cancel(&forced, None).await.expect("cancel");
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
    let stack = Stack::new(Arc::new(MemoryStore::new()), Arc::new(MemoryQueue::new(5)));
    scenarios(&stack, "m").await;
    lifecycle(&stack, "m", |_| {}).await;
}

/// A stack over moto whose tables and queue are named with `unique_prefix(tag)`, and that
/// prefix.
pub async fn moto_stack(tag: &str) -> (Stack, String) {
    let parts = common::moto_parts(tag, 2, 5).await;
    let queue = SqsQueue::new(parts.client, parts.urls.queue_url);
    (Stack::new(parts.store, Arc::new(queue)), parts.prefix)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_over_dynamodb_and_sqs() {
    let (stack, prefix) = moto_stack("e2e").await;
    scenarios(&stack, "d").await;
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
