//! What can go wrong with a control-plane command: the execution it names, a driver step
//! it runs (a new execution, the machine's version, an event's declaration), the store,
//! the queue's refusal, or one of the command's own rules (redrive, migrate).

use stm_core::Value;
use stm_store::StoreError;

use super::migrate::MigrationRefusal;
use super::redrive::RedriveRefusal;
use crate::driver::DriverError;

/// A control-plane command that did not happen (or, for `create` and `send`, whose event
/// was not queued).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// No execution with this id (harel's `KeyError`, which shows the id).
    #[error("{}", stm_core::pyvalue::repr(&Value::from(.0.as_str())))]
    UnknownExecution(String),
    /// A driver step the command runs refused or failed: the new execution of `create`,
    /// the machine's version, `send`'s check of the event against its declaration, an
    /// event too large for SQS.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// The store failed, or a status change still met concurrent writers after its retries.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `send` refuses a `Start`: only `create` starts an execution (harel's `EventError`).
    #[error("event 'Start' doesn't fit its declaration: send() refuses a Start event: use create()")]
    StartRefused,
    /// The queue refused the event `send` published: its code and text.
    #[error("queue error: {code}: {message}")]
    Refused { code: String, message: String },
    /// `send` to a `PENDING` execution whose `Start` is still pending and could not be
    /// published first: the event was not sent (it would reach the group before the Start).
    #[error(
        "queue error: SendMessageBatch: execution {execution_id} is not started and its Start \
         could not be published ({}); the event was not sent",
        entries(*.failed)
    )]
    StartUnpublished { execution_id: String, failed: usize },
    /// A command whose commit writes rows, while the rows of the execution's last step
    /// could not be published first: nothing was changed.
    #[error(
        "queue error: SendMessageBatch: the rows of execution {execution_id}'s last step could not \
         be published ({}); nothing was changed: try again",
        entries(*.failed)
    )]
    RowsUnpublished { execution_id: String, failed: usize },
    /// `send_batch`: an earlier event of the same execution in the batch was not sent, and
    /// this one would have overtaken it.
    #[error(
        "not sent: an earlier event of execution {execution_id} in this batch was not sent, and \
         this one would have overtaken it; send them again in order"
    )]
    HeldBack { execution_id: String },
    /// A redrive its rules refuse (harel's `ValueError`).
    #[error(transparent)]
    Redrive(#[from] RedriveRefusal),
    /// A migration that cannot be done as asked: nothing was written.
    #[error(transparent)]
    Migration(#[from] MigrationRefusal),
}

/// `1 entry`, `3 entries`.
fn entries(n: usize) -> String {
    format!("{n} {}", if n == 1 { "entry" } else { "entries" })
}

impl ControlError {
    /// Whether the command lost a race with a concurrent writer.
    pub fn is_conflict(&self) -> bool {
        match self {
            ControlError::Store(e) => e.is_conflict(),
            ControlError::Driver(e) => e.is_conflict(),
            _ => false,
        }
    }

    /// The Python exception harel's control plane raises for the same failure.
    pub fn python_type(&self) -> &'static str {
        match self {
            ControlError::UnknownExecution(_) => "KeyError",
            ControlError::Driver(e) => e.python_type(),
            ControlError::Store(e) => e.python_type(),
            ControlError::StartRefused => "EventError",
            ControlError::Refused { .. }
            | ControlError::StartUnpublished { .. }
            | ControlError::RowsUnpublished { .. }
            | ControlError::HeldBack { .. } => "TransportError",
            ControlError::Redrive(_) | ControlError::Migration(_) => "ValueError",
        }
    }
}
