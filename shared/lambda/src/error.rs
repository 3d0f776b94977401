//! What a failed invocation or init reports to Lambda: one `From<E> for Diagnostic` per
//! error type, its `errorType` `stm.` and the Python exception harel raises for the same
//! failure (each runtime error's `python_type`), its `errorMessage` the error's words.

use lambda_runtime::Diagnostic;
use stm_runtime::{RelayError, SweepError};

use crate::context::InitError;

/// A handler's failure. Lambda receives it as a [`Diagnostic`]: the invocation fails and
/// the trigger retries it as its rules say (a schedule: the next tick).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerError {
    /// The relay's run stopped (the store).
    #[error(transparent)]
    Relay(#[from] RelayError),
    /// The sweep stopped (the store).
    #[error(transparent)]
    Sweep(#[from] SweepError),
    /// The rollouts' evaluation after a sweep stopped (the store).
    #[error("the rollouts' evaluation: {0}")]
    Rollout(#[from] stm_store::StoreError),
    /// A response could not be encoded.
    #[error("cannot encode the response: {0}")]
    Encode(#[from] serde_json::Error),
}

impl From<HandlerError> for Diagnostic {
    fn from(err: HandlerError) -> Diagnostic {
        let python_type = match &err {
            HandlerError::Relay(e) => e.python_type(),
            HandlerError::Sweep(e) => e.python_type(),
            HandlerError::Rollout(e) => e.python_type(),
            HandlerError::Encode(_) => "SerializationError",
        };
        Diagnostic {
            error_type: format!("stm.{python_type}"),
            error_message: err.to_string(),
        }
    }
}

/// A function that cannot serve: its init failed, or (found by an invocation, which waits
/// for the table check the init started) its tables. The message names the function and
/// says what kind of problem it is, as the CLI does: `worker init failed: configuration
/// error: STM_QUEUE_URL is required (...)`.
#[derive(Debug, thiserror::Error)]
#[error("{function} init failed: {}", worded(.source))]
pub(crate) struct InitFailed {
    /// `worker`, `relay` or `sweeper`.
    function: &'static str,
    #[source]
    source: InitError,
}

impl InitFailed {
    pub(crate) fn new(function: &'static str, source: InitError) -> Self {
        InitFailed { function, source }
    }

    /// The reason alone, worded as in the message (the log's `error` field).
    pub(crate) fn reason(&self) -> String {
        worded(&self.source)
    }
}

/// `err` with its kind named where its own words do not say it: a configuration problem
/// reads `configuration error: ...` (the store's errors name themselves).
fn worded(err: &InitError) -> String {
    match err {
        InitError::Config(config) => format!("configuration error: {config}"),
        InitError::Telemetry(endpoint) => format!("configuration error: {endpoint}"),
        InitError::XRay(xray) => format!("configuration error: {xray}"),
        other => other.to_string(),
    }
}

impl From<InitFailed> for Diagnostic {
    fn from(err: InitFailed) -> Diagnostic {
        Diagnostic {
            error_type: format!("stm.{}", err.source.python_type()),
            error_message: err.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handler_error_keeps_harels_exception_name() {
        let conflict = stm_store::StoreError::Conflict {
            id: "e1".into(),
            expected: 3,
            found: Some(4),
        };
        let diagnostic = Diagnostic::from(HandlerError::from(SweepError::from(conflict)));
        assert_eq!(diagnostic.error_type, "stm.StoreConflict");
        assert_eq!(
            diagnostic.error_message,
            "stale write to e1: expected version 3, found 4"
        );
        let diagnostic = Diagnostic::from(HandlerError::from(RelayError::from(
            stm_store::StoreError::backend("throttled"),
        )));
        assert_eq!(diagnostic.error_type, "stm.StoreError");
        assert_eq!(diagnostic.error_message, "store backend error: throttled");
    }

    #[test]
    fn a_failed_init_names_the_function_and_the_kind_of_problem() {
        let missing = stm_runtime::config::FunctionConfig::from_lookup(|_| None).expect_err("no queue");
        let failed = InitFailed::new("relay", InitError::from(missing));
        assert_eq!(
            failed.reason(),
            "configuration error: STM_QUEUE_URL is required (the FIFO event queue's URL)"
        );
        let diagnostic = Diagnostic::from(failed);
        assert_eq!(diagnostic.error_type, "stm.ValueError");
        assert_eq!(
            diagnostic.error_message,
            "relay init failed: configuration error: STM_QUEUE_URL is required (the FIFO event queue's URL)"
        );
    }
}
