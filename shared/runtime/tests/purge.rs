//! `purge` and `purge_finished` (harel 0.9.0's semantics): whole finished trees only, the
//! archive line before any delete, children first and the root last, nothing left that
//! harel's DynamoDB store could still find, and a purge that dies at any call finished by
//! running it again.
//!
//! The trees are real: `Fork` (two orthogonal regions, each a child execution created from
//! a spawn intent) driven through the worker, relay and queue, with a trace step per event.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use common::hooked_store::{Call, HookedStore, StoreHook};
use common::{event, moto_parts, Stack, START};
use serde_json::json;
use stm_core::Status;
use stm_runtime::purge::{self, Archive, Bundle, JsonlArchive, Progress, PurgeError, PurgeOptions};
use stm_runtime::queue::SqsQueue;
use stm_runtime::MemoryQueue;
use stm_store::{ExecutionStore, MemoryStore, StoreError};

/// `Fork` executions `done` (driven to DONE) and `live` (its regions still waiting), plus
/// `cancelled`, terminated mid-way (a CANCELLED tree).
async fn seed(stack: &Stack, done: &[&str], live: &[&str], cancelled: &[&str]) {
    for id in done.iter().chain(live).chain(cancelled) {
        stack
            .control
            .create("Fork", None, Some(id))
            .await
            .expect("create");
    }
    stack.drain().await;
    for id in done.iter().chain(live).chain(cancelled) {
        stack.control.send(id, &event("Go", json!({}))).await.expect("Go");
    }
    stack.drain().await;
    for id in done {
        stack
            .control
            .send(id, &event("PaymentOk", json!({"receipt": "r-1"})))
            .await
            .expect("PaymentOk");
        stack
            .control
            .send(id, &event("Packed", json!({})))
            .await
            .expect("Packed");
    }
    for id in cancelled {
        stack.control.terminate(id).await.expect("terminate");
    }
    stack.drain().await;
    for id in done {
        assert_eq!(stack.load(id).await.status, Status::Done, "{id}");
    }
}

fn options(dry_run: bool) -> PurgeOptions {
    PurgeOptions {
        older_than: 60.0,
        statuses: purge::PURGEABLE.to_vec(),
        include_undated: false,
        limit: None,
        dry_run,
        now: START + 3600.0,
    }
}

/// Every id in the store that belongs to the tree of `root`.
async fn members(store: &dyn ExecutionStore, root: &str) -> BTreeSet<String> {
    let mut ids: BTreeSet<String> = store
        .ids_with_prefix(&format!("{root}:"))
        .await
        .expect("ids")
        .into_iter()
        .collect();
    if store.load(root).await.expect("load").is_some() {
        ids.insert(root.to_string());
    }
    ids
}

/// An archive that keeps the bundles in memory.
#[derive(Default)]
struct Kept(Vec<Bundle>);

impl Archive for Kept {
    fn keep(&mut self, bundle: &Bundle) -> Result<(), PurgeError> {
        self.0.push(bundle.clone());
        Ok(())
    }
}

/// The refusals, harel's words: a child, a tree not finished.
async fn refusals(stack: &Stack) {
    let store = stack.store.as_ref();
    let live = stack.load("live").await;
    let child = live.children.keys().next().expect("live has regions").clone();
    let err = purge::purge(store, &child, None).await.expect_err("a child");
    assert_eq!(
        err.to_string(),
        format!(
            "purge refused: '{child}' is a child of 'live' — purge its root, which removes the whole tree"
        )
    );
    let err = purge::purge(store, "live", None).await.expect_err("not finished");
    let text = err.to_string();
    assert!(
        text.starts_with("purge refused: not finished: live (RUNNING), live:"),
        "{text}"
    );
    assert!(!text.contains("dead letter"), "{text}");
    assert!(
        !purge::purge(store, "never-was", None).await.expect("absent"),
        "absent: false"
    );
    assert_eq!(members(store, "live").await.len(), 3, "a refusal deletes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_finished_removes_whole_finished_trees_in_memory() {
    let store: Arc<dyn ExecutionStore> = Arc::new(MemoryStore::new());
    let stack = Stack::traced(store.clone(), Arc::new(MemoryQueue::new(5)));
    seed(&stack, &["d1", "d2"], &["live"], &["c1"]).await;
    refusals(&stack).await;
    assert_eq!(
        members(store.as_ref(), "d1").await.len(),
        3,
        "the root and its two regions"
    );

    // a dry run reports and deletes nothing; too young is not a candidate
    let report = purge::purge_finished(store.as_ref(), &options(true), None, &mut |_| {})
        .await
        .expect("dry run");
    assert_eq!((report.purged, report.refused.len()), (3, 0));
    assert_eq!(members(store.as_ref(), "d1").await.len(), 3);
    let young = PurgeOptions {
        older_than: 7200.0,
        ..options(false)
    };
    let report = purge::purge_finished(store.as_ref(), &young, None, &mut |_| {})
        .await
        .expect("young");
    assert_eq!(report.purged, 0);

    let mut kept = Kept::default();
    let mut purged = Vec::new();
    let only_done = PurgeOptions {
        statuses: vec![Status::Done],
        ..options(false)
    };
    let report = purge::purge_finished(store.as_ref(), &only_done, Some(&mut kept), &mut |p| {
        if let Progress::Purged(id) = p {
            purged.push(id.to_string())
        }
    })
    .await
    .expect("purge");
    assert_eq!(
        (report.purged, purged.clone()),
        (2, vec!["d1".to_string(), "d2".to_string()])
    );
    for root in ["d1", "d2"] {
        assert!(
            members(store.as_ref(), root).await.is_empty(),
            "{root} left members"
        );
        assert!(store.read_trace(root).await.expect("trace").is_empty());
    }
    assert_eq!(
        members(store.as_ref(), "c1").await.len(),
        3,
        "CANCELLED was not asked for"
    );
    assert_eq!(
        members(store.as_ref(), "live").await.len(),
        3,
        "a live tree is untouched"
    );
    // the archive: the whole tree, root first, each member's trace
    assert_eq!(kept.0.len(), 2);
    let bundle = kept.0.iter().find(|b| b.root_id == "d1").expect("d1 archived");
    assert_eq!(bundle.executions.len(), 3);
    assert_eq!(bundle.executions[0].id, "d1");
    assert!(bundle.executions[1..]
        .iter()
        .all(|e| e.parent_id.as_deref() == Some("d1")));
    assert_eq!(bundle.traces.len(), 3);
    assert!(
        bundle.traces.iter().all(|(_, steps)| !steps.is_empty()),
        "traced steps archived"
    );

    let report = purge::purge_finished(store.as_ref(), &options(false), None, &mut |_| {})
        .await
        .expect("rest");
    assert_eq!(report.purged, 1, "the cancelled tree");
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_member_is_refused_with_the_terminate_hint() {
    let store: Arc<dyn ExecutionStore> = Arc::new(MemoryStore::new());
    let stack = Stack::new(store.clone(), Arc::new(MemoryQueue::new(5)));
    seed(&stack, &["d"], &[], &[]).await;
    let mut child = stack
        .load(
            &members(store.as_ref(), "d")
                .await
                .into_iter()
                .find(|i| i != "d")
                .expect("a region"),
        )
        .await;
    child.status = Status::Failed;
    store.save(&mut child).await.expect("fail a region");
    let report = purge::purge_finished(store.as_ref(), &options(false), None, &mut |_| {})
        .await
        .expect("run");
    assert_eq!(report.purged, 0);
    assert_eq!(report.refused.len(), 1);
    assert!(
        report.refused[0].1.ends_with(&format!(
            "{} (FAILED) — terminate a dead letter to abandon it",
            child.id
        )),
        "{:?}",
        report.refused
    );
    // an undated root is skipped unless asked for
    let mut undated = stack.load("d").await;
    undated.finished_at = None;
    store.save(&mut undated).await.expect("save");
    let report = purge::purge_finished(store.as_ref(), &options(false), None, &mut |_| {})
        .await
        .expect("run");
    assert_eq!((report.purged, report.skipped_undated), (0, 1));
}

// ---- over DynamoDB on moto, as the PurgePolicy allows ---------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_over_dynamodb_leaves_nothing_harel_can_find() {
    let parts = moto_parts("purge", 2, 5).await;
    let queue = Arc::new(SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()));
    let stack = Stack::traced(parts.store.clone(), queue);
    seed(&stack, &["d1", "d2"], &["live"], &[]).await;
    let store = parts.store.as_ref();
    let before = members(store, "d1").await;
    assert_eq!(before.len(), 3);
    stm_aws::as_function("purger", refusals(&stack)).await;

    let dir = std::env::temp_dir().join(format!("stm-purge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("archive.jsonl");
    let _ = std::fs::remove_file(&path);
    let mut archive = JsonlArchive::open(&path).expect("archive");
    let report = stm_aws::as_function(
        "purger",
        purge::purge_finished(store, &options(false), Some(&mut archive), &mut |_| {}),
    )
    .await
    .expect("purge under PurgePolicy");
    assert_eq!((report.purged, report.refused.len()), (2, 0), "{report:?}");
    assert_eq!(members(store, "live").await.len(), 3);

    // every table, scanned raw by boto3 (what harel's DynamoDBStore reads): nothing of
    // d1's or d2's trees, and the live tree's rows are still there
    let script = r#"
import boto3, json, sys
endpoint, prefix = sys.argv[1], sys.argv[2]
db = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
found = {}
for table in ["executions", "outbox", "spawns", "timers", "processed", "trace"]:
    for page in db.get_paginator("scan").paginate(TableName=f"{prefix}_{table}"):
        for item in page["Items"]:
            for name in ("id", "execution_id", "target_id", "parent_id", "child_id"):
                v = item.get(name, {}).get("S", "")
                root = v.split(":")[0]
                if root:
                    found.setdefault(root, set()).add(table)
print(json.dumps({k: sorted(v) for k, v in found.items()}))
"#;
    let out = std::process::Command::new(common::python())
        .args(["-c", script, &parts.endpoint, &parts.prefix])
        .output()
        .expect("python");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        found.get("d1").is_none() && found.get("d2").is_none(),
        "left behind: {found}"
    );
    assert!(
        found["live"]
            .as_array()
            .is_some_and(|t| t.iter().any(|x| x == "executions") && t.iter().any(|x| x == "trace")),
        "{found}"
    );

    // the archive: one line per tree, each execution read back by harel's own model
    let text = std::fs::read_to_string(&path).expect("archive");
    assert_eq!(text.lines().count(), 2);
    let check = r#"
import json, sys
from harel.engine.execution import Execution
for line in open(sys.argv[1], encoding="utf-8"):
    bundle = json.loads(line)
    exes = [Execution.model_validate(e) for e in bundle["executions"]]
    assert exes[0].id == bundle["root_id"], bundle["root_id"]
    assert all(e.status.name == "DONE" for e in exes), [e.status for e in exes]
    assert set(bundle["traces"]) == {e.id for e in exes}
    assert all(bundle["traces"][e.id] for e in exes), "every member's trace"
    print(bundle["root_id"], len(exes))
"#;
    let out = std::process::Command::new(common::python())
        .args(["-c", check, path.to_str().expect("utf-8 path")])
        .output()
        .expect("python");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // trees are purged several at once: the lines come in the order their archiving finished
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    assert_eq!(lines, ["d1 3", "d2 3"]);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- crash injection ------------------------------------------------------------------------

/// A hook that kills the store at its `die_at`-th call: that call and every later one
/// fail, as when the process running the purge is killed there.
struct Dying {
    calls: AtomicUsize,
    die_at: usize,
}

impl Dying {
    fn at(store: &Arc<dyn ExecutionStore>, die_at: usize) -> HookedStore<Dying> {
        let calls = AtomicUsize::new(0);
        HookedStore::new(store.clone(), Dying { calls, die_at })
    }
}

#[async_trait]
impl StoreHook for Dying {
    async fn before(&self, _call: &Call<'_>) -> Result<(), StoreError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) + 1 >= self.die_at {
            Err(StoreError::backend("the purge process died here"))
        } else {
            Ok(())
        }
    }
}

/// What is left of the seeded trees: every member id still stored, and how many rows
/// (trace steps, outbox entries, spawn intents) remain of the executions in `gone`.
async fn remains(store: &dyn ExecutionStore, gone: &BTreeSet<String>) -> (BTreeSet<String>, usize) {
    let mut ids = BTreeSet::new();
    for root in ["d1", "d2", "live"] {
        ids.extend(members(store, root).await);
    }
    let mut rows = 0;
    for id in gone {
        rows += store.read_trace(id).await.expect("trace").len();
    }
    let outbox = store.pending_outbox().await.expect("outbox");
    rows += outbox
        .iter()
        .filter(|o| o.target_id.as_ref().is_some_and(|t| gone.contains(t)))
        .count();
    let spawns = store.pending_spawns().await.expect("spawns");
    rows += spawns.iter().filter(|s| gone.contains(&s.parent_id)).count();
    (ids, rows)
}

/// Kill the purge at its 1st, 2nd, ... call, then run it again in a new process: it ends
/// exactly as a purge that never died, the archive holding every tree at least once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_killed_at_any_call_is_finished_by_a_rerun() {
    async fn fresh() -> (Arc<dyn ExecutionStore>, BTreeSet<String>) {
        let store: Arc<dyn ExecutionStore> = Arc::new(MemoryStore::new());
        let stack = Stack::traced(store.clone(), Arc::new(MemoryQueue::new(5)));
        seed(&stack, &["d1", "d2"], &["live"], &[]).await;
        let mut gone = members(store.as_ref(), "d1").await;
        gone.extend(members(store.as_ref(), "d2").await);
        (store, gone)
    }
    let (store, gone) = fresh().await;
    assert_eq!(gone.len(), 6);
    let counting = Dying::at(&store, usize::MAX);
    let mut kept = Kept::default();
    purge::purge_finished(&counting, &options(false), Some(&mut kept), &mut |_| {})
        .await
        .expect("crash-free");
    let total = counting.hook.calls.load(Ordering::SeqCst);
    let expected = remains(store.as_ref(), &gone).await;
    assert_eq!(
        expected,
        (members(store.as_ref(), "live").await, 0),
        "only the live tree is left"
    );
    assert!(total > 10, "a purge of two trees makes {total} calls");

    for die_at in 1..=total {
        let (store, gone) = fresh().await;
        let dying = Dying::at(&store, die_at);
        let mut kept = Kept::default();
        let died = purge::purge_finished(&dying, &options(false), Some(&mut kept), &mut |_| {}).await;
        assert!(died.is_err(), "call {die_at} of {total} kills it");
        let report = purge::purge_finished(store.as_ref(), &options(false), Some(&mut kept), &mut |_| {})
            .await
            .unwrap_or_else(|e| panic!("the rerun after a death at call {die_at}: {e}"));
        assert!(report.refused.is_empty(), "death at {die_at}: {report:?}");
        assert_eq!(
            remains(store.as_ref(), &gone).await,
            expected,
            "death at call {die_at}"
        );
        let archived: BTreeSet<&str> = kept.0.iter().map(|b| b.root_id.as_str()).collect();
        assert_eq!(archived, BTreeSet::from(["d1", "d2"]), "death at call {die_at}");
    }
}
