//! What a function builds once at its init ([`FunctionContext`]) and the check of its
//! tables that runs while it waits for its first invocation ([`DeploymentCheck`]): the
//! function's side of the configuration the runtime reads
//! ([`FunctionConfig`](stm_runtime::config::FunctionConfig)).

use std::sync::Arc;
use std::time::Duration;

use stm_runtime::config::{self, ConfigError, FunctionConfig};
use stm_runtime::doorbell::SqsDoorbell;
use stm_runtime::status::{EventBridgeBus, StatusEvents};
use stm_runtime::worker::{record_reserve, Worker, WorkerSettings};
use stm_runtime::{ActionRegistry, Definitions, Driver, SqsQueue};
use stm_store::{DynamoDbStore, StoreError};

/// Why a function cannot serve: its configuration (the environment, the definitions, the
/// bindings), or its tables, checked at init ([`DeploymentCheck`]). Each is the error as
/// it came; the function words it for Lambda and the log (`worker init failed: ...`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The table check's task ended without an answer (it panicked, or its runtime is
    /// shutting down); the next invocation checks again. Its words include the task's
    /// (Lambda's `errorMessage` is this error's text alone), so it is not a `source` too.
    #[error("the table check did not finish: {0}")]
    CheckAborted(tokio::task::JoinError),
    /// OpenTelemetry's endpoint variable names no usable collector.
    #[error(transparent)]
    Telemetry(#[from] stm_runtime::telemetry::otlp::EndpointError),
    /// The X-Ray settings name no usable share or daemon.
    #[error(transparent)]
    XRay(#[from] stm_runtime::telemetry::xray::XRayError),
}

impl InitError {
    /// The Python exception harel raises for the same failure (the function's `errorType`):
    /// a configuration problem is harel's `ValueError`.
    pub fn python_type(&self) -> &'static str {
        match self {
            InitError::Config(_) => "ValueError",
            InitError::Store(e) => e.python_type(),
            InitError::CheckAborted(_) => "RuntimeError",
            InitError::Telemetry(_) | InitError::XRay(_) => "ValueError",
        }
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
    pub doorbell: Option<Arc<SqsDoorbell>>,
    /// The status bus (`STM_EVENT_BUS`), when `STM_STATUS_EVENTS` is not `none`: the
    /// worker's inline flush and the relay put status events there.
    pub status_bus: Option<Arc<EventBridgeBus>>,
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
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), stm_lambda::InitError> {
    /// use stm_lambda::{Function, FunctionContext};
    ///
    /// let context = FunctionContext::from_env(Function::Relay).await?;
    /// println!("relaying to {}", context.config.queue_url);
    /// # Ok(())
    /// # }
    /// ```
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
                config::provide_clients(&mut actions, store.client(), queue.sqs());
                (config::load_definitions_dir(&config.definitions_dir)?, actions)
            }
            Function::Relay | Function::Sweeper => (Definitions::new(), ActionRegistry::new()),
        };
        let loaded = started.elapsed();
        let doorbell = config
            .timer_queue_url
            .as_ref()
            .map(|url| Arc::new(SqsDoorbell::new(queue.sqs().clone(), url.clone())));
        let driver = config::driver(&config, store.clone(), definitions, actions)?;
        let status_bus = match (&config.event_bus, config.status_events) {
            (Some(bus), level) if level != StatusEvents::None => {
                let client = EventBridgeBus::client(config.endpoint_url.as_deref(), &config.region).await;
                Some(Arc::new(
                    EventBridgeBus::new(client, bus.clone())
                        .with_level(level)
                        .with_rollout(config.rollout),
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
    pub fn worker(&self) -> Worker {
        let settings = WorkerSettings {
            record_reserve: record_reserve(self.config.actions.timeout),
            coalesce: self.config.coalesce,
            ..WorkerSettings::default()
        };
        let mut worker = Worker::new(self.driver.clone(), self.queue.clone(), settings);
        if let Some(doorbell) = &self.doorbell {
            worker = worker.with_doorbell(doorbell.clone());
        }
        if let Some(bus) = &self.status_bus {
            worker = worker.with_status_bus(bus.clone());
        }
        worker
    }
}

/// How many times a function tries to reach DynamoDB for its table check, and the pause
/// between tries: a moment's unreachability (an emulator still starting) is not a broken
/// deployment, but a function must not spend its invocation waiting for one.
const CHECK_ATTEMPTS: u32 = 3;
const CHECK_DELAY: Duration = Duration::from_millis(500);

/// Check that the seven tables exist with the keys the store needs (`DescribeTable` each,
/// at once), trying [`CHECK_ATTEMPTS`] times while DynamoDB is unreachable. A missing or
/// wrongly keyed table fails at once, with its name.
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
                Err(e) => Err(InitError::CheckAborted(e)),
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
