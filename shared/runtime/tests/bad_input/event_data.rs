//! Event data that does not fit its declaration: refused by `Control::send`, taken by the
//! worker (harel's behaviour), where a mistyped `set` fails the execution.

use serde_json::json;
use stm_core::Status;
use stm_runtime::worker::Handled;
use stm_runtime::{ControlError, DriverError};
use stm_store::ExecutionStore;

use crate::common::event;
use crate::support::{fixture, record};

/// An event whose data does not fit its declaration: `Control::send` refuses it before it
/// is queued, naming the event and the field. The worker does not check it (as harel's
/// worker does not: `check_event` runs where an event is sent), so one sent around the
/// control plane runs, and here its `set` of a mistyped value fails the execution
/// terminally (FAILED, with the error), a committed step rather than a failed record.
#[tokio::test]
async fn event_data_that_does_not_fit_its_declaration_is_refused_at_send() {
    let fx = fixture().await;
    let wrong = event("Fill", json!({"blob": 5}));
    let err = fx.control.send("blob", &wrong).await.expect_err("refused");
    assert!(
        matches!(err, ControlError::Driver(DriverError::Event { .. })),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("'Fill'") && text.contains("blob"), "{text}");
    assert!(fx.queue.is_empty(), "nothing queued");

    // sent around the control plane (a foreign sender), the worker takes it
    let body = serde_json::to_string(&wrong).expect("json");
    let out = fx
        .worker
        .handle_batch(&[record("m1", &body, Some("blob"), None)])
        .await;
    assert_eq!(
        out.records[0].1,
        Ok(Handled::Processed {
            execution_id: "blob".into(),
            status: Status::Failed
        })
    );
    let blob = fx.store.load("blob").await.expect("load").expect("blob");
    assert_eq!(
        blob.error.as_deref(),
        Some("ExpressionError: context.more is declared string, `set` gave int 5")
    );
    assert_eq!(
        blob.active_path.as_deref(),
        Some("Idle"),
        "the step's effects are dropped"
    );
    assert_eq!(blob.context["more"], json!(""));
    // a committed (terminal) step, not a failed record: its redelivery is a duplicate
    let again = fx
        .worker
        .handle_batch(&[record("m1", &body, Some("blob"), None)])
        .await;
    assert_eq!(again.records[0].1, Ok(Handled::Duplicate));
}
