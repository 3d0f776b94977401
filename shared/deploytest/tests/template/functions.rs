//! The functions: the relay's and sweeper's schedules, the cargo-lambda arm64 build, the
//! documented environment, the definitions layer, a role and a log group each, and SDK
//! and action timeouts inside the functions' timeouts.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use stm_deploytest::iam;
use stm_deploytest::template::{referenced, Resolver, Template};

use crate::support::{prop, FUNCTIONS};

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
    // no `*` anywhere in the roles, not even in a string, but for the X-Ray daemon's
    // writes when tracing is Active (X-Ray's actions take no resource-level permissions)
    for role in t.of_type("AWS::IAM::Role") {
        let mut policies = t.properties(&role).expect("role")["Policies"].clone();
        for policy in policies.as_array_mut().into_iter().flatten() {
            if let Some(statements) = policy["PolicyDocument"]["Statement"].as_array_mut() {
                statements.retain(|s| {
                    let xray = s["Fn::If"][0] == "TracesToXRay";
                    if xray {
                        assert_eq!(
                            s["Fn::If"][1]["Action"],
                            serde_json::json!(iam::XRAY_WRITES),
                            "{role}"
                        );
                        assert_eq!(s["Fn::If"][1]["Resource"], "*", "{role}");
                        assert_eq!(
                            s["Fn::If"][2],
                            serde_json::json!({"Ref": "AWS::NoValue"}),
                            "{role}"
                        );
                    }
                    !xray
                });
            }
        }
        let text = policies.to_string();
        assert!(!text.contains('*'), "{role} has a wildcard: {text}");
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
    let operation = stm_aws::OPERATION_TIMEOUT;
    assert!(stm_aws::ATTEMPT_TIMEOUT < operation);
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
