//! Purge and the id prefix scans (harel 0.9.0's `harel/testing/purge.py`).

use std::collections::BTreeSet;

use serde_json::json;
use stm_core::{Execution, Map, Status};

use super::{event, exe, map};
use crate::{Commit, ExecutionStore, ListQuery, SpawnIntent, TimerOp, DEFAULT_TRACE_MAX};

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
        park: Some(Box::new(crate::ParkedEvent {
            number: 1,
            event: event("Later", &format!("{id}-parked"), json!({})),
        })),
        ..Commit::default()
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
        assert_eq!(store.take_park_number(&e.id).await.expect("number"), 1);
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
    assert!(
        store
            .parked_events("victim", 0, 10)
            .await
            .expect("parked")
            .is_empty(),
        "its parked events go with it"
    );
    assert_eq!(
        store
            .parked_events("bystander", 0, 10)
            .await
            .expect("parked")
            .len(),
        1
    );
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
