//! `ensure_tables` on tables that exist already: harel 0.9.0's seven (its own
//! `CreateTable` calls, none of our additions) are joined, with the sweep falling back to
//! the seed's full scan for want of the due index; a table keyed otherwise is refused with
//! one message naming the table, the key schema it has and the one we (and harel) need.
//! Before, `ensure_tables` took any existing table on trust, and the first read or commit
//! failed with a DynamoDB validation error far from the cause.

use serde_json::Value;
use stm_core::Execution;
use stm_store::{Commit, CreateOptions, DynamoDbStore, ExecutionStore, StoreError, TimerOp};

/// Run `code` with boto3's DynamoDB client `client` (and harel's store class) on moto.
fn python(prefix: &str, code: &str) -> Value {
    let moto = stm_testkit::moto_blocking();
    let script = format!(
        r#"
import json, os
import boto3
from harel.engine.store import DynamoDBStore
client = boto3.client("dynamodb", endpoint_url=os.environ["ENDPOINT"], region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
prefix = os.environ["PREFIX"]
{code}
"#
    );
    let text = stm_testkit::run_python(&script, &[("ENDPOINT", moto.endpoint()), ("PREFIX", prefix)], "");
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("python printed no JSON ({e}):\n{text}"))
}

async fn open(prefix: &str, create_schema: bool) -> Result<DynamoDbStore, StoreError> {
    let moto = stm_testkit::moto().await;
    let options = CreateOptions {
        prefix: prefix.to_string(),
        create_schema,
        connect_attempts: 3,
        ..CreateOptions::default()
    };
    DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harels_tables_are_joined_without_the_due_index() {
    let prefix = stm_testkit::unique_prefix("join_tables");
    let made = python(
        &prefix,
        r#"
DynamoDBStore(client, prefix=prefix, create_schema=True)
t = client.describe_table(TableName=f"{prefix}_timers")["Table"]
print(json.dumps({"indexes": len(t.get("GlobalSecondaryIndexes", []))}))
"#,
    );
    assert_eq!(made["indexes"], 0, "harel makes no index");

    let store = open(&prefix, true)
        .await
        .expect("ensure_tables joins harel's tables");
    assert!(
        !store.has_due_index(),
        "the timers table has no due index: the sweep is the full scan"
    );
    // nothing was added to harel's table
    let out = store
        .client()
        .describe_table()
        .table_name(store.table_name("timers"))
        .send()
        .await
        .expect("describe");
    assert!(out.table().expect("table").global_secondary_indexes().is_empty());

    // it works: a commit with a timer, and the sweep finds it by the full scan
    let mut e = Execution::new("jt-1", "def");
    store
        .commit(
            &mut e,
            Commit {
                timers: vec![TimerOp::Schedule {
                    path: "root.a".into(),
                    fire_at: 10.0,
                }],
                ..Commit::default()
            },
        )
        .await
        .expect("commit on harel's tables");
    let (due, stats) = store.due_timers_with_stats(100.0).await.expect("sweep");
    assert!(stats.full_scan || stats.index_missing, "{stats:?}");
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!((due[0].execution_id.as_str(), due[0].fire_at), ("jt-1", 10.0));

    // the functions' check (create_schema = false) accepts them too
    let checked = open(&prefix, false).await.expect("check_tables");
    assert!(!checked.has_due_index());
    // and harel reads what we wrote
    let seen = python(
        &prefix,
        r#"
store = DynamoDBStore(client, prefix=prefix, create_schema=False)
print(json.dumps([list(t) for t in store.due_timers(1e10)]))
"#,
    );
    assert_eq!(seen, serde_json::json!([["jt-1", "root.a", 10.0]]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_keyed_otherwise_is_refused_by_name() {
    // another partition key name
    let prefix = stm_testkit::unique_prefix("join_badkey");
    python(
        &prefix,
        r#"
client.create_table(TableName=f"{prefix}_executions", BillingMode="PAY_PER_REQUEST",
                    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                    AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
print("{}")
"#,
    );
    let expected = format!(
        "store backend error: table {prefix}_executions exists with the key schema pk (HASH, S) but stm \
         and harel 0.9.0 key it by id (HASH, S): delete it or use another table prefix (--prefix, \
         STM_TABLE_PREFIX)"
    );
    match open(&prefix, true).await {
        Err(err) => assert_eq!(err.to_string(), expected),
        Ok(_) => panic!("ensure_tables accepted {prefix}_executions keyed by pk"),
    }
    // the other six were still created; the functions' check gives the same message
    match open(&prefix, false).await {
        Err(err) => assert_eq!(err.to_string(), expected),
        Ok(_) => panic!("check_tables accepted {prefix}_executions keyed by pk"),
    }

    // the right names, a wrong type and a missing sort key
    let prefix = stm_testkit::unique_prefix("join_badtype");
    python(
        &prefix,
        r#"
client.create_table(TableName=f"{prefix}_timers", BillingMode="PAY_PER_REQUEST",
                    KeySchema=[{"AttributeName": "execution_id", "KeyType": "HASH"}],
                    AttributeDefinitions=[{"AttributeName": "execution_id", "AttributeType": "S"}])
client.create_table(TableName=f"{prefix}_outbox", BillingMode="PAY_PER_REQUEST",
                    KeySchema=[{"AttributeName": "seq", "KeyType": "HASH"}],
                    AttributeDefinitions=[{"AttributeName": "seq", "AttributeType": "S"}])
print("{}")
"#,
    );
    match open(&prefix, true).await {
        // reported in the tables' order: outbox before timers
        Err(err) => assert_eq!(
            err.to_string(),
            format!(
                "store backend error: table {prefix}_outbox exists with the key schema seq (HASH, S) but \
                 stm and harel 0.9.0 key it by seq (HASH, N): delete it or use another table prefix \
                 (--prefix, STM_TABLE_PREFIX)"
            )
        ),
        Ok(_) => panic!("ensure_tables accepted {prefix}_outbox keyed by a string seq"),
    }
    python(
        &prefix,
        r#"
client.delete_table(TableName=f"{prefix}_outbox")
print("{}")
"#,
    );
    match open(&prefix, true).await {
        Err(err) => assert_eq!(
            err.to_string(),
            format!(
                "store backend error: table {prefix}_timers exists with the key schema execution_id (HASH, S) \
                 but stm and harel 0.9.0 key it by execution_id (HASH, S) + path (RANGE, S): delete it or \
                 use another table prefix (--prefix, STM_TABLE_PREFIX)"
            )
        ),
        Ok(_) => panic!("ensure_tables accepted {prefix}_timers without its sort key"),
    }
}
