//! The two sides: harel's `DynamoDBStore` in a Python process on moto, and our store on
//! the same tables.

use serde_json::Value;
use stm_core::Map;
use stm_store::{CreateOptions, DynamoDbStore};

/// The Python side: a boto3 client on moto and harel's store on `$PREFIX`.
pub(crate) const PRELUDE: &str = r#"
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

pub(crate) fn python(prefix: &str, code: &str, stdin: &str) -> Value {
    python_with(prefix, code, stdin, false)
}

/// `create_schema`: harel creates its tables (else it only checks they exist).
pub(crate) fn python_with(prefix: &str, code: &str, stdin: &str, create_schema: bool) -> Value {
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

pub(crate) async fn our_store(prefix: &str) -> DynamoDbStore {
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

pub(crate) fn obj(v: Value) -> Map {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}
