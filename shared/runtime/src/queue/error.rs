//! The queue's errors: a call SQS refused or failed, with the SDK's error as its `source`
//! (publishes report their failures per message instead, as `PublishFailure`s), and a
//! queue that cannot serve as the event queue.

/// A queue call that did not succeed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// `operation` (`SendMessageBatch q.fifo`, say) failed: `message` is the service's own
    /// words (code and text), `source` the client's error where there is one.
    #[error("{operation}: {message}")]
    Call {
        operation: String,
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The queue named as the event queue does not exist.
    #[error(
        "queue {url} does not exist: create it, or pass a queue name (created if missing) or another URL as --queue"
    )]
    Missing { url: String },
    /// The queue exists but is not a FIFO queue, which the worker cannot work without.
    #[error(
        "queue {name} exists but is not a FIFO queue (FifoQueue={fifo}): delete it or pass another --queue"
    )]
    NotFifo { name: String, fifo: String },
}

impl QueueError {
    /// Whether the deployment is at fault (the queue is missing or not FIFO), not a call.
    pub fn is_deployment(&self) -> bool {
        matches!(self, QueueError::Missing { .. } | QueueError::NotFifo { .. })
    }

    /// A failed `operation` with no client error beneath it (a per-message failure, an
    /// unusable answer).
    pub fn failed(operation: impl Into<String>, message: impl Into<String>) -> Self {
        QueueError::Call {
            operation: operation.into(),
            message: message.into(),
            source: None,
        }
    }

    /// A failed `operation` and the client error it came from, shown as `message`.
    #[cfg(feature = "aws")]
    pub(crate) fn from_client(
        operation: impl Into<String>,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        QueueError::Call {
            operation: operation.into(),
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}
