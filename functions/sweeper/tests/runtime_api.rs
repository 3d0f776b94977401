//! The sweeper binary, built as a Lambda bootstrap, answers a real Runtime API: it takes the
//! sample scheduled event from `events/`, runs against moto and posts its summary.

#[path = "../../../shared/runtime/tests/support/function_env.rs"]
mod function_env;
#[path = "../../../shared/runtime/tests/support/runtime_api.rs"]
mod runtime_api;

use std::time::Duration;

use runtime_api::{Answer, RuntimeApi};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeper_bootstrap_answers_the_runtime_api() {
    let env = function_env::deployment("fnsweeper", &function_env::repo().join("examples")).await;
    let api = RuntimeApi::start().await;
    let mut child = function_env::spawn(env!("CARGO_BIN_EXE_sweeper"), &api.address, &env);
    api.invoke("req-1", &function_env::sample("sweeper-scheduled.json"));
    api.invoke("req-2", &function_env::sample("sweeper-scheduled.json"));
    // its other trigger: a batch of precise-timer doorbells (this one's timer is not armed)
    api.invoke("req-3", &function_env::sample("sweeper-doorbell.json"));
    let first = api.answer("req-1", Duration::from_secs(60)).await;
    let second = api.answer("req-2", Duration::from_secs(30)).await;
    let third = api.answer("req-3", Duration::from_secs(30)).await;
    let _ = child.start_kill();
    let Some(Answer::Response(summary)) = first else {
        let out = child.wait_with_output().await.expect("output");
        panic!("no response: {first:?}\n{}", String::from_utf8_lossy(&out.stderr));
    };
    assert_eq!(summary["failed"], 0, "{summary}");
    assert!(
        matches!(second, Some(Answer::Response(_))),
        "a warm invocation too: {second:?}"
    );
    let Some(Answer::Response(batch)) = third else {
        panic!("the doorbell batch got no response: {third:?}");
    };
    assert_eq!(
        batch,
        serde_json::json!({"batchItemFailures": []}),
        "stale doorbell acknowledged"
    );
}
