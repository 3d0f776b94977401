//! The strict layer's partition meter, over moto: every DynamoDB request moto answers is
//! charged by DynamoDB's accounting to the keys it touched. Plain HTTP with JSON bodies, as
//! the SDKs send them (the style of `strict_layer.rs`). The tests of this process share
//! the layer and its meter, so each reads its own tables (`report_where` on its prefix).

use std::time::Duration;

use serde_json::{json, Value};
use stm_testkit::http::json_call;
use stm_testkit::meter::{MeterReport, PartitionMeter};
use stm_testkit::strict::dynamodb::{item_size, SCAN_KEY, UNPARSED_QUERY_KEY};

struct Answer {
    status: u16,
    body: Value,
}

fn ddb(endpoint: &str, op: &str, body: Value) -> Answer {
    let answer = json_call(endpoint, &format!("DynamoDB_20120810.{op}"), &body);
    Answer {
        status: answer.status,
        body: answer.body,
    }
}

/// Send a request moto must take.
#[track_caller]
fn ok(endpoint: &str, op: &str, body: Value) -> Value {
    let answer = ddb(endpoint, op, body);
    assert_eq!(answer.status, 200, "{op}: moto refused it: {}", answer.body);
    answer.body
}

/// A global secondary index: name, partition key (S), sort key (N), projection type.
struct Index<'a> {
    name: &'a str,
    partition: &'a str,
    sort: &'a str,
    projection: &'a str,
}

fn create_table(
    endpoint: &str,
    name: &str,
    hash: (&str, &str),
    range: Option<(&str, &str)>,
    gsi: Option<Index<'_>>,
) {
    let mut attrs = vec![json!({"AttributeName": hash.0, "AttributeType": hash.1})];
    let mut keys = vec![json!({"AttributeName": hash.0, "KeyType": "HASH"})];
    if let Some((n, t)) = range {
        attrs.push(json!({"AttributeName": n, "AttributeType": t}));
        keys.push(json!({"AttributeName": n, "KeyType": "RANGE"}));
    }
    let mut body = json!({"TableName": name, "KeySchema": keys, "BillingMode": "PAY_PER_REQUEST"});
    if let Some(index) = gsi {
        attrs.push(json!({"AttributeName": index.partition, "AttributeType": "S"}));
        attrs.push(json!({"AttributeName": index.sort, "AttributeType": "N"}));
        body["GlobalSecondaryIndexes"] = json!([{
            "IndexName": index.name,
            "KeySchema": [
                {"AttributeName": index.partition, "KeyType": "HASH"},
                {"AttributeName": index.sort, "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": index.projection},
        }]);
    }
    body["AttributeDefinitions"] = Value::Array(attrs);
    ok(endpoint, "CreateTable", body);
}

/// An item of `(attribute, string value)` pairs padded with a `data` string to exactly
/// `bytes` by DynamoDB's item size.
#[track_caller]
fn item_of(keys: &[(&str, Value)], bytes: usize) -> Value {
    let mut item = serde_json::Map::new();
    for (name, value) in keys {
        item.insert((*name).to_string(), value.clone());
    }
    let mut item = Value::Object(item);
    let without_data = item_size(&item) + "data".len();
    assert!(
        bytes >= without_data,
        "an item of {bytes} bytes cannot hold its keys"
    );
    item["data"] = json!({"S": "x".repeat(bytes - without_data)});
    assert_eq!(item_size(&item), bytes);
    item
}

fn s(text: &str) -> Value {
    json!({"S": text})
}

/// The test's own view of the shared meter: its prefix's tables.
struct Meter {
    meter: PartitionMeter,
    prefix: String,
}

impl Meter {
    fn new(prefix: &str) -> Meter {
        Meter {
            meter: stm_testkit::moto_blocking().meter(),
            prefix: format!("{prefix}_"),
        }
    }

    fn report(&self) -> MeterReport {
        self.meter.report_where(|t| t.starts_with(&self.prefix))
    }

    /// `(read, write)` units of one key in all.
    fn units(&self, table: &str, key: &str) -> (f64, f64) {
        self.meter.key_units(table, key)
    }

    fn requests(&self, operation: &str) -> u64 {
        self.report().requests.get(operation).copied().unwrap_or(0)
    }
}

struct Fixture {
    admin: String,
    prefix: String,
    meter: Meter,
}

fn fixture(tag: &str) -> Fixture {
    let moto = stm_testkit::moto_blocking();
    let prefix = stm_testkit::unique_prefix(tag);
    Fixture {
        admin: moto.endpoint().to_string(),
        meter: Meter::new(&prefix),
        prefix,
    }
}

impl Fixture {
    /// A table keyed by `id` (S) alone.
    fn id_table(&self, name: &str) -> String {
        let table = format!("{}_{name}", self.prefix);
        create_table(&self.admin, &table, ("id", "S"), None, None);
        table
    }
}

#[test]
fn a_write_costs_a_unit_per_kilobyte_started_and_a_transaction_twice() {
    let f = fixture("meter_writes");
    let a = f.admin.as_str();
    let t = f.id_table("executions");
    let m = &f.meter;

    ok(
        a,
        "PutItem",
        json!({"TableName": t, "Item": item_of(&[("id", s("small"))], 900)}),
    );
    assert_eq!(m.units(&t, "id=small"), (0.0, 1.0), "900 bytes: one write unit");
    ok(
        a,
        "PutItem",
        json!({"TableName": t, "Item": item_of(&[("id", s("large"))], 1500)}),
    );
    assert_eq!(
        m.units(&t, "id=large"),
        (0.0, 2.0),
        "1,500 bytes: two write units"
    );

    ok(
        a,
        "TransactWriteItems",
        json!({"TransactItems": [
            {"Put": {"TableName": t, "Item": item_of(&[("id", s("tx-small"))], 900)}},
            {"Put": {"TableName": t, "Item": item_of(&[("id", s("tx-large"))], 1500)}},
        ]}),
    );
    assert_eq!(
        m.units(&t, "id=tx-small"),
        (0.0, 2.0),
        "a transaction writes twice"
    );
    assert_eq!(m.units(&t, "id=tx-large"), (0.0, 4.0));

    ok(
        a,
        "BatchWriteItem",
        json!({"RequestItems": {t.as_str(): [
            {"PutRequest": {"Item": item_of(&[("id", s("batch-1"))], 1500)}},
            {"PutRequest": {"Item": item_of(&[("id", s("batch-2"))], 3000)}},
        ]}}),
    );
    assert_eq!(
        m.units(&t, "id=batch-1"),
        (0.0, 2.0),
        "a batch put is a plain write"
    );
    assert_eq!(m.units(&t, "id=batch-2"), (0.0, 3.0));

    let report = m.report();
    assert_eq!(report.units_per_table, vec![(t.clone(), 0.0, 14.0)]);
    assert_eq!(m.requests("PutItem"), 2);
    assert_eq!(m.requests("TransactWriteItems"), 1);
    assert_eq!(m.requests("BatchWriteItem"), 1);
    assert_eq!(m.requests("CreateTable"), 1);
}

#[test]
fn an_update_or_a_delete_costs_the_stored_items_size() {
    let f = fixture("meter_updates");
    let a = f.admin.as_str();
    let t = f.id_table("executions");
    let m = &f.meter;

    // a 3,000-byte item, then a small update of it: AWS bills the larger of the item
    // before and after, which the layer knows from the put it forwarded
    ok(
        a,
        "PutItem",
        json!({"TableName": t, "Item": item_of(&[("id", s("kept"))], 3000)}),
    );
    ok(
        a,
        "UpdateItem",
        json!({"TableName": t, "Key": {"id": s("kept")}, "UpdateExpression": "SET n = :n",
               "ExpressionAttributeValues": {":n": {"N": "1"}}}),
    );
    assert_eq!(m.units(&t, "id=kept"), (0.0, 3.0 + 3.0));
    ok(a, "DeleteItem", json!({"TableName": t, "Key": {"id": s("kept")}}));
    assert_eq!(m.units(&t, "id=kept"), (0.0, 3.0 + 3.0 + 3.0));

    // an item the layer never saw: the one-unit minimum
    ok(
        a,
        "DeleteItem",
        json!({"TableName": t, "Key": {"id": s("never")}}),
    );
    assert_eq!(m.units(&t, "id=never"), (0.0, 1.0));

    // an update that returns the new item is charged its size
    let answer = ok(
        a,
        "UpdateItem",
        json!({"TableName": t, "Key": {"id": s("grown")}, "UpdateExpression": "SET big = :b",
               "ExpressionAttributeValues": {":b": s(&"b".repeat(2100))}, "ReturnValues": "ALL_NEW"}),
    );
    assert!(
        item_size(&answer["Attributes"]) > 2048,
        "{}",
        answer["Attributes"]["id"]
    );
    assert_eq!(m.units(&t, "id=grown"), (0.0, 3.0));
    // and a transactional delete of it is twice its size
    ok(
        a,
        "TransactWriteItems",
        json!({"TransactItems": [{"Delete": {"TableName": t, "Key": {"id": s("grown")}}}]}),
    );
    assert_eq!(m.units(&t, "id=grown"), (0.0, 3.0 + 6.0));
}

#[test]
fn a_read_costs_a_unit_per_four_kilobytes_started_half_if_eventually_consistent() {
    let f = fixture("meter_reads");
    let a = f.admin.as_str();
    let t = f.id_table("executions");
    let m = &f.meter;
    ok(
        a,
        "PutItem",
        json!({"TableName": t, "Item": item_of(&[("id", s("big"))], 5000)}),
    );
    ok(
        a,
        "PutItem",
        json!({"TableName": t, "Item": item_of(&[("id", s("small"))], 100)}),
    );
    assert_eq!(m.units(&t, "id=big"), (0.0, 5.0));

    let key = |id: &str| json!({"id": s(id)});
    let got = ok(
        a,
        "GetItem",
        json!({"TableName": t, "Key": key("big"), "ConsistentRead": true}),
    );
    assert_eq!(item_size(&got["Item"]), 5000);
    assert_eq!(
        m.units(&t, "id=big"),
        (2.0, 5.0),
        "5,000 bytes consistent: two read units"
    );
    ok(a, "GetItem", json!({"TableName": t, "Key": key("big")}));
    assert_eq!(m.units(&t, "id=big"), (3.0, 5.0), "eventually consistent: half");
    // a projection returns part of the item; AWS bills all of it
    ok(
        a,
        "GetItem",
        json!({"TableName": t, "Key": key("big"), "ConsistentRead": true, "ProjectionExpression": "id"}),
    );
    assert_eq!(m.units(&t, "id=big"), (5.0, 5.0));
    ok(
        a,
        "GetItem",
        json!({"TableName": t, "Key": key("absent"), "ConsistentRead": true}),
    );
    assert_eq!(
        m.units(&t, "id=absent"),
        (1.0, 0.0),
        "a missing item: the minimum"
    );

    ok(
        a,
        "BatchGetItem",
        json!({"RequestItems": {t.as_str(): {"Keys": [key("big"), key("small"), key("gone")], "ConsistentRead": true}}}),
    );
    assert_eq!(m.units(&t, "id=big"), (7.0, 5.0));
    assert_eq!(m.units(&t, "id=small"), (1.0, 1.0));
    assert_eq!(m.units(&t, "id=gone"), (1.0, 0.0));

    ok(
        a,
        "TransactGetItems",
        json!({"TransactItems": [{"Get": {"TableName": t, "Key": key("big")}}, {"Get": {"TableName": t, "Key": key("small")}}]}),
    );
    assert_eq!(m.units(&t, "id=big"), (11.0, 5.0), "transactional: twice");
    assert_eq!(m.units(&t, "id=small"), (3.0, 1.0));

    assert_eq!(m.requests("GetItem"), 4);
    assert_eq!(m.requests("BatchGetItem"), 1);
    assert_eq!(m.requests("TransactGetItems"), 1);
}

#[test]
fn the_hottest_key_is_the_one_written_fifty_times_in_its_busiest_second() {
    let f = fixture("meter_hot");
    let moto = stm_testkit::moto_blocking();
    let a = f.admin.as_str();
    let clock = || moto.strict().meter_clock();
    // The peak is per whole second of the layer's clock. Each request's charge falls
    // between the clock read before it and after its answer; a request whose window
    // crosses a second's boundary leaves the expected peak ambiguous, so such a round is
    // run again on a fresh table, and the last round is held to the peak's bounds.
    const ROUNDS: usize = 5;
    for round in 0..ROUNDS {
        let t = f.id_table(&format!("round{round}"));
        // start just after a second begins, so the 50 transactions most likely share one
        let now = clock();
        std::thread::sleep(Duration::from_secs_f64(now.ceil() - now + 0.01));
        // each transaction's window: the whole seconds its charge may fall in
        let mut windows: Vec<(i64, i64)> = Vec::new();
        for i in 0..50 {
            let before = clock();
            ok(
                a,
                "TransactWriteItems",
                json!({"TransactItems": [
                    {"Put": {"TableName": t, "Item": item_of(&[("id", s("hot"))], 900)}},
                    {"Put": {"TableName": t, "Item": item_of(&[("id", s(&format!("cold-{i}")))], 900)}},
                ]}),
            );
            windows.push((before.floor() as i64, clock().floor() as i64));
        }
        let ambiguous = windows.iter().any(|(lo, hi)| lo != hi);
        if ambiguous && round + 1 < ROUNDS {
            eprintln!("round {round}: a transaction crossed a second's boundary; again");
            continue;
        }
        let report = f.meter.meter.report_where(|name| name == t);
        let hot = report.hottest().expect("the round's table was charged");
        assert_eq!((hot.table.as_str(), hot.key.as_str()), (t.as_str(), "id=hot"));
        // the busiest second's count: exact when no window crosses a second's boundary
        // (an idle machine), else between what surely fell in one second and what may have
        // (a loaded one, where 50 transactions take several seconds)
        let first = windows.iter().map(|w| w.0).min().unwrap_or(0);
        let last = windows.iter().map(|w| w.1).max().unwrap_or(0);
        let surely = |sec: i64| windows.iter().filter(|&&(lo, hi)| lo == sec && hi == sec).count();
        let maybe = |sec: i64| windows.iter().filter(|&&(lo, hi)| lo <= sec && sec <= hi).count();
        let least = (first..=last).map(surely).max().unwrap_or(0) as f64;
        let most = (first..=last).map(maybe).max().unwrap_or(0) as f64;
        assert!(
            (2.0 * least..=2.0 * most).contains(&hot.write_units_per_second),
            "two write units per transaction in the busiest second: {} not in [{}, {}] ({windows:?})",
            hot.write_units_per_second,
            2.0 * least,
            2.0 * most
        );
        assert_eq!(hot.read_units_per_second, 0.0);
        assert_eq!(f.meter.units(&t, "id=hot"), (0.0, 100.0));
        for i in 0..50 {
            assert_eq!(f.meter.units(&t, &format!("id=cold-{i}")), (0.0, 2.0), "cold-{i}");
        }
        assert_eq!(report.total_units(), (0.0, 200.0));
        assert_eq!(report.requests.get("TransactWriteItems"), Some(&50));
        if !ambiguous {
            let seconds: std::collections::BTreeSet<i64> = windows.iter().map(|w| w.0).collect();
            assert_eq!(report.seconds, seconds.len() as f64);
        }
        return;
    }
}

/// The timers table's shape: `execution_id`/`path`, a sparse KEYS_ONLY index `due_index` on
/// `due_shard` (S) / `fire_at` (N).
fn timers_table(f: &Fixture) -> String {
    let t = format!("{}_timers", f.prefix);
    create_table(
        &f.admin,
        &t,
        ("execution_id", "S"),
        Some(("path", "S")),
        Some(Index {
            name: "due_index",
            partition: "due_shard",
            sort: "fire_at",
            projection: "KEYS_ONLY",
        }),
    );
    t
}

fn timer(execution: &str, shard: Option<&str>, fire_at: &str, bytes: usize) -> Value {
    let mut keys = vec![("execution_id", s(execution)), ("path", s("root.a"))];
    if let Some(shard) = shard {
        keys.push(("due_shard", s(shard)));
        keys.push(("fire_at", json!({"N": fire_at})));
    }
    item_of(&keys, bytes)
}

#[test]
fn a_write_that_carries_an_index_key_also_writes_the_index_partition() {
    let f = fixture("meter_gsi");
    let a = f.admin.as_str();
    let t = timers_table(&f);
    let index = format!("{t}/due_index");
    let m = &f.meter;

    ok(
        a,
        "PutItem",
        json!({"TableName": t, "Item": timer("e1", Some("3"), "100", 1500)}),
    );
    assert_eq!(m.units(&t, "execution_id=e1|path=root.a"), (0.0, 2.0));
    assert_eq!(
        m.units(&index, "due_shard=3"),
        (0.0, 1.0),
        "a KEYS_ONLY entry: one unit"
    );

    // without the index's keys the item is not in the index
    ok(
        a,
        "PutItem",
        json!({"TableName": t, "Item": timer("sparse", None, "", 500)}),
    );
    assert_eq!(m.units(&t, "execution_id=sparse|path=root.a"), (0.0, 1.0));

    // in a transaction the table's write is doubled, the index's is not
    ok(
        a,
        "TransactWriteItems",
        json!({"TransactItems": [{"Put": {"TableName": t, "Item": timer("e2", Some("3"), "200", 500)}}]}),
    );
    assert_eq!(m.units(&t, "execution_id=e2|path=root.a"), (0.0, 2.0));
    assert_eq!(m.units(&index, "due_shard=3"), (0.0, 2.0));

    // moving e1 to another shard: a delete from the old partition, a put in the new
    ok(
        a,
        "PutItem",
        json!({"TableName": t, "Item": timer("e1", Some("5"), "100", 1500)}),
    );
    assert_eq!(m.units(&index, "due_shard=3"), (0.0, 3.0));
    assert_eq!(m.units(&index, "due_shard=5"), (0.0, 1.0));
    // the same index key again: a KEYS_ONLY entry does not change
    ok(
        a,
        "PutItem",
        json!({"TableName": t, "Item": timer("e1", Some("5"), "100", 1400)}),
    );
    assert_eq!(m.units(&index, "due_shard=5"), (0.0, 1.0));
    assert_eq!(m.units(&t, "execution_id=e1|path=root.a"), (0.0, 2.0 + 2.0 + 2.0));

    // cancelling e2 (a delete without the item in hand) removes its entry from shard 3
    ok(
        a,
        "TransactWriteItems",
        json!({"TransactItems": [{"Delete": {"TableName": t, "Key": {"execution_id": s("e2"), "path": s("root.a")}}}]}),
    );
    assert_eq!(m.units(&index, "due_shard=3"), (0.0, 4.0));
    assert_eq!(m.units(&t, "execution_id=e2|path=root.a"), (0.0, 2.0 + 2.0));

    // a sweep's query on the index is charged to the shard it reads
    let due = ok(
        a,
        "Query",
        json!({"TableName": t, "IndexName": "due_index",
               "KeyConditionExpression": "due_shard = :s AND fire_at <= :now",
               "ExpressionAttributeValues": {":s": s("5"), ":now": {"N": "1000"}}}),
    );
    assert_eq!(due["Count"], 1, "{due}");
    assert_eq!(
        m.units(&index, "due_shard=5"),
        (0.5, 1.0),
        "eventually consistent: half a unit"
    );

    let report = m.report();
    let tables: Vec<&str> = report
        .hottest_per_table
        .iter()
        .map(|k| k.table.as_str())
        .collect();
    assert!(
        tables.contains(&index.as_str()) && tables.contains(&t.as_str()),
        "{tables:?}"
    );
    assert_eq!(report.total_units(), (0.5, 11.0 + 5.0));
}

#[test]
fn a_query_or_a_scan_costs_the_bytes_it_reads_per_request() {
    let f = fixture("meter_query");
    let a = f.admin.as_str();
    let t = format!("{}_rows", f.prefix);
    create_table(a, &t, ("execution_id", "S"), Some(("seq", "N")), None);
    let m = &f.meter;
    for i in 0..10 {
        let item = item_of(
            &[
                ("execution_id", s("q")),
                ("seq", json!({"N": i.to_string()})),
                ("even", json!({"BOOL": i % 2 == 0})),
            ],
            1000,
        );
        ok(a, "PutItem", json!({"TableName": t, "Item": item}));
    }
    let partition = "execution_id=q";

    // ten 1,000-byte items: 10,000 bytes, three units of 4 KB (ten items read one by one
    // would cost ten)
    let all = ok(
        a,
        "Query",
        json!({"TableName": t, "KeyConditionExpression": "execution_id = :e",
               "ExpressionAttributeValues": {":e": s("q")}, "ConsistentRead": true}),
    );
    assert_eq!(all["Count"], 10);
    assert_eq!(m.units(&t, partition), (3.0, 0.0));
    // eventually consistent, through an alias and in parentheses: half
    ok(
        a,
        "Query",
        json!({"TableName": t, "KeyConditionExpression": "(#p = :e) AND seq >= :zero",
               "ExpressionAttributeNames": {"#p": "execution_id"},
               "ExpressionAttributeValues": {":e": s("q"), ":zero": {"N": "0"}}}),
    );
    assert_eq!(m.units(&t, partition), (4.5, 0.0));
    // a page of two: 2,000 bytes, one unit
    ok(
        a,
        "Query",
        json!({"TableName": t, "KeyConditionExpression": "execution_id = :e", "Limit": 2,
               "ExpressionAttributeValues": {":e": s("q")}, "ConsistentRead": true}),
    );
    assert_eq!(m.units(&t, partition), (5.5, 0.0));
    // a filter keeps five, but all ten were read
    let filtered = ok(
        a,
        "Query",
        json!({"TableName": t, "KeyConditionExpression": "execution_id = :e",
               "FilterExpression": "even = :yes",
               "ExpressionAttributeValues": {":e": s("q"), ":yes": {"BOOL": true}}, "ConsistentRead": true}),
    );
    assert_eq!(
        (filtered["Count"].as_u64(), filtered["ScannedCount"].as_u64()),
        (Some(5), Some(10))
    );
    assert_eq!(m.units(&t, partition), (8.5, 0.0));

    // a scan is charged per request to one label
    ok(a, "Scan", json!({"TableName": t, "ConsistentRead": true}));
    assert_eq!(m.units(&t, SCAN_KEY), (3.0, 0.0));
    // the legacy KeyConditions: a query the meter does not parse, still charged
    ok(
        a,
        "Query",
        json!({"TableName": t, "ConsistentRead": true, "KeyConditions": {"execution_id": {
            "ComparisonOperator": "EQ", "AttributeValueList": [s("q")]}}}),
    );
    assert_eq!(m.units(&t, UNPARSED_QUERY_KEY), (3.0, 0.0));

    assert_eq!(m.requests("Query"), 5);
    assert_eq!(m.requests("Scan"), 1);
    assert_eq!(m.requests("PutItem"), 10);
}
