//! What became of each record of a batch: handled (and how) or failed (and why), the
//! batch's outcome as the partial-batch response and CloudWatch metrics, and how a driver
//! error is classified for the release policy and the log.

use std::sync::Arc;

use stm_core::Status;
use stm_store::StoreError;

use crate::driver::DriverError;
use crate::queue::{Poison, ReceivedMessage, MESSAGE_KIND_ATTRIBUTE};
use crate::relay::RelaySummary;
use crate::telemetry::{self, TraceContext};

/// One SQS record, whatever delivered it (the Lambda event source or the local poller).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Record {
    pub message_id: String,
    pub receipt_handle: Option<String>,
    pub body: String,
    pub group_id: Option<String>,
    /// The `stm_kind` message attribute.
    pub kind: Option<String>,
    /// SQS's `ApproximateReceiveCount` (1 on the first delivery).
    pub receive_count: u32,
    /// The trace context its sender gave it ([`telemetry::carried`]): its `traceparent`
    /// attribute, or X-Ray's `AWSTraceHeader`.
    pub trace: Option<TraceContext>,
}

impl Record {
    pub fn from_received(message: &ReceivedMessage) -> Self {
        Record {
            message_id: message.message_id.clone(),
            receipt_handle: Some(message.receipt_handle.clone()),
            body: message.body.clone(),
            group_id: message.group_id.clone(),
            kind: message.message_attributes.get(MESSAGE_KIND_ATTRIBUTE).cloned(),
            receive_count: message.receive_count.max(1),
            trace: telemetry::carried(&message.message_attributes, &message.attributes),
        }
    }
}

/// What became of a record that succeeded (it is deleted from the queue).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Handled {
    /// The engine ran and the step committed.
    Processed { execution_id: String, status: Status },
    /// The event went to the live regions (one outbox entry each).
    Broadcast { execution_id: String, regions: usize },
    /// A spawn intent created its child (`created: false`: it existed already).
    Spawned { child_id: String, created: bool },
    /// The event was processed before (a redelivery).
    Duplicate,
    /// No such execution (a purged one, or a send to a wrong id).
    UnknownExecution,
    /// Dropped by the lifecycle rules (`CANCELLED`, `CANCELLING`, `PENDING`).
    Drained { status: Status },
    /// Kept on the execution, which is pinned to a version this deploy does not have:
    /// it steps once that version is back (the driver's parking).
    ParkedForVersion {
        execution_id: String,
        version: Option<stm_core::version::Version>,
    },
    /// Kept on the execution, which is `SUSPENDED`: it steps once the execution is
    /// resumed (never left waiting in SQS, whose retention would delete it).
    ParkedWhileSuspended { execution_id: String },
}

/// Why a record is reported failed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Failed {
    /// Never processable; SQS dead-letters it after `maxReceiveCount`.
    Poison(Cause),
    /// The execution moved on under us (a lost CAS): redelivered.
    Conflict(Cause),
    /// Throttling or a transient store fault: redelivered.
    Retryable(Cause),
    /// The execution is `SUSPENDED`: parked for the recheck period.
    Parked,
    /// Anything else (an unknown definition, a store or engine error): redelivered, and
    /// dead-lettered if it keeps failing.
    Error(Cause),
    /// Not attempted because an earlier record of its message group failed in this
    /// batch; released with that record's delay.
    Skipped,
    /// Not attempted because the invocation's deadline was too near
    /// (`WorkerSettings::record_reserve`); released at once. Nothing is wrong with the
    /// record itself, but the receive counts toward `maxReceiveCount`.
    OutOfTime,
}

/// Why a record failed, as the error itself: its words are the log line's `reason`, and
/// its `source()` chain (the store's, the SDK's) is kept. Shared, so an outcome clones;
/// two causes are equal when they say the same.
#[derive(Debug, Clone)]
pub struct Cause(Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Cause(Arc::new(error))
    }

    /// The error, to match on its type (`error().downcast_ref::<DriverError>()`).
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.to_string() == other.to_string()
    }
}

/// What the worker itself finds wrong with a record, beside the driver's errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// A message that can never be processed (the log line says it is poison).
    #[error("{}", .0.0)]
    Unreadable(Poison),
    /// The event's execution is not stored (harel's `KeyError` names only the id).
    #[error("execution {id:?} does not exist")]
    NoSuchExecution { id: String },
    /// A record the batch loop never reached an answer for.
    #[error("the record was not handled")]
    NotHandled,
    /// A redelivery's execution whose pending rows could not be read, so they could not
    /// be published before it.
    #[error("could not read {execution_id}'s pending entries after a redelivery ({source}); retried so they go out first")]
    PendingUnreadable {
        execution_id: String,
        #[source]
        source: StoreError,
    },
    /// A redelivery's pending rows that could not all be published.
    #[error(
        "{} could not be published after a redelivery; retried so they go out first",
        super::logging::count(*entries, "pending entry", "pending entries")
    )]
    PendingUnpublished { entries: usize },
    /// A committed step whose entries could not all be published by the inline flush.
    #[error(
        "committed, but {entries} of its entries could not be published; retried so they go \
         out before the group's next event"
    )]
    Unpublished { entries: usize },
}

/// The outcome of one batch, record by record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchOutcome {
    pub records: Vec<(String, Result<Handled, Failed>)>,
    /// What the inline flushes delivered.
    pub flushed: RelaySummary,
}

impl BatchOutcome {
    /// The batch as CloudWatch metrics (Embedded Metric Format, no API call): events
    /// processed, skipped as duplicates or drained, parked, conflicts, failures, and what the
    /// inline flush forwarded.
    pub fn metrics(&self) -> crate::metrics::MetricSet {
        let mut m = crate::metrics::MetricSet::for_function("worker");
        let (mut processed, mut skipped, mut conflicts, mut failures) = (0.0, 0.0, 0.0, 0.0);
        let mut parked = 0.0;
        for (_, result) in &self.records {
            match result {
                Ok(Handled::Processed { .. } | Handled::Broadcast { .. } | Handled::Spawned { .. }) => {
                    processed += 1.0
                }
                Ok(Handled::ParkedForVersion { .. } | Handled::ParkedWhileSuspended { .. }) => parked += 1.0,
                Ok(_) => skipped += 1.0,
                Err(Failed::Conflict(_)) => conflicts += 1.0,
                Err(Failed::Skipped | Failed::Parked | Failed::OutOfTime) => skipped += 1.0,
                Err(_) => failures += 1.0,
            }
        }
        use crate::metrics::{
            CONFLICTS, EVENTS_PARKED, EVENTS_PROCESSED, EVENTS_SKIPPED, FAILURES, RELAY_FORWARDED,
        };
        m.count(EVENTS_PROCESSED, processed);
        m.count(EVENTS_SKIPPED, skipped);
        m.count(EVENTS_PARKED, parked);
        m.count(CONFLICTS, conflicts);
        m.count(FAILURES, failures);
        m.count(RELAY_FORWARDED, self.flushed.forwarded as f64);
        m
    }

    /// The message ids to report in `batchItemFailures`.
    pub fn failed_ids(&self) -> Vec<String> {
        self.records
            .iter()
            .filter(|(_, r)| r.is_err())
            .map(|(id, _)| id.clone())
            .collect()
    }
}

pub(super) fn classify(err: DriverError) -> Failed {
    match err {
        DriverError::Store(StoreError::Conflict { .. }) => Failed::Conflict(Cause::new(err)),
        DriverError::Store(StoreError::Retryable { .. }) => Failed::Retryable(Cause::new(err)),
        // the same input gives the same refusal every time: retrying only ages the record
        DriverError::MessageTooLarge { .. } | DriverError::Store(StoreError::TooLarge(_)) => {
            Failed::Poison(Cause::new(err))
        }
        // in words for the log, never the name of the Python exception harel raises for it
        // (`python_type` is for the parity with harel and the Lambda `errorType`): an unknown
        // execution's own text is harel's `KeyError` argument, the id's repr alone
        DriverError::UnknownExecution(id) => Failed::Error(Cause::new(RecordError::NoSuchExecution { id })),
        other => Failed::Error(Cause::new(other)),
    }
}

/// The line of a failed record, in the record's span (its message and group ids).
pub(super) fn log_failure(why: &Failed) {
    match why {
        Failed::Poison(reason) => {
            tracing::error!(%reason, "poison message: reported failed until SQS dead-letters it")
        }
        Failed::Conflict(reason) => tracing::warn!(%reason, "lost the CAS; redelivered"),
        Failed::Retryable(reason) => tracing::warn!(%reason, "transient store failure; redelivered"),
        Failed::Parked => tracing::info!("execution suspended; message parked"),
        Failed::Error(reason) => tracing::error!(%reason, "record failed; redelivered"),
        Failed::Skipped | Failed::OutOfTime => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_metrics_count_each_outcome_once() {
        let outcome = BatchOutcome {
            records: vec![
                (
                    "m1".into(),
                    Ok(Handled::Processed {
                        execution_id: "e".into(),
                        status: Status::Running,
                    }),
                ),
                ("m2".into(), Ok(Handled::Duplicate)),
                (
                    "m3".into(),
                    Err(Failed::Conflict(Cause::new(RecordError::NotHandled))),
                ),
                ("m4".into(), Err(Failed::Skipped)),
                ("m5".into(), Err(Failed::OutOfTime)),
                (
                    "m6".into(),
                    Ok(Handled::ParkedForVersion {
                        execution_id: "p".into(),
                        version: None,
                    }),
                ),
            ],
            flushed: RelaySummary {
                forwarded: 2,
                ..RelaySummary::default()
            },
        };
        let doc = outcome.metrics().to_json(0);
        assert_eq!(doc["Function"], "worker");
        assert_eq!(doc["EventsProcessed"], 1.0);
        assert_eq!(doc["EventsSkipped"], 3.0);
        assert_eq!(doc["EventsParked"], 1.0);
        assert_eq!(doc["Conflicts"], 1.0);
        // a zero is not sent (CloudWatch bills a custom metric by the hours it has data)
        assert!(doc.get("Failures").is_none(), "{doc}");
        assert_eq!(doc["RelayForwarded"], 2.0);
        assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Namespace"], "stm");
    }
}
