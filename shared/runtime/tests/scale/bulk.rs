//! The operator's bulk runs and the sweeper's worst case: a bulk suspend of timed
//! executions and their resume, a bulk cancel by state over a large table, and a million
//! timers due at once. Each seeds its executions straight into the store, then runs the
//! real control plane and sweeper code in simulated time.

use stm_runtime::{sweeper, Clock};

use crate::config::{memory_share, START, SWEEPER_RESIDENT_MIB};
use crate::results::{count_label, Env, Row};
use crate::sim::{Operation, Sim};

/// The bulk commands' pace: `--rate` raised from its default of 20 a second, as a user
/// runs a bulk command over a large selection.
pub(crate) const BULK_RATE: f64 = 1_000.0;

/// The executions of `machine` in `state` as a bulk command selects them: the state index
/// read (charged as the DynamoDB store reads it), each re-read, then `command` on each at
/// [`BULK_RATE`] a second from `t0`, a sweep at every whole second; returns when the last
/// command was applied.
async fn bulk(sim: &mut Sim, machine: &str, state: &str, command: Operation, t0: f64) -> (usize, f64) {
    use stm_store::ExecutionStore as _;
    sim.set_time(t0);
    let listed = sim
        .store
        .in_states(machine, &[state.to_string()], None)
        .await
        .expect("the state index");
    let mut next_sweep = t0.floor() + 1.0;
    for (i, entry) in listed.iter().enumerate() {
        let at = t0 + i as f64 / BULK_RATE;
        if at >= next_sweep {
            sim.run(|| None, Some((next_sweep, next_sweep + 0.5))).await;
            next_sweep += 1.0;
        }
        sim.set_time(at);
        // the bulk command re-reads each: the index may trail the table
        sim.store.load(&entry.id).await.expect("re-read");
        sim.operate(command, &entry.id).await;
    }
    (listed.len(), sim.clock.now())
}

/// Sweeps at every whole second of `[from, until)`, and what they and the worker do.
async fn sweeps(sim: &mut Sim, from: f64, until: f64) {
    sim.run(|| None, Some((from.floor() + 1.0, until))).await;
}

/// A simulation charging nothing yet, with one started execution of `machine`, `id`: the
/// template a workload copies into the store.
async fn with_template(env: &Env, machine: &str, id: &str) -> Sim {
    let mut sim = Sim::new(&env.defs);
    sim.store.set_enabled(false);
    sim.create(machine, id, None).await;
    sim.drain().await;
    sim
}

/// A bulk suspend of `n` executions whose timers come due while they are suspended, then
/// their resume: the suspended timers leave the due index (nothing read or fired while
/// held), and on resume every overdue one fires and its execution finishes.
pub(crate) async fn run_bulk_suspend(env: &Env) -> Row {
    let n = env.cfg.bulk_timed;
    let mut sim = with_template(env, "Sleeper", "sleeper").await;
    // due once every suspend is done, and 30 s into the suspension
    let suspended_until = START + 1.0 + n as f64 / BULK_RATE;
    let due = suspended_until + 30.0;
    sim.seed_copies("sleeper", n, |i| format!("timed{i}"), |_| Some(due), |_| false)
        .await;
    sim.begin_measuring();
    let (suspended, t) = bulk(&mut sim, "Sleeper", "Sleeping", Operation::Suspend, START + 1.0).await;
    assert_eq!(suspended, n + 1, "bulk suspend: every Sleeper selected");
    // the suspension: every timer overdue, none fired
    let resume_at = due + 60.0;
    sweeps(&mut sim, t, resume_at).await;
    assert_eq!(sim.tally.fired, 0, "bulk suspend: a held timer fired");
    let held_heap = sim.tally.sweep_heap;
    let (resumed, t) = bulk(&mut sim, "Sleeper", "Sleeping", Operation::Resume, resume_at).await;
    assert_eq!(resumed, n + 1, "bulk resume: every Sleeper selected");
    sweeps(&mut sim, t, t + 5.0).await;
    sim.assert_clean("bulk suspend and resume");
    // the template's own timer is 30 days away: the n copies' fire
    assert_eq!(
        sim.tally.fired as usize, n,
        "bulk resume: every overdue timer fired"
    );
    let done = sim
        .store
        .inner
        .all_executions()
        .iter()
        .filter(|e| e.status == stm_core::Status::Done)
        .count();
    assert_eq!(done, n, "bulk resume: every execution finished");
    let report = sim.store.meter.report();
    let mut row = Row::once(
        format!("bulk suspend + resume, {} timed", count_label(n)),
        &format!("{BULK_RATE:.0}/s"),
        &report,
        (n + 1) as f64,
        env.prices,
    );
    row.memory = vec![(
        "sweeper",
        memory_share(
            SWEEPER_RESIDENT_MIB,
            sim.tally.sweep_heap,
            env.deployment.sweeper_memory_mb,
        ),
    )];
    row.note = format!(
        "per execution (suspend, resume, its timer fired, its Timeout); while suspended a sweep held {:.0} KB at most and fired none",
        held_heap as f64 / 1e3
    );
    row
}

/// A bulk cancel by state over `n` executions: the selection from the state index, a
/// re-read and a cancel each.
pub(crate) async fn run_bulk_by_state(env: &Env) -> Row {
    let n = env.cfg.bulk_by_state;
    let mut sim = with_template(env, "Counter", "counter").await;
    sim.seed_copies("counter", n - 1, |i| format!("busy{i}"), |_| None, |_| false)
        .await;
    sim.begin_measuring();
    let (cancelled, t) = bulk(&mut sim, "Counter", "Idle", Operation::Cancel, START + 1.0).await;
    assert_eq!(cancelled, n, "bulk cancel: every Counter selected");
    sim.assert_clean("bulk cancel by state");
    let report = sim.store.meter.report();
    let mut row = Row::once(
        format!("bulk cancel by state, {}", count_label(n)),
        &format!("{BULK_RATE:.0}/s"),
        &report,
        n as f64,
        env.prices,
    );
    row.note = format!(
        "per execution (the state index read, a re-read, the cancel); {:.0} s at {BULK_RATE:.0}/s",
        t - START - 1.0,
    );
    row
}

/// `n` timers due at once: one sweep, unbounded, measured: what it held (bounded by its
/// page and cursor, not by `n`), and its time from the latency table with its
/// `SWEEP_CONCURRENCY` slots side by side; the scheduled sweeper, a run a minute each
/// stopping before its `Timeout`, takes that many runs. The Timeouts are counted, not run.
pub(crate) async fn run_timers_due(env: &Env) -> Row {
    let n = env.cfg.due_at_once;
    let mut sim = with_template(env, "Sleeper", "sleeper").await;
    let due = START + 10.0;
    // the template keeps its 30-day timer: the n copies' are due
    sim.seed_copies("sleeper", n, |i| format!("due{i}"), |_| Some(due), |_| false)
        .await;
    sim.queue.discard.store(true, std::sync::atomic::Ordering::SeqCst);
    sim.set_time(due + 1.0);
    sim.begin_measuring();
    // the sweep's load spread over its seconds: it fires SWEEP_CONCURRENCY executions'
    // timers at once, so each request advances the clock by that share of its pace (the
    // store and the queue divide it among the slots)
    sim.pace(1.0);
    let mark = stm_testkit::heap::Mark::now();
    let summary = sweeper::sweep(sim.store.as_ref(), sim.queue.as_ref(), sim.clock.now())
        .await
        .expect("sweep");
    let heap = mark.peak_above();
    sim.pace(0.0);
    assert_eq!(summary.fired, n, "timers due at once: {summary:?}");
    // the slots side by side, each slot's requests one after another
    let seconds = sim.calls_time();
    let d = env.deployment;
    let per_run = (d.sweeper_timeout - sweeper::SWEEP_DEADLINE_MARGIN.as_secs_f64()).max(1.0);
    let runs = (seconds / per_run).ceil().max(1.0);
    let report = sim.store.meter.report();
    let mut row = Row::once(
        format!("{} timers due at once", count_label(n)),
        "1 sweep",
        &report,
        n as f64,
        env.prices,
    );
    row.memory = vec![(
        "sweeper",
        memory_share(SWEEPER_RESIDENT_MIB, heap, d.sweeper_memory_mb),
    )];
    row.note = format!(
        "per timer; {:.0} s modelled ({:.0} timers/s, {} at once): {runs:.0} scheduled run(s) of {per_run:.0} s, \
         the last ~{:.0} min after they came due; peak heap {:.2} MB",
        seconds,
        n as f64 / seconds.max(1e-9),
        sweeper::SWEEP_CONCURRENCY,
        (runs - 1.0) + seconds.min(per_run) / 60.0,
        heap as f64 / 1e6
    );
    row
}
