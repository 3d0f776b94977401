//! What a run measured, as a row of the table: the per-event requests, units and cost,
//! the concurrency and what the deployment serves.

use stm_runtime::Definitions;
use stm_testkit::meter::{KeyLoad, MeterReport};

use crate::config::{
    lock, memory_share, Config, Deployment, Prices, SWEEPER_RESIDENT_MIB, WORKER_RESIDENT_MIB,
};
use crate::latency::quantile;
use crate::quotas::{binding, Binding};
use crate::sim::Sim;

#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) workload: String,
    pub(crate) rate: String,
    pub(crate) offered: Option<f64>,
    pub(crate) served: Option<f64>,
    pub(crate) hottest: Option<KeyLoad>,
    pub(crate) requests_per_event: f64,
    pub(crate) reads_per_event: f64,
    pub(crate) writes_per_event: f64,
    pub(crate) concurrency: Option<f64>,
    pub(crate) cost_per_million: f64,
    /// SQS requests per event, every action (the producer's, the event source's, the
    /// handlers').
    pub(crate) sqs_per_event: f64,
    /// An event's seconds from its send to its delete: median and 99th percentile.
    pub(crate) latency: Option<(f64, f64)>,
    /// What AWS's quotas make of the run.
    pub(crate) binding: Option<Binding>,
    /// Each function's peak memory against its `MemorySize`: (function, share).
    pub(crate) memory: Vec<(&'static str, f64)>,
    pub(crate) note: String,
    /// In the hot-key gate (all but the single hot execution).
    pub(crate) gated: bool,
    /// The run failed (the reason).
    pub(crate) failed: Option<String>,
}

/// The per-event figures of a run.
pub(crate) struct PerEvent {
    pub(crate) requests: f64,
    pub(crate) reads: f64,
    pub(crate) writes: f64,
    pub(crate) cost: f64,
}

pub(crate) fn per_event(report: &MeterReport, events: f64, prices: Prices) -> PerEvent {
    let events = events.max(1.0);
    let (reads, writes) = report.total_units();
    let (reads, writes) = (reads / events, writes / events);
    PerEvent {
        requests: report.total_requests() as f64 / events,
        reads,
        writes,
        cost: reads * prices.read + writes * prices.write,
    }
}

pub(crate) fn rate_label(rate: f64) -> String {
    if rate >= 1_000.0 {
        format!("{}k/s", rate / 1_000.0)
    } else {
        format!("{rate}/s")
    }
}

pub(crate) fn count_label(n: usize) -> String {
    let exp = (n as f64).log10();
    if (exp - exp.round()).abs() < 1e-9 && n >= 1_000 {
        format!("10^{}", exp.round())
    } else {
        n.to_string()
    }
}

impl Row {
    /// A row of what one run measured apart from a rate (a backlog, a fan-out).
    pub(crate) fn once(
        workload: String,
        rate: &str,
        report: &MeterReport,
        events: f64,
        prices: Prices,
    ) -> Row {
        let pe = per_event(report, events, prices);
        Row {
            workload,
            rate: rate.to_string(),
            offered: None,
            served: None,
            hottest: report.hottest().cloned(),
            requests_per_event: pe.requests,
            reads_per_event: pe.reads,
            writes_per_event: pe.writes,
            concurrency: None,
            cost_per_million: pe.cost,
            sqs_per_event: 0.0,
            latency: None,
            binding: None,
            memory: Vec::new(),
            note: String::new(),
            gated: true,
            failed: None,
        }
    }
}

/// The median and 99th percentile of the events' latencies the queue recorded.
pub(crate) fn event_latency(sim: &Sim) -> Option<(f64, f64)> {
    let mut latencies = lock(&sim.queue.latencies).clone();
    if latencies.is_empty() {
        return None;
    }
    Some((quantile(&mut latencies, 0.5), quantile(&mut latencies, 0.99)))
}

/// The worker's modelled seconds per event: its invocations' time over the events handled.
pub(crate) fn worker_seconds_per_event(sim: &Sim) -> f64 {
    sim.tally.worker_seconds / sim.tally.events.max(1) as f64
}

/// What a run measured, as a row: `offered` events/s; the worker's modelled seconds per
/// event give the concurrency, AWS's quotas what the deployment serves.
pub(crate) fn measured_row(
    sim: &Sim,
    workload: &str,
    rate: f64,
    offered: f64,
    env: &Env,
) -> (Row, MeterReport) {
    let report = sim.store.meter.report();
    let t = &sim.tally;
    let seconds_per_event = worker_seconds_per_event(sim);
    let concurrency = offered * seconds_per_event;
    let sqs = sim.queue.action_loads();
    let sqs_requests: u64 = sqs
        .iter()
        .filter(|a| a.action != "PutEvents")
        .map(|a| a.requests)
        .sum();
    let d = env.deployment;
    let quotas = binding(
        &report,
        &sqs,
        offered,
        offered,
        concurrency,
        d.worker_max_concurrency,
        d.worker_batch_size,
    );
    let mut memory = vec![(
        "worker",
        memory_share(WORKER_RESIDENT_MIB, t.worker_heap, d.worker_memory_mb),
    )];
    if t.sweeps > 0 {
        memory.push((
            "sweeper",
            memory_share(SWEEPER_RESIDENT_MIB, t.sweep_heap, d.sweeper_memory_mb),
        ));
    }
    let mut row = Row::once(
        workload.to_string(),
        &rate_label(rate),
        &report,
        t.events as f64,
        env.prices,
    );
    row.offered = Some(offered);
    row.served = Some(quotas.served(offered));
    row.concurrency = Some(concurrency);
    row.sqs_per_event = sqs_requests as f64 / t.events.max(1) as f64;
    row.latency = event_latency(sim);
    row.binding = Some(quotas);
    row.memory = memory;
    row.note = format!("{:.1} ms/event", seconds_per_event * 1e3);
    if t.fired > 0 {
        cap_by_sweeper(&mut row, t.fired, t.sweep_seconds, offered, env.cfg.window);
    }
    (row, report)
}

/// A run's timers against its sweeps: a sweep fires `SWEEP_CONCURRENCY` executions'
/// timers at once, each slot's one after another (its modelled time is its longest
/// slot's, a page at a time), so what it fires per modelled second caps the timer events
/// served; named where the run says what bound it, as the quotas are.
fn cap_by_sweeper(row: &mut Row, fired: u64, sweep_seconds: f64, offered: f64, window: f64) {
    let sweeper_cap = fired as f64 / sweep_seconds.max(1e-9);
    let timer_rate = fired as f64 / window;
    let timers_capped = offered - timer_rate + timer_rate.min(sweeper_cap);
    if let Some(served) = row.served.as_mut() {
        *served = served.min(timers_capped);
    }
    if let Some(binding) = row.binding.as_mut() {
        binding.caps.push((
            format!("the sweeper's {sweeper_cap:.0} timers/s"),
            offered * sweeper_cap / timer_rate.max(1e-9),
        ));
        binding.caps.sort_by(|a, b| a.1.total_cmp(&b.1));
    }
    row.note += &format!(
        "; sweeper: {:.0} timers/s needed, a sweep fires {:.0}/s ({} at once)",
        timer_rate,
        sweeper_cap,
        stm_runtime::sweeper::SWEEP_CONCURRENCY
    );
}

pub(crate) struct Env {
    pub(crate) cfg: Config,
    pub(crate) defs: Definitions,
    pub(crate) prices: Prices,
    pub(crate) deployment: Deployment,
}
