//! The state index: which executions are in which state, and since when, after each
//! commit.

use stm_core::Status;

use super::exe;
use crate::{ExecutionStore, InState, DEFAULT_TRACE_MAX};

fn ids(found: &[InState]) -> Vec<(&str, &str, f64)> {
    found
        .iter()
        .map(|s| (s.id.as_str(), s.path.as_str(), s.since))
        .collect()
}

fn paths(list: &[&str]) -> Vec<String> {
    list.iter().map(|p| p.to_string()).collect()
}

/// Executions are found by machine and exact state path; the time in a state carries
/// through commits that stay in it and restarts on a move; DONE and CANCELLED executions,
/// other machines and purged executions are not found; a lost CAS changes nothing.
pub async fn in_states_follow_each_commit<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    let at = |e: &mut stm_core::Execution, path: &str, status: Status, now: f64| {
        e.active_path = Some(path.to_string());
        e.status = status;
        e.updated_at = Some(now);
    };
    let mut a = exe("st-a", "Order");
    at(&mut a, "Fulfil", Status::Running, 100.0);
    store.save(&mut a).await.expect("insert a");
    let mut b = exe("st-b", "Order");
    at(&mut b, "Fulfil.Charging", Status::Running, 120.0);
    store.save(&mut b).await.expect("insert b");
    let mut other = exe("st-other", "Refund");
    at(&mut other, "Fulfil", Status::Running, 90.0);
    store.save(&mut other).await.expect("insert other");

    let found = store
        .in_states("Order", &paths(&["Fulfil"]), None)
        .await
        .expect("query");
    assert_eq!(
        ids(&found),
        [("st-a", "Fulfil", 100.0)],
        "by machine and exact path"
    );

    // a commit that stays in the state keeps the time it was entered
    a.context.insert("n".into(), serde_json::json!(1));
    a.updated_at = Some(150.0);
    store.save(&mut a).await.expect("update a");
    let both = store
        .in_states("Order", &paths(&["Fulfil", "Fulfil.Charging"]), None)
        .await
        .expect("query");
    assert_eq!(
        ids(&both),
        [("st-a", "Fulfil", 100.0), ("st-b", "Fulfil.Charging", 120.0)],
        "in the order of the paths asked, each oldest first"
    );

    // entered at or before
    let old = |by: f64| {
        let store = &store;
        async move {
            store
                .in_states("Order", &paths(&["Fulfil", "Fulfil.Charging"]), Some(by))
                .await
                .expect("query")
        }
    };
    assert!(old(99.0).await.is_empty());
    assert_eq!(ids(&old(100.0).await), [("st-a", "Fulfil", 100.0)]);
    assert_eq!(old(120.0).await.len(), 2);

    // a move restarts the time; suspension is not a move
    at(&mut a, "Fulfil.Charging", Status::Suspended, 200.0);
    store.save(&mut a).await.expect("move a");
    assert!(store
        .in_states("Order", &paths(&["Fulfil"]), None)
        .await
        .expect("query")
        .is_empty());
    let charging = store
        .in_states("Order", &paths(&["Fulfil.Charging"]), None)
        .await
        .expect("query");
    assert_eq!(
        ids(&charging),
        [
            ("st-b", "Fulfil.Charging", 120.0),
            ("st-a", "Fulfil.Charging", 200.0)
        ]
    );

    // a stale writer's lost CAS leaves the index as it was
    let mut stale = a.clone();
    stale.version -= 1;
    at(&mut stale, "Elsewhere", Status::Running, 300.0);
    assert!(store.save(&mut stale).await.is_err(), "the stale write conflicts");
    assert!(store
        .in_states("Order", &paths(&["Elsewhere"]), None)
        .await
        .expect("query")
        .is_empty());

    // FAILED stays listed (it waits for a redrive); DONE and CANCELLED leave the index
    at(&mut a, "Fulfil.Charging", Status::Failed, 210.0);
    store.save(&mut a).await.expect("fail a");
    at(&mut b, "Fulfil.Charging", Status::Done, 220.0);
    store.save(&mut b).await.expect("finish b");
    let charging = store
        .in_states("Order", &paths(&["Fulfil.Charging"]), None)
        .await
        .expect("query");
    assert_eq!(ids(&charging), [("st-a", "Fulfil.Charging", 200.0)]);
    at(&mut a, "Fulfil.Charging", Status::Cancelled, 230.0);
    store.save(&mut a).await.expect("cancel a");
    assert!(store
        .in_states("Order", &paths(&["Fulfil.Charging"]), None)
        .await
        .expect("query")
        .is_empty());

    // a purged execution is gone from the index
    assert_eq!(
        ids(&store
            .in_states("Refund", &paths(&["Fulfil"]), None)
            .await
            .expect("query"))
        .len(),
        1
    );
    assert!(store.purge("st-other", other.version).await.expect("purge"));
    assert!(store
        .in_states("Refund", &paths(&["Fulfil"]), None)
        .await
        .expect("query")
        .is_empty());
}

/// More executions in one state than one page of a shard's query returns are all found:
/// 300 executions entered over time, found oldest first.
pub async fn in_states_finds_every_match_in_order<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(DEFAULT_TRACE_MAX).await;
    for i in 0..300 {
        let mut e = exe(&format!("many-{i:03}"), "Bulk");
        e.active_path = Some("Waiting".into());
        e.status = Status::Running;
        e.updated_at = Some(1_000.0 + f64::from(i));
        store.save(&mut e).await.expect("insert");
    }
    let found = store
        .in_states("Bulk", &paths(&["Waiting"]), None)
        .await
        .expect("query");
    assert_eq!(found.len(), 300);
    assert!(found.windows(2).all(|w| w[0].since <= w[1].since), "oldest first");
    let older = store
        .in_states("Bulk", &paths(&["Waiting"]), Some(1_049.0))
        .await
        .expect("query");
    assert_eq!(older.len(), 50);
}
