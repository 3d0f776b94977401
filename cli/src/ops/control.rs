//! The control plane's commands: `stm cancel`, `suspend`, `resume`, `redrive` and
//! `terminate`, on one id or on a selection (`ops/bulk.rs`), each through
//! [`apply_control`] (`ops/apply.rs`), which the consoles' controls share with them.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::apply::{apply_control, ControlCommand};
use super::bulk::{run_bulk, Selection};
use super::Deployment;
use crate::errors;

/// Cancel: cooperative when the active state models `on Cancel`, else forceful.
#[derive(Args)]
pub struct CancelArgs {
    /// The execution (or a selection: --definition NAME [--in STATE] ...).
    id: Option<String>,
    /// The Cancel event's data, a JSON object (what `on Cancel` guards read).
    #[arg(long, value_name = "JSON")]
    reason: Option<String>,
    #[command(flatten)]
    selection: Selection,
    #[command(flatten)]
    deployment: Deployment,
}

/// Pause a RUNNING execution (and its children); its events wait in the queue.
#[derive(Args)]
pub struct SuspendArgs {
    /// The execution (or a selection: --definition NAME [--in STATE] ...).
    id: Option<String>,
    #[command(flatten)]
    selection: Selection,
    #[command(flatten)]
    deployment: Deployment,
}

/// Resume a SUSPENDED execution.
#[derive(Args)]
pub struct ResumeArgs {
    /// The execution (or a selection: --definition NAME [--in STATE] ...).
    id: Option<String>,
    #[command(flatten)]
    selection: Selection,
    #[command(flatten)]
    deployment: Deployment,
}

/// Put a FAILED execution back to RUNNING at a leaf of its own branch, once the bug
/// that failed it is fixed (harel's `redrive`): its context kept, its error and
/// history cleared. Refused while a child is unfinished.
#[derive(Args)]
pub struct RedriveArgs {
    /// The execution (or a selection: --definition NAME [--in STATE] ...).
    id: Option<String>,
    /// The leaf state to resume at (a full path: `Payment.Charging`).
    #[arg(long, value_name = "PATH")]
    at: String,
    #[command(flatten)]
    selection: Selection,
    #[command(flatten)]
    deployment: Deployment,
}

/// Forceful cancel: CANCELLED now, no hooks.
#[derive(Args)]
pub struct TerminateArgs {
    /// The execution (or a selection: --definition NAME [--in STATE] ...).
    id: Option<String>,
    #[command(flatten)]
    selection: Selection,
    #[command(flatten)]
    deployment: Deployment,
}

/// `stm cancel`: the reason is read before anything runs.
pub fn cancel(args: CancelArgs) -> Result<ExitCode> {
    let reason = args
        .reason
        .map(|r| crate::machine::json_object(&r, "--reason"))
        .transpose()?;
    run(
        &args.deployment,
        args.id,
        &args.selection,
        ControlCommand::Cancel(reason),
    )
}

pub fn suspend(args: SuspendArgs) -> Result<ExitCode> {
    run(
        &args.deployment,
        args.id,
        &args.selection,
        ControlCommand::Suspend,
    )
}

pub fn resume(args: ResumeArgs) -> Result<ExitCode> {
    run(&args.deployment, args.id, &args.selection, ControlCommand::Resume)
}

pub fn redrive(args: RedriveArgs) -> Result<ExitCode> {
    run(
        &args.deployment,
        args.id,
        &args.selection,
        ControlCommand::Redrive(args.at),
    )
}

pub fn terminate(args: TerminateArgs) -> Result<ExitCode> {
    run(
        &args.deployment,
        args.id,
        &args.selection,
        ControlCommand::Terminate,
    )
}

/// One control command, as the operator, on one id or on a selection.
fn run(
    dep: &Deployment,
    id: Option<String>,
    selection: &Selection,
    command: ControlCommand,
) -> Result<ExitCode> {
    let verb = command.verb();
    match (id, selection.is_given()) {
        (Some(id), false) => crate::role::operate(control(dep, &id, command)),
        (None, true) => crate::role::run_as("operator", run_bulk(dep, selection, command)),
        (Some(_), true) => Err(errors::usage(format!(
            "stm {verb}: give one execution's ID or a selection (--definition ...), not both"
        ))),
        (None, false) => Err(errors::usage(format!(
            "stm {verb}: give the execution's ID, or a selection: --definition NAME [--in STATE] \
             [--status S] [--older-than AGE]"
        ))),
    }
}

/// `stm cancel|suspend|resume|terminate`: `ID: FROM -> TO`, or, when there is nothing to
/// do, an error saying why.
async fn control(dep: &Deployment, id: &str, command: ControlCommand) -> Result<()> {
    let connected = dep.connect(None).await?;
    let outcome = apply_control(&connected, id, command).await?;
    println!("{id}: {outcome}");
    Ok(())
}
