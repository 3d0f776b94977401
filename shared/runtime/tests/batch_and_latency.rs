//! The FIFO batch rule against SQS (moto over HTTP): a poison record in the middle of a
//! batch is reported alone (the later record is of another group, so it is processed),
//! ends in the dead-letter queue after maxReceiveCount, and nothing else is lost. And the emitted-event latency with the
//! inline flush: a region's commit to its parent processing `Finished`.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{event, moto_parts, Stack};
use serde_json::json;
use stm_core::Status;
use stm_runtime::eventsource::{self, Schedules};
use stm_runtime::queue::{OutgoingMessage, Queue, SqsQueue};
use stm_runtime::Record;
use stm_store::ExecutionStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_in_the_middle_fails_only_its_group_then_dead_letters() {
    let parts = moto_parts("fifo", 1, 2).await;
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()));
    let stack = Stack::new(parts.store.clone(), queue.clone());
    for id in ["a", "b"] {
        stack
            .control
            .create("Flat", None, Some(id))
            .await
            .expect("create");
    }
    stack.drain().await;

    let go = event("Go", json!({}));
    let poison = OutgoingMessage {
        group_id: "p".into(),
        deduplication_id: "poison-1".into(),
        body: "{not json".into(),
        spawn: false,
        trace: None,
    };
    let failures = queue
        .publish_batch(&[
            OutgoingMessage::event("a", &go),
            poison,
            OutgoingMessage::event("b", &go),
        ])
        .await;
    assert!(failures.is_empty(), "{failures:?}");
    let received = queue.receive(10, 1, 0).await.expect("receive");
    assert_eq!(received.len(), 3, "one batch of three");
    let records: Vec<Record> = received.iter().map(Record::from_received).collect();
    let reported = stack.worker.handle_invocation(&records, None).await;
    assert_eq!(reported, vec![received[1].message_id.clone()], "only the poison");
    for handled in [&received[0], &received[2]] {
        queue
            .delete(&handled.receipt_handle)
            .await
            .expect("delete the handled record");
    }
    assert_eq!(stack.load("a").await.active_path.as_deref(), Some("Working"));
    assert_eq!(
        stack.load("b").await.active_path.as_deref(),
        Some("Working"),
        "b, of another group, is processed behind the poison"
    );

    // the event source keeps polling: the poison is redriven to the DLQ
    let deadline = Instant::now() + Duration::from_secs(20);
    let dead_letters = SqsQueue::new(parts.client.clone(), parts.urls.dead_letter_url.clone());
    let mut dead = Vec::new();
    while Instant::now() < deadline && dead.is_empty() {
        eventsource::poll_once(queue.as_ref(), &stack.worker, &stack.settings)
            .await
            .expect("poll");
        dead = dead_letters.receive(10, 30, 0).await.expect("receive dlq");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(dead.len(), 1, "the poison message is in the DLQ");
    assert_eq!(dead[0].body, "{not json");
    assert_eq!(
        stack.load("b").await.active_path.as_deref(),
        Some("Working"),
        "nothing else is lost"
    );
    assert!(parts.store.pending_outbox().await.expect("outbox").is_empty());
}

/// Measured and printed: the delay between a region's finishing commit and its parent's
/// commit of the join, with the relay's schedule far away (60 s), so only the inline
/// flush can deliver the region's `Finished`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_flush_delivers_finished_far_below_the_relay_period() {
    let parts = moto_parts("latency", 5, 5).await;
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()));
    let stack = Stack::realtime(parts.store.clone(), queue.clone());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let relay_period = Duration::from_secs(60);
    let running = tokio::spawn(eventsource::run(
        queue.clone(),
        stack.worker.clone(),
        stack.settings.clone(),
        Schedules {
            relay_every: relay_period,
            sweep_every: relay_period,
        },
        stop_rx,
    ));
    let mut delays = Vec::new();
    for round in 0..3 {
        let id = format!("lat-{round}");
        stack
            .control
            .create("Fork", None, Some(&id))
            .await
            .expect("create");
        for ev in [
            event("Go", json!({})),
            event("PaymentOk", json!({"receipt": "r"})),
            event("Packed", json!({})),
        ] {
            stack.control.send(&id, &ev).await.expect("send");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let parent = loop {
            let exe = stack.load(&id).await;
            if exe.status == Status::Done || Instant::now() > deadline {
                break exe;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(parent.status, Status::Done, "{parent:?}");
        let last_region = stack
            .children(&parent)
            .await
            .iter()
            .filter_map(|c| c.finished_at)
            .fold(0.0_f64, f64::max);
        let joined = parent.finished_at.expect("finished_at");
        delays.push(joined - last_region);
    }
    stop_tx.send(true).expect("stop");
    running.await.expect("join").expect("run");
    let worst = delays.iter().copied().fold(0.0_f64, f64::max);
    println!(
        "emitted-event latency (region commit -> parent join commit), inline flush, moto: {:?} s; worst {:.3} s = {:.4} of the relay period",
        delays.iter().map(|d| format!("{d:.3}")).collect::<Vec<_>>(),
        worst,
        worst / relay_period.as_secs_f64()
    );
    assert!(
        worst < 5.0,
        "the join waited {worst} s: the inline flush did not deliver Finished"
    );
}
