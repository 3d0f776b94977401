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
//!
//! For the precise design it also says where each millisecond goes: the doorbell and the
//! two queues are wrapped to stamp (on the wall clock) when the doorbell was sent, when
//! the sweeper's poller received it, when the handler published the `Timeout`, when the
//! worker's poller received that, and when the worker's step was traced.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::json;
use stm_core::Status;
use stm_runtime::doorbell::{delay_seconds, parse_doorbell, Doorbell, SqsDoorbell};
use stm_runtime::eventsource::{self, EventSourceSettings, Schedules};
use stm_runtime::queue::{HookedQueue, PublishFailure, QueueCall, QueueError, QueueHook, ReceivedMessage};
use stm_runtime::{
    ActionRegistry, Clock, Control, Definitions, Driver, OutgoingMessage, Queue, SqsQueue, SystemClock,
    Worker, WorkerSettings,
};
use stm_store::{CreateOptions, DueTimer, DynamoDbStore, ExecutionStore};

fn wall() -> f64 {
    SystemClock.now()
}

/// The moments of one precise timer, per execution id (one timer each), wall clock.
#[derive(Debug, Default, Clone)]
struct Moments {
    fire_at: f64,
    /// `fire_at - now` when the worker rang, and the `DelaySeconds` it rang with.
    ahead: f64,
    delay: i32,
    /// the doorbell's `SendMessageBatch` returned (SQS counts the delay from about then)
    rung: f64,
    /// the sweeper's poller got the doorbell
    bell_received: f64,
    /// the handler's `Timeout` publish started and returned
    publish_started: f64,
    published: f64,
    /// the worker's poller got the `Timeout`
    timeout_received: f64,
    /// the worker's handler returned on it (the settle's delete starts)
    handled: f64,
}

type Marks = Arc<Mutex<HashMap<String, Moments>>>;

fn mark(marks: &Marks, id: &str, f: impl FnOnce(&mut Moments)) {
    let mut all = marks.lock().unwrap_or_else(|e| e.into_inner());
    f(all.entry(id.to_string()).or_default());
}

struct MarkedBell {
    inner: SqsDoorbell,
    marks: Marks,
}

#[async_trait]
impl Doorbell for MarkedBell {
    async fn ring(&self, timers: &[DueTimer], now: f64) -> usize {
        let failed = self.inner.ring(timers, now).await;
        let rung = wall();
        for t in timers {
            mark(&self.marks, &t.execution_id, |m| {
                m.fire_at = t.fire_at;
                m.ahead = t.fire_at - now;
                m.delay = delay_seconds(t.fire_at, now);
                m.rung = rung;
            });
        }
        failed
    }
}

/// A queue that stamps the doorbells it delivers (`bells`) or the `Timeout`s it carries.
type MarkedQueue = HookedQueue<Stamps>;

/// A [`MarkedQueue`]'s hook.
struct Stamps {
    marks: Marks,
    bells: bool,
    /// receipt handle -> execution id, for the `Timeout`s received
    receipts: Mutex<HashMap<String, String>>,
}

fn marked_queue(inner: SqsQueue, marks: &Marks, bells: bool) -> MarkedQueue {
    let stamps = Stamps {
        marks: marks.clone(),
        bells,
        receipts: Mutex::default(),
    };
    HookedQueue::new(Arc::new(inner), stamps)
}

fn is_timeout(body: &str) -> bool {
    body.contains("\"Timeout\"")
}

#[async_trait]
impl QueueHook for Stamps {
    async fn publish_batch(&self, inner: &dyn Queue, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        let started = wall();
        let failures = inner.publish_batch(messages).await;
        let done = wall();
        for m in messages.iter().filter(|m| is_timeout(&m.body)) {
            mark(&self.marks, &m.group_id, |t| {
                if t.published == 0.0 {
                    t.publish_started = started;
                    t.published = done;
                }
            });
        }
        failures
    }

    async fn receive(
        &self,
        inner: &dyn Queue,
        max: usize,
        visibility_seconds: i32,
        wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, QueueError> {
        let got = inner.receive(max, visibility_seconds, wait_seconds).await?;
        let at = wall();
        for m in &got {
            if self.bells {
                if let Ok(timer) = parse_doorbell(&m.body) {
                    mark(&self.marks, &timer.execution_id, |t| {
                        if t.bell_received == 0.0 {
                            t.bell_received = at;
                        }
                    });
                }
            } else if let (true, Some(id)) = (is_timeout(&m.body), &m.group_id) {
                mark(&self.marks, id, |t| {
                    if t.timeout_received == 0.0 {
                        t.timeout_received = at;
                    }
                });
                self.receipts
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(m.receipt_handle.clone(), id.clone());
            }
        }
        Ok(got)
    }

    async fn before(&self, call: &QueueCall<'_>) -> Result<(), QueueError> {
        let QueueCall::Delete { receipt_handle } = call else {
            return Ok(());
        };
        let id = self
            .receipts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(*receipt_handle);
        if let Some(id) = id {
            let at = wall();
            mark(&self.marks, &id, |t| {
                if t.handled == 0.0 {
                    t.handled = at;
                }
            });
        }
        Ok(())
    }
}

/// What one design's run measured: lateness per timer, and the precise timers' moments
/// with the traced `Timeout` step time.
struct Run {
    lateness: Vec<f64>,
    moments: Vec<(Moments, f64)>,
}

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

async fn run_design(precise: bool, timers: usize, period: u64) -> Run {
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
    let marks: Marks = Arc::default();
    let queue: Arc<dyn Queue> = Arc::new(marked_queue(
        SqsQueue::new(sqs.clone(), urls.queue_url.clone()),
        &marks,
        false,
    ));
    // traced: the Start step's commit time is when the timer was armed
    let driver = Driver::new(store.clone(), definitions(), ActionRegistry::with_builtins()).with_trace(true);
    let mut worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default());
    let mut doorbells: Option<Arc<dyn Queue>> = None;
    if precise {
        let url = SqsDoorbell::ensure(&sqs, &format!("{prefix}-timers"))
            .await
            .expect("doorbells");
        worker = worker.with_doorbell(Arc::new(MarkedBell {
            inner: SqsDoorbell::new(sqs.clone(), url.clone()),
            marks: marks.clone(),
        }));
        doorbells = Some(Arc::new(marked_queue(
            SqsQueue::new(sqs.clone(), url),
            &marks,
            true,
        )));
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
    let mut traced = Vec::new();
    loop {
        lateness.clear();
        traced.clear();
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
                    traced.push((exe.id.clone(), fired));
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
    let marks = marks.lock().unwrap_or_else(|e| e.into_inner());
    let moments = traced
        .iter()
        .filter_map(|(id, fired)| {
            marks
                .get(id)
                .filter(|m| m.rung > 0.0)
                .map(|m| (m.clone(), *fired))
        })
        .collect();
    Run { lateness, moments }
}

/// Where the precise timers' lateness goes, stage by stage (ms): p50, p99, max of each.
fn breakdown(moments: &[(Moments, f64)]) {
    let ms = |v: f64| v * 1000.0;
    let stages: Vec<(&str, Vec<f64>)> = vec![
        (
            "ring: `fire_at - now` minus the whole-second `DelaySeconds` (the handler's wait to come)",
            moments.iter().map(|(m, _)| ms(m.ahead - f64::from(m.delay))).collect(),
        ),
        (
            "doorbell visible -> sweeper's poller has it (`rung + DelaySeconds` to the receive's return)",
            moments
                .iter()
                .map(|(m, _)| ms(m.bell_received - (m.rung + f64::from(m.delay))))
                .collect(),
        ),
        (
            "doorbell received before `fire_at` (the handler waits this; negative: late)",
            moments.iter().map(|(m, _)| ms(m.fire_at - m.bell_received)).collect(),
        ),
        (
            "`fire_at` (or the receive, if later) -> `Timeout` publish starts (wait's overshoot, `GetItem` timer, `GetItem` execution)",
            moments
                .iter()
                .map(|(m, _)| ms(m.publish_started - m.fire_at.max(m.bell_received)))
                .collect(),
        ),
        (
            "`Timeout` `SendMessageBatch` (FIFO)",
            moments.iter().map(|(m, _)| ms(m.published - m.publish_started)).collect(),
        ),
        (
            "published -> worker's poller has it (idle pause + `ReceiveMessage`)",
            moments.iter().map(|(m, _)| ms(m.timeout_received - m.published)).collect(),
        ),
        (
            "received -> the step traced (load, step; the trace stamp is taken just before the commit)",
            moments.iter().map(|(m, fired)| ms(fired - m.timeout_received)).collect(),
        ),
        (
            "traced -> handler returned (the commit, then the batch's bookkeeping)",
            moments.iter().map(|(m, fired)| ms(m.handled - fired)).collect(),
        ),
        (
            "lateness: the traced step - `fire_at`",
            moments.iter().map(|(m, fired)| ms(fired - m.fire_at)).collect(),
        ),
    ];
    println!(
        "\nprecise timers, where the time goes ({} timers, wall clock, ms):\n",
        moments.len()
    );
    println!("| stage | p50 | p99 | max |");
    println!("|---|---:|---:|---:|");
    for (name, mut values) in stages {
        values.sort_by(f64::total_cmp);
        println!(
            "| {name} | {:.0} | {:.0} | {:.0} |",
            percentile(&values, 50.0),
            percentile(&values, 99.0),
            values.last().copied().unwrap_or(f64::NAN)
        );
    }
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
    let (precise_run, sweep_run) = tokio::join!(
        run_design(true, timers, period),
        run_design(false, timers, period)
    );
    let (mut precise, mut sweep) = (precise_run.lateness, sweep_run.lateness);
    precise.sort_by(f64::total_cmp);
    sweep.sort_by(f64::total_cmp);
    println!("| design | timers | lateness p50 | p99 | max |");
    println!("|---|---:|---:|---:|---:|");
    for (name, l) in [
        (
            "precise (doorbell on a delayed SQS message + the sweep)",
            &precise,
        ),
        ("schedule-only sweep (harel's design)", &sweep),
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
    breakdown(&precise_run.moments);
}
