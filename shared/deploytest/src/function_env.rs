//! Spawning a function binary the way Lambda runs a `provided.al2023` bootstrap: a fresh
//! deployment on the test kit's moto, the environment the template gives the function,
//! and `AWS_LAMBDA_RUNTIME_API` pointing at the test's [`RuntimeApi`](crate::runtime_api::RuntimeApi).

use std::path::Path;
use std::process::Stdio;

use stm_runtime::queue::SqsQueue;

/// The sample `events/NAME` of this repository.
///
/// # Panics
/// When the sample is missing.
pub fn sample(name: &str) -> String {
    let path = crate::repo_root().join("events").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("events/{name}: {e}"))
}

/// Fresh tables and queue on moto; the environment a function gets from the template,
/// its machines from `definitions`.
///
/// # Panics
/// When moto is not there or the tables cannot be made: run `.ci/setup.sh`.
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
    let mut env = vec![
        ("STM_TABLE_PREFIX".into(), prefix),
        ("STM_QUEUE_URL".into(), urls.queue_url),
        ("STM_ENDPOINT_URL".into(), moto.endpoint().to_string()),
        ("STM_DEFINITIONS_DIR".into(), definitions.display().to_string()),
    ];
    env.extend(lambda_variables("test"));
    env
}

/// What Lambda itself sets for function `name` (its region, dummy credentials, the
/// `AWS_LAMBDA_*` the runtime reads) and the log level.
pub fn lambda_variables(name: &str) -> Vec<(String, String)> {
    [
        ("AWS_REGION", "us-east-1".to_string()),
        ("AWS_ACCESS_KEY_ID", "test".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_string()),
        ("AWS_LAMBDA_FUNCTION_NAME", name.to_string()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256".to_string()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_string()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}")),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "test".to_string()),
        ("RUST_LOG", "info".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Start `binary` with only `env` and the Runtime API at `runtime_api` (`host:port`),
/// its output captured; killed when dropped.
///
/// # Panics
/// When the binary cannot be started.
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
