//! `purge_finished` at scale on moto: N finished trees (a DONE root with two DONE region
//! children, each member with a trace step and a processed mark) seeded, then purged with
//! a JSONL archive. Prints, per N: the seconds, the DynamoDB calls per tree (counted at the
//! SDK), and how much the resident memory grew while purging (sampled after every page):
//! bounded memory means that figure does not grow with N.
//!
//! ```text
//! cargo bench -p stm-runtime --features aws --bench purge_scale          # N = 200, 1000
//! PURGE_TREES=1000,10000 cargo bench -p stm-runtime --features aws --bench purge_scale
//! ```
//! (`bench/purge-scale.sh` runs the second.)

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use stm_aws::CallCounter;
use stm_core::{ChildState, Execution, Status};
use stm_runtime::purge::{self, JsonlArchive, Progress, PurgeOptions};
use stm_store::{CreateOptions, DynamoDbStore, ExecutionStore};

const FINISHED_AT: f64 = 1_700_000_000.0;

/// Resident memory of this process, bytes (`VmRSS` in /proc/self/status).
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn member(id: &str, parent: Option<&str>) -> Execution {
    let mut exe = Execution::new(id, "Fork");
    exe.status = Status::Done;
    exe.outcome = Some("success".into());
    exe.active_path = Some("Done".into());
    exe.parent_id = parent.map(str::to_string);
    exe.created_at = Some(FINISHED_AT - 10.0);
    exe.updated_at = Some(FINISHED_AT);
    exe.finished_at = Some(FINISHED_AT);
    exe
}

/// The items of one tree as the store writes them: each member's execution item (its
/// `data`, `version`, `definition_id`), a processed mark and a trace step.
fn tree_items(root_id: &str, with_rows: bool) -> Vec<(&'static str, HashMap<String, AttributeValue>)> {
    let mut root = member(root_id, None);
    let children: Vec<String> = ["Work.Billing", "Work.Packing"]
        .iter()
        .map(|path| format!("{root_id}:{path}:0"))
        .collect();
    for (child, path) in children.iter().zip(["Work.Billing", "Work.Packing"]) {
        let mut state = ChildState::new(path);
        state.finished = true;
        root.children.insert(child.clone(), state);
    }
    let mut all = vec![root];
    all.extend(children.iter().map(|c| member(c, Some(root_id))));
    let s = |v: &str| AttributeValue::S(v.to_string());
    let n = |v: i64| AttributeValue::N(v.to_string());
    let mut items = Vec::new();
    for mut exe in all {
        exe.version = 1;
        items.push((
            "executions",
            HashMap::from([
                ("id".to_string(), s(&exe.id)),
                ("data".to_string(), s(&exe.to_json())),
                ("version".to_string(), n(1)),
                ("definition_id".to_string(), s(&exe.definition_id)),
            ]),
        ));
        if !with_rows {
            continue;
        }
        items.push((
            "processed",
            HashMap::from([
                ("execution_id".to_string(), s(&exe.id)),
                ("event_id".to_string(), s(&format!("{}-ev", exe.id))),
            ]),
        ));
        items.push((
            "trace",
            HashMap::from([
                ("execution_id".to_string(), s(&exe.id)),
                ("idx".to_string(), n(0)),
                (
                    "entry".to_string(),
                    s("{\"event_kind\": \"Finished\", \"index\": 0}"),
                ),
            ]),
        ));
    }
    items
}

/// Seed trees `first..last` with raw `BatchWriteItem`s (25 items each, the unprocessed
/// re-sent): the store's own commits take a transaction per member, which on moto made
/// seeding 10,000 trees take most of an hour.
async fn seed_trees(store: &DynamoDbStore, first: usize, last: usize, with_rows: bool) {
    let mut pending: Vec<(&'static str, HashMap<String, AttributeValue>)> = Vec::new();
    for i in first..last {
        pending.extend(tree_items(&format!("t{i:06}"), with_rows));
    }
    for chunk in pending.chunks(25) {
        let mut request: HashMap<String, Vec<WriteRequest>> = HashMap::new();
        for (table, item) in chunk {
            let put = PutRequest::builder()
                .set_item(Some(item.clone()))
                .build()
                .expect("put");
            request
                .entry(store.table_name(table))
                .or_default()
                .push(WriteRequest::builder().put_request(put).build());
        }
        let mut attempt = 0;
        while !request.is_empty() {
            attempt += 1;
            match store
                .client()
                .batch_write_item()
                .set_request_items(Some(request.clone()))
                .send()
                .await
            {
                Ok(out) => request = out.unprocessed_items().cloned().unwrap_or_default(),
                Err(e) if attempt < 10 => eprintln!("seeding: {e}; again"),
                Err(e) => panic!("seeding: {e}"),
            }
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sizes: Vec<usize> = std::env::var("PURGE_TREES")
        .unwrap_or_else(|_| "200,1000".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    // moto's Query walks every item of the table (not just the partition, as DynamoDB
    // does), so with each member's trace step and mark a run is quadratic in the trees on
    // moto: PURGE_ROWS=0 seeds the executions alone (the purge still queries their empty
    // partitions and scans outbox and spawns)
    let with_rows = std::env::var("PURGE_ROWS").map_or(true, |v| v != "0");
    let moto = stm_testkit::moto().await;
    println!(
        "member rows (a trace step and a processed mark each): {}\n",
        if with_rows { "yes" } else { "no" }
    );
    println!(
        "| trees | members | seed s | purge s | trees/s | DynamoDB calls/tree | RSS growth while purging |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for trees in sizes {
        let prefix = stm_testkit::unique_prefix("purgescale");
        let counter = CallCounter::new();
        let store = Arc::new(
            DynamoDbStore::create_with(
                Some(moto.endpoint()),
                stm_testkit::REGION,
                CreateOptions {
                    prefix,
                    ..CreateOptions::default()
                },
            )
            .await
            .expect("tables")
            .with_call_counter(counter.clone()),
        );
        let seeding = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        let per_task = trees.div_ceil(4);
        for task in 0..4 {
            let store = store.clone();
            let (first, last) = ((task * per_task).min(trees), ((task + 1) * per_task).min(trees));
            tasks.spawn(async move { seed_trees(&store, first, last, with_rows).await });
        }
        while tasks.join_next().await.is_some() {}
        let seed_seconds = seeding.elapsed().as_secs_f64();
        counter.reset();

        let archive_path =
            std::env::temp_dir().join(format!("stm-purge-scale-{}-{trees}.jsonl", std::process::id()));
        let mut archive = JsonlArchive::open(&archive_path).expect("archive");
        let options = PurgeOptions {
            older_than: 60.0,
            statuses: purge::PURGEABLE.to_vec(),
            include_undated: false,
            limit: None,
            dry_run: false,
            now: FINISHED_AT + 3600.0,
        };
        let baseline = rss_bytes();
        let mut peak = baseline;
        let started = Instant::now();
        let report = stm_aws::as_function(
            "purger",
            purge::purge_finished(store.as_ref(), &options, Some(&mut archive), &mut |p| {
                if let Progress::Page { .. } = p {
                    peak = peak.max(rss_bytes());
                }
            }),
        )
        .await
        .expect("purge");
        let seconds = started.elapsed().as_secs_f64();
        assert_eq!(report.purged, trees, "every tree purged: {report:?}");
        assert!(
            store.ids_with_prefix("t").await.expect("ids").is_empty(),
            "nothing left"
        );
        let _ = std::fs::remove_file(&archive_path);
        println!(
            "| {trees} | {} | {seed_seconds:.1} | {seconds:.1} | {:.0} | {:.1} | {:.1} MB |",
            trees * 3,
            trees as f64 / seconds,
            counter.total() as f64 / trees as f64,
            (peak.saturating_sub(baseline)) as f64 / 1e6,
        );
    }
}
