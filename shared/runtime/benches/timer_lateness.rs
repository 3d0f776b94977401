//! Timer lateness, precise timers (doorbells) against the schedule-only sweep, measured
//! side by side in one run of the local stack on moto (real SQS delays, real polling).
//!
//! ```text
//! cargo bench -p stm-runtime --bench timer_lateness
//! STM_LATENESS_TIMERS=40 STM_SWEEP_PERIOD=60 cargo bench -p stm-runtime --bench timer_lateness
//! ```
//!
//! Each design gets its own tables and queues and runs the worker, relay and sweeper as
//! Lambda would (`eventsource::run_with_doorbells`), the sweeper on EventBridge's finest
//! schedule (60 s by default). N executions of `tests/machines/timers.stm`'s `Doorbell`
//! arm one timeout each, 1 to 20 s, created at spread-out moments of the sweep period (a
//! real schedule's phase is arbitrary). Lateness = the commit of the `Timeout` step minus
//! the timer's due time (the `Start` step's commit + delay), both from the trace.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use stm_core::Status;
use stm_runtime::doorbell::SqsDoorbell;
use stm_runtime::eventsource::{self, EventSourceSettings, Schedules};
use stm_runtime::{ActionRegistry, Control, Definitions, Driver, Queue, SqsQueue, Worker, WorkerSettings};
use stm_store::{CreateOptions, DynamoDbStore, ExecutionStore};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn definitions() -> Definitions {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/machines/timers.stm");
    let mut defs = Definitions::new();
    for defn in stm_runtime::config::load_file(&file).expect("timers.stm") {
        defs.register(defn);
    }
    defs
}

async fn run_design(precise: bool, timers: usize, period: u64) -> Vec<f64> {
    let moto = stm_testkit::moto().await;
    let tag = if precise { "late_precise" } else { "late_sweep" };
    let prefix = stm_testkit::unique_prefix(tag);
    let store: Arc<DynamoDbStore> = Arc::new(
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
    let urls = SqsQueue::ensure(&sqs, &format!("{prefix}-events"), 30, 100)
        .await
        .expect("queue");
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(sqs.clone(), urls.queue_url.clone()));
    // traced: the Start step's commit time is when the timer was armed
    let driver = Driver::new(store.clone(), definitions(), ActionRegistry::with_builtins()).with_trace(true);
    let mut worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default());
    let mut doorbells: Option<Arc<dyn Queue>> = None;
    if precise {
        let url = SqsDoorbell::ensure(&sqs, &format!("{prefix}-timers"))
            .await
            .expect("doorbells");
        worker = worker.with_doorbell(Arc::new(SqsDoorbell::new(sqs.clone(), url.clone())));
        doorbells = Some(Arc::new(SqsQueue::new(sqs.clone(), url)));
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stack = tokio::spawn(eventsource::run_with_doorbells(
        queue.clone(),
        worker,
        EventSourceSettings {
            // short polls: moto's long polls hold its server, Lambda's pollers do not
            wait_seconds: 0,
            ..EventSourceSettings::default()
        },
        Schedules {
            relay_every: Duration::from_secs(5),
            sweep_every: Duration::from_secs(period),
        },
        doorbells,
        stop_rx,
    ));
    let control = Control::new(driver, queue.clone());
    let started = Instant::now();
    let mut delays = Vec::new();
    for i in 0..timers {
        // spread the creations over one sweep period, the delays over 1..20 s
        let at = Duration::from_secs_f64(period as f64 * i as f64 / timers as f64);
        if let Some(wait) = at.checked_sub(started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        let delay = 1.0 + (i * 7 % 20) as f64 * 0.95;
        let seed = json!({"delay": delay}).as_object().cloned().unwrap_or_default();
        control
            .create("Doorbell", Some(seed), Some(&format!("{tag}-{i}")))
            .await
            .expect("create");
        delays.push(delay);
    }
    let deadline = Instant::now() + Duration::from_secs(period * 2 + 60);
    let mut lateness = Vec::new();
    loop {
        lateness.clear();
        for (i, delay) in delays.iter().enumerate() {
            let exe = store
                .load(&format!("{tag}-{i}"))
                .await
                .expect("load")
                .expect("exists");
            if exe.status == Status::Done {
                let steps = store.read_trace(&exe.id).await.expect("trace");
                let at = |kind: &str| {
                    steps
                        .iter()
                        .find(|s| s.get("event_kind").and_then(|k| k.as_str()) == Some(kind))
                        .and_then(|s| s.get("timestamp").and_then(serde_json::Value::as_f64))
                };
                // the Start step armed the timer; the Timeout step is when it took effect
                if let (Some(armed), Some(fired)) = (at("Start"), at("Timeout")) {
                    lateness.push(fired - (armed + delay));
                }
            }
        }
        if lateness.len() == timers || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let _ = stop_tx.send(true);
    let _ = stack.await;
    if std::env::var_os("STM_LATENESS_VERBOSE").is_some() {
        for (i, delay) in delays.iter().enumerate() {
            let exe = store
                .load(&format!("{tag}-{i}"))
                .await
                .expect("load")
                .expect("exists");
            let steps = store.read_trace(&exe.id).await.expect("trace");
            let times: Vec<String> = steps
                .iter()
                .map(|s| {
                    format!(
                        "{}@{:.3}",
                        s.get("event_kind").and_then(|k| k.as_str()).unwrap_or("-"),
                        s.get("timestamp")
                            .and_then(serde_json::Value::as_f64)
                            .unwrap_or_default()
                    )
                })
                .collect();
            eprintln!(
                "{tag}-{i}: delay {delay:.2} created {:.3} steps {times:?}",
                exe.created_at.unwrap_or_default()
            );
        }
    }
    assert_eq!(lateness.len(), timers, "{tag}: every timer fired");
    lateness
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let timers: usize = env_or("STM_LATENESS_TIMERS", 30);
    let period: u64 = env_or("STM_SWEEP_PERIOD", 60);
    eprintln!(
        "timer lateness: {timers} timers per design, sweeper every {period} s, both designs at once on moto"
    );
    let (mut precise, mut sweep) = tokio::join!(
        run_design(true, timers, period),
        run_design(false, timers, period)
    );
    precise.sort_by(f64::total_cmp);
    sweep.sort_by(f64::total_cmp);
    println!("| design | timers | lateness p50 | p99 | max |");
    println!("|---|---:|---:|---:|---:|");
    for (name, l) in [
        (
            "precise (doorbell on a delayed SQS message + the sweep)",
            &precise,
        ),
        ("schedule-only sweep (the seed's design)", &sweep),
    ] {
        println!(
            "| {name} | {} | {:.2} s | {:.2} s | {:.2} s |",
            l.len(),
            percentile(l, 50.0),
            percentile(l, 99.0),
            l.last().copied().unwrap_or(f64::NAN)
        );
    }
    println!(
        "\nschedule-only p50 / precise p50 = {:.0}x; p99 ratio = {:.0}x",
        percentile(&sweep, 50.0) / percentile(&precise, 50.0).max(1e-3),
        percentile(&sweep, 99.0) / percentile(&precise, 99.0).max(1e-3)
    );
}
