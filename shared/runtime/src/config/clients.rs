//! What a function builds from its [`FunctionConfig`] (feature `aws`): the DynamoDB store,
//! the SQS queue, the remote actions `STM_ACTIONS` binds, and the whole
//! [`FunctionContext`] a Lambda function keeps from its init, and the [`DeploymentCheck`]
//! of its tables that runs while it waits for its first invocation.

use std::sync::Arc;
use std::time::Duration;

use stm_store::{CreateOptions, DynamoDbStore, StoreError};

use super::{driver, load_definitions_dir, ConfigError, FunctionConfig};
use crate::actions::ActionRegistry;
use crate::definitions::Definitions;
use crate::driver::Driver;
use crate::queue::SqsQueue;

/// Why a function cannot serve: its configuration (the environment, the definitions, the
/// bindings), or its tables, checked at init ([`DeploymentCheck`]). Each is the error as
/// it came; the function's boundary (stm-lambda) words it for Lambda and the log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl InitError {
    /// The Python exception harel raises for the same failure (the function's `errorType`):
    /// a configuration problem is harel's `ValueError`.
    pub fn python_type(&self) -> &'static str {
        match self {
            InitError::Config(_) => "ValueError",
            InitError::Store(e) => e.python_type(),
        }
    }
}

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
    /// The DynamoDB store, its tables checked. The tables must exist (they come from
    /// `template.yaml`, or `stm local` creates them): a function never creates schema.
    pub async fn store(&self) -> Result<Arc<DynamoDbStore>, StoreError> {
        let options = CreateOptions {
            prefix: self.table_prefix.clone(),
            create_schema: false,
            connect_attempts: CHECK_ATTEMPTS,
            connect_delay: CHECK_DELAY,
            trace_max: self.trace_max,
            ..CreateOptions::default()
        };
        let store = DynamoDbStore::create_with(self.endpoint_url.as_deref(), &self.region, options).await?;
        Ok(Arc::new(self.retained(store)))
    }

    /// `store` with this configuration's retention, dedupe-mark layout and state index: the
    /// one place a function's store takes them, however it was built.
    fn retained(&self, mut store: DynamoDbStore) -> DynamoDbStore {
        if let Some(d) = self.processed_ttl_days {
            store = store.with_processed_ttl(super::days(d));
        }
        if let Some(d) = self.finished_ttl_days {
            store = store.with_finished_ttl(super::days(d));
        }
        store
            .with_dedupe_marks(self.dedupe_marks)
            .with_state_index(self.state_index)
    }

    /// The DynamoDB and SQS clients, built from one SDK config: one credential chain and
    /// one HTTP client for both, where building each from its own config loaded the
    /// defaults twice at every cold start. Nothing is sent.
    async fn clients(&self) -> (aws_sdk_dynamodb::Client, aws_sdk_sqs::Client) {
        aws_clients(self.endpoint_url.as_deref(), &self.region).await
    }

    /// The store over `client` with this configuration's prefix, trace ring and
    /// retention, its tables not checked yet ([`check_tables`]).
    fn store_over(&self, client: aws_sdk_dynamodb::Client) -> Result<DynamoDbStore, StoreError> {
        let defaults = CreateOptions::default();
        let store = DynamoDbStore::new(client)
            .with_prefix(&self.table_prefix)?
            .with_trace_max(self.trace_max)
            .with_retry_policy(defaults.retry)
            .with_timer_full_scan_interval(defaults.timer_full_scan_interval);
        Ok(self.retained(store))
    }

    /// The remote actions `STM_ACTIONS` binds, started (`None` when it is unset).
    pub fn remote_actions(&self) -> Result<Option<crate::remote::RemoteActions>, ConfigError> {
        self.actions.remote_actions()
    }

    pub async fn queue(&self) -> SqsQueue {
        SqsQueue::new(
            SqsQueue::client(self.endpoint_url.as_deref(), &self.region).await,
            self.queue_url.clone(),
        )
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

/// How many times a function tries to reach DynamoDB for its table check, and the pause
/// between tries: a moment's unreachability (an emulator still starting) is not a broken
/// deployment, but a function must not spend its invocation waiting for one.
const CHECK_ATTEMPTS: u32 = 3;
const CHECK_DELAY: Duration = Duration::from_millis(500);

/// Check that the seven tables exist with the keys the store needs (`DescribeTable` each,
/// at once), trying [`CHECK_ATTEMPTS`] times while DynamoDB is unreachable, as
/// `DynamoDbStore::create_with` does for [`FunctionConfig::store`]. A missing or wrongly
/// keyed table fails at once, with its name.
async fn check_tables(store: &DynamoDbStore, endpoint_url: Option<&str>) -> Result<(), StoreError> {
    let mut last = None;
    for attempt in 1..=CHECK_ATTEMPTS {
        match store.check_tables().await {
            Ok(()) => return Ok(()),
            Err(StoreError::Retryable { message: why, .. }) => {
                tracing::debug!(attempt, %why, "DynamoDB not reachable yet");
                last = Some(why);
                if attempt < CHECK_ATTEMPTS {
                    tokio::time::sleep(CHECK_DELAY).await;
                }
            }
            Err(other) => return Err(other),
        }
    }
    Err(StoreError::backend(format!(
        "DynamoDB at {} not reachable after {CHECK_ATTEMPTS} attempts: {}",
        endpoint_url.unwrap_or("the default AWS endpoint"),
        last.unwrap_or_default()
    )))
}

/// A function's check of its deployment (the tables), started at init and run while the
/// function waits for its first invocation: the check's round trips are most of a cold
/// start, and nothing before the first invocation needs its answer.
///
/// [`passed`](Self::passed) waits for it. A passed check is remembered; a failed one is
/// returned to that caller and run again by the next (a table created since, and the same
/// warm function works).
pub struct DeploymentCheck {
    store: Arc<DynamoDbStore>,
    endpoint_url: Option<String>,
    state: tokio::sync::Mutex<CheckState>,
}

enum CheckState {
    Running(tokio::task::JoinHandle<Result<(), StoreError>>),
    Passed,
    Failed,
}

impl std::fmt::Debug for DeploymentCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentCheck")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl DeploymentCheck {
    /// Start checking `store`'s tables in the background (on the current tokio runtime).
    pub fn start(store: Arc<DynamoDbStore>, endpoint_url: Option<String>) -> Self {
        let task = {
            let store = store.clone();
            let endpoint_url = endpoint_url.clone();
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let result = check_tables(&store, endpoint_url.as_deref()).await;
                tracing::debug!(
                    check_us = started.elapsed().as_micros() as u64,
                    passed = result.is_ok(),
                    "deployment check finished"
                );
                result
            })
        };
        DeploymentCheck {
            store,
            endpoint_url,
            state: tokio::sync::Mutex::new(CheckState::Running(task)),
        }
    }

    /// Wait for the check: `Ok` once it passed, else why it failed.
    pub async fn passed(&self) -> Result<(), InitError> {
        let mut state = self.state.lock().await;
        let result = match std::mem::replace(&mut *state, CheckState::Failed) {
            CheckState::Passed => Ok(()),
            CheckState::Running(task) => match task.await {
                Ok(checked) => checked.map_err(InitError::from),
                Err(e) => Err(ConfigError::deployment(format!("the table check did not finish: {e}")).into()),
            },
            CheckState::Failed => check_tables(&self.store, self.endpoint_url.as_deref())
                .await
                .map_err(InitError::from),
        };
        if result.is_ok() {
            *state = CheckState::Passed;
        }
        result
    }
}

/// Which function a [`FunctionContext`] is for.
#[derive(Debug)]
#[non_exhaustive]
pub enum Function {
    /// The worker, with the Rust actions its machines call (`STM_ACTIONS` adds the remote
    /// ones). Its state gains the worker's `aws_sdk_dynamodb::Client` and
    /// `aws_sdk_sqs::Client`, unless it holds clients of those types already.
    Worker(ActionRegistry),
    Relay,
    Sweeper,
}

/// Everything a function builds once at init: config, store, queue, validated definitions.
pub struct FunctionContext {
    pub config: FunctionConfig,
    pub store: Arc<DynamoDbStore>,
    pub queue: Arc<SqsQueue>,
    pub driver: Driver,
    /// The precise-timer doorbell queue, when `STM_TIMER_QUEUE_URL` is set.
    pub doorbell: Option<Arc<crate::doorbell::SqsDoorbell>>,
    /// The status bus (`STM_EVENT_BUS`), when `STM_STATUS_EVENTS` is not `none`: the
    /// worker's inline flush and the relay put status events there.
    pub status_bus: Option<Arc<crate::status::EventBridgeBus>>,
}

impl std::fmt::Debug for FunctionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionContext")
            .field("config", &self.config)
            .field("store", &self.store)
            .field("queue", &self.queue)
            .field("driver", &self.driver)
            .finish_non_exhaustive()
    }
}

impl FunctionContext {
    /// Read the environment, load and validate the definitions, build the clients and
    /// check the tables. Any problem fails with a message naming the variable, file,
    /// machine or table.
    ///
    /// The relay and the sweeper run no machine: they skip the definitions.
    pub async fn from_env(function: Function) -> Result<Self, InitError> {
        let (context, check) = FunctionContext::from_env_checking(function).await?;
        check.passed().await?;
        Ok(context)
    }

    /// [`from_env`](Self::from_env) without waiting for the table check: it runs in the
    /// background from the moment the clients exist, while the definitions load and the
    /// function starts polling for its first invocation, which must wait for
    /// [`DeploymentCheck::passed`] before it touches the store. Everything else (the
    /// environment, the definitions, the actions) is checked before this returns. No
    /// request is sent before the check's.
    pub async fn from_env_checking(function: Function) -> Result<(Self, DeploymentCheck), InitError> {
        let started = std::time::Instant::now();
        let config = FunctionConfig::from_env()?;
        let configured = started.elapsed();
        let (dynamodb, sqs) = config.clients().await;
        let store = Arc::new(config.store_over(dynamodb)?);
        let check = DeploymentCheck::start(store.clone(), config.endpoint_url.clone());
        let queue = Arc::new(SqsQueue::new(sqs, config.queue_url.clone()));
        let clients = started.elapsed();
        let (definitions, actions) = match function {
            Function::Worker(mut actions) => {
                if let Some(remote) = config.remote_actions()? {
                    remote.register_into(&mut actions);
                }
                // the clients built here, offered to the actions (a user's own client of
                // the same type stays)
                provide_clients(&mut actions, store.client(), queue.sqs());
                (load_definitions_dir(&config.definitions_dir)?, actions)
            }
            Function::Relay | Function::Sweeper => (Definitions::new(), ActionRegistry::new()),
        };
        let loaded = started.elapsed();
        let doorbell = config.timer_queue_url.as_ref().map(|url| {
            Arc::new(crate::doorbell::SqsDoorbell::new(
                queue.sqs().clone(),
                url.clone(),
            ))
        });
        let driver = driver(&config, store.clone(), definitions, actions)?;
        let status_bus = match (&config.event_bus, config.status_events) {
            (Some(bus), level) if level != crate::status::StatusEvents::None => {
                let client =
                    crate::status::EventBridgeBus::client(config.endpoint_url.as_deref(), &config.region)
                        .await;
                Some(Arc::new(
                    crate::status::EventBridgeBus::new(client, bus.clone()).with_level(level),
                ))
            }
            _ => None,
        };
        let built = started.elapsed();
        // where a cold start's time goes, for `lambda-smoke --breakdown`
        tracing::debug!(
            config_us = configured.as_micros() as u64,
            clients_us = (clients - configured).as_micros() as u64,
            definitions_us = (loaded - clients).as_micros() as u64,
            driver_us = (built - loaded).as_micros() as u64,
            "function context built"
        );
        let context = FunctionContext {
            config,
            store,
            queue,
            driver,
            doorbell,
            status_bus,
        };
        Ok((context, check))
    }

    /// The worker over this context's driver and queue.
    pub fn worker(&self) -> crate::worker::Worker {
        let settings = crate::worker::WorkerSettings {
            record_reserve: crate::worker::record_reserve(self.config.actions.timeout),
            coalesce: self.config.coalesce,
            ..crate::worker::WorkerSettings::default()
        };
        let mut worker = crate::worker::Worker::new(self.driver.clone(), self.queue.clone(), settings);
        if let Some(doorbell) = &self.doorbell {
            worker = worker.with_doorbell(doorbell.clone());
        }
        if let Some(bus) = &self.status_bus {
            worker = worker.with_status_bus(bus.clone());
        }
        worker
    }
}
