//! Engine benchmark: our events/s against harel 0.9.0's `DurableRunner` over
#![allow(unsafe_code)] // the counting global allocator below; nothing else
//! `DictStore`, on the same machine (`bench/loop.stm`) and the same 20,000 events,
//! both measured in this run on this machine. Prints a table; asserts nothing.
//!
//!     cargo bench -p stm-runtime --bench engine            # uses $STM_PYTHON or .venv
//!     BENCH_EVENTS=100000 cargo bench -p stm-runtime --bench engine
//!
//! Rows:
//! - `driver`: the full embedded path per event (load from the store, engine step,
//!   commit with CAS) — the same work harel's runner does per `process` call;
//! - `engine`: the pure step alone (`engine::process` on an in-memory execution);
//! - `json+engine`: decode the Execution JSON, step, encode it (what the worker does
//!   per event besides IO).

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use stm_core::engine::{self, NoActions};
use stm_core::{Event, Execution, Map};
use stm_runtime::{ActionRegistry, Definitions, Driver};
use stm_store::MemoryStore;

/// Counts heap allocations so we can report allocations per step.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

use stm_testkit::repo_root;

/// The events, built field by field: `Event::new` draws a random id, whose cost would
/// land in the per-event counts.
fn events(count: usize) -> Vec<Event> {
    (0..count)
        .map(|i| Event {
            id: format!("e{i}"),
            kind: if i % 2 == 0 { "Go" } else { "Back" }.to_string(),
            created_time: None,
            received_time: None,
            data: Map::new(),
            extra: Map::new(),
        })
        .collect()
}

fn measure<F: FnMut()>(count: usize, mut f: F) -> (f64, f64) {
    let a0 = ALLOCATIONS.load(Ordering::Relaxed);
    let t0 = Instant::now();
    f();
    let secs = t0.elapsed().as_secs_f64();
    let allocs = (ALLOCATIONS.load(Ordering::Relaxed) - a0) as f64 / count as f64;
    (count as f64 / secs, allocs)
}

/// The bench's execution, started.
fn started(defn: &stm_core::Definition) -> Execution {
    let mut exe = Execution::new("bench", "Loop");
    engine::start(defn, &mut exe, 0.0, &mut NoActions).expect("start");
    exe
}

/// The pure engine step over `evs`: what the `engine step only` row times.
fn step_all(defn: &stm_core::Definition, exe: &mut Execution, evs: &[Event]) {
    for ev in evs {
        engine::process(defn, exe, ev, 0.0, &mut NoActions).expect("step");
    }
}

/// The embedded runner over a MemoryStore, running `defn` (what `stm run` builds).
fn embedded_driver(defn: &stm_core::Definition) -> Driver {
    let mut defs = Definitions::new();
    defs.register(defn.clone());
    Driver::new(
        Arc::new(MemoryStore::new()),
        defs,
        ActionRegistry::with_builtins(),
    )
}

fn harel_events_per_sec(machine: &Path, count: usize, mode: &str) -> Result<f64, String> {
    let python = std::env::var("STM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo_root().join(".venv/bin/python"));
    let script = repo_root().join("bench/harel_engine.py");
    let out = std::process::Command::new(&python)
        .arg(&script)
        .arg(machine)
        .arg(count.to_string())
        .arg(mode)
        .output()
        .map_err(|e| format!("cannot run {}: {e} (run .ci/setup.sh)", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "harel bench failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("bad harel bench output: {e}"))?;
    let secs = v["seconds"].as_f64().ok_or("no seconds in harel output")?;
    Ok(count as f64 / secs)
}

fn main() {
    let count: usize = std::env::var("BENCH_EVENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let machine = repo_root().join("bench/loop.stm");
    let defn = match stm_core::dsl::load_definition_file(&machine, None) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let evs = events(count);
    // `BENCH_ONLY=engine-step|json-step|driver-step`: one of the rows, once, and nothing
    // else, for `bench/engine-vs-base.sh` to count its instructions under callgrind;
    // `BENCH_ONLY=engine-rate`: the engine step's events/s, one round, the number alone (for
    // `bench/stm-run-vs-harel.sh`, which sets the whole `stm run` process against it)
    if let Ok(only) = std::env::var("BENCH_ONLY") {
        match only.as_str() {
            "engine-rate" => {
                let mut exe = started(&defn);
                let (eps, _) = measure(count, || step_all(&defn, &mut exe, &evs));
                println!("{eps:.0}");
            }
            "engine-step" => {
                let mut exe = started(&defn);
                step_all(&defn, &mut exe, &evs);
                println!("{}", exe.processed_events);
            }
            "json-step" => {
                let exe = started(&defn);
                let mut json = exe.to_json();
                for ev in &evs {
                    let mut e = Execution::from_json(&json).expect("decode");
                    engine::process(&defn, &mut e, ev, 0.0, &mut NoActions).expect("step");
                    json = e.to_json();
                }
                println!("{}", json.len());
            }
            "driver-step" => {
                let driver = embedded_driver(&defn);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .expect("tokio runtime");
                runtime.block_on(async {
                    driver.create("Loop", None, Some("bench")).await.expect("create");
                    for ev in &evs {
                        driver.process("bench", ev).await.expect("process");
                    }
                });
            }
            other => {
                eprintln!("BENCH_ONLY={other:?}: use engine-step, engine-rate, json-step or driver-step");
                std::process::exit(2);
            }
        }
        return;
    }
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio runtime");
    let driver = embedded_driver(&defn);

    // Ours and harel's alternate, round after round, and each keeps its best round: the
    // machine is shared and noisy, and alternating exposes both to the same conditions.
    let mut best = [0.0f64; 3];
    let mut allocs = [0.0f64; 3];
    let mut harel_best: [Result<f64, String>; 2] = [Ok(0.0), Ok(0.0)];
    for round in 0..rounds {
        // the full embedded driver: load, step, commit (CAS), per event
        let id = format!("bench-{round}");
        runtime.block_on(async {
            driver.create("Loop", None, Some(&id)).await.expect("create");
        });
        let (eps, a) = measure(count, || {
            runtime.block_on(async {
                for ev in &evs {
                    driver.process(&id, ev).await.expect("process");
                }
            })
        });
        (best[0], allocs[0]) = (best[0].max(eps), a);

        // the pure engine step
        let mut exe = started(&defn);
        let (eps, a) = measure(count, || step_all(&defn, &mut exe, &evs));
        (best[1], allocs[1]) = (best[1].max(eps), a);

        // JSON decode + step + encode
        let mut json = exe.to_json();
        let (eps, a) = measure(count, || {
            for ev in &evs {
                let mut e = Execution::from_json(&json).expect("decode");
                engine::process(&defn, &mut e, ev, 0.0, &mut NoActions).expect("step");
                json = e.to_json();
            }
        });
        (best[2], allocs[2]) = (best[2].max(eps), a);

        for (slot, mode) in harel_best.iter_mut().zip(["background", "inline"]) {
            *slot = match (slot.clone(), harel_events_per_sec(&machine, count, mode)) {
                (Ok(prev), Ok(now)) => Ok(prev.max(now)),
                (_, Err(e)) | (Err(e), _) => Err(e),
            };
        }
    }

    let names = [
        "driver (load+step+commit, MemoryStore)",
        "engine step only",
        "json decode+step+encode",
    ];
    println!(
        "engine benchmark: {count} events on bench/loop.stm (two-state loop), best of {rounds} alternating rounds"
    );
    println!();
    println!("| runner | events/s | allocations/event | vs harel (default) | vs harel (inline) |");
    println!("|---|---:|---:|---:|---:|");
    let ratio = |ours: f64, h: &Result<f64, String>| match h {
        Ok(h) if *h > 0.0 => format!("{:.0}x", ours / h),
        _ => "n/a".into(),
    };
    for i in 0..3 {
        println!(
            "| {} | {:.0} | {:.1} | {} | {} |",
            names[i],
            best[i],
            allocs[i],
            ratio(best[i], &harel_best[0]),
            ratio(best[i], &harel_best[1])
        );
    }
    for (h, label) in harel_best.iter().zip([
        "harel 0.9.0 DurableRunner + DictStore, default execution (background)",
        "harel 0.9.0 DurableRunner + DictStore, execution=\"inline\"",
    ]) {
        match h {
            Ok(h) => println!("| {label} | {h:.0} | - | | |"),
            Err(e) => println!("| {label} | not measured: {e} | - | | |"),
        }
    }
}
