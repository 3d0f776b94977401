//! Parking costs the event, not the item: a `SUSPENDED` execution with a large item (a
//! 48 KB context) takes a drawn number of 200-byte events through the worker, then is
//! resumed and steps them all, over the metered store (DynamoDB's units per key, as the
//! DynamoDB store writes them).
//!
//! - While it is suspended, the execution's own key is written once for the whole run
//!   (the first parked event's commit); every other event writes its row, its claim and
//!   its number and checks the run's guard (the counter, a small item), a few units
//!   whatever the item's size or how many wait. Parked on the
//!   item, as before, the n-th event rewrote the item with n events in it.
//! - The release writes the item at its own size (the parked events are not in it), once
//!   per burst of released events (the driver's `release_burst`, 16), so a released event
//!   costs a sixteenth of a step's item write besides its row's delete.
#![cfg(feature = "aws")]

mod common;
// the scale simulation's metered store: this test uses a part of it
#[allow(dead_code)]
#[path = "common/metered.rs"]
mod metered;

use std::sync::Arc;

use common::Stack;
use metered::{MeteredStore, COUNTERS, EXECUTIONS};
use serde_json::json;
use stm_core::{Event, Map};
use stm_runtime::{Definitions, ManualClock, MemoryQueue, Queue};
use stm_store::contract::{env_u64, Rng, SeedOnFailure};
use stm_testkit::meter::write_units;

const MACHINE: &str = r#"
event Fill { blob: string }
event Note { text: string }

machine Ledger {
  context {
    blob: string = ""
    notes: int = 0
  }
  initial Open
  state Open {}
  from Open to Open on Fill set context.blob = event.blob
  from Open to Open on Note set context.notes = context.notes + 1
}
"#;

fn definitions() -> Definitions {
    let mut defs = Definitions::new();
    defs.register(stm_core::dsl::load_definition_str(MACHINE, None, None).expect("valid"));
    defs
}

fn event(kind: &str, id: &str, field: &str, text: String) -> Event {
    let mut data = Map::new();
    data.insert(field.into(), json!(text));
    Event::with_data(kind, data).with_id(id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_event_costs_its_row_not_the_item() {
    let seed = env_u64(stm_env::PARKED_ROWS_SEED, 0x9a4c);
    let _report = SeedOnFailure::new(
        "a_parked_event_costs_its_row_not_the_item",
        stm_env::PARKED_ROWS_SEED,
        seed,
    );
    let parked = Rng::new(seed).between(150, 400) as usize;

    let store = Arc::new(MeteredStore::new(Arc::new(ManualClock::new(0.0))));
    let queue = Arc::new(MemoryQueue::default());
    let stack = Stack::new(store.clone(), queue.clone() as Arc<dyn Queue>).redeploy(definitions());
    let mut exe = stack.start("Ledger", "ledger-1").await;
    let fill = event("Fill", "fill-1", "blob", "x".repeat(48 * 1024));
    stack
        .worker
        .driver
        .run_step(&mut exe, Some(&fill))
        .await
        .expect("filled");
    stack.control.suspend("ledger-1").await.expect("suspended");
    let item_bytes = metered::item_bytes(&stack.load("ledger-1").await);
    assert!(item_bytes > 48 * 1024, "{item_bytes}");

    store.meter.reset();
    for i in 0..parked {
        let note = event("Note", &format!("note-{i}"), "text", "n".repeat(200));
        stack.control.send("ledger-1", &note).await.expect("sent");
    }
    stack.drain().await;
    assert_eq!(stack.parked("ledger-1").await.len(), parked, "every event waits");
    let (_, item_writes) = store.meter.key_units(EXECUTIONS, "ledger-1");
    let (_, all_writes) = store.meter.report().total_units();
    // the first event's commit (transactional) is the item's only write of the run
    assert_eq!(
        item_writes,
        write_units(item_bytes, true),
        "{parked} parked events"
    );
    let per_event = (all_writes - item_writes) / parked as f64;
    // its row (2 units: under 1 KB, transactional), its claim (2), its number (1) and the
    // check of the run's guard (2: the counter, charged as a transactional write), and once
    // for the run the guard's move with the item's commit
    assert!(per_event < 7.1, "{per_event} write units per parked event");
    let (_, counter) = store.meter.key_units(COUNTERS, "parked#n#ledger-1");
    // per event its number (1) and the guard's check (2); the first's guard is moved by
    // its commit instead (2)
    assert_eq!(counter, 3.0 * parked as f64, "the counter's units");

    store.meter.reset();
    stack.control.resume("ledger-1").await.expect("resumed");
    stack.drain().await;
    let done = stack.load("ledger-1").await;
    assert_eq!(done.context.get("notes"), Some(&json!(parked)));
    assert!(stack.parked("ledger-1").await.is_empty());
    assert_eq!(done.parked_after, None);
    // the release writes the item at its own size (the events waiting are not in it),
    // once per burst of released events, not once per event
    let (_, item_writes) = store.meter.key_units(EXECUTIONS, "ledger-1");
    let one_commit = write_units(metered::item_bytes(&done), true);
    let commits = item_writes / one_commit;
    let bursts = parked.div_ceil(stack.worker.driver.release_burst);
    println!(
        "parked {parked} events of 200 bytes on a {item_bytes}-byte item: {per_event:.2} write units \
         per parked event, the item written once; released in {commits:.0} commits of the item \
         ({item_writes} units)"
    );
    assert!(
        commits <= bursts as f64 + 2.0,
        "{item_writes} units on the item for {parked} releases ({one_commit} a commit, {bursts} bursts)"
    );
}
