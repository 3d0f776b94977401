//! The table and the gate: the printed table, and the test that runs every workload and
//! asserts that no key passes its share of its limit and that requests per event stay
//! flat.

use crate::config::{
    definitions, deployment, prices, Config, DDB_SECONDS, EMIT_SHARE, FLAT_TOLERANCE, GATE_SHARE,
    SQS_SECONDS, TIMER_SHARE,
};
use crate::results::{rate_label, Env, Row};
use crate::workloads::{run_fanout, run_hot, run_mix, run_relay_backlog, Mix};

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
        "DDB req/ev",
        "RCU+WCU/ev",
        "concurrency",
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
            vec![
                r.workload.clone(),
                r.rate.clone(),
                fmt_rate(r.offered),
                fmt_rate(r.served),
                key,
                rcu,
                wcu,
                share,
                format!("{:.2}", r.requests_per_event),
                format!("{:.2}+{:.2}", r.reads_per_event, r.writes_per_event),
                r.concurrency.map_or("-".into(), |c| format!("{c:.1}")),
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
                if c == 0 || c == 4 || c == headers.len() - 1 {
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
        "latency model: {:.0} ms per DynamoDB request, {:.0} ms per SQS request the worker makes; concurrency = offered x \
         modelled s/event; served = min(offered, WorkerMaxConcurrency {:.0} x events/s of one instance)",
        DDB_SECONDS * 1e3,
        SQS_SECONDS * 1e3,
        env.deployment.worker_max_concurrency
    );
    println!(
        "limits per partition key: {:.0} WCU/s, {:.0} RCU/s (hottest second); DynamoDB on-demand ${}/M WRU, ${}/M RRU \
         (bench/cost_model.py); {:.0} s of arrivals per run; sweeper every 1 s, relay once per run; per event: \
         every DynamoDB request and unit (worker, sweeper, relay); notes: the worker's modelled ms per event",
        stm_testkit::meter::PARTITION_WRITE_UNITS,
        stm_testkit::meter::PARTITION_READ_UNITS,
        env.prices.write,
        env.prices.read,
        env.cfg.window
    );
    line(headers.iter().map(|h| h.to_string()).collect());
    line(widths.iter().map(|w| "-".repeat(*w)).collect());
    for row in cells {
        line(row);
    }
    println!();
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

#[tokio::test]
pub(crate) async fn scale() {
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
    rows.push(progress(run_fanout(&env).await, started));
    let started = std::time::Instant::now();
    rows.push(progress(run_relay_backlog(&env).await, started));
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
    println!("simulated in {:.1} s of wall time", wall.elapsed().as_secs_f64());
    println!(
        "scale: hottest key {:.0}% of its limit; per-event requests flat: {}",
        100.0 * share,
        if all_flat { "yes" } else { "no" }
    );
    assert!(
        share <= GATE_SHARE,
        "a partition key is at {:.1}% of its limit (gate {:.0}%)",
        100.0 * share,
        100.0 * GATE_SHARE
    );
    assert!(all_flat, "the requests per event grow with the table");
}
