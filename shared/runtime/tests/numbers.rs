//! Numbers DynamoDB cannot hold (at most 38 significant digits, magnitude 1E-130 to below
//! 1E+126): a timer's `fire_at` is `now + timeout`, stored as a DynamoDB number, so a
//! timeout too large for it made every commit entering the state fail in DynamoDB
//! (`ValidationException`), retried for hours before the dead-letter queue.
//!
//! - A literal timeout no timer can use is refused by validation (`stm validate` and the
//!   cold start), with `file:line:col` and the maximum.
//! - A timeout read from the context at run time (over moto behind the strict layer): the
//!   store refuses the commit before the call, as it does an item over 400 KB; the step is
//!   undone and the execution FAILED at once with the reason, the record acknowledged. So
//!   is a literal one in a definition that never went through validation (one deployed
//!   with harel, say).
//! - A `ValidationException` from DynamoDB itself, on its own or as a cancellation reason
//!   of the transaction, is never retried as transient: the execution fails at once,
//!   with DynamoDB's code and message in its error.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use stm_core::{Execution, Status};
use stm_runtime::config;
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::worker::{Handled, Record};
use stm_runtime::{
    ActionRegistry, Control, Definitions, Driver, ManualClock, MemoryQueue, Worker, WorkerSettings,
};
use stm_store::{CreateOptions, DynamoDbStore, ExecutionStore};
use stm_testkit::{Fault, FaultProxy};

use common::START;

/// The longest literal timeout validation takes (2^53 - 1 seconds).
const MAX_TIMEOUT: &str = "9007199254740991";

fn machine_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/machines")
        .join(name)
}

/// The scenario machines, `Delay` (a timeout from the context) and, unvalidated,
/// `HugeTimeout` (a 130-digit literal timeout).
fn definitions() -> Definitions {
    let mut defs = common::definitions();
    for defn in config::load_file(&machine_file("numbers.stm")).expect("numbers.stm loads and validates") {
        defs.register(defn);
    }
    // as a definition deployed without our validation would be
    let huge = stm_core::dsl::load_definition_file(&machine_file("huge_timeout.stm"), Some("HugeTimeout"))
        .expect("huge_timeout.stm parses");
    defs.register(huge);
    defs
}

fn record(message_id: &str, body: &str, group: &str) -> Record {
    Record {
        message_id: message_id.into(),
        receipt_handle: None,
        body: body.into(),
        group_id: Some(group.into()),
        kind: None,
        receive_count: 1,
        trace: None,
    }
}

fn failed(id: &str) -> Result<Handled, stm_runtime::worker::Failed> {
    Ok(Handled::Processed {
        execution_id: id.into(),
        status: Status::Failed,
    })
}

fn running(id: &str) -> Result<Handled, stm_runtime::worker::Failed> {
    Ok(Handled::Processed {
        execution_id: id.into(),
        status: Status::Running,
    })
}

/// A worker and control plane over `store`, on a manual clock at [`START`].
fn parts(store: Arc<dyn ExecutionStore>) -> (Worker, Control, Arc<MemoryQueue>) {
    let queue = Arc::new(MemoryQueue::new(3));
    let clock = Arc::new(ManualClock::new(START));
    let driver = Driver::new(store, definitions(), ActionRegistry::with_builtins()).with_clock(clock);
    let worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default());
    let control = Control::new(driver, queue.clone());
    (worker, control, queue)
}

/// Create `id` on `machine` and run its start through the queue.
async fn started(worker: &Worker, control: &Control, queue: &MemoryQueue, machine: &str, id: &str) {
    control.create(machine, None, Some(id)).await.expect("create");
    let settings = EventSourceSettings {
        wait_seconds: 0,
        visibility_seconds: 5,
        ..EventSourceSettings::default()
    };
    eventsource::drain(queue, worker, &settings, || START, 50)
        .await
        .expect("drain");
}

/// What a failed step must leave: FAILED where it was (state and context as before the
/// step), one commit (the failure), the event marked processed, no timer armed.
async fn assert_failed_at_once(store: &dyn ExecutionStore, before: &Execution, event_id: &str) -> String {
    let after = store.load(&before.id).await.expect("load").expect("stored");
    assert_eq!(after.status, Status::Failed, "{:?}", after.error);
    assert_eq!(
        (after.active_path.as_deref(), &after.context),
        (before.active_path.as_deref(), &before.context),
        "the step is undone"
    );
    assert_eq!(after.version, before.version + 1, "one commit: the failure");
    assert!(store.is_processed(&before.id, event_id).await.expect("processed"));
    assert!(
        store
            .due_timers(START + 1e9)
            .await
            .expect("timers")
            .iter()
            .all(|t| t.execution_id != before.id),
        "no timer armed"
    );
    after.error.unwrap_or_default()
}

#[test]
fn validation_refuses_a_literal_timeout_no_timer_can_use() {
    let file = machine_file("huge_timeout.stm");
    let err = match config::load_file(&file) {
        Ok(_) => panic!("a 130-digit timeout passed validation"),
        Err(err) => err.to_string(),
    };
    assert!(
        err.contains("error[timeout_too_large]: ") && err.contains(&format!("--> {}:9:3", file.display())),
        "file:line:col and the code: {err}"
    );
    assert!(
        err.contains(MAX_TIMEOUT) && err.contains("1e+129"),
        "names the value and the maximum: {err}"
    );
    // harel's own findings are unchanged for the machines it and we both take
    config::load_file(&machine_file("numbers.stm")).expect("a context timeout validates");
}

/// The context's delay is 10^130 seconds: the timer would fire at 1e+130, which no
/// DynamoDB number holds. The store refuses the commit before the call; the execution
/// fails at once, with the reason; the record is acknowledged; another group goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_from_the_context_beyond_dynamodbs_numbers_fails_the_execution_at_once() {
    let moto = stm_testkit::moto().await;
    let rule = |name: &str| moto.strict().refusals().get(name).copied().unwrap_or(0);
    let refused_before = (rule("dynamodb.number.range"), rule("dynamodb.number.precision"));
    let moto_parts = common::moto_parts("numbers", 5, 3).await;
    let store = moto_parts.store.clone();
    let (worker, control, queue) = parts(store.clone());
    started(&worker, &control, &queue, "Delay", "delay-1").await;
    started(&worker, &control, &queue, "Flat", "flat-1").await;
    let before = store.load("delay-1").await.expect("load").expect("stored");
    assert_eq!(before.active_path.as_deref(), Some("Idle"));

    let seconds = format!("1{}", "0".repeat(130));
    let body = format!(r#"{{"id": "wait-1", "kind": "Wait", "data": {{"seconds": {seconds}}}}}"#);
    let go = json!({"id": "go-1", "kind": "Go"}).to_string();
    let out = worker
        .handle_batch(&[record("m1", &body, "delay-1"), record("m2", &go, "flat-1")])
        .await;
    assert_eq!(
        out.records[0].1,
        failed("delay-1"),
        "acknowledged: the execution failed"
    );
    assert_eq!(out.records[1].1, running("flat-1"), "another group goes on");
    let error = assert_failed_at_once(store.as_ref(), &before, "wait-1").await;
    assert!(
        error.starts_with("StoreError: the timer of delay-1 at Waiting would fire at 1e+130")
            && error.contains("DynamoDB")
            && error.contains(MAX_TIMEOUT),
        "one sentence: what, why and what to do: {error}"
    );
    assert_eq!(
        (rule("dynamodb.number.range"), rule("dynamodb.number.precision")),
        refused_before,
        "refused by the store before the call, not by DynamoDB"
    );

    // not a number at all (1e400 is infinite as a float): refused the same way
    let redo = "delay-2";
    started(&worker, &control, &queue, "Delay", redo).await;
    let before = store.load(redo).await.expect("load").expect("stored");
    let body = r#"{"id": "wait-2", "kind": "Wait", "data": {"seconds": 1e400}}"#;
    let out = worker.handle_batch(&[record("m3", body, redo)]).await;
    assert_eq!(out.records[0].1, failed(redo));
    let error = assert_failed_at_once(store.as_ref(), &before, "wait-2").await;
    assert!(error.contains("inf") && error.contains(MAX_TIMEOUT), "{error}");

    // a delay DynamoDB can hold is a timer like any other
    let fine = "delay-3";
    started(&worker, &control, &queue, "Delay", fine).await;
    let body = r#"{"id": "wait-3", "kind": "Wait", "data": {"seconds": 86400}}"#;
    let out = worker.handle_batch(&[record("m4", body, fine)]).await;
    assert_eq!(out.records[0].1, running(fine));
    let armed = store.armed_timer(fine, "Waiting").await.expect("timer");
    assert_eq!(armed, Some(START + 86400.0));
}

/// A literal 130-digit timeout in a definition that never went through our validation:
/// the same refusal before the call, the execution FAILED at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unvalidated_literal_timeout_fails_the_execution_at_once() {
    let moto_parts = common::moto_parts("numbers_lit", 5, 3).await;
    let store = moto_parts.store.clone();
    let (worker, control, queue) = parts(store.clone());
    started(&worker, &control, &queue, "HugeTimeout", "huge-1").await;
    let before = store.load("huge-1").await.expect("load").expect("stored");
    assert_eq!(before.active_path.as_deref(), Some("Idle"));
    let go = json!({"id": "go-huge", "kind": "Go"}).to_string();
    let out = worker.handle_batch(&[record("m1", &go, "huge-1")]).await;
    assert_eq!(out.records[0].1, failed("huge-1"), "acknowledged, not retried");
    let error = assert_failed_at_once(store.as_ref(), &before, "go-huge").await;
    assert!(
        error.starts_with("StoreError: the timer of huge-1 at Waiting would fire at 1e+129"),
        "{error}"
    );
}

/// DynamoDB's own `ValidationException`, as the answer to the commit or as a cancellation
/// reason inside the transaction: the same request is refused every time, so the
/// execution fails at once with DynamoDB's code and message, never a retry loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validation_exception_from_dynamodb_fails_the_execution_at_once() {
    let moto = stm_testkit::moto().await;
    let proxy = FaultProxy::start(moto.endpoint());
    let options = CreateOptions {
        prefix: stm_testkit::unique_prefix("numbers_ve"),
        connect_attempts: 5,
        ..CreateOptions::default()
    };
    let store = Arc::new(
        DynamoDbStore::create_with(Some(proxy.endpoint()), stm_testkit::REGION, options)
            .await
            .expect("store behind the proxy"),
    );
    let (worker, control, queue) = parts(store.clone());
    let cases = [
        (
            Fault::Error {
                status: 400,
                error_type: "ValidationException".into(),
                message: "One or more parameter values were invalid (injected)".into(),
            },
            "ValidationException",
            "One or more parameter values were invalid (injected)",
        ),
        (
            Fault::Cancelled(vec!["None".into(), "ValidationError".into()]),
            "ValidationError",
            "TransactWriteItems",
        ),
    ];
    for (i, (fault, code, text)) in cases.into_iter().enumerate() {
        let id = format!("flat-ve-{i}");
        started(&worker, &control, &queue, "Flat", &id).await;
        let before = store.load(&id).await.expect("load").expect("stored");
        let sent = proxy.requests("TransactWriteItems");
        // the step's commit, and only it: the failure's commit goes through
        proxy.fail_next("TransactWriteItems", 1, fault);
        let event_id = format!("go-ve-{i}");
        let go = json!({"id": event_id, "kind": "Go"}).to_string();
        let out = worker.handle_batch(&[record("m1", &go, &id)]).await;
        assert_eq!(out.records[0].1, failed(&id), "case {i}: acknowledged");
        assert_eq!(
            proxy.requests("TransactWriteItems") - sent,
            2,
            "case {i}: the refused commit once (never retried), then the failure"
        );
        let error = assert_failed_at_once(store.as_ref(), &before, &event_id).await;
        assert!(
            error.starts_with("StoreError: ") && error.contains(code) && error.contains(text),
            "case {i}: DynamoDB's code and message: {error}"
        );
    }
}
