//! CAS: inserts and updates guarded by the version, racing creates, stale and missing
//! writers, and a lost CAS writing nothing.

use serde_json::json;
use stm_core::Status;

use super::{assert_conflict, event, exe, map};
use crate::{Commit, ExecutionStore, SpawnIntent, TimerOp, Written, DEFAULT_TRACE_MAX};

/// Insert (version 0 → 1), update (1 → 2), a second insert of the same id conflicts, and
/// unknown fields survive the round trip.
pub async fn insert_and_update_cas<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    assert!(store.load("cas-1").await.expect("load").is_none());

    let mut e = exe("cas-1", "def");
    e.status = Status::Running;
    e.context.insert("n".into(), json!(1));
    e.context.insert(
        "nested".into(),
        json!({"list": [1, 2.5, "x", null, true], "é": "ü"}),
    );
    e.created_at = Some(1_700_000_000.125);
    e.extra
        .insert("field_from_a_newer_writer".into(), json!({"kept": [1, 2]}));
    let written = store.commit(&mut e, Commit::default()).await.expect("insert");
    assert_eq!(written, Written::default(), "no rows");
    assert_eq!(e.version, 1, "the insert bumps the version to 1");

    let mut loaded = store.load("cas-1").await.expect("load").expect("stored");
    assert_eq!(loaded, e, "the loaded execution equals the committed one");

    loaded.context.insert("n".into(), json!(2));
    store.save(&mut loaded).await.expect("update");
    assert_eq!(loaded.version, 2);
    let again = store.load("cas-1").await.expect("load").expect("stored");
    assert_eq!(again.version, 2);
    assert_eq!(again.context.get("n"), Some(&json!(2)));
    assert_eq!(
        again.extra.get("field_from_a_newer_writer"),
        Some(&json!({"kept": [1, 2]}))
    );

    let mut dup = exe("cas-1", "def");
    assert_conflict(
        store.commit(&mut dup, Commit::default()).await,
        "cas-1",
        0,
        Some(2),
    );
    assert_eq!(dup.version, 0, "a failed commit leaves the version as it was");
}

/// Two racing creates of one id: exactly one wins, the other sees version 1; only the
/// winner's side effects exist.
pub async fn racing_creates_one_wins<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    for round in 0..5 {
        let id = format!("race-{round}");
        let mut a = exe(&id, "def");
        a.context.insert("by".into(), json!("a"));
        let mut b = exe(&id, "def");
        b.context.insert("by".into(), json!("b"));
        let ca = Commit {
            emits: vec![(Some("t".into()), event("Go", &format!("a-{round}"), json!({})))],
            processed_event_ids: vec![format!("ev-a-{round}")],
            ..Commit::default()
        };
        let cb = Commit {
            emits: vec![(Some("t".into()), event("Go", &format!("b-{round}"), json!({})))],
            processed_event_ids: vec![format!("ev-b-{round}")],
            ..Commit::default()
        };
        let (ra, rb) = tokio::join!(store.commit(&mut a, ca), store.commit(&mut b, cb));
        let (winner, loser_result, loser) = match (&ra, &rb) {
            (Ok(_), Err(_)) => ("a", rb, &b),
            (Err(_), Ok(_)) => ("b", ra, &a),
            _ => panic!("exactly one create must win, got {ra:?} and {rb:?}"),
        };
        assert_conflict(loser_result, &id, 0, Some(1));
        assert_eq!(loser.version, 0);
        let stored = store.load(&id).await.expect("load").expect("stored");
        assert_eq!(stored.context.get("by"), Some(&json!(winner)));
        assert_eq!(stored.version, 1);
        let loser_name = if winner == "a" { "b" } else { "a" };
        assert!(store
            .is_processed(&id, &format!("ev-{winner}-{round}"))
            .await
            .expect("is_processed"));
        assert!(!store
            .is_processed(&id, &format!("ev-{loser_name}-{round}"))
            .await
            .expect("is_processed"));
        let outbox = store.pending_outbox().await.expect("outbox");
        assert!(outbox.iter().any(|o| o.event.id == format!("{winner}-{round}")));
        assert!(
            !outbox
                .iter()
                .any(|o| o.event.id == format!("{loser_name}-{round}")),
            "the loser leaked an emit"
        );
    }
}

/// A writer that loaded an older version conflicts, and the error carries the stored
/// version.
pub async fn stale_update_reports_found_version<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let mut e = exe("stale-1", "def");
    store.save(&mut e).await.expect("insert");
    let mut first = store.load("stale-1").await.expect("load").expect("stored");
    let mut second = store.load("stale-1").await.expect("load").expect("stored");
    first.context.insert("who".into(), json!("first"));
    store.save(&mut first).await.expect("first update");
    store.save(&mut first).await.expect("second update");
    assert_eq!(first.version, 3);
    second.context.insert("who".into(), json!("second"));
    assert_conflict(store.save(&mut second).await, "stale-1", 1, Some(3));
    assert_eq!(second.version, 1);
    let stored = store.load("stale-1").await.expect("load").expect("stored");
    assert_eq!(stored.context.get("who"), Some(&json!("first")));
}

/// Updating an execution that was never stored (or is gone) conflicts with `found: None`.
pub async fn update_of_missing_execution_conflicts<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let mut e = exe("ghost", "def");
    e.version = 3;
    assert_conflict(store.save(&mut e).await, "ghost", 3, None);
    assert_eq!(e.version, 3);
}

/// A lost CAS writes nothing: no outbox entry, spawn, processed mark, timer or trace step.
pub async fn failed_cas_writes_nothing<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let mut e = exe("atomic-1", "def");
    let setup = Commit {
        timers: vec![TimerOp::Schedule {
            path: "root.keep".into(),
            fire_at: 100.0,
        }],
        traces: vec![map(json!({"step": "first"}))],
        ..Commit::default()
    };
    store.commit(&mut e, setup).await.expect("setup");
    let mut stale = store.load("atomic-1").await.expect("load").expect("stored");
    store.save(&mut e).await.expect("advance");

    let doomed = Commit {
        emits: vec![(Some("other".into()), event("Leak", "leak-1", json!({"x": 1})))],
        processed_event_ids: vec!["ev-doomed".into()],
        timers: vec![
            TimerOp::Schedule {
                path: "root.new".into(),
                fire_at: 50.0,
            },
            TimerOp::Cancel {
                path: "root.keep".into(),
            },
        ],
        spawns: vec![SpawnIntent {
            child_id: "atomic-1/child".into(),
            root_path: "root.region".into(),
            context: map(json!({"a": 1})),
        }],
        traces: vec![map(json!({"step": "doomed"}))],
        park: Some(Box::new(crate::ParkedEvent {
            number: 1,
            event: event("Later", "ev-parked", json!({})),
        })),
        ..Commit::default()
    };
    assert_conflict(store.commit(&mut stale, doomed).await, "atomic-1", 1, Some(2));
    assert!(
        store.pending_outbox().await.expect("outbox").is_empty(),
        "no outbox entry"
    );
    assert!(
        store.pending_spawns().await.expect("spawns").is_empty(),
        "no spawn"
    );
    assert!(
        !store
            .is_processed("atomic-1", "ev-doomed")
            .await
            .expect("is_processed"),
        "no processed mark"
    );
    let timers = store.due_timers(1e12).await.expect("timers");
    assert_eq!(timers.len(), 1, "timers untouched: {timers:?}");
    assert_eq!((timers[0].path.as_str(), timers[0].fire_at), ("root.keep", 100.0));
    assert!(
        store
            .parked_events("atomic-1", 0, 10)
            .await
            .expect("parked")
            .is_empty(),
        "no parked row"
    );
    let trace = store.read_trace("atomic-1").await.expect("trace");
    assert_eq!(trace.len(), 1, "no trace step: {trace:?}");
    assert_eq!(trace[0].get("step"), Some(&json!("first")));
}
