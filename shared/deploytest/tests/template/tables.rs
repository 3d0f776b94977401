//! The store's tables: each declared with the seed's key schema, and with
//! `CapacityMode=provisioned` each table and index scaled between the two parameters.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use stm_deploytest::template::{Resolver, Template};
use stm_store::dynamodb::schema::{KeyType, TTL_ATTRIBUTE};

#[test]
fn every_store_table_is_declared_with_the_seed_key_schema() {
    let t = Template::repo();
    let r = Resolver::new(&t, &[]);
    let declared = r.table_names().expect("table names");
    let specs = stm_store::table_specs();
    assert_eq!(
        declared.len(),
        specs.len(),
        "template.yaml declares {} tables, the store has {}: {declared:?}",
        declared.len(),
        specs.len()
    );
    for spec in specs {
        let name = spec.table_name(stm_runtime::config::DEFAULT_PREFIX);
        let id = declared
            .get(&name)
            .unwrap_or_else(|| panic!("no table {name} in template.yaml (have {declared:?})"));
        let p = t.properties(id).expect("properties");
        // the name follows the Prefix parameter
        assert_eq!(
            p["TableName"],
            json!({"Fn::Sub": format!("${{Prefix}}_{}", spec.name)}),
            "{id}"
        );
        let want_keys: Vec<Value> = spec
            .keys()
            .iter()
            .enumerate()
            .map(|(i, k)| json!({"AttributeName": k.name, "KeyType": if i == 0 { "HASH" } else { "RANGE" }}))
            .collect();
        assert_eq!(p["KeySchema"], Value::Array(want_keys), "{id} KeySchema");
        let want_attrs: BTreeSet<(String, String)> = spec
            .attribute_definitions()
            .iter()
            .map(|k| (k.name.to_string(), k.ty.as_str().to_string()))
            .collect();
        let attrs: BTreeSet<(String, String)> = p["AttributeDefinitions"]
            .as_array()
            .expect("AttributeDefinitions")
            .iter()
            .map(|a| {
                (
                    a["AttributeName"].as_str().unwrap_or_default().to_string(),
                    a["AttributeType"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        assert_eq!(
            attrs, want_attrs,
            "{id} AttributeDefinitions (the key attributes of the table and its indexes)"
        );
        // the store's secondary indexes, exactly
        let want_indexes: Vec<Value> = spec
            .indexes
            .iter()
            .map(|ix| {
                let keys: Vec<Value> = ix
                    .keys()
                    .iter()
                    .enumerate()
                    .map(|(i, k)| json!({"AttributeName": k.name, "KeyType": if i == 0 { "HASH" } else { "RANGE" }}))
                    .collect();
                json!({"IndexName": ix.name, "KeySchema": keys, "Projection": {"ProjectionType": ix.projection.as_str()}})
            })
            .collect();
        // (their capacity, with CapacityMode=provisioned, is the next test's)
        let indexes: Vec<Value> = p["GlobalSecondaryIndexes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|ix| {
                let mut ix = ix.clone();
                if let Some(ix) = ix.as_object_mut() {
                    ix.remove("ProvisionedThroughput");
                }
                ix
            })
            .collect();
        let indexes = Value::Array(indexes);
        assert_eq!(indexes, Value::Array(want_indexes), "{id} GlobalSecondaryIndexes");
        assert!(p["LocalSecondaryIndexes"].is_null(), "{id}: no local indexes");
        assert_eq!(
            r.eval(&p["BillingMode"]).expect("BillingMode"),
            Some(json!("PAY_PER_REQUEST")),
            "{id}: on-demand by default"
        );
        assert_eq!(p["SSESpecification"]["SSEEnabled"], true, "{id}");
        assert_eq!(
            p["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"], true,
            "{id}"
        );
        assert_eq!(
            p["DeletionProtectionEnabled"],
            json!({"Ref": "TableDeletionProtection"}),
            "{id}"
        );
        let res = t.resource(id).expect("resource");
        assert_eq!(
            res["DeletionPolicy"], "Retain",
            "{id}: the data outlives the stack"
        );
        // dedupe marks expire; so do finished executions and trace rows when a retention
        // is set, and a counted join's rows in `counters` (the items say when: the TTL
        // itself deletes nothing that lacks the attribute, as harel's seq items do)
        if ["processed", "executions", "trace", "counters"].contains(&spec.name) {
            assert_eq!(
                p["TimeToLiveSpecification"],
                json!({"AttributeName": TTL_ATTRIBUTE, "Enabled": true}),
                "{id}: items with a ttl expire"
            );
        } else {
            assert!(
                p["TimeToLiveSpecification"].is_null(),
                "{id}: only processed, executions, trace and counters have a TTL"
            );
        }
        // the key types the store writes
        for k in spec.keys() {
            assert!(matches!(k.ty, KeyType::String | KeyType::Number));
        }
    }
    // the default prefix is harel's, and valid by harel's rule
    let defaults = t.parameter_defaults();
    assert_eq!(defaults["Prefix"], stm_runtime::config::DEFAULT_PREFIX);
    assert!(stm_store::dynamodb::schema::valid_prefix(&defaults["Prefix"]));
}

/// `CapacityMode=provisioned` turns every table of the store and every one of its indexes
/// to provisioned capacity, starting at `ProvisionedMinUnits`, and gives each of them a
/// read and a write scalable target between the two parameters with a target-tracking
/// policy on the matching utilization metric: a table or index the store gains without
/// its scaling fails here. With the default (on-demand) none of it exists.
#[test]
fn provisioned_capacity_scales_every_table_and_index() {
    let t = Template::repo();
    let specs = stm_store::table_specs();
    assert_eq!(t.parameter_defaults()["CapacityMode"], "on-demand");

    // what the scaling resources of a template resolve to: (resource id, dimension) ->
    // (min, max, the policy's metric, its target)
    fn scaling(t: &Template, r: &Resolver) -> BTreeMap<(String, String), (String, String, String, String)> {
        let live = |id: &str| {
            let cond = &t.resource(id).expect("resource")["Condition"];
            cond.is_null()
                || r.condition(cond.as_str().expect("a condition name"))
                    .expect("condition")
        };
        let mut out = BTreeMap::new();
        for target in t.of_type("AWS::ApplicationAutoScaling::ScalableTarget") {
            if !live(&target) {
                continue;
            }
            let p = r
                .eval(t.properties(&target).expect("properties"))
                .expect("eval")
                .expect("props");
            assert_eq!(p["ServiceNamespace"], "dynamodb", "{target}");
            let policies: Vec<Value> = t
                .of_type("AWS::ApplicationAutoScaling::ScalingPolicy")
                .into_iter()
                .filter(|id| live(id))
                .map(|id| t.properties(&id).expect("properties").clone())
                .filter(|p| p["ScalingTargetId"] == json!({"Ref": target}))
                .collect();
            assert_eq!(policies.len(), 1, "{target}: one scaling policy");
            // (its ScalingTargetId is the target's Ref, matched above)
            let mut policy = policies[0].clone();
            if let Some(p) = policy.as_object_mut() {
                p.remove("ScalingTargetId");
            }
            let policy = r.eval(&policy).expect("eval").expect("policy");
            assert_eq!(policy["PolicyType"], "TargetTrackingScaling", "{target}");
            let tracking = &policy["TargetTrackingScalingPolicyConfiguration"];
            let key = (
                p["ResourceId"].as_str().expect("ResourceId").to_string(),
                p["ScalableDimension"]
                    .as_str()
                    .expect("ScalableDimension")
                    .to_string(),
            );
            let value = (
                p["MinCapacity"].as_str().expect("MinCapacity").to_string(),
                p["MaxCapacity"].as_str().expect("MaxCapacity").to_string(),
                tracking["PredefinedMetricSpecification"]["PredefinedMetricType"]
                    .as_str()
                    .expect("metric")
                    .to_string(),
                tracking["TargetValue"].as_str().expect("TargetValue").to_string(),
            );
            assert!(
                out.insert(key, value).is_none(),
                "{target}: a second target for one dimension"
            );
        }
        out
    }

    // on-demand: no throughput, no scaling
    let r = Resolver::new(&t, &[]).with_table_refs();
    assert!(scaling(&t, &r).is_empty(), "on-demand scales nothing");
    for id in t.of_type("AWS::DynamoDB::Table") {
        let p = r
            .eval(t.properties(&id).expect("properties"))
            .expect("eval")
            .expect("props");
        assert_eq!(p["BillingMode"], "PAY_PER_REQUEST", "{id}");
        assert!(p.get("ProvisionedThroughput").is_none(), "{id}");
        for ix in p["GlobalSecondaryIndexes"].as_array().into_iter().flatten() {
            assert!(
                ix.get("ProvisionedThroughput").is_none(),
                "{id} {}",
                ix["IndexName"]
            );
        }
    }

    // provisioned
    let overrides = [
        ("CapacityMode", "provisioned"),
        ("ProvisionedMinUnits", "7"),
        ("ProvisionedMaxUnits", "900"),
        ("ProvisionedTargetUtilization", "60"),
    ];
    let r = Resolver::new(&t, &overrides).with_table_refs();
    let names = r.table_names().expect("table names");
    let mut want = BTreeMap::new();
    let start = json!({"ReadCapacityUnits": "7", "WriteCapacityUnits": "7"});
    for spec in specs {
        let name = spec.table_name(stm_runtime::config::DEFAULT_PREFIX);
        let id = &names[&name];
        let p = r
            .eval(t.properties(id).expect("properties"))
            .expect("eval")
            .expect("props");
        assert_eq!(p["BillingMode"], "PROVISIONED", "{id}");
        assert_eq!(p["ProvisionedThroughput"], start, "{id} starts at the minimum");
        let mut scaled = vec![(format!("table/{name}"), "table")];
        for ix in spec.indexes {
            let declared = p["GlobalSecondaryIndexes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|d| d["IndexName"] == ix.name)
                .unwrap_or_else(|| panic!("{id}: no index {}", ix.name));
            assert_eq!(declared["ProvisionedThroughput"], start, "{id} {}", ix.name);
            scaled.push((format!("table/{name}/index/{}", ix.name), "index"));
        }
        for (resource, kind) in scaled {
            for (units, metric) in [
                ("ReadCapacityUnits", "DynamoDBReadCapacityUtilization"),
                ("WriteCapacityUnits", "DynamoDBWriteCapacityUtilization"),
            ] {
                want.insert(
                    (resource.clone(), format!("dynamodb:{kind}:{units}")),
                    (
                        "7".to_string(),
                        "900".to_string(),
                        metric.to_string(),
                        "60".to_string(),
                    ),
                );
            }
        }
    }
    assert_eq!(
        scaling(&t, &r),
        want,
        "each table and index, read and write, scaled"
    );
}
