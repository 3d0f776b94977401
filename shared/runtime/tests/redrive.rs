//! `redrive`: every rule of harel 0.9.0's, over MemoryStore and over DynamoDB on moto
//! (through the strict layer, as the operator), and the item it leaves, compared with the
//! one harel's own `redrive` leaves from the same FAILED execution.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use common::{moto_parts, python};
use serde_json::Value;
use stm_core::{ChildState, Execution, Status};
use stm_runtime::{ActionRegistry, Control, Definitions, Driver, ManualClock, MemoryQueue};
use stm_store::{ExecutionStore, MemoryStore};

const MACHINE: &str = "event Go {}\n\nmachine R {\n  ttl 600\n  context {\n    n: int = 0\n  }\n  initial Idle\n  state Idle {}\n  state Work {\n    initial A\n    state A {}\n    state B {}\n    from A to B on Go\n  }\n  orthogonal Both {\n    state Left {\n      initial L\n      state L {}\n      final LDone success\n      from L to LDone on Go\n    }\n    state Right {\n      initial Rr\n      state Rr {}\n      final RDone success\n      from Rr to RDone on Go\n    }\n  }\n  final Done success\n  from Idle to Work on Go\n  from Work to Both on Go\n}\n";

const NOW: f64 = 1_764_600_000.5;

fn machine_file() -> PathBuf {
    let path = std::env::temp_dir().join(format!("stm-redrive-{}.stm", std::process::id()));
    std::fs::write(&path, MACHINE).expect("write the machine");
    path
}

fn control_over(store: Arc<dyn ExecutionStore>) -> Control {
    let mut definitions = Definitions::new();
    definitions.register(stm_core::dsl::load_definition_str(MACHINE, None, None).expect("valid"));
    let driver = Driver::new(store, definitions, ActionRegistry::with_builtins())
        .with_clock(Arc::new(ManualClock::new(NOW)));
    Control::new(driver, Arc::new(MemoryQueue::new(5)))
}

/// A FAILED execution as a worker leaves it: mid-cascade, with an error and a history.
fn failed(id: &str) -> Execution {
    let mut exe = Execution::new(id, "R");
    exe.status = Status::Failed;
    exe.active_path = Some("Work".into());
    exe.error = Some("RuntimeError: gateway down".into());
    exe.history.insert("".into(), "Work".into());
    exe.history.insert("Work".into(), "Work.A".into());
    exe.context.insert("n".into(), Value::from(7));
    exe.created_at = Some(NOW - 100.0);
    exe.updated_at = Some(NOW - 50.0);
    exe
}

async fn stored(store: &dyn ExecutionStore, mut exe: Execution) -> Execution {
    store.save(&mut exe).await.expect("save");
    exe
}

/// Every rule, on one store.
async fn rules(store: Arc<dyn ExecutionStore>) {
    let control = control_over(store.clone());
    let refused = |target: &'static str, id: &'static str| {
        let control = control.clone();
        async move {
            control
                .redrive(id, target)
                .await
                .expect_err("refused")
                .to_string()
        }
    };
    stored(store.as_ref(), failed("f")).await;
    assert_eq!(
        refused("Work", "f").await,
        "redrive target must be a leaf state, got 'Work'"
    );
    assert_eq!(
        refused("Nope", "f").await,
        "redrive target must be a leaf state, got 'Nope'"
    );
    assert_eq!(
        refused("Both.Left.L", "f").await,
        "redrive target 'Both.Left.L' is inside orthogonal state 'Both' — a single leaf can't represent a \
         fork's parallel regions; target a leaf before it instead, and let the model's own transition \
         re-fork it normally"
    );
    let mut region = failed("f-region");
    region.root_path = "Both.Left".into();
    region.parent_id = Some("f".into());
    stored(store.as_ref(), region).await;
    assert_eq!(
        refused("Idle", "f-region").await,
        "redrive target 'Idle' is outside this execution's own branch (rooted at 'Both.Left')"
    );
    let mut parent = failed("f-parent");
    parent
        .children
        .insert("f-parent:child".into(), ChildState::new("Both.Left"));
    stored(store.as_ref(), parent).await;
    assert_eq!(
        refused("Idle", "f-parent").await,
        "redrive refused: execution has unfinished children (cancel/terminate them first)"
    );
    // nothing of a refusal is written
    assert_eq!(store.load("f").await.expect("load").expect("f").version, 1);

    // not FAILED: left as it is
    let mut running = failed("r");
    running.status = Status::Running;
    let before = stored(store.as_ref(), running).await;
    control.redrive("r", "Idle").await.expect("a no-op");
    assert_eq!(store.load("r").await.expect("load").expect("r"), before);

    // the redrive: RUNNING at the leaf, context kept, error and history cleared, ttl
    // left to the worker's clock
    control.redrive("f", "Work.B").await.expect("redrive");
    let exe = store.load("f").await.expect("load").expect("f");
    assert_eq!(
        (
            exe.status,
            exe.active_path.as_deref(),
            exe.error.as_deref(),
            exe.history.len()
        ),
        (Status::Running, Some("Work.B"), None, 0)
    );
    assert_eq!((exe.context["n"].clone(), exe.version), (Value::from(7), 2));
    assert_eq!(exe.expires_at, None, "not from the operator's clock");
    assert_eq!(store.armed_timer("f", "@ttl").await.expect("timers"), None);
    assert_eq!(
        store.armed_timer("f", "@parked").await.expect("timers"),
        Some(NOW - 50.0),
        "the recheck, due at the failed step's time: at once by the functions' clocks"
    );
    let trace = store.read_trace("f").await.expect("trace");
    let step = trace.last().expect("a control step");
    for (field, value) in [
        ("cause", "control"),
        ("command", "redrive"),
        ("from_status", "FAILED"),
        ("to_status", "RUNNING"),
        ("from_path", "Work"),
        ("to_path", "Work.B"),
    ] {
        assert_eq!(step[field], value, "{field} in {step:?}");
    }
    // and a second redrive of what is now RUNNING changes nothing
    control.redrive("f", "Idle").await.expect("a no-op");
    assert_eq!(store.load("f").await.expect("load").expect("f").version, 2);

    // the worker, whose clock is an hour ahead of the operator's here, takes the recheck
    // and arms the ttl from its own clock; the state does not move
    let worker_now = NOW + 3_600.0;
    let worker = control_over(store.clone())
        .driver
        .clone()
        .with_clock(Arc::new(ManualClock::new(worker_now)));
    let recheck = stm_core::Event::with_data(
        "Timeout",
        serde_json::json!({"path": "@parked", "fire_at": NOW - 50.0})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
    .with_id("recheck-f");
    let exe = worker.process("f", &recheck).await.expect("the recheck");
    assert_eq!(
        (exe.status, exe.active_path.as_deref(), exe.expires_at),
        (Status::Running, Some("Work.B"), Some(worker_now + 600.0))
    );
    assert_eq!(
        store.armed_timer("f", "@ttl").await.expect("timers"),
        Some(worker_now + 600.0)
    );
    // a later recheck leaves the armed ttl as it is
    let again = worker
        .process("f", &recheck.clone().with_id("recheck-f-2"))
        .await
        .expect("recheck");
    assert_eq!(again.expires_at, Some(worker_now + 600.0));
}

#[tokio::test]
async fn every_rule_in_memory() {
    rules(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rule_over_dynamodb_as_the_operator() {
    let parts = moto_parts("redrive", 2, 5).await;
    rules(parts.store.clone()).await;
}

/// What harel's `redrive` does with `item` toward `target`: the item it leaves, or its
/// refusal.
fn harel_redrive(item: &str, target: &str) -> Result<Value, String> {
    let script = r#"
import json, sys
from harel.dsl import definition_from_dsl_file
from harel.engine import control
from harel.engine.execution import Execution
from harel.engine.store import DictStore
machine, item, target, now = sys.argv[1:5]
defn = definition_from_dsl_file(machine)
store = DictStore()
exe = Execution.model_validate_json(item)
store.save(exe)
try:
    control.redrive(store, defn, exe.id, target, clock=lambda: float(now))
    print(json.dumps({"item": json.loads(store.load(exe.id).model_dump_json())}))
except ValueError as e:
    print(json.dumps({"refused": str(e)}))
"#;
    let out = Command::new(python())
        .args(["-c", script])
        .arg(machine_file())
        .arg(item)
        .arg(target)
        .arg(NOW.to_string())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} ({e}); run .ci/setup.sh", python().display()));
    assert!(
        out.status.success(),
        "harel: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said: Value = serde_json::from_slice(&out.stdout).expect("harel's answer");
    match said.get("item") {
        Some(item) => Ok(item.clone()),
        None => Err(said["refused"].as_str().unwrap_or_default().to_string()),
    }
}

#[tokio::test]
async fn harel_and_we_leave_the_same_item() {
    let mut parent = failed("p");
    parent.children.insert("p:c".into(), ChildState::new("Both.Left"));
    let mut finished_child = failed("q");
    let mut done = ChildState::new("Both.Left");
    done.finished = true;
    finished_child.children.insert("q:c".into(), done);
    let cases = [
        (failed("a"), "Work.B"),
        (failed("b"), "Idle"),
        (failed("c"), "Work"),
        (failed("d"), "Both.Right.Rr"),
        (parent, "Idle"),
        (finished_child, "Work.A"),
    ];
    for (exe, target) in cases {
        let store = Arc::new(MemoryStore::new());
        let control = control_over(store.clone());
        let item = exe.to_json();
        let id = exe.id.clone();
        stored(store.as_ref(), exe).await;
        let ours = match control.redrive(&id, target).await {
            Ok(_) => {
                Ok(serde_json::to_value(store.load(&id).await.expect("load").expect("exe")).expect("json"))
            }
            Err(e) => Err(e.to_string()),
        };
        // the one deliberate difference: harel arms the ttl from the caller's clock (the
        // operator's laptop); we leave `expires_at` to the worker's (see control/redrive.rs)
        let theirs = harel_redrive(&item, target).map(|mut item| {
            if item["expires_at"] == serde_json::json!(NOW + 600.0) {
                item["expires_at"] = Value::Null;
            }
            item
        });
        assert_eq!(ours, theirs, "{id} to {target}");
    }
}
