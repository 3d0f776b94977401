//! The started in-memory deployment each case begins from (the scenario machines plus
//! `Blob`), and the records and outcomes the tests feed to and expect from its worker.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use stm_core::{Execution, Status};
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::worker::{Failed, Handled, Record};
use stm_runtime::{
    config, ActionRegistry, Control, Definitions, Driver, ManualClock, MemoryQueue, Worker, WorkerSettings,
};
use stm_store::{ExecutionStore, MemoryStore};

use crate::common::{self, START};

fn machines(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/machines")
        .join(name)
}

/// The scenario machines plus `Blob` (a context that grows from event data).
pub(crate) fn definitions() -> Definitions {
    let mut defs = common::definitions();
    for defn in config::load_file(&machines("limits.stm")).expect("limits.stm loads and validates") {
        defs.register(defn);
    }
    defs
}

/// A started in-memory deployment: `a`, `b`, `c` (Flat, Idle), `f` (Fork, Prepare), `blob`
/// (Blob, Idle), and `gone`, a RUNNING execution of a definition this worker lacks.
pub(crate) struct Fixture {
    pub(crate) store: Arc<MemoryStore>,
    pub(crate) queue: Arc<MemoryQueue>,
    pub(crate) worker: Worker,
    pub(crate) control: Control,
}

pub(crate) async fn fixture() -> Fixture {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(3));
    let clock = Arc::new(ManualClock::new(START));
    let driver =
        Driver::new(store.clone(), definitions(), ActionRegistry::with_builtins()).with_clock(clock.clone());
    let worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default());
    let control = Control::new(driver, queue.clone());
    for (defn, id) in [
        ("Flat", "a"),
        ("Flat", "b"),
        ("Flat", "c"),
        ("Fork", "f"),
        ("Blob", "blob"),
    ] {
        control.create(defn, None, Some(id)).await.expect("create");
    }
    let settings = EventSourceSettings {
        wait_seconds: 0,
        ..EventSourceSettings::default()
    };
    eventsource::drain(queue.as_ref(), &worker, &settings, || START, 50)
        .await
        .expect("drain");
    let mut gone = Execution::new("gone", "Gone");
    gone.status = Status::Running;
    gone.active_path = Some("Somewhere".into());
    store.save(&mut gone).await.expect("save gone");
    for exe in store.all_executions() {
        if exe.id != "gone" {
            assert_eq!(exe.status, Status::Running, "{} started", exe.id);
        }
    }
    assert!(queue.is_empty());
    Fixture {
        store,
        queue,
        worker,
        control,
    }
}

pub(crate) fn record(message_id: &str, body: &str, group: Option<&str>, kind: Option<&str>) -> Record {
    Record {
        message_id: message_id.into(),
        receipt_handle: None,
        body: body.into(),
        group_id: group.map(Into::into),
        kind: kind.map(Into::into),
        receive_count: 1,
        trace: None,
    }
}

/// A well-formed event record for `target`.
pub(crate) fn good(message_id: &str, target: &str, kind: &str) -> Record {
    let body = json!({"id": format!("ev-{message_id}"), "kind": kind}).to_string();
    record(message_id, &body, Some(target), None)
}

pub(crate) fn failure_text(result: &Result<Handled, Failed>) -> Option<String> {
    match result {
        Err(Failed::Poison(t) | Failed::Conflict(t) | Failed::Retryable(t) | Failed::Error(t)) => {
            Some(t.to_string())
        }
        _ => None,
    }
}

pub(crate) fn processed(id: &str) -> Result<Handled, Failed> {
    Ok(Handled::Processed {
        execution_id: id.into(),
        status: Status::Running,
    })
}
