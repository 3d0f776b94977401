//! The control plane's commands: `stm cancel`, `suspend`, `resume`, `redrive` and
//! `terminate`, and [`apply_control`], which the consoles' controls share with them.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use stm_core::{Map, Status};

use super::bulk::{run_bulk, Selection};
use super::{load, Connected, Deployment};
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

/// A control command that would do nothing to the execution as it is now (harel makes it
/// a silent no-op; the CLI says why and exits 1, and a bulk run skips it).
#[derive(Debug)]
pub struct NothingToDo {
    pub id: String,
    pub why: String,
    pub verb: &'static str,
}

impl std::fmt::Display for NothingToDo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is {}: nothing to {}", self.id, self.why, self.verb)
    }
}

impl std::error::Error for NothingToDo {}

/// A control-plane command.
#[derive(Debug, Clone)]
pub enum ControlCommand {
    Cancel(Option<Map>),
    Suspend,
    Resume,
    Terminate,
    /// Back to RUNNING at this leaf.
    Redrive(String),
}

impl ControlCommand {
    pub(crate) fn verb(&self) -> &'static str {
        match self {
            ControlCommand::Cancel(_) => "cancel",
            ControlCommand::Suspend => "suspend",
            ControlCommand::Resume => "resume",
            ControlCommand::Terminate => "terminate",
            ControlCommand::Redrive(_) => "redrive",
        }
    }

    /// What a bulk run reports it did.
    pub(crate) fn past(&self) -> &'static str {
        match self {
            ControlCommand::Cancel(_) => "cancelled",
            ControlCommand::Suspend => "suspended",
            ControlCommand::Resume => "resumed",
            ControlCommand::Terminate => "terminated",
            ControlCommand::Redrive(_) => "redriven",
        }
    }

    /// Why the command would do nothing to an execution in `status` (harel makes it a
    /// silent no-op; the CLI says so and exits 1).
    pub(crate) fn no_op(&self, status: Status) -> Option<String> {
        if status.is_finished() {
            return Some(format!("already {status}"));
        }
        match self {
            ControlCommand::Cancel(_) if status == Status::Cancelling => {
                Some("already CANCELLING (its Cancel is on its way)".to_string())
            }
            ControlCommand::Suspend if status == Status::Suspended => Some("already SUSPENDED".to_string()),
            ControlCommand::Suspend if status != Status::Running => Some(format!("{status}, not RUNNING")),
            ControlCommand::Resume if status != Status::Suspended => Some(format!("{status}, not SUSPENDED")),
            ControlCommand::Redrive(_) if status != Status::Failed => Some(format!("{status}, not FAILED")),
            _ => None,
        }
    }
}

/// What a control command did: the status before and after, and a note on how (a
/// cooperative or forceful cancel, a redrive), for the CLI's line and the console's flash.
#[derive(Debug, Clone)]
pub struct ControlOutcome {
    pub before: Status,
    pub after: Status,
    /// Empty, or a sentence on what happened beyond the status change.
    pub note: &'static str,
}

impl std::fmt::Display for ControlOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} -> {}", self.before, self.after)?;
        if !self.note.is_empty() {
            write!(f, "  ({})", self.note)?;
        }
        Ok(())
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

/// Run one control command on `id` through the control plane (what `stm cancel` and the
/// console's buttons share): refused, with the reason, when it would do nothing.
pub async fn apply_control(
    connected: &Connected,
    id: &str,
    command: ControlCommand,
) -> Result<ControlOutcome> {
    let before = load(connected.store.as_ref(), id).await?;
    if let Some(why) = command.no_op(before.status) {
        return Err(NothingToDo {
            id: id.to_string(),
            why,
            verb: command.verb(),
        }
        .into());
    }
    let control = &connected.control;
    match &command {
        ControlCommand::Cancel(reason) => control.cancel(id, reason.clone()).await,
        ControlCommand::Suspend => control.suspend(id).await,
        ControlCommand::Resume => control.resume(id).await,
        ControlCommand::Terminate => control.terminate(id).await,
        ControlCommand::Redrive(at) => control.redrive(id, at).await,
    }
    .map_err(errors::control)?;
    let after = load(connected.store.as_ref(), id).await?;
    let note = match (&command, after.status) {
        (ControlCommand::Cancel(Some(_)), Status::Cancelled) => {
            "forceful: nothing active models `on Cancel`, so no Cancel event carried the reason; as in harel, it is not kept"
        }
        (ControlCommand::Cancel(_), Status::Cancelling) => {
            "cooperative: its Cancel goes to the model's `on Cancel`; `stm show` and `stm trace` show the reason"
        }
        (ControlCommand::Redrive(_), Status::Running) => {
            "its next event or timer moves it on; the context is as it was, the error and the history are cleared"
        }
        _ => "",
    };
    Ok(ControlOutcome {
        before: before.status,
        after: after.status,
        note,
    })
}
