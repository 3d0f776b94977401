//! DynamoDB's limits, for stores that enforce them: an item's 400 KB, a transaction's 100
//! items, and the numbers DynamoDB can hold.

use serde_json::json;

use super::{event, exe};
use crate::{Commit, ExecutionStore, StoreError, TimerOp, DEFAULT_TRACE_MAX};

/// An execution over DynamoDB's 400 KB item limit is refused before any write.
pub async fn oversized_context_is_too_large<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let mut e = exe("big-1", "def");
    e.context.insert("blob".into(), json!("x".repeat(450 * 1024)));
    match store.save(&mut e).await {
        Err(StoreError::TooLarge(why)) => {
            let msg = why.to_string();
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
        Err(StoreError::TooLarge(why)) => {
            let msg = why.to_string();
            assert!(msg.contains("100"), "{msg}");
        }
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
            Err(StoreError::TooLarge(why)) => {
                let msg = why.to_string();
                assert!(
                    msg.starts_with(&format!("the timer of {id} at Wait would fire at "))
                        && msg.contains("DynamoDB cannot store as a number")
                        && msg.contains("9007199254740991"),
                    "{msg}"
                );
            }
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
