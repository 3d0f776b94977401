//! End-to-end throughput of the local stack: events/s through the real worker, DynamoDB and
//! SQS FIFO on moto over HTTP, and where the CPU goes (this process, i.e. the worker and
//! its SDK clients, against the moto server process).
//!
//! ```text
//! cargo bench -p stm-runtime --bench local_throughput
//! THROUGHPUT_EXECUTIONS=20 THROUGHPUT_EVENTS=20 cargo bench -p stm-runtime --bench local_throughput
//! ```
//!
//! E executions of `bench/loop.stm` each get K events (one FIFO group each), published up
//! front; then the event source emulation drains the queue with batches of 10. On AWS the
//! groups would be spread over concurrent Lambda instances; here one poller runs them all,
//! so the figure is the single-worker rate, bounded by the emulator's per-request cost.

use std::sync::Arc;
use std::time::Instant;

use stm_core::{Event, Status};
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::{ActionRegistry, Control, Definitions, Driver, Queue, SqsQueue, Worker, WorkerSettings};
use stm_store::{CreateOptions, DynamoDbStore, ExecutionStore};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds (user + system) of a process, from /proc.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // fields after the command name (in parentheses): utime is the 14th, stime the 15th
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0 // USER_HZ is 100 on Linux
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let executions = env_or("THROUGHPUT_EXECUTIONS", 20);
    let per_execution = env_or("THROUGHPUT_EVENTS", 20);
    let moto = stm_testkit::moto().await;
    let prefix = stm_testkit::unique_prefix("throughput");
    let store = Arc::new(
        DynamoDbStore::create_with(
            Some(moto.endpoint()),
            stm_testkit::REGION,
            CreateOptions {
                prefix: prefix.clone(),
                ..CreateOptions::default()
            },
        )
        .await
        .expect("tables"),
    );
    let sqs = SqsQueue::client(Some(moto.endpoint()), stm_testkit::REGION).await;
    let urls = SqsQueue::ensure(&sqs, &format!("{prefix}-events"), 60, 100)
        .await
        .expect("queue");
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(sqs, urls.queue_url.clone()));
    let file = stm_testkit::repo_root().join("bench/loop.stm");
    // the engine benchmark's machine, as that benchmark loads it (it declares no events)
    let mut defs = Definitions::new();
    defs.register(stm_core::dsl::load_definition_file(&file, None).expect("loop.stm"));
    let driver = Driver::new(store.clone(), defs, ActionRegistry::with_builtins());
    let worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default());
    let control = Control::new(driver, queue.clone());
    let settings = EventSourceSettings {
        wait_seconds: 0,
        ..EventSourceSettings::default()
    };
    for e in 0..executions {
        control
            .create("Loop", None, Some(&format!("tp-{e}")))
            .await
            .expect("create");
    }
    // the Starts first, so every execution is RUNNING before its events
    eventsource::drain(queue.as_ref(), &worker, &settings, || 0.0, 1_000)
        .await
        .expect("drain");
    for k in 0..per_execution {
        for e in 0..executions {
            let kind = if k % 2 == 0 { "Go" } else { "Back" };
            control
                .send(&format!("tp-{e}"), &Event::new(kind))
                .await
                .expect("send");
        }
    }
    let moto_pid = Some(moto.pid().to_string());
    let (ours0, moto0) = (cpu_seconds("self"), moto_pid.as_deref().map_or(0.0, cpu_seconds));
    let started = Instant::now();
    let mut handled = 0;
    loop {
        let polled = eventsource::poll_once(queue.as_ref(), &worker, &settings)
            .await
            .expect("poll");
        handled += polled.deleted;
        if polled.received == 0 && handled >= executions * per_execution {
            break;
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let (ours, moto_cpu) = (
        cpu_seconds("self") - ours0,
        moto_pid.as_deref().map_or(f64::NAN, cpu_seconds) - moto0,
    );
    for e in 0..executions {
        let exe = store
            .load(&format!("tp-{e}"))
            .await
            .expect("load")
            .expect("exists");
        assert_eq!(exe.status, Status::Running);
        assert_eq!(
            exe.processed_events as usize, per_execution,
            "tp-{e}: each event once"
        );
    }
    let events = executions * per_execution;
    println!("local stack throughput: {events} events ({executions} executions x {per_execution}), one worker poller, moto over HTTP");
    println!();
    println!("| events/s | wall | worker process CPU | moto server CPU | worker CPU per event |");
    println!("|---:|---:|---:|---:|---:|");
    println!(
        "| {:.0} | {wall:.2} s | {ours:.2} s ({:.0}% of wall) | {moto_cpu:.2} s ({:.0}% of wall) | {:.2} ms |",
        events as f64 / wall,
        100.0 * ours / wall,
        100.0 * moto_cpu / wall,
        1000.0 * ours / events as f64
    );
}
