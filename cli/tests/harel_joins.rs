//! A harel 0.9.0 deployment and `stm local` sharing one queue and one set of tables on one
//! moto: harel's own setup code creates them first (`DynamoDBStore.create`,
//! `SqsTransport.create`: a FIFO queue with `FifoQueue` alone, seven tables without our
//! due index), then `stm local --endpoint` joins them as they are. An execution harel
//! creates and sends events to over the shared queue is run to completion by our worker;
//! one `stm create` makes is read and advanced by harel. Before, `stm local` stopped at
//! `QueueAlreadyExists` (it asked `CreateQueue` for its own attributes).
//!
//! And what cannot be shared is refused with one message naming it: a standard queue
//! passed as `--queue URL`, a table keyed otherwise.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::{repo, stm_local, stm_with as stm};

/// harel's side: its store and transport on `PREFIX` / `QUEUE_URL`, a `DistributedRunner`
/// over `examples/order.stm`, and `show(id)`.
const HAREL: &str = r#"
import json, os
import boto3
from harel.dsl import definition_from_dsl_file
from harel.engine.distributed import DistributedRunner
from harel.engine.store import DynamoDBStore
from harel.engine.transport import SqsTransport
from harel.spec.states import Event
kw = dict(endpoint_url=os.environ["ENDPOINT"], region_name="us-east-1",
          aws_access_key_id="test", aws_secret_access_key="test")
store = DynamoDBStore(boto3.client("dynamodb", **kw), prefix=os.environ["PREFIX"], create_schema=False)
transport = SqsTransport(boto3.client("sqs", **kw), os.environ["QUEUE_URL"])
runner = DistributedRunner(store, transport, {"Order": definition_from_dsl_file(os.environ["ORDER"], "Order")},
                           execution="inline")
def show(eid):
    exe = store.load(eid)
    return None if exe is None else {"status": exe.status.value, "active_path": exe.active_path,
                                     "outcome": exe.outcome, "context": exe.context}
"#;

/// Run a Python snippet on moto with `env`; the JSON its last line prints.
fn python(env: &[(&str, &str)], code: &str) -> Value {
    let text = stm_testkit::run_python(code, env, "");
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("python printed no JSON ({e}):\n{text}"))
}

struct Local {
    child: Child,
    log: PathBuf,
}

impl Drop for Local {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The deployment's environment, as `stm local` prints it: moto's endpoint (so `stm local`
/// starts no moto of its own), the prefix and the queue.
fn deployment(prefix: &str, queue: &str) -> Vec<(String, String)> {
    let moto = stm_testkit::moto_blocking();
    vec![
        ("STM_ENDPOINT_URL".into(), moto.endpoint().to_string()),
        ("STM_TABLE_PREFIX".into(), prefix.to_string()),
        ("STM_QUEUE_URL".into(), queue.to_string()),
        (
            "STM_DEFINITIONS_DIR".into(),
            repo().join("examples").display().to_string(),
        ),
        ("AWS_REGION".into(), "us-east-1".into()),
    ]
}

impl Local {
    /// Start `stm local`; ready when it prints its `export` line (it has joined or made the
    /// tables and the queue by then).
    fn start(env: &[(String, String)], tag: &str) -> Local {
        let log = std::env::temp_dir().join(format!("stm-local-{tag}-{}.log", std::process::id()));
        let child = stm_local(env)
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start stm local");
        let mut local = Local { child, log };
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let text = local.log_text();
            if text.contains("export STM_EMULATOR=1 STM_ENDPOINT_URL=") {
                return local;
            }
            if let Ok(Some(status)) = local.child.try_wait() {
                panic!("stm local exited ({status}):\n{text}");
            }
            assert!(Instant::now() < deadline, "stm local did not come up:\n{text}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn ok(env: &[(String, String)], args: &[&str]) -> String {
    let out = stm(env, args);
    assert!(
        out.status.success(),
        "stm {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Poll `stm show ID` until its first line contains every needle.
fn wait_show(env: &[(String, String)], id: &str, needles: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = stm(env, &["show", id]);
        let shown = String::from_utf8_lossy(&out.stdout).into_owned();
        let first = shown.lines().next().unwrap_or_default();
        if out.status.success() && needles.iter().all(|n| first.contains(n)) {
            return shown;
        }
        assert!(
            Instant::now() < deadline,
            "{id} never showed {needles:?}; last:\n{shown}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Run `cmd` to its exit, or kill it after `within` (`None`: it was still running).
fn run_until_exit(mut cmd: Command, within: Duration) -> Option<Output> {
    let mut child = cmd.stderr(Stdio::piped()).spawn().expect("start stm");
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return Some(child.wait_with_output().expect("output"));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn stm_local_joins_harels_queue_and_tables_and_both_drive_the_same_executions() {
    let moto = stm_testkit::moto_blocking();
    let prefix = stm_testkit::unique_prefix("joins");
    let queue = format!("{prefix}-events.fifo");
    let order = repo().join("examples/order.stm").display().to_string();

    // harel first, with its own setup code
    let made = python(
        &[
            ("ENDPOINT", moto.endpoint()),
            ("PREFIX", &prefix),
            ("QUEUE", &queue),
        ],
        r#"
import json, os
from harel.engine.store import DynamoDBStore
from harel.engine.transport import SqsTransport
DynamoDBStore.create(os.environ["ENDPOINT"], prefix=os.environ["PREFIX"])
transport = SqsTransport.create(os.environ["ENDPOINT"], queue_name=os.environ["QUEUE"])
print(json.dumps({"queue_url": transport._queue_url}))
"#,
    );
    let queue_url = made["queue_url"].as_str().expect("harel's queue URL").to_string();
    let harel_env = [
        ("ENDPOINT", moto.endpoint()),
        ("PREFIX", prefix.as_str()),
        ("QUEUE_URL", queue_url.as_str()),
        ("ORDER", order.as_str()),
    ];
    let harel = |code: &str| python(&harel_env, &format!("{HAREL}\n{code}"));

    // then `stm local`, on the same endpoint, prefix and queue (by name)
    let env = deployment(&prefix, &queue);
    let local = Local::start(&env, "joins");
    let said = local.log_text();
    for line in [
        format!("[stm local] joined the existing queue {queue_url}"),
        format!(
            "[stm local] queue {queue} has VisibilityTimeout=30 s, not 5 s: kept (our receives set \
             their own visibility timeout)"
        ),
        format!("[stm local] queue {queue} has no redrive policy (no dead-letter queue): kept"),
        format!(
            "[stm local] table {prefix}_timers has no due_index (harel creates no index): every \
             timer sweep scans the whole table, as harel's does"
        ),
        "(DLQ none)".to_string(),
    ] {
        assert!(said.contains(&line), "stm local did not say {line:?}:\n{said}");
    }

    // harel creates an order and sends its events over the shared queue; our worker runs it
    let created = harel(
        r#"
runner.create("Order", execution_id="h-1")
runner.send("h-1", Event(kind="Submit", data={"amount": 42.5}))
runner.send("h-1", Event(kind="PaymentOk", data={"receipt": "r-1"}))
runner.send("h-1", Event(kind="Shipped"))
print(json.dumps(show("h-1")))
"#,
    );
    // our worker is live: by now it may have run some of it already
    assert!(created["status"].is_string(), "harel created h-1: {created}");
    let shown = wait_show(&env, "h-1", &["[Order] DONE", "at Delivered", "outcome success"]);
    assert!(shown.contains(r#""receipt":"r-1""#), "{shown}");
    let read = harel(r#"print(json.dumps(show("h-1")))"#);
    assert_eq!(read["status"], "DONE", "{read}");
    assert_eq!(read["outcome"], "success");
    assert_eq!(read["context"]["amount"], 42.5);

    // `stm create` makes one; harel reads it and sends it an event; our worker runs that
    assert_eq!(
        ok(&env, &["create", "examples/order.stm", "Order", "--id", "s-1"]).trim(),
        "s-1"
    );
    wait_show(&env, "s-1", &["[Order] RUNNING", "at Draft"]);
    let read = harel(
        r#"
before = show("s-1")
runner.send("s-1", Event(kind="Submit", data={"amount": 7.0}))
print(json.dumps(before))
"#,
    );
    assert_eq!(read["status"], "RUNNING", "{read}");
    assert_eq!(read["active_path"], "Draft");
    wait_show(&env, "s-1", &["RUNNING", "at Payment.Charging"]);
    // the Payment deadline is a timer in harel's timers table (no due index): it is there
    let read = harel(
        r#"print(json.dumps({"exe": show("s-1"), "timers": [list(t) for t in store.due_timers(1e12)]}))"#,
    );
    assert_eq!(read["exe"]["active_path"], "Payment.Charging", "{read}");
    assert_eq!(read["exe"]["context"]["amount"], 7.0);
    assert!(
        read["timers"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t[0] == "s-1" && t[1] == "Payment")),
        "{read}"
    );
    // the operator commands use harel's queue too
    ok(&env, &["send", "s-1", r#"PaymentOk:{"receipt": "r-2"}"#]);
    ok(&env, &["send", "s-1", "Shipped"]);
    wait_show(&env, "s-1", &["DONE", "at Delivered", "outcome success"]);
    let read = harel(r#"print(json.dumps(show("s-1")))"#);
    assert_eq!(read["status"], "DONE", "{read}");
    drop(local);
}

#[test]
fn a_standard_queue_passed_by_url_is_refused_by_name() {
    let moto = stm_testkit::moto_blocking();
    let prefix = stm_testkit::unique_prefix("joins_std");
    let name = format!("{prefix}-standard");
    let made = python(
        &[("ENDPOINT", moto.endpoint()), ("QUEUE", &name)],
        r#"
import json, os
import boto3
sqs = boto3.client("sqs", endpoint_url=os.environ["ENDPOINT"], region_name="us-east-1",
                   aws_access_key_id="test", aws_secret_access_key="test")
print(json.dumps({"url": sqs.create_queue(QueueName=os.environ["QUEUE"])["QueueUrl"]}))
"#,
    );
    let url = made["url"].as_str().expect("url").to_string();
    let env = deployment(&prefix, &url);
    let expected = format!(
        "error: configuration error: queue {name} exists but is not a FIFO queue (FifoQueue=false): \
         delete it or pass another --queue"
    );

    let out = run_until_exit(stm_local(&env), Duration::from_secs(60))
        .expect("stm local kept running on a standard queue");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.lines().any(|l| l == expected), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The operator commands run under the template's OperatorPolicy, which names only the
    // deployment's queue: on AWS a queue outside it is AccessDenied before any check of
    // ours, and the strict layer says so, in one readable line. (Their FIFO check itself,
    // `SqsQueue::check_event_queue`, is tested in stm-runtime's queue_join.rs.)
    let out = stm(&env, &["send", "x-1", "Go"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.lines().any(|l| l.starts_with("error: ")
            && l.contains("AccessDenied: User: ")
            && l.contains("is not authorized to perform: sqs:getqueueattributes")),
        "{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("ServiceError("),
        "{err}"
    );
}

#[test]
fn a_table_keyed_otherwise_is_refused_by_name() {
    let moto = stm_testkit::moto_blocking();
    let prefix = stm_testkit::unique_prefix("joins_key");
    python(
        &[("ENDPOINT", moto.endpoint()), ("PREFIX", &prefix)],
        r#"
import os
import boto3
db = boto3.client("dynamodb", endpoint_url=os.environ["ENDPOINT"], region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
db.create_table(TableName=os.environ["PREFIX"] + "_counters", BillingMode="PAY_PER_REQUEST",
                KeySchema=[{"AttributeName": "name", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "name", "AttributeType": "S"}])
print("{}")
"#,
    );
    let env = deployment(&prefix, &format!("{prefix}-events.fifo"));
    let out = run_until_exit(stm_local(&env), Duration::from_secs(60))
        .expect("stm local kept running on a table keyed otherwise");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let expected = format!(
        "error: DynamoDB tables {prefix}_* at {} (us-east-1): store backend error: table {prefix}_counters exists with \
         the key schema name (HASH, S) but stm and harel 0.9.0 key it by id (HASH, S): delete it or use \
         another table prefix (--prefix, STM_TABLE_PREFIX)",
        moto.endpoint()
    );
    assert!(err.lines().any(|l| l == expected), "{err}");
}
