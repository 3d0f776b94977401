//! Timers and the due index across the two stores: each reads, fires and deletes the
//! other's timers.

use serde_json::json;
use stm_core::Execution;
use stm_store::{Commit, ExecutionStore, TimerOp};

use crate::support::{our_store, python};

/// Timers and the due index across the two stores: harel's scan reads our timers (with
/// their `due_shard`) and its guarded delete removes them; timers harel writes (or
/// re-arms: its put drops `due_shard`) are not in the index and fire through our full scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_across_harel_and_the_due_index() {
    let prefix = stm_testkit::unique_prefix("timers_idx");
    let store = our_store(&prefix).await;
    for (id, path, at) in [("o-1", "root.o", 40.0), ("o-2", "root.x", 60.0)] {
        let mut e = Execution::new(id, "def");
        store
            .commit(
                &mut e,
                Commit {
                    timers: vec![TimerOp::Schedule {
                        path: path.into(),
                        fire_at: at,
                    }],
                    ..Commit::default()
                },
            )
            .await
            .expect("our commit");
    }
    let seen = python(
        &prefix,
        r#"
exe = Execution(id="h-1", definition_id="def", status=Status.RUNNING, active_path="root.h")
store.commit(exe, [], timers=(TimerOp("schedule", "root.h", 50.0),))
before = [list(t) for t in store.due_timers(1e10)]
store.delete_timer("o-1", "root.o", 40.0)
ours = store.load("o-2")
store.commit(ours, [], timers=(TimerOp("schedule", "root.x", 70.0),))
out({"before": before, "after": [list(t) for t in store.due_timers(1e10)]})
"#,
        "",
    );
    assert_eq!(
        seen["before"],
        json!([
            ["o-1", "root.o", 40.0],
            ["h-1", "root.h", 50.0],
            ["o-2", "root.x", 60.0]
        ]),
        "harel's scan reads our timers as its own"
    );
    assert_eq!(
        seen["after"],
        json!([["h-1", "root.h", 50.0], ["o-2", "root.x", 70.0]]),
        "harel's guarded delete removed ours; its re-arm replaced ours"
    );

    // the index holds none of them now: harel wrote both remaining items
    let (indexed, _) = store.due_timers_indexed(100.0).await.expect("index");
    assert_eq!(indexed, vec![], "harel's items are not in the sparse index");
    // the first sweep of a store is the scheduled full scan: harel's timers fire
    let (swept, stats) = store.due_timers_with_stats(100.0).await.expect("sweep");
    assert!(stats.full_scan, "{stats:?}");
    let got: Vec<(&str, &str, f64)> = swept
        .iter()
        .map(|t| (t.execution_id.as_str(), t.path.as_str(), t.fire_at))
        .collect();
    assert_eq!(got, vec![("h-1", "root.h", 50.0), ("o-2", "root.x", 70.0)]);
    // the next sweep within the interval is the index (harel's wait for the next full scan)
    let (swept, stats) = store.due_timers_with_stats(100.0).await.expect("sweep");
    assert!(!stats.full_scan && swept.is_empty(), "{stats:?} {swept:?}");
    // our sweeper's guarded delete of a harel timer works, and we re-arm into the index
    store.delete_timer("h-1", "root.h", 50.0).await.expect("delete");
    let mut exe = store.load("o-2").await.expect("load").expect("o-2");
    store
        .commit(
            &mut exe,
            Commit {
                timers: vec![TimerOp::Schedule {
                    path: "root.x".into(),
                    fire_at: 80.0,
                }],
                ..Commit::default()
            },
        )
        .await
        .expect("our re-arm");
    let (indexed, _) = store.due_timers_indexed(100.0).await.expect("index");
    assert_eq!(indexed.len(), 1);
    assert_eq!(
        (indexed[0].execution_id.as_str(), indexed[0].fire_at),
        ("o-2", 80.0)
    );
    let seen = python(&prefix, "out([list(t) for t in store.due_timers(1e10)])", "");
    assert_eq!(seen, json!([["o-2", "root.x", 80.0]]));
}
