//! `stm`: validate, render and run `.stm` statecharts; operate a deployment.
//!
//! `validate`, `render`, `list FILE` and `run` need no deployment and build without the
//! AWS SDK (`cargo run -p stm --no-default-features -- run ...`); the operator commands and
//! `stm local` come with the default `aws` feature.

// mimalloc rather than glibc's malloc: `stm run` allocates and frees a few small buffers
// per event, and glibc's paths for them were a fifth of the whole run's instructions
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod errors;
mod fmt;
mod init;
#[cfg(feature = "aws")]
mod inspect;
#[cfg(feature = "aws")]
mod local;
mod lsp;
mod machine;
#[cfg(feature = "aws")]
mod monitor;
mod new;
#[cfg(feature = "aws")]
mod ops;
mod plural;
#[cfg(feature = "aws")]
mod purge;
mod run_args;
mod shell;
#[cfg(feature = "aws")]
mod ui;
mod versions;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "stm",
    version,
    about = "Durable statecharts: the .stm language, an embedded runner, and the AWS runtime's operator tool",
    after_help = errors::EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// On failure, list every cause of the error on its own line.
    #[arg(short, long, global = true)]
    verbose: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and validate machines: one FILE and an optional NAME as harel takes them, or several files and
    /// directories (every .stm file in them). Exit 1 if any has errors.
    #[command(after_help = errors::EXIT_CODES)]
    Validate {
        /// .stm files or directories; harel's `FILE NAME` form selects one machine.
        #[arg(required = true, value_name = "PATH")]
        targets: Vec<String>,
        /// Only the machine with this name.
        #[arg(long, value_name = "NAME")]
        machine: Option<String>,
    },
    /// Format .stm files in place as harel's `fmt` does: 2-space indentation by bracket
    /// depth, trailing whitespace trimmed, blank runs collapsed; comments and line
    /// structure kept.
    Fmt {
        /// The .stm files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Write nothing; exit 2 naming the files that would change.
        #[arg(long, conflicts_with = "diff")]
        check: bool,
        /// Print a unified diff instead of writing.
        #[arg(long)]
        diff: bool,
    },
    /// Serve the language server protocol over stdio for editors: diagnostics, hover,
    /// go-to-definition, completion, references, rename and harel's `harel/render` preview.
    Lsp,
    /// Render a machine as PlantUML (the default, as harel's) or a Mermaid stateDiagram-v2.
    Render {
        /// The .stm file.
        file: PathBuf,
        /// The machine, if the file declares more than one.
        name: Option<String>,
        /// Emit a Mermaid stateDiagram-v2 instead.
        #[arg(long, conflicts_with = "plantuml")]
        mermaid: bool,
        /// Emit PlantUML, the default (accepted to say so explicitly).
        #[arg(long)]
        plantuml: bool,
    },
    /// The machines, fragments and events a .stm file declares.
    #[cfg(not(feature = "aws"))]
    List {
        /// The .stm file.
        file: PathBuf,
    },
    /// With FILE: the machines, fragments and events it declares. Without: the
    /// executions of the deployment.
    #[cfg(feature = "aws")]
    List {
        /// A .stm file: list what it declares instead of executions.
        file: Option<PathBuf>,
        /// Only executions with this status (PENDING, RUNNING, SUSPENDED, CANCELLING,
        /// CANCELLED, FAILED, DONE).
        #[arg(long)]
        status: Option<String>,
        /// Only executions of this machine.
        #[arg(long, value_name = "NAME")]
        definition: Option<String>,
        /// Only root executions (no regions or invoked children).
        #[arg(long)]
        roots: bool,
        #[command(flatten)]
        tables: ops::Tables,
    },
    /// Scaffold a standalone project: its machines, its worker with a Rust action, the
    /// relay and sweeper, template.yaml, samconfig.toml and event samples.
    Init {
        /// The new project's directory (missing or empty).
        dir: PathBuf,
        /// The project's name (its binaries are NAME-worker, ...); default: DIR's name.
        #[arg(long)]
        name: Option<String>,
        /// A checkout of stm to depend on by path; default: the one this stm was built from.
        #[arg(long, value_name = "PATH", conflicts_with = "stm_git")]
        stm_path: Option<PathBuf>,
        /// A git repository of stm to depend on instead.
        #[arg(long, value_name = "URL")]
        stm_git: Option<String>,
    },
    /// Write a starter machine that validates and runs as it is (harel's `new`).
    New {
        /// The .stm file to create (its directory must exist).
        file: PathBuf,
        /// The machine's name; default: from the file's name (`my-door.stm` is `my_door`).
        name: Option<String>,
        /// Overwrite the file if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Definition versions: freeze the ones a deploy retains, check what a new one puts
    /// at risk, see which ones live executions are pinned to.
    Versions {
        #[command(subcommand)]
        command: versions::VersionsCommand,
    },
    /// Drive a machine with events over an in-memory store (no deployment).
    Run {
        /// The .stm file.
        file: PathBuf,
        /// The machine, if the file declares more than one.
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
    #[cfg(feature = "aws")]
    Local {
        #[command(flatten)]
        args: local::LocalArgs,
        #[command(flatten)]
        deployment: ops::Deployment,
    },
    /// Create an execution of machine NAME from FILE and queue its Start.
    #[cfg(feature = "aws")]
    Create {
        /// The .stm file that declares the machine.
        file: PathBuf,
        /// The machine.
        name: String,
        /// The initial context, a JSON object.
        #[arg(long, value_name = "JSON")]
        seed: Option<String>,
        /// The execution id (1-128 letters, digits and ASCII punctuation); default: a new
        /// UUID.
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        deployment: ops::Deployment,
    },
    /// Queue an event for an execution. The worker processes it asynchronously: `--wait`
    /// waits for that and prints the new state.
    #[cfg(feature = "aws")]
    Send {
        /// The execution.
        id: String,
        /// The event: KIND or KIND:'{"json": "data"}'.
        #[arg(value_name = "KIND[:JSON]")]
        event: String,
        /// Wait until the event is processed (at most SECS, default 30) and show the state.
        #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "30")]
        wait: Option<u64>,
        #[command(flatten)]
        deployment: ops::Deployment,
    },
    /// An execution: status, active path, context, and its children as a tree.
    #[cfg(feature = "aws")]
    Show {
        /// The execution.
        id: String,
        /// The stored JSON instead.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        tables: ops::Tables,
    },
    /// An execution's trace as a timeline (recorded when the worker runs with
    /// STM_TRACE=true; `stm local` records it by default).
    #[cfg(feature = "aws")]
    Trace {
        /// The execution.
        id: String,
        #[command(flatten)]
        tables: ops::Tables,
    },
    /// Cancel: cooperative when the active state models `on Cancel`, else forceful.
    #[cfg(feature = "aws")]
    Cancel {
        /// The execution.
        id: String,
        /// The Cancel event's data, a JSON object (what `on Cancel` guards read).
        #[arg(long, value_name = "JSON")]
        reason: Option<String>,
        #[command(flatten)]
        deployment: ops::Deployment,
    },
    /// Pause a RUNNING execution (and its children); its events wait in the queue.
    #[cfg(feature = "aws")]
    Suspend {
        /// The execution.
        id: String,
        #[command(flatten)]
        deployment: ops::Deployment,
    },
    /// Resume a SUSPENDED execution.
    #[cfg(feature = "aws")]
    Resume {
        /// The execution.
        id: String,
        #[command(flatten)]
        deployment: ops::Deployment,
    },
    /// Move an execution, with its region children, to another deployed version of its
    /// machine (`stm versions in-use` lists them). Refused, with the reason, when a state
    /// it holds is not in that version and no --map covers it.
    #[cfg(feature = "aws")]
    Migrate {
        /// The execution (or --all-at).
        #[arg(required_unless_present = "all_at")]
        id: Option<String>,
        /// The version to move to.
        #[arg(long, value_name = "VERSION")]
        to: stm_core::version::Version,
        /// A state renamed between the versions (repeatable); a composite's covers the
        /// states below it.
        #[arg(long = "map", value_name = "OLD.PATH=NEW.PATH")]
        map: Vec<String>,
        /// Check and print what would move; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Every root execution pinned to this version instead of one ID.
        #[arg(long, value_name = "VERSION", conflicts_with = "id")]
        all_at: Option<stm_core::version::Version>,
        #[command(flatten)]
        deployment: ops::Deployment,
    },
    /// Put a FAILED execution back to RUNNING at a leaf of its own branch, once the bug
    /// that failed it is fixed (harel's `redrive`): its context kept, its error and
    /// history cleared. Refused while a child is unfinished.
    #[cfg(feature = "aws")]
    Redrive {
        /// The execution.
        id: String,
        /// The leaf state to resume at (a full path: `Payment.Charging`).
        #[arg(long, value_name = "PATH")]
        at: String,
        #[command(flatten)]
        deployment: ops::Deployment,
    },
    /// Forceful cancel: CANCELLED now, no hooks.
    #[cfg(feature = "aws")]
    Terminate {
        /// The execution.
        id: String,
        #[command(flatten)]
        deployment: ops::Deployment,
    },
    /// Permanently delete finished execution trees (every member DONE or CANCELLED)
    /// that finished more than an age ago, each archived first with --archive. Runs under
    /// the template's PurgePolicy. `-v` lists the purged roots.
    #[cfg(feature = "aws")]
    Purge(purge::PurgeArgs),
    /// A local web console over the deployment: the executions, one drawn with its
    /// statechart, trace and children, and the control commands. Serves 127.0.0.1 and
    /// prints its URL, with the per-run token every request needs.
    #[cfg(feature = "aws")]
    Ui {
        #[command(flatten)]
        args: ui::UiArgs,
        #[command(flatten)]
        deployment: ops::Deployment,
    },
    /// A terminal console over the deployment (harel's `monitor`): the executions,
    /// filtered and refreshed; one with its children, statechart and trace; and the
    /// control commands (s suspend, R resume, c cancel, t terminate), each confirmed.
    #[cfg(feature = "aws")]
    Monitor {
        #[command(flatten)]
        args: monitor::MonitorArgs,
        #[command(flatten)]
        deployment: ops::Deployment,
    },
}

fn main() -> ExitCode {
    let (args, mut run_events) = run_args::split_run_events(std::env::args_os().collect());
    let mut cli = Cli::parse_from(args);
    if let Command::Run { events, .. } = &mut cli.command {
        run_events.append(events);
        *events = run_events;
    }
    match run(cli.command, cli.verbose) {
        Ok(code) => code,
        Err(err) => errors::report(&err, cli.verbose),
    }
}

fn run(command: Command, verbose: bool) -> Result<ExitCode> {
    #[cfg(not(feature = "aws"))]
    let _ = verbose; // only `stm purge` reads it
    match command {
        Command::Validate { targets, machine } => machine::validate(&targets, machine.as_deref()),
        Command::Fmt { files, check, diff } => fmt::fmt(&files, check, diff),
        Command::Lsp => lsp::serve(),
        Command::Render {
            file, name, mermaid, ..
        } => machine::render(&file, name.as_deref(), mermaid),
        #[cfg(not(feature = "aws"))]
        Command::List { file } => machine::list_file(&file),
        #[cfg(feature = "aws")]
        Command::List { file: Some(file), .. } => machine::list_file(&file),
        Command::Init {
            dir,
            name,
            stm_path,
            stm_git,
        } => init::init(init::InitArgs {
            dir,
            name,
            stm_path,
            stm_git,
        }),
        Command::New { file, name, force } => new::new_machine(&file, name.as_deref(), force),
        Command::Versions { command } => versions::run(command),
        Command::Run {
            file,
            name,
            events,
            seed,
            validate,
            json,
        } => machine::run(machine::RunArgs {
            file,
            name,
            events,
            seed,
            validate,
            json,
        }),
        #[cfg(feature = "aws")]
        Command::Local { args, deployment } => {
            // the local stack talks to an emulator: its clients take dummy credentials
            // (set before any thread or client exists)
            std::env::set_var(stm_store::aws::EMULATOR_VARIABLE, "1");
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(local::run(deployment, args))?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "aws")]
        Command::List {
            file: None,
            status,
            definition,
            roots,
            tables,
        } => {
            operate(async move { ops::list(&tables, status.as_deref(), definition.as_deref(), roots).await })
        }
        #[cfg(feature = "aws")]
        Command::Create {
            file,
            name,
            seed,
            id,
            deployment,
        } => {
            let seed = seed.map(|s| machine::json_object(&s, "--seed")).transpose()?;
            operate(async move { ops::create(&deployment, &file, &name, seed, id.as_deref()).await })
        }
        #[cfg(feature = "aws")]
        Command::Send {
            id,
            event,
            wait,
            deployment,
        } => {
            let event = machine::parse_event_spec(&event, "")?;
            let wait = wait.map(std::time::Duration::from_secs);
            operate(async move { ops::send(&deployment, &id, event, wait).await })
        }
        #[cfg(feature = "aws")]
        Command::Show { id, json, tables } => operate(async move { ops::show(&tables, &id, json).await }),
        #[cfg(feature = "aws")]
        Command::Trace { id, tables } => operate(async move { ops::trace(&tables, &id).await }),
        #[cfg(feature = "aws")]
        Command::Cancel {
            id,
            reason,
            deployment,
        } => {
            let reason = reason.map(|r| machine::json_object(&r, "--reason")).transpose()?;
            operate(async move { ops::control(&deployment, &id, ops::ControlCommand::Cancel(reason)).await })
        }
        #[cfg(feature = "aws")]
        Command::Suspend { id, deployment } => {
            operate(async move { ops::control(&deployment, &id, ops::ControlCommand::Suspend).await })
        }
        #[cfg(feature = "aws")]
        Command::Resume { id, deployment } => {
            operate(async move { ops::control(&deployment, &id, ops::ControlCommand::Resume).await })
        }
        #[cfg(feature = "aws")]
        Command::Migrate {
            id,
            to,
            map,
            dry_run,
            all_at,
            deployment,
        } => operate(async move {
            let args = versions::MigrateArgs {
                id,
                to,
                map,
                dry_run,
                all_at,
            };
            versions::migrate(&deployment, args).await
        }),
        #[cfg(feature = "aws")]
        Command::Redrive { id, at, deployment } => {
            operate(async move { ops::control(&deployment, &id, ops::ControlCommand::Redrive(at)).await })
        }
        #[cfg(feature = "aws")]
        Command::Terminate { id, deployment } => {
            operate(async move { ops::control(&deployment, &id, ops::ControlCommand::Terminate).await })
        }
        #[cfg(feature = "aws")]
        Command::Purge(args) => run_as("purger", purge::run(args, verbose)),
        #[cfg(feature = "aws")]
        Command::Ui { args, deployment } => {
            // the handlers run on the server's tasks: each request takes the operator's
            // role there (ui::routes), this scope covers the connection made first
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(stm_store::aws::as_function(
                "operator",
                ui::serve(&deployment, &args),
            ))?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "aws")]
        Command::Monitor { args, deployment } => run_as("operator", async move {
            monitor::run(&deployment, &args).await.map(|()| ExitCode::SUCCESS)
        }),
    }
}

/// Run one operator command to completion.
#[cfg(feature = "aws")]
fn operate(command: impl std::future::Future<Output = Result<()>>) -> Result<ExitCode> {
    // every call an operator command makes needs the template's OperatorPolicy (the test
    // kit's strict layer checks it under an emulator)
    run_as(
        "operator",
        async move { command.await.map(|()| ExitCode::SUCCESS) },
    )
}

/// Run `command` to completion as the code of `function` (`operator`: OperatorPolicy,
/// `purger`: PurgePolicy), on a runtime of its own.
#[cfg(feature = "aws")]
fn run_as(
    function: &'static str,
    command: impl std::future::Future<Output = Result<ExitCode>>,
) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(stm_store::aws::as_function(function, command))
}
