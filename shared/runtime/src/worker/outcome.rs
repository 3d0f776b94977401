//! What became of each record of a batch: handled (and how) or failed (and why), the
//! batch's outcome as the partial-batch response and CloudWatch metrics, and how a driver
//! error is classified for the release policy and the log.

use stm_core::Status;
use stm_store::StoreError;

use crate::driver::DriverError;
use crate::queue::{ReceivedMessage, MESSAGE_KIND_ATTRIBUTE};
use crate::relay::RelaySummary;

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
    Poison(String),
    /// The execution moved on under us (a lost CAS): redelivered.
    Conflict(String),
    /// Throttling or a transient store fault: redelivered.
    Retryable(String),
    /// The execution is `SUSPENDED`: parked for the recheck period.
    Parked,
    /// Anything else (an unknown definition, a store or engine error): redelivered, and
    /// dead-lettered if it keeps failing.
    Error(String),
    /// Not attempted because an earlier record of its message group failed in this
    /// batch; released with that record's delay.
    Skipped,
    /// Not attempted because the invocation's deadline was too near
    /// (`WorkerSettings::record_reserve`); released at once. Nothing is wrong with the
    /// record itself, but the receive counts toward `maxReceiveCount`.
    OutOfTime,
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
        DriverError::Store(StoreError::Conflict { .. }) => Failed::Conflict(err.to_string()),
        DriverError::Store(StoreError::Retryable { .. }) => Failed::Retryable(err.to_string()),
        // the same input gives the same refusal every time: retrying only ages the record
        DriverError::MessageTooLarge { .. } | DriverError::Store(StoreError::TooLarge(_)) => {
            Failed::Poison(failure_reason(&err))
        }
        other => Failed::Error(failure_reason(&other)),
    }
}

/// Why a record failed, in words for the log: the error's own message, never the name of
/// the Python exception harel raises for it (`python_type` is for the parity with harel and
/// the Lambda `errorType`). An unknown execution's own text is harel's `KeyError` argument
/// (the id's repr), which says nothing on its own.
fn failure_reason(err: &DriverError) -> String {
    match err {
        DriverError::UnknownExecution(id) => format!("execution {id:?} does not exist"),
        other => other.to_string(),
    }
}

pub(super) fn log_failure(record: &Record, why: &Failed) {
    let id = record.message_id.as_str();
    let group = record.group_id.as_deref().unwrap_or("-");
    match why {
        Failed::Poison(reason) => {
            tracing::error!(message_id = %id, group_id = %group, %reason, "poison message: reported failed until SQS dead-letters it")
        }
        Failed::Conflict(reason) => {
            tracing::warn!(message_id = %id, group_id = %group, %reason, "lost the CAS; redelivered")
        }
        Failed::Retryable(reason) => {
            tracing::warn!(message_id = %id, group_id = %group, %reason, "transient store failure; redelivered")
        }
        Failed::Parked => {
            tracing::info!(message_id = %id, group_id = %group, "execution suspended; message parked")
        }
        Failed::Error(reason) => {
            tracing::error!(message_id = %id, group_id = %group, %reason, "record failed; redelivered")
        }
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
                ("m3".into(), Err(Failed::Conflict("stale".into()))),
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
