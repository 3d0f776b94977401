//! Measures (printed, not asserted): DynamoDB calls per store operation as counted by the
//! SDK interceptor, next to the seed's count, and the size of a typical execution item.
//!
//! ```text
//! cargo test -p stm-store --test measures -- --ignored --nocapture
//! ```

use std::collections::BTreeMap;

use serde_json::json;
use stm_core::{Event, Execution, Map, Status};
use stm_store::{
    CallCounter, Commit, CreateOptions, DedupeMarks, DynamoDbStore, ExecutionStore, SpawnIntent, TimerOp,
};

fn obj(v: serde_json::Value) -> Map {
    match v {
        serde_json::Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn fmt(calls: &BTreeMap<String, u64>) -> String {
    calls
        .iter()
        .map(|(op, n)| format!("{op}×{n}"))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// A typical running order workflow, as a worker commits it mid-flight.
fn typical_execution(id: &str) -> Execution {
    let mut e = Execution::new(id, "order_fulfilment");
    e.status = Status::Running;
    e.active_path = Some("root.fulfilment.awaiting_payment".into());
    e.history.insert(
        "root.fulfilment".into(),
        "root.fulfilment.awaiting_payment".into(),
    );
    e.history.insert("root".into(), "root.fulfilment".into());
    e.context = obj(json!({
        "order_id": "ord-2024-000123",
        "customer": {"id": "cus-77", "tier": "gold", "email": "someone@example.com"},
        "lines": [{"sku": "A-1", "qty": 2, "price": 19.99}, {"sku": "B-7", "qty": 1, "price": 5.5}],
        "total": 45.48,
        "currency": "EUR",
        "attempts": 1,
        "payment_ref": null,
        "shipping": {"method": "express", "address": {"city": "Lyon", "zip": "69001"}}
    }));
    e.processed_events = 4;
    e.created_at = Some(1_700_000_000.125);
    e.updated_at = Some(1_700_000_042.5);
    e.expires_at = Some(1_700_086_400.0);
    e
}

#[tokio::test]
#[ignore = "a measure: run with --ignored --nocapture"]
async fn print_calls_and_bytes() {
    let moto = stm_testkit::moto().await;
    let counter = CallCounter::new();
    let options = CreateOptions {
        prefix: stm_testkit::unique_prefix("measure"),
        call_counter: Some(counter.clone()),
        ..CreateOptions::default()
    };
    let store = DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("store");
    let mut rows: Vec<(String, BTreeMap<String, u64>, &str)> = Vec::new();

    let mut e = typical_execution("m-1");
    let (r, n) = counter.measure(store.save(&mut e)).await;
    r.expect("insert");
    rows.push((
        "create (commit, no side effects)".into(),
        n,
        "1 (TransactWriteItems)",
    ));

    let (r, n) = counter.measure(store.load("m-1")).await;
    e = r.expect("load").expect("stored");
    rows.push(("load".into(), n, "1"));

    let (r, n) = counter.measure(store.load_for_event("m-1", "ev-1")).await;
    r.expect("load_for_event");
    rows.push(("load_for_event".into(), n, "1"));

    let (r, n) = counter.measure(store.save(&mut e)).await;
    r.expect("save");
    rows.push(("commit, no side effects".into(), n, "1 (TransactWriteItems)"));

    let c = Commit {
        processed_event_ids: vec!["ev-1".into()],
        ..Commit::default()
    };
    let (r, n) = counter.measure(store.commit(&mut e, c)).await;
    r.expect("commit");
    rows.push(("commit + processed mark (worker common path)".into(), n, "1"));

    let c = Commit {
        emits: vec![
            (Some("m-2".into()), Event::new("PaymentRequested")),
            (None, Event::new("Audit")),
        ],
        processed_event_ids: vec!["ev-2".into()],
        timers: vec![TimerOp::Schedule {
            path: "root.fulfilment.awaiting_payment".into(),
            fire_at: 1.7e9,
        }],
        ..Commit::default()
    };
    let (r, n) = counter.measure(store.commit(&mut e, c)).await;
    r.expect("commit");
    rows.push(("commit + 2 emits + mark + timer".into(), n, "2"));

    let c = Commit {
        emits: vec![(None, Event::new("Forked"))],
        spawns: vec![SpawnIntent {
            child_id: "m-1/a".into(),
            root_path: "root.par.a".into(),
            context: Map::new(),
        }],
        ..Commit::default()
    };
    let (r, n) = counter.measure(store.commit(&mut e, c)).await;
    r.expect("commit");
    rows.push(("commit + emit + spawn".into(), n, "3"));

    let step = obj(json!({"event": "Paid", "from": "root.a", "to": "root.b", "actions": ["charge"]}));
    let c = Commit {
        processed_event_ids: vec!["ev-3".into()],
        traces: vec![step.clone()],
        ..Commit::default()
    };
    let (r, n) = counter.measure(store.commit(&mut e, c)).await;
    r.expect("commit");
    rows.push((
        "commit + trace (trace_idx known)".into(),
        n,
        "2 (Query + TransactWriteItems)",
    ));

    let (other, other_counter) = {
        let counter = CallCounter::new();
        let s = DynamoDbStore::new(store.client().clone())
            .with_prefix(store.prefix())
            .expect("prefix")
            .with_call_counter(counter.clone());
        (s, counter)
    };
    let mut fresh = e.clone();
    let (r, n) = other_counter
        .measure(other.commit(
            &mut fresh,
            Commit {
                traces: vec![step],
                ..Commit::default()
            },
        ))
        .await;
    r.expect("commit");
    rows.push(("commit + trace (no hint: harel-written item)".into(), n, "2"));

    let (r, n) = counter.measure(store.save(&mut e)).await;
    assert!(r.is_err_and(|err| err.is_conflict()));
    rows.push(("lost CAS, single put (found version)".into(), n, "2 (+ GetItem)"));
    let c = Commit {
        processed_event_ids: vec!["ev-4".into()],
        ..Commit::default()
    };
    let (r, n) = counter.measure(store.commit(&mut e, c)).await;
    assert!(r.is_err_and(|err| err.is_conflict()));
    rows.push(("lost CAS, transaction (found version)".into(), n, "2 (+ GetItem)"));

    let (r, n) = counter.measure(store.is_processed("m-1", "ev-1")).await;
    r.expect("is_processed");
    rows.push(("is_processed".into(), n, "1"));
    let (r, n) = counter.measure(store.pending_outbox()).await;
    r.expect("outbox");
    rows.push(("pending_outbox (small table)".into(), n, "1 Scan page"));
    let (r, n) = counter.measure(store.due_timers(2e9)).await;
    r.expect("timers");
    rows.push((
        "due_timers, scheduled full scan (claim + Scan)".into(),
        n,
        "1 Scan page per 1 MB of table",
    ));
    let (r, n) = counter.measure(store.due_timers(2e9)).await;
    r.expect("timers");
    rows.push((
        "due_timers, due index (one Query per shard)".into(),
        n,
        "1 Scan page per 1 MB of table",
    ));

    println!();
    println!("DynamoDB calls per store operation (counted by the SDK interceptor; seed = harel 0.9.0)");
    println!("{:<48} {:>5}  {:<44} seed", "operation", "calls", "detail");
    println!("{}", "-".repeat(120));
    for (name, calls, seed) in &rows {
        let total: u64 = calls.values().sum();
        println!("{name:<48} {total:>5}  {:<44} {seed}", fmt(calls));
    }
    println!();
    println!(
        "worker, per processed event: load_for_event + commit = 2 calls; with emits 3; with trace 2 (seed 3)"
    );

    // the same worker path with the marks on the execution item
    let counter = CallCounter::new();
    let options = CreateOptions {
        prefix: stm_testkit::unique_prefix("measure_item"),
        call_counter: Some(counter.clone()),
        dedupe_marks: DedupeMarks::OnItem,
        ..CreateOptions::default()
    };
    let item_store = DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("store");
    let mut rows: Vec<(String, BTreeMap<String, u64>, &str)> = Vec::new();
    let mut e = typical_execution("i-1");
    item_store.save(&mut e).await.expect("insert");
    let (r, n) = counter.measure(item_store.load_for_event("i-1", "ev-1")).await;
    e = r.expect("load_for_event").0.expect("stored");
    rows.push(("load_for_event".into(), n, "BatchGetItem (exe + mark)"));
    let c = Commit {
        processed_event_ids: vec!["ev-1".into()],
        ..Commit::default()
    };
    let (r, n) = counter.measure(item_store.commit(&mut e, c)).await;
    r.expect("commit");
    rows.push((
        "commit + processed mark (worker common path)".into(),
        n,
        "TransactWriteItems (2 items)",
    ));
    let (r, n) = counter
        .measure(item_store.load_for_events("i-1", &["ev-2", "ev-3", "ev-4"]))
        .await;
    e = r.expect("load_for_events").0.expect("stored");
    rows.push((
        "load_for_events (burst of 3)".into(),
        n,
        "BatchGetItem (exe + 3 marks)",
    ));
    let c = Commit {
        processed_event_ids: vec!["ev-2".into(), "ev-3".into(), "ev-4".into()],
        ..Commit::default()
    };
    let (r, n) = counter.measure(item_store.commit(&mut e, c)).await;
    r.expect("commit");
    rows.push((
        "commit + 3 marks (burst)".into(),
        n,
        "TransactWriteItems (4 items)",
    ));
    let c = Commit {
        emits: vec![(Some("i-2".into()), Event::new("PaymentRequested"))],
        processed_event_ids: vec!["ev-5".into()],
        ..Commit::default()
    };
    let (r, n) = counter.measure(item_store.commit(&mut e, c)).await;
    r.expect("commit");
    rows.push((
        "commit + emit + mark".into(),
        n,
        "UpdateItem + TransactWriteItems (3 items)",
    ));
    let (r, n) = counter.measure(item_store.is_processed("i-1", "ev-5")).await;
    r.expect("is_processed");
    rows.push(("is_processed".into(), n, "GetItem (processed)"));

    println!();
    println!("the same with DedupeMarks::OnItem (marks on the execution item); table = the default layout");
    println!("{:<48} {:>5}  {:<44} table", "operation", "calls", "detail");
    println!("{}", "-".repeat(120));
    for (name, calls, table) in &rows {
        let total: u64 = calls.values().sum();
        println!("{name:<48} {total:>5}  {:<44} {table}", fmt(calls));
    }

    let typical = typical_execution("m-typ");
    let data = typical.to_json();
    println!();
    println!("typical execution item (order workflow, 8 context fields, 2 history entries):");
    println!("  data JSON            {:>6} bytes", data.len());
    println!(
        "  item (DynamoDB size) {:>6} bytes  (incl. id, version, definition_id, commit_token, trace_idx)",
        store.execution_item_size(&typical)
    );
    println!(
        "  write units          {:>6}        (PutItem: 1 WCU per KB; a transaction bills 2 per KB per item)",
        store.execution_item_size(&typical).div_ceil(1024)
    );
    // capacity by AWS's rules
    // (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html): a strongly consistent read is 1
    // unit per 4 KB, a standard write 1 per KB, a transactional write 2 per KB per item
    let item_bytes = item_store.execution_item_size(&typical);
    let table_bytes = store.execution_item_size(&typical);
    let (rru_item, wru_item) = (item_bytes.div_ceil(4096), item_bytes.div_ceil(1024));
    let (rru_table, wru_table) = (
        table_bytes.div_ceil(4096) + 1,
        2 * (table_bytes.div_ceil(1024) + 1),
    );
    println!(
        "  plain event, table layout: {rru_table} RRU + {wru_table} WRU (BatchGetItem of exe + mark, 2-item transaction)"
    );
    println!(
        "  plain event, item layout:  {rru_item} RRU + {wru_item} WRU (one GetItem, one PutItem; item {item_bytes} bytes with `recent`)"
    );
    let ev = serde_json::to_string(&Event::with_data(
        "PaymentRequested",
        obj(json!({"amount": 45.48, "ref": "ord-2024-000123"})),
    ))
    .unwrap_or_default();
    println!(
        "  outbox item (event)  {:>6} bytes",
        ev.len() + 3 + 21 + 9 + 4 + 5
    );
}
