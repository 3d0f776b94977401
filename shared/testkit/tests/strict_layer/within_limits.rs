//! Requests that keep the rules, up to AWS's limits (sizes, numbers, aliased reserved
//! words, names), go through the layer to moto.

use serde_json::{json, Value};
use stm_testkit::strict;

use crate::support::{create_table, ddb, entry, fifo_message, fixture, ok, sqs};

#[test]
fn requests_that_keep_the_rules_reach_moto() {
    let f = fixture("strict_pass");
    let a = &f.admin;
    let exe = f.executions.as_str();
    ok(
        &sqs(
            a,
            "SendMessage",
            fifo_message(&f.fifo_url, "order-1:Pay/x~y", "d1", "{}"),
        ),
        "a punctuation group id",
    );
    let zero_delay = {
        let mut m = fifo_message(&f.fifo_url, "g", "d2", "x");
        m["DelaySeconds"] = json!(0);
        m
    };
    ok(&sqs(a, "SendMessage", zero_delay), "DelaySeconds 0 on FIFO");
    let nine: Vec<Value> = (0..9)
        .map(|i| entry(&format!("e{i}"), "g", &"b".repeat(110 * 1024)))
        .collect();
    ok(
        &sqs(
            a,
            "SendMessageBatch",
            json!({"QueueUrl": f.fifo_url, "Entries": nine}),
        ),
        "a 990 KiB batch",
    );
    ok(
        &ddb(
            a,
            "PutItem",
            json!({"TableName": exe, "Item": {"id": {"S": "k".repeat(2048)}, "data": {"S": "{}"}}}),
        ),
        "a 2,048-byte partition key",
    );
    ok(
        &ddb(
            a,
            "UpdateItem",
            json!({"TableName": exe, "Key": {"id": {"S": "u"}}, "UpdateExpression": "SET #s = :s ADD n :one", "ExpressionAttributeNames": {"#s": "status"}, "ExpressionAttributeValues": {":s": {"S": "x"}, ":one": {"N": "1"}}}),
        ),
        "an aliased reserved word",
    );
    ok(
        &ddb(
            a,
            "Query",
            json!({"TableName": f.timers, "IndexName": "due_index", "KeyConditionExpression": "due_shard = :s", "ExpressionAttributeValues": {":s": {"S": "0"}}}),
        ),
        "an eventually consistent GSI query",
    );
    // DynamoDB's number range and precision, at their edges (zeros trimmed)
    ok(
        &ddb(
            a,
            "PutItem",
            json!({"TableName": exe, "Item": {
                "id": {"S": "numbers"},
                "max": {"N": "9.9999999999999999999999999999999999999E+125"},
                "min": {"N": "-1E-130"},
                "zero": {"N": "0"},
                "digits": {"N": "12345678901234567890123456789012345678"},
                "zeros": {"N": format!("0.000{}{}", "12345678901234567890123456789012345678", "0".repeat(60))},
                "set": {"NS": ["1E+125", "-1E-130"]},
            }}),
        ),
        "numbers at DynamoDB's limits",
    );
    ok(
        &ddb(
            a,
            "TransactWriteItems",
            json!({"TransactItems": [{"Put": {"TableName": f.timers, "Item": {"execution_id": {"S": "e"}, "path": {"S": "num"}, "due_shard": {"S": "1"}, "fire_at": {"N": "9007201054740991.0"}}}}]}),
        ),
        "the largest fire_at a validated timeout gives",
    );
    // a sparse index: the key attribute absent is fine
    ok(
        &ddb(
            a,
            "PutItem",
            json!({"TableName": f.timers, "Item": {"execution_id": {"S": "e"}, "path": {"S": "A"}}}),
        ),
        "a sparse GSI item",
    );
    let _ = &f.processed;
}

/// The names at AWS's limits go through: a FIFO queue's 80 characters with `.fifo`, a
/// table's 255.
#[test]
fn names_at_the_limits_reach_moto() {
    let admin = stm_testkit::moto_blocking().endpoint().to_string();
    let prefix = stm_testkit::unique_prefix("names");
    let queue = format!("{prefix}-{}", "q".repeat(80 - prefix.len() - 1 - ".fifo".len()));
    let queue = format!("{queue}.fifo");
    assert_eq!(queue.len(), strict::sqs::MAX_QUEUE_NAME_CHARS);
    ok(
        &sqs(
            &admin,
            "CreateQueue",
            json!({"QueueName": queue, "Attributes": {"FifoQueue": "true"}}),
        ),
        "an 80-character FIFO queue name",
    );
    let table = format!("{prefix}_{}", "t".repeat(255 - prefix.len() - 1));
    create_table(&admin, &table, ("id", "S"), None, None);
}
