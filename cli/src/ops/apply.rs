//! One control command on one execution through the control plane, refused with the
//! reason when it would do nothing: what `stm cancel ID` and the other control commands
//! (`ops/control.rs`), a run over a selection (`ops/bulk.rs`) and the consoles' buttons
//! share.

use anyhow::Result;
use stm_core::{Map, Status};

use super::{load, Connected};
use crate::errors;

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
    // the status the command committed: a reload could find the worker's next step (a
    // cooperative cancel's Cancel, taken at once by `stm local`)
    let after = match &command {
        ControlCommand::Cancel(reason) => control.cancel(id, reason.clone()).await,
        ControlCommand::Suspend => control.suspend(id).await,
        ControlCommand::Resume => control.resume(id).await,
        ControlCommand::Terminate => control.terminate(id).await,
        ControlCommand::Redrive(at) => control.redrive(id, at).await,
    }
    .map_err(errors::control)?;
    let note = match (&command, after) {
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
        after,
        note,
    })
}
