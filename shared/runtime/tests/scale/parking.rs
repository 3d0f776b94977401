//! Parking at its worst: one `SUSPENDED` execution takes a stream of events (as many as
//! would have filled its 400 KB item when they were kept on it), then is resumed and steps
//! them all. Each event is parked in a row of its own and the release writes the item once
//! per burst, so no key comes near its limit.

use stm_core::Event;
use stm_runtime::Clock;

use crate::config::START;
use crate::results::{count_label, Env, Row};
use crate::sim::{Operation, Sim};

/// Events a second sent to the suspended execution: a busy execution's group.
const PARKING_RATE: f64 = 200.0;

/// `n` events to one suspended `Counter` at [`PARKING_RATE`] a second, then its resume:
/// the `@parked` recheck (a doorbell, else the sweep) releases them, in order, in bursts.
pub(crate) async fn run_parking(env: &Env, n: usize) -> Row {
    use stm_store::ExecutionStore as _;
    let mut sim = Sim::new(&env.defs);
    sim.store.set_enabled(false);
    sim.create("Counter", "parker", None).await;
    sim.drain().await;
    sim.operate(Operation::Suspend, "parker").await;
    sim.begin_measuring();
    let mut sent = 0usize;
    let arrivals = || {
        (sent < n).then(|| {
            sent += 1;
            let at = START + 1.0 + sent as f64 / PARKING_RATE;
            (at, "parker".to_string(), Event::new("Ping"))
        })
    };
    sim.run(arrivals, None).await;
    let exe = sim.store.load("parker").await.expect("load").expect("parker");
    let waiting = stm_store::waiting_on(sim.store.as_ref(), &exe, usize::MAX)
        .await
        .expect("parked");
    assert_eq!(waiting.len(), n, "parking: every event waits");
    let resumed_at = sim.clock.now() + 1.0;
    sim.set_time(resumed_at);
    sim.operate(Operation::Resume, "parker").await;
    sim.run(|| None, Some((resumed_at.floor() + 1.0, resumed_at + 5.0)))
        .await;
    // every record handled: each event acknowledged as parked (no step of its own then),
    // none failed, nothing left in the queue
    assert_eq!(
        sim.tally.failed, 0,
        "parking: records failed: {:?}",
        sim.tally.reasons
    );
    assert_eq!(
        sim.tally.noops, n as u64,
        "parking: each event acknowledged as parked once"
    );
    assert_eq!(sim.queue.len(), 0, "parking: messages left in the queue");
    let exe = sim.store.load("parker").await.expect("load").expect("parker");
    assert_eq!(
        exe.context.get("n").and_then(serde_json::Value::as_u64),
        Some(n as u64),
        "parking: every event stepped once after the resume"
    );
    assert_eq!(exe.parked_after, None, "parking: the run is over");
    let report = sim.store.meter.report();
    let mut row = Row::once(
        format!(
            "parking: {} events on a suspended execution, then resume",
            count_label(n)
        ),
        &format!("{PARKING_RATE:.0}/s"),
        &report,
        n as f64,
        env.prices,
    );
    row.note = "per event (its row, claim and number; the release in bursts written in one commit each); \
                kept on its item, as before, they filled its 400 KB"
        .to_string();
    row
}
