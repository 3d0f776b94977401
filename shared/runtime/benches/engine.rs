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
use stm_core::{Event, Execution};
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

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn events(count: usize) -> Vec<Event> {
    (0..count)
        .map(|i| Event::new(if i % 2 == 0 { "Go" } else { "Back" }).with_id(format!("e{i}")))
        .collect()
}

struct Row {
    name: &'static str,
    events_per_sec: f64,
    allocs_per_event: Option<f64>,
}

fn measure<F: FnMut()>(count: usize, mut f: F) -> (f64, f64) {
    let a0 = ALLOCATIONS.load(Ordering::Relaxed);
    let t0 = Instant::now();
    f();
    let secs = t0.elapsed().as_secs_f64();
    let allocs = (ALLOCATIONS.load(Ordering::Relaxed) - a0) as f64 / count as f64;
    (count as f64 / secs, allocs)
}

fn harel_events_per_sec(machine: &Path, count: usize) -> Result<f64, String> {
    let python = std::env::var("STM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo_root().join(".venv/bin/python"));
    let script = repo_root().join("bench/harel_engine.py");
    let out = std::process::Command::new(&python)
        .arg(&script)
        .arg(machine)
        .arg(count.to_string())
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
    let mut rows = Vec::new();

    // the full embedded driver: load, step, commit (CAS), per event
    let mut defs = Definitions::new();
    defs.register(defn.clone());
    let driver = Driver::new(
        Arc::new(MemoryStore::new()),
        defs,
        ActionRegistry::with_builtins(),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        driver.create("Loop", None, Some("bench")).await.expect("create");
    });
    let (eps, allocs) = measure(count, || {
        runtime.block_on(async {
            for ev in &evs {
                driver.process("bench", ev).await.expect("process");
            }
        })
    });
    rows.push(Row {
        name: "driver (load+step+commit)",
        events_per_sec: eps,
        allocs_per_event: Some(allocs),
    });

    // the pure engine step
    let mut exe = Execution::new("bench", "Loop");
    engine::start(&defn, &mut exe, 0.0, &mut NoActions).expect("start");
    let (eps, allocs) = measure(count, || {
        for ev in &evs {
            engine::process(&defn, &mut exe, ev, 0.0, &mut NoActions).expect("step");
        }
    });
    rows.push(Row {
        name: "engine step only",
        events_per_sec: eps,
        allocs_per_event: Some(allocs),
    });

    // JSON decode + step + encode
    let mut json = exe.to_json();
    let (eps, allocs) = measure(count, || {
        for ev in &evs {
            let mut e = Execution::from_json(&json).expect("decode");
            engine::process(&defn, &mut e, ev, 0.0, &mut NoActions).expect("step");
            json = e.to_json();
        }
    });
    rows.push(Row {
        name: "json decode+step+encode",
        events_per_sec: eps,
        allocs_per_event: Some(allocs),
    });

    let harel = harel_events_per_sec(&machine, count);
    println!("engine benchmark: {count} events on bench/loop.stm (two-state loop), same machine, same run");
    println!();
    println!("| runner | events/s | allocations/event | vs harel DurableRunner |");
    println!("|---|---:|---:|---:|");
    for row in &rows {
        let ratio = match &harel {
            Ok(h) => format!("{:.0}x", row.events_per_sec / h),
            Err(_) => "n/a".into(),
        };
        let allocs = row.allocs_per_event.map_or("-".into(), |a| format!("{a:.1}"));
        println!(
            "| {} | {:.0} | {} | {} |",
            row.name, row.events_per_sec, allocs, ratio
        );
    }
    match harel {
        Ok(h) => println!("| harel 0.9.0 DurableRunner + DictStore (inline) | {h:.0} | - | 1x |"),
        Err(e) => println!("| harel 0.9.0 | not measured: {e} | - | - |"),
    }
}
