//! The sweeper binary, built as a Lambda bootstrap, answers a real Runtime API: it takes the
//! sample scheduled event from `events/`, runs against moto and posts its summary.

use std::time::Duration;

use stm_deploytest::function_env;
use stm_deploytest::runtime_api::RuntimeApi;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeper_bootstrap_answers_the_runtime_api() {
    let env = function_env::deployment("fnsweeper", &stm_deploytest::repo_root().join("examples")).await;
    let api = RuntimeApi::start().await.expect("a Runtime API");
    let mut child = function_env::spawn(env!("CARGO_BIN_EXE_sweeper"), api.address(), &env);
    let first = api.invoke(&function_env::sample("sweeper-scheduled.json"));
    let second = api.invoke(&function_env::sample("sweeper-scheduled.json"));
    // its other trigger: a batch of precise-timer doorbells (this one's timer is not armed)
    let third = api.invoke(&function_env::sample("sweeper-doorbell.json"));
    let first = api.outcome(&first, Duration::from_secs(60)).await;
    let second = api.outcome(&second, Duration::from_secs(30)).await;
    let third = api.outcome(&third, Duration::from_secs(30)).await;
    let _ = child.start_kill();
    let Some(summary) = first.as_ref().and_then(|o| o.response_json()) else {
        let out = child.wait_with_output().await.expect("output");
        panic!("no response: {first:?}\n{}", String::from_utf8_lossy(&out.stderr));
    };
    assert_eq!(summary["failed"], 0, "{summary}");
    assert!(
        second.as_ref().and_then(|o| o.response_json()).is_some(),
        "a warm invocation too: {second:?}"
    );
    let Some(batch) = third.as_ref().and_then(|o| o.response_json()) else {
        panic!("the doorbell batch got no response: {third:?}");
    };
    assert_eq!(
        batch,
        serde_json::json!({"batchItemFailures": []}),
        "stale doorbell acknowledged"
    );
}
