//! The outbox and spawn rows: seq blocks across concurrent committers, the last commit's
//! rows by key, a wide fan-out packed into one commit, the relay's bounded pass, and the
//! round trip and ack of each row.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::json;
use stm_core::Map;

use super::{event, exe, map};
use crate::{Commit, ExecutionStore, SpawnIntent, DEFAULT_TRACE_MAX};

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
