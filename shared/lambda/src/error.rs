//! What a failed invocation reports to Lambda.

use lambda_runtime::Diagnostic;
use stm_runtime::DriverError;

/// A handler's failure. Lambda receives it as a [`Diagnostic`]: the invocation fails and
/// the trigger retries it as its rules say (a schedule: the next tick).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerError {
    /// The runtime failed (the store or the queue, a definition).
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// A response could not be encoded.
    #[error("cannot encode the response: {0}")]
    Encode(#[from] serde_json::Error),
}

impl From<HandlerError> for Diagnostic {
    fn from(err: HandlerError) -> Diagnostic {
        let error_type = match &err {
            HandlerError::Driver(driver) => format!("stm.{}", driver.python_type()),
            HandlerError::Encode(_) => "stm.SerializationError".to_string(),
        };
        Diagnostic {
            error_type,
            error_message: err.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_error_keeps_harels_exception_name() {
        let diagnostic = Diagnostic::from(HandlerError::from(DriverError::from(
            stm_runtime::queue::QueueError::failed("SendMessage", "throttled"),
        )));
        assert_eq!(diagnostic.error_type, "stm.TransportError");
        assert_eq!(diagnostic.error_message, "queue error: SendMessage: throttled");
    }
}
