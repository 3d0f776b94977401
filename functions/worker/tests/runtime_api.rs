//! The worker binary, built as a Lambda bootstrap, answers a real Runtime API: it polls
//! `invocation/next`, runs a sample SQS batch from `events/` against moto, and posts the
//! partial-batch response. It moves a real execution: an Order created first, its `Start`
//! taken off the queue and a `Submit` shaped like the sample, after which the test reads
//! the execution, its dedupe marks and its timer back from the tables. A broken definition
//! fails its cold start with file and line; a missing table fails every invocation, naming
//! the table.

use std::time::Duration;

use stm_deploytest::function_env::{self, Deployment};
use stm_deploytest::runtime_api::{Outcome, RuntimeApi};
use stm_deploytest::stm_store::ExecutionStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_bootstrap_answers_the_runtime_api() {
    let env = function_env::deployment("fnworker", &stm_deploytest::repo_root().join("examples")).await;
    let api = RuntimeApi::start().await.expect("a Runtime API");
    let mut child = function_env::spawn(env!("CARGO_BIN_EXE_worker"), api.address(), &env);
    let poison = api.invoke(&function_env::sample("worker-poison.json"));
    let event = api.invoke(&function_env::sample("worker-domain-event.json"));
    let poison = api.outcome(&poison, Duration::from_secs(60)).await;
    let event = api.outcome(&event, Duration::from_secs(30)).await;
    let _ = child.start_kill();
    let Some(poison) = poison.as_ref().and_then(|o| o.response_json()) else {
        let out = child.wait_with_output().await.expect("output");
        panic!(
            "no response: {poison:?}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    assert_eq!(
        poison["batchItemFailures"][0]["itemIdentifier"],
        "0e8f1a52-0000-4000-8000-000000000003"
    );
    // order-1 does not exist in this deployment: acknowledged as a no-op
    assert_eq!(
        event.as_ref().and_then(|o| o.response_json()),
        Some(serde_json::json!({"batchItemFailures": []}))
    );
    assert!(api.next_calls() >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_bootstrap_steps_an_existing_execution() {
    let deployment = Deployment::create("fnworkstep", &stm_deploytest::repo_root().join("examples")).await;
    let store = deployment.store.clone();
    // an operator's create: the Order is stored PENDING and its Start is on the queue
    let created = deployment
        .control()
        .create("Order", None, Some("order-fn"))
        .await
        .expect("an order");
    let started = deployment.receive(1, Duration::from_secs(20)).await;
    assert_eq!(started.len(), 1, "the create published its Start: {started:?}");
    let start: serde_json::Value = serde_json::from_str(&started[0].body).expect("a JSON event");
    assert_eq!(start["kind"], "Start", "{start}");
    // the batch Lambda would deliver: the Start as received, then a Submit for the same
    // group in the sample's shape
    let mut batch = serde_json::to_value(stm_deploytest::stm_lambda::sqs_event(
        &started,
        "arn:aws:sqs:us-east-1:123456789012:harel.fifo",
    ))
    .expect("the SQS event as JSON");
    let submit = function_env::sample_batch(
        "worker-domain-event.json",
        &[(
            "0e8f1a52-0000-4000-8000-0000000000aa",
            Some("order-fn"),
            r#"{"id": "evt-order-fn-submit", "kind": "Submit", "data": {"amount": 42.5}}"#,
        )],
    );
    if let (Some(records), Some(more)) = (batch["Records"].as_array_mut(), submit["Records"].as_array()) {
        records.extend(more.iter().cloned());
    }
    assert_eq!(batch["Records"].as_array().map(Vec::len), Some(2), "{batch}");

    let api = RuntimeApi::start().await.expect("a Runtime API");
    let mut child = function_env::spawn(env!("CARGO_BIN_EXE_worker"), api.address(), &deployment.env);
    let before = function_env::now();
    let invoked = api.invoke(&batch.to_string());
    let outcome = api.outcome(&invoked, Duration::from_secs(60)).await;
    let after = function_env::now();
    let _ = child.start_kill();
    let Some(response) = outcome.as_ref().and_then(|o| o.response_json()) else {
        let out = child.wait_with_output().await.expect("output");
        panic!(
            "no response: {outcome:?}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    assert_eq!(
        response,
        serde_json::json!({"batchItemFailures": []}),
        "both records processed"
    );

    // the execution item: started, submitted, in Payment with the amount
    let exe = store.load("order-fn").await.expect("load").expect("the order");
    assert_eq!(
        (exe.status.as_str(), exe.active_path.as_deref()),
        ("RUNNING", Some("Payment.Charging")),
        "the Start and the Submit moved it: {exe:?}"
    );
    assert_eq!(
        exe.context.get("amount"),
        Some(&serde_json::json!(42.5)),
        "{exe:?}"
    );
    assert!(
        exe.version > created.version,
        "the worker committed: version {} -> {}",
        created.version,
        exe.version
    );
    // the dedupe marks: a redelivery of either record is a no-op
    for event_id in [start["id"].as_str().unwrap_or_default(), "evt-order-fn-submit"] {
        assert!(
            store.is_processed("order-fn", event_id).await.expect("marks"),
            "{event_id} is not marked processed"
        );
    }
    // the timers table: Payment's one-hour deadline, armed by the Submit's step
    let armed = store.armed_timer("order-fn", "Payment").await.expect("timer");
    assert!(
        armed.is_some_and(|at| at >= before + 3600.0 - 1.0 && at <= after + 3600.0 + 1.0),
        "the Payment deadline: {armed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_definition_fails_the_cold_start_with_file_and_line() {
    let dir = std::env::temp_dir().join(format!("stm-broken-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("broken.stm"),
        "machine M {\n  initial A\n  state A {}\n  from A to Nowhere on Go\n}\n",
    )
    .expect("write");
    let env = function_env::deployment("fnbroken", &dir).await;
    let api = RuntimeApi::start().await.expect("a Runtime API");
    let child = function_env::spawn(env!("CARGO_BIN_EXE_worker"), api.address(), &env);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the worker exits")
        .expect("output");
    assert!(!out.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("broken.stm"), "{text}");
    assert!(text.contains("broken.stm:4"), "the line is named: {text}");
    assert_eq!(api.next_calls(), 0, "no invocation is taken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_table_fails_each_invocation_naming_the_table() {
    let mut env = function_env::deployment("fnnotables", &stm_deploytest::repo_root().join("examples")).await;
    // a prefix nobody creates tables under: the deploy forgot the tables
    let missing = format!("notables_{}", std::process::id());
    for (name, value) in env.iter_mut() {
        if name == "STM_TABLE_PREFIX" {
            *value = missing.clone();
        }
    }
    let api = RuntimeApi::start().await.expect("a Runtime API");
    let mut child = function_env::spawn(env!("CARGO_BIN_EXE_worker"), api.address(), &env);
    let first = api.invoke(&function_env::sample("worker-domain-event.json"));
    let second = api.invoke(&function_env::sample("worker-domain-event.json"));
    let first = api.outcome(&first, Duration::from_secs(60)).await;
    let second = api.outcome(&second, Duration::from_secs(60)).await;
    let _ = child.start_kill();
    let out = child.wait_with_output().await.expect("output");
    let logged = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // the check runs again for the second invocation: a failure is not remembered
    for outcome in [first, second] {
        let Some(Outcome::Error(body)) = outcome else {
            panic!("the invocation did not fail: {outcome:?}\n{logged}");
        };
        let error: serde_json::Value = serde_json::from_str(&body).expect("a JSON error");
        assert_eq!(error["errorType"], "stm.StoreError", "{body}");
        let message = error["errorMessage"].as_str().unwrap_or_default();
        assert!(message.starts_with("worker init failed: "), "{message}");
        assert!(
            message.contains(&format!("table {missing}_")),
            "the table is named: {message}"
        );
        assert!(message.contains("does not exist"), "{message}");
    }
    assert!(
        logged.contains("worker init failed") && logged.contains(&format!("table {missing}_")),
        "the log says it too: {logged}"
    );
}
