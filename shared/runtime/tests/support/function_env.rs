//! Spawning a function binary the way Lambda runs a `provided.al2023` bootstrap: its
//! environment, and `AWS_LAMBDA_RUNTIME_API` pointing at the test's Runtime API.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;

use stm_runtime::queue::SqsQueue;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn sample(name: &str) -> String {
    std::fs::read_to_string(repo().join("events").join(name)).unwrap_or_else(|e| panic!("events/{name}: {e}"))
}

/// Fresh tables and queue on moto; the environment a function gets from the template.
pub async fn deployment(tag: &str, definitions: &Path) -> Vec<(String, String)> {
    let moto = stm_testkit::moto().await;
    let prefix = stm_testkit::unique_prefix(tag);
    let options = stm_store::CreateOptions {
        prefix: prefix.clone(),
        ..Default::default()
    };
    stm_store::DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("tables");
    let client = SqsQueue::client(Some(moto.endpoint()), stm_testkit::REGION).await;
    let urls = SqsQueue::ensure(&client, &format!("{prefix}-q"), 30, 3)
        .await
        .expect("queue");
    vec![
        ("STM_TABLE_PREFIX".into(), prefix),
        ("STM_QUEUE_URL".into(), urls.queue_url),
        ("STM_ENDPOINT_URL".into(), moto.endpoint().to_string()),
        ("STM_DEFINITIONS_DIR".into(), definitions.display().to_string()),
        ("AWS_REGION".into(), "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID".into(), "test".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "test".into()),
        ("AWS_LAMBDA_FUNCTION_NAME".into(), "test".into()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE".into(), "256".into()),
        ("AWS_LAMBDA_FUNCTION_VERSION".into(), "$LATEST".into()),
        ("AWS_LAMBDA_LOG_GROUP_NAME".into(), "/aws/lambda/test".into()),
        ("AWS_LAMBDA_LOG_STREAM_NAME".into(), "test".into()),
        ("RUST_LOG".into(), "info".into()),
    ]
}

pub fn spawn(binary: &str, runtime_api: &str, env: &[(String, String)]) -> tokio::process::Child {
    let mut cmd = tokio::process::Command::new(binary);
    cmd.env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("AWS_LAMBDA_RUNTIME_API", runtime_api)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd.spawn().unwrap_or_else(|e| panic!("spawn {binary}: {e}"))
}
