//! The test kit's moto backs up only the items a `TransactWriteItems` names (moto itself
//! deep-copies every table the transaction touches, which made each commit cost the size
//! of the tables). A cancelled or refused transaction must still leave every item it named
//! as it was, in a table keyed by hash alone and in one keyed by hash and range, and a
//! transaction that goes through must still write everything.

use serde_json::{json, Value};
use stm_testkit::http::{json_call, JsonAnswer};

fn ddb(endpoint: &str, op: &str, body: Value) -> JsonAnswer {
    json_call(endpoint, &format!("DynamoDB_20120810.{op}"), &body)
}

fn create(endpoint: &str, name: &str, keys: &[(&str, &str)]) {
    let attrs: Vec<Value> = keys
        .iter()
        .map(|(n, _)| json!({"AttributeName": n, "AttributeType": "S"}))
        .collect();
    let schema: Vec<Value> = keys
        .iter()
        .map(|(n, kind)| json!({"AttributeName": n, "KeyType": kind}))
        .collect();
    let answer = ddb(
        endpoint,
        "CreateTable",
        json!({"TableName": name, "AttributeDefinitions": attrs, "KeySchema": schema, "BillingMode": "PAY_PER_REQUEST"}),
    );
    assert_eq!(answer.status, 200, "CreateTable {name}: {}", answer.body);
}

fn get(endpoint: &str, table: &str, key: Value) -> Value {
    let answer = ddb(
        endpoint,
        "GetItem",
        json!({"TableName": table, "Key": key, "ConsistentRead": true}),
    );
    assert_eq!(answer.status, 200, "GetItem: {}", answer.body);
    answer.body["Item"].clone()
}

#[test]
fn a_transaction_that_fails_leaves_every_item_it_named_as_it_was() {
    let moto = stm_testkit::moto_blocking();
    let endpoint = moto.endpoint();
    let prefix = stm_testkit::unique_prefix("rollback");
    let flat = format!("{prefix}_executions");
    let ranged = format!("{prefix}_timers");
    create(endpoint, &flat, &[("id", "HASH")]);
    create(endpoint, &ranged, &[("execution_id", "HASH"), ("path", "RANGE")]);
    let a = json!({"id": {"S": "a"}});
    let timer = json!({"execution_id": {"S": "a"}, "path": {"S": "Waiting"}});
    for (table, item) in [
        (&flat, json!({"id": {"S": "a"}, "v": {"S": "1"}})),
        (
            &ranged,
            json!({"execution_id": {"S": "a"}, "path": {"S": "Waiting"}, "v": {"S": "1"}}),
        ),
    ] {
        let answer = ddb(endpoint, "PutItem", json!({"TableName": table, "Item": item}));
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let before = (
        get(endpoint, &flat, a.clone()),
        get(endpoint, &ranged, timer.clone()),
    );

    // an update and a new item in each table, then a condition that fails: cancelled
    let writes = |last: Value| {
        json!({"TransactItems": [
            {"Update": {"TableName": flat, "Key": a, "UpdateExpression": "SET v = :v",
                        "ExpressionAttributeValues": {":v": {"S": "2"}}}},
            {"Put": {"TableName": flat, "Item": {"id": {"S": "b"}, "v": {"S": "new"}}}},
            {"Delete": {"TableName": ranged, "Key": timer}},
            {"Put": {"TableName": ranged, "Item": {"execution_id": {"S": "b"}, "path": {"S": "P"}}}},
            last,
        ]})
    };
    let failing = json!({"ConditionCheck": {"TableName": flat, "Key": {"id": {"S": "missing"}},
                                            "ConditionExpression": "attribute_exists(id)"}});
    let answer = ddb(endpoint, "TransactWriteItems", writes(failing));
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert!(
        answer.body.to_string().contains("TransactionCanceled"),
        "{}",
        answer.body
    );
    let unchanged = |what: &str| {
        assert_eq!(
            (
                get(endpoint, &flat, a.clone()),
                get(endpoint, &ranged, timer.clone())
            ),
            before,
            "{what}: the updated and the deleted items are back"
        );
        assert!(
            get(endpoint, &flat, json!({"id": {"S": "b"}})).is_null(),
            "{what}: no new item"
        );
        assert!(
            get(
                endpoint,
                &ranged,
                json!({"execution_id": {"S": "b"}, "path": {"S": "P"}})
            )
            .is_null(),
            "{what}: no new ranged item"
        );
    };
    unchanged("a cancelled transaction");

    // two actions on one item: refused after moto applied the first ones
    let twice = json!({"Put": {"TableName": flat, "Item": {"id": {"S": "a"}, "v": {"S": "3"}}}});
    let answer = ddb(endpoint, "TransactWriteItems", writes(twice));
    assert_eq!(answer.status, 400, "{}", answer.body);
    unchanged("a refused transaction");

    // and one that goes through writes everything
    let fine = json!({"ConditionCheck": {"TableName": flat, "Key": {"id": {"S": "missing"}},
                                         "ConditionExpression": "attribute_not_exists(id)"}});
    let answer = ddb(endpoint, "TransactWriteItems", writes(fine));
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(get(endpoint, &flat, a.clone())["v"], json!({"S": "2"}));
    assert_eq!(
        get(endpoint, &flat, json!({"id": {"S": "b"}}))["v"],
        json!({"S": "new"})
    );
    assert!(get(endpoint, &ranged, timer.clone()).is_null(), "deleted");
    assert!(!get(
        endpoint,
        &ranged,
        json!({"execution_id": {"S": "b"}, "path": {"S": "P"}})
    )
    .is_null());
}
