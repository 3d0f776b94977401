//! The worker's log lines that people read: one per processed event, and the words for
//! counts in them.

use std::time::Duration;

use stm_core::{Event, Execution, Status};

/// `n` and the noun in its right number ("1 pending entry", "2 pending entries"): the
/// log is read by people, and "1 entries" reads as a bug.
pub(super) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub(super) fn log_unknown(target_id: &str, event: &Event) {
    tracing::info!(execution_id = %target_id, kind = %event.kind, "no such execution; acknowledged as a no-op");
}

/// What the log line of a processed event says of its step.
#[derive(Clone)]
pub(crate) struct StepLog {
    pub(super) from: Option<String>,
    pub(super) to: Option<String>,
    pub(super) status: Status,
    pub(super) outcome: Option<String>,
    pub(super) version: i64,
}

impl StepLog {
    /// The step from `from` that left `exe` as it is.
    pub(crate) fn after(from: Option<String>, exe: &Execution) -> Self {
        StepLog {
            from,
            to: exe.active_path.clone(),
            status: exe.status,
            outcome: exe.outcome.clone(),
            version: exe.version,
        }
    }

    /// One line per processed event; never the context, which may hold personal data.
    pub(crate) fn log(&self, exe: &Execution, event: &Event, broadcast_to: usize, took: Duration) {
        tracing::info!(
            execution_id = %exe.id,
            event_id = %event.id,
            kind = %event.kind,
            from = self.from.as_deref().unwrap_or("-"),
            to = self.to.as_deref().unwrap_or("-"),
            status = %self.status,
            outcome = self.outcome.as_deref().unwrap_or("-"),
            version = self.version,
            broadcast_to,
            duration_ms = took.as_secs_f64() * 1000.0,
            "event processed"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_singular_for_one_only() {
        assert_eq!(count(1, "pending entry", "pending entries"), "1 pending entry");
        assert_eq!(count(2, "pending entry", "pending entries"), "2 pending entries");
        assert_eq!(count(0, "region", "regions"), "0 regions");
    }
}
