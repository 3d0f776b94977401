//! DynamoDB calls per store operation, counted by the SDK interceptor (`CallCounter`).
//! Counts are deterministic, so they are asserted; `measures.rs` prints them as a table.

use std::collections::BTreeMap;

use serde_json::json;
use stm_core::{Event, Execution, Map};
use stm_store::{CallCounter, Commit, CreateOptions, DynamoDbStore, ExecutionStore, SpawnIntent, TimerOp};

async fn counted_store(prefix: &str) -> (DynamoDbStore, CallCounter) {
    let moto = stm_testkit::moto().await;
    let counter = CallCounter::new();
    let options = CreateOptions {
        prefix: prefix.to_string(),
        connect_attempts: 5,
        call_counter: Some(counter.clone()),
        ..CreateOptions::default()
    };
    let store = DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("store");
    (store, counter)
}

fn calls(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn step(n: i64) -> Option<Map> {
    match json!({"event": "Tick", "from": "root.a", "to": "root.b", "n": n}) {
        serde_json::Value::Object(m) => Some(m),
        _ => None,
    }
}

#[tokio::test]
async fn calls_per_operation() {
    let (store, counter) = counted_store(&stm_testkit::unique_prefix("calls")).await;
    let mut e = Execution::new("calls-1", "def");

    let (r, n) = counter.measure(store.save(&mut e)).await;
    r.expect("insert");
    assert_eq!(n, calls(&[("PutItem", 1)]), "insert without side effects");

    let (r, n) = counter.measure(store.load("calls-1")).await;
    e = r.expect("load").expect("stored");
    assert_eq!(n, calls(&[("GetItem", 1)]), "load");

    let (r, n) = counter.measure(store.load_for_event("calls-1", "ev-1")).await;
    r.expect("load_for_event");
    assert_eq!(n, calls(&[("BatchGetItem", 1)]), "load_for_event");

    let worker_step = Commit {
        processed_event_id: Some("ev-1".into()),
        ..Commit::default()
    };
    let (r, n) = counter.measure(store.commit(&mut e, worker_step)).await;
    r.expect("commit");
    assert_eq!(
        n,
        calls(&[("TransactWriteItems", 1)]),
        "commit with a processed mark"
    );

    let emits = Commit {
        emits: vec![(Some("x".into()), Event::new("A")), (None, Event::new("B"))],
        processed_event_id: Some("ev-2".into()),
        timers: vec![TimerOp::Schedule {
            path: "root.t".into(),
            fire_at: 5.0,
        }],
        ..Commit::default()
    };
    let (r, n) = counter.measure(store.commit(&mut e, emits)).await;
    r.expect("commit");
    assert_eq!(
        n,
        calls(&[("TransactWriteItems", 1), ("UpdateItem", 1)]),
        "commit with emits: seq block + txn"
    );

    let spawns = Commit {
        emits: vec![(None, Event::new("C"))],
        spawns: vec![SpawnIntent {
            child_id: "calls-1/c".into(),
            root_path: "root.p".into(),
            context: Map::new(),
        }],
        ..Commit::default()
    };
    let (r, n) = counter.measure(store.commit(&mut e, spawns)).await;
    r.expect("commit");
    assert_eq!(
        n,
        calls(&[("TransactWriteItems", 1), ("UpdateItem", 2)]),
        "emits and spawns: two seq blocks"
    );

    // traced commits: the trace index comes from the execution item, no Query
    for i in 0..3 {
        let (r, n) = counter
            .measure(store.commit(
                &mut e,
                Commit {
                    trace: step(i),
                    ..Commit::default()
                },
            ))
            .await;
        r.expect("traced commit");
        assert_eq!(
            n,
            calls(&[("TransactWriteItems", 1)]),
            "traced commit {i}: no extra read"
        );
    }
    let reloaded = store.load("calls-1").await.expect("load").expect("stored");
    e = reloaded;
    let (r, n) = counter
        .measure(store.commit(
            &mut e,
            Commit {
                trace: step(3),
                ..Commit::default()
            },
        ))
        .await;
    r.expect("traced commit after a reload");
    assert_eq!(
        n,
        calls(&[("TransactWriteItems", 1)]),
        "the reload brought the trace index"
    );

    // a second store instance (another worker) that did not load it itself: the seed's Query
    let (other, other_counter) = counted_store(store.prefix()).await;
    let mut stale_view = e.clone();
    let (r, n) = other_counter
        .measure(other.commit(
            &mut stale_view,
            Commit {
                trace: step(4),
                ..Commit::default()
            },
        ))
        .await;
    r.expect("traced commit without a hint");
    assert_eq!(
        n,
        calls(&[("Query", 1), ("TransactWriteItems", 1)]),
        "no hint: the seed's max-idx Query"
    );
    let trace = store.read_trace("calls-1").await.expect("trace");
    let indices: Vec<i64> = trace
        .iter()
        .filter_map(|t| t.get("index").and_then(|v| v.as_i64()))
        .collect();
    assert_eq!(indices, vec![0, 1, 2, 3, 4], "contiguous across both writers");

    // conflicts: the found version comes from ALL_OLD, no extra read
    let (r, n) = counter.measure(store.save(&mut e)).await;
    assert!(r.is_err_and(|err| err.is_conflict()));
    assert_eq!(n, calls(&[("PutItem", 1)]), "conflict on the single-put path");
    let (r, n) = counter
        .measure(store.commit(
            &mut e,
            Commit {
                processed_event_id: Some("x".into()),
                ..Commit::default()
            },
        ))
        .await;
    match r {
        Err(stm_store::StoreError::Conflict { found, .. }) => assert_eq!(found, Some(e.version + 1)),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(
        n,
        calls(&[("TransactWriteItems", 1)]),
        "conflict on the transaction path"
    );

    let (r, n) = counter.measure(store.is_processed("calls-1", "ev-1")).await;
    assert!(r.expect("is_processed"));
    assert_eq!(n, calls(&[("GetItem", 1)]));
}

#[tokio::test]
async fn trace_hint_goes_stale_safely() {
    // an append outside a commit (harel's appender cannot update the execution item): the
    // guarded trace put refuses the taken slot and the commit re-reads the max
    let (store, counter) = counted_store(&stm_testkit::unique_prefix("stale")).await;
    let mut e = Execution::new("stale-1", "def");
    store
        .commit(
            &mut e,
            Commit {
                trace: step(0),
                ..Commit::default()
            },
        )
        .await
        .expect("commit");
    // write idx 1 behind the store's back, as a harel process would
    let raw = store
        .client()
        .put_item()
        .table_name(store.table_name("trace"))
        .item(
            "execution_id",
            aws_sdk_dynamodb::types::AttributeValue::S("stale-1".into()),
        )
        .item("idx", aws_sdk_dynamodb::types::AttributeValue::N("1".into()))
        .item(
            "entry",
            aws_sdk_dynamodb::types::AttributeValue::S("{\"by\": \"harel\"}".into()),
        )
        .send()
        .await;
    raw.expect("raw put");
    let (r, n) = counter
        .measure(store.commit(
            &mut e,
            Commit {
                trace: step(2),
                ..Commit::default()
            },
        ))
        .await;
    r.expect("commit over a stale hint");
    assert_eq!(
        n,
        calls(&[("Query", 1), ("TransactWriteItems", 2)]),
        "refused once, re-read, landed"
    );
    let trace = store.read_trace("stale-1").await.expect("trace");
    let got: Vec<(i64, Option<String>)> = trace
        .iter()
        .map(|t| {
            (
                t.get("index").and_then(|v| v.as_i64()).unwrap_or(-1),
                t.get("by").and_then(|v| v.as_str()).map(str::to_string),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![(0, None), (1, Some("harel".into())), (2, None)],
        "nothing overwritten"
    );
}
