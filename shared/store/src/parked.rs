//! Parked events in rows of their own: what an execution keeps while it cannot step
//! (`SUSPENDED`, or pinned to a version this deploy does not have), off its item.
//!
//! An event parked on the item itself rewrote the whole item each time, and the item
//! grew with every event: filling a 400 KB item with 200-byte events wrote about 800,000
//! units to one key. Here each parked event is a row of its own, numbered from 1 per
//! execution by a counter (`ADD`), with a claim keyed by the event's id, so that a
//! redelivery is known without reading the others. Parking writes the row and its claim
//! in one transaction that also checks the execution's version (a `ConditionCheck`, see
//! below): a park that races a resume loses and is retried on the resumed execution, which
//! steps it. Only the first event of a run also writes the item, to set
//! [`Execution::parked_after`](stm_core::Execution::parked_after), the number after which
//! rows wait; the release steps them in number order, in bursts of a commit each, and
//! deletes each row and claim in its burst's commit. A number taken but never written (a park that lost its race or
//! died) is a hole the release steps over.
//!
//! The version check is made on the run's guard, the counter's own small item, which every
//! commit of the execution moves to the item's version while events are parked
//! ([`moves_guard`]): the check costs the counter's size, never the execution item's.
//!
//! The rows live in the `counters` table (a key-value table: harel reads only its two seq
//! items there) and carry no `ttl`, so the table's TTL never deletes an event that waits
//! for months.

use stm_core::Event;

/// One parked event and its number (from 1, per execution, in arrival order).
#[derive(Debug, Clone, PartialEq)]
pub struct ParkedEvent {
    pub number: u64,
    pub event: Event,
}

/// What [`ExecutionStore::park`](crate::ExecutionStore::park) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Parked {
    /// The event is kept in its row.
    Kept,
    /// The event was kept already (a redelivery of it): nothing was written.
    AlreadyKept,
}

/// A parked event a commit steps: its row and claim are deleted with the commit.
#[derive(Debug, Clone, PartialEq)]
pub struct Unpark {
    pub number: u64,
    pub event_id: String,
}

/// How many numbers one [`ExecutionStore::parked_events`](crate::ExecutionStore::parked_events)
/// call reads at most (DynamoDB: one `BatchGetItem`, 100 keys).
pub const PARKED_PAGE: u64 = 100;

/// Whether a commit of `exe` with `commit` moves the parked events' guard (a store that
/// keeps one: the DynamoDB store's counter): while a run of parked events is open, before
/// the commit or after it, every commit of the execution does, so that a park checked
/// against the guard fails whenever the item moved since the parker read it.
pub fn moves_guard(exe: &stm_core::Execution, commit: &crate::Commit) -> bool {
    exe.parked_after.is_some() || commit.park.is_some() || !commit.unpark.is_empty() || commit.ends_parking
}

/// The key of `id`'s counter of parked numbers.
#[cfg(any(feature = "aws", test))]
pub(crate) fn counter_key(id: &str) -> String {
    format!("parked#n#{id}")
}

/// The key of `id`'s parked event number `number` (fixed width before the id, so that no
/// two executions' keys meet).
#[cfg(any(feature = "aws", test))]
pub(crate) fn row_key(id: &str, number: u64) -> String {
    format!("parked#e#{number:020}#{id}")
}

/// The key of the claim of `event_id` parked for `id` (the id's length first, so that no
/// split of one string into id and event id meets another).
#[cfg(any(feature = "aws", test))]
pub(crate) fn claim_key(id: &str, event_id: &str) -> String {
    format!("parked#c#{}#{id}#{event_id}", id.len())
}

/// The numbers a page after `after` through `through` reads.
pub(crate) fn page(after: u64, through: u64) -> std::ops::RangeInclusive<u64> {
    let last = through.min(after.saturating_add(PARKED_PAGE));
    after.saturating_add(1)..=last
}

/// The events waiting on `exe`, oldest first, at most `limit`: those on its item (written
/// before parked rows), then its rows. What `stm show` and the console list.
pub async fn waiting_on(
    store: &dyn crate::ExecutionStore,
    exe: &stm_core::Execution,
    limit: usize,
) -> Result<Vec<Event>, crate::StoreError> {
    let mut events: Vec<Event> = exe.parked_events.iter().take(limit).cloned().collect();
    let Some(mut after) = exe.parked_after else {
        return Ok(events);
    };
    let through = store.last_park_number(&exe.id).await?;
    while events.len() < limit && after < through {
        let numbers = page(after, through);
        after = *numbers.end();
        let page = store.parked_events(&exe.id, *numbers.start() - 1, after).await?;
        events.extend(page.into_iter().map(|p| p.event));
    }
    events.truncate(limit);
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_two_executions_never_meet() {
        // an id that looks like another's row or claim
        assert_ne!(counter_key("a#e#00000000000000000001"), row_key("a", 1));
        assert_ne!(row_key("a", 1), row_key("a#", 1));
        assert_ne!(claim_key("a#b", "c"), claim_key("a", "b#c"));
        assert_eq!(page(0, 5), 1..=5);
        assert_eq!(page(7, 1_000), 8..=107);
        assert!(page(9, 9).is_empty());
    }
}
