//! The workloads: the mixes (plain, emits, timers, small and large tables), the hot
//! execution, the wide fan-out and the relay backlog, each run into a row.

use std::sync::atomic::Ordering;

use serde_json::{json, Value};
use stm_core::{Event, Execution, Status};
use stm_runtime::{relay, Clock};
use stm_store::{Commit, ExecutionStore, TimerOp};

use crate::config::{lock, DDB_SECONDS, EVENTS_PER_EXECUTION, SQS_SECONDS, START, TICKER_PERIOD};
use crate::metered;
use crate::results::{count_label, measured_row, per_event, Env, Row};
use crate::sim::Sim;

/// A mix: the producer's Pings to Counters and Duo parents, Tickers' timeouts, and
/// `idle` executions beside them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mix {
    pub(crate) emit_share: f64,
    pub(crate) timer_share: f64,
    pub(crate) idle: usize,
    /// Name the row by its table's size (the flatness pair).
    pub(crate) sized: bool,
    /// The plain Pings go to Flippers, each moved to its other state by every Ping, so
    /// every event rewrites the state index's entries of the same two states (its
    /// hottest case), instead of to Counters, which stay in their one state.
    pub(crate) churn: bool,
}

pub(crate) async fn run_mix(env: &Env, workload: &str, mix: Mix, rate: f64) -> Row {
    let mut workload = workload.to_string();
    let mut sim = Sim::new(&env.defs);
    sim.store.set_enabled(false);
    // of `rate` events/s: emit_share are broadcasts by a Duo parent and as many are the
    // emitted events its region takes; timer_share are Timeouts; the rest plain Pings
    let duo_rate = mix.emit_share * rate;
    let counter_rate = rate * (1.0 - 2.0 * mix.emit_share - mix.timer_share);
    let counters = ((counter_rate / EVENTS_PER_EXECUTION).ceil() as usize).max(1_000);
    let duos = if duo_rate > 0.0 {
        ((duo_rate / EVENTS_PER_EXECUTION).ceil() as usize).max(100)
    } else {
        0
    };
    let tickers = (mix.timer_share * rate * TICKER_PERIOD).round() as usize;
    if mix.idle > 0 {
        // first: MemoryStore keeps its timers in arming order and removes one by shifting
        // those after it, so the active timers, armed after the idle ones, stay cheap
        seed_idle(&mut sim, mix.idle).await;
    }
    let counter_machine = if mix.churn { "Flipper" } else { "Counter" };
    for i in 0..counters {
        sim.create(counter_machine, &format!("c{i}"), None).await;
    }
    for i in 0..duos {
        sim.create("Duo", &format!("d{i}"), None).await;
    }
    // half the tickers a second later: the sweeps alternate between the halves
    for i in 0..tickers.div_ceil(2) {
        sim.create("Ticker", &format!("t{}", 2 * i), None).await;
    }
    sim.drain().await;
    sim.set_time(START + 1.0);
    for i in 0..tickers / 2 {
        sim.create("Ticker", &format!("t{}", 2 * i + 1), None).await;
    }
    sim.drain().await;
    sim.assert_clean(&format!("{workload} setup"));
    if mix.sized {
        // the Duos' regions are executions too
        let active = counters + 2 * duos + tickers;
        workload = if mix.idle > 0 {
            format!("{workload}, {active} + {} idle", count_label(mix.idle))
        } else {
            format!("{workload}, {active} executions")
        };
    }
    let workload = workload.as_str();

    let t0 = START + 2.0;
    sim.set_time(t0);
    sim.begin_measuring();
    let producer_rate = duo_rate + counter_rate;
    let arrivals_total = (producer_rate * env.cfg.window).round() as usize;
    // the same arrivals for the small and the large table
    let mut rng = stm_testkit::Rng::new(0x5CA1E ^ rate as u64);
    let mut i = 0;
    let arrivals = move || {
        if i >= arrivals_total {
            return None;
        }
        let at = t0 + i as f64 / producer_rate;
        i += 1;
        let target = if rng.unit() * producer_rate < duo_rate {
            format!("d{}", rng.index(duos))
        } else {
            format!("c{}", rng.index(counters))
        };
        Some((at, target, Event::new("Ping")))
    };
    let window_end = t0 + env.cfg.window;
    sim.run(arrivals, Some((t0, window_end))).await;
    let relayed = sim.relay(window_end.max(sim.clock.now())).await;
    sim.assert_clean(workload);
    assert_eq!(
        relayed.forwarded, 0,
        "{workload}: the inline flush left rows for the relay"
    );
    let t = &sim.tally;
    if mix.emit_share > 0.0 {
        assert!(t.broadcasts > 0, "{workload}: no emitting commit");
    }
    if mix.timer_share > 0.0 {
        assert!(
            t.fired as usize >= tickers,
            "{workload}: {} of {tickers} timers fired",
            t.fired
        );
    }
    let offered = t.events as f64 / env.cfg.window;
    let fired = t.fired;
    let sweep_seconds = sim.tally.sweep_ddb as f64 * DDB_SECONDS + sim.tally.sweep_sqs as f64 * SQS_SECONDS;
    let (mut row, _) = measured_row(&sim, workload, rate, offered, env);
    if fired > 0 {
        // a sweep fires `SWEEP_CONCURRENCY` executions' timers at once: what it fires per
        // second caps the timer events served
        let per_timer = sweep_seconds / fired as f64;
        let sweeper_cap = stm_runtime::sweeper::SWEEP_CONCURRENCY as f64 / per_timer.max(1e-9);
        let timer_rate = fired as f64 / env.cfg.window;
        if let Some(served) = row.served.as_mut() {
            *served = served.min(offered - timer_rate + timer_rate.min(sweeper_cap));
        }
        row.note += &format!(
            "; sweeper: {:.0} timers/s needed, a sweep fires {:.0}/s ({} at once)",
            timer_rate,
            sweeper_cap,
            stm_runtime::sweeper::SWEEP_CONCURRENCY
        );
    }
    row
}

/// `n` idle executions straight into the store (no events, nothing charged): copies of a
/// started `Sleeper` (its 30-day timer armed), every other one suspended.
async fn seed_idle(sim: &mut Sim, n: usize) {
    sim.create("Sleeper", "sleeper", None).await;
    sim.drain().await;
    let template = sim
        .store
        .inner
        .load("sleeper")
        .await
        .expect("load")
        .expect("the sleeper");
    let timer = sim
        .store
        .inner
        .due_timers(f64::INFINITY)
        .await
        .expect("timers")
        .into_iter()
        .find(|t| t.execution_id == "sleeper")
        .expect("the sleeper's timer");
    for i in 0..n {
        let mut exe: Execution = template.clone();
        exe.id = format!("idle{i}");
        exe.version = 0;
        if i % 2 == 1 {
            exe.status = Status::Suspended;
        }
        let commit = Commit {
            timers: vec![TimerOp::Schedule {
                path: timer.path.clone(),
                fire_at: timer.fire_at,
            }],
            ..Commit::default()
        };
        sim.store
            .commit(&mut exe, commit)
            .await
            .expect("seed an idle execution");
    }
}

/// Every event to one execution: its group is serial, so its ceiling is what one group
/// serves under the latency model (and its key's limit).
pub(crate) async fn run_hot(env: &Env, rate: f64) -> Row {
    let mut sim = Sim::new(&env.defs);
    sim.store.set_enabled(false);
    sim.create("Counter", "hot", None).await;
    sim.drain().await;
    let t0 = START + 1.0;
    sim.set_time(t0);
    sim.begin_measuring();
    sim.watched = Some("hot".to_string());
    let total = (rate * env.cfg.window).round() as usize;
    let mut i = 0;
    let arrivals = move || {
        if i >= total {
            return None;
        }
        let at = t0 + i as f64 / rate;
        i += 1;
        Some((at, "hot".to_string(), Event::new("Ping")))
    };
    sim.run(arrivals, None).await;
    sim.relay(sim.clock.now()).await;
    sim.assert_clean("hot execution");
    let offered = sim.tally.events as f64 / env.cfg.window;
    let (mut row, report) = measured_row(&sim, "hot execution", rate, offered, env);
    let t = &sim.tally;
    let latency_ceiling = t.watched_events as f64 / t.watched_busy.max(1e-9);
    // the key's own limit: its units per event against 1,000 WCU/s and 3,000 RCU/s
    let (reads, writes) = report
        .units_per_table
        .iter()
        .find(|(table, _, _)| table == metered::EXECUTIONS)
        .map_or((0.0, 0.0), |(_, r, w)| (*r, *w));
    let events = t.events.max(1) as f64;
    let key_ceiling = (stm_testkit::meter::PARTITION_WRITE_UNITS / (writes / events).max(1e-9))
        .min(stm_testkit::meter::PARTITION_READ_UNITS / (reads / events).max(1e-9));
    let ceiling = latency_ceiling.min(key_ceiling);
    let batches = t.watched_batches.max(1) as f64;
    let served = offered.min(ceiling);
    row.served = Some(served);
    // one group is one invocation at a time: what it serves, at its time per event
    let seconds_per_event = (t.worker_ddb as f64 * DDB_SECONDS + t.worker_sqs as f64 * SQS_SECONDS) / events;
    row.concurrency = Some(served * seconds_per_event);
    row.gated = false;
    row.note = format!(
        "one execution's ceiling {:.0} ev/s ({:.0} by its serial group: {:.1} ms per batch of {:.1} events; {:.0} by its key's limit)",
        ceiling,
        latency_ceiling,
        1e3 * t.watched_busy / batches,
        t.watched_events as f64 / batches,
        key_ceiling
    );
    row
}

/// One fan-out over `n` recipients, to quiescence.
pub(crate) async fn run_fanout(env: &Env) -> Row {
    let n = env.cfg.fanout;
    let mut sim = Sim::new(&env.defs);
    sim.begin_measuring();
    let recipients: Vec<Value> = (0..n).map(|i| json!(format!("r{i}"))).collect();
    sim.create("Broadcast", "fan", Some(json!({ "recipients": recipients })))
        .await;
    sim.drain().await;
    sim.relay(sim.clock.now()).await;
    let exe = sim
        .store
        .inner
        .load("fan")
        .await
        .expect("load")
        .expect("the fan-out");
    let elapsed = (sim.clock.now() - START).max(1e-3);
    let offered = sim.tally.events as f64 / elapsed;
    let (mut row, _) = measured_row(&sim, &format!("fan-out {n} children"), 0.0, offered, env);
    row.rate = "1 fan-out".to_string();
    row.offered = None;
    row.served = None;
    row.concurrency = None;
    match exe.status {
        Status::Done => {
            sim.assert_clean("fan-out");
            let children = sim.store.inner.all_executions().len() - 1;
            assert_eq!(children, n, "fan-out: every child created");
            // one execution's key by definition (the parent's item, rewritten by each
            // child's Finished): a ceiling to report, as the hot execution's, not a key
            // the deployment shares
            row.gated = false;
            row.note = format!(
                "{} events in {:.2} s simulated, outcome {}; the join rewrites the parent's item \
                 (~130 B a child) once per Finished: DynamoDB throttles that key and the join takes longer",
                sim.tally.events,
                elapsed,
                exe.outcome.as_deref().unwrap_or("-")
            );
        }
        status => {
            row.failed = Some(format!(
                "execution {status}: {}",
                exe.error.as_deref().unwrap_or("no error recorded")
            ));
            row.note = format!("{status}");
        }
    }
    row
}

/// The scheduled relay over `rows` pending outbox rows seeded straight into the store:
/// one run of `relay_pending`, serial (the clock advances by the latency model's time per
/// request), whatever passes it takes.
pub(crate) async fn run_relay_backlog(env: &Env) -> Row {
    let rows = env.cfg.backlog;
    let mut sim = Sim::new(&env.defs);
    sim.store.set_enabled(false);
    // the relay's messages are counted, not kept (nothing processes them here)
    sim.queue.discard.store(true, Ordering::SeqCst);
    const PER_COMMIT: usize = 50;
    let mut seeded = 0;
    let mut k = 0;
    while seeded < rows {
        let batch = PER_COMMIT.min(rows - seeded);
        let mut exe = Execution::new(format!("src{k}"), "Counter");
        let emits = (0..batch)
            .map(|j| (Some(format!("c{}", (seeded + j) % 1_000)), Event::new("Ping")))
            .collect();
        let commit = Commit {
            emits,
            ..Commit::default()
        };
        sim.store
            .commit(&mut exe, commit)
            .await
            .expect("seed outbox rows");
        seeded += batch;
        k += 1;
    }
    let backlog_bytes = sim.store.outbox_bytes();
    let t0 = START + 1.0;
    sim.set_time(t0);
    sim.begin_measuring();
    sim.store.set_serial(DDB_SECONDS);
    *lock(&sim.queue.serial) = SQS_SECONDS;
    let summary = relay::relay_pending(sim.store.as_ref(), sim.queue.as_ref())
        .await
        .expect("relay run");
    let seconds = sim.clock.now() - t0;
    sim.store.set_serial(0.0);
    *lock(&sim.queue.serial) = 0.0;
    assert_eq!(summary.forwarded, rows, "relay backlog: {summary:?}");
    assert_eq!(sim.store.outbox_bytes(), 0, "relay backlog: rows left pending");
    let report = sim.store.meter.report();
    let pe = per_event(&report, rows as f64, env.prices);
    let message_bytes = sim.queue.published_bytes.load(Ordering::SeqCst) as f64 / rows as f64;
    let row_bytes = backlog_bytes as f64 / rows as f64;
    // what the run held at once: the seqs of a pass (16 bytes each), and the most rows one
    // read handed back with their messages
    let (seqs, held) = sim.store.peak();
    let peak = seqs as f64 * std::mem::size_of::<stm_store::PendingSeq>() as f64
        + held as f64 * (1.0 + message_bytes / row_bytes.max(1.0));
    let d = env.deployment;
    let per_invocation = if seconds > d.relay_timeout {
        format!(
            "{:.0} rows in its {:.0} s Timeout",
            rows as f64 * d.relay_timeout / seconds,
            d.relay_timeout
        )
    } else {
        format!("within its {:.0} s Timeout", d.relay_timeout)
    };
    Row {
        workload: format!("relay backlog {} rows", count_label(rows)),
        rate: "1 run".to_string(),
        offered: None,
        served: None,
        hottest: report.hottest().cloned(),
        requests_per_event: pe.requests,
        reads_per_event: pe.reads,
        writes_per_event: pe.writes,
        concurrency: None,
        cost_per_million: pe.cost,
        note: format!(
            "per forwarded row; run {seconds:.0} s modelled ({per_invocation}); peak memory ~{:.2} MB \
             ({} seqs + {:.0} KB of rows and messages; {:.0} MB function)",
            peak / 1e6,
            seqs,
            held as f64 * (1.0 + message_bytes / row_bytes.max(1.0)) / 1e3,
            d.relay_memory_mb
        ),
        gated: true,
        failed: None,
    }
}
