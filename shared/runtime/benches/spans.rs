//! What the spans cost the worker, per record (`bench/loop.stm`, its `Go` and `Back`
//! records one execution at a time, over MemoryStore and MemoryQueue): the worker with no
//! subscriber, and with the OTLP exporter's layer posting to a collector on loopback
//! (the test kit's), side by side in alternating rounds. Prints a table; asserts nothing.
//!
//!   cargo bench -p stm-runtime --bench spans            # RECORDS=20000, ROUNDS=5

use std::sync::Arc;
use std::time::{Duration, Instant};

use stm_core::Event;
use stm_runtime::telemetry::otlp::{self, Endpoint};
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

/// One round in this process: `mode` `off` (no subscriber) or `on` (the exporter's layer as
/// the process's subscriber, as a function installs it at init); prints the seconds and,
/// for `on`, the spans the collector received, dropped and refused.
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
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let (mut spans, mut dropped, mut refused) = (0.0, 0.0, 0.0);
    for _ in 0..rounds {
        off.push(child("off", n)[0]);
        let got = child("on", n);
        on.push(got[0]);
        spans += got[1];
        dropped += got[2];
        refused += got[3];
    }
    let (off, on) = (median(off), median(on));
    println!("{n} records of bench/loop.stm, one a batch, medians of {rounds} alternating rounds, each in a process of its own\n");
    println!("| worker | records/s | µs a record | spans a record |");
    println!("|---|---:|---:|---:|");
    println!(
        "| no subscriber | {:.0} | {:.2} | 0 |",
        n as f64 / off,
        off * 1e6 / n as f64
    );
    println!(
        "| OTLP exporter to a loopback collector | {:.0} | {:.2} | {:.1} |",
        n as f64 / on,
        on * 1e6 / n as f64,
        spans / (n * rounds) as f64
    );
    println!(
        "\nadded per record: {:.2} µs ({:.2}x); spans dropped (queue full): {dropped}; requests refused: {refused}",
        (on - off) * 1e6 / n as f64,
        on / off,
    );
}
