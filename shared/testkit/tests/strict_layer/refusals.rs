//! Every rule refuses a request that breaks it, with AWS's code, and counts it: one case
//! per way of breaking each rule in the layer's registry.

use serde_json::{json, Value};
use stm_testkit::strict::{self, Principal};

use crate::support::{ddb, entry, events, fifo_message, fixture, sqs, Fixture};

/// One case: the rule, the request that breaks it, the code AWS answers.
struct Case {
    rule: &'static str,
    service: &'static str,
    operation: &'static str,
    body: Value,
    code: &'static str,
    principal: Principal,
}

fn case(
    rule: &'static str,
    service: &'static str,
    operation: &'static str,
    body: Value,
    code: &'static str,
) -> Case {
    Case {
        rule,
        service,
        operation,
        body,
        code,
        principal: Principal::Admin,
    }
}

fn cases(f: &Fixture) -> Vec<Case> {
    let q = f.fifo_url.as_str();
    let long = "x".repeat(129);
    let big_body = "b".repeat(120 * 1024);
    let ten_big: Vec<Value> = (0..10).map(|i| entry(&format!("e{i}"), "g", &big_body)).collect();
    let mut eleven: Vec<Value> = (0..11).map(|i| entry(&format!("e{i}"), "g", "x")).collect();
    eleven.truncate(11);
    let attrs11: serde_json::Map<String, Value> = (0..11)
        .map(|i| (format!("a{i}"), json!({"DataType": "String", "StringValue": "v"})))
        .collect();
    let exe = f.executions.as_str();
    let item = |id: &str| json!({"id": {"S": id}, "data": {"S": "{}"}});
    let bus_entry = |source: &str, detail: &str| json!({"Source": source, "DetailType": "t", "Detail": detail, "EventBusName": "default"});
    let big_detail = format!("{{\"a\": \"{}\"}}", "x".repeat(130 * 1024));
    let put = |id: &str| json!({"Put": {"TableName": exe, "Item": item(id)}});
    vec![
        case(
            "sqs.group_id.missing",
            "sqs",
            "SendMessage",
            json!({"QueueUrl": q, "MessageBody": "x", "MessageDeduplicationId": "d"}),
            "MissingParameter",
        ),
        case(
            "sqs.group_id.format",
            "sqs",
            "SendMessage",
            fifo_message(q, "a b", "d", "x"),
            "InvalidParameterValue",
        ),
        case(
            "sqs.group_id.format",
            "sqs",
            "SendMessage",
            fifo_message(q, &long, "d", "x"),
            "InvalidParameterValue",
        ),
        case(
            "sqs.group_id.format",
            "sqs",
            "SendMessage",
            fifo_message(q, "é", "d", "x"),
            "InvalidParameterValue",
        ),
        case(
            "sqs.dedup_id.missing",
            "sqs",
            "SendMessage",
            json!({"QueueUrl": q, "MessageBody": "x", "MessageGroupId": "g"}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.dedup_id.format",
            "sqs",
            "SendMessage",
            fifo_message(q, "g", &long, "x"),
            "InvalidParameterValue",
        ),
        case(
            "sqs.body.empty",
            "sqs",
            "SendMessage",
            fifo_message(q, "g", "d", ""),
            "MissingParameter",
        ),
        case(
            "sqs.body.characters",
            "sqs",
            "SendMessage",
            fifo_message(q, "g", "d", "a\u{1}b"),
            "InvalidMessageContents",
        ),
        case(
            "sqs.body.size",
            "sqs",
            "SendMessage",
            json!({"QueueUrl": f.small_url, "MessageBody": "y".repeat(1025)}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.batch.empty",
            "sqs",
            "SendMessageBatch",
            json!({"QueueUrl": q, "Entries": []}),
            "EmptyBatchRequest",
        ),
        case(
            "sqs.batch.entries",
            "sqs",
            "SendMessageBatch",
            json!({"QueueUrl": q, "Entries": eleven}),
            "TooManyEntriesInBatchRequest",
        ),
        case(
            "sqs.batch.bytes",
            "sqs",
            "SendMessageBatch",
            json!({"QueueUrl": q, "Entries": ten_big}),
            "BatchRequestTooLong",
        ),
        case(
            "sqs.batch.entry_id",
            "sqs",
            "SendMessageBatch",
            json!({"QueueUrl": q, "Entries": [entry("a:b", "g", "x")]}),
            "InvalidBatchEntryId",
        ),
        case(
            "sqs.batch.distinct_ids",
            "sqs",
            "SendMessageBatch",
            json!({"QueueUrl": q, "Entries": [entry("a", "g", "x"), entry("a", "g", "y")]}),
            "BatchEntryIdsNotDistinct",
        ),
        case(
            "sqs.delay.fifo",
            "sqs",
            "SendMessage",
            {
                let mut m = fifo_message(q, "g", "d", "x");
                m["DelaySeconds"] = json!(5);
                m
            },
            "InvalidParameterValue",
        ),
        case(
            "sqs.delay.range",
            "sqs",
            "SendMessage",
            json!({"QueueUrl": f.small_url, "MessageBody": "x", "DelaySeconds": 901}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.attributes.count",
            "sqs",
            "SendMessage",
            json!({"QueueUrl": f.small_url, "MessageBody": "x", "MessageAttributes": attrs11}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.attributes.name",
            "sqs",
            "SendMessage",
            json!({"QueueUrl": f.small_url, "MessageBody": "x", "MessageAttributes": {"AWS.kind": {"DataType": "String", "StringValue": "v"}}}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.attributes.type",
            "sqs",
            "SendMessage",
            json!({"QueueUrl": f.small_url, "MessageBody": "x", "MessageAttributes": {"kind": {"DataType": "Text", "StringValue": "v"}}}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.attributes.value",
            "sqs",
            "SendMessage",
            json!({"QueueUrl": f.small_url, "MessageBody": "x", "MessageAttributes": {"kind": {"DataType": "String", "StringValue": ""}}}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.system_attributes",
            "sqs",
            "SendMessage",
            json!({"QueueUrl": f.small_url, "MessageBody": "x", "MessageSystemAttributes": {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=zz"}}}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.visibility.range",
            "sqs",
            "ChangeMessageVisibility",
            json!({"QueueUrl": q, "ReceiptHandle": "r", "VisibilityTimeout": 43_201}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.visibility.range",
            "sqs",
            "ChangeMessageVisibility",
            json!({"QueueUrl": q, "ReceiptHandle": "r", "VisibilityTimeout": -1}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.receive.max_messages",
            "sqs",
            "ReceiveMessage",
            json!({"QueueUrl": q, "MaxNumberOfMessages": 11}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.receive.wait",
            "sqs",
            "ReceiveMessage",
            json!({"QueueUrl": q, "WaitTimeSeconds": 21}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.queue_attributes.range",
            "sqs",
            "CreateQueue",
            json!({"QueueName": "too-big", "Attributes": {"MaximumMessageSize": "1048577"}}),
            "InvalidAttributeValue",
        ),
        case(
            "sqs.queue_name",
            "sqs",
            "CreateQueue",
            // 76 + ".fifo": 81 characters, one past SQS's 80
            json!({"QueueName": format!("{}.fifo", "q".repeat(76)), "Attributes": {"FifoQueue": "true"}}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.queue_name",
            "sqs",
            "CreateQueue",
            json!({"QueueName": "orders.events"}),
            "InvalidParameterValue",
        ),
        case(
            "sqs.queue_name",
            "sqs",
            "CreateQueue",
            json!({"QueueName": "orders", "Attributes": {"FifoQueue": "true"}}),
            "InvalidParameterValue",
        ),
        case(
            "dynamodb.table_name",
            "dynamodb",
            "CreateTable",
            json!({"TableName": format!("t_{}", "x".repeat(254)), "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}], "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}], "BillingMode": "PAY_PER_REQUEST"}),
            "ValidationException",
        ),
        case(
            "dynamodb.table_name",
            "dynamodb",
            "CreateTable",
            json!({"TableName": "orders executions", "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}], "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}], "BillingMode": "PAY_PER_REQUEST"}),
            "ValidationException",
        ),
        case(
            "dynamodb.key.missing",
            "dynamodb",
            "PutItem",
            json!({"TableName": exe, "Item": {"data": {"S": "{}"}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.key.empty",
            "dynamodb",
            "PutItem",
            json!({"TableName": exe, "Item": item("")}),
            "ValidationException",
        ),
        case(
            "dynamodb.key.empty",
            "dynamodb",
            "PutItem",
            json!({"TableName": f.timers, "Item": {"execution_id": {"S": "e"}, "path": {"S": "A"}, "due_shard": {"S": ""}, "fire_at": {"N": "1"}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.key.size",
            "dynamodb",
            "GetItem",
            json!({"TableName": exe, "Key": {"id": {"S": "k".repeat(2049)}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.key.size",
            "dynamodb",
            "PutItem",
            json!({"TableName": f.processed, "Item": {"execution_id": {"S": "e"}, "event_id": {"S": "v".repeat(1025)}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.item.size",
            "dynamodb",
            "PutItem",
            json!({"TableName": exe, "Item": {"id": {"S": "big"}, "data": {"S": "z".repeat(400 * 1024)}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.item.size",
            "dynamodb",
            "TransactWriteItems",
            json!({"TransactItems": [put("ok"), {"Put": {"TableName": exe, "Item": {"id": {"S": "big"}, "data": {"S": "z".repeat(400 * 1024)}}}}]}),
            "TransactionCanceledException",
        ),
        case(
            "dynamodb.number.range",
            "dynamodb",
            "PutItem",
            json!({"TableName": exe, "Item": {"id": {"S": "n1"}, "n": {"N": "1E+126"}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.number.range",
            "dynamodb",
            "PutItem",
            json!({"TableName": exe, "Item": {"id": {"S": "n2"}, "m": {"M": {"l": {"L": [{"N": format!("1{}", "0".repeat(129))}]}}}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.number.range",
            "dynamodb",
            "UpdateItem",
            json!({"TableName": exe, "Key": {"id": {"S": "n3"}}, "UpdateExpression": "SET #n = :n", "ExpressionAttributeNames": {"#n": "n"}, "ExpressionAttributeValues": {":n": {"N": "1E-131"}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.number.range",
            "dynamodb",
            "DeleteItem",
            json!({"TableName": exe, "Key": {"id": {"S": "n4"}}, "ConditionExpression": "#n < :n", "ExpressionAttributeNames": {"#n": "n"}, "ExpressionAttributeValues": {":n": {"N": "-1e200"}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.number.range",
            "dynamodb",
            "BatchWriteItem",
            json!({"RequestItems": {exe: [{"PutRequest": {"Item": item("n5")}}, {"PutRequest": {"Item": {"id": {"S": "n6"}, "s": {"NS": ["1", "1e999"]}}}}]}}),
            "ValidationException",
        ),
        case(
            "dynamodb.number.range",
            "dynamodb",
            "TransactWriteItems",
            json!({"TransactItems": [put("n7"), {"Put": {"TableName": f.timers, "Item": {"execution_id": {"S": "e"}, "path": {"S": "n8"}, "due_shard": {"S": "1"}, "fire_at": {"N": "1e+130"}}}}]}),
            "TransactionCanceledException",
        ),
        case(
            "dynamodb.number.precision",
            "dynamodb",
            "PutItem",
            json!({"TableName": exe, "Item": {"id": {"S": "p1"}, "n": {"N": "123456789012345678901234567890123456789"}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.number.precision",
            "dynamodb",
            "TransactWriteItems",
            json!({"TransactItems": [{"Update": {"TableName": exe, "Key": {"id": {"S": "p2"}}, "UpdateExpression": "SET #n = :n", "ExpressionAttributeNames": {"#n": "n"}, "ExpressionAttributeValues": {":n": {"N": "0.000123456789012345678901234567890123456789"}}}}]}),
            "TransactionCanceledException",
        ),
        case(
            "dynamodb.transaction.actions",
            "dynamodb",
            "TransactWriteItems",
            json!({"TransactItems": (0..101).map(|i| put(&format!("i{i}"))).collect::<Vec<_>>()}),
            "ValidationException",
        ),
        case(
            "dynamodb.transaction.bytes",
            "dynamodb",
            "TransactWriteItems",
            json!({"TransactItems": (0..11).map(|i| json!({"Put": {"TableName": exe, "Item": {"id": {"S": format!("t{i}")}, "data": {"S": "z".repeat(399 * 1024)}}}})).collect::<Vec<_>>()}),
            "ValidationException",
        ),
        case(
            "dynamodb.transaction.one_item_twice",
            "dynamodb",
            "TransactWriteItems",
            json!({"TransactItems": [put("same"), {"Delete": {"TableName": exe, "Key": {"id": {"S": "same"}}}}]}),
            "ValidationException",
        ),
        case(
            "dynamodb.transaction.client_request_token",
            "dynamodb",
            "TransactWriteItems",
            json!({"TransactItems": [put("tok")], "ClientRequestToken": "t".repeat(37)}),
            "ValidationException",
        ),
        case(
            "dynamodb.expression.reserved_word",
            "dynamodb",
            "UpdateItem",
            json!({"TableName": exe, "Key": {"id": {"S": "r"}}, "UpdateExpression": "SET status = :s", "ExpressionAttributeValues": {":s": {"S": "x"}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.expression.reserved_word",
            "dynamodb",
            "Scan",
            json!({"TableName": exe, "FilterExpression": "begins_with(data, :p)", "ExpressionAttributeValues": {":p": {"S": "x"}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.expression.reserved_word",
            "dynamodb",
            "TransactWriteItems",
            json!({"TransactItems": [{"Put": {"TableName": exe, "Item": item("c"), "ConditionExpression": "attribute_not_exists(name)"}}]}),
            "ValidationException",
        ),
        case(
            "dynamodb.consistent_read.gsi",
            "dynamodb",
            "Query",
            json!({"TableName": f.timers, "IndexName": "due_index", "ConsistentRead": true, "KeyConditionExpression": "due_shard = :s", "ExpressionAttributeValues": {":s": {"S": "0"}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.batch_get.keys",
            "dynamodb",
            "BatchGetItem",
            json!({"RequestItems": {exe: {"Keys": (0..101).map(|i| json!({"id": {"S": format!("k{i}")}})).collect::<Vec<_>>()}}}),
            "ValidationException",
        ),
        case(
            "dynamodb.batch_write.requests",
            "dynamodb",
            "BatchWriteItem",
            json!({"RequestItems": {exe: (0..26).map(|i| json!({"PutRequest": {"Item": item(&format!("w{i}"))}})).collect::<Vec<_>>()}}),
            "ValidationException",
        ),
        case(
            "dynamodb.batch_write.duplicates",
            "dynamodb",
            "BatchWriteItem",
            json!({"RequestItems": {exe: [{"PutRequest": {"Item": item("dup")}}, {"DeleteRequest": {"Key": {"id": {"S": "dup"}}}}]}}),
            "ValidationException",
        ),
        case(
            "events.batch.entries",
            "events",
            "PutEvents",
            json!({"Entries": (0..11).map(|_| bus_entry("stm", "{}")).collect::<Vec<_>>()}),
            "ValidationException",
        ),
        case(
            "events.batch.bytes",
            "events",
            "PutEvents",
            json!({"Entries": [bus_entry("stm", &big_detail), bus_entry("stm", &big_detail)]}),
            "ValidationException",
        ),
        // an entry rule fails its entry alone, in a 200 answer
        case(
            "events.entry.source",
            "events",
            "PutEvents",
            json!({"Entries": [bus_entry("aws.states", "{}")]}),
            "NotAuthorizedForSourceException",
        ),
        case(
            "events.entry.detail",
            "events",
            "PutEvents",
            json!({"Entries": [bus_entry("stm", "[1]")]}),
            "MalformedDetail",
        ),
        Case {
            principal: Principal::Worker,
            ..case(
                "iam",
                "dynamodb",
                "DeleteTable",
                json!({"TableName": exe}),
                "AccessDeniedException",
            )
        },
        Case {
            principal: Principal::Relay,
            ..case(
                "iam",
                "dynamodb",
                "GetItem",
                json!({"TableName": exe, "Key": {"id": {"S": "x"}}}),
                "AccessDeniedException",
            )
        },
        Case {
            principal: Principal::Sweeper,
            ..case(
                "iam",
                "sqs",
                "ChangeMessageVisibility",
                json!({"QueueUrl": q, "ReceiptHandle": "r", "VisibilityTimeout": 0}),
                "AccessDenied",
            )
        },
    ]
}

#[test]
fn every_rule_refuses_a_request_that_breaks_it() {
    let f = fixture("strict_rules");
    let moto = stm_testkit::moto_blocking();
    let mut covered = std::collections::BTreeSet::new();
    for c in cases(&f) {
        let before = moto.strict().refusals().get(c.rule).copied().unwrap_or(0);
        let endpoint = moto.endpoint_as(c.principal);
        let answer = match c.service {
            "sqs" => sqs(endpoint, c.operation, c.body.clone()),
            "events" => events(endpoint, c.operation, c.body.clone()),
            _ => ddb(endpoint, c.operation, c.body.clone()),
        };
        // EventBridge fails an entry alone: a 200 whose entry carries the code
        let entry_code = (answer.status == 200)
            .then(|| answer.body["Entries"][0]["ErrorCode"].as_str())
            .flatten();
        let code = entry_code.unwrap_or(&answer.code);
        assert!(
            (answer.status >= 400 || entry_code.is_some())
                && code.trim_start_matches("AWS.SimpleQueueService.") == c.code,
            "{} ({} {}): expected {} from the layer, got {} {} {}",
            c.rule,
            c.service,
            c.operation,
            c.code,
            answer.status,
            answer.code,
            answer.body
        );
        let after = moto.strict().refusals().get(c.rule).copied().unwrap_or(0);
        assert!(
            after > before,
            "{}: refused, but not by this rule ({})",
            c.rule,
            answer.body
        );
        covered.insert(c.rule);
    }
    let all: std::collections::BTreeSet<&str> = strict::RULES.iter().copied().collect();
    let missing: Vec<_> = all.difference(&covered).collect();
    assert!(missing.is_empty(), "rules without a refusal case: {missing:?}");
    let _ = f.admin;
}
