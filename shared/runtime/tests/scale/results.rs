//! What a run measured, as a row of the table: the per-event requests, units and cost,
//! the concurrency and what the deployment serves.

use stm_runtime::Definitions;
use stm_testkit::meter::{KeyLoad, MeterReport};

use crate::config::{Config, Deployment, Prices, DDB_SECONDS, SQS_SECONDS};
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

/// What a run measured, as a row: `offered` events/s; the worker's modelled seconds per
/// event give the concurrency and what the deployment serves.
pub(crate) fn measured_row(
    sim: &Sim,
    workload: &str,
    rate: f64,
    offered: f64,
    env: &Env,
) -> (Row, MeterReport) {
    let report = sim.store.meter.report();
    let t = &sim.tally;
    let pe = per_event(&report, t.events as f64, env.prices);
    let seconds_per_event =
        (t.worker_ddb as f64 * DDB_SECONDS + t.worker_sqs as f64 * SQS_SECONDS) / (t.events.max(1) as f64);
    let capacity = env.deployment.worker_max_concurrency / seconds_per_event.max(1e-9);
    let row = Row {
        workload: workload.to_string(),
        rate: rate_label(rate),
        offered: Some(offered),
        served: Some(offered.min(capacity)),
        hottest: report.hottest().cloned(),
        requests_per_event: pe.requests,
        reads_per_event: pe.reads,
        writes_per_event: pe.writes,
        concurrency: Some(offered * seconds_per_event),
        cost_per_million: pe.cost,
        note: format!("{:.1} ms/event", seconds_per_event * 1e3),
        gated: true,
        failed: None,
    };
    (row, report)
}

pub(crate) struct Env {
    pub(crate) cfg: Config,
    pub(crate) defs: Definitions,
    pub(crate) prices: Prices,
    pub(crate) deployment: Deployment,
}
