//! Eventually consistent global secondary indexes: a `Query` or `Scan` on a GSI answered
//! from the index as it was a while ago, not from the live table.
//!
//! AWS, "DynamoDB read consistency"
//! (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html>):
//! "All reads from GSIs and streams are eventually consistent", and an eventually
//! consistent read "may not reflect the results of a recently completed write operation"
//! (`ConsistentRead` on a GSI is refused: the layer's `dynamodb.consistent_read.gsi`).
//! AWS's knowledge center puts the usual propagation "within 1 second"
//! (<https://repost.aws/knowledge-center/dynamodb-missing-table-items-gsi>), longer under
//! load or with an index short of write capacity. moto answers a GSI from the live table,
//! so code that reads an index and acts on what it lists is never shown a stale entry.
//!
//! The lag is opt-in, per table-name prefix ([`StrictLayer::lag_indexes`],
//! [`StrictLayer::hold_indexes`]), so one test's tables lag and every other test's do not
//! (and pay nothing for it). For the tables it covers, the layer keeps each written item's
//! history: before the first write of a key it reads the item as it was (one consistent
//! `GetItem` to moto), after every write it reads the item as the write left it (a
//! `GetItem` again: an `UpdateItem` or a transaction's `Update` does not carry the whole
//! item). A `Query` or a `Scan` on one of their GSIs is then answered with the index as of
//! the *view time* (`now - lag`, or the instant the index was held):
//!
//! - an item written after the view time is shown as it was then: a key put since is
//!   hidden, a key deleted since is shown again, a key updated since is shown with its old
//!   attributes (its old index key, so it sorts and matches as it did), each projected as
//!   the index projects it (`KEYS_ONLY`, `INCLUDE`, `ALL`);
//! - the key condition (a `Query`'s; a `Scan` takes every entry) is evaluated on those old items (`=`, `<`, `<=`, `>`, `>=`,
//!   `BETWEEN`, `begins_with`, on `S` and `N` values), and the page re-sorted on the index's
//!   sort key (`ScanIndexForward` honoured), `Count` and `ScannedCount` recounted.
//!
//! Not modelled: a `FilterExpression`, `Select: COUNT` or a `ProjectionExpression` on a
//! lagged query (the live answer is returned, with a warning on stderr), and pagination
//! (the view is applied to each page as moto cut it).
//!
//! [`StrictLayer::lag_indexes`]: super::StrictLayer::lag_indexes
//! [`StrictLayer::hold_indexes`]: super::StrictLayer::hold_indexes

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde_json::{json, Map, Value};

use super::dynamodb::{key_label, Projection, TableSchema};

/// How far behind the live table a lagged index is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IndexView {
    /// The index shows the table as it was this many seconds ago.
    Behind(f64),
    /// The index shows the table as it was at this instant (the layer's clock), however
    /// long ago: the worst case of propagation, for a test that needs it to hold still.
    HeldAt(f64),
}

impl IndexView {
    /// The instant whose table the index shows, at `now`.
    fn as_of(self, now: f64) -> f64 {
        match self {
            IndexView::Behind(lag) => now - lag,
            IndexView::HeldAt(at) => at,
        }
    }
}

/// One state of an item: when it began (the layer's clock; `-inf` for the state found
/// before the first write the layer saw) and the item (`None`: no item).
type State = (f64, Option<Value>);

/// The lagged prefixes and the history of their tables' items.
#[derive(Debug, Default)]
pub struct IndexLag {
    /// Table-name prefix -> its view.
    views: Mutex<Vec<(String, IndexView)>>,
    /// `(table, key label)` -> the item's states, oldest first.
    history: Mutex<HashMap<(String, String), Vec<State>>>,
}

/// A write of a lagged table: the table and the written item's key.
#[derive(Debug, Clone)]
pub struct LaggedWrite {
    table: String,
    key: Value,
    label: String,
}

impl IndexLag {
    fn views(&self) -> std::sync::MutexGuard<'_, Vec<(String, IndexView)>> {
        self.views.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn history(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Vec<State>>> {
        self.history.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lag the GSIs of the tables named with `prefix` (replacing an earlier view of the
    /// same prefix).
    pub fn set(&self, prefix: &str, view: IndexView) {
        let mut views = self.views();
        views.retain(|(p, _)| p != prefix);
        views.push((prefix.to_string(), view));
    }

    /// Back to live indexes for `prefix`; the history of its tables is dropped.
    pub fn clear(&self, prefix: &str) {
        self.views().retain(|(p, _)| p != prefix);
        self.history().retain(|(table, _), _| !table.starts_with(prefix));
    }

    /// The view of `table`'s indexes, if they lag (the longest matching prefix).
    pub fn view_of(&self, table: &str) -> Option<IndexView> {
        self.views()
            .iter()
            .filter(|(p, _)| table.starts_with(p.as_str()))
            .max_by_key(|(p, _)| p.len())
            .map(|(_, v)| *v)
    }

    /// The items a write request changes on lagged tables that have a GSI (nothing for
    /// other requests and tables).
    pub fn writes_of(
        &self,
        operation: &str,
        body: &Value,
        schemas: &BTreeMap<String, TableSchema>,
    ) -> Vec<LaggedWrite> {
        let mut out = Vec::new();
        let mut add = |table: &str, item_or_key: &Value| {
            let Some(schema) = schemas.get(table) else {
                return;
            };
            if schema.global_indexes.is_empty() || self.view_of(table).is_none() {
                return;
            }
            let Some(label) = key_label(schema, item_or_key) else {
                return;
            };
            let mut key = Map::new();
            for name in std::iter::once(&schema.partition_key).chain(schema.sort_key.as_ref()) {
                key.insert(name.clone(), item_or_key[name].clone());
            }
            out.push(LaggedWrite {
                table: table.to_string(),
                key: Value::Object(key),
                label,
            });
        };
        let table = body["TableName"].as_str().unwrap_or_default();
        match operation {
            "PutItem" => add(table, &body["Item"]),
            "UpdateItem" | "DeleteItem" => add(table, &body["Key"]),
            "TransactWriteItems" => {
                for action in body["TransactItems"].as_array().into_iter().flatten() {
                    let Some((kind, a)) = action.as_object().and_then(|m| m.iter().next()) else {
                        continue;
                    };
                    let table = a["TableName"].as_str().unwrap_or_default();
                    match kind.as_str() {
                        "Put" => add(table, &a["Item"]),
                        "Update" | "Delete" => add(table, &a["Key"]),
                        _ => {}
                    }
                }
            }
            "BatchWriteItem" => {
                for (table, writes) in body["RequestItems"].as_object().into_iter().flatten() {
                    for w in writes.as_array().into_iter().flatten() {
                        match w.get("PutRequest") {
                            Some(put) => add(table, &put["Item"]),
                            None => add(table, &w["DeleteRequest"]["Key"]),
                        }
                    }
                }
            }
            _ => {}
        }
        out
    }

    /// Whether the layer has no state of this item yet (it reads the item before the
    /// write, so the index can show it as it was).
    pub fn unknown(&self, write: &LaggedWrite) -> bool {
        !self
            .history()
            .contains_key(&(write.table.clone(), write.label.clone()))
    }

    /// Record the item `write` names as `item` (`None`: no item) from `at` on. The states
    /// no view can show any more are forgotten.
    pub fn record(&self, write: &LaggedWrite, at: f64, item: Option<Value>, now: f64) {
        let as_of = self.view_of(&write.table).map(|v| v.as_of(now));
        let mut history = self.history();
        let states = history
            .entry((write.table.clone(), write.label.clone()))
            .or_default();
        states.push((at, item));
        // keep the last state at or before the view time: the one a query shows
        if let Some(as_of) = as_of {
            let shown = states.iter().rposition(|(t, _)| *t <= as_of).unwrap_or(0);
            states.drain(..shown);
        }
    }

    /// The key of a lagged write, for the `GetItem` that reads the item.
    pub fn get_item_request(write: &LaggedWrite) -> Value {
        json!({"TableName": write.table, "Key": write.key, "ConsistentRead": true})
    }

    /// Drop the history of a table made or deleted again (a new table holds none of the
    /// old items).
    pub fn forget_table(&self, table: &str) {
        self.history().retain(|(t, _), _| t != table);
    }

    /// moto's answer to a `Query` or `Scan` on a lagged table's GSI (`answer`), as the index showed
    /// it at the view time; `None` when the query is not one the lag applies to (no index,
    /// a table that does not lag) or not one it models (see the module docs).
    pub fn answer_query(
        &self,
        request: &Value,
        answer: &Value,
        schemas: &BTreeMap<String, TableSchema>,
        now: f64,
    ) -> Option<Value> {
        let table = request["TableName"].as_str()?;
        let index = request["IndexName"].as_str()?;
        let view = self.view_of(table)?;
        let schema = schemas.get(table)?;
        let index_keys = schema.global_indexes.get(index)?;
        if request.get("FilterExpression").is_some()
            || request.get("ProjectionExpression").is_some()
            || request["Select"].as_str() == Some("COUNT")
        {
            eprintln!(
                "stm-testkit: a lagged Query on {table}/{index} with a filter, projection or COUNT: \
                 answered live (the index lag does not model it)"
            );
            return None;
        }
        // a `Scan` of the index: every entry it holds at the view time
        let scan = request.get("KeyConditionExpression").is_none();
        let condition = match if scan {
            Ok(KeyCondition(Vec::new()))
        } else {
            KeyCondition::parse(request)
        } {
            Ok(c) => c,
            Err(why) => {
                eprintln!("stm-testkit: a lagged Query on {table}/{index}: {why}; answered live");
                return None;
            }
        };
        let as_of = view.as_of(now);
        let history = self.history();
        let mut items: Vec<Value> = Vec::new();
        // moto's items whose state is not newer than the view stay as they are
        for item in answer["Items"].as_array().into_iter().flatten() {
            let changed = key_label(schema, item)
                .and_then(|label| history.get(&(table.to_string(), label)))
                .is_some_and(|states| states.iter().any(|(t, _)| *t > as_of));
            if !changed {
                items.push(item.clone());
            }
        }
        // the items written since, as they were at the view time
        for ((t, _), states) in history.iter() {
            if t != table || !states.iter().any(|(at, _)| *at > as_of) {
                continue;
            }
            let old = states
                .iter()
                .rev()
                .find(|(at, _)| *at <= as_of)
                .and_then(|(_, item)| item.as_ref());
            let Some(old) = old else { continue };
            // sparse: an item without the index's keys is not in it
            if index_keys.iter().any(|k| old.get(k).is_none()) || !condition.matches(old) {
                continue;
            }
            items.push(project(schema, index, index_keys, old));
        }
        drop(history);
        if let Some(sort) = index_keys.get(1) {
            items.sort_by(|a, b| compare(&a[sort], &b[sort]));
            if request["ScanIndexForward"].as_bool() == Some(false) {
                items.reverse();
            }
        }
        let mut out = answer.clone();
        let count = items.len();
        out["Items"] = Value::Array(items);
        out["Count"] = json!(count);
        out["ScannedCount"] = json!(count);
        Some(out)
    }
}

/// An item as an index entry: the table's and the index's keys, plus what the index
/// projects.
fn project(schema: &TableSchema, index: &str, index_keys: &[String], item: &Value) -> Value {
    let projection = schema.index_projections.get(index).cloned().unwrap_or_default();
    if projection == Projection::All {
        return item.clone();
    }
    let mut names: Vec<&String> = std::iter::once(&schema.partition_key)
        .chain(schema.sort_key.as_ref())
        .chain(index_keys)
        .collect();
    if let Projection::Include(extra) = &projection {
        names.extend(extra);
    }
    let mut out = Map::new();
    for name in names {
        if let Some(v) = item.get(name) {
            out.insert(name.clone(), v.clone());
        }
    }
    Value::Object(out)
}

/// DynamoDB's order of two key values of one type: numbers by value, strings and binaries
/// by their bytes (the text of a base64 binary sorts as its bytes would not; the layer's
/// tests key on `S` and `N`).
fn compare(a: &Value, b: &Value) -> std::cmp::Ordering {
    match (
        a.get("N").and_then(Value::as_str),
        b.get("N").and_then(Value::as_str),
    ) {
        (Some(x), Some(y)) => {
            let (x, y) = (
                x.parse::<f64>().unwrap_or(f64::NAN),
                y.parse::<f64>().unwrap_or(f64::NAN),
            );
            x.total_cmp(&y)
        }
        _ => {
            let text = |v: &Value| {
                v.get("S")
                    .or_else(|| v.get("B"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            text(a).cmp(&text(b))
        }
    }
}

/// One comparison of a key condition.
#[derive(Debug, Clone, PartialEq)]
enum Test {
    Cmp(String, Value),
    Between(Value, Value),
    BeginsWith(String),
}

/// A `KeyConditionExpression` with its names and values resolved: attribute -> tests.
#[derive(Debug, Clone, PartialEq)]
struct KeyCondition(Vec<(String, Test)>);

impl KeyCondition {
    fn parse(request: &Value) -> Result<KeyCondition, String> {
        let text = request["KeyConditionExpression"]
            .as_str()
            .ok_or("no KeyConditionExpression")?;
        let name = |token: &str| -> Result<String, String> {
            if token.starts_with('#') {
                request["ExpressionAttributeNames"][token]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("the name {token} is not defined"))
            } else {
                Ok(token.to_string())
            }
        };
        let value = |token: &str| -> Result<Value, String> {
            request["ExpressionAttributeValues"]
                .get(token)
                .cloned()
                .ok_or_else(|| format!("the value {token} is not defined"))
        };
        // tokens: parentheses and commas stand alone, operators split from their operands
        let spaced = text
            .replace('(', " ( ")
            .replace(')', " ) ")
            .replace(',', " , ")
            .replace("<=", " <= ")
            .replace(">=", " >= ");
        let mut tokens: Vec<String> = Vec::new();
        for word in spaced.split_whitespace() {
            if matches!(word, "<=" | ">=") {
                tokens.push(word.to_string());
                continue;
            }
            let mut current = String::new();
            for ch in word.chars() {
                if matches!(ch, '=' | '<' | '>') {
                    if !current.is_empty() {
                        tokens.push(std::mem::take(&mut current));
                    }
                    tokens.push(ch.to_string());
                } else {
                    current.push(ch);
                }
            }
            if !current.is_empty() {
                tokens.push(current);
            }
        }
        let tokens: Vec<&str> = tokens
            .iter()
            .map(String::as_str)
            .filter(|t| *t != "(" && *t != ")")
            .collect();
        let mut out = Vec::new();
        let mut i = 0;
        let unsupported = || format!("the key condition {text:?} is not one the lag models");
        while i < tokens.len() {
            if tokens[i].eq_ignore_ascii_case("begins_with") {
                // begins_with ( name , value )
                let (Some(n), Some(&","), Some(v)) =
                    (tokens.get(i + 1), tokens.get(i + 2), tokens.get(i + 3))
                else {
                    return Err(unsupported());
                };
                let prefix = value(v)?;
                let prefix = prefix.get("S").and_then(Value::as_str).ok_or_else(unsupported)?;
                out.push((name(n)?, Test::BeginsWith(prefix.to_string())));
                i += 4;
            } else {
                let (Some(n), Some(op)) = (tokens.get(i), tokens.get(i + 1)) else {
                    return Err(unsupported());
                };
                if op.eq_ignore_ascii_case("between") {
                    let (Some(lo), Some(and), Some(hi)) =
                        (tokens.get(i + 2), tokens.get(i + 3), tokens.get(i + 4))
                    else {
                        return Err(unsupported());
                    };
                    if !and.eq_ignore_ascii_case("and") {
                        return Err(unsupported());
                    }
                    out.push((name(n)?, Test::Between(value(lo)?, value(hi)?)));
                    i += 5;
                } else if matches!(*op, "=" | "<" | "<=" | ">" | ">=") {
                    let v = tokens.get(i + 2).ok_or_else(unsupported)?;
                    out.push((name(n)?, Test::Cmp((*op).to_string(), value(v)?)));
                    i += 3;
                } else {
                    return Err(unsupported());
                }
            }
            match tokens.get(i) {
                None => {}
                Some(t) if t.eq_ignore_ascii_case("and") => i += 1,
                Some(_) => return Err(unsupported()),
            }
        }
        if out.is_empty() {
            return Err(unsupported());
        }
        Ok(KeyCondition(out))
    }

    fn matches(&self, item: &Value) -> bool {
        use std::cmp::Ordering::*;
        self.0.iter().all(|(name, test)| {
            let Some(actual) = item.get(name) else {
                return false;
            };
            let same_type = |v: &Value| {
                actual.as_object().and_then(|m| m.keys().next())
                    == v.as_object().and_then(|m| m.keys().next())
            };
            match test {
                Test::Cmp(op, v) => {
                    let order = compare(actual, v);
                    same_type(v)
                        && match op.as_str() {
                            "=" => order == Equal,
                            "<" => order == Less,
                            "<=" => order != Greater,
                            ">" => order == Greater,
                            _ => order != Less,
                        }
                }
                Test::Between(lo, hi) => {
                    same_type(lo) && compare(actual, lo) != Less && compare(actual, hi) != Greater
                }
                Test::BeginsWith(prefix) => actual
                    .get("S")
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.starts_with(prefix.as_str())),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> TableSchema {
        let mut s = TableSchema {
            partition_key: "execution_id".into(),
            sort_key: Some("path".into()),
            ..TableSchema::default()
        };
        s.global_indexes
            .insert("due_index".into(), vec!["due_shard".into(), "fire_at".into()]);
        s.index_projections
            .insert("due_index".into(), Projection::KeysOnly);
        s
    }

    fn timer(path: &str, fire_at: &str) -> Value {
        json!({"execution_id": {"S": "e"}, "path": {"S": path}, "due_shard": {"S": "due#1"},
               "fire_at": {"N": fire_at}, "other": {"S": "x"}})
    }

    fn query(now: &str) -> Value {
        json!({
            "TableName": "lag_timers", "IndexName": "due_index",
            "KeyConditionExpression": "#s = :s AND #f <= :now",
            "ExpressionAttributeNames": {"#s": "due_shard", "#f": "fire_at"},
            "ExpressionAttributeValues": {":s": {"S": "due#1"}, ":now": {"N": now}},
        })
    }

    #[test]
    fn key_conditions_parse_and_match() {
        let c = KeyCondition::parse(&query("100")).expect("parses");
        assert!(c.matches(&timer("A", "50")));
        assert!(c.matches(&timer("A", "100")));
        assert!(!c.matches(&timer("A", "100.5")));
        let between = json!({
            "KeyConditionExpression": "due_shard=:s and fire_at BETWEEN :a AND :b",
            "ExpressionAttributeValues": {":s": {"S": "due#1"}, ":a": {"N": "10"}, ":b": {"N": "20"}},
        });
        let c = KeyCondition::parse(&between).expect("parses");
        assert!(c.matches(&timer("A", "10")) && !c.matches(&timer("A", "21")));
        let begins = json!({
            "KeyConditionExpression": "execution_id = :e AND begins_with(#p, :p)",
            "ExpressionAttributeNames": {"#p": "path"},
            "ExpressionAttributeValues": {":e": {"S": "e"}, ":p": {"S": "Wa"}},
        });
        let c = KeyCondition::parse(&begins).expect("parses");
        assert!(c.matches(&timer("Waiting", "1")) && !c.matches(&timer("Away", "1")));
        assert!(KeyCondition::parse(&json!({"KeyConditionExpression": "a IN (:x)"})).is_err());
    }

    #[test]
    fn a_query_sees_the_index_as_of_the_view_time() {
        let lag = IndexLag::default();
        lag.set("lag_", IndexView::Behind(10.0));
        let schemas: BTreeMap<String, TableSchema> = [("lag_timers".to_string(), schema())].into();
        let put = |item: &Value| json!({"TableName": "lag_timers", "Item": item});
        let a1 = timer("A", "50");
        let writes = lag.writes_of("PutItem", &put(&a1), &schemas);
        assert_eq!(writes.len(), 1);
        assert!(lag.unknown(&writes[0]));
        lag.record(&writes[0], f64::NEG_INFINITY, None, 0.0);
        lag.record(&writes[0], 1.0, Some(a1.clone()), 1.0);
        // re-armed at 20 (fire_at 80), and B armed at 20 too
        lag.record(&writes[0], 20.0, Some(timer("A", "80")), 20.0);
        let b = timer("B", "60");
        let wb = lag.writes_of("PutItem", &put(&b), &schemas);
        lag.record(&wb[0], f64::NEG_INFINITY, None, 20.0);
        lag.record(&wb[0], 20.0, Some(b.clone()), 20.0);
        // live, moto lists A at 80 and B at 60 as due by 100
        let live = json!({"Items": [
            {"execution_id": {"S": "e"}, "path": {"S": "B"}, "due_shard": {"S": "due#1"}, "fire_at": {"N": "60"}},
            {"execution_id": {"S": "e"}, "path": {"S": "A"}, "due_shard": {"S": "due#1"}, "fire_at": {"N": "80"}},
        ], "Count": 2, "ScannedCount": 2});
        // at 25 the index shows the table of 15: A at its old fire_at, B not yet
        let seen = lag
            .answer_query(&query("100"), &live, &schemas, 25.0)
            .expect("lagged");
        assert_eq!(
            seen["Items"],
            json!([{"execution_id": {"S": "e"}, "path": {"S": "A"}, "due_shard": {"S": "due#1"}, "fire_at": {"N": "50"}}]),
            "KEYS_ONLY: the old entry, projected"
        );
        assert_eq!(seen["Count"], 1);
        // a Scan of the index shows the same entries: all it held at the view time
        let scan = json!({"TableName": "lag_timers", "IndexName": "due_index"});
        let seen = lag.answer_query(&scan, &live, &schemas, 25.0).expect("lagged");
        assert_eq!(
            seen["Items"],
            json!([{"execution_id": {"S": "e"}, "path": {"S": "A"}, "due_shard": {"S": "due#1"}, "fire_at": {"N": "50"}}]),
        );
        // the old entry must still match the key condition: not due by 40
        let seen = lag
            .answer_query(&query("40"), &json!({"Items": []}), &schemas, 25.0)
            .expect("lagged");
        assert_eq!(seen["Items"], json!([]));
        // at 31 the index has caught up: moto's answer as it is
        let seen = lag
            .answer_query(&query("100"), &live, &schemas, 31.0)
            .expect("lagged");
        assert_eq!(seen["Items"].as_array().map(Vec::len), Some(2));
        assert_eq!(seen["Items"][0]["path"], json!({"S": "B"}), "sorted on fire_at");
        // a deleted item shows again until the lag has passed
        lag.record(&wb[0], 40.0, None, 40.0);
        let without_b = json!({"Items": [live["Items"][1].clone()], "Count": 1});
        let seen = lag
            .answer_query(&query("100"), &without_b, &schemas, 45.0)
            .expect("lagged");
        assert_eq!(seen["Items"].as_array().map(Vec::len), Some(2), "{seen}");
        // another prefix does not lag
        assert_eq!(lag.view_of("other_timers"), None);
        lag.clear("lag_");
        assert_eq!(lag.answer_query(&query("100"), &live, &schemas, 45.0), None);
    }
}
