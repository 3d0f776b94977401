//! The timer sweep through the sparse due index (`stm_store::dynamodb::due`): the index and
//! its schema, items read per sweep (a count: the index reads what is due, not what
//! exists), the full-scan schedule shared across instances, the fallback when the table has
//! no index, and the timer contract checks on the index alone.
//!
//! The measure (100,000 pending timers, 10 due; printed, not asserted):
//!
//! ```text
//! cargo test -p stm-store --test timer_sweep -- --ignored --nocapture
//! ```
//!
//! (`STM_SWEEP_PENDING=1000000` for another size.)

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, KeySchemaElement, KeyType as DdbKeyType, PutRequest,
    ScalarAttributeType, WriteRequest,
};
use aws_sdk_dynamodb::Client;
use stm_core::Execution;
use stm_store::dynamodb::{
    table_specs, timer_shard, KeyType, Projection, SweepStats, TIMER_DUE_INDEX, TIMER_SHARDS,
    TIMER_SHARD_ATTRIBUTE,
};
use stm_store::{Commit, CreateOptions, DynamoDbStore, ExecutionStore, TimerOp};

/// 30 days after "now" in these tests: pending, not due.
const FAR: f64 = 1_700_000_000.0 + 30.0 * 86_400.0;
const NOW: f64 = 1_700_000_000.0;

async fn store_with(tag: &str, interval: Option<Duration>) -> DynamoDbStore {
    let moto = stm_testkit::moto().await;
    let options = CreateOptions {
        prefix: stm_testkit::unique_prefix(tag),
        connect_attempts: 5,
        timer_full_scan_interval: interval,
        ..CreateOptions::default()
    };
    DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("store")
}

/// `n` pending timers written the way our commit writes them (with `due_shard`), 25 per
/// `BatchWriteItem`, `parallel` batches in flight.
async fn seed_pending(client: &Client, table: &str, n: usize, parallel: usize) {
    let mut batches: Vec<Vec<WriteRequest>> = Vec::new();
    for chunk_start in (0..n).step_by(25) {
        let batch = (chunk_start..n.min(chunk_start + 25))
            .map(|i| {
                let id = format!("pending-{i:07}");
                let path = "root.waiting.timeout";
                let item = HashMap::from([
                    ("execution_id".to_string(), AttributeValue::S(id.clone())),
                    ("path".to_string(), AttributeValue::S(path.into())),
                    (
                        "fire_at".to_string(),
                        AttributeValue::N(format!("{}", FAR + i as f64)),
                    ),
                    (
                        TIMER_SHARD_ATTRIBUTE.to_string(),
                        AttributeValue::S(timer_shard(&id, path)),
                    ),
                ]);
                WriteRequest::builder()
                    .put_request(PutRequest::builder().set_item(Some(item)).build().expect("put"))
                    .build()
            })
            .collect();
        batches.push(batch);
    }
    let per_task = batches.len().div_ceil(parallel.max(1)).max(1);
    let mut tasks = tokio::task::JoinSet::new();
    while !batches.is_empty() {
        let mine: Vec<_> = batches.drain(..per_task.min(batches.len())).collect();
        let client = client.clone();
        let table = table.to_string();
        tasks.spawn(async move {
            for batch in mine {
                let mut pending = HashMap::from([(table.clone(), batch)]);
                while !pending.is_empty() {
                    let out = client
                        .batch_write_item()
                        .set_request_items(Some(pending))
                        .send()
                        .await
                        .expect("batch_write_item");
                    pending = out.unprocessed_items().cloned().unwrap_or_default();
                    pending.retain(|_, v| !v.is_empty());
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("seeding task");
    }
}

/// `due` timers committed through the store (the real write path), due at or before NOW.
async fn commit_due(store: &DynamoDbStore, due: usize) {
    for i in 0..due {
        let mut e = Execution::new(format!("due-{i:03}"), "def");
        store
            .commit(
                &mut e,
                Commit {
                    timers: vec![
                        TimerOp::Schedule {
                            path: "root.a".into(),
                            fire_at: NOW - 100.0 + i as f64,
                        },
                        // and one pending timer of the same execution
                        TimerOp::Schedule {
                            path: "root.b".into(),
                            fire_at: FAR,
                        },
                    ],
                    ..Commit::default()
                },
            )
            .await
            .expect("commit");
    }
}

#[test]
fn table_specs_declare_the_due_index() {
    let specs = table_specs();
    let timers = specs.iter().find(|t| t.name == "timers").expect("timers");
    assert_eq!(timers.indexes.len(), 1);
    let index = timers.indexes[0];
    assert_eq!(index.name, TIMER_DUE_INDEX);
    let keys: Vec<(&str, &str)> = index.keys().iter().map(|k| (k.name, k.ty.as_str())).collect();
    assert_eq!(keys, vec![(TIMER_SHARD_ATTRIBUTE, "S"), ("fire_at", "N")]);
    assert_eq!(index.projection, Projection::KeysOnly);
    assert_eq!(index.projection.as_str(), "KEYS_ONLY");
    let attrs: Vec<(&str, &str)> = timers
        .attribute_definitions()
        .iter()
        .map(|k| (k.name, k.ty.as_str()))
        .collect();
    assert_eq!(
        attrs,
        vec![
            ("execution_id", "S"),
            ("path", "S"),
            (TIMER_SHARD_ATTRIBUTE, "S"),
            ("fire_at", "N")
        ]
    );
    // the one other index: the executions' state index (`stm list --in`)
    for other in specs
        .iter()
        .filter(|t| t.name != "timers" && t.name != "executions")
    {
        assert!(other.indexes.is_empty(), "{}", other.name);
        assert_eq!(other.attribute_definitions(), other.keys(), "{}", other.name);
    }
    let executions = specs.iter().find(|t| t.name == "executions").expect("executions");
    let names: Vec<&str> = executions.indexes.iter().map(|i| i.name).collect();
    assert_eq!(names, [stm_store::dynamodb::STATE_INDEX]);
    assert!(matches!(index.hash.ty, KeyType::String));
}

#[test]
fn shards_are_stable_and_spread() {
    // the documented formula: sha256(e \0 p)[..8] big-endian mod TIMER_SHARDS
    assert_eq!(timer_shard("e-1", "root.a"), timer_shard("e-1", "root.a"));
    let mut counts = vec![0usize; TIMER_SHARDS as usize];
    for i in 0..1_000 * TIMER_SHARDS as usize {
        let shard = timer_shard(&format!("exe-{i}"), "root.wait");
        let k: usize = shard
            .strip_prefix("due#")
            .and_then(|k| k.parse().ok())
            .expect("due#k");
        counts[k] += 1;
    }
    // 1,000 expected per shard; a uniform hash stays well within ±20 %
    assert!(counts.iter().all(|c| (800..1200).contains(c)), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_tables_creates_the_sparse_due_index() {
    let store = store_with("gsi", None).await;
    let out = store
        .client()
        .describe_table()
        .table_name(store.table_name("timers"))
        .send()
        .await
        .expect("describe");
    let table = out.table().expect("table");
    let gsi = table.global_secondary_indexes();
    assert_eq!(gsi.len(), 1);
    assert_eq!(gsi[0].index_name(), Some(TIMER_DUE_INDEX));
    let keys: Vec<(&str, &DdbKeyType)> = gsi[0]
        .key_schema()
        .iter()
        .map(|k| (k.attribute_name(), k.key_type()))
        .collect();
    assert_eq!(
        keys,
        vec![
            (TIMER_SHARD_ATTRIBUTE, &DdbKeyType::Hash),
            ("fire_at", &DdbKeyType::Range)
        ]
    );
    assert_eq!(
        gsi[0]
            .projection()
            .and_then(|p| p.projection_type())
            .map(|p| p.as_str()),
        Some("KEYS_ONLY")
    );
    let mut attrs: Vec<(&str, &str)> = table
        .attribute_definitions()
        .iter()
        .map(|a| (a.attribute_name(), a.attribute_type().as_str()))
        .collect();
    attrs.sort();
    assert_eq!(
        attrs,
        vec![
            (TIMER_SHARD_ATTRIBUTE, "S"),
            ("execution_id", "S"),
            ("fire_at", "N"),
            ("path", "S")
        ]
    );

    // our timer items carry the shard, in the commit's put
    let mut e = Execution::new("gsi-1", "def");
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
        .expect("commit");
    let item = store
        .client()
        .get_item()
        .table_name(store.table_name("timers"))
        .key("execution_id", AttributeValue::S("gsi-1".into()))
        .key("path", AttributeValue::S("root.t".into()))
        .send()
        .await
        .expect("get")
        .item()
        .cloned()
        .expect("timer item");
    let mut names: Vec<&str> = item.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        vec![TIMER_SHARD_ATTRIBUTE, "execution_id", "fire_at", "path"]
    );
    assert_eq!(
        item.get(TIMER_SHARD_ATTRIBUTE),
        Some(&AttributeValue::S(timer_shard("gsi-1", "root.t")))
    );
}

/// The behaviour the index exists for, as a count: 5,000 pending timers and 10 due; the
/// index sweep reads at most 2 × 10 items, the seed's scan reads all 5,020.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_sweep_reads_what_is_due_not_what_exists() {
    let store = store_with("sweep5k", None).await;
    // the commits first: moto snapshots a whole table per transaction
    commit_due(&store, 10).await;
    seed_pending(store.client(), &store.table_name("timers"), 5_000, 4).await;

    let (due, stats) = store.due_timers_indexed(NOW).await.expect("index sweep");
    assert_eq!(due.len(), 10, "{due:?}");
    assert!(
        due.windows(2).all(|w| w[0].fire_at <= w[1].fire_at),
        "earliest first"
    );
    assert!(due.iter().all(|t| t.path == "root.a"));
    assert!(!stats.full_scan);
    assert!(
        stats.items_read <= 2 * 10,
        "the index sweep read {} items for 10 due: {stats:?}",
        stats.items_read
    );
    assert_eq!(
        stats.requests, TIMER_SHARDS,
        "one query per shard (one page each)"
    );

    // the trait's path is the index (no full scan configured)
    let (again, stats) = store.due_timers_with_stats(NOW).await.expect("sweep");
    assert_eq!((again, stats.full_scan), (due.clone(), false));
    assert_eq!(store.due_timers(NOW).await.expect("due"), due);

    // the seed's scan finds the same, reading everything
    let (scanned, stats) = store.due_timers_full_scan(NOW).await.expect("full scan");
    assert_eq!(scanned, due);
    assert_eq!(stats.items_read, 5_000 + 20, "{stats:?}");
}

/// The full scan runs on the first sweep, then not again before the interval, across
/// instances (the claim item); zero means every sweep, `None` never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_scan_schedule_is_shared_across_instances() {
    let a = store_with("sched", Some(Duration::from_secs(600))).await;
    commit_due(&a, 2).await;
    let first: SweepStats = a.due_timers_with_stats(NOW).await.expect("sweep").1;
    assert!(first.full_scan, "the first sweep ever scans: {first:?}");
    let second = a.due_timers_with_stats(NOW).await.expect("sweep").1;
    assert!(!second.full_scan, "then the index: {second:?}");

    // a new instance (a cold start) on the same tables does not rescan: the claim is taken
    let b = DynamoDbStore::new(a.client().clone())
        .with_prefix(a.prefix())
        .expect("prefix")
        .with_timer_full_scan_interval(Some(Duration::from_secs(600)));
    let (due, cold) = b.due_timers_with_stats(NOW).await.expect("sweep");
    assert!(!cold.full_scan, "{cold:?}");
    assert_eq!(due.len(), 2);

    // once the interval has passed (a short one here), one instance scans again
    let c = DynamoDbStore::new(a.client().clone())
        .with_prefix(a.prefix())
        .expect("prefix")
        .with_timer_full_scan_interval(Some(Duration::from_millis(300)));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(c.due_timers_with_stats(NOW).await.expect("sweep").1.full_scan);
    assert!(!c.due_timers_with_stats(NOW).await.expect("sweep").1.full_scan);

    let every = DynamoDbStore::new(a.client().clone())
        .with_prefix(a.prefix())
        .expect("prefix")
        .with_timer_full_scan_interval(Some(Duration::ZERO));
    for _ in 0..2 {
        assert!(every.due_timers_with_stats(NOW).await.expect("sweep").1.full_scan);
    }
    let never = DynamoDbStore::new(a.client().clone())
        .with_prefix(a.prefix())
        .expect("prefix")
        .with_timer_full_scan_interval(None);
    assert!(!never.due_timers_with_stats(NOW).await.expect("sweep").1.full_scan);
}

/// A `timers` table without the index (harel's schema): every sweep is the full scan and
/// finds everything, ours included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_without_the_index_is_swept_by_the_full_scan() {
    let moto = stm_testkit::moto().await;
    let prefix = stm_testkit::unique_prefix("noindex");
    let config = stm_aws::sdk_config(Some(moto.endpoint()), stm_testkit::REGION).await;
    let client = Client::new(&config);
    // harel's seven tables, no index (the seed's create_table)
    for spec in table_specs() {
        let mut req = client
            .create_table()
            .table_name(spec.table_name(&prefix))
            .billing_mode(aws_sdk_dynamodb::types::BillingMode::PayPerRequest);
        for (i, k) in spec.keys().iter().enumerate() {
            req = req
                .key_schema(
                    KeySchemaElement::builder()
                        .attribute_name(k.name)
                        .key_type(if i == 0 {
                            DdbKeyType::Hash
                        } else {
                            DdbKeyType::Range
                        })
                        .build()
                        .expect("key"),
                )
                .attribute_definitions(
                    AttributeDefinition::builder()
                        .attribute_name(k.name)
                        .attribute_type(match k.ty {
                            KeyType::String => ScalarAttributeType::S,
                            KeyType::Number => ScalarAttributeType::N,
                        })
                        .build()
                        .expect("attr"),
                );
        }
        req.send().await.expect("create_table");
    }
    // detected at check time
    let checked = DynamoDbStore::create_with(
        Some(moto.endpoint()),
        stm_testkit::REGION,
        CreateOptions {
            prefix: prefix.clone(),
            create_schema: false,
            connect_attempts: 5,
            timer_full_scan_interval: None,
            ..CreateOptions::default()
        },
    )
    .await
    .expect("harel's tables pass the check");
    commit_due(&checked, 3).await;
    let (due, stats) = checked.due_timers_with_stats(NOW).await.expect("sweep");
    assert_eq!(due.len(), 3);
    assert!(stats.full_scan && stats.index_missing, "{stats:?}");

    // and found missing by a query (a store that never checked)
    let unchecked = DynamoDbStore::new(client.clone())
        .with_prefix(&prefix)
        .expect("prefix")
        .with_timer_full_scan_interval(None);
    let (due, stats) = unchecked.due_timers_with_stats(NOW).await.expect("sweep");
    assert_eq!(due.len(), 3);
    assert!(stats.full_scan && stats.index_missing, "{stats:?}");
    let (_, stats) = unchecked.due_timers_with_stats(NOW).await.expect("sweep");
    assert!(stats.full_scan && stats.index_missing, "remembered: {stats:?}");
    assert!(unchecked.due_timers_indexed(NOW).await.is_err());
}

async fn index_only(trace_max: usize) -> DynamoDbStore {
    let moto = stm_testkit::moto().await;
    let options = CreateOptions {
        prefix: stm_testkit::unique_prefix("contract_idx"),
        trace_max,
        connect_attempts: 5,
        timer_full_scan_interval: None,
        ..CreateOptions::default()
    };
    DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("store over moto")
}

/// The timer checks of the contract with the full scan off: the index alone satisfies them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timer_contract_on_the_index_alone() {
    stm_store::contract::due_timers_earliest_first(index_only).await;
    stm_store::contract::timer_cancel_and_collapse_in_one_commit(index_only).await;
    stm_store::contract::guarded_delete_survives_reschedule(index_only).await;
    stm_store::contract::failed_cas_writes_nothing(index_only).await;
}

/// The measure: items read per sweep, index vs the seed's full scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measure: run with --ignored --nocapture"]
async fn measure_sweep_cost() {
    // zero or a typo fails: a measure of no pending timers, or of the default size when
    // another was asked for, would print numbers that answer nothing
    let pending = stm_testkit::env_count("STM_SWEEP_PENDING", 100_000);
    let due_count = 10;
    let store = store_with("measure_sweep", None).await;
    // the commits first: moto snapshots a whole table per transaction
    commit_due(&store, due_count).await;
    let t = Instant::now();
    seed_pending(store.client(), &store.table_name("timers"), pending, 8).await;
    let seeded_in = t.elapsed();
    let total = pending + 2 * due_count;

    let t = Instant::now();
    let (by_index, index) = store.due_timers_indexed(NOW).await.expect("index");
    let index_ms = t.elapsed().as_millis();
    let t = Instant::now();
    let (by_scan, scan) = store.due_timers_full_scan(NOW).await.expect("scan");
    let scan_ms = t.elapsed().as_millis();
    assert_eq!(by_index, by_scan);
    assert_eq!(by_index.len(), due_count);

    // DynamoDB's bill, estimated from item sizes (attribute names + values; a number ~
    // digits / 2 + 1 bytes): a consistent Scan is 1 RRU per 4 KB read, an eventually
    // consistent Query 0.5 RRU per 4 KB, at least 0.5 per request
    let size = |id: &str, path: &str| {
        let shard = timer_shard(id, path);
        12 + id.len() + 4 + path.len() + 7 + 7 + TIMER_SHARD_ATTRIBUTE.len() + shard.len()
    };
    let table_bytes: usize = (0..pending)
        .map(|i| size(&format!("pending-{i:07}"), "root.waiting.timeout"))
        .sum::<usize>()
        + (0..due_count)
            .map(|i| size(&format!("due-{i:03}"), "root.a") + size(&format!("due-{i:03}"), "root.b"))
            .sum::<usize>();
    let scan_rru = table_bytes.div_ceil(4096) as f64;
    let mut per_shard: HashMap<String, usize> = HashMap::new();
    for t in &by_index {
        *per_shard
            .entry(timer_shard(&t.execution_id, &t.path))
            .or_default() += size(&t.execution_id, &t.path);
    }
    let index_rru: f64 = (0..TIMER_SHARDS)
        .map(|k| {
            let bytes = per_shard.get(&format!("due#{k}")).copied().unwrap_or(0);
            0.5 * bytes.div_ceil(4096).max(1) as f64
        })
        .sum();

    println!();
    println!(
        "timer sweep, {total} timers in the table ({pending} seeded pending + {due_count} executions × \
         (1 due + 1 pending)), {due_count} due; moto 5.2.5 (seeded in {:.1} s)",
        seeded_in.as_secs_f64()
    );
    println!(
        "{:<32} {:>8} {:>12} {:>9} {:>11} {:>10} {:>13}",
        "sweep", "requests", "items read", "returned", "read / due", "est. RRU", "wall (moto)"
    );
    println!("{}", "-".repeat(102));
    for (name, s, rru, ms) in [
        ("due index (16 shard queries)", index, index_rru, index_ms),
        ("seed full scan (filtered)", scan, scan_rru, scan_ms),
    ] {
        println!(
            "{name:<32} {:>8} {:>12} {:>9} {:>11.1} {:>10.1} {:>10} ms",
            s.requests,
            s.items_read,
            s.items_returned,
            s.items_read as f64 / due_count as f64,
            rru,
            ms
        );
    }
    println!();
    println!(
        "items read = ScannedCount summed over the sweep's responses (what DynamoDB reads and bills); \
         target: index ≤ 2 × due"
    );
    println!(
        "wall times are moto's (its GSI query walks the whole table in Python), not DynamoDB's: \
         there a shard query reads only its due entries"
    );
}
