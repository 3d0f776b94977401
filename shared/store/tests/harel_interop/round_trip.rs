//! What we write harel reads; what harel writes we read and advance with the CAS.

use serde_json::json;
use stm_core::{Event, Execution, Status};
use stm_store::{Commit, ExecutionStore, SpawnIntent, TimerOp};

use crate::support::{obj, our_store, python};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_we_write_harel_reads() {
    let prefix = stm_testkit::unique_prefix("ours2harel");
    let store = our_store(&prefix).await;

    let mut parent = Execution::new("w-1", "order");
    parent.status = Status::Running;
    parent.active_path = Some("root.waiting".into());
    parent.context =
        obj(json!({"order": {"id": 42, "lines": [1, 2.5, "x", null, true]}, "note": "ünïcode ✓"}));
    parent.created_at = Some(1_700_000_000.25);
    store.save(&mut parent).await.expect("insert");
    let ping = Event::with_data("Ping", obj(json!({"n": 1, "ratio": 0.1}))).with_id("ev-ping");
    let bcast = Event::new("Broadcast").with_id("ev-bcast");
    let commit = Commit {
        emits: vec![(Some("w-2".into()), ping.clone()), (None, bcast.clone())],
        processed_event_ids: vec!["ev-in".into()],
        timers: vec![
            TimerOp::Schedule {
                path: "root.waiting".into(),
                fire_at: 1_700_000_000.5,
            },
            TimerOp::Schedule {
                path: "root.other".into(),
                fire_at: 20.0,
            },
        ],
        spawns: vec![SpawnIntent {
            child_id: "w-1/r1".into(),
            root_path: "root.par.r1".into(),
            context: obj(json!({"seed": 7, "tags": ["a", "é"]})),
        }],
        traces: vec![obj(json!({"event": "Start", "to": "root.waiting", "t": 1.5}))],
        ..Commit::default()
    };
    let seqs = store.commit(&mut parent, commit).await.expect("commit");
    store
        .commit(
            &mut parent,
            Commit {
                traces: vec![obj(json!({"event": "Tick"}))],
                ..Commit::default()
            },
        )
        .await
        .expect("second traced commit");
    let mut child = Execution::new("w-1/r1", "order");
    child.parent_id = Some("w-1".into());
    child.status = Status::Done;
    store.save(&mut child).await.expect("child");

    let seen = python(
        &prefix,
        r#"
exe = store.load("w-1")
page = store.list_executions(definition_id="order", limit=10)
roots = store.list_executions(definition_id="order", roots_only=True, limit=10)
out({
    "exe": json.loads(exe.model_dump_json()),
    "outbox": [[o.seq, o.target_id, json.loads(o.event.model_dump_json())] for o in store.pending_outbox()],
    "spawns": [[s.seq, s.parent_id, s.child_id, s.root_path, s.context] for s in store.pending_spawns()],
    "timers": [list(t) for t in store.due_timers(1e10)],
    "trace": store.read_trace("w-1"),
    "processed": [store.is_processed("w-1", "ev-in"), store.is_processed("w-1", "nope")],
    "listed": sorted([s.id, s.version, s.status.value] for s in page.items),
    "roots": [s.id for s in roots.items],
})
"#,
        "",
    );
    assert_eq!(
        seen["exe"],
        serde_json::to_value(&parent).expect("json"),
        "harel loads the execution"
    );
    assert_eq!(seen["exe"]["version"], json!(3));
    assert_eq!(
        seen["outbox"],
        json!([
            [seqs.outbox[0], "w-2", serde_json::to_value(&ping).expect("json")],
            [seqs.outbox[1], null, serde_json::to_value(&bcast).expect("json")]
        ])
    );
    assert_eq!(
        seen["spawns"],
        json!([[seqs.spawns[0], "w-1", "w-1/r1", "root.par.r1", {"seed": 7, "tags": ["a", "é"]}]])
    );
    assert_eq!(
        seen["timers"],
        json!([
            ["w-1", "root.other", 20.0],
            ["w-1", "root.waiting", 1_700_000_000.5]
        ])
    );
    assert_eq!(
        seen["trace"],
        json!([{"event": "Start", "to": "root.waiting", "t": 1.5, "index": 0}, {"event": "Tick", "index": 1}])
    );
    assert_eq!(seen["processed"], json!([true, false]));
    assert_eq!(
        seen["listed"],
        json!([["w-1", 3, "RUNNING"], ["w-1/r1", 1, "DONE"]])
    );
    assert_eq!(seen["roots"], json!(["w-1"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_harel_writes_we_read_and_advance() {
    let prefix = stm_testkit::unique_prefix("harel2ours");
    let store = our_store(&prefix).await;
    python(
        &prefix,
        r#"
exe = Execution(id="h-1", definition_id="flow", status=Status.RUNNING, active_path="root.a",
                context={"n": 1, "items": [1, 2], "name": "ä"})
store.commit(exe, [("h-2", Event(id="h-ev-1", kind="Go", data={"k": 1}))], processed_event_id="in-1",
             timers=(TimerOp("schedule", "root.a", 100.25),), spawns=(("h-1/c", "root.p", {"x": 1}),),
             trace={"event": "Start", "by": "harel"})
out({"version": exe.version})
"#,
        "",
    );

    let (loaded, processed) = store.load_for_event("h-1", "in-1").await.expect("load_for_event");
    let mut exe = loaded.expect("harel's execution");
    assert!(processed, "harel's processed mark is seen");
    assert_eq!(
        (exe.version, exe.status, exe.active_path.as_deref()),
        (1, Status::Running, Some("root.a"))
    );
    assert_eq!(exe.context.get("name"), Some(&json!("ä")));
    let outbox = store.pending_outbox().await.expect("outbox");
    assert_eq!(outbox.len(), 1);
    assert_eq!(
        (outbox[0].target_id.as_deref(), outbox[0].event.id.as_str()),
        (Some("h-2"), "h-ev-1")
    );
    assert_eq!(outbox[0].event.data.get("k"), Some(&json!(1)));
    let spawns = store.pending_spawns().await.expect("spawns");
    assert_eq!(
        (spawns[0].child_id.as_str(), spawns[0].context.get("x")),
        ("h-1/c", Some(&json!(1)))
    );
    let timers = store.due_timers(1000.0).await.expect("timers");
    assert_eq!((timers[0].path.as_str(), timers[0].fire_at), ("root.a", 100.25));

    // advance it with our CAS (the trace index falls back to the Query: harel's item has
    // no trace_idx), emitting a row whose seq (from the clock, no counter) harel's relay
    // sorts after its own
    exe.context.insert("n".into(), json!(2));
    exe.active_path = Some("root.b".into());
    let seqs = store
        .commit(
            &mut exe,
            Commit {
                emits: vec![(Some("h-2".into()), Event::new("Next").with_id("ours-1"))],
                processed_event_ids: vec!["in-2".into()],
                timers: vec![TimerOp::Cancel {
                    path: "root.a".into(),
                }],
                traces: vec![obj(json!({"event": "Next", "by": "ours"}))],
                ..Commit::default()
            },
        )
        .await
        .expect("our commit over harel's item");
    assert_eq!(exe.version, 2);
    let ours = seqs.outbox[0];
    assert!(ours > 1, "our seq follows harel's row 1: {seqs:?}");

    let seen = python(
        &prefix,
        r#"
exe = store.load("h-1")
out({"version": exe.version, "n": exe.context["n"], "path": exe.active_path,
     "outbox": [o.seq for o in store.pending_outbox()],
     "timers": [list(t) for t in store.due_timers(1e10)],
     "trace": store.read_trace("h-1"), "processed": store.is_processed("h-1", "in-2")})
"#,
        "",
    );
    assert_eq!(
        seen,
        json!({"version": 2, "n": 2, "path": "root.b", "outbox": [1, ours], "timers": [], "processed": true,
               "trace": [{"event": "Start", "by": "harel", "index": 0}, {"event": "Next", "by": "ours", "index": 1}]})
    );

    // and harel advances it again from our write
    let seen = python(
        &prefix,
        r#"
exe = store.load("h-1")
exe.context["n"] = 3
store.commit(exe, [], trace={"event": "Again", "by": "harel"})
out({"version": exe.version})
"#,
        "",
    );
    assert_eq!(seen, json!({"version": 3}));
    let exe = store.load("h-1").await.expect("load").expect("stored");
    assert_eq!((exe.version, exe.context.get("n")), (3, Some(&json!(3))));
}
