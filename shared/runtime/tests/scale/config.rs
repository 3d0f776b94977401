//! The model and its inputs: the latency model and the gate's constants, the run's
//! configuration (quick or full), DynamoDB's prices from the cost model, the deployment's
//! figures from `template.yaml`, the machines, and a small deterministic generator.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use stm_runtime::Definitions;

/// The simulation's epoch (the clock's start).
pub(crate) const START: f64 = 1_700_000_000.0;
/// A serial caller's pace (the relay's run): the clock advances this much per request, so
/// its load spreads over the seconds it takes; its modelled time is drawn from the latency
/// table (`latency.rs`).
pub(crate) const DDB_SECONDS: f64 = 0.005;
pub(crate) const SQS_SECONDS: f64 = 0.010;
/// The gate: the hottest shared key's share of its limit, the requests per event between a
/// small and a large table, the share of the offered events served at the run's largest
/// rate, and a function's peak memory against its `MemorySize`.
pub(crate) const GATE_SHARE: f64 = 0.5;
pub(crate) const FLAT_TOLERANCE: f64 = 0.02;
pub(crate) const GATE_SERVED: f64 = 0.99;
pub(crate) const GATE_MEMORY: f64 = 0.5;
/// Each function's resident memory before its first event (MiB): `bench/coldstart.sh`'s
/// peak RSS at init, 2026-12-02 (docs/performance.md). A call's peak heap adds to it.
pub(crate) const WORKER_RESIDENT_MIB: f64 = 14.1;
pub(crate) const RELAY_RESIDENT_MIB: f64 = 12.7;
pub(crate) const SWEEPER_RESIDENT_MIB: f64 = 13.4;
/// How long a failed record stays hidden when the worker did not release it.
pub(crate) const VISIBILITY_SECONDS: f64 = 360.0;
/// The share of events that emit, and that are timeouts, in the mixed workloads.
pub(crate) const EMIT_SHARE: f64 = 0.1;
pub(crate) const TIMER_SHARE: f64 = 0.1;
/// The `Ticker`'s timer fires every this many seconds: its `timeout` (1.5 s, in
/// `tests/machines/scale.stm`), fired by its doorbell at its `fire_at`. (2 s while the
/// simulation left every timer to its sweeps, at whole seconds.)
pub(crate) const TICKER_PERIOD: f64 = 1.5;
/// Events per second per active execution, on average.
pub(crate) const EVENTS_PER_EXECUTION: f64 = 10.0;

// --- configuration -----------------------------------------------------------------

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) full: bool,
    pub(crate) rates: Vec<f64>,
    /// The simulated seconds of arrivals per run.
    pub(crate) window: f64,
    pub(crate) idle: usize,
    pub(crate) backlog: usize,
    /// Fan-outs of large packed spawn rows in the relay's backlog.
    pub(crate) packed: usize,
    /// The fan-out that joins today, and the one the runtime must reach.
    pub(crate) fanout: usize,
    pub(crate) fanout_wide: usize,
    /// Timed executions bulk-suspended and resumed.
    pub(crate) bulk_timed: usize,
    /// Executions a bulk command selects by state.
    pub(crate) bulk_by_state: usize,
    /// Timers due at once.
    pub(crate) due_at_once: usize,
    /// Events parked on one suspended execution (2,000 of ~200 bytes filled its 400 KB
    /// item when they were kept on it).
    pub(crate) parked: usize,
}

impl Config {
    pub(crate) fn from_env() -> Config {
        let full = std::env::var("STM_SCALE").is_ok_and(|v| v.eq_ignore_ascii_case("full"));
        if full {
            Config {
                full,
                rates: vec![1_000.0, 10_000.0, 100_000.0],
                window: 2.0,
                idle: 1_000_000,
                backlog: 1_000_000,
                packed: 300,
                fanout: 1_000,
                fanout_wide: 10_000,
                bulk_timed: 100_000,
                bulk_by_state: 1_000_000,
                due_at_once: 1_000_000,
                parked: 2_000,
            }
        } else {
            Config {
                full,
                rates: vec![1_000.0, 10_000.0],
                window: 2.0,
                idle: 10_000,
                backlog: 10_000,
                packed: 30,
                fanout: 1_000,
                fanout_wide: 10_000,
                bulk_timed: 10_000,
                bulk_by_state: 10_000,
                due_at_once: 10_000,
                parked: 2_000,
            }
        }
    }
}

fn repo_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

/// DynamoDB's on-demand prices, $ per million units, from `bench/cost_model.py`'s `PRICES`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prices {
    pub(crate) write: f64,
    pub(crate) read: f64,
}

pub(crate) fn prices() -> Prices {
    let path = repo_file("bench/cost_model.py");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading the DynamoDB prices from {}: {e}", path.display()));
    let table = text
        .find("PRICES = {")
        .map(|at| &text[at..])
        .unwrap_or_else(|| panic!("{}: no `PRICES = {{` (the DynamoDB prices)", path.display()));
    let price = |name: &str| -> f64 {
        let needle = format!("\"{name}\":");
        let at = table
            .find(&needle)
            .unwrap_or_else(|| panic!("{}: PRICES has no {needle}", path.display()));
        let number: String = table[at + needle.len()..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        number
            .parse()
            .unwrap_or_else(|_| panic!("{}: {needle} is not followed by a number", path.display()))
    };
    Prices {
        write: price("ddb_write_per_million_wru"),
        read: price("ddb_read_per_million_rru"),
    }
}

/// A number from template.yaml: the first `key: N` in the block of `name` (a resource or a
/// parameter, indented by two spaces).
fn template_number(name: &str, key: &str) -> f64 {
    let path = repo_file("template.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let header = format!("  {name}:");
    let mut lines = text.lines().skip_while(|l| l.trim_end() != header);
    lines
        .next()
        .unwrap_or_else(|| panic!("{}: no `{name}:`", path.display()));
    for line in lines {
        let sibling = line.starts_with("  ") && !line.starts_with("   ");
        let top = !line.is_empty() && !line.starts_with(' ');
        if sibling || top {
            break;
        }
        if let Some(value) = line.trim_start().strip_prefix(&format!("{key}:")) {
            return value
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("{}: {name}'s {key} is not a number: {line}", path.display()));
        }
    }
    panic!("{}: `{name}` has no `{key}:`", path.display())
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Deployment {
    pub(crate) worker_batch_size: f64,
    pub(crate) worker_max_concurrency: f64,
    pub(crate) worker_memory_mb: f64,
    pub(crate) relay_memory_mb: f64,
    pub(crate) relay_timeout: f64,
    pub(crate) sweeper_memory_mb: f64,
    pub(crate) sweeper_timeout: f64,
    /// The sweeper's SQS trigger on the doorbell queue: its `MaximumConcurrency`
    /// (`DoorbellMaxConcurrency`) and `BatchSize`, and the queue's `VisibilityTimeout`.
    pub(crate) doorbell_max_concurrency: f64,
    pub(crate) doorbell_batch_size: f64,
    pub(crate) timer_queue_visibility: f64,
}

pub(crate) fn deployment() -> Deployment {
    Deployment {
        worker_batch_size: template_number("WorkerBatchSize", "Default"),
        worker_max_concurrency: template_number("WorkerMaxConcurrency", "Default"),
        worker_memory_mb: template_number("WorkerMemorySize", "Default"),
        relay_memory_mb: template_number("Relay", "MemorySize"),
        relay_timeout: template_number("Relay", "Timeout"),
        sweeper_memory_mb: template_number("Sweeper", "MemorySize"),
        sweeper_timeout: template_number("Sweeper", "Timeout"),
        doorbell_max_concurrency: template_number("DoorbellMaxConcurrency", "Default"),
        // the one `BatchSize` in the sweeper's block: its `Doorbells` event's
        doorbell_batch_size: template_number("Sweeper", "BatchSize"),
        timer_queue_visibility: template_number("TimerQueue", "VisibilityTimeout"),
    }
}

/// A function's peak memory against its `MemorySize` (MB as Lambda counts them, MiB):
/// its resident memory at init and the most heap one call held above its start.
pub(crate) fn memory_share(resident_mib: f64, peak_heap: usize, memory_mb: f64) -> f64 {
    (resident_mib + peak_heap as f64 / (1024.0 * 1024.0)) / memory_mb
}

pub(crate) fn definitions() -> Definitions {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/machines/scale.stm");
    let mut defs = Definitions::new();
    for defn in stm_runtime::config::load_file(&file).expect("scale.stm loads and validates") {
        defs.register(defn);
    }
    defs
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One simulation at a time in this process: the heap counter a function's peak memory is
/// read from (`stm_testkit::heap`) is the process's, so a test's simulation running beside
/// the gate's would move the gate's figures.
static ONE_SIMULATION: Mutex<()> = Mutex::new(());

/// Run `simulation` to its end on a runtime of its own (as `#[tokio::test]` would), no
/// other simulation of this process running meanwhile. The future is on the heap: the
/// gate's nests every workload's, and a debug build's are large enough that, pinned on
/// the test thread's 2 MB stack, they overflowed it.
pub(crate) fn simulate<T>(simulation: impl std::future::Future<Output = T>) -> T {
    let _alone = lock(&ONE_SIMULATION);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the simulation")
        .block_on(Box::pin(simulation))
}
