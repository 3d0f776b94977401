//! The store contract, written once and run against every [`ExecutionStore`]
//! (feature `contract`).
//!
//! Each check is a `pub async fn` taking a factory `make(trace_max) -> store` that returns
//! a **fresh, empty** store. [`store_contract_tests!`](crate::store_contract_tests) turns
//! them into one `#[tokio::test]` each:
//!
//! ```text
//! async fn make(trace_max: usize) -> MemoryStore { MemoryStore::with_trace_max(trace_max) }
//! stm_store::store_contract_tests!(make);
//! stm_store::store_limit_tests!(make); // stores that enforce DynamoDB's size limits
//! stm_store::store_dedupe_tests!(make, None); // how far back duplicates are recognised
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::json;
use stm_core::{Event, Execution, Map, Status, Value};

use crate::{
    Commit, ExecutionStore, ListQuery, SpawnIntent, StoreError, TimerOp, Written, DEFAULT_TRACE_MAX,
};

/// One `#[tokio::test]` per contract check, over the factory `$make`.
#[macro_export]
macro_rules! store_contract_tests {
    ($make:path) => {
        $crate::store_contract_tests!(@each $make;
            insert_and_update_cas,
            racing_creates_one_wins,
            stale_update_reports_found_version,
            update_of_missing_execution_conflicts,
            failed_cas_writes_nothing,
            seq_blocks_monotonic_across_concurrent_committers,
            pending_rows_of_the_last_commit,
            oldest_pending_seqs_bounded_and_in_order,
            a_wide_fan_out_commits_whole,
            outbox_and_spawns_round_trip_and_ack,
            trace_ring_keeps_last_n,
            append_trace_and_read_back,
            cursor_pages_through_250_executions_with_filters,
            due_timers_earliest_first,
            timer_cancel_and_collapse_in_one_commit,
            guarded_delete_survives_reschedule,
            load_for_event_with_and_without_mark,
            burst_commit_records_every_mark,
            purge_contract,
            ids_with_prefix_contract,
            purge_sweeps_partitions_past_one_batch,
            purge_while_paging_skips_nothing,
        );
    };
    (@each $make:path; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                $crate::contract::$check($make).await;
            }
        )*
    };
}

/// The dedupe window check, for a store that surely recognises the last `$window`
/// processed events of an execution as duplicates (`None`: every one, as harel's
/// `processed` table does; `Some(10)`: `DedupeMarks::OnItem`).
#[macro_export]
macro_rules! store_dedupe_tests {
    ($make:path, $window:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn dedupe_remembers_its_window() {
            $crate::contract::dedupe_remembers_its_window($make, $window).await;
        }
    };
}

/// The checks of DynamoDB's size limits, for stores that enforce them.
#[macro_export]
macro_rules! store_limit_tests {
    ($make:path) => {
        $crate::store_contract_tests!(@each $make;
            oversized_context_is_too_large,
            too_many_transaction_items_is_too_large,
            unstorable_timer_is_too_large,
        );
    };
}

fn exe(id: &str, definition_id: &str) -> Execution {
    Execution::new(id, definition_id)
}

fn event(kind: &str, id: &str, data: Value) -> Event {
    let data = match data {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Event::with_data(kind, data).with_id(id)
}

fn map(v: Value) -> Map {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

#[track_caller]
fn assert_conflict<T: std::fmt::Debug>(
    result: Result<T, StoreError>,
    id: &str,
    expected: i64,
    found: Option<i64>,
) {
    match result {
        Err(StoreError::Conflict {
            id: got_id,
            expected: got_expected,
            found: got_found,
        }) => {
            assert_eq!(
                (got_id.as_str(), got_expected, got_found),
                (id, expected, found),
                "conflict carries (id, expected, found)"
            );
        }
        other => panic!("expected a conflict on {id} (expected {expected}, found {found:?}), got {other:?}"),
    }
}

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
    let trace = store.read_trace("atomic-1").await.expect("trace");
    assert_eq!(trace.len(), 1, "no trace step: {trace:?}");
    assert_eq!(trace[0].get("step"), Some(&json!("first")));
}

/// Concurrent committers get disjoint seqs, contiguous within each commit (its spawn rows,
/// then its outbox rows: a relay forwarding the lowest seqs first never forwards an event
/// without its commit's spawn intents); a later commit of the same execution gets higher seqs than all of
/// its earlier ones; the pending lists come back in seq order with the seqs returned.
pub async fn seq_blocks_monotonic_across_concurrent_committers<S: ExecutionStore + 'static>(
    make: impl AsyncFn(usize) -> S,
) {
    let store = Arc::new(make(DEFAULT_TRACE_MAX).await);
    let committers = 8;
    let rounds = 3;
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..committers {
        let store = store.clone();
        tasks.spawn(async move {
            let mut e = exe(&format!("seq-{c}"), "def");
            store.save(&mut e).await.expect("create");
            let mut written = Vec::new();
            for r in 0..rounds {
                let commit = Commit {
                    emits: (0..3)
                        .map(|k| {
                            (
                                Some(format!("t{c}")),
                                event("E", &format!("e-{c}-{r}-{k}"), json!({})),
                            )
                        })
                        .collect(),
                    spawns: (0..2)
                        .map(|k| SpawnIntent {
                            child_id: format!("seq-{c}/{r}-{k}"),
                            root_path: "r".into(),
                            context: Map::new(),
                        })
                        .collect(),
                    ..Commit::default()
                };
                written.push(store.commit(&mut e, commit).await.expect("commit"));
                // a commit without rows between two with: the order still holds after it
                store.save(&mut e).await.expect("a commit without rows");
            }
            (c, written)
        });
    }
    let mut by_event: BTreeMap<String, i64> = BTreeMap::new();
    let mut by_child: BTreeMap<String, i64> = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        let (c, written) = joined.expect("task");
        let mut last = i64::MIN;
        for (r, w) in written.iter().enumerate() {
            assert_eq!((w.outbox.len(), w.spawns.len()), (3, 2), "{w:?}");
            let block: Vec<i64> = w.spawns.iter().chain(&w.outbox).copied().collect();
            assert!(
                block.windows(2).all(|p| p[1] == p[0] + 1),
                "a commit's block is contiguous, spawn rows first: {w:?}"
            );
            assert!(
                block[0] > last,
                "a later commit of seq-{c} gets higher seqs: {written:?}"
            );
            last = *block.last().expect("rows");
            for (k, seq) in w.outbox.iter().enumerate() {
                by_event.insert(format!("e-{c}-{r}-{k}"), *seq);
            }
            for (k, seq) in w.spawns.iter().enumerate() {
                by_child.insert(format!("seq-{c}/{r}-{k}"), *seq);
            }
        }
    }
    let distinct: BTreeSet<i64> = by_event.values().chain(by_child.values()).copied().collect();
    assert_eq!(distinct.len(), committers * rounds * 5, "seqs are unique");

    let outbox = store.pending_outbox().await.expect("outbox");
    assert_eq!(outbox.len(), committers * rounds * 3);
    assert!(
        outbox.windows(2).all(|w| w[0].seq < w[1].seq),
        "pending outbox is in seq order"
    );
    for entry in &outbox {
        assert_eq!(
            by_event.get(&entry.event.id),
            Some(&entry.seq),
            "the returned seq is the stored one"
        );
    }
    let spawns = store.pending_spawns().await.expect("spawns");
    assert_eq!(spawns.len(), committers * rounds * 2);
    assert!(
        spawns.windows(2).all(|w| w[0].seq < w[1].seq),
        "pending spawns are in seq order"
    );
    for s in &spawns {
        assert!(s.child_id.starts_with(&format!("{}/", s.parent_id)));
        assert_eq!(
            by_child.get(&s.child_id),
            Some(&s.seq),
            "the returned seq is the stored one"
        );
    }
}

/// `pending_rows_of` gives the rows of the execution's last commit that wrote any, by key:
/// not another execution's, not an earlier commit's, not the acked ones; a commit without
/// rows keeps pointing at the last block.
pub async fn pending_rows_of_the_last_commit<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let rows_commit = |tag: &str, parent: &str| Commit {
        emits: vec![
            (Some("t".to_string()), event("E", &format!("{tag}-1"), json!({}))),
            (None, event("E", &format!("{tag}-2"), json!({}))),
        ],
        spawns: vec![SpawnIntent {
            child_id: format!("{parent}:{tag}"),
            root_path: "root.r".into(),
            context: map(json!({"tag": tag})),
        }],
        ..Commit::default()
    };
    let mut a = exe("rows-a", "def");
    let mut b = exe("rows-b", "def");
    assert!(store.pending_rows_of("rows-a").await.expect("none").is_empty());
    store.save(&mut a).await.expect("create a");
    store.save(&mut b).await.expect("create b");
    assert!(store
        .pending_rows_of("rows-a")
        .await
        .expect("no rows yet")
        .is_empty());
    store
        .commit(&mut a, rows_commit("first", "rows-a"))
        .await
        .expect("a first");
    let second = store
        .commit(&mut a, rows_commit("second", "rows-a"))
        .await
        .expect("a second");
    store
        .commit(&mut b, rows_commit("other", "rows-b"))
        .await
        .expect("b");
    store.save(&mut a).await.expect("a commit without rows");

    let pending = store.pending_rows_of("rows-a").await.expect("pending");
    let ids: Vec<&str> = pending.outbox.iter().map(|o| o.event.id.as_str()).collect();
    assert_eq!(
        ids,
        ["second-1", "second-2"],
        "the last block's outbox rows, in order"
    );
    assert_eq!(
        pending.outbox.iter().map(|o| o.seq).collect::<Vec<_>>(),
        second.outbox
    );
    assert_eq!(pending.spawns.len(), 1);
    assert_eq!(pending.spawns[0].seq, second.spawns[0]);
    assert_eq!(pending.spawns[0].child_id, "rows-a:second");
    assert_eq!(pending.spawns[0].parent_id, "rows-a");
    assert_eq!(pending.spawns[0].context, map(json!({"tag": "second"})));

    store.ack_outbox(second.outbox[0]).await.expect("ack");
    store.ack_spawn(second.spawns[0]).await.expect("ack");
    let rest = store.pending_rows_of("rows-a").await.expect("rest");
    assert!(rest.spawns.is_empty(), "acked: {rest:?}");
    assert_eq!(rest.outbox.len(), 1);
    assert_eq!(rest.outbox[0].event.id, "second-2");
    store.ack_outbox(second.outbox[1]).await.expect("ack");
    assert!(store
        .pending_rows_of("rows-a")
        .await
        .expect("all acked")
        .is_empty());
    assert_eq!(
        store.pending_rows_of("rows-b").await.expect("b").outbox.len(),
        2,
        "another execution's rows are its own"
    );
}

/// A step that spawns 250 children (DynamoDB: past a transaction's 100 items, so the
/// intents are packed into a few rows) commits whole: every intent comes back in order with
/// the seq the commit gave it, by a scan, by key and through the relay's pass, and acking
/// the seqs removes them all.
pub async fn a_wide_fan_out_commits_whole<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let mut parent = exe("wide-1", "def");
    store.save(&mut parent).await.expect("create");
    let width = 250;
    let spawns: Vec<SpawnIntent> = (0..width)
        .map(|i| SpawnIntent {
            child_id: format!("wide-1:Notify:0:{i}"),
            root_path: "root".into(),
            context: map(json!({"recipient": format!("r{i}"), "é": [i, 0.5]})),
        })
        .collect();
    let written = store
        .commit(
            &mut parent,
            Commit {
                spawns: spawns.clone(),
                processed_event_ids: vec!["start-wide".into()],
                ..Commit::default()
            },
        )
        .await
        .expect("a wide fan-out commits");
    assert_eq!(written.spawns.len(), width, "a seq for each intent");
    assert!(
        written.spawns.windows(2).all(|w| w[0] <= w[1]),
        "{:?}",
        written.spawns
    );
    let check = |got: &[crate::SpawnEntry], how: &str| {
        assert_eq!(got.len(), width, "{how}");
        for (i, (entry, intent)) in got.iter().zip(&spawns).enumerate() {
            assert_eq!(
                (entry.child_id.as_str(), &entry.context, entry.parent_id.as_str()),
                (intent.child_id.as_str(), &intent.context, "wide-1"),
                "{how}: intent {i}"
            );
            assert_eq!(entry.seq, written.spawns[i], "{how}: intent {i}'s seq");
        }
    };
    check(&store.pending_spawns().await.expect("scan"), "pending_spawns");
    check(
        &store.pending_rows_of("wide-1").await.expect("by key").spawns,
        "pending_rows_of",
    );
    let seqs = store
        .oldest_pending_seqs(10_000, f64::INFINITY)
        .await
        .expect("seqs");
    let mut distinct = written.spawns.clone();
    distinct.dedup();
    assert_eq!(seqs.iter().map(|s| s.seq).collect::<Vec<_>>(), distinct);
    check(
        &store.pending_rows(&distinct, &[]).await.expect("rows").spawns,
        "pending_rows",
    );
    store.ack_rows(&distinct, &[]).await.expect("ack");
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
}

/// The relay's bounded pass: `oldest_pending_seqs` gives the lowest seqs of both tables
/// together, at most `limit`; `pending_rows` reads them by key; `ack_rows` removes them; a
/// pass after the acks gives the next ones, so passes of a small limit deliver everything
/// in seq order.
pub async fn oldest_pending_seqs_bounded_and_in_order<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let mut committed: Vec<(i64, bool)> = Vec::new();
    for e in 0..4 {
        let id = format!("backlog-{e}");
        let mut exe = exe(&id, "def");
        store.save(&mut exe).await.expect("create");
        for c in 0..3 {
            let written = store
                .commit(
                    &mut exe,
                    Commit {
                        emits: vec![(Some("t".into()), event("E", &format!("{id}-{c}"), json!({})))],
                        spawns: vec![SpawnIntent {
                            child_id: format!("{id}:{c}"),
                            root_path: "root.r".into(),
                            context: Map::new(),
                        }],
                        ..Commit::default()
                    },
                )
                .await
                .expect("commit");
            committed.extend(written.spawns.iter().map(|s| (*s, true)));
            committed.extend(written.outbox.iter().map(|s| (*s, false)));
        }
    }
    committed.sort();
    let mut delivered: Vec<(i64, bool)> = Vec::new();
    let far_future = 4e12;
    for pass in 0.. {
        assert!(pass < 20, "passes of 5 must drain 24 rows: {delivered:?}");
        let seqs = store.oldest_pending_seqs(5, far_future).await.expect("seqs");
        assert!(seqs.len() <= 5, "bounded: {seqs:?}");
        if seqs.is_empty() {
            break;
        }
        assert!(
            seqs.windows(2).all(|w| w[0].seq < w[1].seq),
            "lowest first: {seqs:?}"
        );
        let spawns: Vec<i64> = seqs.iter().filter(|s| s.spawn).map(|s| s.seq).collect();
        let outbox: Vec<i64> = seqs.iter().filter(|s| !s.spawn).map(|s| s.seq).collect();
        let rows = store.pending_rows(&spawns, &outbox).await.expect("rows");
        assert_eq!(rows.spawns.iter().map(|s| s.seq).collect::<Vec<_>>(), spawns);
        assert_eq!(rows.outbox.iter().map(|o| o.seq).collect::<Vec<_>>(), outbox);
        delivered.extend(seqs.iter().map(|s| (s.seq, s.spawn)));
        store.ack_rows(&spawns, &outbox).await.expect("ack");
        assert!(
            store
                .pending_rows(&spawns, &outbox)
                .await
                .expect("rows")
                .is_empty(),
            "acked"
        );
    }
    assert_eq!(delivered, committed, "every row once, in seq order");
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
}

/// Outbox entries and spawns come back as committed (targets, events, contexts), and an
/// ack removes exactly one.
pub async fn outbox_and_spawns_round_trip_and_ack<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let mut e = exe("relay-1", "def");
    let sent = vec![
        (
            Some("target-a".to_string()),
            event("Ping", "ev-1", json!({"n": 1, "f": 0.5, "s": "é"})),
        ),
        (None, event("Broadcast", "ev-2", json!({}))),
    ];
    let context = map(json!({"order": {"id": 7, "lines": [1, 2]}, "note": "ünïcode", "ratio": 1.5}));
    let commit = Commit {
        emits: sent.clone(),
        spawns: vec![SpawnIntent {
            child_id: "relay-1/r1".into(),
            root_path: "root.par.r1".into(),
            context: context.clone(),
        }],
        ..Commit::default()
    };
    let written = store.commit(&mut e, commit).await.expect("commit");
    let seqs = written.outbox;
    let outbox = store.pending_outbox().await.expect("outbox");
    assert_eq!(outbox.iter().map(|o| o.seq).collect::<Vec<_>>(), seqs);
    for (entry, (target, ev)) in outbox.iter().zip(&sent) {
        assert_eq!(&entry.target_id, target);
        assert_eq!(&entry.event, ev);
    }
    let spawns = store.pending_spawns().await.expect("spawns");
    assert_eq!(spawns.len(), 1);
    assert_eq!(
        (
            spawns[0].parent_id.as_str(),
            spawns[0].child_id.as_str(),
            spawns[0].root_path.as_str()
        ),
        ("relay-1", "relay-1/r1", "root.par.r1")
    );
    assert_eq!(spawns[0].context, context);
    assert_eq!(vec![spawns[0].seq], written.spawns);

    store.ack_outbox(seqs[0]).await.expect("ack");
    let rest = store.pending_outbox().await.expect("outbox");
    assert_eq!(rest.iter().map(|o| o.seq).collect::<Vec<_>>(), vec![seqs[1]]);
    store.ack_outbox(seqs[0]).await.expect("a second ack is a no-op");
    store.ack_spawn(spawns[0].seq).await.expect("ack spawn");
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
}

/// With `trace_max = N`, 3×N traced commits leave exactly the last N steps, in order.
pub async fn trace_ring_keeps_last_n<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let n = 5;
    let store = make(n).await;
    let mut e = exe("ring-1", "def");
    for i in 0..3 * n {
        let step = map(json!({"event": format!("E{i}"), "step": i, "to": "root.a"}));
        store
            .commit(
                &mut e,
                Commit {
                    traces: vec![step],
                    ..Commit::default()
                },
            )
            .await
            .expect("traced commit");
        if i == n {
            // a reload in the middle (a fresh worker) must continue the same ring
            e = store.load("ring-1").await.expect("load").expect("stored");
        }
    }
    let trace = store.read_trace("ring-1").await.expect("trace");
    let indices: Vec<i64> = trace
        .iter()
        .filter_map(|t| t.get("index").and_then(Value::as_i64))
        .collect();
    let want: Vec<i64> = (2 * n as i64..3 * n as i64).collect();
    assert_eq!(indices, want, "the ring keeps exactly the last {n} steps");
    for (t, i) in trace.iter().zip(2 * n..3 * n) {
        assert_eq!(t.get("step"), Some(&json!(i)));
        assert_eq!(t.get("event"), Some(&json!(format!("E{i}"))));
    }
    assert!(store.read_trace("nobody").await.expect("trace").is_empty());
}

/// `append_trace` outside a commit: its own index if given, else the next one; a traced
/// commit afterwards continues after it.
pub async fn append_trace_and_read_back<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let mut e = exe("append-1", "def");
    store
        .commit(
            &mut e,
            Commit {
                traces: vec![map(json!({"k": "commit-0"}))],
                ..Commit::default()
            },
        )
        .await
        .expect("traced commit");
    store
        .append_trace("append-1", map(json!({"k": "appended-1"})))
        .await
        .expect("append");
    store
        .append_trace("append-1", map(json!({"k": "appended-2", "x": [1, 2]})))
        .await
        .expect("append");
    store
        .commit(
            &mut e,
            Commit {
                traces: vec![map(json!({"k": "commit-3"}))],
                ..Commit::default()
            },
        )
        .await
        .expect("traced commit after appends");
    let trace = store.read_trace("append-1").await.expect("trace");
    let got: Vec<(i64, String)> = trace
        .iter()
        .map(|t| {
            (
                t.get("index").and_then(Value::as_i64).unwrap_or(-1),
                t.get("k").and_then(Value::as_str).unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (0, "commit-0".to_string()),
            (1, "appended-1".to_string()),
            (2, "appended-2".to_string()),
            (3, "commit-3".to_string())
        ]
    );
    assert_eq!(trace[2].get("x"), Some(&json!([1, 2])));
}

/// 250 executions; pages of a few items walk the whole filtered set once, with every
/// filter (definition, status, roots only) and without.
pub async fn cursor_pages_through_250_executions_with_filters<S: ExecutionStore>(
    make: impl AsyncFn(usize) -> S,
) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let statuses = [Status::Running, Status::Done, Status::Failed];
    let mut expected_filtered = BTreeSet::new();
    for i in 0..250 {
        let id = format!("list-{i:03}");
        let def = if i % 2 == 0 { "alpha" } else { "beta" };
        let mut e = exe(&id, def);
        e.status = statuses[i % 3];
        if i % 5 == 0 {
            e.parent_id = Some("list-parent".into());
        }
        store.save(&mut e).await.expect("insert");
        if def == "alpha" && matches!(e.status, Status::Running | Status::Done) && e.parent_id.is_none() {
            expected_filtered.insert(id);
        }
    }

    async fn walk<S: ExecutionStore>(store: &S, mut query: ListQuery) -> Vec<crate::ExecutionSummary> {
        let mut all = Vec::new();
        for _ in 0..500 {
            let page = store.list_executions(&query).await.expect("list");
            assert!(
                page.items.len() <= query.limit.max(1),
                "a page holds at most `limit` items"
            );
            all.extend(page.items);
            match page.next_cursor {
                Some(c) => query.cursor = Some(c),
                None => return all,
            }
        }
        panic!("the cursor never ended");
    }

    let all = walk(
        &store,
        ListQuery {
            limit: 40,
            ..ListQuery::default()
        },
    )
    .await;
    let ids: BTreeSet<String> = all.iter().map(|s| s.id.clone()).collect();
    assert_eq!(all.len(), 250, "no duplicates");
    assert_eq!(ids.len(), 250, "every execution once");
    assert!(all.iter().all(|s| s.version == 1));

    let filtered = walk(
        &store,
        ListQuery {
            status: Some(vec![Status::Running, Status::Done]),
            definition_id: Some("alpha".into()),
            roots_only: true,
            limit: 7,
            cursor: None,
        },
    )
    .await;
    let got: BTreeSet<String> = filtered.iter().map(|s| s.id.clone()).collect();
    assert_eq!(filtered.len(), got.len(), "no duplicates");
    assert_eq!(
        got, expected_filtered,
        "the filtered walk finds exactly the matches"
    );
    for s in &filtered {
        assert_eq!(s.definition_id, "alpha");
        assert!(s.parent_id.is_none());
        assert!(matches!(s.status, Status::Running | Status::Done));
    }

    let done = walk(
        &store,
        ListQuery {
            status: Some(vec![Status::Done]),
            limit: 100,
            ..ListQuery::default()
        },
    )
    .await;
    assert_eq!(done.len(), (0..250).filter(|i| i % 3 == 1).count());
}

/// `due_timers(now)` returns the timers at or before `now`, earliest first.
pub async fn due_timers_earliest_first<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let plan = [
        ("tm-a", "root.x", 50.5),
        ("tm-a", "root.y", 10.25),
        ("tm-b", "root.x", 30.0),
        ("tm-b", "root.z", 60.0),
        ("tm-c", "root.x", 99.0),
        ("tm-c", "root.late", 1_700_000_000.123_456),
    ];
    for id in ["tm-a", "tm-b", "tm-c"] {
        let mut e = exe(id, "def");
        let timers = plan
            .iter()
            .filter(|(i, _, _)| *i == id)
            .map(|(_, path, at)| TimerOp::Schedule {
                path: (*path).into(),
                fire_at: *at,
            })
            .collect();
        store
            .commit(
                &mut e,
                Commit {
                    timers,
                    ..Commit::default()
                },
            )
            .await
            .expect("commit");
    }
    let due = store.due_timers(60.0).await.expect("due");
    let got: Vec<(&str, &str, f64)> = due
        .iter()
        .map(|t| (t.execution_id.as_str(), t.path.as_str(), t.fire_at))
        .collect();
    assert_eq!(
        got,
        vec![
            ("tm-a", "root.y", 10.25),
            ("tm-b", "root.x", 30.0),
            ("tm-a", "root.x", 50.5),
            ("tm-b", "root.z", 60.0)
        ]
    );
    let all = store.due_timers(2e9).await.expect("due");
    assert_eq!(all.len(), 6);
    assert_eq!(
        all[5].fire_at, 1_700_000_000.123_456,
        "fire_at round-trips exactly"
    );
    assert!(store.due_timers(1.0).await.expect("due").is_empty());
    // the point read a precise timer's doorbell uses
    assert_eq!(
        store.armed_timer("tm-a", "root.x").await.expect("armed"),
        Some(50.5)
    );
    assert_eq!(
        store.armed_timer("tm-c", "root.late").await.expect("armed"),
        Some(1_700_000_000.123_456)
    );
    assert_eq!(store.armed_timer("tm-a", "root.z").await.expect("armed"), None);
    assert_eq!(store.armed_timer("nobody", "root.x").await.expect("armed"), None);
}

/// A commit's cancel removes the timer; several ops on one path in one commit leave what
/// the last one says.
pub async fn timer_cancel_and_collapse_in_one_commit<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let mut e = exe("tc-1", "def");
    let timers = vec![
        TimerOp::Schedule {
            path: "root.a".into(),
            fire_at: 5.0,
        },
        TimerOp::Schedule {
            path: "root.b".into(),
            fire_at: 6.0,
        },
        TimerOp::Schedule {
            path: "root.a".into(),
            fire_at: 7.0,
        },
        TimerOp::Cancel {
            path: "root.b".into(),
        },
    ];
    store
        .commit(
            &mut e,
            Commit {
                timers,
                ..Commit::default()
            },
        )
        .await
        .expect("commit");
    let due = store.due_timers(100.0).await.expect("due");
    assert_eq!(
        due.iter()
            .map(|t| (t.path.as_str(), t.fire_at))
            .collect::<Vec<_>>(),
        vec![("root.a", 7.0)]
    );
    store
        .commit(
            &mut e,
            Commit {
                timers: vec![TimerOp::Cancel {
                    path: "root.a".into(),
                }],
                ..Commit::default()
            },
        )
        .await
        .expect("cancel");
    assert!(store.due_timers(100.0).await.expect("due").is_empty());
}

/// The sweeper's guarded delete: a timer re-scheduled after the sweep read it survives the
/// stale delete; the matching delete removes it; deleting a missing timer is a no-op.
pub async fn guarded_delete_survives_reschedule<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let mut e = exe("gd-1", "def");
    store
        .commit(
            &mut e,
            Commit {
                timers: vec![TimerOp::Schedule {
                    path: "root.t".into(),
                    fire_at: 10.5,
                }],
                ..Commit::default()
            },
        )
        .await
        .expect("arm");
    let seen = store.due_timers(20.0).await.expect("due");
    assert_eq!(seen.len(), 1);
    // the worker re-arms the same timer before the sweeper deletes what it saw
    store
        .commit(
            &mut e,
            Commit {
                timers: vec![TimerOp::Schedule {
                    path: "root.t".into(),
                    fire_at: 30.25,
                }],
                ..Commit::default()
            },
        )
        .await
        .expect("re-arm");
    store
        .delete_timer("gd-1", "root.t", seen[0].fire_at)
        .await
        .expect("stale delete is a silent no-op");
    let now = store.due_timers(100.0).await.expect("due");
    assert_eq!(
        now.iter().map(|t| t.fire_at).collect::<Vec<_>>(),
        vec![30.25],
        "the re-armed timer survives"
    );
    store.delete_timer("gd-1", "root.t", 30.25).await.expect("delete");
    assert!(store.due_timers(100.0).await.expect("due").is_empty());
    store
        .delete_timer("gd-1", "root.t", 30.25)
        .await
        .expect("deleting a missing timer is a no-op");
    store
        .delete_timer("nobody", "root.t", 1.0)
        .await
        .expect("deleting a missing timer is a no-op");
}

/// `load_for_event` returns the execution and whether the event was processed.
pub async fn load_for_event_with_and_without_mark<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    assert_eq!(
        store.load_for_event("lfe-1", "ev-1").await.expect("lfe"),
        (None, false)
    );
    let mut e = exe("lfe-1", "def");
    e.context.insert("k".into(), json!("v"));
    store
        .commit(
            &mut e,
            Commit {
                processed_event_ids: vec!["ev-1".into()],
                ..Commit::default()
            },
        )
        .await
        .expect("commit");
    let (loaded, processed) = store.load_for_event("lfe-1", "ev-1").await.expect("lfe");
    assert_eq!(loaded.as_ref(), Some(&e));
    assert!(processed, "ev-1 is marked");
    let (loaded, processed) = store.load_for_event("lfe-1", "ev-2").await.expect("lfe");
    assert_eq!(loaded.map(|x| x.version), Some(1));
    assert!(!processed, "ev-2 is not");
    assert!(store.is_processed("lfe-1", "ev-1").await.expect("is_processed"));
    assert!(!store.is_processed("lfe-1", "ev-2").await.expect("is_processed"));
    // a mark without an execution (processed, then purged) still answers
    assert_eq!(
        store.load_for_event("other", "ev-1").await.expect("lfe"),
        (None, false)
    );
}

/// A coalesced burst commits several marks at once: each is recorded, and one
/// `load_for_events` answers them all in order (a repeated id, an unknown one) with the
/// execution. A later commit without marks forgets none of them.
pub async fn burst_commit_records_every_mark<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let mut e = exe("burst-1", "def");
    store.save(&mut e).await.expect("create");
    let burst = Commit {
        processed_event_ids: vec!["b-1".into(), "b-2".into(), "b-3".into()],
        timers: vec![TimerOp::Schedule {
            path: "T".into(),
            fire_at: 5.0,
        }],
        ..Commit::default()
    };
    store.commit(&mut e, burst).await.expect("burst commit");
    let (loaded, marks) = store
        .load_for_events("burst-1", &["b-1", "b-2", "nope", "b-3", "b-1"])
        .await
        .expect("load_for_events");
    assert_eq!(loaded.map(|x| x.version), Some(2));
    assert_eq!(marks, vec![true, true, false, true, true]);
    // only marks, nothing else: the cheapest commit
    let marks_only = Commit {
        processed_event_ids: vec!["b-4".into(), "b-5".into()],
        ..Commit::default()
    };
    store.commit(&mut e, marks_only).await.expect("marks only");
    store.save(&mut e).await.expect("a commit without marks");
    let (loaded, marks) = store
        .load_for_events("burst-1", &["b-1", "b-2", "b-3", "b-4", "b-5", "b-6"])
        .await
        .expect("load_for_events");
    assert_eq!(loaded.map(|x| x.version), Some(4));
    assert_eq!(marks, vec![true, true, true, true, true, false]);
    for (event_id, expected) in [("b-1", true), ("b-5", true), ("b-6", false)] {
        assert_eq!(
            store
                .is_processed("burst-1", event_id)
                .await
                .expect("is_processed"),
            expected,
            "{event_id}"
        );
    }
    let (none, marks) = store
        .load_for_events("burst-none", &["b-1", "b-2"])
        .await
        .expect("load_for_events");
    assert_eq!((none, marks), (None, vec![false, false]));
}

/// Duplicates are recognised as far back as the store promises: with `window` `None`
/// every processed event (25 here), with `Some(n)` exactly the last `n`: the `n + 1`-th
/// newest is no longer recognised, whether the events came one per commit or in bursts
/// (a burst's marks count one each, newest last).
pub async fn dedupe_remembers_its_window<S: ExecutionStore>(
    make: impl AsyncFn(usize) -> S,
    window: Option<usize>,
) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let total = window.map_or(25, |n| n + 5);
    let ids: Vec<String> = (0..total).map(|i| format!("w-{i:02}")).collect();
    let mut e = exe("window-1", "def");
    store.save(&mut e).await.expect("create");
    // one per commit, then the rest in bursts of three
    let singles = total / 2;
    for id in &ids[..singles] {
        let c = Commit {
            processed_event_ids: vec![id.clone()],
            ..Commit::default()
        };
        store.commit(&mut e, c).await.expect("commit");
    }
    for chunk in ids[singles..].chunks(3) {
        let c = Commit {
            processed_event_ids: chunk.to_vec(),
            ..Commit::default()
        };
        store.commit(&mut e, c).await.expect("burst commit");
    }
    let expected = |age: usize| window.is_none_or(|n| age < n);
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let (loaded, marks) = store
        .load_for_events("window-1", &refs)
        .await
        .expect("load_for_events");
    assert!(loaded.is_some());
    for (i, (id, marked)) in ids.iter().zip(&marks).enumerate() {
        let age = total - 1 - i; // 0: the newest
        assert_eq!(*marked, expected(age), "{id}, {age} events behind the newest");
        assert_eq!(
            store.load_for_event("window-1", id).await.expect("lfe").1,
            expected(age),
            "load_for_event {id}"
        );
        assert_eq!(
            store.is_processed("window-1", id).await.expect("is_processed"),
            expected(age),
            "is_processed {id}"
        );
    }
    if let Some(n) = window {
        // the boundary, named: the n-th newest is a duplicate, the (n+1)-th is not
        let (_, edge) = store
            .load_for_events("window-1", &[refs[total - n], refs[total - n - 1]])
            .await
            .expect("load_for_events");
        assert_eq!(edge, vec![true, false]);
    }
}

/// An execution over DynamoDB's 400 KB item limit is refused before any write.
pub async fn oversized_context_is_too_large<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let mut e = exe("big-1", "def");
    e.context.insert("blob".into(), json!("x".repeat(450 * 1024)));
    match store.save(&mut e).await {
        Err(StoreError::TooLarge(msg)) => {
            assert!(
                msg.contains("big-1") && msg.contains("bytes"),
                "the message says what and how big: {msg}"
            );
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(e.version, 0);
    assert!(
        store.load("big-1").await.expect("load").is_none(),
        "nothing written"
    );

    let mut ok = exe("big-2", "def");
    ok.context.insert("blob".into(), json!("x".repeat(300 * 1024)));
    store.save(&mut ok).await.expect("300 KB fits");
}

/// A commit needing more than 100 transaction items is refused before any write.
pub async fn too_many_transaction_items_is_too_large<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let mut e = exe("wide-1", "def");
    let emits = (0..120)
        .map(|i| (None, event("E", &format!("w-{i}"), json!({}))))
        .collect();
    match store
        .commit(
            &mut e,
            Commit {
                emits,
                ..Commit::default()
            },
        )
        .await
    {
        Err(StoreError::TooLarge(msg)) => assert!(msg.contains("100"), "{msg}"),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(store.load("wide-1").await.expect("load").is_none());
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
}

/// A timer whose `fire_at` DynamoDB cannot hold as a number (1E+126 or more, or not
/// finite) is refused before any write, naming the timer and the longest timeout; the
/// largest `fire_at` a validated timeout gives is stored and read back exactly.
pub async fn unstorable_timer_is_too_large<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let now = 1_700_000_000.25;
    for (i, fire_at) in [now + 1e130, -1e200, f64::INFINITY, f64::NAN]
        .into_iter()
        .enumerate()
    {
        let id = format!("num-{i}");
        let mut e = exe(&id, "def");
        let commit = Commit {
            timers: vec![
                TimerOp::Schedule {
                    path: "Fine".into(),
                    fire_at: now,
                },
                TimerOp::Schedule {
                    path: "Wait".into(),
                    fire_at,
                },
            ],
            ..Commit::default()
        };
        match store.commit(&mut e, commit).await {
            Err(StoreError::TooLarge(msg)) => assert!(
                msg.starts_with(&format!("the timer of {id} at Wait would fire at "))
                    && msg.contains("DynamoDB cannot store as a number")
                    && msg.contains("9007199254740991"),
                "{msg}"
            ),
            other => panic!("{fire_at}: expected TooLarge, got {other:?}"),
        }
        assert_eq!(e.version, 0);
        assert!(store.load(&id).await.expect("load").is_none(), "nothing written");
        assert_eq!(store.armed_timer(&id, "Fine").await.expect("timer"), None);
    }
    // the largest a validated literal timeout gives: stored, and read back exactly
    let longest = now + stm_core::validate::MAX_TIMEOUT_SECONDS as f64;
    let mut e = exe("num-ok", "def");
    let commit = Commit {
        timers: vec![TimerOp::Schedule {
            path: "Wait".into(),
            fire_at: longest,
        }],
        ..Commit::default()
    };
    store
        .commit(&mut e, commit)
        .await
        .expect("a validated timeout is stored");
    assert_eq!(
        store.armed_timer("num-ok", "Wait").await.expect("timer"),
        Some(longest)
    );
}

// ---- purge (harel 0.9.0's `harel/testing/purge.py`, `assert_purge_contract`) -------------

/// What harel's purge contract commits for each seeded execution: an emit to itself, a
/// processed mark, a timer, a spawn intent and a trace step.
fn purge_seed_commit(id: &str) -> Commit {
    Commit {
        emits: vec![(
            Some(id.to_string()),
            event("Tick", &format!("{id}-tick"), json!({})),
        )],
        processed_event_ids: vec![format!("{id}-ev")],
        timers: vec![TimerOp::Schedule {
            path: "P".into(),
            fire_at: 1.0,
        }],
        spawns: vec![SpawnIntent {
            child_id: format!("{id}-child"),
            root_path: String::new(),
            context: Map::new(),
        }],
        traces: vec![map(json!({"event": "Tick"}))],
    }
}

fn finished(id: &str) -> Execution {
    let mut e = exe(id, "purge-def");
    e.status = Status::Done;
    e
}

/// `purge(id, version)` deletes the execution and everything keyed by it iff the version
/// still matches; a wrong version is a no-op returning false; purging again is a harmless
/// false; a stale copy cannot resurrect it; a new execution may reuse the id; an unrelated
/// execution's rows are untouched. harel's checks, one for one.
pub async fn purge_contract<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let (mut victim, mut bystander) = (finished("victim"), finished("bystander"));
    for e in [&mut victim, &mut bystander] {
        let commit = purge_seed_commit(&e.id);
        store.commit(e, commit).await.expect("seed");
    }
    let mine = |ids: Vec<String>| -> BTreeSet<String> {
        ids.into_iter()
            .filter(|i| i == "victim" || i == "bystander")
            .collect()
    };
    let stale = store.load("victim").await.expect("load").expect("seeded");
    let version = stale.version;

    assert!(
        !store.purge("victim", version + 7).await.expect("purge"),
        "moved on: untouched"
    );
    assert!(store.load("victim").await.expect("load").is_some());
    assert!(store.is_processed("victim", "victim-ev").await.expect("mark"));

    assert!(
        store.purge("victim", version).await.expect("purge"),
        "the version matches"
    );
    assert!(store.load("victim").await.expect("load").is_none());
    assert!(!store.is_processed("victim", "victim-ev").await.expect("mark"));
    assert!(store.read_trace("victim").await.expect("trace").is_empty());
    let due = store.due_timers(10.0).await.expect("timers");
    assert_eq!(
        mine(due.into_iter().map(|t| t.execution_id).collect()),
        BTreeSet::from(["bystander".to_string()])
    );
    let outbox = store.pending_outbox().await.expect("outbox");
    assert_eq!(
        mine(outbox.into_iter().filter_map(|o| o.target_id).collect()),
        BTreeSet::from(["bystander".to_string()])
    );
    let spawns = store.pending_spawns().await.expect("spawns");
    assert_eq!(
        mine(spawns.into_iter().map(|s| s.parent_id).collect()),
        BTreeSet::from(["bystander".to_string()])
    );
    assert!(
        store.load("bystander").await.expect("load").is_some(),
        "an unrelated execution is untouched"
    );
    assert!(store
        .is_processed("bystander", "bystander-ev")
        .await
        .expect("mark"));

    assert!(
        !store.purge("victim", version).await.expect("purge"),
        "already gone: harmless"
    );
    let mut stale = stale;
    assert!(
        store.save(&mut stale).await.is_err_and(|e| e.is_conflict()),
        "a stale copy of a purged execution cannot bring it back"
    );
    assert!(store.load("victim").await.expect("load").is_none());

    let mut reborn = finished("victim");
    store
        .save(&mut reborn)
        .await
        .expect("a new execution may reuse the id");
    assert_eq!(
        store.load("victim").await.expect("load").expect("reborn").version,
        1
    );
    let bystander = store.load("bystander").await.expect("load").expect("bystander");
    for e in [&reborn, &bystander] {
        assert!(store.purge(&e.id, e.version).await.expect("purge"));
    }
}

/// `ids_with_prefix` matches literally: a LIKE or glob metacharacter in the prefix is a
/// plain character (harel's `assert_ids_with_prefix_contract`), and `ids_with_any_prefix`
/// answers several prefixes at once.
pub async fn ids_with_prefix_contract<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let seeded = [
        "r",
        "r:A:0",
        "r:A:0:B:0",
        "rx",
        "a_b:1",
        "aXb:1",
        "p%q:1",
        "p1q:1",
        "s*t:1",
        "sxt:1",
        "u[v]:1",
        "uv:1",
    ];
    for id in seeded {
        store.save(&mut exe(id, "prefix-def")).await.expect("seed");
    }
    let cases: [(&str, &[&str]); 5] = [
        ("r:", &["r:A:0", "r:A:0:B:0"]),
        ("a_b:", &["a_b:1"]),
        ("p%q:", &["p%q:1"]),
        ("s*t:", &["s*t:1"]),
        ("u[v]:", &["u[v]:1"]),
    ];
    let set = |ids: Vec<String>| ids.into_iter().collect::<BTreeSet<String>>();
    for (prefix, expected) in cases {
        let found = store.ids_with_prefix(prefix).await.expect("ids_with_prefix");
        assert_eq!(
            set(found),
            expected.iter().map(|s| s.to_string()).collect(),
            "prefix {prefix:?}"
        );
    }
    let many = store
        .ids_with_any_prefix(&["r:".into(), "s*t:".into(), "none:".into()])
        .await
        .expect("ids_with_any_prefix");
    assert_eq!(
        set(many),
        ["r:A:0", "r:A:0:B:0", "s*t:1"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    assert!(store.ids_with_any_prefix(&[]).await.expect("none").is_empty());
    for id in seeded {
        assert!(store.purge(id, 1).await.expect("purge"));
    }
}

/// More rows than one `BatchWriteItem` takes (25), and more than one trace page: all go.
pub async fn purge_sweeps_partitions_past_one_batch<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(0).await;
    let mut e = finished("wide");
    for i in 0..60 {
        let commit = Commit {
            processed_event_ids: vec![format!("ev-{i}")],
            timers: vec![TimerOp::Schedule {
                path: format!("T{i}"),
                fire_at: 1.0,
            }],
            traces: vec![map(json!({"event": "Tick", "i": i}))],
            ..Commit::default()
        };
        store.commit(&mut e, commit).await.expect("commit");
    }
    assert_eq!(store.read_trace("wide").await.expect("trace").len(), 60);
    assert!(store.purge("wide", e.version).await.expect("purge"));
    assert!(store.read_trace("wide").await.expect("trace").is_empty());
    for i in [0, 24, 25, 59] {
        assert!(
            !store
                .is_processed("wide", &format!("ev-{i}"))
                .await
                .expect("mark"),
            "mark {i}"
        );
    }
    let left = store.due_timers(10.0).await.expect("timers");
    assert!(
        left.iter().all(|t| t.execution_id != "wide"),
        "timers left: {left:?}"
    );
}

/// Deleting what a listing pages through does not make it skip the rest: a purge lists a
/// page, deletes it, then asks for the next with the cursor it was given.
pub async fn purge_while_paging_skips_nothing<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let ids: BTreeSet<String> = (0..45).map(|i| format!("page-{i:02}")).collect();
    for id in &ids {
        store.save(&mut finished(id)).await.expect("seed");
    }
    let mut seen = BTreeSet::new();
    let mut cursor = None;
    loop {
        let query = ListQuery {
            definition_id: Some("purge-def".into()),
            limit: 10,
            cursor: cursor.take(),
            ..ListQuery::default()
        };
        let page = store.list_executions(&query).await.expect("list");
        for summary in &page.items {
            assert!(seen.insert(summary.id.clone()), "{} listed twice", summary.id);
            assert!(store.purge(&summary.id, summary.version).await.expect("purge"));
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(
        seen, ids,
        "every execution listed once although each page was deleted"
    );
}
