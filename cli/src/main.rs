//! `stm`: validate, render and run `.stm` statecharts; operate a deployment.
//!
//! `validate`, `render`, `list FILE` and `run` need no deployment and build without the
//! AWS SDK (`cargo run -p stm --no-default-features -- run ...`); the operator commands and
//! `stm local` come with the default `aws` feature.
//!
//! This file is the command line's shape and the dispatch: each command's flags, help
//! text and plumbing live in the module that runs it.

// mimalloc rather than glibc's malloc: `stm run` allocates and frees a few small buffers
// per event, and glibc's paths for them were a fifth of the whole run's instructions
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod errors;
mod fmt;
mod init;
#[cfg(feature = "aws")]
mod inspect;
mod list;
#[cfg(feature = "aws")]
mod local;
mod lsp;
mod machine;
#[cfg(feature = "aws")]
mod monitor;
mod new;
#[cfg(feature = "aws")]
mod ops;
mod percent;
mod plural;
#[cfg(feature = "aws")]
mod purge;
#[cfg(feature = "aws")]
mod role;
#[cfg(feature = "aws")]
mod routing;
mod run_args;
mod shell;
mod stm_files;
#[cfg(feature = "aws")]
mod ui;
mod versions;

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

/// The commands, in `stm --help`'s order; each one's help is its arguments' doc comment.
#[derive(Subcommand)]
enum Command {
    Validate(machine::ValidateArgs),
    Fmt(fmt::FmtArgs),
    /// Serve the language server protocol over stdio for editors: diagnostics, hover,
    /// go-to-definition, completion, references, rename and harel's `harel/render` preview.
    Lsp,
    Render(machine::RenderArgs),
    List(list::ListArgs),
    Init(init::InitArgs),
    New(new::NewArgs),
    Versions(versions::VersionsArgs),
    Run(machine::RunArgs),
    #[cfg(feature = "aws")]
    Local(local::LocalCommand),
    #[cfg(feature = "aws")]
    Create(ops::CreateArgs),
    #[cfg(feature = "aws")]
    Send(ops::SendArgs),
    #[cfg(feature = "aws")]
    Show(ops::ShowArgs),
    #[cfg(feature = "aws")]
    Trace(ops::TraceArgs),
    /// Each state of a machine: the executions in it now and the time spent in it (p50,
    /// p95, oldest), from the state index.
    #[cfg(feature = "aws")]
    States(ops::StatesArgs),
    #[cfg(feature = "aws")]
    Cancel(ops::CancelArgs),
    #[cfg(feature = "aws")]
    Suspend(ops::SuspendArgs),
    #[cfg(feature = "aws")]
    Resume(ops::ResumeArgs),
    #[cfg(feature = "aws")]
    Migrate(versions::MigrateArgs),
    #[cfg(feature = "aws")]
    Redrive(ops::RedriveArgs),
    #[cfg(feature = "aws")]
    Terminate(ops::TerminateArgs),
    #[cfg(feature = "aws")]
    Purge(purge::PurgeArgs),
    #[cfg(feature = "aws")]
    Ui(ui::UiCommand),
    #[cfg(feature = "aws")]
    Monitor(monitor::MonitorCommand),
}

fn main() -> ExitCode {
    let (args, mut run_events) = run_args::split_run_events(std::env::args_os().collect());
    let mut cli = Cli::parse_from(args);
    if let Command::Run(run) = &mut cli.command {
        // the fast path takes every `-e` or none (`run_args`): one of the lists is empty
        run_events.append(&mut run.events);
        run.events = run_events;
    }
    match dispatch(cli.command, cli.verbose) {
        Ok(code) => code,
        Err(err) => errors::report(&err, cli.verbose),
    }
}

fn dispatch(command: Command, verbose: bool) -> Result<ExitCode> {
    #[cfg(not(feature = "aws"))]
    let _ = verbose; // only `stm purge` reads it
    match command {
        Command::Validate(args) => machine::validate(args),
        Command::Fmt(args) => fmt::fmt(args),
        Command::Lsp => lsp::serve(),
        Command::Render(args) => machine::render(args),
        Command::List(args) => list::list(args),
        Command::Init(args) => init::init(args),
        Command::New(args) => new::new_machine(args),
        Command::Versions(args) => versions::run(args),
        Command::Run(args) => machine::run(args),
        #[cfg(feature = "aws")]
        Command::Local(command) => local::serve(command),
        #[cfg(feature = "aws")]
        Command::Create(args) => ops::create(args),
        #[cfg(feature = "aws")]
        Command::Send(args) => ops::send(args),
        #[cfg(feature = "aws")]
        Command::Show(args) => ops::show(args),
        #[cfg(feature = "aws")]
        Command::Trace(args) => ops::trace(args),
        #[cfg(feature = "aws")]
        Command::States(args) => ops::states(args),
        #[cfg(feature = "aws")]
        Command::Cancel(args) => ops::cancel(args),
        #[cfg(feature = "aws")]
        Command::Suspend(args) => ops::suspend(args),
        #[cfg(feature = "aws")]
        Command::Resume(args) => ops::resume(args),
        #[cfg(feature = "aws")]
        Command::Migrate(args) => versions::migrate(args),
        #[cfg(feature = "aws")]
        Command::Redrive(args) => ops::redrive(args),
        #[cfg(feature = "aws")]
        Command::Terminate(args) => ops::terminate(args),
        #[cfg(feature = "aws")]
        Command::Purge(args) => purge::run(args, verbose),
        #[cfg(feature = "aws")]
        Command::Ui(command) => ui::start(command),
        #[cfg(feature = "aws")]
        Command::Monitor(command) => monitor::start(command),
    }
}
