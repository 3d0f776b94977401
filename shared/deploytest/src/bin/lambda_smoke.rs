//! `lambda-smoke`: start each Lambda-built bootstrap as Lambda would, against a local
//! Runtime API, moto and the environment `template.yaml` gives it; invoke it once with a
//! real event and real work (the worker an Order's `Start`, the relay an unpublished
//! `Start` in the outbox, the sweeper an Order whose deadline passed); print its init
//! time, size and the AWS calls it made; fail if it does not start, the invocation fails,
//! the work is not done (read back from the tables), or it sent a request its role does
//! not allow.
//!
//! ```text
//! cargo run -p stm-deploytest --bin lambda-smoke -- \
//!     --lambda-dir target/lambda [--zips dist] [--definitions examples] [--runs 5] \
//!     [--python .venv/bin/python] [--breakdown]
//! ```
//!
//! With `--python`, a last row starts `bench/harel_bootstrap.py` the same way: the Python
//! equivalent of the worker's init (import harel and boto3, load and validate the same
//! definitions, build harel's DynamoDB store and SQS transport), against the same Runtime
//! API and moto, and prints the worker's init as a ratio of it.
//!
//! `--lambda-dir` holds `worker/bootstrap`, `relay/bootstrap`, `sweeper/bootstrap` built for
//! this machine (`cargo lambda build --release` on x86_64, or `bench/coldstart.sh`, which
//! links `cargo build --release`'s binaries into that layout; the arm64 deployment build
//! does not run here). Init is the time from `exec` to the function's first
//! `GET /runtime/invocation/next`: it includes reading the configuration, loading and
//! validating the definitions (the worker) and building the SDK clients. The check of the
//! seven tables (`DescribeTable` each, against moto) starts during the init and runs while
//! the function waits for its invocation, which waits for it: it shows in the first
//! invocation's time, not in the init's.
//!
//! With `--breakdown`, the functions log their init's phases at debug level and a second
//! table splits each function's init (medians): the `exec` up to `main`, reading the
//! configuration, building the clients, loading the definitions, building the driver,
//! and from the end of all that to the first poll; then the table check beside it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use stm_deploytest::function_env;
use stm_deploytest::iam::{self, Physical};
use stm_deploytest::recorder::Recorder;
use stm_deploytest::runtime_api::{Outcome, RuntimeApi};
use stm_deploytest::template::{referenced, Resolver, Template};
use stm_runtime::{ActionRegistry, Control, Driver, Queue, SqsQueue};
use stm_store::{CreateOptions, DynamoDbStore, ExecutionStore};
use stm_testkit::REGION;

struct Args {
    lambda_dir: PathBuf,
    zips: Option<PathBuf>,
    definitions: Option<PathBuf>,
    runs: usize,
    python: Option<PathBuf>,
    breakdown: bool,
}

fn args() -> Result<Args> {
    let mut out = Args {
        lambda_dir: std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| stm_deploytest::repo_root().join("target"))
            .join("lambda"),
        zips: None,
        definitions: None,
        runs: 5,
        python: None,
        breakdown: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| anyhow!("{arg} needs a value"));
        match arg.as_str() {
            "--lambda-dir" => out.lambda_dir = PathBuf::from(value()?),
            "--zips" => out.zips = Some(PathBuf::from(value()?)),
            "--definitions" => out.definitions = Some(PathBuf::from(value()?)),
            "--runs" => out.runs = value()?.parse().context("--runs")?,
            "--python" => out.python = Some(PathBuf::from(value()?)),
            "--breakdown" => out.breakdown = true,
            "-h" | "--help" => {
                println!(
                    "lambda-smoke --lambda-dir DIR [--zips DIR] [--definitions DIR] [--runs N] [--python PY] [--breakdown]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other}"),
        }
    }
    Ok(out)
}

/// One cold start and one invocation.
struct Run {
    started: Instant,
    /// `started` on the wall clock, which the function's own timestamps are on.
    spawned_epoch_us: u64,
    /// What the function logged during this run (its JSON lines).
    logged: String,
    init: Duration,
    invoke: Duration,
    peak_rss_kib: u64,
    outcome: Outcome,
}

fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

async fn cold_start(
    bootstrap: &Path,
    bootstrap_args: &[PathBuf],
    env: &BTreeMap<String, String>,
    payload: &str,
    log: &Path,
) -> Result<Run> {
    let api = RuntimeApi::start().await?;
    let log_file = std::fs::File::options().create(true).append(true).open(log)?;
    let log_offset = log_file.metadata()?.len();
    let mut cmd = tokio::process::Command::new(bootstrap);
    cmd.args(bootstrap_args)
        .env_clear()
        .envs(env)
        .env("AWS_LAMBDA_RUNTIME_API", api.address())
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdin(std::process::Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .kill_on_drop(true);
    let spawned_epoch_us = epoch_us(std::time::SystemTime::now());
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", bootstrap.display()))?;
    let pid = child.id().unwrap_or(0);
    let Some(polled) = api.first_poll(Duration::from_secs(60)).await else {
        let _ = child.start_kill();
        bail!(
            "{} did not poll the Runtime API within 60 s (init error: {:?}); see {}",
            bootstrap.display(),
            api.init_error(),
            log.display()
        );
    };
    let init = polled.duration_since(started);
    let sent = Instant::now();
    let id = api.invoke(payload);
    let outcome = api.outcome(&id, Duration::from_secs(60)).await.ok_or_else(|| {
        anyhow!(
            "{} did not answer the invocation; see {}",
            bootstrap.display(),
            log.display()
        )
    })?;
    let invoke = sent.elapsed();
    let peak_rss_kib = peak_rss_kib(pid);
    let _ = child.start_kill();
    let _ = child.wait().await;
    let logged = std::fs::read(log)
        .map(|bytes| {
            String::from_utf8_lossy(bytes.get(log_offset as usize..).unwrap_or_default()).into_owned()
        })
        .unwrap_or_default();
    Ok(Run {
        started,
        spawned_epoch_us,
        logged,
        init,
        invoke,
        peak_rss_kib,
        outcome,
    })
}

fn epoch_us(at: std::time::SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The `fields` of the first JSON log line that has the field `key`.
fn logged_fields(logged: &str, key: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    logged.lines().find_map(|line| {
        let value: serde_json::Value = serde_json::from_str(line).ok()?;
        let fields = value.get("fields")?.as_object()?;
        fields.contains_key(key).then(|| fields.clone())
    })
}

/// One run's init, split by the function's own debug lines (microseconds each), in the
/// order of [`PHASES`]; `None` when a line is missing (a function without them).
fn phases(run: &Run) -> Option<Vec<u64>> {
    let us = |fields: &serde_json::Map<String, serde_json::Value>, key: &str| fields.get(key)?.as_u64();
    let built = logged_fields(&run.logged, "config_us")?;
    let done = logged_fields(&run.logged, "polling_epoch_us")?;
    let checked = logged_fields(&run.logged, "check_us");
    let waited = logged_fields(&run.logged, "waited_us");
    let entered = us(&done, "entered_epoch_us")?;
    let polling = us(&done, "polling_epoch_us")?;
    let polled = run.spawned_epoch_us + run.init.as_micros() as u64;
    let parts = [
        us(&built, "config_us")?,
        us(&built, "clients_us")?,
        us(&built, "definitions_us")?,
        us(&built, "driver_us")?,
    ];
    let in_context: u64 = parts.iter().sum();
    let mut out = vec![entered.saturating_sub(run.spawned_epoch_us)];
    // from `main` to the context: the JSON log set-up, and the clock reads themselves
    out.push(polling.saturating_sub(entered).saturating_sub(in_context));
    out.extend(parts);
    out.push(polled.saturating_sub(polling));
    out.push(run.init.as_micros() as u64);
    out.push(checked.as_ref().and_then(|f| us(f, "check_us")).unwrap_or(0));
    out.push(waited.as_ref().and_then(|f| us(f, "waited_us")).unwrap_or(0));
    Some(out)
}

/// The rows of the breakdown table, in the order [`phases`] measures them.
const PHASES: [&str; 10] = [
    "exec to `main` (kernel exec, loader, tokio runtime, the action registry)",
    "JSON log set-up",
    "configuration from the environment",
    "SDK config and the DynamoDB and SQS clients (no request)",
    "definitions: read, parse, validate (worker only)",
    "driver: actions checked, driver built",
    "lambda_runtime start to the first `invocation/next`",
    "= init to the first poll",
    "table check, off the critical path (7 `DescribeTable` at once)",
    "first invocation's wait for the table check",
];

/// What `binary` left undone of the work its run was given (`None`: it did it), read back
/// from the tables: an answer alone does not say the function did anything. `id` is the
/// execution the work was about; a failed invocation is reported already.
async fn undone(binary: &str, id: &str, outcome: &Outcome, store: &DynamoDbStore) -> Result<Option<String>> {
    let Outcome::Response(body) = outcome else {
        return Ok(None);
    };
    let summary: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let counted = |field: &str| summary[field].as_u64().unwrap_or(0);
    Ok(match binary {
        "worker" => match store.load(id).await? {
            Some(exe) if exe.status.as_str() == "RUNNING" && exe.active_path.as_deref() == Some("Draft") => {
                None
            }
            other => Some(format!(
                "{id} was not started by its Start: {:?}",
                other.map(|exe| (exe.status, exe.active_path, exe.version))
            )),
        },
        "relay" => {
            let pending = store.pending_outbox().await?;
            if pending.iter().any(|e| e.target_id.as_deref() == Some(id)) {
                Some(format!(
                    "{id}'s Start is still in the outbox; the run answered {body}"
                ))
            } else if counted("forwarded") == 0 {
                Some(format!("it forwarded nothing: {body}"))
            } else {
                None
            }
        }
        "sweeper" => match store.armed_timer(id, "Payment").await? {
            Some(fire_at) => Some(format!(
                "{id}'s timer due at {fire_at} is still armed; the run answered {body}"
            )),
            None if counted("fired") == 0 => Some(format!("it fired nothing: {body}")),
            None => None,
        },
        _ => None,
    })
}

fn median_u64(mut xs: Vec<u64>) -> u64 {
    xs.sort_unstable();
    xs.get(xs.len() / 2).copied().unwrap_or_default()
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs.get(xs.len() / 2).copied().unwrap_or_default()
}

fn file_size(p: &Path) -> Option<u64> {
    std::fs::metadata(p).ok().map(|m| m.len())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lambda-smoke: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<()> {
    let args = args()?;
    let template = Template::repo();
    let moto = stm_testkit::moto().await;
    let prefix = stm_testkit::unique_prefix("smoke");
    let options = CreateOptions {
        prefix: prefix.clone(),
        ..CreateOptions::default()
    };
    let store = Arc::new(DynamoDbStore::create_with(Some(moto.endpoint()), REGION, options).await?);
    let sqs = SqsQueue::client(Some(moto.endpoint()), REGION).await;
    let urls = SqsQueue::ensure(&sqs, &format!("{prefix}-events"), 180, 5).await?;
    let queue = Arc::new(SqsQueue::new(sqs.clone(), urls.queue_url.clone()));
    let recorder = Recorder::start(moto.endpoint());
    let timer_queue_url =
        stm_runtime::doorbell::SqsDoorbell::ensure(&sqs, &format!("{prefix}-timers")).await?;
    let resolver = Resolver::new(&template, &[("Prefix", prefix.as_str())])
        .with_ref("EventQueue", urls.queue_url.clone())
        .with_ref("TimerQueue", timer_queue_url.clone());
    let physical = Physical::exact(
        resolver.table_names()?,
        BTreeMap::from([
            (urls.queue_url.clone(), "EventQueue".to_string()),
            (timer_queue_url, "TimerQueue".to_string()),
        ]),
    );
    let definitions = match &args.definitions {
        Some(d) => d.clone(),
        None => {
            let layer = referenced(&template.properties("Worker")?["Layers"][0])
                .ok_or_else(|| anyhow!("no layer"))?;
            template.dir().join(
                template.properties(&layer)?["ContentUri"]
                    .as_str()
                    .unwrap_or("examples"),
            )
        }
    };
    let logs = std::env::temp_dir().join(format!("lambda-smoke-{}", std::process::id()));
    std::fs::create_dir_all(&logs)?;

    // the events: a real SQS batch (an Order's Start, as the event source mapping delivers
    // it) for the worker; events/{relay,sweeper}-scheduled.json for the others, each with
    // work waiting in the tables (see `undone`)
    let loaded = stm_runtime::config::load_definitions_dir(&definitions)?;
    let control = Control::new(
        Driver::new(store.clone(), loaded, ActionRegistry::with_builtins()),
        queue.clone(),
    );
    let sample = |name: &str| -> Result<String> {
        let path = stm_deploytest::repo_root().join("events").join(name);
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
    };

    println!(
        "| function | bootstrap run here (bytes) | deployment zip (bytes) | init, median of {} (ms) | of which before the first AWS request (ms) | first invocation (ms) | peak RSS (MiB) | AWS requests (init + 1 invocation) |",
        args.runs
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    let mut problems = Vec::new();
    let mut worker_init = None;
    let mut worker_env = BTreeMap::new();
    let mut breakdowns: Vec<(&str, Vec<Vec<u64>>)> = Vec::new();
    for (function, binary) in [("Worker", "worker"), ("Relay", "relay"), ("Sweeper", "sweeper")] {
        let bootstrap = args.lambda_dir.join(binary).join("bootstrap");
        if !bootstrap.exists() {
            bail!(
                "{} is missing: build with `cargo lambda build --release` first",
                bootstrap.display()
            );
        }
        let mut env = resolver.environment(function)?;
        if env.get(stm_env::DEFINITIONS_DIR).map(String::as_str) == Some("/opt") {
            env.insert(stm_env::DEFINITIONS_DIR.into(), definitions.display().to_string());
        }
        let memory = resolver.string(template.function_property(function, "MemorySize")?)?;
        for (k, v) in [
            (stm_env::ENDPOINT_URL, recorder.endpoint().to_string()),
            // moto: the emulator's dummy credentials (an endpoint alone keeps the real chain)
            (stm_env::EMULATOR, "1".to_string()),
            (stm_env::AWS_REGION, REGION.to_string()),
            (stm_env::AWS_DEFAULT_REGION, REGION.to_string()),
            (stm_env::LAMBDA_FUNCTION_NAME, format!("stm-{binary}")),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_string()),
            ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/stm-{binary}")),
            ("AWS_LAMBDA_LOG_STREAM_NAME", "smoke".to_string()),
            (
                stm_env::LAMBDA_TASK_ROOT,
                bootstrap.parent().unwrap_or(Path::new(".")).display().to_string(),
            ),
            ("_HANDLER", "bootstrap".to_string()),
        ] {
            env.insert(k.to_string(), v);
        }
        if args.breakdown {
            // only the functions' own phase lines: the SDK's debug logging would slow
            // the init it measures
            env.insert(
                "RUST_LOG".into(),
                "info,stm_lambda=debug,stm_runtime::config=debug".into(),
            );
        }
        let log = logs.join(format!("{binary}.log"));
        let mut runs = Vec::new();
        let mut first_calls = Vec::new();
        let mut local = Vec::new();
        for i in 0..args.runs.max(1) {
            let id = format!("{binary}-smoke-{i}");
            let payload = if binary == "worker" {
                control.create("Order", None, Some(&id)).await?;
                let messages = queue.receive(10, 180, 1).await?;
                let event =
                    stm_lambda::sqs_event(&messages, "arn:aws:sqs:us-east-1:123456789012:stm-events.fifo");
                for m in &messages {
                    queue.delete(&m.receipt_handle).await?;
                }
                serde_json::to_string(&event)?
            } else {
                if binary == "relay" {
                    function_env::unflushed_start(&control.driver, "Order", &id).await?;
                } else {
                    function_env::order_past_its_deadline(&control.driver, &id).await?;
                }
                sample(&format!("{binary}-scheduled.json"))?
            };
            recorder.clear();
            let run = cold_start(&bootstrap, &[], &env, &payload, &log).await?;
            let calls = recorder.take();
            // the part of init before the first AWS request (configuration, definitions,
            // SDK clients): what the emulator's latency does not touch
            if let Some(first) = calls.first() {
                local.push(first.at.saturating_duration_since(run.started));
            }
            if i == 0 {
                first_calls = calls.clone();
            }
            // every request must be allowed by the function's role
            let needed = iam::required(&calls, &physical)?;
            let role = iam::function_role(&template, function)?;
            let granted = iam::role_grants(&template, &role)?;
            let missing: BTreeSet<_> = needed.difference(&granted).cloned().collect();
            if !missing.is_empty() {
                problems.push(format!(
                    "{function} sent requests its role does not allow:\n{}",
                    iam::show(&missing)
                ));
            }
            match &run.outcome {
                Outcome::Error(e) => problems.push(format!("{function}: the invocation failed: {e}")),
                Outcome::Response(body) if binary == "worker" && body.contains("\"itemIdentifier\"") => {
                    problems.push(format!("{function}: records failed: {body}"))
                }
                Outcome::Response(_) => {}
            }
            if let Some(problem) = undone(binary, &id, &run.outcome, store.as_ref()).await? {
                problems.push(format!("{function}: {problem}"));
            }
            runs.push(run);
        }
        let mut ops: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &first_calls {
            *ops.entry(c.operation()).or_default() += 1;
        }
        let ops: Vec<String> = ops.iter().map(|(op, n)| format!("{op} x{n}")).collect();
        if binary == "worker" {
            worker_init = Some(median(runs.iter().map(|r| r.init).collect()));
            worker_env = env.clone();
            // harel's bootstrap runs at the level the template gives
            worker_env.remove("RUST_LOG");
            if let Some(level) = resolver.environment(function)?.get("RUST_LOG") {
                worker_env.insert("RUST_LOG".into(), level.clone());
            }
        }
        if args.breakdown {
            let split: Vec<Vec<u64>> = runs.iter().filter_map(phases).collect();
            if split.len() < runs.len() {
                problems.push(format!(
                    "{function}: {} of {} runs logged no init phases (see {})",
                    runs.len() - split.len(),
                    runs.len(),
                    log.display()
                ));
            }
            breakdowns.push((binary, split));
        }
        let zip = args
            .zips
            .as_ref()
            .and_then(|d| file_size(&d.join(format!("{binary}.zip"))))
            .map_or("-".to_string(), |n| n.to_string());
        println!(
            "| {binary} | {} | {zip} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            file_size(&bootstrap).unwrap_or(0),
            median(runs.iter().map(|r| r.init).collect()).as_secs_f64() * 1e3,
            median(local).as_secs_f64() * 1e3,
            runs.first().map_or(0.0, |r| r.invoke.as_secs_f64() * 1e3),
            runs.iter().map(|r| r.peak_rss_kib).max().unwrap_or(0) as f64 / 1024.0,
            ops.join(", ")
        );
    }
    if let (Some(python), Some(worker_init)) = (&args.python, worker_init) {
        let script = stm_deploytest::repo_root().join("bench/harel_bootstrap.py");
        let log = logs.join("harel.log");
        let mut runs = Vec::new();
        for _ in 0..args.runs.max(1) {
            recorder.clear();
            let run = cold_start(python, std::slice::from_ref(&script), &worker_env, "{}", &log).await?;
            if let Outcome::Error(e) = &run.outcome {
                problems.push(format!("the harel bootstrap failed its invocation: {e}"));
            }
            runs.push((run, recorder.take()));
        }
        let mut ops: BTreeMap<&str, usize> = BTreeMap::new();
        for c in runs
            .first()
            .map(|(_, calls)| calls.as_slice())
            .unwrap_or_default()
        {
            *ops.entry(c.operation()).or_default() += 1;
        }
        let ops: Vec<String> = ops.iter().map(|(op, n)| format!("{op} x{n}")).collect();
        let local: Vec<Duration> = runs
            .iter()
            .filter_map(|(run, calls)| calls.first().map(|c| c.at.saturating_duration_since(run.started)))
            .collect();
        let harel_init = median(runs.iter().map(|(r, _)| r.init).collect());
        println!(
            "| harel 0.9.0 worker init (Python, bench/harel_bootstrap.py) | - | - | {:.1} | {:.1} | - | {:.1} | {} |",
            harel_init.as_secs_f64() * 1e3,
            median(local).as_secs_f64() * 1e3,
            runs.iter().map(|(r, _)| r.peak_rss_kib).max().unwrap_or(0) as f64 / 1024.0,
            ops.join(", ")
        );
        println!(
            "\nworker init = {:.3} x harel's (harel / worker = {:.1})",
            worker_init.as_secs_f64() / harel_init.as_secs_f64().max(1e-9),
            harel_init.as_secs_f64() / worker_init.as_secs_f64().max(1e-9)
        );
    }
    if args.breakdown && !breakdowns.is_empty() {
        println!(
            "\n| where the init goes (median of {} runs, ms) | {} |",
            args.runs,
            breakdowns.iter().map(|(b, _)| *b).collect::<Vec<_>>().join(" | ")
        );
        println!("|---|{}", "---:|".repeat(breakdowns.len()));
        for (i, phase) in PHASES.iter().enumerate() {
            let cells: Vec<String> = breakdowns
                .iter()
                .map(|(_, runs)| {
                    let xs: Vec<u64> = runs.iter().filter_map(|r| r.get(i).copied()).collect();
                    format!("{:.1}", median_u64(xs) as f64 / 1e3)
                })
                .collect();
            println!("| {phase} | {} |", cells.join(" | "));
        }
        println!("\n(each row is its own median: the rows need not add up to the init's)");
    }
    if !problems.is_empty() {
        bail!("{}\n(logs in {})", problems.join("\n"), logs.display());
    }
    let _ = std::fs::remove_dir_all(&logs);
    Ok(())
}
