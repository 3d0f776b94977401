//! Processed marks: one event's, a burst's, and how far back duplicates are recognised.

use serde_json::json;

use super::exe;
use crate::{Commit, ExecutionStore, TimerOp, DEFAULT_TRACE_MAX};

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
