//! `template.yaml`'s static invariants: the tables are the store's, the queue is FIFO with
//! its dead-letter queue, the worker reports partial batch failures, the functions are
//! built by cargo-lambda for arm64 with their own roles and the documented environment,
//! the alarms and outputs are there. (What each role allows is `tests/policies.rs`.)

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use stm_deploytest::iam;
use stm_deploytest::template::{referenced, Resolver, Template};
use stm_store::dynamodb::schema::{KeyType, TTL_ATTRIBUTE};

const FUNCTIONS: [&str; 3] = ["Worker", "Relay", "Sweeper"];

fn prop<'a>(t: &'a Template, id: &str, name: &str) -> &'a Value {
    &t.properties(id).unwrap_or_else(|e| panic!("{e}"))[name]
}

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
        // is set (the items say when: the TTL itself deletes nothing that lacks the attribute)
        if ["processed", "executions", "trace"].contains(&spec.name) {
            assert_eq!(
                p["TimeToLiveSpecification"],
                json!({"AttributeName": TTL_ATTRIBUTE, "Enabled": true}),
                "{id}: items with a ttl expire"
            );
        } else {
            assert!(
                p["TimeToLiveSpecification"].is_null(),
                "{id}: only processed, executions and trace have a TTL"
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

#[test]
fn the_event_queue_is_fifo_encrypted_and_dead_letters() {
    let t = Template::repo();
    let events = prop(&t, "Worker", "Events").as_object().expect("Worker.Events");
    let sqs = events
        .values()
        .find(|e| e["Type"] == "SQS")
        .expect("the worker's SQS event");
    let queue =
        referenced(&sqs["Properties"]["Queue"]).expect("the worker's SQS event names a template queue");
    assert_eq!(queue, "EventQueue", "the queue STM_QUEUE_URL names");
    assert_eq!(
        prop(&t, "Worker", "Environment")["Variables"]["STM_QUEUE_URL"],
        json!({"Ref": "EventQueue"})
    );
    let q = t.properties(&queue).expect("queue");
    assert_eq!(q["FifoQueue"], true);
    assert_eq!(
        q["ContentBasedDeduplication"], false,
        "deduplication ids are explicit"
    );
    assert_eq!(q["SqsManagedSseEnabled"], true);
    let dlq =
        referenced(&q["RedrivePolicy"]["deadLetterTargetArn"]).expect("a redrive policy to a template queue");
    let d = t.properties(&dlq).expect("dlq");
    assert_eq!(d["FifoQueue"], true, "a FIFO queue's dead-letter queue is FIFO");
    assert_eq!(d["SqsManagedSseEnabled"], true);
    assert_eq!(
        q["RedrivePolicy"]["maxReceiveCount"],
        json!({"Ref": "MaxReceiveCount"})
    );
    // AWS: the visibility timeout at least 6 x the function timeout
    let timeout = t
        .function_property("Worker", "Timeout")
        .expect("timeout")
        .as_i64()
        .expect("a fixed Timeout");
    let visibility = q["VisibilityTimeout"]
        .as_i64()
        .expect("a fixed VisibilityTimeout");
    assert!(
        visibility >= 6 * timeout,
        "VisibilityTimeout {visibility} < 6 x the worker's Timeout {timeout}"
    );
    // the dead-letter queue keeps messages at least as long as the queue
    let keep = |p: &Value| p["MessageRetentionPeriod"].as_i64().unwrap_or(345_600);
    assert!(keep(d) >= keep(q));
    // SQS deletes a message at the end of its retention, dead-letter queue or not: every
    // retry schedule the template allows must end before it. The most receives
    // MaxReceiveCount takes, each hidden for the longest the worker hides a message (its
    // back-off caps) or the visibility timeout (a worker that dies holding it)
    let most_receives: i64 = t.doc["Parameters"]["MaxReceiveCount"]["MaxValue"]
        .as_i64()
        .expect("MaxReceiveCount has a MaxValue");
    let s = stm_runtime::worker::WorkerSettings::default();
    let longest_hidden = [
        visibility,
        i64::from(s.retry_max_seconds),
        i64::from(s.poison_retry_seconds),
        i64::from(s.suspend_recheck_max_seconds),
    ]
    .into_iter()
    .max()
    .unwrap_or(visibility);
    assert!(
        most_receives * longest_hidden < keep(q),
        "{most_receives} receives of up to {longest_hidden} s outlast the queue's retention of {} s",
        keep(q)
    );
    assert_eq!(keep(q), 1_209_600, "SQS's longest retention, 14 days");
    // SQS's largest message (1 MiB), explicit on both: the runtime refuses a bigger one at
    // commit (stm-runtime's MAX_MESSAGE_BYTES) and relies on the queues taking up to it,
    // and a redriven message must fit the dead-letter queue too
    for (name, props) in [("EventQueue", q), ("DeadLetterQueue", d)] {
        assert_eq!(
            props["MaximumMessageSize"],
            json!(stm_runtime::queue::MAX_MESSAGE_BYTES),
            "{name}.MaximumMessageSize must be 1048576"
        );
    }
}

#[test]
fn the_worker_takes_fifo_batches_and_reports_partial_failures() {
    let t = Template::repo();
    let r = Resolver::new(&t, &[]);
    let events = prop(&t, "Worker", "Events").as_object().expect("Worker.Events");
    let sqs: Vec<&Value> = events.values().filter(|e| e["Type"] == "SQS").collect();
    assert_eq!(sqs.len(), 1, "one SQS event source");
    let p = &sqs[0]["Properties"];
    assert!(
        p["FunctionResponseTypes"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("ReportBatchItemFailures"))),
        "ReportBatchItemFailures is on"
    );
    let batch: i64 = r
        .string(&p["BatchSize"])
        .expect("BatchSize")
        .parse()
        .expect("a number");
    assert!(
        (1..=10).contains(&batch),
        "BatchSize {batch}: a FIFO queue allows 1..=10"
    );
    if let Some(param) = referenced(&p["BatchSize"]) {
        let max = &t.doc["Parameters"][&param]["MaxValue"];
        assert!(
            max.as_i64().is_some_and(|m| m <= 10),
            "{param}.MaxValue must keep BatchSize <= 10"
        );
    }
    assert!(
        !p["ScalingConfig"]["MaximumConcurrency"].is_null(),
        "the worker's concurrency is bounded"
    );
    for (name, event) in events {
        assert_eq!(event["Type"], "SQS", "the worker has no other trigger ({name})");
    }
}

#[test]
fn relay_and_sweeper_run_on_schedules() {
    let t = Template::repo();
    let r = Resolver::new(&t, &[]);
    for (function, param) in [("Relay", "RelaySchedule"), ("Sweeper", "SweeperSchedule")] {
        let events = prop(&t, function, "Events").as_object().expect("Events");
        let schedules: Vec<&Value> = events.values().filter(|e| e["Type"] == "Schedule").collect();
        assert_eq!(schedules.len(), 1, "{function}: one schedule");
        let event = schedules[0];
        assert_eq!(
            event["Properties"]["Schedule"],
            json!({"Ref": param}),
            "{function}"
        );
        assert_eq!(r.parameters[param], "rate(1 minute)", "{param} default");
    }
    assert_eq!(prop(&t, "Relay", "Events").as_object().map(|e| e.len()), Some(1));
    // the sweeper's other trigger: the precise-timer doorbells, a standard queue
    let events = prop(&t, "Sweeper", "Events").as_object().expect("Events");
    assert_eq!(events.len(), 2);
    let doorbells = &events["Doorbells"];
    assert_eq!(doorbells["Type"], "SQS");
    assert_eq!(
        doorbells["Properties"]["Queue"],
        json!({"Fn::GetAtt": ["TimerQueue", "Arn"]})
    );
    assert_eq!(
        doorbells["Properties"]["FunctionResponseTypes"],
        json!(["ReportBatchItemFailures"])
    );
    let queue = t.properties("TimerQueue").expect("TimerQueue");
    assert!(queue["FifoQueue"].is_null(), "standard: per-message delays");
    assert_eq!(queue["SqsManagedSseEnabled"], json!(true), "encrypted at rest");
}

#[test]
fn functions_are_built_by_cargo_lambda_for_arm64() {
    let t = Template::repo();
    for function in FUNCTIONS {
        let res = t.resource(function).expect("function");
        assert_eq!(res["Type"], "AWS::Serverless::Function");
        assert_eq!(
            t.function_property(function, "Runtime").expect("Runtime"),
            "provided.al2023"
        );
        // arm64 unless the Architecture parameter says x86_64 (local runs on an x86_64 host)
        assert_eq!(
            t.function_property(function, "Architectures")
                .expect("Architectures"),
            &json!([{ "Ref": "Architecture" }])
        );
        assert_eq!(t.doc["Parameters"]["Architecture"]["Default"], "arm64");
        assert_eq!(res["Metadata"]["BuildMethod"], "rust-cargolambda", "{function}");
        let binary = res["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .expect("BuildProperties.Binary");
        let code = prop(&t, function, "CodeUri").as_str().expect("CodeUri");
        let manifest = t.dir().join(code).join("Cargo.toml");
        let text =
            std::fs::read_to_string(&manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
        assert!(
            text.contains("[[bin]]") && text.contains(&format!("name = \"{binary}\"")),
            "{function}: {} has no binary {binary}",
            manifest.display()
        );
    }
    // the release profile the zips are built with
    let cargo = std::fs::read_to_string(t.dir().join("Cargo.toml")).expect("Cargo.toml");
    let profile = cargo
        .split("[profile.release]")
        .nth(1)
        .expect("[profile.release]");
    let profile = profile.split("\n[").next().unwrap_or_default();
    for line in [
        "lto = true",
        "codegen-units = 1",
        "strip = true",
        "panic = \"unwind\"",
    ] {
        assert!(profile.contains(line), "[profile.release] must set {line}");
    }
}

/// The variables ARCHITECTURE.md documents for the functions.
fn documented_variables() -> BTreeSet<String> {
    let text = std::fs::read_to_string(stm_deploytest::repo_root().join("ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md");
    let section = text
        .split("## Configuration of the functions")
        .nth(1)
        .expect("the configuration section");
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn functions_get_the_documented_environment() {
    let t = Template::repo();
    let documented = documented_variables();
    let r = Resolver::new(&t, &[])
        .with_ref(
            "EventQueue",
            "https://sqs.us-east-1.amazonaws.com/123456789012/stm-events.fifo",
        )
        .with_ref(
            "TimerQueue",
            "https://sqs.us-east-1.amazonaws.com/123456789012/stm-timers",
        );
    let mut seen = BTreeMap::new();
    for function in FUNCTIONS {
        let env = r.environment(function).expect("environment");
        for name in env.keys() {
            assert!(
                documented.contains(name),
                "{function} sets {name}, which ARCHITECTURE.md does not document"
            );
        }
        for required in ["STM_TABLE_PREFIX", "STM_QUEUE_URL", "RUST_LOG"] {
            assert!(env.contains_key(required), "{function} must set {required}");
        }
        // the functions' own parser accepts it
        let config = stm_runtime::config::FunctionConfig::from_lookup(|k| env.get(k).cloned())
            .unwrap_or_else(|e| panic!("{function}: {e}"));
        assert_eq!(config.table_prefix, "harel");
        seen.insert(function, (env, config));
    }
    let (worker_env, worker) = &seen["Worker"];
    assert_eq!(
        worker.processed_ttl_days,
        Some(30),
        "dedupe marks expire by default"
    );
    assert_eq!(
        worker.finished_ttl_days, None,
        "finished executions are kept by default (harel's way: purge)"
    );
    assert!(!worker.trace);
    assert_eq!(worker.trace_max, 200);
    assert_eq!(
        worker_env["STM_DEFINITIONS_DIR"], "/opt",
        "the definitions layer's mount point"
    );
    // 0 days: no TTL written, marks kept
    let keep = Resolver::new(&t, &[("ProcessedRetentionDays", "0")])
        .with_ref("EventQueue", "q")
        .with_ref("TimerQueue", "t");
    assert!(!keep
        .environment("Worker")
        .expect("env")
        .contains_key("STM_PROCESSED_TTL_DAYS"));
    // a retention set: the worker reads it, and stamps finished executions with it
    let retain = Resolver::new(&t, &[("FinishedRetentionDays", "90")])
        .with_ref("EventQueue", "q")
        .with_ref("TimerQueue", "t");
    let env = retain.environment("Worker").expect("env");
    let config = stm_runtime::config::FunctionConfig::from_lookup(|k| env.get(k).cloned()).expect("config");
    assert_eq!(config.finished_ttl_days, Some(90));
}

#[test]
fn the_definitions_layer_holds_valid_machines_the_worker_can_run() {
    let t = Template::repo();
    let layers = prop(&t, "Worker", "Layers").as_array().expect("Worker.Layers");
    assert_eq!(layers.len(), 1);
    let layer = referenced(&layers[0]).expect("a template layer");
    let res = t.resource(&layer).expect("layer");
    assert_eq!(res["Type"], "AWS::Serverless::LayerVersion");
    assert_eq!(
        res["Properties"]["CompatibleArchitectures"],
        json!([{ "Ref": "Architecture" }])
    );
    assert_eq!(
        res["Properties"]["CompatibleRuntimes"],
        json!(["provided.al2023"])
    );
    let dir = t
        .dir()
        .join(res["Properties"]["ContentUri"].as_str().expect("ContentUri"));
    // what the worker does at init with STM_DEFINITIONS_DIR=/opt (the layer's root)
    let definitions = stm_runtime::config::load_definitions_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert!(!definitions.is_empty());
    stm_runtime::config::check_actions(&definitions, &stm_runtime::ActionRegistry::with_builtins())
        .unwrap_or_else(|e| panic!("the deployed machines use actions the worker does not register: {e}"));
}

#[test]
fn each_function_has_its_own_role_and_log_group() {
    let t = Template::repo();
    let mut roles = BTreeSet::new();
    let mut groups = BTreeSet::new();
    for function in FUNCTIONS {
        let role = iam::function_role(&t, function).unwrap_or_else(|e| panic!("{e}"));
        assert!(roles.insert(role.clone()), "{function} shares role {role}");
        // parses, and has no wildcard, ARN string or condition
        iam::role_grants(&t, &role).unwrap_or_else(|e| panic!("{e}"));
        let trust = &t.properties(&role).expect("role")["AssumeRolePolicyDocument"]["Statement"][0];
        assert_eq!(trust["Principal"]["Service"], "lambda.amazonaws.com");
        let group =
            referenced(&prop(&t, function, "LoggingConfig")["LogGroup"]).expect("LoggingConfig.LogGroup");
        assert!(groups.insert(group.clone()));
        let g = t.properties(&group).expect("log group");
        assert!(!g["RetentionInDays"].is_null(), "{group}: logs expire");
    }
    // no `*` anywhere in the roles, not even in a string
    for role in t.of_type("AWS::IAM::Role") {
        let text = t.properties(&role).expect("role")["Policies"].to_string();
        assert!(!text.contains('*'), "{role} has a wildcard: {text}");
    }
}

#[test]
fn alarms_watch_the_dead_letters_errors_age_and_throttles() {
    let t = Template::repo();
    let queue = "EventQueue";
    let dlq = referenced(&t.properties(queue).expect("queue")["RedrivePolicy"]["deadLetterTargetArn"])
        .expect("dlq");
    // (namespace, metric, dimension resource) of every alarm, metric-math ones included
    let mut watched: BTreeSet<(String, String, String)> = BTreeSet::new();
    for alarm in t.of_type("AWS::CloudWatch::Alarm") {
        let p = t.properties(&alarm).expect("alarm");
        let mut add = |m: &Value| {
            for d in m["Dimensions"].as_array().into_iter().flatten() {
                if let Some(id) = referenced(&d["Value"]) {
                    watched.insert((
                        m["Namespace"].as_str().unwrap_or_default().into(),
                        m["MetricName"].as_str().unwrap_or_default().into(),
                        id,
                    ));
                }
            }
        };
        add(p);
        for m in p["Metrics"].as_array().into_iter().flatten() {
            add(&m["MetricStat"]["Metric"]);
        }
    }
    let want = [
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible", dlq.as_str()),
        ("AWS/SQS", "ApproximateAgeOfOldestMessage", queue),
        ("AWS/Lambda", "Errors", "Worker"),
        ("AWS/Lambda", "Throttles", "Worker"),
        ("AWS/Lambda", "Throttles", "Relay"),
        ("AWS/Lambda", "Throttles", "Sweeper"),
    ];
    for (ns, metric, id) in want {
        assert!(
            watched.contains(&(ns.to_string(), metric.to_string(), id.to_string())),
            "no alarm on {ns} {metric} of {id}; alarms watch {watched:?}"
        );
    }
}

#[test]
fn outputs_name_the_queues_tables_and_functions() {
    let t = Template::repo();
    let outputs = t.doc["Outputs"].as_object().expect("Outputs");
    let pointed: BTreeSet<String> = outputs.values().filter_map(|o| referenced(&o["Value"])).collect();
    let mut want: Vec<String> = vec!["EventQueue".into(), "DeadLetterQueue".into()];
    want.extend(FUNCTIONS.iter().map(|f| f.to_string()));
    for id in want {
        assert!(pointed.contains(&id), "no output for {id}");
    }
    // the tables by name (a Ref of a table would not hold with ExistingTables=true), under
    // any prefix
    let r = Resolver::new(&t, &[("Prefix", "shop_7")]).with_placeholders();
    let values: BTreeSet<String> = outputs
        .values()
        .filter_map(|o| r.string(&o["Value"]).ok())
        .collect();
    for name in r.table_names().expect("table names").keys() {
        assert!(name.starts_with("shop_7_"), "{name}");
        assert!(values.contains(name), "no output names table {name}: {values:?}");
    }
}

/// The evaluated template, as a stack deployed with `overrides` would have it: each
/// created resource's `Properties`, `Metadata` and `DependsOn`, and the outputs. Fails on
/// any reference to a resource the stack does not create (CloudFormation refuses those).
fn deployed(t: &Template, r: &Resolver) -> BTreeMap<String, Value> {
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
                if let Some(index) = arn.split("/index/").nth(1) {
                    assert_eq!(index, "due_index", "{policy}/{sid}");
                    assert!(table.ends_with("/shop_timers"), "{policy}/{sid}: {arn}");
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

/// SQS allows a queue name of at most 80 characters (alphanumerics, `-`, `_`; a FIFO
/// queue's ends in `.fifo`), and CloudFormation a stack name of 128: the queue names must
/// fit whatever the stack is called, differ between two stacks with one `Prefix`, and
/// still be the names the strict layer maps to the template's queues.
#[test]
fn queue_names_fit_sqs_whatever_the_stack_name() {
    let t = Template::repo();
    let prefix = "p".repeat(30); // the longest Prefix allows
    let long = Resolver {
        stack_name: format!("s{}", "-x".repeat(63) + "y"), // 128 characters
        ..Resolver::new(&t, &[("Prefix", &prefix)])
    };
    assert_eq!(long.stack_name.len(), 128);
    let other = Resolver {
        stack_uuid: "0b5e5a70-1f0d-11ef-9d2b-0a58a9feac02".into(),
        ..long.clone()
    };
    let queues = t.of_type("AWS::SQS::Queue");
    assert_eq!(queues.len(), 3);
    let physical = iam::Physical::from_template(&t);
    for id in &queues {
        let p = t.properties(id).expect("queue");
        let name = long
            .string(&p["QueueName"])
            .unwrap_or_else(|e| panic!("{id}.QueueName: {e:#}"));
        assert!(
            name.len() <= 80,
            "{id}: {name:?} has {} characters, SQS allows 80",
            name.len()
        );
        let base = name.strip_suffix(".fifo").unwrap_or(&name);
        assert!(
            base.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "{id}: {name:?}"
        );
        assert_eq!(p["FifoQueue"] == true, name.ends_with(".fifo"), "{id}: {name:?}");
        assert!(
            name.starts_with(&format!("{prefix}-")),
            "{id}: {name:?} starts with the Prefix"
        );
        let second = other.string(&p["QueueName"]).expect("QueueName");
        assert_ne!(
            name, second,
            "{id}: two stacks with one Prefix must not share a queue"
        );
        // the strict layer's roles know it for this queue, as they know a test's own
        // `{prefix}-events.fifo`, `{prefix}-events-dlq.fifo`, `{prefix}-timers`
        let local = match id.as_str() {
            "EventQueue" => "t7_x-events.fifo",
            "DeadLetterQueue" => "t7_x-events-dlq.fifo",
            _ => "t7_x-timers",
        };
        for queue in [name.as_str(), local] {
            let url = format!("https://sqs.us-east-1.amazonaws.com/123456789012/{queue}");
            let grants = iam::required_by("AmazonSQS", "SendMessage", &json!({"QueueUrl": url}), &physical)
                .unwrap_or_else(|e| panic!("{queue}: {e:#}"));
            assert_eq!(
                grants,
                BTreeSet::from([("sqs:SendMessage".to_string(), id.clone())]),
                "{queue}"
            );
        }
    }
}

/// Remote actions are off by default (no `STM_ACTIONS`, no Lambda grant); with the
/// parameters set, the worker gets the bindings and may invoke exactly the listed ARNs.
#[test]
fn remote_actions_are_opt_in_and_least_privilege() {
    let t = Template::repo();
    let off = Resolver::new(&t, &[])
        .with_ref("EventQueue", "q")
        .with_ref("TimerQueue", "t")
        .environment("Worker")
        .expect("environment");
    assert!(!off.contains_key("STM_ACTIONS"), "{off:?}");
    let on = Resolver::new(
        &t,
        &[
            ("RemoteActions", "charge=lambda:charge-fn"),
            (
                "RemoteActionFunctionArns",
                "arn:aws:lambda:us-east-1:123456789012:function:charge-fn",
            ),
        ],
    )
    .with_ref("EventQueue", "q")
    .with_ref("TimerQueue", "t")
    .environment("Worker")
    .expect("environment");
    assert_eq!(
        on.get("STM_ACTIONS").map(String::as_str),
        Some("charge=lambda:charge-fn")
    );
    for function in ["Relay", "Sweeper"] {
        let env = Resolver::new(&t, &[("RemoteActions", "x=lambda:y")])
            .with_ref("EventQueue", "q")
            .with_ref("TimerQueue", "t")
            .environment(function)
            .expect("environment");
        assert!(!env.contains_key("STM_ACTIONS"), "{function}: {env:?}");
    }

    // the grant: conditional, Allow lambda:InvokeFunction on the parameter's ARNs only
    let statements = &t.properties("WorkerRole").expect("role")["Policies"][0]["PolicyDocument"]["Statement"];
    let conditional: Vec<&Value> = statements
        .as_array()
        .expect("statements")
        .iter()
        .filter_map(|s| s.get("Fn::If"))
        .collect();
    assert_eq!(conditional.len(), 1, "one conditional statement");
    let args = conditional[0];
    assert_eq!(args[0], json!("InvokesRemoteFunctions"));
    assert_eq!(args[1]["Action"], json!(["lambda:InvokeFunction"]));
    assert_eq!(args[1]["Resource"], json!({"Ref": "RemoteActionFunctionArns"}));
    assert_eq!(args[2], json!({"Ref": "AWS::NoValue"}));
    // and no other role can invoke anything
    for role in ["RelayRole", "SweeperRole"] {
        let text = t.properties(role).expect("role").to_string();
        assert!(!text.contains("lambda:"), "{role} grants a Lambda action");
    }
}

/// A stalled call must fail inside the invocation, not time it out: every SDK call is
/// bounded well inside each function's timeout, and the worker keeps a per-record reserve
/// (one remote action at its timeout plus one SDK call at its operation timeout) that
/// leaves room for the rest of the batch before Lambda's deadline.
#[test]
fn the_sdk_and_action_timeouts_fit_inside_the_function_timeouts() {
    let t = Template::repo();
    let seconds = |f: &str| {
        t.function_property(f, "Timeout")
            .expect("timeout")
            .as_u64()
            .unwrap_or_else(|| panic!("{f}: a fixed Timeout"))
    };
    let env = Resolver::new(&t, &[])
        .with_ref(
            "EventQueue",
            "https://sqs.us-east-1.amazonaws.com/123456789012/stm-events.fifo",
        )
        .with_ref(
            "TimerQueue",
            "https://sqs.us-east-1.amazonaws.com/123456789012/stm-timers",
        )
        .environment("Worker")
        .expect("environment");
    let action = env
        .get("STM_ACTION_TIMEOUT_SECONDS")
        .map(|v| std::time::Duration::from_secs_f64(v.parse().expect("seconds")))
        .unwrap_or(stm_runtime::remote::DEFAULT_TIMEOUT);
    let operation = stm_store::aws::OPERATION_TIMEOUT;
    assert!(stm_store::aws::ATTEMPT_TIMEOUT < operation);
    let reserve = stm_runtime::worker::record_reserve(action);
    assert!(
        reserve >= action + operation,
        "the reserve covers one stalled record"
    );
    let worker = std::time::Duration::from_secs(seconds("Worker"));
    assert!(
        reserve * 2 <= worker,
        "the worker's Timeout ({worker:?}) leaves less than its reserve ({reserve:?}) for the batch"
    );
    for f in ["Relay", "Sweeper"] {
        let timeout = std::time::Duration::from_secs(seconds(f));
        assert!(
            operation * 2 <= timeout,
            "{f}: Timeout {timeout:?} is too close to the SDK's operation timeout {operation:?}"
        );
    }
}
