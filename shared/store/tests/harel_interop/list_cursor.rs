//! Harel's listing cursor is accepted by ours.

use stm_core::Execution;
use stm_store::ExecutionStore;

use crate::support::{our_store, python};

/// harel 0.9.0's listing cursor (a base64 offset) is accepted by ours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harel_list_cursor_is_accepted() {
    let prefix = stm_testkit::unique_prefix("cursor");
    let store = our_store(&prefix).await;
    for i in 0..9 {
        let mut e = Execution::new(format!("c-{i}"), "def");
        store.save(&mut e).await.expect("insert");
    }
    let first = python(
        &prefix,
        r#"
page = store.list_executions(limit=4)
out({"ids": [s.id for s in page.items], "cursor": page.next_cursor})
"#,
        "",
    );
    let cursor = first["cursor"]
        .as_str()
        .expect("harel returned a cursor")
        .to_string();
    let mut seen: Vec<String> = first["ids"]
        .as_array()
        .expect("ids")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let mut query = stm_store::ListQuery {
        limit: 4,
        cursor: Some(cursor),
        ..Default::default()
    };
    loop {
        let page = store
            .list_executions(&query)
            .await
            .expect("list with harel's cursor");
        seen.extend(page.items.into_iter().map(|s| s.id));
        match page.next_cursor {
            Some(c) => query.cursor = Some(c),
            None => break,
        }
    }
    seen.sort();
    let want: Vec<String> = (0..9).map(|i| format!("c-{i}")).collect();
    assert_eq!(
        seen, want,
        "harel's first page plus ours from its cursor cover everything once"
    );
}
