//! What can go wrong driving a step, and the checks that refuse an input before anything
//! is written (an id SQS would refuse, a message too large for it).

use stm_core::{Event, Value};
use stm_store::{SpawnIntent, StoreError};

use crate::queue::{event_message_bytes, spawn_message_bytes, MAX_MESSAGE_BYTES};

/// What can go wrong driving a step (a lost CAS included, as a store error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{}", stm_core::pyvalue::repr(&Value::from(.0.as_str())))]
    UnknownExecution(String),
    #[error("execution {0:?} already exists")]
    AlreadyExists(String),
    #[error("unknown definition {0:?}")]
    UnknownDefinition(String),
    /// The execution is pinned to a version of its machine this deploy does not retain.
    /// Its events are parked, not failed (see [`Driver::run_step`](crate::Driver::run_step)).
    #[error(
        "execution {execution_id:?} is pinned to version {version} of {definition_id:?}, which is not \
         deployed: put that version back (`stm versions freeze` keeps it in `versions/`) or move the \
         execution to a deployed one (`stm migrate`)"
    )]
    VersionMissing {
        execution_id: String,
        definition_id: String,
        version: stm_core::version::Version,
    },
    /// The machine's alias routes a new execution to a version these definitions do not
    /// have (`stm_store::route`).
    #[error(
        "the alias {alias:?} of {definition_id:?} routes this new execution to version {version}, \
         which these definitions do not have: give the runner the definitions folder the \
         deployment runs (its versions/ holds the frozen version), or route {definition_id} \
         elsewhere (`stm versions route`)"
    )]
    RoutedVersionMissing {
        alias: &'static str,
        definition_id: String,
        version: stm_core::version::Version,
    },
    /// harel's `ContextError`.
    #[error("context doesn't fit the machine's `context` schema: {}", .problems.join("; "))]
    Context { problems: Vec<String> },
    /// harel's `EventError`.
    #[error(
        "event {} doesn't fit its declaration: {}",
        stm_core::pyvalue::repr(&Value::from(kind.as_str())),
        .problems.join("; ")
    )]
    Event { kind: String, problems: Vec<String> },
    /// harel's `ResolveError`: an `invoke` of `machine`, which this driver doesn't have.
    #[error("invoke {} but this runner has no machine resolver", stm_core::pyvalue::repr(&Value::from(.machine.as_str())))]
    Resolve { machine: String },
    /// The engine met a definition/execution mismatch (harel's `AssertionError`): the
    /// engine's own error, as it gave it.
    #[error(transparent)]
    Engine(stm_core::engine::StepError),
    /// A Python exception harel lets escape the step unrouted (an arithmetic
    /// `OverflowError`): nothing of the step commits, as in harel.
    #[error("{message}")]
    Raised {
        type_name: &'static str,
        message: String,
    },
    /// An execution id SQS would refuse as a message group id: such an execution could
    /// never receive an event.
    #[error(transparent)]
    InvalidId(#[from] stm_core::ids::InvalidExecutionId),
    /// A message SQS would refuse for its size (over [`MAX_MESSAGE_BYTES`], body and
    /// attributes): what it was and its size; the message says what to do. Deterministic:
    /// the same input gives it again, so retrying never helps.
    #[error(
        "{what} would be a {bytes}-byte SQS message (body and attributes); SQS takes at most \
         {limit} bytes, so it could never be delivered: keep large data out of events and \
         contexts passed to children (store it elsewhere and pass a reference)"
    )]
    MessageTooLarge {
        what: String,
        bytes: usize,
        limit: usize,
    },
}

impl DriverError {
    pub fn is_conflict(&self) -> bool {
        matches!(self, DriverError::Store(e) if e.is_conflict())
    }

    /// The Python exception name harel raises for the same failure.
    pub fn python_type(&self) -> &'static str {
        match self {
            DriverError::Store(e) => e.python_type(),
            DriverError::UnknownExecution(_)
            | DriverError::UnknownDefinition(_)
            | DriverError::VersionMissing { .. }
            | DriverError::RoutedVersionMissing { .. } => "KeyError",
            DriverError::AlreadyExists(_) => "ExecutionAlreadyExists",
            DriverError::Context { .. } => "ContextError",
            DriverError::Event { .. } => "EventError",
            DriverError::Resolve { .. } => "ResolveError",
            DriverError::Engine(_) => "AssertionError",
            DriverError::Raised { type_name, .. } => type_name,
            DriverError::InvalidId(_) => "ValueError",
            DriverError::MessageTooLarge { .. } => "MessageTooLarge",
        }
    }
}

/// Refuse an execution id SQS would refuse as a message group id (`MessageGroupId` is
/// the execution id), before anything is written: the rule is `stm_core::ids`'.
pub fn check_execution_id(id: &str) -> Result<(), DriverError> {
    Ok(stm_core::ids::check_execution_id(id)?)
}

/// A message too large for SQS: `what` it was and its size.
fn too_large(what: &str, bytes: usize) -> DriverError {
    DriverError::MessageTooLarge {
        what: what.to_string(),
        bytes,
        limit: MAX_MESSAGE_BYTES,
    }
}

/// Refuse an event whose message would be too large for SQS (`kind` and `target` name it).
pub fn check_event_size(target: &str, event: &Event) -> Result<(), DriverError> {
    let bytes = event_message_bytes(event);
    if bytes > MAX_MESSAGE_BYTES {
        return Err(too_large(
            &format!("the event {:?} (id {:?}) to {target:?}", event.kind, event.id),
            bytes,
        ));
    }
    Ok(())
}

/// The first of a step's messages (its emits and spawn intents, as the queue will carry
/// them) that SQS would refuse for its size. An emit without a target is never sent.
pub(crate) fn check_step_messages(
    execution_id: &str,
    emits: &[(Option<String>, Event)],
    spawns: &[SpawnIntent],
) -> Result<(), DriverError> {
    for (to, event) in emits {
        if let Some(target) = to {
            check_event_size(target, event)?;
        }
    }
    for spawn in spawns {
        let bytes = spawn_message_bytes(execution_id, &spawn.child_id, &spawn.root_path, &spawn.context);
        if bytes > MAX_MESSAGE_BYTES {
            return Err(too_large(
                &format!("the spawn intent of child {:?} (its context)", spawn.child_id),
                bytes,
            ));
        }
    }
    Ok(())
}
