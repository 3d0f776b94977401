//! `stm`: validate, render and run `.stm` statecharts; operate a deployment.

mod local;
mod ops;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use serde_json::Value;
use stm_core::{Definition, Event, Map};
use stm_runtime::{ActionRegistry, Definitions, Driver};
use stm_store::MemoryStore;

#[derive(Parser)]
#[command(
    name = "stm",
    version,
    about = "Durable statecharts: the .stm language, an embedded runner, and the AWS runtime's operator tool"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Where the deployment is (the operator commands and `stm local`).
    #[command(flatten)]
    deployment: ops::Deployment,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and validate a .stm file; exit 1 if it has errors.
    Validate {
        file: PathBuf,
        /// The machine to select, if the file declares more than one.
        name: Option<String>,
    },
    /// Render a machine as a Mermaid stateDiagram-v2.
    Render {
        file: PathBuf,
        name: Option<String>,
        /// Mermaid output (the only format; accepted for harel compatibility).
        #[arg(long)]
        mermaid: bool,
    },
    /// With FILE: the machines, fragments and events it declares. Without: the
    /// executions of the deployment.
    List {
        file: Option<PathBuf>,
        /// Only executions with this status (RUNNING, DONE, ...).
        #[arg(long)]
        status: Option<String>,
        /// Only executions of this definition.
        #[arg(long)]
        definition: Option<String>,
        /// Only root executions (no regions or invoked children).
        #[arg(long)]
        roots: bool,
    },
    /// Drive a machine with events over an in-memory store.
    Run {
        file: PathBuf,
        name: Option<String>,
        /// An event to deliver (repeatable): KIND or KIND:'{"json": "data"}'.
        #[arg(short = 'e', long = "event", value_name = "KIND[:JSON]")]
        events: Vec<String>,
        /// The initial context, a JSON object.
        #[arg(long, value_name = "JSON")]
        seed: Option<String>,
        /// Validate before running.
        #[arg(long)]
        validate: bool,
        /// Print the final root execution and every child as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Run the whole system locally: moto, tables, queue + DLQ, and the worker, relay and
    /// sweeper handlers as Lambda would call them.
    Local(local::LocalArgs),
    /// Create an execution of machine NAME from FILE and queue its Start.
    Create {
        file: PathBuf,
        name: String,
        /// The initial context, a JSON object.
        #[arg(long, value_name = "JSON")]
        seed: Option<String>,
        #[arg(long)]
        id: Option<String>,
    },
    /// Send an event: KIND or KIND:'{"json": "data"}'.
    Send {
        id: String,
        #[arg(value_name = "KIND[:JSON]")]
        event: String,
    },
    /// An execution: status, active path, context, and its children as a tree.
    Show {
        id: String,
        /// The stored JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// An execution's trace as a timeline.
    Trace { id: String },
    /// Cancel: cooperative when the active state models `on Cancel`, else forceful.
    Cancel {
        id: String,
        /// The Cancel event's data, a JSON object.
        #[arg(long, value_name = "JSON")]
        reason: Option<String>,
    },
    /// Pause an execution (and its children); its events wait in the queue.
    Suspend { id: String },
    /// Resume a suspended execution.
    Resume { id: String },
    /// Forceful cancel: CANCELLED now, no hooks.
    Terminate { id: String },
}

/// A problem with what the user gave us (exit 2), as opposed to a machine that fails.
#[derive(Debug)]
struct BadInput(String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

fn bad(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(msg.into()))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            if let Some(dsl) = err.downcast_ref::<stm_core::dsl::DslError>() {
                // already "error: ..." with its location and caret
                eprintln!("{dsl}");
                return ExitCode::from(2);
            }
            eprintln!("error: {err:#}");
            if err.downcast_ref::<BadInput>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Validate { file, name } => {
            let defn = load(&file, name.as_deref())?;
            let findings = stm_core::validate::validate(&defn);
            for finding in &findings {
                println!("{finding}");
            }
            if findings.is_empty() {
                println!("{}: ok", defn.id);
            }
            Ok(if stm_core::validate::has_errors(&findings) {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Render {
            file,
            name,
            mermaid: _,
        } => {
            let defn = load(&file, name.as_deref())?;
            println!("{}", stm_core::render::mermaid(&defn));
            Ok(ExitCode::SUCCESS)
        }
        Command::List {
            file: None,
            status,
            definition,
            roots,
        } => operate(ops::list(
            &cli.deployment,
            status.as_deref(),
            definition.as_deref(),
            roots,
        )),
        Command::List { file: Some(file), .. } => {
            let text = read(&file)?;
            let program = stm_core::dsl::parse(&text)
                .map_err(|e| anyhow::Error::new(e.with_file(file.display().to_string())))?;
            let join = |v: &[String]| {
                if v.is_empty() {
                    "—".to_string()
                } else {
                    v.join(", ")
                }
            };
            println!("machines:  {}", join(&program.machines));
            println!("fragments: {}", join(&program.fragments));
            println!("events:    {}", join(&program.events));
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            file,
            name,
            events,
            seed,
            validate,
            json,
        } => {
            let defn = load(&file, name.as_deref())?;
            if validate {
                let findings = stm_core::validate::validate(&defn);
                if stm_core::validate::has_errors(&findings) {
                    let text: Vec<String> = findings.iter().map(ToString::to_string).collect();
                    bail!(bad(format!("{} is not valid:\n{}", defn.id, text.join("\n"))));
                }
            }
            // every argument is checked before anything runs
            let seed = seed.map(|s| json_object(&s, "--seed")).transpose()?;
            let events = events
                .iter()
                .map(|s| parse_event_spec(s))
                .collect::<Result<Vec<_>>>()?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(run_machine(defn, seed, events, json))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Local(args) => {
            // the local stack talks to an emulator: its clients take dummy credentials
            // (set before any thread or client exists)
            std::env::set_var(stm_store::aws::EMULATOR_VARIABLE, "1");
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(local::run(cli.deployment, args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Create { file, name, seed, id } => {
            let seed = seed.map(|s| json_object(&s, "--seed")).transpose()?;
            operate(ops::create(&cli.deployment, &file, &name, seed, id.as_deref()))
        }
        Command::Send { id, event } => {
            let event = parse_event_spec(&event)?;
            operate(ops::send(&cli.deployment, &id, event))
        }
        Command::Show { id, json } => operate(ops::show(&cli.deployment, &id, json)),
        Command::Trace { id } => operate(ops::trace(&cli.deployment, &id)),
        Command::Cancel { id, reason } => {
            let reason = reason.map(|r| json_object(&r, "--reason")).transpose()?;
            operate(ops::control(&cli.deployment, &id, ops::Command::Cancel(reason)))
        }
        Command::Suspend { id } => operate(ops::control(&cli.deployment, &id, ops::Command::Suspend)),
        Command::Resume { id } => operate(ops::control(&cli.deployment, &id, ops::Command::Resume)),
        Command::Terminate { id } => operate(ops::control(&cli.deployment, &id, ops::Command::Terminate)),
    }
}

/// Run one operator command to completion.
fn operate(command: impl std::future::Future<Output = Result<()>>) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // every call an operator command makes needs the template's OperatorPolicy (the test
    // kit's strict layer checks it under an emulator)
    runtime.block_on(stm_store::aws::as_function("operator", command))?;
    Ok(ExitCode::SUCCESS)
}

fn read(file: &Path) -> Result<String> {
    std::fs::read_to_string(file).map_err(|e| bad(format!("cannot read {}: {e}", file.display())))
}

fn load(file: &Path, name: Option<&str>) -> Result<Definition> {
    if !file.exists() {
        bail!(bad(format!("no such file: {}", file.display())));
    }
    Ok(stm_core::dsl::load_definition_file(file, name)?)
}

fn json_object(raw: &str, what: &str) -> Result<Map> {
    let value: Value =
        serde_json::from_str(raw).map_err(|e| bad(format!("{what} is not valid JSON ({e})")))?;
    match value {
        Value::Object(map) => Ok(map),
        other => Err(bad(format!(
            "{what} must be a JSON object, got {}",
            stm_core::pyvalue::type_name(&other)
        ))),
    }
}

/// `KIND` or `KIND:JSON`.
fn parse_event_spec(spec: &str) -> Result<Event> {
    let (kind, data) = match spec.split_once(':') {
        Some((kind, raw)) => (kind, json_object(raw, &format!("the data of -e {kind}"))?),
        None => (spec, Map::new()),
    };
    if kind.trim().is_empty() {
        bail!(bad(format!("-e {spec:?}: the event kind is empty")));
    }
    Ok(Event::with_data(kind, data))
}

async fn run_machine(defn: Definition, seed: Option<Map>, events: Vec<Event>, json: bool) -> Result<()> {
    let actions = ActionRegistry::with_builtins();
    actions.check(&defn)?;
    let defn_id = defn.id.clone();
    let mut definitions = Definitions::new();
    definitions.register(defn);
    let store = Arc::new(MemoryStore::new());
    let driver = Driver::new(store.clone(), definitions, actions);
    let exe = driver
        .create(&defn_id, seed, None)
        .await
        .map_err(|e| anyhow!("{}: {e}", e.python_type()))?;
    let id = exe.id.clone();
    let show = |p: &Option<String>| p.clone().unwrap_or_else(|| "None".into());
    if !json {
        println!("{:<20} -> {}", "(start)", show(&exe.active_path));
    }
    let mut last = exe;
    for event in events {
        last = driver
            .process(&id, &event)
            .await
            .map_err(|e| anyhow!("{}: {e}", e.python_type()))?;
        if !json {
            println!("{:<20} -> {}", event.kind, show(&last.active_path));
        }
    }
    if json {
        let children: Vec<Value> = store
            .all_executions()
            .into_iter()
            .filter(|e| e.id != id)
            .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
            .collect();
        let out = serde_json::json!({ "execution": last, "children": children });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).context("encode the result")?
        );
    } else {
        println!(
            "status: {}  outcome: {}",
            last.status,
            last.outcome.as_deref().unwrap_or("None")
        );
    }
    Ok(())
}
