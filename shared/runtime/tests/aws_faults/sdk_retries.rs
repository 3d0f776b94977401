//! The SQS faults the proxy injects are ones the Rust SDK retries.

use stm_core::Event;
use stm_runtime::{OutgoingMessage, Queue, SqsQueue};
use stm_testkit::{Fault, FaultProxy};

use crate::moto::{quick_retries, sqs_client};

/// The SQS faults the proxy injects are what the Rust SDK retries: a 500 with SQS's
/// `InternalError`, a `ThrottlingException`, a lost answer (the retry of a publish whose
/// answer was lost is dropped by the FIFO deduplication).
#[tokio::test]
async fn sqs_faults_are_retried_by_the_sdk() {
    let moto = stm_testkit::moto().await;
    let proxy = FaultProxy::start(moto.endpoint());
    let prefix = stm_testkit::unique_prefix("sqs_retry");
    let direct = sqs_client(moto.endpoint(), None).await;
    let urls = SqsQueue::ensure(&direct, &format!("{prefix}-events"), 30, 5)
        .await
        .expect("queue");
    let queue = SqsQueue::new(
        sqs_client(proxy.endpoint(), Some(quick_retries(3))).await,
        urls.queue_url.clone(),
    );
    let view = SqsQueue::new(direct, urls.queue_url);
    let faults = [
        Fault::Error {
            status: 500,
            error_type: "InternalError".into(),
            message: "injected".into(),
        },
        Fault::Throttling,
        Fault::DropResponse,
    ];
    let op = "SendMessageBatch";
    for (n, fault) in faults.iter().enumerate() {
        let before = proxy.requests(op);
        proxy.fail_next(op, 2, fault.clone());
        let message = OutgoingMessage::event("g", &Event::new("Ping").with_id(format!("e{n}")));
        let failures = queue.publish_batch(std::slice::from_ref(&message)).await;
        assert!(failures.is_empty(), "{fault:?}: {failures:?}");
        assert_eq!(
            proxy.requests(op) - before,
            3,
            "{fault:?}: two faulted attempts, then the one answered"
        );
        assert_eq!(proxy.armed(op), 0);
    }
    // each publish landed once (the lost answers' retries were deduplicated)
    assert_eq!(view.approximate_depth().await.expect("depth"), 3);
    // and a fault outliving the SDK's three attempts is a reported failure, not a panic
    proxy.fail_next(op, 3, Fault::Throttling);
    let message = OutgoingMessage::event("g", &Event::new("Ping").with_id("e-last"));
    let failures = queue.publish_batch(std::slice::from_ref(&message)).await;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].message.contains("ThrottlingException"),
        "{failures:?}"
    );
    // the receive, delete and visibility calls are retried too
    for op in ["ReceiveMessage", "ChangeMessageVisibility", "DeleteMessage"] {
        proxy.fail_next(
            op,
            2,
            Fault::Error {
                status: 500,
                error_type: "InternalError".into(),
                message: "injected".into(),
            },
        );
    }
    let got = queue.receive(1, 30, 0).await.expect("receive after two 500s");
    assert_eq!(got.len(), 1);
    queue
        .change_visibility(&got[0].receipt_handle, 30)
        .await
        .expect("visibility after two 500s");
    queue
        .delete(&got[0].receipt_handle)
        .await
        .expect("delete after two 500s");
    for op in ["ReceiveMessage", "ChangeMessageVisibility", "DeleteMessage"] {
        assert_eq!((proxy.injected(op), proxy.requests(op)), (2, 3), "{op}");
    }
}
