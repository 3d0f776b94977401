//! The table and the gate: the printed table, and the test that runs every workload and
//! asserts that no key passes its share of its limit and that requests per event stay
//! flat.

use stm_core::FanOutJoin;

use crate::bulk::{run_bulk_by_state, run_bulk_suspend, run_timers_due};
use crate::config::{
    definitions, deployment, prices, simulate, Config, EMIT_SHARE, FLAT_TOLERANCE, GATE_MEMORY, GATE_SERVED,
    GATE_SHARE, TIMER_SHARE,
};
use crate::latency::CALLS;
use crate::parking::run_parking;
use crate::quotas;
use crate::results::{rate_label, Env, Row};
use crate::workloads::{run_fanout, run_hot, run_mix, run_relay_backlog, run_status_events, Backlog, Mix};

fn fmt_rate(v: Option<f64>) -> String {
    match v {
        None => "-".to_string(),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
    }
}

fn print_table(rows: &[Row], env: &Env) {
    let headers = [
        "workload",
        "rate",
        "offered ev/s",
        "served ev/s",
        "hottest key (table/key)",
        "RCU/s",
        "WCU/s",
        "% limit",
        "binds first",
        "table % quota",
        "DDB req/ev",
        "RCU+WCU/ev",
        "SQS req/ev",
        "concurrency",
        "latency p50/p99 ms",
        "peak memory",
        "DDB $/M ev",
        "notes",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let (key, rcu, wcu, share) = match &r.hottest {
                Some(k) => {
                    let mut key = format!("{}/{}", k.table, k.key);
                    if key.chars().count() > 30 {
                        key = format!("{}…", key.chars().take(29).collect::<String>());
                    }
                    (
                        key,
                        format!("{:.0}", k.read_units_per_second),
                        format!("{:.0}", k.write_units_per_second),
                        format!(
                            "{:.1}%{}",
                            100.0 * k.share_of_limit(),
                            if r.gated { "" } else { " (not gated)" }
                        ),
                    )
                }
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            let note = match &r.failed {
                Some(reason) => format!("FAILED: {reason}"),
                None => r.note.clone(),
            };
            let (binds, table) = match &r.binding {
                Some(b) => (
                    b.caps
                        .first()
                        .map_or("-".into(), |(what, cap)| format!("{what} ({cap:.0} ev/s)")),
                    format!("{:.1}% ({})", 100.0 * b.table_share, b.table),
                ),
                None => ("-".into(), "-".into()),
            };
            let memory = r
                .memory
                .iter()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map_or("-".into(), |(function, share)| {
                    format!("{:.1}% ({function})", 100.0 * share)
                });
            vec![
                r.workload.clone(),
                r.rate.clone(),
                fmt_rate(r.offered),
                fmt_rate(r.served),
                key,
                rcu,
                wcu,
                share,
                binds,
                table,
                format!("{:.2}", r.requests_per_event),
                format!("{:.2}+{:.2}", r.reads_per_event, r.writes_per_event),
                format!("{:.2}", r.sqs_per_event),
                r.concurrency.map_or("-".into(), |c| format!("{c:.1}")),
                r.latency.map_or("-".into(), |(p50, p99)| {
                    format!("{:.0}/{:.0}", p50 * 1e3, p99 * 1e3)
                }),
                memory,
                format!("{:.2}", r.cost_per_million),
                note,
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..headers.len())
        .map(|c| {
            cells
                .iter()
                .map(|row| row[c].chars().count())
                .chain([headers[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |values: Vec<String>| {
        let padded: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(c, v)| {
                let pad = widths[c].saturating_sub(v.chars().count());
                if matches!(c, 0 | 4 | 8 | 9 | 15) || c == headers.len() - 1 {
                    format!("{v}{}", " ".repeat(pad))
                } else {
                    format!("{}{v}", " ".repeat(pad))
                }
            })
            .collect();
        println!("| {} |", padded.join(" | ").trim_end());
    };
    println!();
    println!(
        "stm scale simulation ({}): simulated time, the real worker/relay/sweeper over a metered in-memory store and queue",
        if env.cfg.full { "full" } else { "quick" }
    );
    println!(
        "latency model: each call drawn from its kind's distribution (the table below); a batch's cycle in its group \
         is the event source's receive, its invoke, the handler's calls one after another and the delete; \
         concurrency = offered x the worker's modelled s/event (invoke + handler); served = offered capped by every \
         quota (SQS FIFO high throughput {:.0} requests/s per action; the worker's event source capped at {:.0} \
         instances, or at its active message groups with WorkerScaling=groups; DynamoDB's table-level and Lambda's \
         account quotas raised as the run needs, listed below); latency: an event's send to \
         its delete; peak memory: the function's resident memory at init plus the most heap one call held (counted), \
         against its MemorySize",
        quotas::SQS_ACTION_TPS,
        quotas::EVENT_SOURCE_MAX,
    );
    println!(
        "limits per partition key: {:.0} WCU/s, {:.0} RCU/s (hottest second); DynamoDB on-demand ${}/M WRU, ${}/M RRU \
         (bench/cost_model.py); {:.0} s of arrivals per run; sweeper every 1 s, relay once per run; near timers' \
         doorbells answered by at most {:.0} sweeper invocations at once (DoorbellMaxConcurrency), {:.0} to a batch; \
         per event: every DynamoDB request and unit (worker, sweeper and its doorbells, relay); notes: the worker's \
         modelled ms per event",
        stm_testkit::meter::PARTITION_WRITE_UNITS,
        stm_testkit::meter::PARTITION_READ_UNITS,
        env.prices.write,
        env.prices.read,
        env.cfg.window,
        env.deployment.doorbell_max_concurrency,
        env.deployment.doorbell_batch_size
    );
    line(headers.iter().map(|h| h.to_string()).collect());
    line(widths.iter().map(|w| "-".repeat(*w)).collect());
    for row in cells {
        line(row);
    }
    println!();
    println!("| call | p50 ms | p99 ms | source |");
    println!("|---|---:|---:|---|");
    for call in CALLS {
        println!(
            "| {} | {:.0} | {:.0} | {} |",
            call.kind,
            call.p50 * 1e3,
            call.p99 * 1e3,
            call.source
        );
    }
    println!();
}

/// The quotas a user must raise for the run's largest rate, and how a new deployment
/// reaches it: one line each.
fn print_raises(rows: &[Row], rate: &str) {
    let mut raise: std::collections::BTreeMap<String, f64> = Default::default();
    let mut settings: std::collections::BTreeSet<String> = Default::default();
    let (mut ramp, mut warm): (f64, f64) = (0.0, 0.0);
    for row in rows.iter().filter(|r| r.rate == rate) {
        if let Some(b) = &row.binding {
            for (quota, to) in &b.raise {
                let held = raise.entry(quota.clone()).or_default();
                *held = held.max(*to);
            }
            settings.extend(b.settings.iter().cloned());
            ramp = ramp.max(b.ramp_minutes);
            warm = warm.max(b.warm_minutes);
        }
    }
    println!("quotas to raise for {rate}:");
    if raise.is_empty() && settings.is_empty() {
        println!("  none: every figure is within AWS's defaults");
    }
    for (quota, to) in &raise {
        println!("  {quota}: at least {to:.0}");
    }
    for setting in &settings {
        println!("  set {setting}");
    }
    println!(
        "  ramp: the event source reaches the concurrency needed in {ramp:.1} min (5 instances, then 300 a minute); \
         a new on-demand table reaches the peak in {warm:.0} min of doubling (4,000 writes/s, 12,000 reads/s at first; \
         WarmThroughput on the table skips it)"
    );
}

/// A line on stderr per finished run (the full run takes minutes).
fn progress(row: Row, started: std::time::Instant) -> Row {
    eprintln!(
        "[scale] {} at {}: {:.1} s",
        row.workload,
        row.rate,
        started.elapsed().as_secs_f64()
    );
    row
}

#[test]
pub(crate) fn scale() {
    simulate(run());
}

/// Every workload, the table and the gate.
async fn run() {
    let cfg = Config::from_env();
    let env = Env {
        defs: definitions(),
        prices: prices(),
        deployment: deployment(),
        cfg: cfg.clone(),
    };
    let wall = std::time::Instant::now();
    let plain = Mix {
        emit_share: 0.0,
        timer_share: 0.0,
        idle: 0,
        sized: false,
        churn: false,
    };
    let emits = Mix {
        emit_share: EMIT_SHARE,
        ..plain
    };
    let timers = Mix {
        timer_share: TIMER_SHARE,
        ..plain
    };
    let churn = Mix { churn: true, ..plain };
    let small = Mix {
        emit_share: EMIT_SHARE,
        timer_share: TIMER_SHARE,
        idle: 0,
        sized: true,
        churn: false,
    };
    let large = Mix {
        idle: cfg.idle,
        ..small
    };
    let mut rows = Vec::new();
    let mut flat: Vec<(String, Row, Row)> = Vec::new();
    for &rate in &cfg.rates {
        for (name, mix) in [
            ("plain", plain),
            ("emits 10%", emits),
            ("timers 10%", timers),
            ("state churn", churn),
        ] {
            let started = std::time::Instant::now();
            rows.push(progress(run_mix(&env, name, mix, rate).await, started));
        }
        let started = std::time::Instant::now();
        rows.push(progress(run_status_events(&env, rate).await, started));
        let started = std::time::Instant::now();
        rows.push(progress(run_hot(&env, rate).await, started));
        let started = std::time::Instant::now();
        let a = progress(run_mix(&env, "mix", small, rate).await, started);
        let started = std::time::Instant::now();
        let b = progress(run_mix(&env, "mix", large, rate).await, started);
        flat.push((rate_label(rate), a.clone(), b.clone()));
        rows.push(a);
        rows.push(b);
    }
    let started = std::time::Instant::now();
    rows.push(progress(
        run_fanout(&env, cfg.fanout, FanOutJoin::Children).await,
        started,
    ));
    let started = std::time::Instant::now();
    rows.push(progress(
        run_fanout(&env, cfg.fanout, FanOutJoin::Counted).await,
        started,
    ));
    let started = std::time::Instant::now();
    rows.push(progress(
        run_fanout(&env, cfg.fanout_wide, FanOutJoin::Counted).await,
        started,
    ));
    let started = std::time::Instant::now();
    rows.push(progress(
        run_relay_backlog(&env, Backlog::Events(cfg.backlog)).await,
        started,
    ));
    let started = std::time::Instant::now();
    rows.push(progress(
        run_relay_backlog(&env, Backlog::Packed(cfg.packed)).await,
        started,
    ));
    let started = std::time::Instant::now();
    rows.push(progress(run_bulk_suspend(&env).await, started));
    let started = std::time::Instant::now();
    rows.push(progress(run_bulk_by_state(&env).await, started));
    let started = std::time::Instant::now();
    rows.push(progress(run_timers_due(&env).await, started));
    let started = std::time::Instant::now();
    rows.push(progress(run_parking(&env, cfg.parked).await, started));
    print_table(&rows, &env);

    // the gate
    let gated = rows.iter().filter(|r| r.gated);
    let hottest = gated
        .filter_map(|r| r.hottest.as_ref().map(|k| (r, k)))
        .max_by(|a, b| a.1.share_of_limit().total_cmp(&b.1.share_of_limit()));
    let share = hottest.map_or(0.0, |(_, k)| k.share_of_limit());
    if let Some((row, key)) = hottest {
        println!(
            "gate: the hottest key of the gated rows is {}/{} in `{}` at {}: {:.1}% of its limit (gate: {:.0}%)",
            key.table,
            key.key,
            row.workload,
            row.rate,
            100.0 * share,
            100.0 * GATE_SHARE
        );
    }
    for row in rows.iter().filter(|r| r.failed.is_some()) {
        println!(
            "failed: `{}`: {}",
            row.workload,
            row.failed.as_deref().unwrap_or_default()
        );
    }
    let mut all_flat = true;
    for (rate, a, b) in &flat {
        let delta = (b.requests_per_event - a.requests_per_event).abs() / a.requests_per_event.max(1e-9);
        let units_a = a.reads_per_event + a.writes_per_event;
        let units_b = b.reads_per_event + b.writes_per_event;
        let units_delta = (units_b - units_a).abs() / units_a.max(1e-9);
        let ok = delta <= FLAT_TOLERANCE;
        all_flat &= ok;
        println!(
            "flat at {rate}: requests/event {:.3} (small) vs {:.3} ({}): {:+.2}%; units/event {:.3} vs {:.3}: {:+.2}%{}",
            a.requests_per_event,
            b.requests_per_event,
            b.workload,
            100.0 * delta,
            units_a,
            units_b,
            100.0 * units_delta,
            if ok { "" } else { "  <- NOT FLAT" }
        );
    }
    // served at the run's largest rate, by every gated workload with a rate
    let largest = rate_label(cfg.rates.iter().copied().fold(0.0, f64::max));
    print_raises(&rows, &largest);
    let served = rows
        .iter()
        .filter(|r| r.gated && r.rate == largest)
        .filter_map(|r| Some((r, r.served? / r.offered?)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let served_share = served.map_or(1.0, |(_, s)| s);
    if let Some((row, s)) = served {
        println!(
            "gate: the least served at {largest} is `{}`: {:.1}% of offered (gate: {:.0}%), bound by {}",
            row.workload,
            100.0 * s,
            100.0 * GATE_SERVED,
            row.binding
                .as_ref()
                .and_then(|b| b.caps.first())
                .map_or("nothing", |(what, _)| what.as_str())
        );
    }
    let memory = rows
        .iter()
        .flat_map(|r| r.memory.iter().map(move |(f, m)| (r, *f, *m)))
        .max_by(|a, b| a.2.total_cmp(&b.2));
    let memory_share = memory.map_or(0.0, |(_, _, m)| m);
    if let Some((row, function, m)) = memory {
        println!(
            "gate: the most memory is the {function}'s in `{}`: {:.1}% of its MemorySize (gate: {:.0}%)",
            row.workload,
            100.0 * m,
            100.0 * GATE_MEMORY
        );
    }
    println!("simulated in {:.1} s of wall time", wall.elapsed().as_secs_f64());
    println!(
        "scale: hottest key {:.0}% of its limit; per-event requests flat: {}; served {:.0}% of offered; peak memory {:.0}% of the function's",
        100.0 * share,
        if all_flat { "yes" } else { "no" },
        (100.0 * served_share).floor(),
        (100.0 * memory_share).ceil()
    );
    assert!(
        share <= GATE_SHARE,
        "a partition key is at {:.1}% of its limit (gate {:.0}%)",
        100.0 * share,
        100.0 * GATE_SHARE
    );
    assert!(all_flat, "the requests per event grow with the table");
    assert!(
        served_share >= GATE_SERVED,
        "{:.1}% of the offered events are served at {largest} (gate {:.0}%)",
        100.0 * served_share,
        100.0 * GATE_SERVED
    );
    assert!(
        memory_share <= GATE_MEMORY,
        "a function peaks at {:.1}% of its MemorySize (gate {:.0}%)",
        100.0 * memory_share,
        100.0 * GATE_MEMORY
    );
}
