//! What every strict-layer test uses: a call in AWS's JSON protocol read as an SDK reads
//! its answer, and the tables and queues (with harel's key shapes) a test makes under its
//! own prefix.

use serde_json::{json, Value};
use stm_testkit::http::{json_call, JsonAnswer};

pub(crate) struct Answer {
    pub(crate) status: u16,
    /// The error code as an SDK reads it: `x-amzn-query-error` (SQS), else `__type`'s tail.
    pub(crate) code: String,
    pub(crate) body: Value,
}

fn call(endpoint: &str, target: &str, body: &Value) -> Answer {
    let JsonAnswer { status, head, body } = json_call(endpoint, target, body);
    let query_code = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("x-amzn-query-error")
            .then(|| v.trim().split(';').next().unwrap_or_default().to_string())
    });
    let code = query_code.unwrap_or_else(|| {
        body["__type"]
            .as_str()
            .and_then(|t| t.rsplit('#').next())
            .unwrap_or_default()
            .to_string()
    });
    Answer { status, code, body }
}

pub(crate) fn ddb(endpoint: &str, op: &str, body: Value) -> Answer {
    call(endpoint, &format!("DynamoDB_20120810.{op}"), &body)
}

pub(crate) fn sqs(endpoint: &str, op: &str, body: Value) -> Answer {
    call(endpoint, &format!("AmazonSQS.{op}"), &body)
}

pub(crate) fn events(endpoint: &str, op: &str, body: Value) -> Answer {
    call(endpoint, &format!("AWSEvents.{op}"), &body)
}

pub(crate) fn ok(a: &Answer, what: &str) {
    assert_eq!(
        a.status, 200,
        "{what}: expected moto to take it, got {} {}",
        a.code, a.body
    );
}

/// A table with harel's key shapes under the test's prefix.
pub(crate) fn create_table(
    endpoint: &str,
    name: &str,
    hash: (&str, &str),
    range: Option<(&str, &str)>,
    gsi: Option<(&str, &str, &str)>,
) {
    let mut attrs = vec![json!({"AttributeName": hash.0, "AttributeType": hash.1})];
    let mut keys = vec![json!({"AttributeName": hash.0, "KeyType": "HASH"})];
    if let Some((n, t)) = range {
        attrs.push(json!({"AttributeName": n, "AttributeType": t}));
        keys.push(json!({"AttributeName": n, "KeyType": "RANGE"}));
    }
    let mut body = json!({"TableName": name, "KeySchema": keys, "BillingMode": "PAY_PER_REQUEST"});
    if let Some((index, h, r)) = gsi {
        attrs.push(json!({"AttributeName": h, "AttributeType": "S"}));
        attrs.push(json!({"AttributeName": r, "AttributeType": "N"}));
        body["GlobalSecondaryIndexes"] = json!([{
            "IndexName": index,
            "KeySchema": [{"AttributeName": h, "KeyType": "HASH"}, {"AttributeName": r, "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        }]);
    }
    body["AttributeDefinitions"] = Value::Array(attrs);
    ok(&ddb(endpoint, "CreateTable", body), "CreateTable");
}

pub(crate) struct Fixture {
    pub(crate) admin: String,
    pub(crate) executions: String,
    pub(crate) processed: String,
    pub(crate) timers: String,
    pub(crate) fifo_url: String,
    pub(crate) small_url: String,
}

pub(crate) fn fixture(tag: &str) -> Fixture {
    let moto = stm_testkit::moto_blocking();
    let admin = moto.endpoint().to_string();
    let prefix = stm_testkit::unique_prefix(tag);
    let executions = format!("{prefix}_executions");
    let processed = format!("{prefix}_processed");
    let timers = format!("{prefix}_timers");
    create_table(&admin, &executions, ("id", "S"), None, None);
    create_table(
        &admin,
        &processed,
        ("execution_id", "S"),
        Some(("event_id", "S")),
        None,
    );
    create_table(
        &admin,
        &timers,
        ("execution_id", "S"),
        Some(("path", "S")),
        Some(("due_index", "due_shard", "fire_at")),
    );
    let fifo = sqs(
        &admin,
        "CreateQueue",
        json!({"QueueName": format!("{prefix}-events.fifo"), "Attributes": {"FifoQueue": "true"}}),
    );
    ok(&fifo, "CreateQueue fifo");
    let small = sqs(
        &admin,
        "CreateQueue",
        json!({"QueueName": format!("{prefix}-timers"), "Attributes": {"MaximumMessageSize": "1024"}}),
    );
    ok(&small, "CreateQueue small");
    Fixture {
        admin,
        executions,
        processed,
        timers,
        fifo_url: fifo.body["QueueUrl"].as_str().unwrap_or_default().to_string(),
        small_url: small.body["QueueUrl"].as_str().unwrap_or_default().to_string(),
    }
}

pub(crate) fn fifo_message(url: &str, group: &str, dedup: &str, body: &str) -> Value {
    json!({"QueueUrl": url, "MessageBody": body, "MessageGroupId": group, "MessageDeduplicationId": dedup})
}

pub(crate) fn entry(id: &str, group: &str, body: &str) -> Value {
    json!({"Id": id, "MessageBody": body, "MessageGroupId": group, "MessageDeduplicationId": format!("d-{id}")})
}
