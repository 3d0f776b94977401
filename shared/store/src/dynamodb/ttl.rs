//! The `ttl` attributes (epoch seconds, what DynamoDB's TTL reads) the store stamps on
//! processed marks, finished executions and trace rows when a retention is configured.

use std::time::Duration;

use stm_core::{Execution, Status};

use super::DynamoDbStore;

impl DynamoDbStore {
    /// The `ttl` of a processed mark written now (see `with_processed_ttl`).
    pub(super) fn processed_ttl_value(&self) -> Option<i64> {
        expiry(now_seconds()?, self.processed_ttl?)
    }

    /// The `ttl` of `exe`'s item: `finished_at` plus the retention, for a DONE or
    /// CANCELLED execution when one is configured (see `with_finished_ttl`).
    pub(super) fn finished_ttl_value(&self, exe: &Execution) -> Option<i64> {
        let retention = self.finished_ttl?;
        if !matches!(exe.status, Status::Done | Status::Cancelled) {
            return None;
        }
        expiry(exe.finished_at.or_else(now_seconds)?, retention)
    }

    /// The `ttl` of a trace row written now.
    pub(super) fn trace_ttl_value(&self) -> Option<i64> {
        expiry(now_seconds()?, self.finished_ttl?)
    }
}

/// The wall clock, epoch seconds.
fn now_seconds() -> Option<f64> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some(now.as_secs_f64())
}

/// `from` plus `retention`, whole epoch seconds (what DynamoDB's TTL reads).
fn expiry(from: f64, retention: Duration) -> Option<i64> {
    let at = from + retention.as_secs_f64();
    at.is_finite().then_some(at as i64)
}
