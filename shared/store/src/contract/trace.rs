//! The trace ring: the last N steps kept, and steps appended outside a commit.

use serde_json::json;
use stm_core::Value;

use super::{exe, map};
use crate::{Commit, ExecutionStore, DEFAULT_TRACE_MAX};

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
