//! The same logical commit gives the same raw items and the same tables, harel's and ours.

use serde_json::{json, Value};
use stm_core::{Event, Execution};
use stm_store::{Commit, CreateOptions, DynamoDbStore, ExecutionStore, SpawnIntent, TimerOp};

use crate::support::{obj, our_store, python, python_with};

/// The same logical commit written by harel (prefix H) and by us (prefix R) gives the same
/// raw items, attribute for attribute and byte for byte (our two extra execution attributes,
/// the timers' `due_shard` and the rows' `row_bytes` aside), and the same tables (the same keys; ours add the
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
                ..Commit::default()
            },
        )
        .await
        .expect("our commit");

    let dump = r#"
tables = ["executions", "outbox", "spawns", "timers", "processed", "counters", "trace"]
shards, states, seqs, rows, sizes = {}, {}, {}, {}, {}
def scan(p):
    res = {}
    shards[p], states[p], seqs[p], rows[p], sizes[p] = [], [], {}, [], []
    for t in tables:
        items = client.scan(TableName=f"{p}_{t}")["Items"]
        for it in items:
            it.pop("trace_idx", None); it.pop("commit_token", None)
            if "rows" in it:
                rows[p].append([int(n["N"]) for n in it.pop("rows")["L"]])
            if t in ("outbox", "spawns"):
                # the seqs differ by design (harel's counter, our clock blocks): compared apart
                seqs[p].setdefault(t, []).append(int(it.pop("seq")["N"]))
                size = it.pop("row_bytes", None)
                if size is not None:
                    sizes[p].append([t, int(size["N"])])
            shard = it.pop("due_shard", None)
            if shard is not None:
                shards[p].append([t, it["execution_id"]["S"], it["path"]["S"], shard["S"]])
            key, since = it.pop("state_key", None), it.pop("state_since", None)
            if key is not None or since is not None:
                states[p].append([t, it["id"]["S"], (key or {}).get("S"), (since or {}).get("N")])
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
out({"h": scan(h), "r": scan(r), "hs": hs, "rs": rs, "hg": hg, "rg": rg, "shards": shards, "states": states,
     "seqs": {k: {t: sorted(v) for t, v in d.items()} for k, d in seqs.items()}, "rows": rows, "sizes": sizes})
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
    // each of our rows records its size (the relay sizes its reads by it); harel's none
    let sizes = both["sizes"][&our_prefix].as_array().cloned().unwrap_or_default();
    let tables: Vec<&str> = sizes.iter().filter_map(|s| s[0].as_str()).collect();
    assert_eq!(tables.iter().filter(|t| **t == "outbox").count(), 2, "{sizes:?}");
    assert_eq!(tables.iter().filter(|t| **t == "spawns").count(), 1, "{sizes:?}");
    assert!(
        sizes
            .iter()
            .all(|s| s[1].as_u64().is_some_and(|n| (100..1000).contains(&n))),
        "a small row's size: {sizes:?}"
    );
    assert_eq!(both["sizes"][&harel_prefix], json!([]));
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
    // harel's execution carries no state entry; ours the documented one: machine, active
    // path and shard, and the time it entered that state (its step's time)
    assert_eq!(both["states"][&harel_prefix], json!([]));
    let ours = both["states"][&our_prefix].as_array().expect("states").clone();
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert_eq!(ours[0][0], json!("executions"));
    assert_eq!(ours[0][1], json!("same-1"));
    assert_eq!(ours[0][3], json!("1700000001.5"), "entered at its updated_at");
    let key = ours[0][2].as_str().expect("a state_key");
    let shard = key
        .strip_prefix("order#root.a#")
        .and_then(|n| n.parse::<u32>().ok());
    assert!(
        shard.is_some_and(|n| n < stm_store::dynamodb::STATE_SHARDS),
        "{key}"
    );
    for table in ["outbox", "spawns", "processed", "counters", "trace"] {
        assert_eq!(both["hg"][table], json!([]), "{table}");
        assert_eq!(both["rg"][table], json!([]), "{table}");
    }
    assert_eq!(both["hg"]["executions"], json!([]));
    assert_eq!(
        both["rg"]["executions"],
        json!([["state_index",
                [{"AttributeName": "state_key", "KeyType": "HASH"}, {"AttributeName": "state_since", "KeyType": "RANGE"}],
                {"ProjectionType": "KEYS_ONLY"}]])
    );
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
