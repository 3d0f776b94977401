//! Listing: cursor pages through a filtered set of executions.

use std::collections::BTreeSet;

use stm_core::Status;

use super::exe;
use crate::{ExecutionStore, ListQuery, DEFAULT_TRACE_MAX};

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
