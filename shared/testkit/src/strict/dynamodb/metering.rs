//! The layer's partition meter: its clock, the items it remembers, and what each
//! DynamoDB operation that moto answered with 200 is charged ([`Metering::observe`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::Value;

use super::charge_writes::single_write_target;
use super::check::tables_named;
use super::schema::TableSchema;
use super::stored::{stored_of, Stored};
use crate::meter::PartitionMeter;

/// How many items [`Metering`] remembers: past it, it forgets them all and starts again (a
/// long test process writes far fewer; the cap only bounds a runaway one).
const MAX_REMEMBERED_ITEMS: usize = 200_000;

/// The label of a key whose partition key value a `Query` names in a way the meter does
/// not parse.
pub const UNPARSED_QUERY_KEY: &str = "(query)";
/// The label every `Scan` is charged to.
pub const SCAN_KEY: &str = "(scan)";

/// The strict layer's [`PartitionMeter`], its clock (seconds since the layer started), and
/// the sizes and index entries of the items it saw written: the size AWS bills for an
/// update or a delete is the stored item's, which the request does not carry.
#[derive(Debug)]
pub struct Metering {
    pub(super) meter: PartitionMeter,
    started: Instant,
    remembered: Mutex<HashMap<(String, String), Stored>>,
}

impl Default for Metering {
    fn default() -> Self {
        Metering::new()
    }
}

impl Metering {
    /// A meter whose clock starts now.
    pub fn new() -> Metering {
        Metering {
            meter: PartitionMeter::new(),
            started: Instant::now(),
            remembered: Mutex::default(),
        }
    }

    /// The meter (a clone shares its counts).
    pub fn meter(&self) -> PartitionMeter {
        self.meter.clone()
    }

    /// The meter's clock: wall-clock seconds since the layer started.
    pub fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    pub(super) fn remembered(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Stored>> {
        self.remembered.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn recall(&self, table: &str, key: &str) -> Option<Stored> {
        self.remembered()
            .get(&(table.to_string(), key.to_string()))
            .cloned()
    }

    pub(super) fn remember(&self, table: &str, key: &str, item: Option<Stored>) {
        let mut remembered = self.remembered();
        let slot = (table.to_string(), key.to_string());
        match item {
            Some(item) => {
                if remembered.len() >= MAX_REMEMBERED_ITEMS && !remembered.contains_key(&slot) {
                    remembered.clear();
                }
                remembered.insert(slot, item);
            }
            None => {
                remembered.remove(&slot);
            }
        }
    }

    /// Charge one DynamoDB request that moto answered with 200 (`answer`: the response
    /// body), at `at` on the meter's clock. The request is counted under `operation`
    /// whatever its shape; a part of a request the meter cannot read (a malformed body, a
    /// table whose schema the layer does not have, a key it cannot find) is charged
    /// nothing, never a panic, and a read whose answer it cannot read is charged as one of
    /// a missing item. Refused requests are not charged, though AWS bills a write whose
    /// condition fails as if it had written.
    ///
    /// What is charged:
    /// - `PutItem`: a write of the larger of the new item and the item it replaced (as
    ///   AWS bills it), the replaced one when the meter saw it written (or `ReturnValues`
    ///   `ALL_OLD` returns it);
    /// - `UpdateItem`: the larger of the item before (as above) and after: the new item
    ///   when `ReturnValues` is `ALL_NEW`, else an estimate, the key's and the expression
    ///   values' sizes, since the request does not carry the stored item;
    /// - `DeleteItem`: the deleted item's size when known, else the one-unit minimum;
    /// - `TransactWriteItems`: the same per action, transactional (twice); a
    ///   `ConditionCheck` is a transactional read of the checked item (its size when known,
    ///   else one unit of 4 KB);
    /// - `BatchWriteItem`: a plain write per put or delete moto processed;
    /// - `GetItem`, `BatchGetItem`, `TransactGetItems`: a read per requested key of the
    ///   item returned (a missing one at the minimum), consistent as the request asks,
    ///   transactional for `TransactGetItems`; a projection returns part of an item while
    ///   AWS bills the whole, so a known item's size is charged when larger;
    /// - `Query`, `Scan`: one read per request of the bytes of the items returned (each a
    ///   known item's size when larger), plus, for the items a filter dropped
    ///   (`ScannedCount - Count`), the returned items' average: AWS bills what it reads,
    ///   before the filter. A `Query` is charged to its partition key value, a `Scan` to
    ///   [`SCAN_KEY`];
    /// - a global secondary index: a write to `<table>/<index>` on the index's partition
    ///   key (`attribute=value`) for each entry a write adds or removes, two when it moves
    ///   the entry to another key, one when it rewrites it in place (none for a
    ///   `KEYS_ONLY` index whose key did not change). Index writes are plain writes, also
    ///   in a transaction, of the projected attributes' size. An update without the new
    ///   item in hand rewrites the known entry in place.
    pub fn observe(
        &self,
        operation: &str,
        request: &Value,
        answer: &Value,
        schemas: &BTreeMap<String, TableSchema>,
        at: f64,
    ) {
        self.meter
            .request_on(operation, &tables_named(operation, request));
        match operation {
            "PutItem" | "UpdateItem" | "DeleteItem" => {
                self.charge_single_write(operation, request, answer, schemas, at);
            }
            "TransactWriteItems" => self.charge_transact_write(request, schemas, at),
            "BatchWriteItem" => self.charge_batch_write(request, answer, schemas, at),
            "GetItem" => {
                self.charge_get(request, answer, schemas, at);
            }
            "BatchGetItem" => self.charge_batch_get(request, answer, schemas, at),
            "TransactGetItems" => self.charge_transact_get(request, answer, schemas, at),
            "Query" | "Scan" => {
                self.charge_query(operation, request, answer, schemas, at);
            }
            "CreateTable" | "DeleteTable" => {
                // a table made again under the same name holds none of the old items
                if let Some(table) = request["TableName"].as_str() {
                    self.remembered().retain(|(t, _), _| t != table);
                }
            }
            _ => {}
        }
    }

    /// Charge a single `PutItem`, `UpdateItem` or `DeleteItem` that moto refused with
    /// `ConditionalCheckFailedException`: AWS still consumes write capacity for it, by the
    /// size of the item there or of the one the write would have made, the larger (at
    /// least one unit; the DynamoDB Developer Guide, *DynamoDB read and write operations*:
    /// "If the expression evaluates to false, DynamoDB still consumes write capacity
    /// units"), and writes no index. It is counted as a request of its operation. The item
    /// is the one the refusal returned (`ReturnValuesOnConditionCheckFailure: ALL_OLD`),
    /// else the one remembered, else none. Any other refusal, and a refused transaction, is
    /// charged nothing.
    pub fn observe_failed_condition(
        &self,
        operation: &str,
        request: &Value,
        failure: &Value,
        schemas: &BTreeMap<String, TableSchema>,
        at: f64,
    ) {
        if !matches!(operation, "PutItem" | "UpdateItem" | "DeleteItem") {
            return;
        }
        let refused_for_its_condition = failure["__type"]
            .as_str()
            .is_some_and(|t| t.ends_with("ConditionalCheckFailedException"));
        if !refused_for_its_condition {
            return;
        }
        self.meter
            .request_on(operation, &tables_named(operation, request));
        let Some((table, schema, key)) = single_write_target(operation, request, schemas) else {
            return;
        };
        let checked = match failure.get("Item").filter(|item| item.is_object()) {
            Some(item) => Some(stored_of(schema, item)),
            None => self.recall(table, &key),
        };
        // the larger of the item there and the one the write would have made
        let attempted = match operation {
            "PutItem" => stored_of(schema, &request["Item"]).bytes,
            _ => 0,
        };
        let bytes = checked.map_or(0, |item| item.bytes).max(attempted);
        self.meter.write(table, &key, bytes, false, at);
    }

    /// Whether [`observe`](Self::observe) reads moto's answer to this request (the layer
    /// parses it only then).
    pub fn reads_answer(operation: &str, request: &Value) -> bool {
        match operation {
            "GetItem" | "BatchGetItem" | "TransactGetItems" | "Query" | "Scan" | "BatchWriteItem" => true,
            "PutItem" | "UpdateItem" | "DeleteItem" => {
                matches!(request["ReturnValues"].as_str(), Some("ALL_OLD" | "ALL_NEW"))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strict::dynamodb::Projection;
    use serde_json::json;

    fn timers_schema() -> BTreeMap<String, TableSchema> {
        let description = json!({
            "KeySchema": [
                {"AttributeName": "execution_id", "KeyType": "HASH"},
                {"AttributeName": "path", "KeyType": "RANGE"},
            ],
            "GlobalSecondaryIndexes": [{
                "IndexName": "due_index",
                // listed sort key first: the schema still puts the partition key first
                "KeySchema": [
                    {"AttributeName": "fire_at", "KeyType": "RANGE"},
                    {"AttributeName": "due_shard", "KeyType": "HASH"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }],
        });
        let schema = TableSchema::from_description(&description).expect("a key schema");
        assert_eq!(schema.global_indexes["due_index"], ["due_shard", "fire_at"]);
        assert_eq!(schema.index_projections["due_index"], Projection::KeysOnly);
        BTreeMap::from([("timers".to_string(), schema)])
    }

    #[test]
    fn a_request_the_meter_cannot_read_is_counted_and_charged_nothing() {
        let metering = Metering::new();
        let schemas = timers_schema();
        let malformed = [
            ("PutItem", Value::Null, Value::Null),
            (
                "PutItem",
                json!({"TableName": "timers", "Item": "not an item"}),
                Value::Null,
            ),
            (
                "PutItem",
                json!({"TableName": "timers", "Item": {"execution_id": {"S": "e"}}}),
                Value::Null,
            ),
            (
                "PutItem",
                json!({"TableName": "unknown", "Item": {"id": {"S": "e"}}}),
                Value::Null,
            ),
            (
                "UpdateItem",
                json!({"TableName": 7, "Key": []}),
                json!({"Attributes": 3}),
            ),
            (
                "DeleteItem",
                json!({"TableName": "timers", "Key": {"execution_id": {"N": 1}}}),
                Value::Null,
            ),
            (
                "TransactWriteItems",
                json!({"TransactItems": [1, {"Put": 2}, {"Update": {"TableName": "timers"}}]}),
                Value::Null,
            ),
            (
                "TransactWriteItems",
                json!({"TransactItems": {"Put": {}}}),
                Value::Null,
            ),
            (
                "BatchWriteItem",
                json!({"RequestItems": {"timers": [{"PutRequest": 1}, 2]}}),
                json!([]),
            ),
            ("BatchWriteItem", json!({"RequestItems": []}), Value::Null),
            (
                "GetItem",
                json!({"TableName": "timers", "Key": {"path": {"S": "a"}}}),
                json!({"Item": 5}),
            ),
            (
                "BatchGetItem",
                json!({"RequestItems": {"timers": {"Keys": 3}}}),
                json!({"Responses": {"timers": 4}}),
            ),
            (
                "TransactGetItems",
                json!({"TransactItems": [{"Get": {"TableName": "timers", "Key": 1}}]}),
                json!({"Responses": 2}),
            ),
            ("Query", json!({"TableName": []}), Value::Null),
            ("Scan", json!({"TableName": "unknown"}), json!({"Items": [1, 2]})),
        ];
        for (operation, request, answer) in &malformed {
            metering.observe(operation, request, answer, &schemas, 1.0);
        }
        let report = metering.meter().report();
        assert_eq!(report.total_requests(), malformed.len() as u64);
        assert_eq!(report.requests["PutItem"], 4);
        assert_eq!(report.total_units(), (0.0, 0.0), "{:?}", report.units_per_table);
    }

    #[test]
    fn a_scan_or_a_query_whose_answer_is_malformed_is_charged_the_minimum() {
        let metering = Metering::new();
        let schemas = timers_schema();
        let request = json!({"TableName": "timers", "ConsistentRead": true});
        metering.observe(
            "Scan",
            &request,
            &json!({"Items": "x", "Count": "y"}),
            &schemas,
            1.0,
        );
        assert_eq!(metering.meter().key_units("timers", SCAN_KEY), (1.0, 0.0));
    }

    #[test]
    fn an_update_without_the_new_item_rewrites_an_index_entry_only_when_it_may_change() {
        let metering = Metering::new();
        let schemas = timers_schema();
        let key = json!({"execution_id": {"S": "e"}, "path": {"S": "a"}});
        let mut item = key.clone();
        item["due_shard"] = json!({"S": "7"});
        item["fire_at"] = json!({"N": "10"});
        metering.observe(
            "PutItem",
            &json!({"TableName": "timers", "Item": item}),
            &Value::Null,
            &schemas,
            1.0,
        );
        let meter = metering.meter();
        let shard = || meter.key_units("timers/due_index", "due_shard=7");
        assert_eq!(shard(), (0.0, 1.0));
        // a KEYS_ONLY entry does not change when the update names no index key
        let other = json!({"TableName": "timers", "Key": key, "UpdateExpression": "SET #n = :n",
                           "ExpressionAttributeNames": {"#n": "note"}, "ExpressionAttributeValues": {":n": {"S": "x"}}});
        metering.observe("UpdateItem", &other, &Value::Null, &schemas, 2.0);
        assert_eq!(shard(), (0.0, 1.0));
        // one that names an index key (through an alias) rewrites it
        let moved = json!({"TableName": "timers", "Key": key, "UpdateExpression": "SET #f = :f",
                           "ExpressionAttributeNames": {"#f": "fire_at"}, "ExpressionAttributeValues": {":f": {"N": "20"}}});
        metering.observe("UpdateItem", &moved, &Value::Null, &schemas, 3.0);
        assert_eq!(shard(), (0.0, 2.0));
        metering.observe(
            "DeleteItem",
            &json!({"TableName": "timers", "Key": key}),
            &Value::Null,
            &schemas,
            4.0,
        );
        assert_eq!(shard(), (0.0, 3.0));
        // the item is gone: deleting it again touches no index entry
        metering.observe(
            "DeleteItem",
            &json!({"TableName": "timers", "Key": key}),
            &Value::Null,
            &schemas,
            5.0,
        );
        assert_eq!(shard(), (0.0, 3.0));
        assert_eq!(meter.key_units("timers", "execution_id=e|path=a"), (0.0, 5.0));
    }

    #[test]
    fn a_write_refused_for_its_condition_is_charged_and_other_refusals_are_not() {
        let metering = Metering::new();
        let schemas = timers_schema();
        let key = json!({"execution_id": {"S": "e"}, "path": {"S": "a"}});
        let delete = json!({"TableName": "timers", "Key": key, "ConditionExpression": "fire_at = :f"});
        let failed = json!({"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"});
        let meter = metering.meter();
        let units = || meter.key_units("timers", "execution_id=e|path=a");
        // no item: the one-unit minimum
        metering.observe_failed_condition("DeleteItem", &delete, &failed, &schemas, 1.0);
        assert_eq!(units(), (0.0, 1.0));
        // the item the refusal returned, by its size (2 KB: two units), and no index write
        let mut item = key.clone();
        item["due_shard"] = json!({"S": "7"});
        item["fire_at"] = json!({"N": "10"});
        item["pad"] = json!({"S": "x".repeat(1500)});
        let mut returned = failed.clone();
        returned["Item"] = item;
        metering.observe_failed_condition("DeleteItem", &delete, &returned, &schemas, 2.0);
        assert_eq!(units(), (0.0, 3.0));
        assert_eq!(meter.key_units("timers/due_index", "due_shard=7"), (0.0, 0.0));
        // another refusal, or a refused transaction, costs nothing
        let throttled =
            json!({"__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"});
        metering.observe_failed_condition("DeleteItem", &delete, &throttled, &schemas, 3.0);
        metering.observe_failed_condition("TransactWriteItems", &delete, &failed, &schemas, 3.0);
        assert_eq!(units(), (0.0, 3.0));
        assert_eq!(
            meter.report().requests["DeleteItem"],
            2,
            "the two refused for their condition"
        );
    }
}
