//! The queue contract, written once and run against every [`Queue`] (feature `contract`):
//! what the worker, the relay and the sweeper rely on of SQS FIFO, checked through the
//! trait alone.
//!
//! Each check is a `pub async fn` taking a factory `make() -> queue` that returns a
//! **fresh, empty** queue. [`queue_contract_tests!`](crate::queue_contract_tests) turns
//! them into one `#[tokio::test]` each:
//!
//! ```text
//! async fn make() -> MemoryQueue { MemoryQueue::new(5) }
//! stm_runtime::queue_contract_tests!(make);
//! ```
//!
//! A real queue answers a receive from a sample of its servers, so a check never reads one
//! empty receive as "nothing is there": it polls until what it waits for arrives or
//! [`PATIENCE`] runs out, and it proves that something stays hidden by polling for
//! [`QUIET`] and finding nothing.
//!
//! Deduplication is checked while the first copy is still queued only: within SQS's five
//! minutes a copy sent after the first was deleted is dropped too, but the emulator the
//! tests use compares only queued messages, so a check of that would test the emulator.

use std::time::{Duration, Instant};

use stm_core::Event;

use super::{OutgoingMessage, Queue, ReceivedMessage, MAX_MESSAGE_BYTES, MESSAGE_KIND_ATTRIBUTE, SPAWN_KIND};

/// How long a check waits for a message it expects.
pub const PATIENCE: Duration = Duration::from_secs(10);
/// How long a check polls to show that a message stays hidden.
pub const QUIET: Duration = Duration::from_secs(2);
/// The visibility timeout the checks receive with: longer than any check runs.
const HIDE_SECONDS: i32 = 60;

/// One `#[tokio::test]` per contract check, over the factory `$make`.
#[macro_export]
macro_rules! queue_contract_tests {
    ($make:path) => {
        $crate::queue_contract_tests!(@each $make;
            bodies_groups_and_kinds_round_trip,
            a_group_is_delivered_in_order_past_one_batch,
            a_group_in_flight_blocks_its_later_messages,
            a_duplicate_of_a_queued_message_is_dropped,
            a_released_message_returns_with_its_receive_count,
            a_received_message_stays_hidden,
            a_deleted_message_is_gone,
            refused_messages_fail_alone,
            an_unknown_receipt_handle_is_an_error,
        );
    };
    (@each $make:path; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                $crate::queue::contract::$check($make).await;
            }
        )*
    };
}

fn event(group: &str, n: usize) -> OutgoingMessage {
    OutgoingMessage::event(
        group,
        &Event::new(format!("E{n}")).with_id(format!("{group}-e{n}")),
    )
}

async fn publish_all<Q: Queue>(queue: &Q, messages: &[OutgoingMessage]) {
    let failures = queue.publish_batch(messages).await;
    assert!(failures.is_empty(), "every message is sent: {failures:?}");
}

/// Receive (and leave hidden) until `count` messages have come or [`PATIENCE`] runs out.
async fn receive_count<Q: Queue>(queue: &Q, count: usize) -> Vec<ReceivedMessage> {
    let started = Instant::now();
    let mut got = Vec::new();
    while got.len() < count && started.elapsed() < PATIENCE {
        got.extend(
            queue
                .receive(count - got.len(), HIDE_SECONDS, 1)
                .await
                .expect("receive"),
        );
    }
    assert_eq!(
        got.len(),
        count,
        "{count} messages arrive within {PATIENCE:?}: {got:?}"
    );
    got
}

/// Poll for [`QUIET`]: nothing may be received.
async fn assert_nothing_receivable<Q: Queue>(queue: &Q, why: &str) {
    let started = Instant::now();
    while started.elapsed() < QUIET {
        let got = queue.receive(10, HIDE_SECONDS, 1).await.expect("receive");
        assert!(got.is_empty(), "{why}, yet a receive returned {got:?}");
    }
}

/// An event's body, its group and its deduplication id come back as sent; a spawn intent
/// carries its kind as a message attribute, an event carries none.
pub async fn bodies_groups_and_kinds_round_trip<Q: Queue>(make: impl AsyncFn() -> Q) {
    let queue = make().await;
    let data = serde_json::json!({"text": "é ü 日本 🙂 \"quoted\"", "n": 12345678901234567890u64});
    let event = Event::with_data("Grüße", data.as_object().cloned().unwrap_or_default()).with_id("ev-1");
    let sent = OutgoingMessage::event("exe-1", &event);
    let spawn = OutgoingMessage {
        body: r#"{"seq": 3, "child_id": "exe-1.c"}"#.into(),
        group_id: "exe-1.c".into(),
        deduplication_id: "spawn-exe-1-3".into(),
        spawn: true,
        trace: None,
    };
    publish_all(&queue, &[sent.clone(), spawn.clone()]).await;
    let mut got = receive_count(&queue, 2).await;
    got.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    for (received, sent) in got.iter().zip([&sent, &spawn]) {
        assert_eq!(received.body, sent.body, "the body, byte for byte");
        assert_eq!(received.group_id.as_deref(), Some(sent.group_id.as_str()));
        assert_eq!(
            received.attributes.get("MessageDeduplicationId"),
            Some(&sent.deduplication_id)
        );
        assert_eq!(received.receive_count, 1, "a first receive");
        let kind = received.message_attributes.get(MESSAGE_KIND_ATTRIBUTE);
        assert_eq!(kind.map(String::as_str), sent.spawn.then_some(SPAWN_KIND));
    }
}

/// 25 messages of one group, published in one call (three `SendMessageBatch` requests),
/// are received in the order they were sent, each batch in order too.
pub async fn a_group_is_delivered_in_order_past_one_batch<Q: Queue>(make: impl AsyncFn() -> Q) {
    let queue = make().await;
    let sent: Vec<OutgoingMessage> = (0..25).map(|n| event("exe-order", n)).collect();
    publish_all(&queue, &sent).await;
    let started = Instant::now();
    let mut bodies = Vec::new();
    while bodies.len() < sent.len() && started.elapsed() < PATIENCE {
        for message in queue.receive(10, HIDE_SECONDS, 1).await.expect("receive") {
            queue.delete(&message.receipt_handle).await.expect("delete");
            bodies.push(message.body);
        }
    }
    let expected: Vec<&String> = sent.iter().map(|m| &m.body).collect();
    assert_eq!(
        bodies.iter().collect::<Vec<_>>(),
        expected,
        "FIFO order within the group"
    );
}

/// While a message of a group is in flight, no later message of that group is delivered;
/// other groups are. Deleting it lets the next one through.
pub async fn a_group_in_flight_blocks_its_later_messages<Q: Queue>(make: impl AsyncFn() -> Q) {
    let queue = make().await;
    publish_all(&queue, &[event("exe-a", 1), event("exe-a", 2), event("exe-b", 3)]).await;
    let first = receive_count(&queue, 1).await.remove(0);
    let (held, other) = match first.group_id.as_deref() {
        Some("exe-a") => ("exe-a", "exe-b"),
        _ => ("exe-b", "exe-a"),
    };
    if held == "exe-a" {
        assert_eq!(
            first.body,
            event("exe-a", 1).body,
            "a group starts with its first message"
        );
        // exe-b is free: it arrives, exe-a's second does not
        let next = receive_count(&queue, 1).await.remove(0);
        assert_eq!(next.group_id.as_deref(), Some(other));
        assert_nothing_receivable(&queue, "exe-a's first message is in flight").await;
        queue.delete(&first.receipt_handle).await.expect("delete");
        let after = receive_count(&queue, 1).await.remove(0);
        assert_eq!(
            after.body,
            event("exe-a", 2).body,
            "then the group's second message"
        );
    } else {
        // exe-b came first: exe-a's first is receivable, its second only after it
        let next = receive_count(&queue, 1).await.remove(0);
        assert_eq!(next.body, event("exe-a", 1).body);
        assert_nothing_receivable(&queue, "exe-a's first message is in flight").await;
        queue.delete(&next.receipt_handle).await.expect("delete");
        let after = receive_count(&queue, 1).await.remove(0);
        assert_eq!(after.body, event("exe-a", 2).body);
    }
}

/// A second send with the same deduplication id, while the first is queued, is accepted
/// and dropped: one message is delivered.
pub async fn a_duplicate_of_a_queued_message_is_dropped<Q: Queue>(make: impl AsyncFn() -> Q) {
    let queue = make().await;
    let message = event("exe-dup", 1);
    publish_all(&queue, std::slice::from_ref(&message)).await;
    publish_all(&queue, std::slice::from_ref(&message)).await;
    let got = receive_count(&queue, 1).await;
    queue.delete(&got[0].receipt_handle).await.expect("delete");
    assert_nothing_receivable(&queue, "the copy was a duplicate").await;
}

/// A message released with a visibility of 0 is received again, with its receive count
/// one higher (the worker's poison limit counts on it).
pub async fn a_released_message_returns_with_its_receive_count<Q: Queue>(make: impl AsyncFn() -> Q) {
    let queue = make().await;
    publish_all(&queue, &[event("exe-release", 1)]).await;
    let first = receive_count(&queue, 1).await.remove(0);
    queue
        .change_visibility(&first.receipt_handle, 0)
        .await
        .expect("release");
    let again = receive_count(&queue, 1).await.remove(0);
    assert_eq!(again.message_id, first.message_id, "the same message");
    assert_eq!(again.receive_count, 2, "received twice");
    assert_eq!(
        again
            .attributes
            .get("ApproximateReceiveCount")
            .map(String::as_str),
        Some("2")
    );
}

/// A received message is hidden for its visibility timeout.
pub async fn a_received_message_stays_hidden<Q: Queue>(make: impl AsyncFn() -> Q) {
    let queue = make().await;
    publish_all(&queue, &[event("exe-hidden", 1)]).await;
    receive_count(&queue, 1).await;
    assert_nothing_receivable(&queue, "the only message is in flight").await;
}

/// A deleted message is not delivered again.
pub async fn a_deleted_message_is_gone<Q: Queue>(make: impl AsyncFn() -> Q) {
    let queue = make().await;
    publish_all(&queue, &[event("exe-delete", 1)]).await;
    let got = receive_count(&queue, 1).await.remove(0);
    queue.delete(&got.receipt_handle).await.expect("delete");
    assert_nothing_receivable(&queue, "the only message was deleted").await;
}

/// A message SQS would refuse on its own (a group id with a space, a body over 1 MiB)
/// comes back as a failure at its index with SQS's code; its neighbours are delivered.
pub async fn refused_messages_fail_alone<Q: Queue>(make: impl AsyncFn() -> Q) {
    let queue = make().await;
    let mut too_large = event("exe-big", 2);
    too_large.body = format!("{{\"pad\": \"{}\"}}", "x".repeat(MAX_MESSAGE_BYTES));
    let messages = [
        event("exe-ok", 0),
        event("exe ok", 1),
        too_large,
        event("exe-ok", 3),
    ];
    let failures = queue.publish_batch(&messages).await;
    let codes: Vec<(usize, &str)> = failures.iter().map(|f| (f.index, f.code.as_str())).collect();
    assert_eq!(
        codes,
        [(1, "InvalidParameterValue"), (2, "MessageTooLong")],
        "{failures:?}"
    );
    let first = receive_count(&queue, 1).await.remove(0);
    assert_eq!(first.body, messages[0].body);
    queue.delete(&first.receipt_handle).await.expect("delete");
    let second = receive_count(&queue, 1).await.remove(0);
    assert_eq!(second.body, messages[3].body);
}

/// Changing the visibility of a receipt handle the queue never gave out fails, rather
/// than passing for a release that did not happen.
pub async fn an_unknown_receipt_handle_is_an_error<Q: Queue>(make: impl AsyncFn() -> Q) {
    let queue = make().await;
    publish_all(&queue, &[event("exe-handle", 1)]).await;
    let got = receive_count(&queue, 1).await.remove(0);
    let unknown = format!("{}-not-ours", got.receipt_handle);
    let err = queue
        .change_visibility(&unknown, 0)
        .await
        .expect_err("an unknown receipt handle");
    assert!(
        err.to_string().starts_with("ChangeMessageVisibility"),
        "the error names the call: {err}"
    );
}
