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

use std::sync::Arc;
use std::time::Instant;

use stm_core::{ChildState, Execution, Map, Status, Value};
use stm_runtime::purge::{self, JsonlArchive, Progress, PurgeOptions};
use stm_store::{CallCounter, Commit, CreateOptions, DynamoDbStore, ExecutionStore};

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

async fn seed_tree(store: &DynamoDbStore, root_id: &str) {
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
    for exe in all {
        let mut step = Map::new();
        step.insert("event_kind".into(), Value::from("Finished"));
        let commit = Commit {
            processed_event_id: Some(format!("{}-ev", exe.id)),
            trace: Some(step),
            ..Commit::default()
        };
        // moto slows down as the tables grow: a timed-out commit is tried again, and one
        // that had applied after all is found by its conflict
        for attempt in 1.. {
            match store.commit(&mut exe.clone(), commit.clone()).await {
                Ok(_) => break,
                Err(e) if e.is_conflict() => break,
                Err(e) if attempt < 10 => eprintln!("seed {}: {e}; again", exe.id),
                Err(e) => panic!("seed {}: {e}", exe.id),
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
    let moto = stm_testkit::moto().await;
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
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for _ in 0..4 {
            let (store, next) = (store.clone(), next.clone());
            tasks.spawn(async move {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if i >= trees {
                        break;
                    }
                    seed_tree(&store, &format!("t{i:06}")).await;
                }
            });
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
        let report = stm_store::aws::as_function(
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
