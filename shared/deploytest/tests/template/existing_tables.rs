//! `ExistingTables=true`: the stack over tables already there creates no table and changes
//! no grant, environment or output, compared on the evaluated template.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use stm_deploytest::template::{Resolver, Template};

use crate::support::FUNCTIONS;

/// The evaluated template, as a stack deployed with `overrides` would have it: each
/// created resource's `Properties`, `Metadata` and `DependsOn`, and the outputs. Fails on
/// any reference to a resource the stack does not create (CloudFormation refuses those).
pub(crate) fn deployed(t: &Template, r: &Resolver) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for (id, resource) in t.resources() {
        if !r.created(id).expect("condition") {
            continue;
        }
        for part in ["Properties", "Metadata"] {
            if !resource[part].is_null() {
                let value = r
                    .eval(&resource[part])
                    .unwrap_or_else(|e| panic!("{id}.{part}: {e:#}"))
                    .unwrap_or(Value::Null);
                out.insert(format!("{id}.{part}"), value);
            }
        }
        let depends: Vec<String> = match &resource["DependsOn"] {
            Value::String(one) => vec![one.clone()],
            Value::Array(many) => many
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        };
        for on in depends {
            assert!(
                r.created(&on).expect("condition"),
                "{id} DependsOn {on}, which the stack does not create"
            );
        }
    }
    for (name, output) in t.doc["Outputs"].as_object().expect("Outputs") {
        let value = r
            .string(&output["Value"])
            .unwrap_or_else(|e| panic!("output {name}: {e:#}"));
        out.insert(format!("Outputs.{name}"), Value::String(value));
    }
    out
}

/// Every statement of every role and managed policy, evaluated: (policy, Sid) -> its
/// `Resource`s, as a sorted list.
fn statement_resources(t: &Template, r: &Resolver) -> BTreeMap<(String, String), Vec<String>> {
    let mut out = BTreeMap::new();
    let mut documents: Vec<(String, &Value)> = Vec::new();
    for id in t.of_type("AWS::IAM::Role") {
        for p in t.properties(&id).expect("role")["Policies"]
            .as_array()
            .into_iter()
            .flatten()
        {
            documents.push((id.clone(), &p["PolicyDocument"]));
        }
    }
    for id in t.of_type("AWS::IAM::ManagedPolicy") {
        documents.push((id.clone(), &t.properties(&id).expect("policy")["PolicyDocument"]));
    }
    for (policy, document) in documents {
        for statement in document["Statement"].as_array().into_iter().flatten() {
            let Some(statement) = r.eval(statement).unwrap_or_else(|e| panic!("{policy}: {e:#}")) else {
                continue;
            };
            let sid = statement["Sid"].as_str().unwrap_or("?").to_string();
            let mut resources: Vec<String> = match &statement["Resource"] {
                Value::String(one) => vec![one.clone()],
                Value::Array(many) => many
                    .iter()
                    .map(|v| v.as_str().unwrap_or_default().to_string())
                    .collect(),
                other => panic!("{policy}/{sid}: Resource {other}"),
            };
            resources.sort();
            assert!(
                out.insert((policy.clone(), sid.clone()), resources).is_none(),
                "{policy}: two statements {sid}"
            );
        }
    }
    out
}

/// `ExistingTables=true` deploys over tables that are already there (harel's, `stm
/// local`'s, or retained from a deleted stack): the stack creates no table and no scaling
/// of one, with either capacity mode, yet its roles and policies grant exactly the table
/// and index ARNs they grant when it creates the tables (those tables' own ARNs), and the
/// functions get the same environment and the outputs the same values.
#[test]
fn existing_tables_create_no_table_and_change_no_grant_or_environment() {
    let t = Template::repo();
    assert_eq!(
        t.parameter_defaults().get("ExistingTables").map(String::as_str),
        Some("false"),
        "the stack creates its tables unless told otherwise"
    );
    let tables = t.of_type("AWS::DynamoDB::Table");
    assert_eq!(tables.len(), 7);
    let scaling: Vec<String> = [
        "AWS::ApplicationAutoScaling::ScalableTarget",
        "AWS::ApplicationAutoScaling::ScalingPolicy",
    ]
    .iter()
    .flat_map(|ty| t.of_type(ty))
    .collect();
    assert!(!scaling.is_empty());
    let queues = [
        (
            "EventQueue",
            "https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo",
        ),
        ("TimerQueue", "https://sqs.us-east-1.amazonaws.com/123456789012/t"),
    ];
    for capacity in ["on-demand", "provisioned"] {
        let resolver = |existing: &str| {
            let mut r = Resolver::new(
                &t,
                &[
                    ("ExistingTables", existing),
                    ("CapacityMode", capacity),
                    ("Prefix", "shop"),
                ],
            )
            .with_placeholders();
            for (id, url) in queues {
                r = r.with_ref(id, url);
            }
            r
        };
        // the stack's own tables: Ref and Arn as CloudFormation gives them
        let own = resolver("false").with_table_refs().with_table_arns();
        let existing = resolver("true");

        // (a) what is created
        for id in &tables {
            assert!(
                own.created(id).expect("condition"),
                "{capacity}: {id} is created by default"
            );
            assert!(
                !existing.created(id).expect("condition"),
                "{capacity}, ExistingTables=true: {id} must not be created (it exists)"
            );
        }
        for id in &scaling {
            assert_eq!(
                own.created(id).expect("condition"),
                capacity == "provisioned",
                "{capacity}: {id}"
            );
            assert!(
                !existing.created(id).expect("condition"),
                "{capacity}, ExistingTables=true: {id} scales a table the stack does not own"
            );
        }
        // nothing created refers to a table that is not (the evaluation fails if it does)
        let own_stack = deployed(&t, &own);
        let existing_stack = deployed(&t, &existing);

        // (b) the grants: the same ARNs either way, and those are the tables' own
        let own_grants = statement_resources(&t, &own);
        let existing_grants = statement_resources(&t, &existing);
        assert_eq!(
            own_grants, existing_grants,
            "{capacity}: the roles' and policies' resources differ with ExistingTables=true"
        );
        let arns: BTreeSet<String> = tables
            .iter()
            .map(|id| own.attributes[&format!("{id}.Arn")].clone())
            .collect();
        let mut granted_tables = BTreeSet::new();
        for ((policy, sid), resources) in &own_grants {
            for arn in resources.iter().filter(|a| a.contains(":dynamodb:")) {
                let table = arn.split("/index/").next().unwrap_or_default().to_string();
                assert!(
                    arns.contains(&table),
                    "{policy}/{sid}: {arn} is not a table of the stack ({arns:?})"
                );
                // an index grant names one of the store's indexes, on its own table
                if let Some(index) = arn.split("/index/").nth(1) {
                    let owner = stm_deploytest::stm_store::table_specs()
                        .into_iter()
                        .find(|spec| spec.indexes.iter().any(|i| i.name == index));
                    let owner = owner
                        .unwrap_or_else(|| panic!("{policy}/{sid}: {index} is not an index of the store"));
                    assert!(
                        table.ends_with(&format!("/shop_{}", owner.name)),
                        "{policy}/{sid}: {arn}"
                    );
                }
                granted_tables.insert(table);
            }
        }
        assert_eq!(
            granted_tables, arns,
            "{capacity}: every table is granted to someone"
        );

        // (c) the environment and the outputs
        for function in FUNCTIONS {
            assert_eq!(
                own.environment(function).expect("environment"),
                existing.environment(function).expect("environment"),
                "{capacity}: {function}'s environment"
            );
        }
        let outputs = |stack: &BTreeMap<String, Value>| {
            stack
                .iter()
                .filter(|(k, _)| k.starts_with("Outputs."))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(
            outputs(&own_stack),
            outputs(&existing_stack),
            "{capacity}: outputs"
        );
        // the rest of the stack is the same but for the tables and their scaling (so an
        // IMPORT change set of the tables, which may change nothing else, can flip it)
        let rest = |stack: &BTreeMap<String, Value>| {
            stack
                .iter()
                .filter(|(k, _)| {
                    let id = k.split('.').next().unwrap_or_default().to_string();
                    !tables.contains(&id) && !scaling.contains(&id)
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(
            rest(&own_stack),
            rest(&existing_stack),
            "{capacity}: the other resources"
        );
    }
}
