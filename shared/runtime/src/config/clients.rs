//! What a function builds from its [`FunctionConfig`] (feature `aws`): the DynamoDB store,
//! the SQS queue, the remote actions `STM_ACTIONS` binds, and the whole
//! [`FunctionContext`] a Lambda function keeps from its init.

use std::sync::Arc;
use std::time::Duration;

use stm_store::{CreateOptions, DynamoDbStore};

use super::{driver, load_definitions_dir, FunctionConfig};
use crate::actions::ActionRegistry;
use crate::definitions::Definitions;
use crate::driver::{Driver, DriverError};
use crate::queue::SqsQueue;

impl FunctionConfig {
    /// The DynamoDB store. The tables must exist (they come from `template.yaml`, or
    /// `stm local` creates them): a function never creates schema.
    pub async fn store(&self) -> Result<Arc<DynamoDbStore>, DriverError> {
        let options = CreateOptions {
            prefix: self.table_prefix.clone(),
            create_schema: false,
            connect_attempts: 3,
            connect_delay: Duration::from_millis(500),
            trace_max: self.trace_max,
            ..CreateOptions::default()
        };
        let mut store =
            DynamoDbStore::create_with(self.endpoint_url.as_deref(), &self.region, options).await?;
        if let Some(days) = self.processed_ttl_days {
            store = store.with_processed_ttl(Duration::from_secs(days * 86_400));
        }
        if let Some(days) = self.finished_ttl_days {
            store = store.with_finished_ttl(Duration::from_secs(days * 86_400));
        }
        Ok(Arc::new(store))
    }

    /// The remote actions `STM_ACTIONS` binds, started (`None` when it is unset).
    pub fn remote_actions(&self) -> Result<Option<crate::remote::RemoteActions>, DriverError> {
        let Some(spec) = &self.action_bindings else {
            return Ok(None);
        };
        let bindings = crate::remote::parse_bindings(spec)?;
        if bindings.is_empty() {
            return Ok(None);
        }
        let settings = crate::remote::RemoteSettings {
            timeout: self.action_timeout,
            max_response_bytes: self.action_max_response_bytes,
            lambda_endpoint_url: self.endpoint_url.clone(),
            region: self.region.clone(),
        };
        crate::remote::RemoteActions::start(bindings, settings).map(Some)
    }

    pub async fn queue(&self) -> SqsQueue {
        SqsQueue::new(
            SqsQueue::client(self.endpoint_url.as_deref(), &self.region).await,
            self.queue_url.clone(),
        )
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
    /// Read the environment, load and validate the definitions, build the clients. Any
    /// problem fails the cold start with a message naming the variable, file or machine.
    ///
    /// The relay and the sweeper run no machine: they skip the definitions.
    pub async fn from_env(function: Function) -> Result<Self, DriverError> {
        let config = FunctionConfig::from_env()?;
        let store = config.store().await?;
        let queue = Arc::new(config.queue().await);
        let (definitions, actions) = match function {
            Function::Worker(mut actions) => {
                if let Some(remote) = config.remote_actions()? {
                    remote.register_into(&mut actions);
                }
                // the clients built here, offered to the actions (a user's own client of
                // the same type stays)
                actions
                    .provide(store.client().clone())
                    .provide(queue.sqs().clone());
                (load_definitions_dir(&config.definitions_dir)?, actions)
            }
            Function::Relay | Function::Sweeper => (Definitions::new(), ActionRegistry::new()),
        };
        let doorbell = config.timer_queue_url.as_ref().map(|url| {
            Arc::new(crate::doorbell::SqsDoorbell::new(
                queue.sqs().clone(),
                url.clone(),
            ))
        });
        let driver = driver(&config, store.clone(), definitions, actions)?;
        Ok(FunctionContext {
            config,
            store,
            queue,
            driver,
            doorbell,
        })
    }

    /// The worker over this context's driver and queue.
    pub fn worker(&self) -> crate::worker::Worker {
        let settings = crate::worker::WorkerSettings {
            record_reserve: crate::worker::record_reserve(self.config.action_timeout),
            ..crate::worker::WorkerSettings::default()
        };
        let worker = crate::worker::Worker::new(self.driver.clone(), self.queue.clone(), settings);
        match &self.doorbell {
            Some(doorbell) => worker.with_doorbell(doorbell.clone()),
            None => worker,
        }
    }
}
