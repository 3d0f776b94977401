//! What the spans cost the worker, per record (`bench/loop.stm`, its `Go` and `Back`
//! records one execution at a time, over MemoryStore and MemoryQueue): the worker with no
//! subscriber, with the OTLP exporter's layer posting to a collector on loopback (the test
//! kit's), and with the X-Ray exporter's sending to a daemon on loopback (the test kit's),
//! every trace and the template's default share (0.05), side by side in alternating
//! rounds. Prints a table; asserts nothing.
//!
//!   cargo bench -p stm-runtime --bench spans            # RECORDS=20000, ROUNDS=5

use std::sync::Arc;
use std::time::{Duration, Instant};

use stm_core::Event;
use stm_runtime::telemetry::otlp::{self, Endpoint};
use stm_runtime::telemetry::xray;
use stm_runtime::telemetry::TraceContext;
use stm_runtime::{ActionRegistry, Definitions, Driver, MemoryQueue, Record, Worker, WorkerSettings};
use stm_store::MemoryStore;
use tracing_subscriber::layer::SubscriberExt;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A worker with one `Loop` execution, `id`, started.
fn worker(runtime: &tokio::runtime::Runtime, id: &str) -> Worker {
    let machine = stm_testkit::repo_root().join("bench/loop.stm");
    let defn = stm_core::dsl::load_definition_file(&machine, None).expect("bench/loop.stm");
    let mut defs = Definitions::new();
    defs.register(defn);
    let driver = Driver::new(
        Arc::new(MemoryStore::new()),
        defs,
        ActionRegistry::with_builtins(),
    );
    runtime.block_on(async {
        driver.create("Loop", None, Some(id)).await.expect("created");
    });
    Worker::new(driver, Arc::new(MemoryQueue::new(30)), WorkerSettings::default())
}

/// `n` records of `id`'s group, alternately `Go` and `Back`, each sent in a trace.
fn records(id: &str, n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let event = Event::new(if i % 2 == 0 { "Go" } else { "Back" }).with_id(format!("e{i}"));
            Record {
                message_id: format!("m{i}"),
                receipt_handle: None,
                body: serde_json::to_string(&event).expect("json"),
                group_id: Some(id.to_string()),
                kind: None,
                receive_count: 1,
                trace: Some(TraceContext::new_trace(1_765_000_000.0)),
            }
        })
        .collect()
}

/// Seconds to handle `records`, one record a batch (each its own span, no coalescing).
fn run_records(runtime: &tokio::runtime::Runtime, worker: &Worker, records: &[Record]) -> f64 {
    let started = Instant::now();
    runtime.block_on(async {
        for record in records {
            let outcome = worker.handle_batch(std::slice::from_ref(record)).await;
            assert!(outcome.records.iter().all(|(_, r)| r.is_ok()), "a record failed");
        }
    });
    started.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One round in this process: `mode` `off` (no subscriber), `on` (the OTLP exporter's
/// layer as the process's subscriber, as a function installs it at init), or `xray-R` (the
/// X-Ray exporter's, sending the share R of the traces); prints the seconds and, with an
/// exporter, the spans received, dropped and refused.
fn round(mode: &str, n: usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let id = format!("{mode}-1");
    if mode == "off" {
        let plain = worker(&runtime, &id);
        println!("{}", run_records(&runtime, &plain, &records(&id, n)));
        return;
    }
    if let Some(ratio) = mode.strip_prefix("xray-") {
        let daemon = stm_testkit::xray::Daemon::start();
        let settings = xray::Daemon {
            address: daemon.address.parse().expect("host:port"),
            ratio: ratio.parse().expect("a share"),
        };
        let (layer, exporter) = xray::layer(&settings, "stm-bench").expect("a UDP socket");
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
            .expect("the only subscriber");
        let exported = worker(&runtime, &id);
        let seconds = run_records(&runtime, &exported, &records(&id, n));
        exporter.flush(Duration::from_secs(30));
        // UDP: what the socket's buffer could not take is lost, not refused
        let documents = daemon.documents_when(Duration::from_secs(2), |_| false);
        println!(
            "{seconds} {} {} {}",
            documents.len(),
            exporter.dropped(),
            exporter.failed_requests() as usize + daemon.refused().len()
        );
        return;
    }
    let collector = stm_testkit::otlp::Collector::start();
    let (layer, exporter) = otlp::layer(Endpoint::base(&collector.url).expect("http"), "stm-bench");
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
        .expect("the only subscriber");
    let exported = worker(&runtime, &id);
    let seconds = run_records(&runtime, &exported, &records(&id, n));
    exporter.flush(Duration::from_secs(30));
    let spans = collector.spans_when(Duration::from_secs(30), |spans| spans.len() >= n);
    println!(
        "{seconds} {} {} {}",
        spans.len(),
        exporter.dropped(),
        exporter.failed_requests() as usize + collector.refused().len()
    );
}

/// This bench again, for one round in a process of its own (a process's subscriber is set
/// once): its printed numbers.
fn child(mode: &str, n: usize) -> Vec<f64> {
    let out = std::process::Command::new(std::env::current_exe().expect("this bench"))
        .env("SPANS_ROUND", mode)
        .env("RECORDS", n.to_string())
        .output()
        .expect("a round");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|w| w.parse().expect("a number"))
        .collect()
}

fn main() {
    let n = env_usize("RECORDS", 20_000);
    if let Ok(mode) = std::env::var("SPANS_ROUND") {
        round(&mode, n);
        return;
    }
    let rounds = env_usize("ROUNDS", 5);
    let modes = [
        ("off", "no subscriber"),
        ("on", "OTLP exporter to a loopback collector"),
        ("xray-1", "X-Ray exporter to a loopback daemon, every trace"),
        (
            "xray-0.05",
            "X-Ray exporter to a loopback daemon, 0.05 of the traces",
        ),
    ];
    // per mode: seconds of each round, and the spans, drops and refusals summed
    let mut seconds: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut counts = vec![[0.0f64; 3]; modes.len()];
    for _ in 0..rounds {
        for (at, (mode, _)) in modes.iter().enumerate() {
            let got = child(mode, n);
            seconds[at].push(got[0]);
            for (sum, value) in counts[at].iter_mut().zip(got.iter().skip(1)) {
                *sum += value;
            }
        }
    }
    let medians: Vec<f64> = seconds.into_iter().map(median).collect();
    let off = medians[0];
    println!("{n} records of bench/loop.stm, one a batch, medians of {rounds} alternating rounds, each in a process of its own\n");
    println!("| worker | records/s | µs a record | added µs a record | spans sent a record | dropped (queue full) | refused |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (at, (_, label)) in modes.iter().enumerate() {
        let [spans, dropped, refused] = counts[at];
        println!(
            "| {label} | {:.0} | {:.2} | {:.2} ({:.2}x) | {:.2} | {dropped} | {refused} |",
            n as f64 / medians[at],
            medians[at] * 1e6 / n as f64,
            (medians[at] - off) * 1e6 / n as f64,
            medians[at] / off,
            spans / (n * rounds) as f64,
        );
    }
}
