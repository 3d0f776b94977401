//! Harel's trace reader and writer with our `trace_idx` shortcut: one contiguous ring.

use serde_json::json;
use stm_core::Execution;
use stm_store::{Commit, ExecutionStore};

use crate::support::{obj, our_store, python};

/// Our traced commits skip the max-idx Query (trace_idx); harel's reader and writer still
/// see one contiguous ring, whoever writes next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harels_trace_reader_works_with_trace_idx() {
    let prefix = stm_testkit::unique_prefix("traceidx");
    let store = our_store(&prefix).await;
    let mut e = Execution::new("t-1", "def");
    for i in 0..3 {
        store
            .commit(
                &mut e,
                Commit {
                    traces: vec![obj(json!({"step": i, "by": "ours"}))],
                    ..Commit::default()
                },
            )
            .await
            .expect("traced commit");
    }
    let seen = python(
        &prefix,
        r#"
raw = client.get_item(TableName=os.environ["PREFIX"] + "_executions", Key={"id": {"S": "t-1"}})["Item"]
exe = store.load("t-1")
store.commit(exe, [], trace={"step": 3, "by": "harel"})
store.append_trace("t-1", {"step": 4, "by": "harel-append"})
out({"attrs": sorted(raw), "trace_idx": raw["trace_idx"]["N"],
     "trace": [[t["index"], t["step"], t["by"]] for t in store.read_trace("t-1")]})
"#,
        "",
    );
    assert_eq!(
        seen["attrs"],
        json!([
            "commit_token",
            "data",
            "definition_id",
            "id",
            "trace_idx",
            "version"
        ])
    );
    assert_eq!(seen["trace_idx"], json!("2"));
    assert_eq!(
        seen["trace"],
        json!([
            [0, 0, "ours"],
            [1, 1, "ours"],
            [2, 2, "ours"],
            [3, 3, "harel"],
            [4, 4, "harel-append"]
        ])
    );

    // harel's put dropped our trace_idx: the next traced commit of ours re-reads the max
    let mut e = store.load("t-1").await.expect("load").expect("stored");
    store
        .commit(
            &mut e,
            Commit {
                traces: vec![obj(json!({"step": 5, "by": "ours"}))],
                ..Commit::default()
            },
        )
        .await
        .expect("traced commit");
    let seen = python(
        &prefix,
        r#"out([[t["index"], t["by"]] for t in store.read_trace("t-1")])"#,
        "",
    );
    assert_eq!(
        seen,
        json!([
            [0, "ours"],
            [1, "ours"],
            [2, "ours"],
            [3, "harel"],
            [4, "harel-append"],
            [5, "ours"]
        ])
    );
}
