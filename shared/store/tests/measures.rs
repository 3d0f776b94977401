//! Measures (printed, not asserted): DynamoDB calls per store operation as counted by the
//! SDK interceptor, next to harel 0.9.0's count, and the size of a typical execution item.
//!
//! ```text
//! cargo test -p stm-store --test measures -- --ignored --nocapture
//! ```
//!
//! And one that is asserted, on every `cargo test`: `cost_inputs_match_the_code` measures
//! the items the store writes (and the constants of the timer sweep) that
//! `bench/cost_model.py` takes from `bench/cost_inputs.json`, and fails when the file and
//! the code disagree.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::json;
use stm_aws::CallCounter;
use stm_core::{Event, Execution, Map, Status};
use stm_store::dynamodb::{DEFAULT_TIMER_FULL_SCAN_INTERVAL, RECENT_ATTRIBUTE, TIMER_SHARDS};
use stm_store::{Commit, CreateOptions, DedupeMarks, DynamoDbStore, ExecutionStore, SpawnIntent, TimerOp};

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
    println!("DynamoDB calls per store operation (counted by the SDK interceptor; harel = harel 0.9.0)");
    println!("{:<48} {:>5}  {:<44} harel", "operation", "calls", "detail");
    println!("{}", "-".repeat(120));
    for (name, calls, seed) in &rows {
        let total: u64 = calls.values().sum();
        println!("{name:<48} {total:>5}  {:<44} {seed}", fmt(calls));
    }
    println!();
    println!(
        "worker, per processed event: load_for_event + commit = 2 calls; with emits 2 (seed 3: its seq counter); with trace 2 (seed 3)"
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
    rows.push(("commit + emit + mark".into(), n, "TransactWriteItems (3 items)"));
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

    // as a worker's next commit writes it: saved once, so its `trace_idx` is known (the
    // figures bench/cost_inputs.json holds, asserted by `cost_inputs_match_the_code`)
    let mut typical = typical_execution("m-typ");
    store.save(&mut typical).await.expect("insert");
    let mut on_item = typical_execution("m-typ");
    item_store.save(&mut on_item).await.expect("insert");
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
    let item_bytes = item_store.execution_item_size(&on_item);
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
        "  outbox item (event)  {:>6} bytes at most (its seq counted at 21 bytes, as the limit check does)",
        ev.len() + 3 + 21 + 9 + 4 + 5
    );
}

// ------------------------------------------------------------------ bench/cost_inputs.json

/// The typical execution's id, as `print_calls_and_bytes` measures it (the figures in docs/performance.md).
const TYPICAL_ID: &str = "m-typ";

/// An event id of the shape the runtime gives one (`stm_core::execution::new_id`: 32 hex
/// digits), `n` in the last digits.
fn event_id(n: usize) -> String {
    format!("{n:032x}")
}

/// An item's size by DynamoDB's rules, the same as the store's own (`dynamodb/item.rs`
/// `item_size`, which is crate-private): each attribute name's UTF-8 length plus its
/// value's (strings and binaries by length, a number 1 byte per 2 digits + 1, at most 21,
/// a boolean or null 1, a list or map 3 + 1 per element). The test checks it against the
/// store's [`DynamoDbStore::execution_item_size`] on the execution item.
/// <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html>
fn ddb_size(item: &HashMap<String, AttributeValue>) -> usize {
    fn number(n: &str) -> usize {
        let digits = n
            .chars()
            .take_while(|c| *c != 'e' && *c != 'E')
            .filter(char::is_ascii_digit)
            .count();
        (digits.div_ceil(2) + 1).min(21)
    }
    fn value(v: &AttributeValue) -> usize {
        match v {
            AttributeValue::S(t) => t.len(),
            AttributeValue::N(n) => number(n),
            AttributeValue::B(b) => b.as_ref().len(),
            AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
            AttributeValue::L(items) => 3 + items.iter().map(|i| 1 + value(i)).sum::<usize>(),
            AttributeValue::M(map) => 3 + map.iter().map(|(k, v)| 1 + k.len() + value(v)).sum::<usize>(),
            AttributeValue::Ss(items) => items.iter().map(String::len).sum(),
            AttributeValue::Ns(items) => items.iter().map(|n| number(n)).sum(),
            AttributeValue::Bs(items) => items.iter().map(|b| b.as_ref().len()).sum(),
            other => panic!("an attribute type the size rules do not cover: {other:?}"),
        }
    }
    item.iter().map(|(k, v)| k.len() + value(v)).sum()
}

/// Every item of table `name` (`{prefix}_{name}`), as DynamoDB holds it.
async fn raw_items(store: &DynamoDbStore, name: &str) -> Vec<HashMap<String, AttributeValue>> {
    let out = store
        .client()
        .scan()
        .table_name(store.table_name(name))
        .consistent_read(true)
        .send()
        .await
        .unwrap_or_else(|e| panic!("scan {name}: {e:?}"));
    out.items().to_vec()
}

/// The one item of table `name`, with its size.
async fn one_item(store: &DynamoDbStore, name: &str) -> (HashMap<String, AttributeValue>, usize) {
    let items = raw_items(store, name).await;
    assert_eq!(items.len(), 1, "one item in {name}: {items:?}");
    let item = items.into_iter().next().unwrap_or_default();
    let size = ddb_size(&item);
    (item, size)
}

/// A trace step of the shape the runtime's driver writes (`stm-runtime`'s `driver/step.rs`
/// `trace_step`): the event, the paths, the actions, the context after the step and the
/// time.
fn typical_trace_step(exe: &Execution) -> Map {
    obj(json!({
        "event_kind": "PaymentReceived",
        "event_data": {"amount": 45.48, "ref": "pay-88412"},
        "from_path": "root.fulfilment.awaiting_payment",
        "to_path": exe.active_path,
        "actions": ["record_payment"],
        "context_out": exe.context,
        "timestamp": 1_700_000_042.5,
    }))
}

/// What `bench/cost_model.py` takes from the store's code, measured here on the items the
/// store writes to DynamoDB (moto) for the typical execution, as the template deploys it
/// (`DedupeMarks` table with marks kept `ProcessedRetentionDays`, or item; trace on for the
/// trace row). The figures must equal `bench/cost_inputs.json`'s: a change to the items
/// (an attribute, a field of the execution's JSON) fails here until the file, and with it
/// the cost model, says what the code writes.
#[tokio::test]
async fn cost_inputs_match_the_code() {
    let moto = stm_testkit::moto().await;
    let create = |tag: &str, dedupe_marks| CreateOptions {
        prefix: stm_testkit::unique_prefix(tag),
        dedupe_marks,
        // the template's default (StateIndex=false): the functions write no state entry
        state_index: false,
        ..CreateOptions::default()
    };
    // the template's default: marks in the table, kept 30 days (ProcessedRetentionDays)
    let store = DynamoDbStore::create_with(
        Some(moto.endpoint()),
        stm_testkit::REGION,
        create("cost_table", DedupeMarks::Table),
    )
    .await
    .expect("store")
    .with_processed_ttl(Duration::from_secs(30 * 86_400));
    let mut measured: BTreeMap<&str, u64> = BTreeMap::new();

    // the execution item of a worker's commit (a processed event), as written, and as the
    // store counts it before the write (its `trace_idx` known from the previous one)
    let typical = typical_execution(TYPICAL_ID);
    let mut e = typical.clone();
    store.save(&mut e).await.expect("insert");
    let counted = store.execution_item_size(&e);
    let c = Commit {
        processed_event_ids: vec![event_id(1)],
        ..Commit::default()
    };
    store.commit(&mut e, c).await.expect("commit + mark");
    let (item, written) = one_item(&store, "executions").await;
    assert_eq!(
        written, counted,
        "the execution item as written ({written} B: {item:?}) and as the store counts it ({counted} B) \
         differ: the size rules here and in dynamodb/item.rs have drifted"
    );
    measured.insert("execution_item_bytes", written as u64);
    // ... and its processed mark
    let (_, mark) = one_item(&store, "processed").await;
    measured.insert("processed_mark_bytes", mark as u64);

    // an event that emits, arms a timer and is traced: the outbox item, the timer item and
    // the trace row
    let c = Commit {
        emits: vec![(
            Some("m-pay".into()),
            Event::with_data(
                "PaymentRequested",
                obj(json!({"amount": 45.48, "ref": "ord-2024-000123"})),
            )
            .with_id(event_id(2)),
        )],
        processed_event_ids: vec![event_id(3)],
        timers: vec![TimerOp::Schedule {
            path: "root.fulfilment.awaiting_payment".into(),
            fire_at: 1_700_000_342.125,
        }],
        traces: vec![typical_trace_step(&e)],
        ..Commit::default()
    };
    store
        .commit(&mut e, c)
        .await
        .expect("commit + emit + timer + trace");
    let (_, outbox) = one_item(&store, "outbox").await;
    measured.insert("outbox_item_bytes", outbox as u64);
    let (_, timer) = one_item(&store, "timers").await;
    measured.insert("timer_item_bytes", timer as u64);
    let (_, trace) = one_item(&store, "trace").await;
    measured.insert("trace_item_bytes", trace as u64);

    // the cheapest layout: the window of the last events' ids on the execution item, at
    // its largest (after a full window of events)
    let item_store = DynamoDbStore::create_with(
        Some(moto.endpoint()),
        stm_testkit::REGION,
        create("cost_item", DedupeMarks::OnItem),
    )
    .await
    .expect("store");
    let mut e = typical.clone();
    item_store.save(&mut e).await.expect("insert");
    for n in 0..2 * stm_store::RECENT_MARKS {
        let c = Commit {
            processed_event_ids: vec![event_id(100 + n)],
            ..Commit::default()
        };
        item_store
            .commit(&mut e, c)
            .await
            .expect("commit + mark on the item");
    }
    let (item, _) = one_item(&item_store, "executions").await;
    let window = item
        .get(RECENT_ATTRIBUTE)
        .map(|v| RECENT_ATTRIBUTE.len() + ddb_size(&HashMap::from([(String::new(), v.clone())])))
        .expect("the `recent` attribute on the item");
    let counted = item_store.execution_item_size(&typical) - store.execution_item_size(&typical);
    assert_eq!(
        window, counted,
        "the full window as written ({window} B) and as the store counts it ({counted} B) differ"
    );
    measured.insert("dedupe_window_bytes", window as u64);

    // StateIndex=true: the state entry each commit writes on the execution item (the
    // state index's key and the time the state was entered), the same commit as above
    let indexed_store = DynamoDbStore::create_with(
        Some(moto.endpoint()),
        stm_testkit::REGION,
        CreateOptions {
            state_index: true,
            ..create("cost_state", DedupeMarks::Table)
        },
    )
    .await
    .expect("store");
    let mut e = typical.clone();
    indexed_store.save(&mut e).await.expect("insert");
    let c = Commit {
        processed_event_ids: vec![event_id(1)],
        ..Commit::default()
    };
    indexed_store.commit(&mut e, c).await.expect("commit + mark");
    let (_, indexed) = one_item(&indexed_store, "executions").await;
    measured.insert(
        "state_entry_bytes",
        (indexed - measured["execution_item_bytes"] as usize) as u64,
    );

    // the sweep's constants
    measured.insert("timer_shards", u64::from(TIMER_SHARDS));
    measured.insert(
        "timer_full_scan_minutes",
        DEFAULT_TIMER_FULL_SCAN_INTERVAL.as_secs() / 60,
    );

    // against the file
    let path = stm_testkit::repo_root().join("bench/cost_inputs.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let code = &file["code"];
    let wrong: Vec<String> = measured
        .iter()
        .filter(|(key, value)| code[**key].as_u64() != Some(**value))
        .map(|(key, value)| format!("  \"{key}\": {value}   (the file says {})", code[*key]))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} disagrees with the code; measured:\n{}\nupdate the file's \"code\" section to the measured \
         figures (then run `python3 bench/cost_model.py` and update the cost tables in docs/performance.md)",
        path.display(),
        wrong.join("\n")
    );
    let listed: Vec<&String> = code
        .as_object()
        .map(|m| m.keys().filter(|k| !measured.contains_key(k.as_str())).collect())
        .unwrap_or_default();
    assert!(
        listed.is_empty(),
        "{}'s \"code\" section has figures nothing measures: {listed:?}",
        path.display()
    );
}
