//! The strict layer refuses what AWS refuses: one request per rule that breaks it (and is
//! refused with AWS's code), beside a request that keeps it (and goes through to moto).
//! Plain HTTP with JSON bodies, as the SDKs send them; moto behind the layer.

use serde_json::{json, Value};
use stm_testkit::http::{json_call, JsonAnswer};
use stm_testkit::strict::{self, Principal};

struct Answer {
    status: u16,
    /// The error code as an SDK reads it: `x-amzn-query-error` (SQS), else `__type`'s tail.
    code: String,
    body: Value,
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

fn ddb(endpoint: &str, op: &str, body: Value) -> Answer {
    call(endpoint, &format!("DynamoDB_20120810.{op}"), &body)
}

fn sqs(endpoint: &str, op: &str, body: Value) -> Answer {
    call(endpoint, &format!("AmazonSQS.{op}"), &body)
}

fn ok(a: &Answer, what: &str) {
    assert_eq!(
        a.status, 200,
        "{what}: expected moto to take it, got {} {}",
        a.code, a.body
    );
}

/// A table with the seed's key shapes under the test's prefix.
fn create_table(
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

struct Fixture {
    admin: String,
    executions: String,
    processed: String,
    timers: String,
    fifo_url: String,
    small_url: String,
}

fn fixture(tag: &str) -> Fixture {
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

fn fifo_message(url: &str, group: &str, dedup: &str, body: &str) -> Value {
    json!({"QueueUrl": url, "MessageBody": body, "MessageGroupId": group, "MessageDeduplicationId": dedup})
}

fn entry(id: &str, group: &str, body: &str) -> Value {
    json!({"Id": id, "MessageBody": body, "MessageGroupId": group, "MessageDeduplicationId": format!("d-{id}")})
}

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
        let answer = if c.service == "sqs" {
            sqs(endpoint, c.operation, c.body.clone())
        } else {
            ddb(endpoint, c.operation, c.body.clone())
        };
        assert!(
            answer.status >= 400 && answer.code.trim_start_matches("AWS.SimpleQueueService.") == c.code,
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

#[test]
fn a_role_may_do_what_the_template_grants_it() {
    let f = fixture("strict_iam");
    let moto = stm_testkit::moto_blocking();
    let worker = moto.endpoint_as(Principal::Worker);
    ok(
        &ddb(
            worker,
            "GetItem",
            json!({"TableName": f.executions, "Key": {"id": {"S": "x"}}}),
        ),
        "the worker reads executions",
    );
    ok(
        &sqs(
            worker,
            "SendMessage",
            fifo_message(&f.fifo_url, "g", "iam-1", "{}"),
        ),
        "the worker sends events",
    );
    let denied = ddb(worker, "Scan", json!({"TableName": f.executions}));
    assert_eq!(denied.code, "AccessDeniedException", "{}", denied.body);
    let message = denied.body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("WorkerRole")
            && message.contains("dynamodb:Scan")
            && message.contains(&f.executions),
        "{message}"
    );
    // a table outside the template can be granted by no role
    let stray = ddb(
        worker,
        "GetItem",
        json!({"TableName": "unrelated", "Key": {"id": {"S": "x"}}}),
    );
    assert_eq!(stray.code, "AccessDeniedException", "{}", stray.body);
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

fn receive_ids(admin: &str, url: &str) -> Vec<String> {
    let got = sqs(
        admin,
        "ReceiveMessage",
        json!({"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 0}),
    );
    ok(&got, "ReceiveMessage");
    got.body["Messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| m["Body"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// SQS deletes a message at the end of its queue's retention whether or not anyone
/// received it; on a queue whose clock the test moved, so does the layer, and only there.
#[test]
fn a_message_as_old_as_its_queues_retention_is_gone_on_the_moved_clock() {
    let moto = stm_testkit::moto_blocking();
    let admin = moto.endpoint().to_string();
    let prefix = stm_testkit::unique_prefix("retention");
    let create = |name: String| {
        let created = sqs(
            &admin,
            "CreateQueue",
            json!({"QueueName": name, "Attributes": {"FifoQueue": "true", "MessageRetentionPeriod": "1209600"}}),
        );
        ok(&created, "CreateQueue");
        created.body["QueueUrl"].as_str().unwrap_or_default().to_string()
    };
    let moved = create(format!("{prefix}-moved.fifo"));
    let still = create(format!("{prefix}_still.fifo"));
    for (url, body) in [(&moved, "first"), (&still, "first")] {
        ok(
            &sqs(&admin, "SendMessage", fifo_message(url, body, body, body)),
            "send",
        );
    }
    let day = std::time::Duration::from_secs(86_400);
    moto.strict().advance_queues(&format!("{prefix}-moved"), day * 10);
    ok(
        &sqs(
            &admin,
            "SendMessage",
            fifo_message(&moved, "second", "second", "second"),
        ),
        "send",
    );
    let mut both = receive_ids(&admin, &moved);
    both.sort();
    assert_eq!(both, ["first", "second"], "10 days: both within 14 days");
    moto.strict().advance_queues(&format!("{prefix}-moved"), day * 5);
    assert_eq!(
        receive_ids(&admin, &moved),
        ["second"],
        "15 days after the first send, 5 after the second: the first is gone"
    );
    assert_eq!(receive_ids(&admin, &moved), ["second"], "and stays gone");
    assert_eq!(
        moto.strict()
            .expired_messages()
            .get(&format!("{prefix}-moved.fifo")),
        Some(&1)
    );
    assert_eq!(
        receive_ids(&admin, &still),
        ["first"],
        "a queue whose clock did not move"
    );
}

/// A message received `maxReceiveCount` times moves to the dead-letter queue on the next
/// receive (moto does this as SQS does; pinned here, the runtime's poison path relies on it).
#[test]
fn a_message_received_max_receive_count_times_moves_to_the_dead_letter_queue() {
    let admin = stm_testkit::moto_blocking().endpoint().to_string();
    let prefix = stm_testkit::unique_prefix("redrive");
    let dlq = sqs(
        &admin,
        "CreateQueue",
        json!({"QueueName": format!("{prefix}-dlq.fifo"), "Attributes": {"FifoQueue": "true"}}),
    );
    ok(&dlq, "CreateQueue dlq");
    let dlq_url = dlq.body["QueueUrl"].as_str().unwrap_or_default().to_string();
    let dlq_arn = sqs(
        &admin,
        "GetQueueAttributes",
        json!({"QueueUrl": dlq_url, "AttributeNames": ["QueueArn"]}),
    )
    .body["Attributes"]["QueueArn"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let source = sqs(
        &admin,
        "CreateQueue",
        json!({"QueueName": format!("{prefix}-events.fifo"), "Attributes": {
            "FifoQueue": "true",
            "RedrivePolicy": json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}).to_string(),
        }}),
    );
    ok(&source, "CreateQueue source");
    let url = source.body["QueueUrl"].as_str().unwrap_or_default().to_string();
    ok(
        &sqs(&admin, "SendMessage", fifo_message(&url, "g", "d", "poison")),
        "send",
    );
    for n in 1..=3 {
        assert_eq!(receive_ids(&admin, &url), ["poison"], "receive {n} of 3");
    }
    assert!(
        receive_ids(&admin, &url).is_empty(),
        "the fourth receive redrives it"
    );
    assert_eq!(receive_ids(&admin, &dlq_url), ["poison"]);
}
