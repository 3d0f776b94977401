//! Interop with harel 0.9.0 through the queue, on one moto endpoint: harel's
//! `DistributedRunner` (`DynamoDBStore` + `SqsTransport`) creates executions and sends
//! events onto our FIFO queue, our worker (under the event-source emulation) processes
//! them, and harel reads the finished executions. The reverse: an execution created by
//! our control plane (what `stm create` runs) is readable by harel.

mod common;

use std::sync::Arc;

use common::{moto_parts, Stack};
use serde_json::Value;
use stm_runtime::queue::SqsQueue;
use stm_runtime::Queue;

const HAREL: &str = r#"
import json, os, sys
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
machines = os.environ["MACHINES"]
defs = {name: definition_from_dsl_file(machines, name) for name in ("Flat", "Fork", "Shipment")}
runner = DistributedRunner(store, transport, defs, execution="inline")
def show(eid):
    exe = store.load(eid)
    return None if exe is None else {"status": exe.status.value, "active_path": exe.active_path,
                                     "outcome": exe.outcome, "context": exe.context}
"#;

fn harel(parts: &common::MotoParts, code: &str) -> Value {
    let machines = common::machines_file();
    let env = [
        ("ENDPOINT", parts.endpoint.as_str()),
        ("PREFIX", parts.prefix.as_str()),
        ("QUEUE_URL", parts.urls.queue_url.as_str()),
        ("MACHINES", machines.to_str().unwrap_or_default()),
    ];
    let text = stm_testkit::run_python(&format!("{HAREL}\n{code}"), &env, "");
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("harel printed no JSON ({e}):\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harel_sends_our_worker_processes_harel_reads() {
    let parts = moto_parts("harelq", 2, 5).await;
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()));
    let stack = Stack::realtime(parts.store.clone(), queue);

    let created = harel(
        &parts,
        r#"
runner.create("Flat", execution_id="h-flat")
runner.send("h-flat", Event(kind="Go"))
runner.send("h-flat", Event(kind="Finish"))
runner.create("Fork", execution_id="h-fork")
runner.send("h-fork", Event(kind="Go"))
runner.send("h-fork", Event(kind="PaymentOk", data={"receipt": "r-9"}))
runner.send("h-fork", Event(kind="Packed"))
print(json.dumps({"flat": show("h-flat"), "fork": show("h-fork")}))
"#,
    );
    assert_eq!(
        created["flat"]["status"], "PENDING",
        "harel only queued the Start: {created}"
    );

    stack.drain().await;

    let read = harel(
        &parts,
        r#"print(json.dumps({"flat": show("h-flat"), "fork": show("h-fork")}))"#,
    );
    assert_eq!(read["flat"]["status"], "DONE", "{read}");
    assert_eq!(read["flat"]["active_path"], "Done");
    assert_eq!(read["flat"]["context"]["n"], 1);
    assert_eq!(read["fork"]["status"], "DONE", "{read}");
    assert_eq!(read["fork"]["outcome"], "success");

    // the reverse: what our control plane (`stm create`) writes, harel reads and controls
    stack
        .control
        .create("Shipment", None, Some("o-ship"))
        .await
        .expect("create");
    stack.drain().await;
    let ours = harel(
        &parts,
        r#"
before = show("o-ship")
runner.suspend("o-ship")
print(json.dumps({"before": before, "after": show("o-ship")}))
"#,
    );
    assert_eq!(ours["before"]["status"], "RUNNING", "{ours}");
    assert_eq!(ours["before"]["active_path"], "Transit");
    assert_eq!(
        ours["after"]["status"], "SUSPENDED",
        "harel's control plane writes over ours: {ours}"
    );
}
