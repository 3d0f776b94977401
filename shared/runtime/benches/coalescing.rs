//! Coalescing, measured: DynamoDB requests per event and events/s for one execution, for
//! bursts of 1, 2, 5 and 10 records, with coalescing on and off, side by side in one run
//! on moto (through the test kit's strict layer), counted at the SDK.
//!
//! ```text
//! cargo bench -p stm-runtime --bench coalescing
//! STM_COALESCING_EVENTS=200 cargo bench -p stm-runtime --bench coalescing
//! ```
//!
//! Both table layouts (the processed marks in harel's `processed` table, and on the
//! execution item). Each cell gets its own tables and FIFO queue and one execution of `bench/loop.stm`
//! (`Go`, `Back`, ...). The events are sent first; then the worker takes them as the Lambda
//! event source hands them over, `k` records per batch (the burst), and handles each batch
//! (`Worker::handle_batch`), deleting what succeeded. The DynamoDB requests are the
//! worker's alone (each HTTP attempt counts, as DynamoDB bills), the time is the worker's
//! loop (receive, handle, delete) over moto on this machine: compare the columns of one
//! run, not the seconds across machines.

use std::sync::Arc;
use std::time::Instant;

use stm_aws::CallCounter;
use stm_core::Event;
use stm_runtime::{
    ActionRegistry, Definitions, Driver, OutgoingMessage, Queue, SqsQueue, Worker, WorkerSettings,
};
use stm_store::{CreateOptions, DedupeMarks, DynamoDbStore};

const BURSTS: [usize; 4] = [1, 2, 5, 10];

struct Cell {
    dynamodb_per_event: f64,
    events_per_second: f64,
    commits: i64,
}

async fn measure(endpoint: &str, layout: DedupeMarks, events: usize, burst: usize, coalesce: bool) -> Cell {
    let prefix = stm_testkit::unique_prefix(&format!("coalesce{burst}{}", u8::from(coalesce)));
    let counter = CallCounter::new();
    let store = Arc::new(
        DynamoDbStore::create_with(
            Some(endpoint),
            stm_testkit::REGION,
            CreateOptions {
                prefix: prefix.clone(),
                dedupe_marks: layout,
                ..CreateOptions::default()
            },
        )
        .await
        .expect("tables")
        .with_call_counter(counter.clone()),
    );
    let client = SqsQueue::client(Some(endpoint), stm_testkit::REGION).await;
    let urls = SqsQueue::ensure(&client, &format!("{prefix}-events"), 30, 100)
        .await
        .expect("queue");
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(client, urls.queue_url));
    // loaded as the engine bench loads it (its events are not declared, which the
    // deploy-time validation would refuse)
    let text =
        std::fs::read_to_string(stm_testkit::repo_root().join("bench/loop.stm")).expect("bench/loop.stm");
    let mut definitions = Definitions::new();
    definitions
        .register(stm_core::dsl::load_definition_str(&text, None, None).expect("bench/loop.stm loads"));
    let driver = Driver::new(store.clone(), definitions, ActionRegistry::with_builtins());
    let worker = Worker::new(
        driver.clone(),
        queue.clone(),
        WorkerSettings {
            coalesce,
            retry_seconds: 0,
            retry_max_seconds: 0,
            ..WorkerSettings::default()
        },
    );
    let mut exe = driver
        .new_execution("Loop", None, Some("loop-1"))
        .await
        .expect("new");
    driver.run_step(&mut exe, None).await.expect("started");
    let messages: Vec<OutgoingMessage> = (0..events)
        .map(|i| {
            let kind = if i % 2 == 0 { "Go" } else { "Back" };
            OutgoingMessage::event("loop-1", &Event::new(kind).with_id(format!("ev-{i}")))
        })
        .collect();
    for chunk in messages.chunks(10) {
        assert!(queue.publish_batch(chunk).await.is_empty(), "sent");
    }

    counter.reset();
    let started = Instant::now();
    let mut processed = 0;
    while processed < events {
        let received = queue.receive(burst, 30, 1).await.expect("receive");
        let records: Vec<stm_runtime::Record> =
            received.iter().map(stm_runtime::Record::from_received).collect();
        let outcome = worker.handle_batch(&records).await;
        for (message, (_, result)) in received.iter().zip(&outcome.records) {
            if result.is_ok() {
                processed += 1;
                queue.delete(&message.receipt_handle).await.expect("delete");
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let requests = counter.total();
    let commits = stm_store::ExecutionStore::load(store.as_ref(), "loop-1")
        .await
        .expect("load")
        .map_or(0, |e| e.version - 1);
    Cell {
        dynamodb_per_event: requests as f64 / events as f64,
        events_per_second: events as f64 / seconds,
        commits,
    }
}

fn main() {
    let events: usize = std::env::var("STM_COALESCING_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let moto = stm_testkit::moto().await;
        println!(
            "coalescing: {events} events to one execution of bench/loop.stm, received k per batch, \
             moto on this machine, DynamoDB requests counted at the SDK\n"
        );
        println!(
            "| marks | burst k | DynamoDB requests/event, off | on | ratio | commits, off | on | events/s, off | on | ratio |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (name, layout) in [("table (harel's)", DedupeMarks::Table), ("item (cheapest)", DedupeMarks::OnItem)] {
          for burst in BURSTS {
            let off = measure(moto.endpoint(), layout, events, burst, false).await;
            let on = measure(moto.endpoint(), layout, events, burst, true).await;
            println!(
                "| {name} | {burst} | {:.2} | {:.2} | {:.2} | {} | {} | {:.0} | {:.0} | {:.2}x |",
                off.dynamodb_per_event,
                on.dynamodb_per_event,
                on.dynamodb_per_event / off.dynamodb_per_event,
                off.commits,
                on.commits,
                off.events_per_second,
                on.events_per_second,
                on.events_per_second / off.events_per_second,
            );
          }
        }
    });
}
