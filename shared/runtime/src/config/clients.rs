//! What a function builds from its [`FunctionConfig`] (feature `aws`): the DynamoDB and
//! SQS clients, the store over them, the remote actions `STM_ACTIONS` binds, and the
//! clients every action finds in its state. What a Lambda function keeps from its init is
//! stm-lambda's: the function boundary is that crate's.

use stm_store::{CreateOptions, DynamoDbStore, StoreError};

use super::{ConfigError, FunctionConfig};
use crate::actions::ActionRegistry;

impl super::ActionConfig {
    /// The remote actions these bindings name, started (`None` when there are none).
    pub fn remote_actions(&self) -> Result<Option<crate::remote::RemoteActions>, ConfigError> {
        let Some(spec) = &self.bindings else {
            return Ok(None);
        };
        let bindings = crate::remote::parse_bindings(spec)?;
        if bindings.is_empty() {
            return Ok(None);
        }
        let settings = crate::remote::RemoteSettings {
            timeout: self.timeout,
            max_response_bytes: self.max_response_bytes,
            lambda_endpoint_url: self.endpoint_url.clone(),
            region: self.region.clone(),
        };
        Ok(Some(crate::remote::RemoteActions::start(bindings, settings)?))
    }
}

impl FunctionConfig {
    /// The DynamoDB and SQS clients, built from one SDK config: one credential chain and
    /// one HTTP client for both, where building each from its own config loaded the
    /// defaults twice at every cold start. Nothing is sent.
    pub async fn clients(&self) -> (aws_sdk_dynamodb::Client, aws_sdk_sqs::Client) {
        aws_clients(self.endpoint_url.as_deref(), &self.region).await
    }

    /// The store over `client` with this configuration's prefix, trace ring, retention,
    /// dedupe-mark layout and state index. Nothing is sent: a function checks its tables
    /// while it waits for its first invocation (stm-lambda's `DeploymentCheck`), and never
    /// creates them (they come from `template.yaml`, or `stm local` creates them).
    pub fn store_over(&self, client: aws_sdk_dynamodb::Client) -> Result<DynamoDbStore, StoreError> {
        let defaults = CreateOptions::default();
        let mut store = DynamoDbStore::new(client)
            .with_prefix(&self.table_prefix)?
            .with_trace_max(self.trace_max)
            .with_retry_policy(defaults.retry)
            .with_timer_full_scan_interval(defaults.timer_full_scan_interval);
        if let Some(d) = self.processed_ttl_days {
            store = store.with_processed_ttl(super::days(d));
        }
        if let Some(d) = self.finished_ttl_days {
            store = store.with_finished_ttl(super::days(d));
        }
        Ok(store
            .with_dedupe_marks(self.dedupe_marks)
            .with_state_index(self.state_index))
    }

    /// The remote actions `STM_ACTIONS` binds, started (`None` when it is unset).
    pub fn remote_actions(&self) -> Result<Option<crate::remote::RemoteActions>, ConfigError> {
        self.actions.remote_actions()
    }
}

/// The DynamoDB and SQS clients for `endpoint_url` (an emulator; `None`: AWS) in
/// `region`, built from one SDK config: one credential chain and one HTTP client for
/// both. Nothing is sent.
pub async fn aws_clients(
    endpoint_url: Option<&str>,
    region: &str,
) -> (aws_sdk_dynamodb::Client, aws_sdk_sqs::Client) {
    let sdk = stm_aws::sdk_config(endpoint_url, region).await;
    // what `DynamoDbStore::create_with` and `SqsQueue::client` add to the shared config
    let mut dynamodb = aws_sdk_dynamodb::config::Builder::from(&sdk);
    let mut sqs = aws_sdk_sqs::config::Builder::from(&sdk);
    if let Some(tag) = stm_aws::function_tag() {
        dynamodb.push_interceptor(tag.clone());
        sqs.push_interceptor(tag);
    }
    (
        aws_sdk_dynamodb::Client::from_conf(dynamodb.build()),
        aws_sdk_sqs::Client::from_conf(sqs.build()),
    )
}

/// The state the runtime gives every action: its `aws_sdk_dynamodb::Client` and
/// `aws_sdk_sqs::Client` (a user's own client of the same type stays). The worker and
/// `worker serve-actions` both give it here, so an action finds the same state wherever
/// it runs.
pub fn provide_clients(
    actions: &mut ActionRegistry,
    dynamodb: &aws_sdk_dynamodb::Client,
    sqs: &aws_sdk_sqs::Client,
) {
    actions.provide(dynamodb.clone()).provide(sqs.clone());
}

/// [`provide_clients`] with clients built as a function builds its own, from the same
/// variables (`STM_ENDPOINT_URL` or `AWS_ENDPOINT_URL`, `AWS_REGION` or
/// `AWS_DEFAULT_REGION`): for a process that runs actions outside a function, which has
/// none of the function's other settings (`worker serve-actions`).
pub async fn provide_clients_from_env(actions: &mut ActionRegistry) {
    let lookup = |name: &str| std::env::var(name).ok();
    let (dynamodb, sqs) = aws_clients(super::endpoint_url(lookup).as_deref(), &super::region(lookup)).await;
    provide_clients(actions, &dynamodb, &sqs);
}
