//! A commit whose inline flush died, or could not publish, is delivered before the next
//! event: the ordering bug the randomized run found, pinned down.

use std::sync::Arc;

use serde_json::json;
use stm_runtime::MemoryQueue;
use stm_store::{ExecutionStore, MemoryStore};

use crate::common::scenarios::{compare, definitions_with_examples as definitions, Rng, Scenario, Step};
use crate::common::{self, event};
use crate::harness::{Harness, Knobs};
use crate::plan::{Boundary, CrashPlan, CrashPoint};
use crate::totals::{reference, Totals};

/// The regression the randomized run found: a `Fork` whose client sends `Go`, `PaymentOk`
/// and `Packed` back to back, one batch of 10, inline flush on. The worker dies right after
/// a commit of the parent, before that commit's inline flush; the batch comes back. Before
/// the worker delivered the pending entries on a redelivery, the next event's inline flush
/// overtook them:
///
/// * crash after commit 2 (`Go`: the regions' spawn intents stay pending): the broadcast
///   `PaymentOk` and `Packed` reached the regions' groups before their spawn intents, found
///   no execution and were acknowledged as no-ops. The regions were created later by the
///   relay and waited forever: the parent stayed `RUNNING` in `Work` (events lost);
/// * crash after commit 3 (the broadcast of `PaymentOk`): `Packed` reached the `Billing`
///   region before `PaymentOk` (the traced steps show `Start, Packed, PaymentOk`), the
///   order the parent emitted them in reversed.
#[tokio::test]
async fn a_commit_whose_flush_died_is_delivered_before_the_next_event() {
    let defs = definitions();
    let sc = Scenario {
        definition: "Fork",
        seed: None,
        steps: vec![
            Step::Send(event("Go", json!({}))),
            Step::Send(event("PaymentOk", json!({"receipt": "r-1"}))),
            Step::Send(event("Packed", json!({}))),
        ],
        burst_ok: true,
    };
    let knobs = Knobs {
        batch: 10,
        inline_flush: true,
        relay_between_polls: 0,
        burst: true,
        relay: stm_runtime::relay::RelayBounds {
            pass_rows: 3,
            read_rows: 2,
            ..stm_runtime::relay::RelayBounds::DEFAULT
        },
    };
    let mut totals = Totals::default();
    for occurrence in [2, 3] {
        let id = format!("regression-after-commit-{occurrence}");
        let (expected, _, _) = reference(&defs, &sc, &id, knobs, Rng::new(1)).await;
        let point = CrashPoint::at(Boundary::AfterCommit, occurrence);
        let plan = CrashPlan::new(vec![point]);
        let mut crashed = Harness::memory(&defs, plan.clone(), knobs, Rng::new(1));
        let what = format!("Fork, burst, crash {point:?}");
        let got = crashed.run(&sc, &id, &what).await;
        assert_eq!(plan.hits().len(), 1, "{what}: the crash happened");
        compare(
            &expected,
            &got,
            &mut totals.tally,
            ("crash-free", "crashed"),
            &what,
        );
        assert_eq!(got.executions[&id].active_path.as_deref(), Some("Done"));
    }
}

/// The same overtaking without a crash: the inline flush of `Go`'s commit cannot publish
/// (a throttled `SendMessageBatch`), and `PaymentOk` and `Packed` are already queued
/// behind it. The record is reported failed although committed, so its redelivery (a
/// duplicate) publishes the pending spawn intents before the next event goes: the
/// regions exist when the broadcasts come, and the parent joins.
#[tokio::test]
async fn a_commit_whose_flush_could_not_publish_is_delivered_before_the_next_event() {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(5));
    let stack = common::Stack::new(store.clone(), queue.clone());
    stack
        .control
        .create("Fork", None, Some("f"))
        .await
        .expect("create");
    stack.drain().await;
    for ev in [
        common::event("Go", json!({})),
        common::event("PaymentOk", json!({"receipt": "r"})),
        common::event("Packed", json!({})),
    ] {
        stack.control.send("f", &ev).await.expect("send");
    }
    // Go's inline flush: both spawn intents fail to publish
    queue.fail_next_publishes(2);
    stack.drain().await;
    let parent = stack.load("f").await;
    assert_eq!(parent.active_path.as_deref(), Some("Done"), "{parent:?}");
    assert!(queue.dead_letters().is_empty(), "nothing dead-lettered");
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
}
