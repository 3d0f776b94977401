//! The workloads: the mixes (plain, emits, timers, small and large tables), the hot
//! execution, the wide fan-out and the relay backlog, each run into a row.

use std::sync::atomic::Ordering;

use serde_json::{json, Value};
use stm_core::{Event, Execution, FanOutJoin, Status};
use stm_runtime::{relay, Clock};
use stm_store::{Commit, ExecutionStore};

use crate::config::{memory_share, EVENTS_PER_EXECUTION, RELAY_RESIDENT_MIB, START, TICKER_PERIOD};
use crate::metered;
use crate::results::{count_label, count_missing_timers, measured_row, worker_seconds_per_event, Env, Row};
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
        seed_idle(&mut sim, mix.idle).await;
    }
    let counter_machine = if mix.churn { "Flipper" } else { "Counter" };
    for i in 0..counters {
        sim.create(counter_machine, &format!("c{i}"), None).await;
    }
    for i in 0..duos {
        sim.create("Duo", &format!("d{i}"), None).await;
    }
    sim.drain().await;
    // the window's start
    let t0 = START + 2.0;
    // the tickers started evenly over the period before the window, a slice at a time, so
    // that their timers come due evenly through it, as a deployment's many timers do (a
    // doorbell fires each at its `fire_at`; a burst of them at once would only measure
    // how the trigger's instances absorb a burst)
    const SLICES: usize = 15;
    for slice in 0..SLICES {
        sim.set_time(t0 - TICKER_PERIOD + TICKER_PERIOD * slice as f64 / SLICES as f64);
        for i in (slice..tickers).step_by(SLICES) {
            sim.create("Ticker", &format!("t{i}"), None).await;
        }
        sim.drain().await;
    }
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

    sim.set_time(t0);
    sim.begin_measuring();
    let producer_rate = duo_rate + counter_rate;
    let arrivals_total = (producer_rate * env.cfg.window).round() as usize;
    // the same arrivals for the small and the large table
    let mut rng = stm_testkit::Rng::new(0x5CA1E ^ rate as u64);
    let arrivals = evenly_spaced(t0, producer_rate, arrivals_total, move |_| {
        if rng.unit() * producer_rate < duo_rate {
            format!("d{}", rng.index(duos))
        } else {
            format!("c{}", rng.index(counters))
        }
    });
    let window_end = t0 + env.cfg.window;
    // sweeps at every whole second of the window and at its end (just past it for the
    // doorbells' trigger): the last sweep fires what the window made due and no doorbell
    // fired (without it, a timer due in the window's last second would wait for a sweep
    // the run never makes)
    sim.run(arrivals, Some((t0, window_end + 1e-3))).await;
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
        let fired = t.fired + t.doorbell_fired;
        assert!(
            fired as usize >= tickers,
            "{workload}: {fired} of {tickers} timers fired ({} by sweeps, {} by doorbells)",
            t.fired,
            t.doorbell_fired
        );
    }
    let offered = t.events as f64 / env.cfg.window;
    let (mut row, _) = measured_row(&sim, workload, rate, offered, env);
    if mix.timer_share > 0.0 {
        count_missing_timers(
            &mut row,
            tickers as f64 * env.cfg.window / TICKER_PERIOD,
            t,
            env.cfg.window,
        );
    }
    row
}

/// `total` Pings from `t0` at `rate` a second, evenly spaced, the `i`th to `target(i)`.
fn evenly_spaced(
    t0: f64,
    rate: f64,
    total: usize,
    mut target: impl FnMut(usize) -> String,
) -> impl FnMut() -> Option<(f64, String, Event)> {
    let mut i = 0;
    move || {
        if i >= total {
            return None;
        }
        let at = t0 + i as f64 / rate;
        let to = target(i);
        i += 1;
        Some((at, to, Event::new("Ping")))
    }
}

/// `n` idle executions straight into the store (no events, nothing charged): copies of a
/// started `Sleeper` (its 30-day timer armed), every other one suspended (its timer held).
async fn seed_idle(sim: &mut Sim, n: usize) {
    sim.create("Sleeper", "sleeper", None).await;
    sim.drain().await;
    sim.seed_copies("sleeper", n, |i| format!("idle{i}"), |_| None, |i| i % 2 == 1)
        .await;
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
    sim.run(evenly_spaced(t0, rate, total, |_| "hot".to_string()), None)
        .await;
    sim.relay(sim.clock.now()).await;
    sim.assert_clean("hot execution");
    let offered = sim.tally.events as f64 / env.cfg.window;
    let (mut row, report) = measured_row(&sim, "hot execution", rate, offered, env);
    let seconds_per_event = worker_seconds_per_event(&sim);
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

/// Status events at a high completion rate: every event finishes its execution (a
/// `Oneshot`), so each commit writes a status event, which the inline flush puts on the bus.
pub(crate) async fn run_status_events(env: &Env, rate: f64) -> Row {
    let mut sim = Sim::with_status_events(&env.defs);
    sim.store.set_enabled(false);
    let n = (rate * env.cfg.window).round() as usize;
    for i in 0..n {
        sim.create("Oneshot", &format!("o{i}"), None).await;
    }
    sim.drain().await;
    sim.relay(sim.clock.now()).await;
    let t0 = sim.clock.now().ceil() + 1.0;
    sim.set_time(t0);
    sim.begin_measuring();
    sim.run(evenly_spaced(t0, rate, n, |i| format!("o{i}")), None)
        .await;
    let relayed = sim.relay(sim.clock.now()).await;
    sim.assert_clean("status events");
    assert_eq!(
        relayed.forwarded, 0,
        "status events: the inline flush left rows for the relay"
    );
    let done = sim
        .store
        .inner
        .all_executions()
        .iter()
        .filter(|e| e.status == Status::Done)
        .count();
    assert_eq!(done, n, "status events: every Oneshot finished");
    let puts = sim
        .queue
        .action_loads()
        .iter()
        .find(|a| a.action == "PutEvents")
        .map_or(0, |a| a.requests);
    let offered = sim.tally.events as f64 / env.cfg.window;
    let (mut row, _) = measured_row(&sim, "status events (every event completes)", rate, offered, env);
    row.note += &format!(
        "; {:.2} PutEvents a completion (against EventBridge's 10,000 a second: the run's list says when to raise it)",
        puts as f64 / n.max(1) as f64
    );
    row
}

/// One fan-out over `n` recipients, to quiescence, its join kept as `join` says.
pub(crate) async fn run_fanout(env: &Env, n: usize, join: FanOutJoin) -> Row {
    let mut sim = Sim::with_fan_out_join(&env.defs, join);
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
    let name = format!("fan-out {} children ({join} join)", count_label(n));
    let (mut row, _) = measured_row(&sim, &name, 0.0, offered, env);
    row.rate = "1 fan-out".to_string();
    // harel's join goes through the parent's item, one execution's key by definition: a
    // ceiling to report, as the hot execution's. A counted join's reports go to rows of
    // their own, each shard's a key of its own, and the parent is written once for the
    // join: every key of the fan-out is under the gate like any other workload's
    row.gated = join == FanOutJoin::Counted;
    row.binding = None;
    row.offered = None;
    row.served = None;
    row.concurrency = None;
    match exe.status {
        Status::Done => {
            sim.assert_clean("fan-out");
            let children = sim.store.inner.all_executions().len() - 1;
            assert_eq!(children, n, "fan-out: every child created");
            let how = match join {
                FanOutJoin::Counted => format!(
                    "the reports go to the join's rows (one per {} children), the parent is written once \
                     for the join ({} B of join in its item, version {})",
                    stm_store::join::SHARD,
                    serde_json::to_string(&exe.joins).map_or(0, |s| s.len()),
                    exe.version
                ),
                _ => "the join rewrites the parent's item (~130 B a child) once per Finished: \
                      DynamoDB throttles that key and the join takes longer"
                    .to_string(),
            };
            row.note = format!(
                "{} events in {:.2} s simulated, outcome {}; {how}",
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

/// The scheduled relay over a backlog of pending rows seeded straight into the store: one
/// run of `relay_pending` whatever passes it takes, its time drawn from the latency table
/// (its lanes and its scan's segments side by side; the clock advances by a fixed pace per
/// request, divided among the requests side by side, so its load spreads over the seconds
/// it takes).
pub(crate) async fn run_relay_backlog(env: &Env, backlog: Backlog) -> Row {
    let mut sim = Sim::new(&env.defs);
    sim.store.set_enabled(false);
    // the relay's messages are counted, not kept (nothing processes them here)
    sim.queue.discard.store(true, Ordering::SeqCst);
    let (rows, name) = match backlog {
        Backlog::Events(rows) => {
            seed_events(&mut sim, rows).await;
            (rows, format!("relay backlog {} rows", count_label(rows)))
        }
        Backlog::Packed(commits) => {
            seed_packed(&mut sim, commits).await;
            let rows = commits * PACKED_INTENTS;
            (
                rows,
                format!(
                    "relay backlog {} packed fan-outs ({} intents, {:.0} MB)",
                    count_label(commits),
                    count_label(rows),
                    sim.store.rows_bytes() as f64 / 1e6
                ),
            )
        }
    };
    let backlog_bytes = sim.store.rows_bytes();
    relay_run(&mut sim, env, name, rows, backlog_bytes).await
}

/// A fan-out's spawn intents in one commit: what the DynamoDB store packs into one row of
/// up to 350 KB.
const PACKED_INTENTS: usize = 100;
const PACKED_CONTEXT_BYTES: usize = 3_400;

/// `commits` fan-outs' spawn intents, pending, straight into the store: each commit
/// [`PACKED_INTENTS`] children with a context of [`PACKED_CONTEXT_BYTES`] each.
async fn seed_packed(sim: &mut Sim, commits: usize) {
    let context: stm_core::Map = [(
        "payload".to_string(),
        stm_core::Value::from("x".repeat(PACKED_CONTEXT_BYTES)),
    )]
    .into_iter()
    .collect();
    for k in 0..commits {
        let mut exe = Execution::new(format!("parent{k}"), "Broadcast");
        let spawns = (0..PACKED_INTENTS)
            .map(|j| stm_store::SpawnIntent {
                child_id: format!("parent{k}.{j}"),
                root_path: "Notifying".into(),
                context: context.clone(),
            })
            .collect();
        let commit = Commit {
            spawns,
            ..Commit::default()
        };
        sim.store.commit(&mut exe, commit).await.expect("seed spawn rows");
    }
}

/// What a relay backlog is made of.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Backlog {
    /// Outbox rows, 50 to a commit.
    Events(usize),
    /// Fan-outs' spawn intents, [`PACKED_INTENTS`] to a commit.
    Packed(usize),
}

/// `rows` outbox rows, 50 to a commit, straight into the store.
async fn seed_events(sim: &mut Sim, rows: usize) {
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
}

/// The relay's run over what was seeded.
async fn relay_run(sim: &mut Sim, env: &Env, name: String, rows: usize, backlog_bytes: usize) -> Row {
    let t0 = START + 1.0;
    sim.set_time(t0);
    sim.begin_measuring();
    sim.pace(1.0);
    let mark = stm_testkit::heap::Mark::now();
    let summary = Box::pin(relay::relay_pending(sim.store.as_ref(), sim.queue.as_ref()))
        .await
        .expect("relay run");
    let heap = mark.peak_above();
    sim.pace(0.0);
    // the run's time: its calls one after another, each drawn from the latency table
    let seconds = sim.calls_time();
    assert_eq!(summary.forwarded, rows, "{name}: {summary:?}");
    assert_eq!(sim.store.rows_bytes(), 0, "{name}: rows left pending");
    let report = sim.store.meter.report();
    let row_bytes = backlog_bytes as f64 / rows as f64;
    let d = env.deployment;
    // the scheduled relay runs once a minute (`RelaySchedule`), each run up to its Timeout
    let runs = (seconds / d.relay_timeout).ceil().max(1.0);
    let drained_minutes = (runs - 1.0) + (seconds - (runs - 1.0) * d.relay_timeout) / 60.0;
    let per_invocation = if seconds > d.relay_timeout {
        format!(
            "{:.0} rows in its {:.0} s Timeout; drained by {runs:.0} one-minute runs in {drained_minutes:.1} min",
            rows as f64 * d.relay_timeout / seconds,
            d.relay_timeout
        )
    } else {
        format!("within its {:.0} s Timeout", d.relay_timeout)
    };
    let mut row = Row::once(name, "1 run", &report, rows as f64, env.prices);
    row.memory = vec![("relay", memory_share(RELAY_RESIDENT_MIB, heap, d.relay_memory_mb))];
    row.note = format!(
        "per forwarded row ({row_bytes:.0} B); run {seconds:.0} s modelled ({per_invocation}); peak heap {:.2} MB",
        heap as f64 / 1e6,
    );
    row
}
