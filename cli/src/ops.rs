//! Operator commands against a deployment (local or real AWS). They talk to DynamoDB and
//! SQS directly through `stm-runtime`'s control plane, the same code a program embedding
//! the runtime uses.
//!
//! This file is the deployment they reach: the flags that find its tables and queue, and
//! the connection. The commands are by concern: `create` and `send` (`ops/send.rs`), the
//! control plane's `cancel`, `suspend`, `resume`, `redrive` and `terminate`
//! (`ops/control.rs`; over a selection, `ops/bulk.rs`; one command on one execution,
//! which the consoles share, `ops/apply.rs`), what reads executions back, `show`, `list`
//! and `trace` (`ops/show.rs`), and the state index's `states` and `list --in`
//! (`ops/states.rs`).

mod apply;
mod bulk;
mod control;
mod send;
mod show;
mod states;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use stm_core::Execution;
use stm_runtime::queue::SqsQueue;
use stm_runtime::{ActionRegistry, Control, Definitions, Driver, Queue};
use stm_store::{CreateOptions, DynamoDbStore, ExecutionStore};

use crate::errors::{no_execution, usage, StoreNotOpened};

pub use apply::{apply_control, ControlCommand};
pub use control::{
    cancel, redrive, resume, suspend, terminate, CancelArgs, RedriveArgs, ResumeArgs, SuspendArgs,
    TerminateArgs,
};
pub use send::{create, send, CreateArgs, SendArgs};
pub(crate) use show::status_of;
pub use show::{list, show, trace, ShowArgs, TraceArgs};
pub(crate) use states::{duration_text, now, reread_still_in};
pub use states::{list_in_state, states, InStateQuery, StatesArgs};

/// Where the deployment's tables are (what `show`, `list` and `trace` read): flags, else
/// the functions' environment variables.
#[derive(Args, Debug, Clone)]
pub struct Tables {
    /// A DynamoDB + SQS endpoint (moto, LocalStack); unset: real AWS.
    #[arg(long, env = stm_env::ENDPOINT_URL, value_name = "URL")]
    pub endpoint: Option<String>,
    /// The table prefix (the tables are PREFIX_executions, PREFIX_timers, ...).
    #[arg(long, env = stm_env::TABLE_PREFIX, default_value = stm_store::DEFAULT_PREFIX)]
    pub prefix: String,
    /// The AWS Region. Unset: `AWS_REGION`, else `AWS_DEFAULT_REGION`, else the profile's
    /// `region` in the shared config file, as the AWS CLI finds it; `us-east-1` only with a
    /// local `--endpoint`.
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// The profile of the shared config files (`~/.aws/config`, `~/.aws/credentials`) whose
    /// credentials and Region to use.
    #[arg(long, env = stm_env::AWS_PROFILE, value_name = "NAME")]
    pub profile: Option<String>,
    /// Where the deployment keeps its dedupe marks (the stack's DedupeMarks): `table` or
    /// `item`. It must match the worker's: `send --wait` reads the marks, and a commit on
    /// the item layout carries them.
    #[arg(long, env = stm_env::DEDUPE_MARKS, default_value = "table", value_name = "table|item",
          value_parser = |v: &str| v.parse::<stm_store::DedupeMarks>().map_err(|e| e.to_string()))]
    pub dedupe_marks: stm_store::DedupeMarks,
}

/// The whole deployment (what the commands that send or change something use): its
/// tables, its queue and its machines.
#[derive(Args, Debug, Clone)]
pub struct Deployment {
    #[command(flatten)]
    pub tables: Tables,
    /// The FIFO event queue: a URL, or a queue name.
    #[arg(
        long,
        env = stm_env::QUEUE_URL,
        default_value = "harel-events.fifo",
        value_name = "URL|NAME"
    )]
    pub queue: String,
    /// The folder of .stm files the deployment runs: `send` checks event kinds and data
    /// against them, `cancel` decides cooperative vs forceful with them (`stm local`
    /// runs them; default there: examples).
    #[arg(long, env = stm_env::DEFINITIONS_DIR, value_name = "DIR")]
    pub definitions: Option<PathBuf>,
    /// Days a finished execution is kept before DynamoDB's TTL deletes it (the stack's
    /// FinishedRetentionDays): stamped on what `cancel` and `terminate` finish, as the
    /// worker stamps what it finishes. Unset: kept until a purge.
    #[arg(long, env = stm_env::FINISHED_TTL_DAYS, value_name = "DAYS",
          value_parser = clap::value_parser!(u64).range(1..=stm_runtime::config::MAX_RETENTION_DAYS))]
    pub finished_ttl_days: Option<u64>,
}

/// An open deployment.
pub struct Connected {
    pub store: Arc<DynamoDbStore>,
    pub control: Control,
}

impl Tables {
    pub async fn store(&self, create_schema: bool) -> Result<Arc<DynamoDbStore>> {
        Ok(Arc::new(self.open(create_schema).await?))
    }

    /// The store, not yet shared (to configure it further).
    pub async fn open(&self, create_schema: bool) -> Result<DynamoDbStore> {
        // (`stm local` creates its tables while its emulator starts: it waits instead)
        if let Some(endpoint) = self.endpoint.as_deref().filter(|_| !create_schema) {
            if nothing_listens(endpoint).await {
                anyhow::bail!(
                    "nothing answers at {endpoint} (--endpoint, or STM_ENDPOINT_URL): start the local \
                     stack with `stm local` in another terminal and export the line it prints, or pass \
                     the endpoint that runs"
                );
            }
        }
        let region = self.region(self.endpoint.is_some()).await?;
        let options = CreateOptions {
            prefix: self.prefix.clone(),
            create_schema,
            connect_attempts: if create_schema { 30 } else { 3 },
            dedupe_marks: self.dedupe_marks,
            profile: self.profile.clone(),
            ..CreateOptions::default()
        };
        let at = match &self.endpoint {
            Some(endpoint) => format!("{endpoint} ({region})"),
            None => format!("AWS {region}"),
        };
        match DynamoDbStore::create_with(self.endpoint.as_deref(), &region, options).await {
            Ok(store) => Ok(store),
            Err(err) if self.endpoint.is_none() && no_credentials(&err) => {
                let local = crate::local::use_the_running_stack()
                    .map(|hint| format!("; or, {hint}"))
                    .unwrap_or_default();
                Err(anyhow::Error::new(StoreNotOpened::new(
                    format!(
                        "no AWS credentials for DynamoDB at {at} (the SDK found none: `-v` lists \
                         where it looked): configure them (`aws configure`, --profile or \
                         AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY){local}"
                    ),
                    err,
                )))
            }
            Err(err) => match missing_table(&err) {
                Some(table) => Err(self.no_tables(err, table, &region, &at).await),
                None => {
                    Err(anyhow::Error::new(err).context(format!("DynamoDB tables {}_* at {at}", self.prefix)))
                }
            },
        }
    }

    /// A deployment with no table of this prefix, in the operator's words: the table and
    /// the prefix tried, and the flag or command that fixes it. The default prefix's
    /// tables are looked for there, as the likeliest right `--prefix`.
    async fn no_tables(
        &self,
        err: stm_store::StoreError,
        table: String,
        region: &str,
        at: &str,
    ) -> anyhow::Error {
        let default = stm_store::DEFAULT_PREFIX;
        let default_exists = self.prefix != default && {
            let probe = CreateOptions {
                prefix: default.to_string(),
                create_schema: false,
                connect_attempts: 1,
                profile: self.profile.clone(),
                ..CreateOptions::default()
            };
            DynamoDbStore::create_with(self.endpoint.as_deref(), region, probe)
                .await
                .is_ok()
        };
        let fix = if default_exists {
            format!("the tables there have the prefix {default}: pass `--prefix {default}`")
        } else if self.endpoint.is_some() {
            "pass the prefix the tables were made with (`--prefix`, or STM_TABLE_PREFIX), or start a \
             local deployment with `stm local`"
                .to_string()
        } else {
            "pass the prefix of the deployment (`--prefix`, or STM_TABLE_PREFIX: the stack's TablePrefix), \
             its Region (`--region`), or deploy it first (`sam deploy`)"
                .to_string()
        };
        anyhow::Error::new(StoreNotOpened::new(
            format!(
                "no table {table} at {at}: --prefix {} names no deployment there; {fix}",
                self.prefix
            ),
            err,
        ))
    }
}

/// Whether the store could not start for want of credentials (the SDK's chain found none:
/// no variables, profile, container or instance role), as its message says.
fn no_credentials(err: &stm_store::StoreError) -> bool {
    let text = err.to_string();
    text.contains("loading credentials") || text.contains("no credentials") || text.contains("NoCredentials")
}

/// Whether `endpoint` is on this machine (`http://` to a loopback address) and nothing
/// listens there: a refused connection is known at once, where the SDK's retries of it took
/// the store's check 9 s before it quoted the connection error. Any other endpoint, or one
/// that accepts a connection, is the store's to judge.
async fn nothing_listens(endpoint: &str) -> bool {
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    let Ok(addrs) = tokio::net::lookup_host(authority).await else {
        return false;
    };
    let local: Vec<std::net::SocketAddr> = addrs.filter(|a| a.ip().is_loopback()).collect();
    if local.is_empty() {
        return false;
    }
    for addr in local {
        let connect = tokio::net::TcpStream::connect(addr);
        if let Ok(Ok(_)) = tokio::time::timeout(std::time::Duration::from_millis(300), connect).await {
            return false;
        }
    }
    true
}

/// The table a store's check found missing. The store says it only in its message
/// (`table NAME does not exist (...)`), so it is read from there; any other failure is
/// `None` and reported as it is.
fn missing_table(err: &stm_store::StoreError) -> Option<String> {
    let stm_store::StoreError::Backend { message, .. } = err else {
        return None;
    };
    let rest = message.strip_prefix("table ")?;
    let (name, tail) = rest.split_once(' ')?;
    tail.starts_with("does not exist").then(|| name.to_string())
}

impl Tables {
    /// The Region to use: `--region`, else the one the environment or the profile gives
    /// (as the AWS CLI reads them), else `us-east-1` when `local` (an emulator, where the
    /// Region only names the tables' namespace). Real AWS without a Region is an error
    /// rather than a guess: a guessed Region is someone else's tables, or none.
    pub async fn region(&self, local: bool) -> Result<String> {
        if let Some(region) = &self.region {
            return Ok(region.clone());
        }
        if let Some(region) = stm_aws::configured_region(self.profile.as_deref()).await {
            return Ok(region);
        }
        if local {
            return Ok(stm_store::DEFAULT_REGION.to_string());
        }
        let profile = match &self.profile {
            Some(name) => format!(" --profile {name}"),
            None => String::new(),
        };
        let local = crate::local::use_the_running_stack()
            .map(|hint| format!("; or {hint}"))
            .unwrap_or_default();
        Err(usage(format!(
            "no AWS Region: pass --region REGION, set AWS_REGION, or give the profile one \
             (`aws configure set region REGION{profile}`){local}"
        )))
    }
}

impl Deployment {
    pub async fn queue(&self) -> Result<SqsQueue> {
        let region = self.tables.region(self.tables.endpoint.is_some()).await?;
        let client = SqsQueue::client_with_profile(
            self.tables.endpoint.as_deref(),
            &region,
            self.tables.profile.as_deref(),
        )
        .await;
        if is_queue_url(&self.queue) {
            // any queue will do if it is FIFO (harel's, ours): a standard one is refused here
            // by name, not by SQS's complaint about MessageGroupId at the first send
            SqsQueue::check_event_queue(&client, &self.queue).await?;
            return Ok(SqsQueue::new(client, self.queue.clone()));
        }
        let url = client
            .get_queue_url()
            .queue_name(&self.queue)
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("queue {}: {}", self.queue, stm_aws::Readable(&e)))?
            .queue_url()
            .unwrap_or_default()
            .to_string();
        SqsQueue::check_event_queue(&client, &url).await?;
        Ok(SqsQueue::new(client, url))
    }

    pub fn load_definitions(&self, extra: Option<&Path>) -> Result<Definitions> {
        let mut definitions = match &self.definitions {
            Some(dir) => stm_runtime::config::load_definitions_dir(dir)?,
            None => Definitions::new(),
        };
        if let Some(file) = extra {
            for defn in stm_runtime::config::load_file(file)? {
                definitions.register(defn);
            }
        }
        Ok(definitions)
    }

    pub async fn connect(&self, extra: Option<&Path>) -> Result<Connected> {
        let definitions = self.load_definitions(extra)?;
        let mut store = self.tables.open(false).await?;
        if let Some(days) = self.finished_ttl_days {
            store = store.with_finished_ttl(stm_runtime::config::days(days));
        }
        let store = Arc::new(store);
        let queue: Arc<dyn Queue> = Arc::new(self.queue().await?);
        let driver = Driver::new(store.clone(), definitions, ActionRegistry::with_builtins());
        Ok(Connected {
            store,
            control: Control::new(driver, queue),
        })
    }
}

/// Whether `--queue` names the queue by its URL (else by its name).
pub fn is_queue_url(queue: &str) -> bool {
    queue.starts_with("http://") || queue.starts_with("https://")
}

/// The execution `id`, or "no execution".
async fn load(store: &dyn ExecutionStore, id: &str) -> Result<Execution> {
    store.load(id).await?.ok_or_else(|| no_execution(id))
}

/// An optional field as the listings print it: `-` for none.
fn opt(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("-")
}
