//! Reading what is due a page at a time: the cursor a sweep carries between its pages.
//!
//! A sweep that read every due timer before firing one held them all in memory (10^6
//! timers due at once are ~150 MB in a 128 MB function) and fired nothing before its
//! deadline. With a cursor a sweep takes the earliest `limit` timers, fires them, and
//! takes the next `limit` after them: memory is bounded by the page, and a sweep cut by
//! its deadline has fired the earliest ones.

use std::cmp::Ordering;

use crate::DueTimer;

/// Where a sweep has read the due timers to ([`ExecutionStore::due_page`]): start a sweep
/// with [`DueCursor::default`] and hand the same cursor to each of its pages.
///
/// [`ExecutionStore::due_page`]: crate::ExecutionStore::due_page
#[derive(Debug, Default)]
pub struct DueCursor {
    pub(crate) state: CursorState,
}

#[derive(Debug, Default)]
pub(crate) enum CursorState {
    /// Nothing read yet.
    #[default]
    Start,
    /// A store that lists every due timer in due order: the last one given.
    After(DueTimer),
    /// DynamoDB's: a position in each shard of the due index, or in the full scan.
    #[cfg(feature = "aws")]
    DynamoDb(Box<crate::dynamodb::due::Positions>),
}

/// The order a sweep fires in: `fire_at`, then the execution, then the path (a total
/// order, so a cursor can say which timers it has given).
pub(crate) fn due_order(a: &DueTimer, b: &DueTimer) -> Ordering {
    a.fire_at
        .total_cmp(&b.fire_at)
        .then_with(|| a.execution_id.cmp(&b.execution_id))
        .then_with(|| a.path.cmp(&b.path))
}

impl DueCursor {
    /// Whether no page has been read with it yet.
    pub fn is_start(&self) -> bool {
        matches!(self.state, CursorState::Start)
    }

    /// The last timer this cursor gave, for a store that reads its own due order from
    /// there.
    pub(crate) fn last_given(&self) -> Option<&DueTimer> {
        match &self.state {
            CursorState::After(last) => Some(last),
            _ => None,
        }
    }

    /// Remember `last` as the last timer given (nothing when a page was empty).
    pub(crate) fn gave(&mut self, last: Option<&DueTimer>) {
        if let Some(last) = last {
            self.state = CursorState::After(last.clone());
        }
    }

    /// The next page from `due`, every due timer a store (or a view of one) lists, in any
    /// order: at most `limit` of them, in due order, after the last one this cursor gave.
    /// For stores that hold what is due in memory; DynamoDB's reads its index by pages.
    ///
    /// ```
    /// use stm_store::{DueCursor, DueTimer};
    /// let due = |id: &str, fire_at: f64| DueTimer { execution_id: id.into(), path: "A".into(), fire_at };
    /// let listed = vec![due("b", 2.0), due("a", 3.0), due("c", 1.0)];
    /// let mut cursor = DueCursor::default();
    /// let first = cursor.page_of(listed.clone(), 2);
    /// assert_eq!(first, vec![due("c", 1.0), due("b", 2.0)]);
    /// assert_eq!(cursor.page_of(listed.clone(), 2), vec![due("a", 3.0)]);
    /// assert!(cursor.page_of(listed, 2).is_empty());
    /// ```
    pub fn page_of(&mut self, due: impl IntoIterator<Item = DueTimer>, limit: usize) -> Vec<DueTimer> {
        let after = match &self.state {
            CursorState::After(last) => Some(last),
            _ => None,
        };
        let mut page: Vec<DueTimer> = due
            .into_iter()
            .filter(|t| after.is_none_or(|last| due_order(t, last) == Ordering::Greater))
            .collect();
        page.sort_by(due_order);
        page.truncate(limit.max(1));
        if let Some(last) = page.last() {
            self.state = CursorState::After(last.clone());
        }
        page
    }
}
