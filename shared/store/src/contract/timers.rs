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
                    // tm-c's timers are armed in a trace: they keep its context
                    trace_context: (id == "tm-c").then(|| TRACED.to_string()),
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
    // with the arming commit's trace context, in the same read
    assert_eq!(
        store
            .armed_timer_in_trace("tm-c", "root.late")
            .await
            .expect("armed"),
        Some((1_700_000_000.123_456, Some(TRACED.to_string())))
    );
    assert_eq!(
        store.armed_timer_in_trace("tm-a", "root.x").await.expect("armed"),
        Some((50.5, None))
    );
    assert_eq!(
        store
            .armed_timer_in_trace("nobody", "root.x")
            .await
            .expect("armed"),
        None
    );
}

/// A W3C `traceparent` (the specification's example).
const TRACED: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

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

/// The variable that replays [`due_pages_give_each_due_timer_once_in_due_order`]'s draw.
pub const DUE_PAGES_SEED_VAR: &str = stm_env::DUE_PAGES_SEED;

/// A sweep's pages (`due_page` with one cursor) give every due timer once, in due order
/// (`fire_at`, then execution, then path) across the store's shards, none past `now`, each
/// page at most its limit and only the last one short; a timer fired (deleted) between
/// pages is not given again. Drawn: how many executions and timers, their `fire_at`s
/// (with ties across executions), and each page's limit.
pub async fn due_pages_give_each_due_timer_once_in_due_order<S: ExecutionStore>(
    make: impl AsyncFn(usize) -> S,
) {
    let seed = super::env_u64(DUE_PAGES_SEED_VAR, 0x05ee_dd0e);
    let _report = super::SeedOnFailure::new(
        "due_pages_give_each_due_timer_once_in_due_order",
        DUE_PAGES_SEED_VAR,
        seed,
    );
    let mut rng = super::Rng::new(seed);
    let store = make(DEFAULT_TRACE_MAX).await;
    let now = 100.0;
    let mut armed = Vec::new();
    for i in 0..rng.between(40, 120) {
        let id = format!("dp-{i}");
        let timers: Vec<TimerOp> = (0..rng.between(1, 3))
            .map(|k| TimerOp::Schedule {
                path: format!("root.s{k}"),
                // a few values only, so timers tie across executions and shards
                fire_at: rng.between(0, 12) as f64 * 10.0,
            })
            .collect();
        for op in &timers {
            if let TimerOp::Schedule { path, fire_at } = op {
                armed.push(crate::DueTimer {
                    execution_id: id.clone(),
                    path: path.clone(),
                    fire_at: *fire_at,
                });
            }
        }
        let mut e = exe(&id, "def");
        let commit = Commit {
            timers,
            ..Commit::default()
        };
        store.commit(&mut e, commit).await.expect("commit");
    }
    let mut due: Vec<_> = armed.into_iter().filter(|t| t.fire_at <= now).collect();
    due.sort_by(crate::due::due_order);
    assert!(due.len() > 20, "the draw arms too few due timers to page through");

    let mut cursor = crate::DueCursor::default();
    let mut given = Vec::new();
    loop {
        let limit = rng.between(1, 40) as usize;
        let page = store.due_page(now, &mut cursor, limit).await.expect("due page");
        assert!(
            page.len() <= limit,
            "a page of {} over its limit {limit}",
            page.len()
        );
        // a sweep fires (deletes) some of what it was given: never given again
        for timer in page.iter().filter(|_| rng.chance(50)) {
            store
                .delete_timer(&timer.execution_id, &timer.path, timer.fire_at)
                .await
                .expect("delete");
        }
        let last = page.len() < limit;
        given.extend(page);
        if last {
            break;
        }
        assert!(
            given.len() <= due.len(),
            "pages went past the {} due timers",
            due.len()
        );
    }
    let key = |t: &crate::DueTimer| (t.execution_id.clone(), t.path.clone(), t.fire_at);
    assert_eq!(
        given.iter().map(key).collect::<Vec<_>>(),
        due.iter().map(key).collect::<Vec<_>>(),
        "the pages, one after another, against every due timer in due order"
    );
    // a new sweep starts from the earliest left
    let mut fresh = crate::DueCursor::default();
    let left = store
        .due_page(now, &mut fresh, due.len() + 1)
        .await
        .expect("due page");
    assert!(left
        .windows(2)
        .all(|w| crate::due::due_order(&w[0], &w[1]).is_lt()));
}

/// A held timer stays armed (`armed_timer`, `timers_of` with `held`) but is not listed as
/// due, by `due_timers` (the index and, on DynamoDB, the first sweep's full scan) or by
/// `due_page`, until a `Schedule` lists it again; a cancel removes it either way.
pub async fn held_timers_wait_out_of_the_due_listing<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let schedule = |path: &str, fire_at: f64| TimerOp::Schedule {
        path: path.into(),
        fire_at,
    };
    let hold = |path: &str, fire_at: f64| TimerOp::Hold {
        path: path.into(),
        fire_at,
    };
    let mut held = exe("hold-a", "def");
    let mut running = exe("hold-b", "def");
    for (e, timers) in [
        (
            &mut held,
            vec![schedule("root.x", 10.0), schedule("root.y", 20.0)],
        ),
        (&mut running, vec![schedule("root.x", 15.0)]),
    ] {
        let commit = Commit {
            timers,
            ..Commit::default()
        };
        store.commit(e, commit).await.expect("arm");
    }
    let commit = Commit {
        timers: vec![hold("root.x", 10.0), hold("root.y", 20.0)],
        ..Commit::default()
    };
    store.commit(&mut held, commit).await.expect("hold");
    let listed = |due: Vec<crate::DueTimer>| -> Vec<(String, String)> {
        due.into_iter().map(|t| (t.execution_id, t.path)).collect()
    };
    let only_running = vec![("hold-b".to_string(), "root.x".to_string())];
    // twice: DynamoDB's first sweep is its scheduled full scan, the second reads the index
    for _ in 0..2 {
        assert_eq!(listed(store.due_timers(100.0).await.expect("due")), only_running);
    }
    let page = store
        .due_page(100.0, &mut crate::DueCursor::default(), 10)
        .await
        .expect("page");
    assert_eq!(listed(page), only_running);
    assert_eq!(
        store.armed_timer("hold-a", "root.y").await.expect("armed"),
        Some(20.0)
    );
    let of = |armed: Vec<crate::ArmedTimer>| -> Vec<(String, f64, bool)> {
        armed.into_iter().map(|t| (t.path, t.fire_at, t.held)).collect()
    };
    assert_eq!(
        of(store.timers_of("hold-a").await.expect("timers")),
        vec![("root.x".into(), 10.0, true), ("root.y".into(), 20.0, true)]
    );
    assert_eq!(
        of(store.timers_of("hold-b").await.expect("timers")),
        vec![("root.x".into(), 15.0, false)]
    );
    assert!(store.timers_of("hold-none").await.expect("timers").is_empty());

    // listed again (one), cancelled (the other)
    let commit = Commit {
        timers: vec![
            schedule("root.x", 10.0),
            TimerOp::Cancel {
                path: "root.y".into(),
            },
        ],
        ..Commit::default()
    };
    store.commit(&mut held, commit).await.expect("release");
    assert_eq!(
        listed(store.due_timers(100.0).await.expect("due")),
        vec![
            ("hold-a".to_string(), "root.x".to_string()),
            ("hold-b".to_string(), "root.x".to_string())
        ]
    );
    assert_eq!(
        of(store.timers_of("hold-a").await.expect("timers")),
        vec![("root.x".into(), 10.0, false)]
    );
}
