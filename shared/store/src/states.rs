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

use stm_core::{Execution, FastMap};

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
    // the DynamoDB store writes the entry with the item; the in-memory one, `commit_into`
    #[cfg(any(feature = "aws", test))]
    pub(crate) fn at_commit(exe: &Execution, previous: Option<&StateEntry>, now: f64) -> Option<StateEntry> {
        let path = indexed_path(exe)?;
        let since = match previous {
            Some(p) if p.is_in(exe, path) => p.since,
            _ => entered_at(exe, || now),
        };
        Some(StateEntry {
            definition_id: exe.definition_id.clone(),
            path: path.to_string(),
            since,
        })
    }

    /// [`at_commit`](Self::at_commit), applied to `states` (an in-memory index by execution
    /// id) in place: nothing allocated while the machine and state stay, and the entry's
    /// own buffers reused when the state changes (the in-memory store commits one per
    /// event). `now` is read only when the step stamped no time.
    pub(crate) fn commit_into(
        states: &mut FastMap<String, StateEntry>,
        exe: &Execution,
        now: impl FnOnce() -> f64,
    ) {
        let Some(path) = indexed_path(exe) else {
            states.remove(&exe.id);
            return;
        };
        match states.get_mut(&exe.id) {
            Some(entry) if entry.is_in(exe, path) => {}
            Some(entry) => {
                entry.definition_id.clone_from(&exe.definition_id);
                entry.path.clear();
                entry.path.push_str(path);
                entry.since = entered_at(exe, now);
            }
            None => {
                let entry = StateEntry {
                    definition_id: exe.definition_id.clone(),
                    path: path.to_string(),
                    since: entered_at(exe, now),
                };
                states.insert(exe.id.clone(), entry);
            }
        }
    }

    /// Whether this entry is `exe`'s machine in `path`: its time there carries on.
    fn is_in(&self, exe: &Execution, path: &str) -> bool {
        self.definition_id == exe.definition_id && self.path == path
    }

    /// Whether this entry answers a query for `definition_id`, `paths`, `entered_by`.
    pub(crate) fn matches(&self, definition_id: &str, paths: &[String], entered_by: Option<f64>) -> bool {
        self.definition_id == definition_id
            && paths.iter().any(|p| p == &self.path)
            && entered_by.is_none_or(|by| self.since <= by)
    }
}

/// The state path `exe` is indexed under: none while DONE or CANCELLED or before it has a
/// state.
fn indexed_path(exe: &Execution) -> Option<&str> {
    if exe.status.is_finished() {
        return None;
    }
    exe.active_path.as_deref().filter(|p| !p.is_empty())
}

/// When `exe` entered the state it is committed in, having just changed state: the time the
/// step stamped, else `now`.
fn entered_at(exe: &Execution, now: impl FnOnce() -> f64) -> f64 {
    exe.updated_at.unwrap_or_else(now)
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
    fn an_index_updated_in_place_agrees_with_at_commit() {
        let mut states = FastMap::default();
        let mut previous = None;
        for e in [
            exe(Some("A"), Status::Running, 10.0),
            exe(Some("A"), Status::Running, 20.0),
            exe(Some("A.B"), Status::Running, 30.0),
            exe(Some("A.B"), Status::Suspended, 40.0),
            exe(None, Status::Running, 50.0),
            exe(Some("C"), Status::Running, 60.0),
            exe(Some("Done"), Status::Done, 70.0),
        ] {
            let expected = StateEntry::at_commit(&e, previous.as_ref(), 99.0);
            StateEntry::commit_into(&mut states, &e, || 99.0);
            assert_eq!(states.get("e-1"), expected.as_ref(), "{:?}", e.active_path);
            previous = expected;
        }
        let mut unstamped = exe(Some("D"), Status::Running, 0.0);
        unstamped.updated_at = None;
        StateEntry::commit_into(&mut states, &unstamped, || 99.0);
        assert_eq!(states.get("e-1").map(|e| e.since), Some(99.0));
    }

    #[test]
    fn finished_and_stateless_executions_are_not_indexed() {
        assert!(StateEntry::at_commit(&exe(Some("Done"), Status::Done, 1.0), None, 1.0).is_none());
        assert!(StateEntry::at_commit(&exe(Some("A"), Status::Cancelled, 1.0), None, 1.0).is_none());
        assert!(StateEntry::at_commit(&exe(None, Status::Pending, 1.0), None, 1.0).is_none());
        assert!(StateEntry::at_commit(&exe(Some("A"), Status::Failed, 1.0), None, 1.0).is_some());
    }
}
