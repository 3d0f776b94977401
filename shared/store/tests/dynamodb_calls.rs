//! DynamoDB calls per store operation, counted by the SDK interceptor (`CallCounter`).
//! Counts are deterministic, so they are asserted; `measures.rs` prints them as a table.

use std::collections::BTreeMap;

use serde_json::json;
use stm_aws::CallCounter;
use stm_core::{Event, Execution, Map};
use stm_store::{Commit, CreateOptions, DynamoDbStore, ExecutionStore, SpawnIntent, TimerOp};

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
        processed_event_ids: vec!["ev-1".into()],
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
        processed_event_ids: vec!["ev-2".into()],
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
        calls(&[("TransactWriteItems", 1)]),
        "commit with emits: the txn alone (no seq counter)"
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
        calls(&[("TransactWriteItems", 1)]),
        "emits and spawns: the txn alone"
    );

    // traced commits: the trace index comes from the execution item, no Query
    for i in 0..3 {
        let (r, n) = counter
            .measure(store.commit(
                &mut e,
                Commit {
                    traces: step(i).into_iter().collect(),
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
                traces: step(3).into_iter().collect(),
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
                traces: step(4).into_iter().collect(),
                ..Commit::default()
            },
        ))
        .await;
    r.expect("traced commit without a hint");
    assert_eq!(
        n,
        calls(&[("GetItem", 1), ("Query", 1), ("TransactWriteItems", 1)]),
        "no hint: the seed's max-idx Query, and the item's rows block (GetItem) it carries over"
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
                processed_event_ids: vec!["x".into()],
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
        calls(&[("GetItem", 1), ("TransactWriteItems", 1)]),
        "conflict on the transaction path (the conflict before dropped what this store knew of \
         the item, so the rows block it would carry over is read first)"
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
                traces: step(0).into_iter().collect(),
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
                traces: step(2).into_iter().collect(),
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

async fn counted_store_with(
    prefix: &str,
    marks: stm_store::dynamodb::DedupeMarks,
) -> (DynamoDbStore, CallCounter) {
    let (store, counter) = counted_store(prefix).await;
    (store.with_dedupe_marks(marks), counter)
}

/// `DedupeMarks::OnItem`: a plain event is one `GetItem` and one `PutItem`.
#[tokio::test]
async fn calls_per_operation_on_item() {
    use stm_store::dynamodb::DedupeMarks;
    let prefix = stm_testkit::unique_prefix("onitem");
    let (store, counter) = counted_store_with(&prefix, DedupeMarks::OnItem).await;
    let mut e = Execution::new("item-1", "def");
    let (r, n) = counter.measure(store.save(&mut e)).await;
    r.expect("insert");
    assert_eq!(n, calls(&[("PutItem", 1)]), "insert");

    let (r, n) = counter.measure(store.load_for_event("item-1", "ev-1")).await;
    let (loaded, processed) = r.expect("load_for_event");
    e = loaded.expect("stored");
    assert!(!processed);
    assert_eq!(
        n,
        calls(&[("GetItem", 1)]),
        "load_for_event: one consistent GetItem"
    );

    let step = Commit {
        processed_event_ids: vec!["ev-1".into()],
        ..Commit::default()
    };
    let (r, n) = counter.measure(store.commit(&mut e, step)).await;
    r.expect("commit");
    assert_eq!(
        n,
        calls(&[("PutItem", 1)]),
        "commit with a processed mark: the single conditional PutItem"
    );

    let (r, n) = counter
        .measure(store.load_for_events("item-1", &["ev-1", "ev-2", "ev-3"]))
        .await;
    let (loaded, marks) = r.expect("load_for_events");
    e = loaded.expect("stored");
    assert_eq!(marks, vec![true, false, false]);
    assert_eq!(n, calls(&[("GetItem", 1)]), "a burst's load: still one GetItem");

    let burst = Commit {
        processed_event_ids: vec!["ev-2".into(), "ev-3".into()],
        ..Commit::default()
    };
    let (r, n) = counter.measure(store.commit(&mut e, burst)).await;
    r.expect("burst commit");
    assert_eq!(n, calls(&[("PutItem", 1)]), "a burst of marks: one PutItem");

    let emits = Commit {
        emits: vec![(None, Event::new("A"))],
        processed_event_ids: vec!["ev-4".into()],
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
        calls(&[("TransactWriteItems", 1)]),
        "with side effects: the txn alone (without a mark put)"
    );

    // another store instance that did not load it: it reads the window first
    let (other, other_counter) = counted_store_with(&prefix, DedupeMarks::OnItem).await;
    let mut view = e.clone();
    let c = Commit {
        processed_event_ids: vec!["ev-5".into()],
        ..Commit::default()
    };
    let (r, n) = other_counter.measure(other.commit(&mut view, c)).await;
    r.expect("commit without a hint");
    assert_eq!(
        n,
        calls(&[("GetItem", 1), ("PutItem", 1)]),
        "no hint: read the window (and the rows block) in one GetItem"
    );

    let (r, n) = counter.measure(store.is_processed("item-1", "ev-5")).await;
    assert!(
        r.expect("is_processed"),
        "the other instance's mark is on the item"
    );
    assert_eq!(n, calls(&[("GetItem", 1)]));
    let (r, _) = counter
        .measure(store.load_for_events("item-1", &["ev-1", "ev-2", "ev-3", "ev-4", "ev-5", "ev-6"]))
        .await;
    assert_eq!(r.expect("load").1, vec![true, true, true, true, true, false]);

    // nothing in the processed table
    let marks = store
        .client()
        .scan()
        .table_name(store.table_name("processed"))
        .send()
        .await
        .expect("scan");
    assert_eq!(marks.count(), 0, "no mark items on the item layout");
}

/// Switching a deployment from the table to the item layout forgets nothing the table
/// holds: an item without a window is answered from the table, and so is one whose window
/// is not yet full of events processed since the switch.
#[tokio::test]
async fn switching_to_on_item_keeps_the_table_marks() {
    use stm_store::dynamodb::{DedupeMarks, RECENT_MARKS};
    let prefix = stm_testkit::unique_prefix("switch");
    let (table, _) = counted_store_with(&prefix, DedupeMarks::Table).await;
    let mut e = Execution::new("sw-1", "def");
    table.save(&mut e).await.expect("create");
    for id in ["old-1", "old-2"] {
        let c = Commit {
            processed_event_ids: vec![id.into()],
            ..Commit::default()
        };
        table.commit(&mut e, c).await.expect("table commit");
    }

    let (item, counter) = counted_store_with(&prefix, DedupeMarks::OnItem).await;
    let (r, n) = counter
        .measure(item.load_for_events("sw-1", &["old-1", "old-2", "new-0"]))
        .await;
    let (loaded, marks) = r.expect("load");
    let mut e = loaded.expect("stored");
    assert_eq!(marks, vec![true, true, false]);
    assert_eq!(
        n,
        calls(&[("GetItem", 1), ("BatchGetItem", 1)]),
        "an item without a window: the marks from the table"
    );
    assert!(item.is_processed("sw-1", "old-1").await.expect("is_processed"));

    for i in 0..RECENT_MARKS {
        let c = Commit {
            processed_event_ids: vec![format!("new-{i}")],
            ..Commit::default()
        };
        let (r, n) = counter.measure(item.commit(&mut e, c)).await;
        r.expect("item commit");
        assert_eq!(n, calls(&[("PutItem", 1)]), "commit {i} after the switch");
        let (r, n) = counter.measure(item.load_for_events("sw-1", &["old-2"])).await;
        let (loaded, marks) = r.expect("load");
        e = loaded.expect("stored");
        if i + 1 < RECENT_MARKS {
            assert_eq!(
                marks,
                vec![true],
                "{} events since the switch: the table still answers",
                i + 1
            );
            assert_eq!(n, calls(&[("GetItem", 1), ("BatchGetItem", 1)]));
        } else {
            // ten events since the switch: the table's marks are older than the window
            assert_eq!(marks, vec![false]);
            assert_eq!(n, calls(&[("GetItem", 1)]), "a full window: no table read");
        }
    }
    let (r, n) = counter.measure(item.load_for_event("sw-1", "new-0")).await;
    assert!(r.expect("load").1);
    assert_eq!(n, calls(&[("GetItem", 1)]));

    // and back: the table layout reads the table only (documented: drain the queue first)
    let (loaded, marks) = table
        .load_for_events("sw-1", &["old-1", "new-9"])
        .await
        .expect("table load");
    assert!(loaded.is_some());
    assert_eq!(marks, vec![true, false]);
}

/// A look at the state index costs what it finds: while the index is small, one `Scan`
/// page reads it whole; past [`SMALL_STATE_INDEX`] entries, one `Query` per shard of each
/// state asked about. Both answer the same.
#[tokio::test]
async fn a_small_state_index_is_read_whole_and_a_large_one_by_shards() {
    use stm_store::dynamodb::{SMALL_STATE_INDEX, STATE_SHARDS};
    let (store, counter) = counted_store(&stm_testkit::unique_prefix("looks")).await;
    let mut committed = 0;
    for (i, path) in ["Cart", "Cart", "Fulfil.Payment", "Cart", "Confirmed"]
        .iter()
        .enumerate()
    {
        let mut e = Execution::new(format!("look-{i}"), "Checkout");
        e.status = stm_core::Status::Running;
        e.active_path = Some((*path).to_string());
        store.save(&mut e).await.expect("save");
        committed += 1;
    }
    let mut other = Execution::new("look-other", "Order");
    other.status = stm_core::Status::Running;
    other.active_path = Some("Cart".into());
    store.save(&mut other).await.expect("save");
    let paths = vec!["Cart".to_string(), "Fulfil.Payment".to_string()];
    let ids = |found: Vec<stm_store::InState>| -> Vec<(String, String)> {
        found.into_iter().map(|f| (f.id, f.path)).collect()
    };
    let expected = vec![
        ("look-0".to_string(), "Cart".to_string()),
        ("look-1".to_string(), "Cart".to_string()),
        ("look-3".to_string(), "Cart".to_string()),
        ("look-2".to_string(), "Fulfil.Payment".to_string()),
    ];

    let (found, n) = counter.measure(store.in_states("Checkout", &paths, None)).await;
    assert_eq!(ids(found.expect("look")), expected);
    assert_eq!(
        n,
        calls(&[("Scan", 1)]),
        "{committed} entries, under {SMALL_STATE_INDEX}"
    );

    // the same look when the index holds more than a small one
    let store = store.with_small_state_index(committed);
    let (found, n) = counter.measure(store.in_states("Checkout", &paths, None)).await;
    assert_eq!(ids(found.expect("look")), expected);
    assert_eq!(
        n,
        calls(&[("Query", 2 * u64::from(STATE_SHARDS)), ("Scan", 1)]),
        "{} entries, past a small index of {committed}",
        committed + 1
    );
}
