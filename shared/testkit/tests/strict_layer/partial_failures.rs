//! One bad part of a request, answered as AWS answers it: a transaction cancelled with a
//! reason per action, a batch whose bad entry fails alone.

use serde_json::json;

use crate::support::{ddb, entry, fixture, ok, sqs};

/// A number DynamoDB cannot hold inside a transaction cancels it, as on AWS: a
/// `TransactionCanceledException` whose reason for that action is `ValidationError` with
/// DynamoDB's message, `None` for the others; nothing of the transaction is written.
#[test]
fn a_number_dynamodb_cannot_hold_cancels_a_transaction_with_its_reason() {
    let f = fixture("strict_numbers");
    let exe = f.executions.as_str();
    let answer = ddb(
        &f.admin,
        "TransactWriteItems",
        json!({"TransactItems": [
            {"Put": {"TableName": exe, "Item": {"id": {"S": "first"}}}},
            {"Put": {"TableName": f.timers, "Item": {"execution_id": {"S": "e"}, "path": {"S": "Waiting"}, "due_shard": {"S": "3"}, "fire_at": {"N": "1e+130"}}}},
            {"Put": {"TableName": exe, "Item": {"id": {"S": "third"}}}},
        ]}),
    );
    assert_eq!(answer.code, "TransactionCanceledException", "{}", answer.body);
    assert_eq!(
        answer.body["CancellationReasons"],
        json!([
            {"Code": "None"},
            {"Code": "ValidationError", "Message": "Number overflow. Attempting to store a number with magnitude larger than supported range"},
            {"Code": "None"},
        ])
    );
    assert!(
        answer.body["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("[None, ValidationError, None]")),
        "{}",
        answer.body
    );
    let got = ddb(
        &f.admin,
        "GetItem",
        json!({"TableName": exe, "Key": {"id": {"S": "first"}}}),
    );
    ok(&got, "GetItem");
    assert!(got.body.get("Item").is_none(), "nothing written: {}", got.body);
}

#[test]
fn a_batch_entry_that_breaks_a_message_rule_fails_alone() {
    let f = fixture("strict_entries");
    let answer = sqs(
        &f.admin,
        "SendMessageBatch",
        json!({"QueueUrl": f.fifo_url, "Entries": [entry("good", "g", "x"), entry("bad", "a b", "y"), entry("also", "g", "z")]}),
    );
    ok(&answer, "the batch");
    let ok_ids: Vec<&str> = answer.body["Successful"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["Id"].as_str())
        .collect();
    assert_eq!(ok_ids, ["good", "also"], "{}", answer.body);
    let failed = &answer.body["Failed"][0];
    assert_eq!(failed["Id"], "bad");
    assert_eq!(failed["SenderFault"], true);
    assert_eq!(failed["Code"], "InvalidParameterValue");
    // only the two good ones reached the queue
    let got = sqs(
        &f.admin,
        "ReceiveMessage",
        json!({"QueueUrl": f.fifo_url, "MaxNumberOfMessages": 10}),
    );
    let bodies: Vec<&str> = got.body["Messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["Body"].as_str())
        .collect();
    assert_eq!(bodies, ["x", "z"]);
}
