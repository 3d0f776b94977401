//! Interop with harel 0.9.0's `DynamoDBStore` on the same tables (the same moto server and
//! prefix): what we write harel reads, what harel writes we read and advance with the CAS,
//! the two race fairly, items are byte-identical, and harel's trace reader works with our
//! `trace_idx` shortcut.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use stm_core::{Event, Execution, Map, Status};
use stm_store::{
    Commit, CreateOptions, DynamoDbStore, ExecutionStore, SpawnIntent, StoreError, TimerOp, Written,
};

/// The Python side: a boto3 client on moto and harel's store on `$PREFIX`.
const PRELUDE: &str = r#"
import json, os, sys
import boto3
from harel.engine.execution import Execution, Status
from harel.engine.store import DynamoDBStore, StoreConflict, TimerOp
from harel.spec.states import Event
client = boto3.client("dynamodb", endpoint_url=os.environ["ENDPOINT"], region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
store = DynamoDBStore(client, prefix=os.environ["PREFIX"], create_schema=os.environ.get("CREATE_SCHEMA") == "1")
def out(obj):
    print(json.dumps(obj))
"#;

fn python(prefix: &str, code: &str, stdin: &str) -> Value {
    python_with(prefix, code, stdin, false)
}

/// `create_schema`: harel creates its tables (else it only checks they exist).
fn python_with(prefix: &str, code: &str, stdin: &str, create_schema: bool) -> Value {
    let moto = stm_testkit::moto_blocking();
    let script = format!("{PRELUDE}\n{code}");
    let create = if create_schema { "1" } else { "0" };
    let env = [
        ("ENDPOINT", moto.endpoint()),
        ("PREFIX", prefix),
        ("CREATE_SCHEMA", create),
    ];
    let text = stm_testkit::run_python(&script, &env, stdin);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("python printed no JSON ({e}):\n{text}"))
}

async fn our_store(prefix: &str) -> DynamoDbStore {
    let moto = stm_testkit::moto().await;
    let options = CreateOptions {
        prefix: prefix.to_string(),
        connect_attempts: 5,
        ..CreateOptions::default()
    };
    DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("our store")
}

fn obj(v: Value) -> Map {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

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

/// Who commits first in a round of the race.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Order {
    /// Harel is released, then we commit at once: the commits overlap, either may win.
    Overlapping,
    /// Our commit has landed before harel is released: harel's CAS must fail.
    OursFirst,
    /// Harel's commit has landed (we read its answer) before ours starts: our CAS must fail.
    /// Without these rounds harel rarely wins an overlapping one (its release goes through
    /// a pipe), so a store that ignored the CAS could go unnoticed.
    HarelFirst,
}

fn release(to_py: &mut impl Write) {
    to_py.write_all(b"go\n").and_then(|()| to_py.flush()).expect("go");
}

fn answer(from_py: &mut impl BufRead) -> Value {
    let mut line = String::new();
    from_py.read_line(&mut line).expect("read");
    serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("python result ({e}): {line:?}"))
}

async fn commit_ours(store: &DynamoDbStore, mine: &mut Execution, r: usize) -> Result<Written, StoreError> {
    store
        .commit(
            mine,
            Commit {
                emits: vec![(None, Event::new("X").with_id(format!("ours-{r}")))],
                ..Commit::default()
            },
        )
        .await
}

/// Rounds of a real race: harel loads, waits for "go", commits; we load and commit, at the
/// same moment or strictly before or after it. Exactly one wins each round, the loser sees
/// the winner's version, and each side wins the rounds it commits first in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cas_race_between_harel_and_us_has_one_winner() {
    let prefix = stm_testkit::unique_prefix("race");
    let store = our_store(&prefix).await;
    let moto = stm_testkit::moto().await;
    let orders = [Order::Overlapping, Order::OursFirst, Order::HarelFirst];
    let rounds = 3 * orders.len();
    for r in 0..rounds {
        let mut e = Execution::new(format!("race-{r}"), "def");
        store.save(&mut e).await.expect("insert");
    }
    let script = format!(
        "{PRELUDE}\n{}",
        r#"
rounds = int(sys.argv[1])
for r in range(rounds):
    exe = store.load(f"race-{r}")
    exe.context["by"] = "harel"
    print("loaded", flush=True)
    sys.stdin.readline()
    try:
        store.commit(exe, [(None, Event(id=f"harel-{r}", kind="X"))])
        print(json.dumps({"won": True}), flush=True)
    except StoreConflict as c:
        print(json.dumps({"won": False, "expected": c.expected, "found": c.found}), flush=True)
"#
    );
    let mut child = Command::new(stm_testkit::python())
        .arg("-c")
        .arg(&script)
        .arg(rounds.to_string())
        .env("ENDPOINT", moto.endpoint())
        .env("PREFIX", &prefix)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python");
    let mut to_py = child.stdin.take().expect("stdin");
    let mut from_py = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let (mut ours_won, mut harel_won) = (0, 0);
    for r in 0..rounds {
        let order = orders[r % orders.len()];
        line.clear();
        from_py.read_line(&mut line).expect("read");
        assert_eq!(line.trim(), "loaded", "python side");
        let id = format!("race-{r}");
        let mut mine = store.load(&id).await.expect("load").expect("stored");
        mine.context.insert("by".into(), json!("ours"));
        let (ours, theirs) = match order {
            Order::Overlapping => {
                release(&mut to_py);
                let ours = commit_ours(&store, &mut mine, r).await;
                (ours, answer(&mut from_py))
            }
            Order::OursFirst => {
                let ours = commit_ours(&store, &mut mine, r).await;
                release(&mut to_py);
                (ours, answer(&mut from_py))
            }
            Order::HarelFirst => {
                release(&mut to_py);
                let theirs = answer(&mut from_py);
                (commit_ours(&store, &mut mine, r).await, theirs)
            }
        };
        let harel_ok = theirs["won"] == json!(true);
        match (&ours, harel_ok) {
            (Ok(_), false) => {
                ours_won += 1;
                assert_eq!(
                    (theirs["expected"].clone(), theirs["found"].clone()),
                    (json!(1), json!(2))
                );
            }
            (
                Err(StoreError::Conflict {
                    expected: 1,
                    found: Some(2),
                    ..
                }),
                true,
            ) => harel_won += 1,
            _ => {
                panic!("round {r} ({order:?}): exactly one writer must win, got ours={ours:?} harel={theirs}")
            }
        }
        match order {
            Order::OursFirst => assert!(!harel_ok, "round {r}: ours landed first, harel must lose"),
            Order::HarelFirst => assert!(harel_ok, "round {r}: harel's landed first, we must lose"),
            Order::Overlapping => {}
        }
        let stored = store.load(&id).await.expect("load").expect("stored");
        assert_eq!(stored.version, 2);
        let winner = if harel_ok { "harel" } else { "ours" };
        assert_eq!(stored.context.get("by"), Some(&json!(winner)));
        let outbox: Vec<String> = store
            .pending_outbox()
            .await
            .expect("outbox")
            .into_iter()
            .map(|o| o.event.id)
            .collect();
        assert!(outbox.contains(&format!("{winner}-{r}")));
        let loser = if harel_ok { "ours" } else { "harel" };
        assert!(
            !outbox.contains(&format!("{loser}-{r}")),
            "the loser's emit must not leak"
        );
    }
    drop(to_py);
    assert!(child.wait().expect("python exit").success());
    assert_eq!(ours_won + harel_won, rounds);
    eprintln!("race: ours won {ours_won}, harel won {harel_won} of {rounds}");
    // a race one side never wins is no race: e.g. a store whose CAS lets every write
    // through makes harel lose every round it does not strictly lead
    assert!(
        ours_won >= 1 && harel_won >= 1,
        "each side must win at least once: ours won {ours_won}, harel won {harel_won} of {rounds}"
    );
}

/// Our traced commits skip the max-idx Query (trace_idx); harel's reader and writer still
/// see one contiguous ring, whoever writes next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harels_trace_reader_works_with_trace_idx() {
    let prefix = stm_testkit::unique_prefix("traceidx");
    let store = our_store(&prefix).await;
    let mut e = Execution::new("t-1", "def");
    for i in 0..3 {
        store
            .commit(
                &mut e,
                Commit {
                    traces: vec![obj(json!({"step": i, "by": "ours"}))],
                    ..Commit::default()
                },
            )
            .await
            .expect("traced commit");
    }
    let seen = python(
        &prefix,
        r#"
raw = client.get_item(TableName=os.environ["PREFIX"] + "_executions", Key={"id": {"S": "t-1"}})["Item"]
exe = store.load("t-1")
store.commit(exe, [], trace={"step": 3, "by": "harel"})
store.append_trace("t-1", {"step": 4, "by": "harel-append"})
out({"attrs": sorted(raw), "trace_idx": raw["trace_idx"]["N"],
     "trace": [[t["index"], t["step"], t["by"]] for t in store.read_trace("t-1")]})
"#,
        "",
    );
    assert_eq!(
        seen["attrs"],
        json!([
            "commit_token",
            "data",
            "definition_id",
            "id",
            "trace_idx",
            "version"
        ])
    );
    assert_eq!(seen["trace_idx"], json!("2"));
    assert_eq!(
        seen["trace"],
        json!([
            [0, 0, "ours"],
            [1, 1, "ours"],
            [2, 2, "ours"],
            [3, 3, "harel"],
            [4, 4, "harel-append"]
        ])
    );

    // harel's put dropped our trace_idx: the next traced commit of ours re-reads the max
    let mut e = store.load("t-1").await.expect("load").expect("stored");
    store
        .commit(
            &mut e,
            Commit {
                traces: vec![obj(json!({"step": 5, "by": "ours"}))],
                ..Commit::default()
            },
        )
        .await
        .expect("traced commit");
    let seen = python(
        &prefix,
        r#"out([[t["index"], t["by"]] for t in store.read_trace("t-1")])"#,
        "",
    );
    assert_eq!(
        seen,
        json!([
            [0, "ours"],
            [1, "ours"],
            [2, "ours"],
            [3, "harel"],
            [4, "harel-append"],
            [5, "ours"]
        ])
    );
}

/// The same logical commit written by harel (prefix H) and by us (prefix R) gives the same
/// raw items, attribute for attribute and byte for byte (our two extra execution attributes
/// and the timers' `due_shard` aside), and the same tables (the same keys; ours add the
/// timers' sparse due index).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_and_tables_are_identical_to_harels() {
    let harel_prefix = stm_testkit::unique_prefix("same_h");
    let our_prefix = stm_testkit::unique_prefix("same_r");
    // harel creates its own tables
    let input = python_with(
        &harel_prefix,
        r#"
exe = Execution(id="same-1", definition_id="order", status=Status.RUNNING, active_path="root.a",
                context={"n": 1, "f": 0.1, "big": 1e16, "small": 1e-07, "s": "é ✓ \n", "l": [1, {"a": None}]},
                created_at=1700000000.25, updated_at=1700000001.5)
before = json.loads(exe.model_dump_json())
emits = [("t-1", Event(id="e-1", kind="Ping", data={"x": 1.5, "u": "ü"})), (None, Event(id="e-2", kind="B"))]
spawns = (("same-1/c", "root.p", {"k": [1, 2.25], "u": "ß"}),)
timers = (TimerOp("schedule", "root.a", 1700000010.125), TimerOp("schedule", "root.b", 30.0))
trace = {"event": "Ping", "from": "root", "to": "root.a", "t": 1700000000.5, "u": "ü"}
store.commit(exe, emits, processed_event_id="in-1", timers=timers, spawns=spawns, trace=trace)
out({"exe": before, "emits": [[t, json.loads(e.model_dump_json())] for t, e in emits],
     "spawns": [list(s) for s in spawns], "trace": trace})
"#,
        "",
        true,
    );
    let store = our_store(&our_prefix).await;
    let mut exe: Execution = serde_json::from_value(input["exe"].clone()).expect("harel's execution JSON");
    let emits = input["emits"]
        .as_array()
        .expect("emits")
        .iter()
        .map(|pair| {
            let target = pair[0].as_str().map(str::to_string);
            (
                target,
                serde_json::from_value::<Event>(pair[1].clone()).expect("event"),
            )
        })
        .collect();
    let spawns = input["spawns"]
        .as_array()
        .expect("spawns")
        .iter()
        .map(|s| SpawnIntent {
            child_id: s[0].as_str().unwrap_or_default().into(),
            root_path: s[1].as_str().unwrap_or_default().into(),
            context: obj(s[2].clone()),
        })
        .collect();
    store
        .commit(
            &mut exe,
            Commit {
                emits,
                processed_event_ids: vec!["in-1".into()],
                timers: vec![
                    TimerOp::Schedule {
                        path: "root.a".into(),
                        fire_at: 1_700_000_010.125,
                    },
                    TimerOp::Schedule {
                        path: "root.b".into(),
                        fire_at: 30.0,
                    },
                ],
                spawns,
                traces: vec![obj(input["trace"].clone())],
            },
        )
        .await
        .expect("our commit");

    let dump = r#"
tables = ["executions", "outbox", "spawns", "timers", "processed", "counters", "trace"]
shards, seqs, rows = {}, {}, {}
def scan(p):
    res = {}
    shards[p], seqs[p], rows[p] = [], {}, []
    for t in tables:
        items = client.scan(TableName=f"{p}_{t}")["Items"]
        for it in items:
            it.pop("trace_idx", None); it.pop("commit_token", None)
            if "rows" in it:
                rows[p].append([int(n["N"]) for n in it.pop("rows")["L"]])
            if t in ("outbox", "spawns"):
                # the seqs differ by design (harel's counter, our clock blocks): compared apart
                seqs[p].setdefault(t, []).append(int(it.pop("seq")["N"]))
            shard = it.pop("due_shard", None)
            if shard is not None:
                shards[p].append([t, it["execution_id"]["S"], it["path"]["S"], shard["S"]])
        res[t] = sorted(items, key=lambda i: json.dumps(i, sort_keys=True))
    return res
def schema(p):
    res, gsi = {}, {}
    for t in tables:
        d = client.describe_table(TableName=f"{p}_{t}")["Table"]
        keys = {k["AttributeName"] for k in d["KeySchema"]}
        res[t] = [d["KeySchema"],
                  sorted([a for a in d["AttributeDefinitions"] if a["AttributeName"] in keys],
                         key=lambda a: a["AttributeName"]),
                  d.get("BillingModeSummary", {}).get("BillingMode")]
        gsi[t] = [[g["IndexName"], g["KeySchema"], g["Projection"]] for g in d.get("GlobalSecondaryIndexes", [])]
    return res, gsi
h, r = sys.stdin.read().split()
hs, hg = schema(h)
rs, rg = schema(r)
out({"h": scan(h), "r": scan(r), "hs": hs, "rs": rs, "hg": hg, "rg": rg, "shards": shards,
     "seqs": {k: {t: sorted(v) for t, v in d.items()} for k, d in seqs.items()}, "rows": rows})
"#;
    let both = python(&harel_prefix, dump, &format!("{harel_prefix} {our_prefix}"));
    for table in ["executions", "outbox", "spawns", "timers", "processed", "trace"] {
        assert_eq!(both["r"][table], both["h"][table], "raw items of {table}");
    }
    for table in [
        "executions",
        "outbox",
        "spawns",
        "timers",
        "processed",
        "counters",
        "trace",
    ] {
        assert_eq!(both["rs"][table], both["hs"][table], "schema of {table}");
    }
    // the seqs: harel's from its counter items, ours one block from the clock, which the
    // execution item records (and no counter item written)
    assert_eq!(
        both["seqs"][&harel_prefix],
        json!({"outbox": [1, 2], "spawns": [1]})
    );
    assert_eq!(both["h"]["counters"].as_array().map(Vec::len), Some(2));
    assert_eq!(both["r"]["counters"], json!([]), "no counter item of ours");
    let block = both["rows"][&our_prefix][0].clone();
    let first = block[0].as_i64().expect("first seq");
    assert_eq!(
        block,
        json!([first, 2, 1]),
        "the execution's rows block: 2 outbox rows, 1 spawn"
    );
    assert_eq!(
        both["seqs"][&our_prefix],
        json!({"spawns": [first], "outbox": [first + 1, first + 2]}),
        "the spawn row first"
    );
    assert_eq!(both["rows"][&harel_prefix], json!([]));
    let counts: Vec<usize> = [
        "executions",
        "outbox",
        "spawns",
        "timers",
        "processed",
        "counters",
        "trace",
    ]
    .iter()
    .map(|t| both["h"][*t].as_array().map_or(0, Vec::len))
    .collect();
    assert_eq!(
        counts,
        vec![1, 2, 1, 2, 1, 2, 1],
        "harel wrote one of everything (the comparison is not vacuous)"
    );
    // harel's timers carry no shard (and its tables no index); ours carry the documented one
    assert_eq!(both["shards"][&harel_prefix], json!([]));
    let mut ours = both["shards"][&our_prefix].as_array().expect("shards").clone();
    ours.sort_by_key(|v| v.to_string());
    assert_eq!(
        Value::Array(ours),
        json!([
            [
                "timers",
                "same-1",
                "root.a",
                stm_store::dynamodb::timer_shard("same-1", "root.a")
            ],
            [
                "timers",
                "same-1",
                "root.b",
                stm_store::dynamodb::timer_shard("same-1", "root.b")
            ]
        ])
    );
    for table in ["executions", "outbox", "spawns", "processed", "counters", "trace"] {
        assert_eq!(both["hg"][table], json!([]), "{table}");
        assert_eq!(both["rg"][table], json!([]), "{table}");
    }
    assert_eq!(both["hg"]["timers"], json!([]));
    assert_eq!(
        both["rg"]["timers"],
        json!([["due_index",
                [{"AttributeName": "due_shard", "KeyType": "HASH"}, {"AttributeName": "fire_at", "KeyType": "RANGE"}],
                {"ProjectionType": "KEYS_ONLY"}]])
    );
    eprintln!("harel's execution item: {}", both["h"]["executions"][0]);
    eprintln!("harel's trace item: {}", both["h"]["trace"][0]);
    assert_eq!(both["rs"]["trace"][2], json!("PAY_PER_REQUEST"));

    // our check of the tables harel created passes
    let moto = stm_testkit::moto().await;
    let check = CreateOptions {
        prefix: harel_prefix.clone(),
        create_schema: false,
        ..CreateOptions::default()
    };
    DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, check)
        .await
        .expect("harel's tables check");
}

/// harel 0.9.0's listing cursor (a base64 offset) is accepted by ours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harel_list_cursor_is_accepted() {
    let prefix = stm_testkit::unique_prefix("cursor");
    let store = our_store(&prefix).await;
    for i in 0..9 {
        let mut e = Execution::new(format!("c-{i}"), "def");
        store.save(&mut e).await.expect("insert");
    }
    let first = python(
        &prefix,
        r#"
page = store.list_executions(limit=4)
out({"ids": [s.id for s in page.items], "cursor": page.next_cursor})
"#,
        "",
    );
    let cursor = first["cursor"]
        .as_str()
        .expect("harel returned a cursor")
        .to_string();
    let mut seen: Vec<String> = first["ids"]
        .as_array()
        .expect("ids")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let mut query = stm_store::ListQuery {
        limit: 4,
        cursor: Some(cursor),
        ..Default::default()
    };
    loop {
        let page = store
            .list_executions(&query)
            .await
            .expect("list with harel's cursor");
        seen.extend(page.items.into_iter().map(|s| s.id));
        match page.next_cursor {
            Some(c) => query.cursor = Some(c),
            None => break,
        }
    }
    seen.sort();
    let want: Vec<String> = (0..9).map(|i| format!("c-{i}")).collect();
    assert_eq!(
        seen, want,
        "harel's first page plus ours from its cursor cover everything once"
    );
}

/// Timers and the due index across the two stores: harel's scan reads our timers (with
/// their `due_shard`) and its guarded delete removes them; timers harel writes (or
/// re-arms: its put drops `due_shard`) are not in the index and fire through our full scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_across_harel_and_the_due_index() {
    let prefix = stm_testkit::unique_prefix("timers_idx");
    let store = our_store(&prefix).await;
    for (id, path, at) in [("o-1", "root.o", 40.0), ("o-2", "root.x", 60.0)] {
        let mut e = Execution::new(id, "def");
        store
            .commit(
                &mut e,
                Commit {
                    timers: vec![TimerOp::Schedule {
                        path: path.into(),
                        fire_at: at,
                    }],
                    ..Commit::default()
                },
            )
            .await
            .expect("our commit");
    }
    let seen = python(
        &prefix,
        r#"
exe = Execution(id="h-1", definition_id="def", status=Status.RUNNING, active_path="root.h")
store.commit(exe, [], timers=(TimerOp("schedule", "root.h", 50.0),))
before = [list(t) for t in store.due_timers(1e10)]
store.delete_timer("o-1", "root.o", 40.0)
ours = store.load("o-2")
store.commit(ours, [], timers=(TimerOp("schedule", "root.x", 70.0),))
out({"before": before, "after": [list(t) for t in store.due_timers(1e10)]})
"#,
        "",
    );
    assert_eq!(
        seen["before"],
        json!([
            ["o-1", "root.o", 40.0],
            ["h-1", "root.h", 50.0],
            ["o-2", "root.x", 60.0]
        ]),
        "harel's scan reads our timers as its own"
    );
    assert_eq!(
        seen["after"],
        json!([["h-1", "root.h", 50.0], ["o-2", "root.x", 70.0]]),
        "harel's guarded delete removed ours; its re-arm replaced ours"
    );

    // the index holds none of them now: harel wrote both remaining items
    let (indexed, _) = store.due_timers_indexed(100.0).await.expect("index");
    assert_eq!(indexed, vec![], "harel's items are not in the sparse index");
    // the first sweep of a store is the scheduled full scan: harel's timers fire
    let (swept, stats) = store.due_timers_with_stats(100.0).await.expect("sweep");
    assert!(stats.full_scan, "{stats:?}");
    let got: Vec<(&str, &str, f64)> = swept
        .iter()
        .map(|t| (t.execution_id.as_str(), t.path.as_str(), t.fire_at))
        .collect();
    assert_eq!(got, vec![("h-1", "root.h", 50.0), ("o-2", "root.x", 70.0)]);
    // the next sweep within the interval is the index (harel's wait for the next full scan)
    let (swept, stats) = store.due_timers_with_stats(100.0).await.expect("sweep");
    assert!(!stats.full_scan && swept.is_empty(), "{stats:?} {swept:?}");
    // our sweeper's guarded delete of a harel timer works, and we re-arm into the index
    store.delete_timer("h-1", "root.h", 50.0).await.expect("delete");
    let mut exe = store.load("o-2").await.expect("load").expect("o-2");
    store
        .commit(
            &mut exe,
            Commit {
                timers: vec![TimerOp::Schedule {
                    path: "root.x".into(),
                    fire_at: 80.0,
                }],
                ..Commit::default()
            },
        )
        .await
        .expect("our re-arm");
    let (indexed, _) = store.due_timers_indexed(100.0).await.expect("index");
    assert_eq!(indexed.len(), 1);
    assert_eq!(
        (indexed[0].execution_id.as_str(), indexed[0].fire_at),
        ("o-2", 80.0)
    );
    let seen = python(&prefix, "out([list(t) for t in store.due_timers(1e10)])", "");
    assert_eq!(seen, json!([["o-2", "root.x", 80.0]]));
}
