//! What a run measured, as a row of the table: the per-event requests, units and cost,
//! the concurrency and what the deployment serves.

use stm_runtime::Definitions;
use stm_testkit::meter::{KeyLoad, MeterReport};

use crate::config::{
    lock, memory_share, Config, Deployment, Prices, SWEEPER_RESIDENT_MIB, WORKER_RESIDENT_MIB,
};
use crate::latency::quantile;
use crate::quotas::{binding, Binding};
use crate::sim::{Sim, Tally};

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
    if t.sweeps > 0 || t.doorbell_invocations > 0 {
        // the scheduled sweep and the doorbell trigger are the same function
        memory.push((
            "sweeper",
            memory_share(
                SWEEPER_RESIDENT_MIB,
                t.sweep_heap.max(t.doorbell_heap),
                d.sweeper_memory_mb,
            ),
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
    cap_by_timers(&mut row, t, d.doorbell_max_concurrency, offered, env.cfg.window);
    (row, report)
}

/// A run's timers against what fires them: the doorbells fire the near ones, the sweeps
/// what no doorbell fired first (far timers, a doorbell late behind a full trigger), and
/// each caps only the timer events it fired, named where the run says what bound it, as
/// the quotas are.
///
/// - The sweeper: a sweep fires `SWEEP_CONCURRENCY` executions' timers at once, each
///   slot's one after another (its modelled time is its longest slot's, a page at a
///   time): what it fires per modelled second.
/// - The doorbells: what an instance of the trigger fires per second it works (receive to
///   delete, as the run's batches came, but not the seconds its records only waited for
///   their `fire_at`: a trigger behind its doorbells receives them due and waits for
///   none, so at its limit its instances only work), times `DoorbellMaxConcurrency`, the
///   instances it may run at once. Doorbells within that limit but past the one of firing
///   on time are late (the note's percentiles), not lost.
pub(crate) fn cap_by_timers(
    row: &mut Row,
    t: &Tally,
    doorbell_max_concurrency: f64,
    offered: f64,
    window: f64,
) {
    if t.fired > 0 {
        let cap = t.fired as f64 / t.sweep_seconds.max(1e-9);
        let rate = t.fired as f64 / window;
        cap_timer_events(
            row,
            format!("the sweeper's {cap:.0} timers/s"),
            cap,
            rate,
            offered,
        );
        row.note += &format!(
            "; sweeper: {:.0} timers/s left to it, a sweep fires {:.0}/s ({} at once)",
            rate,
            cap,
            stm_runtime::sweeper::SWEEP_CONCURRENCY
        );
    }
    if t.doorbell_fired > 0 {
        let working = (t.doorbell_seconds - t.doorbell_wait_seconds).max(1e-9);
        let cap = t.doorbell_fired as f64 / working * doorbell_max_concurrency;
        let rate = t.doorbell_fired as f64 / window;
        cap_timer_events(
            row,
            format!(
                "the doorbells' {cap:.0} timers/s at DoorbellMaxConcurrency {doorbell_max_concurrency:.0}"
            ),
            cap,
            rate,
            offered,
        );
        let mut late = t.doorbell_late.clone();
        row.note += &format!(
            "; doorbells: {:.0} timers/s fired, {} stale, {:.1} a batch, {} of {:.0} instances at most, \
             {:.0}% of their time waiting for fire_at, late p50/p99 {:.0}/{:.0} ms, {:.0}/s at most",
            rate,
            t.doorbell_stale,
            t.doorbell_records as f64 / t.doorbell_invocations.max(1) as f64,
            t.doorbell_peak,
            doorbell_max_concurrency,
            100.0 * t.doorbell_wait_seconds / t.doorbell_seconds.max(1e-9),
            1e3 * quantile(&mut late, 0.5),
            1e3 * quantile(&mut late, 0.99),
            cap
        );
    }
}

/// The Tickers' timers are a closed loop: a timer fired late arms its next one late, so a
/// run whose timers fall behind makes fewer timer events than its rate needs (`needed` in
/// the window), and its measured rate would hide it. Those it needed and did not fire in
/// the window are offered and not served.
pub(crate) fn count_missing_timers(row: &mut Row, needed: f64, t: &Tally, window: f64) {
    let fired = (t.fired + t.doorbell_fired) as f64;
    let missing = (needed - fired).max(0.0) / window;
    if missing <= 0.0 {
        return;
    }
    let (Some(offered), Some(served)) = (row.offered, row.served) else {
        return;
    };
    row.offered = Some(offered + missing);
    if let Some(binding) = row.binding.as_mut() {
        binding.caps.push((
            format!("timers fired late: {fired:.0} in the window of {needed:.0} needed"),
            served,
        ));
        binding.caps.sort_by(|a, b| a.1.total_cmp(&b.1));
    }
    row.note += &format!("; {missing:.0} timer events/s short: their timers fired late");
}

/// The timer events one path fires at `rate` a second, capped at `cap` a second: what is
/// served loses the rest, and the cap joins the run's caps as the events/s it lets through.
fn cap_timer_events(row: &mut Row, what: String, cap: f64, rate: f64, offered: f64) {
    let timers_capped = offered - rate + rate.min(cap);
    if let Some(served) = row.served.as_mut() {
        *served = served.min(timers_capped);
    }
    if let Some(binding) = row.binding.as_mut() {
        binding.caps.push((what, offered * cap / rate.max(1e-9)));
        binding.caps.sort_by(|a, b| a.1.total_cmp(&b.1));
    }
}

pub(crate) struct Env {
    pub(crate) cfg: Config,
    pub(crate) defs: Definitions,
    pub(crate) prices: Prices,
    pub(crate) deployment: Deployment,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A timers workload's row at 100,000 events/s offered, before its timers are counted.
    fn row() -> Row {
        let report = MeterReport {
            hottest_per_table: Vec::new(),
            units_per_table: Vec::new(),
            table_peaks: Vec::new(),
            requests: Default::default(),
            seconds: 1.0,
        };
        let mut row = Row::once(
            "timers 10%".into(),
            "100k/s",
            &report,
            1.0,
            Prices {
                write: 1.0,
                read: 1.0,
            },
        );
        row.offered = Some(100_000.0);
        row.served = Some(100_000.0);
        row.binding = Some(Binding::default());
        row
    }

    fn caps(row: &Row) -> Vec<(String, f64)> {
        row.binding.as_ref().map(|b| b.caps.clone()).unwrap_or_default()
    }

    /// 10,000 timers a second, 2,600 fired by the doorbells and 7,400 by sweeps that fire
    /// 7,400 a second: all served. The sweeper caps only what the sweeps fired (charged
    /// with every timer, its 7,400 a second would serve 97,400 events/s), and the doorbells'
    /// cap is in the run's caps, by name.
    #[test]
    fn the_sweeper_caps_only_what_the_sweeps_fired() {
        let mut row = row();
        let t = Tally {
            fired: 14_800,
            sweep_seconds: 2.0,
            doorbell_fired: 5_200,
            doorbell_invocations: 600,
            doorbell_records: 5_200,
            doorbell_seconds: 45.0,
            doorbell_wait_seconds: 15.0,
            ..Tally::default()
        };
        cap_by_timers(&mut row, &t, 20.0, 100_000.0, 2.0);
        assert!((row.served.unwrap_or(0.0) - 100_000.0).abs() < 1e-6, "{row:?}");
        let caps = caps(&row);
        assert!(
            caps.iter()
                .any(|(what, _)| what.starts_with("the sweeper's 7400 timers/s")),
            "{caps:?}"
        );
        // 5,200 timers in 30 seconds of work (15 more only waiting for fire_at): 173 an
        // instance-second, 3,467 at 20 instances
        assert!(
            caps.iter()
                .any(|(what, _)| what == "the doorbells' 3467 timers/s at DoorbellMaxConcurrency 20"),
            "{caps:?}"
        );
    }

    /// Timers fired late make fewer timer events than the Tickers' rate needs: the
    /// missing ones are offered and not served (16,460 of 20,000 in 2 s: 1,770 a second).
    #[test]
    fn timer_events_a_late_timer_kept_from_happening_are_not_served() {
        let mut late = row();
        late.offered = Some(98_230.0);
        late.served = Some(98_197.0);
        let t = Tally {
            fired: 13_640,
            doorbell_fired: 2_820,
            ..Tally::default()
        };
        count_missing_timers(&mut late, 20_000.0, &t, 2.0);
        assert_eq!(late.offered, Some(100_000.0));
        assert_eq!(late.served, Some(98_197.0));
        let late_caps = caps(&late);
        assert_eq!(
            late_caps.first().map(|(what, _)| what.as_str()),
            Some("timers fired late: 16460 in the window of 20000 needed"),
            "{late_caps:?}"
        );
        // none missing: nothing changes
        let mut on_time = row();
        count_missing_timers(
            &mut on_time,
            20_000.0,
            &Tally {
                doorbell_fired: 20_100,
                ..Tally::default()
            },
            2.0,
        );
        assert_eq!(
            (on_time.offered, on_time.served),
            (Some(100_000.0), Some(100_000.0))
        );
        assert!(caps(&on_time).is_empty());
    }

    /// Doorbells that needed more than their instances fire a second cap the timer events
    /// they carried: 9,000 a second needed, 6,000 a second at 20 instances (their seconds
    /// of work, not of waiting), 97,000 served, bound by the doorbells.
    #[test]
    fn the_doorbells_cap_what_they_carry_at_their_concurrency() {
        let mut row = row();
        let t = Tally {
            doorbell_fired: 18_000,
            doorbell_invocations: 1_800,
            doorbell_records: 18_000,
            doorbell_seconds: 100.0,
            doorbell_wait_seconds: 40.0,
            ..Tally::default()
        };
        cap_by_timers(&mut row, &t, 20.0, 100_000.0, 2.0);
        assert!((row.served.unwrap_or(0.0) - 97_000.0).abs() < 1e-6, "{row:?}");
        let caps = caps(&row);
        assert_eq!(
            caps.first().map(|(what, _)| what.as_str()),
            Some("the doorbells' 6000 timers/s at DoorbellMaxConcurrency 20"),
            "{caps:?}"
        );
    }
}
