//! The strict layer's eventually consistent GSIs, over moto: a table whose prefix lags
//! answers a `Query` on its index with the index as it was (an item put since hidden, one
//! deleted since still listed, one re-written since with its old index key), while its
//! `GetItem` and another test's tables stay live; a lag in seconds catches up.

use std::time::Duration;

use serde_json::{json, Value};
use stm_testkit::http::json_call;

fn ddb(endpoint: &str, op: &str, body: Value) -> Value {
    let answer = json_call(endpoint, &format!("DynamoDB_20120810.{op}"), &body);
    assert_eq!(answer.status, 200, "{op}: {}", answer.body);
    answer.body
}

/// A timers table (harel's keys, our due index: `due_shard` / `fire_at`, KEYS_ONLY).
fn timers_table(endpoint: &str, name: &str) {
    ddb(
        endpoint,
        "CreateTable",
        json!({
            "TableName": name,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [
                {"AttributeName": "execution_id", "AttributeType": "S"},
                {"AttributeName": "path", "AttributeType": "S"},
                {"AttributeName": "due_shard", "AttributeType": "S"},
                {"AttributeName": "fire_at", "AttributeType": "N"},
            ],
            "KeySchema": [
                {"AttributeName": "execution_id", "KeyType": "HASH"},
                {"AttributeName": "path", "KeyType": "RANGE"},
            ],
            "GlobalSecondaryIndexes": [{
                "IndexName": "due_index",
                "KeySchema": [
                    {"AttributeName": "due_shard", "KeyType": "HASH"},
                    {"AttributeName": "fire_at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }],
        }),
    );
}

fn arm(endpoint: &str, table: &str, path: &str, fire_at: f64) {
    ddb(
        endpoint,
        "PutItem",
        json!({"TableName": table, "Item": {
            "execution_id": {"S": "e1"}, "path": {"S": path},
            "due_shard": {"S": "due#0"}, "fire_at": {"N": fire_at.to_string()},
        }}),
    );
}

/// `(path, fire_at)` of the index entries due by `now`, as the sweeper reads them.
fn due(endpoint: &str, table: &str, now: f64) -> Vec<(String, f64)> {
    let answer = ddb(
        endpoint,
        "Query",
        json!({
            "TableName": table, "IndexName": "due_index",
            "KeyConditionExpression": "#s = :s AND #f <= :now",
            "ExpressionAttributeNames": {"#s": "due_shard", "#f": "fire_at"},
            "ExpressionAttributeValues": {":s": {"S": "due#0"}, ":now": {"N": now.to_string()}},
        }),
    );
    assert_eq!(
        answer["Count"].as_u64(),
        answer["Items"].as_array().map(|i| i.len() as u64),
        "Count recounted: {answer}"
    );
    answer["Items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            let path = i["path"]["S"].as_str().unwrap_or_default().to_string();
            let fire_at = i["fire_at"]["N"]
                .as_str()
                .and_then(|n| n.parse().ok())
                .unwrap_or(f64::NAN);
            (path, fire_at)
        })
        .collect()
}

fn armed(endpoint: &str, table: &str, path: &str) -> Option<String> {
    let answer = ddb(
        endpoint,
        "GetItem",
        json!({"TableName": table, "ConsistentRead": true,
               "Key": {"execution_id": {"S": "e1"}, "path": {"S": path}}}),
    );
    answer["Item"]["fire_at"]["N"].as_str().map(str::to_string)
}

#[test]
fn a_held_index_shows_the_table_as_it_was() {
    let moto = stm_testkit::moto_blocking();
    let endpoint = moto.endpoint();
    let prefix = stm_testkit::unique_prefix("lag_held");
    let table = format!("{prefix}_timers");
    let other = format!("{}_timers", stm_testkit::unique_prefix("lag_live"));
    timers_table(endpoint, &table);
    timers_table(endpoint, &other);
    arm(endpoint, &table, "A", 10.0);
    arm(endpoint, &table, "Gone", 20.0);
    arm(endpoint, &other, "A", 10.0);

    moto.strict().hold_indexes(&prefix);
    // re-armed later, cancelled, newly armed: none of it reaches the held index
    arm(endpoint, &table, "A", 50.0);
    ddb(
        endpoint,
        "DeleteItem",
        json!({"TableName": table, "Key": {"execution_id": {"S": "e1"}, "path": {"S": "Gone"}}}),
    );
    arm(endpoint, &table, "New", 5.0);
    arm(endpoint, &other, "A", 50.0);

    assert_eq!(
        due(endpoint, &table, 30.0),
        vec![("A".to_string(), 10.0), ("Gone".to_string(), 20.0)],
        "the index as held: A at its old fire_at, Gone still listed, New not yet"
    );
    assert_eq!(
        due(endpoint, &table, 15.0),
        vec![("A".to_string(), 10.0)],
        "the key condition applies to the old entries"
    );
    // the table itself is read consistently, and another prefix's index is live
    assert_eq!(armed(endpoint, &table, "A").as_deref(), Some("50"));
    assert_eq!(armed(endpoint, &table, "Gone"), None);
    assert_eq!(due(endpoint, &other, 30.0), vec![]);
    assert_eq!(due(endpoint, &other, 60.0), vec![("A".to_string(), 50.0)]);

    moto.strict().live_indexes(&prefix);
    assert_eq!(
        due(endpoint, &table, 60.0),
        vec![("New".to_string(), 5.0), ("A".to_string(), 50.0)],
        "live again"
    );
}

#[test]
fn a_lagging_index_catches_up() {
    let moto = stm_testkit::moto_blocking();
    let endpoint = moto.endpoint();
    let prefix = stm_testkit::unique_prefix("lag_secs");
    let table = format!("{prefix}_timers");
    timers_table(endpoint, &table);
    let lag = Duration::from_secs(3);
    moto.strict().lag_indexes(&prefix, lag);
    arm(endpoint, &table, "A", 10.0);
    arm(endpoint, &table, "A", 12.0);
    // (asked at once: well within the lag, on any machine)
    assert_eq!(due(endpoint, &table, 100.0), vec![], "not propagated yet");
    std::thread::sleep(lag + Duration::from_millis(300));
    assert_eq!(due(endpoint, &table, 100.0), vec![("A".to_string(), 12.0)]);
    moto.strict().live_indexes(&prefix);
}
