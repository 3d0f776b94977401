//! The worker binary, built as a Lambda bootstrap, answers a real Runtime API: it polls
//! `invocation/next`, runs a sample SQS batch from `events/` against moto, and posts the
//! partial-batch response. A broken definition fails its cold start with file and line; a
//! missing table fails every invocation, naming the table.

use std::time::Duration;

use stm_deploytest::function_env;
use stm_deploytest::runtime_api::{Outcome, RuntimeApi};

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
