//! Timers: due ones earliest first, cancel and collapse within a commit, and the
//! sweeper's guarded delete.

use super::exe;
use crate::{Commit, ExecutionStore, TimerOp, DEFAULT_TRACE_MAX};

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
