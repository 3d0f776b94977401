//! `stm local`: the whole system on one machine, no Docker, no AWS account.
//!
//! It starts moto in server mode (unless `--endpoint` names a running emulator), creates
//! the tables and the FIFO queue with its dead-letter queue if missing, joins existing
//! ones (harel's, say) as they are when they are compatible (`SqsQueue::ensure`/`join`,
//! `DynamoDbStore::ensure_tables`: what is not is refused by name), and runs the worker,
//! relay and sweeper handlers exactly as Lambda would call them: an SQS poller
//! emulating the event source mapping (batches of up to 10, the partial-batch contract,
//! the visibility timeout, the DLQ after maxReceiveCount), and schedules for the relay
//! and the sweeper.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use stm_runtime::eventsource::{self, EventSourceSettings, Schedules};
use stm_runtime::queue::SqsQueue;
use stm_runtime::{ActionRegistry, Driver, Queue, Worker, WorkerSettings};

use crate::ops::Deployment;

#[derive(Args, Debug)]
pub struct LocalArgs {
    /// The directory of `.stm` files to run (every machine in every file).
    #[arg(long = "machines", default_value = "examples")]
    pub machines: PathBuf,
    /// The port moto listens on when `stm local` starts it.
    #[arg(long, default_value_t = 5000)]
    pub port: u16,
    /// Seconds between relay runs.
    #[arg(long, default_value_t = 5)]
    pub relay_every: u64,
    /// Seconds between timer sweeps.
    #[arg(long, default_value_t = 2)]
    pub sweep_every: u64,
    /// The queue's visibility timeout (seconds).
    #[arg(long, default_value_t = 30)]
    pub visibility: i32,
    /// Receives before SQS moves a message to the dead-letter queue.
    #[arg(long, default_value_t = 100)]
    pub max_receive: u32,
    /// Records per worker invocation (at most 10).
    #[arg(long, default_value_t = 10)]
    pub batch_size: usize,
    /// Record an execution trace per commit (`stm trace ID`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub trace: bool,
}

/// The Python with moto: `$STM_PYTHON`, else `.venv/bin/python` here, else `python3`.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("STM_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from(".venv/bin/python");
    if venv.exists() {
        return venv;
    }
    PathBuf::from("python3")
}

pub async fn run(mut dep: Deployment, args: LocalArgs) -> Result<()> {
    let _moto = match &dep.endpoint {
        Some(_) => None,
        None => {
            let endpoint = format!("http://127.0.0.1:{}", args.port);
            let child = tokio::process::Command::new(python())
                .args([
                    "-m",
                    "moto.server",
                    "-H",
                    "127.0.0.1",
                    "-p",
                    &args.port.to_string(),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .context("start moto (run `bash .ci/setup.sh` to install it, or pass --endpoint)")?;
            eprintln!("[stm local] moto server on {endpoint}");
            dep.endpoint = Some(endpoint);
            Some(child)
        }
    };
    let definitions = stm_runtime::config::load_definitions_dir(&args.machines)?;
    let names: Vec<String> = definitions.iter().map(|d| d.id.clone()).collect();
    let store = dep.store(true).await?;
    if !store.has_due_index() {
        // harel's CreateTable makes no index; we use its table as it is, at a cost only
        eprintln!(
            "[stm local] table {} has no {} (harel creates no index): every timer sweep \
             scans the whole table, as harel's does",
            store.table_name("timers"),
            stm_store::dynamodb::TIMER_DUE_INDEX
        );
    }
    let client = SqsQueue::client(dep.endpoint.as_deref(), &dep.region).await;
    // a URL names a queue that exists: join it as it is; a name is joined, or created if
    // missing (an existing queue, harel's say, is never re-created with our attributes)
    let (name, urls) = if dep.queue.starts_with("http://") || dep.queue.starts_with("https://") {
        let name = dep
            .queue
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default();
        let urls = SqsQueue::join(&client, &dep.queue, args.visibility, args.max_receive).await?;
        (name.to_string(), urls)
    } else {
        let urls = SqsQueue::ensure(&client, &dep.queue, args.visibility, args.max_receive).await?;
        (dep.queue.clone(), urls)
    };
    if urls.joined {
        eprintln!("[stm local] joined the existing queue {}", urls.queue_url);
    }
    for note in &urls.notes {
        eprintln!("[stm local] {note}");
    }
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(client.clone(), urls.queue_url.clone()));
    let mut actions = ActionRegistry::with_builtins();
    // remote actions, bound as the worker binds them (STM_ACTIONS)
    let remote = match std::env::var("STM_ACTIONS").ok().filter(|s| !s.trim().is_empty()) {
        Some(spec) => Some(stm_runtime::remote::RemoteActions::start(
            stm_runtime::remote::parse_bindings(&spec)?,
            stm_runtime::remote::RemoteSettings {
                lambda_endpoint_url: dep.endpoint.clone(),
                region: dep.region.clone(),
                ..Default::default()
            },
        )?),
        None => None,
    };
    if let Some(remote) = &remote {
        remote.register_into(&mut actions);
        for (name, target) in remote.bindings() {
            eprintln!("[stm local] remote action {name} -> {target}");
        }
    }
    stm_runtime::config::check_actions(&definitions, &actions)?;
    let driver = Driver::new(store.clone(), definitions, actions).with_trace(args.trace);
    // precise timers: a standard doorbell queue beside the FIFO one (as template.yaml has)
    let doorbell_url = stm_runtime::doorbell::SqsDoorbell::ensure(
        &client,
        &format!("{}-timers", name.trim_end_matches(".fifo")),
    )
    .await?;
    let doorbell = Arc::new(stm_runtime::doorbell::SqsDoorbell::new(
        client.clone(),
        doorbell_url.clone(),
    ));
    let doorbells: Arc<dyn Queue> = Arc::new(SqsQueue::new(client.clone(), doorbell_url.clone()));
    let worker = Worker::new(driver, queue.clone(), WorkerSettings::default()).with_doorbell(doorbell);
    if args.batch_size == 0 || args.batch_size > 10 {
        bail!("--batch-size must be 1..=10 (SQS FIFO)");
    }
    let settings = EventSourceSettings {
        batch_size: args.batch_size,
        visibility_seconds: args.visibility,
        wait_seconds: 0,
        ..EventSourceSettings::default()
    };
    let schedules = Schedules {
        relay_every: Duration::from_secs(args.relay_every.max(1)),
        sweep_every: Duration::from_secs(args.sweep_every.max(1)),
    };
    let endpoint = dep.endpoint.clone().unwrap_or_default();
    let dead_letters = match urls.dead_letter_url.as_str() {
        "" => "none",
        url => url,
    };
    eprintln!(
        "[stm local] tables {}_*, queue {} (DLQ {dead_letters}), timer doorbells {doorbell_url}",
        dep.prefix, urls.queue_url
    );
    eprintln!("[stm local] machines: {}", names.join(", "));
    eprintln!(
        "[stm local] relay every {}s, sweeper every {}s; Ctrl-C stops. In another shell:\n\n  \
         export STM_EMULATOR=1 STM_ENDPOINT_URL={endpoint} STM_TABLE_PREFIX={} STM_QUEUE_URL={} STM_DEFINITIONS_DIR={}\n",
        schedules.relay_every.as_secs(),
        schedules.sweep_every.as_secs(),
        dep.prefix,
        urls.queue_url,
        args.machines.display()
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let running = tokio::spawn(eventsource::run_with_doorbells(
        queue,
        worker,
        settings,
        schedules,
        Some(doorbells),
        stop_rx,
    ));
    tokio::signal::ctrl_c().await.context("wait for Ctrl-C")?;
    eprintln!("[stm local] stopping");
    let _ = stop_tx.send(true);
    running.await.context("the stack task")??;
    Ok(())
}
