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
//!
//! One stack per queue: a port already taken stops it before moto starts, and a lock
//! file per endpoint and queue (held with an OS file lock, so a killed process never
//! leaves it held) keeps a second `stm local --endpoint` off a queue one is serving.
//! Ctrl-C and SIGTERM stop it the same way: the pollers finish their batch, moto is
//! killed, the lock file removed. The console shows one line per processed event
//! (`console`).

mod console;
mod fresh;
mod moto;
mod queue_lock;
mod status;

/// What a command that found no AWS credentials or Region adds when a `stm local` runs on
/// this machine: its export line, which points a command there (`None`: none runs).
pub(crate) fn use_the_running_stack() -> Option<String> {
    let (endpoint, export) = queue_lock::QueueLock::running_stack()?;
    Some(format!(
        "a local stack (`stm local`) runs at {endpoint}: to use it, run its export line first \
         (`eval \"$(stm local --env)\"` with the flags it was started with):\n  {export}"
    ))
}

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::shell::shell_word;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use stm_runtime::eventsource::{self, EventSourceSettings, Schedules};
use stm_runtime::queue::SqsQueue;
use stm_runtime::telemetry::otlp::Endpoint;
use stm_runtime::{ActionRegistry, Driver, Queue, Worker, WorkerSettings};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

use crate::errors::usage;
use crate::ops::{is_queue_url, Deployment};
use fresh::{delete_tables, purge};
use moto::{answers, port_free, Moto};
use queue_lock::QueueLock;

/// Run the whole system locally: moto, tables, queue + DLQ, and the worker, relay and
/// sweeper handlers as Lambda would call them.
#[derive(Args, Debug)]
pub struct LocalCommand {
    #[command(flatten)]
    args: LocalArgs,
    #[command(flatten)]
    deployment: Deployment,
}

/// `stm local`'s own flags (the deployment's are [`Deployment`]'s).
#[derive(Args, Debug)]
pub struct LocalArgs {
    /// Print the `export` line for another shell (the endpoint, prefix, queue URL and the
    /// absolute definitions folder of the `stm local` these flags describe) and exit;
    /// that `stm local` must be running.
    #[arg(long = "env")]
    pub print_env: bool,
    /// Start from empty tables and queues: with --endpoint, delete this prefix's tables
    /// and purge the queue, its dead-letter queue and the timer doorbell queue first (a
    /// moto `stm local` starts itself is empty anyway).
    #[arg(long)]
    pub fresh: bool,
    /// The port of the moto server `stm local` starts (without --endpoint).
    #[arg(long, default_value_t = 5000, value_name = "N")]
    pub port: u16,
    /// Seconds between relay runs (the safety net that delivers what inline flushes
    /// could not).
    #[arg(long, default_value_t = 5, value_name = "SECONDS")]
    pub relay_every: u64,
    /// Seconds between timer sweeps (timers due within 15 minutes also get a doorbell).
    #[arg(long, default_value_t = 2, value_name = "SECONDS")]
    pub sweep_every: u64,
    /// The visibility timeout of a received batch, and of the queue when it is created.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub visibility: i32,
    /// Receives before SQS moves a message to the dead-letter queue (a created queue's
    /// redrive policy).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_receive: u32,
    /// Records per worker invocation (1 to 10, the SQS FIFO limit).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub batch_size: usize,
    /// Record an execution trace per commit, for `stm trace ID` (`--trace false`: none).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub trace: bool,
    /// Status events, as a deployment's `StatusEvents`: `failures` (an execution became
    /// FAILED) or `all` (FAILED, SUSPENDED, DONE, CANCELLED) go on the bus
    /// `{prefix}-status`, and a rule copies them to the queue `{queue}-status-events`.
    #[arg(
        long,
        env = stm_env::STATUS_EVENTS,
        default_value = "none",
        value_parser = ["none", "failures", "all"],
        value_name = "LEVEL"
    )]
    pub status_events: String,
    /// How new executions keep their fan-outs' joins, as a deployment's `FanOutJoin`:
    /// `children` (harel's, each instance in its parent's item: about 3,000 at most) or
    /// `counted` (any width; not read by harel).
    #[arg(
        long,
        env = stm_env::FAN_OUT_JOIN,
        default_value = "children",
        value_parser = ["children", "counted"],
        value_name = "LAYOUT"
    )]
    pub fan_out_join: String,
    /// Export the functions' spans (one trace per piece of work, from the send to the
    /// join) to this OpenTelemetry collector, OTLP over HTTP: its base URL, such as
    /// http://localhost:4318 (spans go to its /v1/traces).
    #[arg(long, env = stm_env::OTEL_ENDPOINT, value_name = "URL")]
    pub otel: Option<String>,
}

/// `stm local`, until Ctrl-C or SIGTERM.
pub fn serve(command: LocalCommand) -> Result<ExitCode> {
    // the local stack talks to an emulator: its clients take dummy credentials
    // (set before any thread or client exists)
    std::env::set_var(stm_env::EMULATOR, "1");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run(command.deployment, command.args))?;
    Ok(ExitCode::SUCCESS)
}

async fn run(mut dep: Deployment, args: LocalArgs) -> Result<()> {
    if args.batch_size == 0 || args.batch_size > 10 {
        return Err(usage("--batch-size must be 1..=10 (SQS FIFO)"));
    }
    let otel = args
        .otel
        .as_deref()
        .map(|url| Endpoint::base(url).map_err(|e| usage(format!("--otel: {e}"))))
        .transpose()?;
    // by name, the queue and the ones made beside it (dead-letter, doorbell) must fit SQS's
    // rules, or the start fails half-way with SQS's words about a name the user never typed
    if !is_queue_url(&dep.queue) {
        if let Some(problem) = stm_runtime::queue::queue_name_problem(&dep.queue) {
            return Err(usage(format!("--queue: {problem}")));
        }
    }
    let folder = dep
        .definitions
        .clone()
        .unwrap_or_else(|| PathBuf::from("examples"));
    let definitions_dir = std::fs::canonicalize(&folder).map_err(|e| {
        usage(format!(
            "the definitions folder {}: {e} (pass --definitions DIR, a folder of .stm files)",
            folder.display()
        ))
    })?;
    // an emulator's Region only names its namespace: the environment's or the profile's
    // if one is set (so the export line matches the user's other tools), else us-east-1
    dep.tables.region = Some(dep.tables.region(true).await?);
    if args.print_env {
        return print_env(&dep, &args, &definitions_dir).await;
    }
    let spans = console::init(otel);
    let stop = stop_on_signals()?;
    // a signal while starting stops at once: what was started (moto, the lock) is
    // dropped with the future, which kills moto and removes the lock file
    let started = tokio::select! {
        started = start(&mut dep, &args, &definitions_dir) => started?,
        () = stopped(stop.clone()) => return Ok(()),
    };
    let Started { stack, moto, lock } = started;
    let result = eventsource::run_with_doorbells(
        stack.queue,
        stack.worker,
        stack.settings,
        stack.schedules,
        Some(stack.doorbells),
        stop,
    )
    .await
    .context("the stack");
    drop(lock);
    if let Some(moto) = moto {
        moto.stop();
    }
    if let Some(spans) = spans {
        // the last batch, before the process ends
        let _ = tokio::task::spawn_blocking(move || spans.flush(Duration::from_secs(2))).await;
    }
    result
}

/// What the pollers run.
struct Stack {
    queue: Arc<dyn Queue>,
    worker: Worker,
    settings: EventSourceSettings,
    schedules: Schedules,
    doorbells: Arc<dyn Queue>,
}

struct Started {
    stack: Stack,
    moto: Option<Moto>,
    lock: QueueLock,
}

/// Start moto (without `--endpoint`), take the queue's lock, empty what `--fresh` asks,
/// make or join the tables and queues, and print what runs where.
async fn start(dep: &mut Deployment, args: &LocalArgs, definitions_dir: &Path) -> Result<Started> {
    let queue_name = queue_name(&dep.queue);
    let moto = match &dep.tables.endpoint {
        Some(_) => None,
        None => {
            let endpoint = format!("http://127.0.0.1:{}", args.port);
            port_free(args.port, &endpoint, &queue_name)?;
            let moto = Moto::start(args.port).await?;
            eprintln!("[stm local] moto server on {endpoint} (pid {})", moto.pid());
            dep.tables.endpoint = Some(endpoint);
            Some(moto)
        }
    };
    let endpoint = dep.tables.endpoint.clone().unwrap_or_default();
    let lock = QueueLock::acquire(&endpoint, &queue_name)?;
    let definitions = stm_runtime::config::load_definitions_dir(definitions_dir)?;
    let names: Vec<String> = definitions.iter().map(|d| d.id.clone()).collect();
    let fresh = args.fresh && moto.is_none();
    if args.fresh && !fresh {
        eprintln!("[stm local] --fresh: the moto started here is empty");
    }
    let mut store = dep.tables.store(true).await?;
    if fresh {
        let removed = delete_tables(&store).await?;
        eprintln!("[stm local] --fresh: {removed}");
        // a new store: what the old one learnt of the tables (the due index) is stale
        store = dep.tables.store(true).await?;
    }
    if !store.has_due_index() {
        // harel's CreateTable makes no index; we use its table as it is, at a cost only
        eprintln!(
            "[stm local] table {} has no {} (harel creates no index): every timer sweep \
             scans the whole table, as harel's does",
            store.table_name("timers"),
            stm_store::dynamodb::TIMER_DUE_INDEX
        );
    }
    let client = SqsQueue::client(dep.tables.endpoint.as_deref(), region(dep)).await;
    // a URL names a queue that exists: join it as it is; a name is joined, or created if
    // missing (an existing queue, harel's say, is never re-created with our attributes)
    let urls = if is_queue_url(&dep.queue) {
        SqsQueue::join(&client, &dep.queue, args.visibility, args.max_receive).await?
    } else {
        SqsQueue::ensure(&client, &dep.queue, args.visibility, args.max_receive).await?
    };
    if urls.joined {
        eprintln!("[stm local] joined the existing queue {}", urls.queue_url);
    }
    for note in &urls.notes {
        eprintln!("[stm local] {note}");
    }
    // precise timers: a standard doorbell queue beside the FIFO one (as template.yaml has)
    let doorbell_url = stm_runtime::doorbell::SqsDoorbell::ensure(
        &client,
        &format!("{}-timers", queue_name.trim_end_matches(".fifo")),
    )
    .await?;
    if fresh {
        let mut purged = Vec::new();
        for url in [&urls.queue_url, &urls.dead_letter_url, &doorbell_url] {
            if !url.is_empty() {
                purged.push(purge(&client, url).await?);
            }
        }
        eprintln!("[stm local] --fresh: purged {}", purged.join(", "));
    }
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(client.clone(), urls.queue_url.clone()));
    let mut actions = ActionRegistry::with_builtins();
    // remote actions, bound as the worker binds them: its own configuration read as its
    // Lambda reads it (STM_ACTIONS with STM_ACTION_TIMEOUT_SECONDS and
    // STM_ACTION_MAX_RESPONSE_BYTES), over this stack's endpoint, tables and queue
    let stack = [
        (stm_env::QUEUE_URL, urls.queue_url.clone()),
        (
            stm_env::ENDPOINT_URL,
            dep.tables.endpoint.clone().unwrap_or_default(),
        ),
        (stm_env::TABLE_PREFIX, dep.tables.prefix.clone()),
        (stm_env::AWS_REGION, region(dep).to_string()),
        (stm_env::DEFINITIONS_DIR, definitions_dir.display().to_string()),
        // the local stack keeps the state index (`stm list --in`, `stm states`, the console's
        // heat map) without asking: an item's size costs nothing here
        (stm_env::STATE_INDEX, "true".to_string()),
        // the flag's (whose default is the variable's) and the local bus's name
        (stm_env::STATUS_EVENTS, args.status_events.clone()),
        (stm_env::EVENT_BUS, format!("{}-status", dep.tables.prefix)),
        (stm_env::FAN_OUT_JOIN, args.fan_out_join.clone()),
    ];
    let config = stm_runtime::config::FunctionConfig::from_lookup(|name| {
        stack
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone())
            .or_else(|| std::env::var(name).ok())
    })?;
    let remote = config.remote_actions()?;
    if let Some(remote) = &remote {
        remote.register_into(&mut actions);
        for (name, target) in remote.bindings() {
            eprintln!("[stm local] remote action {name} -> {target}");
        }
    }
    stm_runtime::config::check_actions(&definitions, &actions)?;
    let driver = Driver::new(store.clone(), definitions, actions)
        .with_trace(args.trace)
        .with_status_events(config.status_events)
        .with_fan_out_join(config.fan_out_join);
    let doorbell = Arc::new(stm_runtime::doorbell::SqsDoorbell::new(
        client.clone(),
        doorbell_url.clone(),
    ));
    let doorbells: Arc<dyn Queue> = Arc::new(SqsQueue::new(client.clone(), doorbell_url.clone()));
    let mut worker = Worker::new(driver, queue.clone(), WorkerSettings::default()).with_doorbell(doorbell);
    if config.status_events != stm_runtime::status::StatusEvents::None {
        let stem = queue_name.trim_end_matches(".fifo");
        let (bus, copies) = status::local_bus(
            dep.tables.endpoint.as_deref(),
            region(dep),
            &dep.tables.prefix,
            stem,
            &client,
            config.status_events,
            config.rollout,
        )
        .await?;
        eprintln!(
            "[stm local] status events ({}) on the bus {}, copied to {copies}",
            config.status_events,
            bus.bus()
        );
        worker = worker.with_status_bus(bus);
    }
    let settings = EventSourceSettings {
        batch_size: args.batch_size,
        visibility_seconds: args.visibility,
        wait_seconds: 0,
    };
    let schedules = Schedules {
        relay_every: Duration::from_secs(args.relay_every.max(1)),
        sweep_every: Duration::from_secs(args.sweep_every.max(1)),
    };
    let dead_letters = match urls.dead_letter_url.as_str() {
        "" => "none",
        url => url,
    };
    eprintln!(
        "[stm local] tables {}_*, queue {} (DLQ {dead_letters}), timer doorbells {doorbell_url}",
        dep.tables.prefix, urls.queue_url
    );
    eprintln!(
        "[stm local] machines from {}: {}",
        definitions_dir.display(),
        names.join(", ")
    );
    let export = export_line(dep, &endpoint, &urls.queue_url, definitions_dir);
    eprintln!(
        "[stm local] relay every {}s, sweeper every {}s; Ctrl-C stops. In another shell \
         (or `eval \"$(stm local --env)\"` with these flags):\n\n  {export}\n",
        schedules.relay_every.as_secs(),
        schedules.sweep_every.as_secs(),
    );
    lock.announce(&export);
    Ok(Started {
        stack: Stack {
            queue,
            worker,
            settings,
            schedules,
            doorbells,
        },
        moto,
        lock,
    })
}

/// `stm local --env`: the export line of the running `stm local` these flags describe.
async fn print_env(dep: &Deployment, args: &LocalArgs, definitions_dir: &Path) -> Result<()> {
    let endpoint = dep
        .tables
        .endpoint
        .clone()
        .unwrap_or_else(|| format!("http://127.0.0.1:{}", args.port));
    let not_running = || {
        anyhow!(
            "`stm local` is not running at {endpoint} (nothing answers there): start it first, \
             or pass the --endpoint (or --port) it uses"
        )
    };
    if let Some(addr) = host_port(&endpoint) {
        if !answers(&addr) {
            return Err(not_running());
        }
    }
    let client = SqsQueue::client(Some(&endpoint), region(dep)).await;
    let queue_url = if is_queue_url(&dep.queue) {
        SqsQueue::check_event_queue(&client, &dep.queue)
            .await
            .with_context(|| format!("the queue {} at {endpoint}", dep.queue))?;
        dep.queue.clone()
    } else {
        let name = queue_name(&dep.queue);
        let answer = client.get_queue_url().queue_name(&name).send().await;
        match answer {
            Ok(out) => out.queue_url().unwrap_or_default().to_string(),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_queue_does_not_exist()) =>
            {
                bail!("no queue {name} at {endpoint}: is `stm local` running there with --queue {name}?")
            }
            Err(err) if err.as_service_error().is_none() => {
                bail!("{} ({})", not_running(), stm_aws::Readable(&err))
            }
            Err(err) => bail!("the queue {name} at {endpoint}: {}", stm_aws::Readable(&err)),
        }
    };
    println!("{}", export_line(dep, &endpoint, &queue_url, definitions_dir));
    Ok(())
}

/// The line another shell evals to talk to this stack, exactly as it runs.
fn export_line(dep: &Deployment, endpoint: &str, queue_url: &str, definitions_dir: &Path) -> String {
    use stm_env::{AWS_REGION, DEFINITIONS_DIR, EMULATOR, ENDPOINT_URL, QUEUE_URL, TABLE_PREFIX};
    format!(
        "export {EMULATOR}=1 {ENDPOINT_URL}={} {TABLE_PREFIX}={} {QUEUE_URL}={} \
         {DEFINITIONS_DIR}={} {AWS_REGION}={}",
        shell_word(endpoint),
        shell_word(&dep.tables.prefix),
        shell_word(queue_url),
        shell_word(&definitions_dir.display().to_string()),
        shell_word(region(dep))
    )
}

/// The stack's Region, as [`run`] resolved it.
fn region(dep: &Deployment) -> &str {
    dep.tables.region.as_deref().unwrap_or(stm_store::DEFAULT_REGION)
}

/// The FIFO queue's name: a URL's last segment, or the name with `.fifo` (as
/// `SqsQueue::ensure` adds it).
fn queue_name(queue: &str) -> String {
    if is_queue_url(queue) {
        return queue
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
    }
    format!("{}.fifo", queue.strip_suffix(".fifo").unwrap_or(queue))
}

/// `host:port` of an `http(s)://` endpoint.
fn host_port(endpoint: &str) -> Option<String> {
    let (scheme, rest) = endpoint.split_once("://")?;
    let authority = rest.split('/').next()?.rsplit('@').next()?;
    if authority.is_empty() {
        return None;
    }
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(_, port)| !port.is_empty() && port.chars().all(|c| c.is_ascii_digit()));
    Some(if has_port {
        authority.to_string()
    } else {
        let port = if scheme == "https" { 443 } else { 80 };
        format!("{authority}:{port}")
    })
}

/// A watch that turns true at the first Ctrl-C (SIGINT) or SIGTERM.
fn stop_on_signals() -> Result<watch::Receiver<bool>> {
    let mut interrupt = signal(SignalKind::interrupt()).context("listen for Ctrl-C")?;
    let mut terminate = signal(SignalKind::terminate()).context("listen for SIGTERM")?;
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = interrupt.recv() => "Ctrl-C",
            _ = terminate.recv() => "SIGTERM",
        };
        eprintln!("[stm local] {name}: stopping");
        let _ = tx.send(true);
    });
    Ok(rx)
}

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_and_endpoints() {
        assert_eq!(queue_name("harel-events.fifo"), "harel-events.fifo");
        assert_eq!(queue_name("harel-events"), "harel-events.fifo");
        assert_eq!(queue_name("http://127.0.0.1:5000/123456789012/q.fifo"), "q.fifo");
        assert_eq!(
            host_port("http://127.0.0.1:5000").as_deref(),
            Some("127.0.0.1:5000")
        );
        assert_eq!(
            host_port("https://sqs.example.com/x").as_deref(),
            Some("sqs.example.com:443")
        );
        assert_eq!(host_port("http://[::1]:4566/").as_deref(), Some("[::1]:4566"));
        assert_eq!(host_port("nonsense"), None);
    }
}
