//! The state index: which executions are in which state now, and since when.
//!
//! Every execution that is not DONE or CANCELLED is indexed by its machine and its active
//! state path, with the time it entered that state. A DONE or CANCELLED execution stays in
//! its final state for good: indexing it would make a state's count grow with history, not
//! with the business that is in it now. A FAILED execution is indexed: it waits in its state
//! for a redrive.
//!
//! The entry is written with the execution, in the same write (DynamoDB: attributes of the
//! execution item, under a sparse global secondary index; see `dynamodb/states.rs`), so it
//! can never disagree with a commit that landed. The time in a state is carried from commit
//! to commit while the state stays the same, and restarts when it changes.

use stm_core::Execution;

/// An execution in a state, as the state index holds it
/// ([`ExecutionStore::in_states`](crate::ExecutionStore::in_states)).
#[derive(Debug, Clone, PartialEq)]
pub struct InState {
    pub id: String,
    /// The state path it is in (`Fulfil.Payment.Charging`).
    pub path: String,
    /// When it entered that state (epoch seconds).
    pub since: f64,
}

/// What the index holds of one execution: its machine, its state path and since when.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StateEntry {
    pub(crate) definition_id: String,
    pub(crate) path: String,
    pub(crate) since: f64,
}

impl StateEntry {
    /// The entry `exe` gets at its commit, given the entry its stored item had
    /// (`previous`): none while DONE or CANCELLED or before it has a state; the previous
    /// `since` while machine and state are unchanged; else since the commit (the time the
    /// step stamped, `updated_at`, so a test's manual clock is the clock here too).
    pub(crate) fn at_commit(exe: &Execution, previous: Option<&StateEntry>, now: f64) -> Option<StateEntry> {
        if exe.status.is_finished() {
            return None;
        }
        let path = exe.active_path.as_deref().filter(|p| !p.is_empty())?;
        let since = match previous {
            Some(p) if p.definition_id == exe.definition_id && p.path == path => p.since,
            _ => exe.updated_at.unwrap_or(now),
        };
        Some(StateEntry {
            definition_id: exe.definition_id.clone(),
            path: path.to_string(),
            since,
        })
    }

    /// Whether this entry answers a query for `definition_id`, `paths`, `entered_by`.
    pub(crate) fn matches(&self, definition_id: &str, paths: &[String], entered_by: Option<f64>) -> bool {
        self.definition_id == definition_id
            && paths.iter().any(|p| p == &self.path)
            && entered_by.is_none_or(|by| self.since <= by)
    }
}

/// Put `found` in the order [`ExecutionStore::in_states`](crate::ExecutionStore::in_states)
/// answers in: by path as `paths` lists them, then oldest in the state first.
pub(crate) fn sort_found(found: &mut [InState], paths: &[String]) {
    let rank = |p: &str| paths.iter().position(|q| q == p);
    found.sort_by(|a, b| {
        rank(&a.path)
            .cmp(&rank(&b.path))
            .then(a.since.total_cmp(&b.since))
            .then_with(|| a.id.cmp(&b.id))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use stm_core::Status;

    fn exe(path: Option<&str>, status: Status, at: f64) -> Execution {
        let mut e = Execution::new("e-1", "Order");
        e.active_path = path.map(str::to_string);
        e.status = status;
        e.updated_at = Some(at);
        e
    }

    #[test]
    fn the_time_in_a_state_carries_until_the_state_changes() {
        let first =
            StateEntry::at_commit(&exe(Some("A"), Status::Running, 10.0), None, 99.0).expect("indexed");
        assert_eq!(first.since, 10.0);
        let same = StateEntry::at_commit(&exe(Some("A"), Status::Running, 20.0), Some(&first), 99.0);
        assert_eq!(same.map(|e| e.since), Some(10.0), "still in A since 10");
        let moved = StateEntry::at_commit(&exe(Some("A.B"), Status::Running, 30.0), Some(&first), 99.0);
        assert_eq!(moved.map(|e| e.since), Some(30.0), "entered A.B at 30");
        let suspended = StateEntry::at_commit(&exe(Some("A"), Status::Suspended, 40.0), Some(&first), 99.0);
        assert_eq!(
            suspended.map(|e| e.since),
            Some(10.0),
            "a status change is not a state change"
        );
    }

    #[test]
    fn finished_and_stateless_executions_are_not_indexed() {
        assert!(StateEntry::at_commit(&exe(Some("Done"), Status::Done, 1.0), None, 1.0).is_none());
        assert!(StateEntry::at_commit(&exe(Some("A"), Status::Cancelled, 1.0), None, 1.0).is_none());
        assert!(StateEntry::at_commit(&exe(None, Status::Pending, 1.0), None, 1.0).is_none());
        assert!(StateEntry::at_commit(&exe(Some("A"), Status::Failed, 1.0), None, 1.0).is_some());
    }
}
