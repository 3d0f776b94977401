//! Definition versions end to end, over DynamoDB and SQS FIFO (moto over HTTP, behind the
//! strict layer), through the worker, relay and sweeper: executions started on v1 keep
//! stepping on v1 after v2 is deployed with v1 retained, new ones run v2; a deploy that
//! drops v1 parks the v1 executions' events (nothing failed, nothing dead-lettered), and
//! putting v1 back releases them; a migration with a map moves one execution to v2.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{event, moto_parts, Stack};
use serde_json::json;
use stm_core::version::{frozen_file_name, version_of, FrozenVersion, Version};
use stm_core::Status;
use stm_runtime::config::load_definitions_dir;
use stm_runtime::control::PathMap;
use stm_runtime::queue::SqsQueue;
use stm_store::ExecutionStore;

const V1: &str = "event Go {}\nevent Back {}\n\nmachine Flow {\n  initial Idle\n  state Idle {}\n  state Busy {\n    timeout 600\n  }\n  final Done success\n  from Idle to Busy on Go\n  from Busy to Done on Back\n}\n";

/// v2: `Busy` is renamed `Working`, and `Back` from it returns to `Idle` instead of
/// finishing, so which version stepped an execution shows in where it lands.
const V2: &str = "event Go {}\nevent Back {}\n\nmachine Flow {\n  initial Idle\n  state Idle {}\n  state Working {\n    timeout 600\n  }\n  final Done success\n  from Idle to Working on Go\n  from Working to Idle on Back\n}\n";

/// A definitions folder as a deploy carries it: `flow.stm`, and `versions/` with each
/// of `retained` frozen (what `stm versions freeze` writes).
fn deploy_dir(tag: &str, current: &str, retained: &[&str]) -> PathBuf {
    let dir = stm_testkit::scratch_dir(&format!("versions-{tag}"));
    std::fs::create_dir_all(dir.join("versions")).expect("make the folder");
    std::fs::write(dir.join("flow.stm"), current).expect("write flow.stm");
    for text in retained {
        let defn = stm_core::dsl::load_definition_str(text, None, None).expect("valid");
        let frozen = FrozenVersion::new(&defn, Some("retained".into()));
        std::fs::write(
            dir.join("versions")
                .join(frozen_file_name(&frozen.machine, frozen.version)),
            frozen.to_text(),
        )
        .expect("write the frozen version");
    }
    dir
}

fn version(text: &str) -> Version {
    version_of(&stm_core::dsl::load_definition_str(text, None, None).expect("valid"))
}

fn deploy(base: &Stack, dir: &Path) -> Stack {
    base.redeploy(load_definitions_dir(dir).expect("the deploy's definitions load"))
}

async fn state(stack: &Stack, id: &str) -> (Option<String>, Status, Option<Version>, usize) {
    let exe = stack.load(id).await;
    (
        exe.active_path,
        exe.status,
        exe.definition_version,
        stack.parked(id).await.len(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_executions_step_on_their_version_park_without_it_and_migrate() {
    let parts = moto_parts("versions", 2, 5).await;
    let queue = Arc::new(SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()));
    let first = Stack::new(parts.store.clone(), queue);
    let (v1, v2) = (version(V1), version(V2));
    let only_v1 = deploy_dir("v1", V1, &[]);
    let v2_with_v1 = deploy_dir("v2-v1", V2, &[V1]);
    let only_v2 = deploy_dir("v2", V2, &[]);

    // 1. executions start on v1, and are pinned to it
    let on_v1 = deploy(&first, &only_v1);
    for id in ["a", "b", "m"] {
        on_v1
            .control
            .create("Flow", None, Some(id))
            .await
            .expect("create");
        on_v1.drain().await;
        on_v1
            .control
            .send(id, &event("Go", json!({})))
            .await
            .expect("send");
    }
    on_v1.drain().await;
    assert_eq!(
        state(&on_v1, "a").await,
        (Some("Busy".into()), Status::Running, Some(v1), 0)
    );

    // 2-3. v2 deployed with v1 retained: v1's executions follow v1, a new one follows v2
    let both = deploy(&first, &v2_with_v1);
    both.control
        .create("Flow", None, Some("new"))
        .await
        .expect("create on v2");
    both.drain().await;
    both.control
        .send("new", &event("Go", json!({})))
        .await
        .expect("send");
    both.control
        .send("a", &event("Back", json!({})))
        .await
        .expect("send");
    both.drain().await;
    both.control
        .send("new", &event("Back", json!({})))
        .await
        .expect("send");
    both.drain().await;
    assert_eq!(
        state(&both, "a").await,
        (Some("Done".into()), Status::Done, Some(v1), 0),
        "v1's transition"
    );
    assert_eq!(
        state(&both, "new").await,
        (Some("Idle".into()), Status::Running, Some(v2), 0),
        "v2's"
    );

    // 4. v1 dropped: b's events are parked on b, in order, not failed and not lost
    let dropped = deploy(&first, &only_v2);
    dropped
        .control
        .send("b", &event("Back", json!({})))
        .await
        .expect("send to a parked execution");
    dropped
        .control
        .send("b", &event("Go", json!({})))
        .await
        .expect("send");
    dropped.drain().await;
    let parked = dropped.load("b").await;
    assert_eq!(
        (parked.active_path.as_deref(), parked.status),
        (Some("Busy"), Status::Running)
    );
    let waiting = dropped.parked("b").await;
    let kinds: Vec<&str> = waiting.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["Back", "Go"]);
    assert!(
        parts
            .store
            .armed_timer("b", "@parked")
            .await
            .expect("timers")
            .is_some(),
        "a recheck is armed"
    );
    let dead = parts
        .client
        .receive_message()
        .queue_url(&parts.urls.dead_letter_url)
        .send()
        .await
        .expect("read the DLQ");
    assert!(dead.messages().is_empty(), "nothing dead-lettered");
    // its recheck, while v1 is still missing, re-arms and changes nothing else
    dropped.clock.advance(301.0);
    dropped.drain().await;
    assert_eq!(state(&dropped, "b").await.3, 2, "still parked");

    // 5. v1 back: the recheck releases the parked events, oldest first, on v1
    let restored = deploy(&first, &v2_with_v1);
    restored.clock.advance(301.0);
    restored.drain().await;
    assert_eq!(
        state(&restored, "b").await,
        (Some("Done".into()), Status::Done, Some(v1), 0),
        "Back stepped on v1 (to Done), then Go found nothing to do"
    );

    // 6. migrate m (in v1's Busy) to v2: without a map it is refused, naming the state
    let refused = restored
        .control
        .migrate("m", v2, &PathMap::new(), false)
        .await
        .expect_err("Busy is not a state of v2");
    assert!(refused.to_string().contains("the active state Busy"), "{refused}");
    let map = PathMap::new().with("Busy", "Working");
    let dry = restored
        .control
        .migrate("m", v2, &map, true)
        .await
        .expect("dry run");
    assert_eq!(dry[0].moved, [("Busy".to_string(), "Working".to_string())]);
    assert_eq!(
        state(&restored, "m").await.2,
        Some(v1),
        "a dry run writes nothing"
    );
    let timer_before = parts.store.armed_timer("m", "Busy").await.expect("timers");
    restored
        .control
        .migrate("m", v2, &map, false)
        .await
        .expect("migrate");
    assert_eq!(
        state(&restored, "m").await,
        (Some("Working".into()), Status::Running, Some(v2), 0)
    );
    assert_eq!(
        parts.store.armed_timer("m", "Working").await.expect("timers"),
        timer_before,
        "the timer moved"
    );
    assert_eq!(parts.store.armed_timer("m", "Busy").await.expect("timers"), None);
    let trace = parts.store.read_trace("m").await.expect("trace");
    let last = trace.last().expect("a trace step");
    assert_eq!(
        (last["cause"].as_str(), last["event_kind"].as_str()),
        (Some("control"), Some("migrate"))
    );
    assert_eq!(
        (last["from_path"].as_str(), last["to_path"].as_str()),
        (Some("Busy"), Some("Working"))
    );
    // and it now follows v2: Back from Working returns to Idle
    restored
        .control
        .send("m", &event("Back", json!({})))
        .await
        .expect("send");
    restored.drain().await;
    assert_eq!(state(&restored, "m").await.0.as_deref(), Some("Idle"));

    for dir in [only_v1, v2_with_v1, only_v2] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn flow_frozen_in(dir: &Path) -> PathBuf {
    let defn = stm_core::dsl::load_definition_str(V1, None, None).expect("valid");
    let frozen = FrozenVersion::new(&defn, None);
    let path = dir
        .join("versions")
        .join(frozen_file_name(&frozen.machine, frozen.version));
    std::fs::write(&path, frozen.to_text()).expect("write");
    path
}

#[test]
fn a_bad_retained_version_fails_the_cold_start_with_its_file() {
    let dir = deploy_dir("bad", V2, &[]);
    let path = flow_frozen_in(&dir);
    assert!(load_definitions_dir(&dir).is_ok(), "a good one loads");
    let text = std::fs::read_to_string(&path).expect("read");
    let refused = |why: &str| {
        let err = load_definitions_dir(&dir).expect_err("refused").to_string();
        assert!(err.contains(&path.display().to_string()), "names the file: {err}");
        assert!(err.contains(why), "says {why:?}: {err}");
    };
    std::fs::write(&path, text.replace("\"Busy\"", "\"Bizzy\"")).expect("write");
    refused("it was edited after freezing; freeze it again from its source");
    std::fs::write(&path, text.replace("\"format\": 1", "\"format\": 2")).expect("write");
    refused("frozen format 2 is not this stm's (1)");
    std::fs::write(&path, "{\"machine\": \"Flow\"}").expect("write");
    refused("not a frozen version");
    std::fs::write(&path, &text).expect("write");
    let renamed = dir.join("versions/Flow@0000000000000000.json");
    std::fs::rename(&path, &renamed).expect("rename");
    let err = load_definitions_dir(&dir).expect_err("refused").to_string();
    assert!(
        err.contains(&format!("name the file Flow@{}.json", version(V1)))
            && err.contains("Flow@0000000000000000.json"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Regions and invoked children are pinned too: a region to its parent's version, an
/// invoked child to the version of the machine it runs, which is the one its parent's
/// own version carries (a parent on v1 invokes v1's inline body after v2 is deployed).
#[tokio::test]
async fn children_are_pinned_and_a_parent_on_v1_invokes_v1s_body() {
    use stm_runtime::{ActionRegistry, Driver};
    let p1 = "event Go {}\n\nmachine P {\n  initial Idle\n  state Idle {}\n  state Calling {\n    invoke {\n      initial A\n      state A {}\n    }\n  }\n  orthogonal Both {\n    state Left {\n      initial L\n      state L {}\n      final LDone success\n      from L to LDone on Go\n    }\n    state Right {\n      initial R\n      state R {}\n      final RDone success\n      from R to RDone on Go\n    }\n  }\n  from Idle to Calling on Go\n  from Calling to Both on Go\n}\n";
    let p2 = p1.replace(
        "      initial A\n      state A {}\n",
        "      initial B\n      state B {}\n",
    );
    let (v1, v2) = (version(p1), version(&p2));
    let store = Arc::new(stm_store::MemoryStore::new());
    let on = |dir: &Path| {
        Driver::new(
            store.clone(),
            load_definitions_dir(dir).expect("loads"),
            ActionRegistry::with_builtins(),
        )
    };
    let only_v1 = deploy_dir("p1", p1, &[]);
    let both = deploy_dir("p2-p1", &p2, &[p1]);
    let first = on(&only_v1);
    first.create("P", None, Some("old")).await.expect("create on v1");
    let second = on(&both);
    second.create("P", None, Some("new")).await.expect("create on v2");
    let go = stm_core::Event::new("Go");
    for id in ["old", "new"] {
        second
            .process(id, &go.clone().with_id(format!("{id}-1")))
            .await
            .expect("Go");
    }
    let child_of = |exe: &stm_core::Execution| exe.children.keys().next().cloned().expect("a child");
    let old = store.load("old").await.expect("load").expect("old");
    let new = store.load("new").await.expect("load").expect("new");
    let old_child = store.load(&child_of(&old)).await.expect("load").expect("child");
    let new_child = store.load(&child_of(&new)).await.expect("load").expect("child");
    assert_eq!(
        (old.definition_version, new.definition_version),
        (Some(v1), Some(v2))
    );
    assert_eq!(old_child.active_path.as_deref(), Some("A"), "v1's inline body");
    assert_eq!(new_child.active_path.as_deref(), Some("B"), "v2's");
    let sub_version = |text: &str| {
        let mut defn = stm_core::dsl::load_definition_str(text, None, None).expect("valid");
        stm_core::version::assign_versions(&mut defn);
        defn.submachines.values().next().and_then(|s| s.version)
    };
    assert_eq!(old_child.definition_version, sub_version(p1));
    assert_eq!(new_child.definition_version, sub_version(&p2));
    // an execution as harel writes it, without a pin, steps on the current version
    let mut unpinned = stm_core::Execution::new("harel", "P");
    unpinned.status = Status::Running;
    unpinned.active_path = Some("Idle".into());
    store.save(&mut unpinned).await.expect("save");
    second
        .process("harel", &go.clone().with_id("harel-1"))
        .await
        .expect("Go");
    let unpinned = store.load("harel").await.expect("load").expect("harel");
    assert_eq!(
        (unpinned.active_path.as_deref(), unpinned.definition_version),
        (Some("Calling"), None)
    );
    let harel_child = store
        .load(&child_of(&unpinned))
        .await
        .expect("load")
        .expect("child");
    assert_eq!(
        harel_child.active_path.as_deref(),
        Some("B"),
        "the current version's body"
    );
    // a region runs its parent's machine, pinned to the parent's version
    second
        .process("old", &go.clone().with_id("old-2"))
        .await
        .expect("Go");
    let old = store.load("old").await.expect("load").expect("old");
    let regions: Vec<stm_core::Execution> = {
        let mut out = Vec::new();
        for (id, cs) in &old.children {
            if !cs.submachine {
                out.push(store.load(id).await.expect("load").expect("region"));
            }
        }
        out
    };
    assert_eq!(regions.len(), 2, "{:?}", old.children);
    assert!(regions.iter().all(|r| r.definition_version == Some(v1)));
    for dir in [only_v1, both] {
        let _ = std::fs::remove_dir_all(dir);
    }
}
