//! The worker binary, built as a Lambda bootstrap, answers a real Runtime API: it polls
//! `invocation/next`, runs a sample SQS batch from `events/` against moto, and posts the
//! partial-batch response. A broken definition fails its cold start with file and line.

use std::time::Duration;

use stm_deploytest::function_env;
use stm_deploytest::runtime_api::RuntimeApi;

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
