//! Spawning a function binary the way Lambda runs a `provided.al2023` bootstrap: a fresh
//! deployment on the test kit's moto, the environment the template gives the function,
//! and `AWS_LAMBDA_RUNTIME_API` pointing at the test's [`RuntimeApi`](crate::runtime_api::RuntimeApi).
//!
//! A function that answers is not a function that works: [`Deployment`] also hands the
//! test the deployment's store and queue, so it can put work in them before the
//! invocation (an [`unflushed_start`], an [`order_past_its_deadline`]) and read the tables
//! and the queue afterwards for what the function did with it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stm_core::{Event, Execution, Map};
use stm_runtime::queue::{Queue, ReceivedMessage, SqsQueue};
use stm_runtime::{ActionRegistry, Clock, Control, Driver, DriverError, ManualClock, SystemClock};
use stm_store::{Commit, DynamoDbStore};

/// The sample `events/NAME` of this repository.
///
/// # Panics
/// When the sample is missing.
pub fn sample(name: &str) -> String {
    let path = crate::repo_root().join("events").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("events/{name}: {e}"))
}

/// An SQS batch shaped like the sample `events/NAME` (its first record's attributes,
/// source and region), one record per `(message id, message group, body)`, so a test can
/// address the executions it created. A group sets `MessageGroupId` (and the message id
/// the deduplication id), as a FIFO queue's records have them; `None` keeps the sample's
/// attributes (a standard queue's records have no group).
///
/// # Panics
/// When the sample is missing or is not an SQS batch.
pub fn sample_batch(name: &str, records: &[(&str, Option<&str>, &str)]) -> serde_json::Value {
    let sample: serde_json::Value =
        serde_json::from_str(&self::sample(name)).unwrap_or_else(|e| panic!("events/{name}: {e}"));
    let Some(shape) = sample["Records"].get(0) else {
        panic!("events/{name} is not an SQS batch");
    };
    let records: Vec<serde_json::Value> = records
        .iter()
        .map(|(message_id, group, body)| {
            let mut record = shape.clone();
            record["messageId"] = (*message_id).into();
            record["receiptHandle"] = format!("AQEB{message_id}").into();
            record["body"] = (*body).into();
            if let (Some(group), Some(attributes)) = (group, record["attributes"].as_object_mut()) {
                attributes.insert("MessageGroupId".into(), (*group).into());
                attributes.insert("MessageDeduplicationId".into(), (*message_id).into());
            }
            record
        })
        .collect();
    serde_json::json!({ "Records": records })
}

/// A fresh deployment on moto: its tables and FIFO queue, the environment a function
/// gets (its machines from `definitions`), and a store and queue client on the same
/// tables and queue for the test itself.
pub struct Deployment {
    /// What the function's environment holds ([`spawn`] passes it).
    pub env: Vec<(String, String)>,
    /// The deployment's tables, as the test's own (unchecked) principal reaches them.
    pub store: Arc<DynamoDbStore>,
    /// The deployment's FIFO event queue, likewise.
    pub queue: Arc<SqsQueue>,
    definitions: PathBuf,
}

impl std::fmt::Debug for Deployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployment")
            .field("env", &self.env)
            .field("definitions", &self.definitions)
            .finish_non_exhaustive()
    }
}

/// Fresh tables and queue on moto; the environment a function gets from the template,
/// its machines from `definitions`.
///
/// # Panics
/// When moto is not there or the tables cannot be made: run `.ci/setup.sh`.
pub async fn deployment(tag: &str, definitions: &Path) -> Vec<(String, String)> {
    Deployment::create(tag, definitions).await.env
}

impl Deployment {
    /// [`deployment`], keeping the clients.
    ///
    /// # Panics
    /// When moto is not there or the tables cannot be made: run `.ci/setup.sh`.
    pub async fn create(tag: &str, definitions: &Path) -> Deployment {
        let moto = stm_testkit::moto().await;
        let prefix = stm_testkit::unique_prefix(tag);
        let options = stm_store::CreateOptions {
            prefix: prefix.clone(),
            ..Default::default()
        };
        let store = DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
            .await
            .expect("tables");
        let client = SqsQueue::client(Some(moto.endpoint()), stm_testkit::REGION).await;
        // named as the template names it (`${AWS::StackName}-events.fifo`), so the strict
        // layer knows it for the `EventQueue` its roles grant: the test's own operator calls
        // (`Control::create`) are checked against `OperatorPolicy` like any other
        let urls = SqsQueue::ensure(&client, &format!("{prefix}-events"), 30, 3)
            .await
            .expect("queue");
        let mut env = vec![
            (stm_env::TABLE_PREFIX.into(), prefix),
            (stm_env::QUEUE_URL.into(), urls.queue_url.clone()),
            (stm_env::ENDPOINT_URL.into(), moto.endpoint().to_string()),
            (stm_env::DEFINITIONS_DIR.into(), definitions.display().to_string()),
            // each function names itself on its requests (`stm_aws::as_function`), and
            // the strict layer checks what it does against its role in the template
            (stm_env::EMULATOR.into(), "1".into()),
        ];
        env.extend(lambda_variables("test"));
        Deployment {
            env,
            store: Arc::new(store),
            queue: Arc::new(SqsQueue::new(client, urls.queue_url)),
            definitions: definitions.to_path_buf(),
        }
    }

    /// A driver over this deployment's store and machines (harel's built-in actions, the
    /// system clock): what the test creates and steps executions with.
    ///
    /// # Panics
    /// When the definitions do not load.
    pub fn driver(&self) -> Driver {
        let definitions = stm_runtime::config::load_definitions_dir(&self.definitions)
            .unwrap_or_else(|e| panic!("{}: {e}", self.definitions.display()));
        Driver::new(self.store.clone(), definitions, ActionRegistry::with_builtins())
    }

    /// The control plane over [`driver`](Self::driver) and this deployment's queue: its
    /// `create` publishes the `Start` to the queue, as an operator's does.
    ///
    /// # Panics
    /// When the definitions do not load.
    pub fn control(&self) -> Control {
        Control::new(self.driver(), self.queue.clone())
    }

    /// Receive from the queue until `count` messages came or `within` passed, whichever is
    /// first; what came is hidden for a minute (a receive after this one sees what was
    /// sent since).
    ///
    /// # Panics
    /// When a receive fails.
    pub async fn receive(&self, count: usize, within: Duration) -> Vec<ReceivedMessage> {
        let deadline = Instant::now() + within;
        let mut out = Vec::new();
        while out.len() < count && Instant::now() < deadline {
            let got = self
                .queue
                .receive(count - out.len(), 60, 1)
                .await
                .expect("receive from the event queue");
            out.extend(got);
        }
        out
    }
}

/// Seconds since the epoch, as the functions' clock reads them.
pub fn now() -> f64 {
    SystemClock.now()
}

/// Store execution `id` of `definition` with its `Start` committed to the outbox and not
/// published: what a `create` leaves behind when its publish is lost, which only the
/// relay delivers.
pub async fn unflushed_start(driver: &Driver, definition: &str, id: &str) -> Result<Execution, DriverError> {
    let mut exe = driver.new_execution(definition, None, Some(id)).await?;
    exe.stamp(driver.clock.now());
    let commit = Commit {
        emits: vec![(Some(id.to_string()), Event::new("Start"))],
        ..Commit::default()
    };
    driver.store.commit(&mut exe, commit).await?;
    Ok(exe)
}

/// How long ago [`order_past_its_deadline`]'s order was submitted: past the one hour
/// `Payment` allows.
pub const OVERDUE_SECONDS: f64 = 3660.0;

/// An `Order` (examples/order.stm) `id`, started and submitted [`OVERDUE_SECONDS`] ago
/// on `driver`'s machines and store: it sits in `Payment.Charging` and the phase's
/// one-hour deadline, the timer on `Payment`, fell due a minute ago. Returns that timer's
/// `fire_at`.
///
/// The driver runs the steps inline, and so delivers whatever else is pending in the
/// store's outbox: seed work meant for the relay after this.
pub async fn order_past_its_deadline(driver: &Driver, id: &str) -> Result<f64, DriverError> {
    // the steps run on a clock an hour back, so the timer they arm is already due now
    let submitted = driver.clock.now() - OVERDUE_SECONDS;
    let back = driver.clone().with_clock(Arc::new(ManualClock::new(submitted)));
    back.create("Order", None, Some(id)).await?;
    let mut amount = Map::new();
    amount.insert("amount".into(), 42.5.into());
    let submit = Event::with_data("Submit", amount).with_id(format!("evt-{id}-submit"));
    back.process(id, &submit).await?;
    let armed = back.store.armed_timer(id, "Payment").await?;
    armed.ok_or_else(|| {
        DriverError::Engine(stm_core::engine::StepError::Invalid(format!(
            "{id} entered Payment and armed no timer on it"
        )))
    })
}

/// What Lambda itself sets for function `name` (its region, dummy credentials, the
/// `AWS_LAMBDA_*` the runtime reads) and the log level.
pub fn lambda_variables(name: &str) -> Vec<(String, String)> {
    [
        (stm_env::AWS_REGION, "us-east-1".to_string()),
        ("AWS_ACCESS_KEY_ID", "test".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_string()),
        (stm_env::LAMBDA_FUNCTION_NAME, name.to_string()),
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
