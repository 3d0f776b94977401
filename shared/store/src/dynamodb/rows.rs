//! The seqs of the outbox and spawn rows, given without a shared counter.
//!
//! harel allocates seqs from one `counters` item with `ADD n :k`: every emitting or spawning
//! commit of the whole deployment writes that item, which caps the deployment near
//! DynamoDB's 1,000 write units per second per key. We derive a commit's block instead:
//!
//! - the block's first seq is the wall clock in milliseconds shifted left by
//!   [`RANDOM_BITS`], plus random low bits, so concurrent commits of different executions
//!   rarely meet;
//! - but never below the execution's own last seq plus one, read from the `rows` attribute
//!   of its item (under the commit's CAS), so an execution's rows are in commit order
//!   whatever the clocks of the hosts that commit them;
//! - each row put is guarded by `attribute_not_exists(seq)`: two commits that do meet
//!   cannot overwrite each other; the second is cancelled and retried with a new block.
//!
//! A commit's spawn rows come first in its block, its outbox rows after them: a relay that
//! forwards the lowest seqs first never forwards an event without the spawn intent of the
//! same commit (the region it may go to). Seqs are
//! then about 2^60: harel reads them as integers and sorts them as it sorts its own, which
//! stay far below (its counter would need 2^60 rows to reach them).

use std::collections::HashMap;

use super::item::{malformed, Item};
use crate::{Malformation, StoreError};
use aws_sdk_dynamodb::types::AttributeValue;

/// The extra execution-item attribute holding the block of the last commit that wrote
/// rows: `[first seq, outbox rows, spawn rows]` (a list of three numbers; the spawn rows
/// take the block's first seqs).
pub(super) const ROWS_ATTRIBUTE: &str = "rows";

/// The random low bits of a block's first seq: a millisecond holds 2^20 seqs, so two
/// blocks of a few rows given in the same millisecond overlap with odds of a few in a
/// million (and then the condition sends the second around again).
pub(super) const RANDOM_BITS: u32 = 20;

/// An outbox or spawns row's size in bytes (N), written with it: what the relay's scan of
/// seqs projects, so that it sizes its reads of rows by bytes before reading them. harel's
/// rows have none (the relay then takes the largest an item can be).
pub(super) const ROW_BYTES_ATTRIBUTE: &str = "row_bytes";

/// An outbox or spawns row's, or a timer item's, trace context
/// ([`crate::Commit::trace_context`]): a W3C `traceparent`, written when the row has room
/// for it under the item limit (harel's rows and timers, and a row at the limit, have
/// none).
pub(super) const TRACE_CONTEXT_ATTRIBUTE: &str = "traceparent";

/// What [`TRACE_CONTEXT_ATTRIBUTE`] adds to a row: its name and a `traceparent`'s 55
/// characters.
pub(super) const TRACE_CONTEXT_BYTES: usize = TRACE_CONTEXT_ATTRIBUTE.len() + 55;

/// `item` with [`ROW_BYTES_ATTRIBUTE`] added: its size, the attribute's own included.
pub(super) fn with_row_bytes(mut item: super::item::Item) -> super::item::Item {
    // the attribute's name and a number of up to 7 digits (a row is under 400 KB)
    let own = ROW_BYTES_ATTRIBUTE.len() + 7;
    let bytes = super::item::item_size(&item) + own;
    item.insert(ROW_BYTES_ATTRIBUTE.to_string(), super::item::n_i64(bytes as i64));
    item
}

/// One commit's rows: a contiguous block of seqs, the spawn rows first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Rows {
    pub(super) first: i64,
    pub(super) outbox: i64,
    pub(super) spawns: i64,
}

impl Rows {
    /// The block whose attribute is the largest (for the item size bound).
    pub(super) const LARGEST: Rows = Rows {
        first: i64::MAX / 2,
        outbox: 100,
        spawns: 100,
    };

    /// The last seq of the block (`first - 1` for an empty one).
    pub(super) fn last(&self) -> i64 {
        self.first + self.outbox + self.spawns - 1
    }

    pub(super) fn spawn_seqs(&self) -> impl Iterator<Item = i64> {
        self.first..self.first + self.spawns
    }

    pub(super) fn outbox_seqs(&self) -> impl Iterator<Item = i64> {
        let start = self.first + self.spawns;
        start..start + self.outbox
    }

    pub(super) fn to_attribute(self) -> AttributeValue {
        AttributeValue::L(
            [self.first, self.outbox, self.spawns]
                .iter()
                .map(|n| AttributeValue::N(n.to_string()))
                .collect(),
        )
    }

    /// The block recorded on execution item `item` of `id`, if any.
    pub(super) fn of_item(item: &Item, id: &str) -> Result<Option<Rows>, StoreError> {
        let Some(value) = item.get(ROWS_ATTRIBUTE) else {
            return Ok(None);
        };
        let bad = || malformed(format!("execution {id}"), ROWS_ATTRIBUTE, Malformation::NotBlock);
        let AttributeValue::L(list) = value else {
            return Err(bad());
        };
        let numbers: Vec<i64> = list
            .iter()
            .map(|v| match v {
                AttributeValue::N(n) => n.parse::<i64>().ok(),
                _ => None,
            })
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        match numbers[..] {
            [first, outbox, spawns] if first > 0 && outbox >= 0 && spawns >= 0 => Ok(Some(Rows {
                first,
                outbox,
                spawns,
            })),
            _ => Err(bad()),
        }
    }

    /// The block for a commit of `outbox` and `spawns` rows, at wall-clock `now_millis`
    /// with `random` low bits, starting at `floor` at the least (the execution's last seq
    /// plus one).
    pub(super) fn next(
        floor: Option<i64>,
        outbox: usize,
        spawns: usize,
        now_millis: i64,
        random: u64,
    ) -> Rows {
        let clock = (now_millis << RANDOM_BITS) | (random & RANDOM_MASK) as i64;
        Rows {
            first: floor.map_or(clock, |floor| clock.max(floor)),
            outbox: outbox as i64,
            spawns: spawns as i64,
        }
    }

    /// The floor of the block that replaces this one after a row of it met another
    /// commit's: past it by a random stride, so two colliding commits part ways.
    pub(super) fn floor_after_collision(&self, random: u64) -> i64 {
        self.last() + 1 + (random & RANDOM_MASK) as i64
    }

    /// The floor of the next block after this one.
    pub(super) fn floor(previous: Option<Rows>) -> Option<i64> {
        previous.map(|p| p.last() + 1)
    }
}

const RANDOM_MASK: u64 = (1 << RANDOM_BITS) - 1;

/// The wall clock in epoch milliseconds (0 before 1970: the execution's own order still
/// holds through `previous`).
pub(super) fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The keys `{seq: N}` of `seqs`.
pub(super) fn seq_keys(seqs: impl Iterator<Item = i64>) -> Vec<HashMap<String, AttributeValue>> {
    seqs.map(|seq| HashMap::from([("seq".to_string(), AttributeValue::N(seq.to_string()))]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_follows_the_executions_last_whatever_the_clock() {
        let previous = Rows {
            first: (2_000 << RANDOM_BITS) + 7,
            outbox: 2,
            spawns: 1,
        };
        // a host whose clock is behind the one that wrote `previous`
        let next = Rows::next(Rows::floor(Some(previous)), 1, 0, 1_000, 5);
        assert_eq!(next.first, previous.last() + 1);
        // the clock ahead: the clock wins, and the block stays above the last
        let later = Rows::next(Rows::floor(Some(previous)), 1, 0, 3_000, 5);
        assert_eq!(later.first, (3_000 << RANDOM_BITS) | 5);
        assert!(later.first > previous.last());
        // no previous block: the clock alone, random bits masked
        let fresh = Rows::next(None, 2, 3, 1_000, u64::MAX);
        assert_eq!(fresh.first, (1_000 << RANDOM_BITS) | ((1 << RANDOM_BITS) - 1));
        assert_eq!(
            fresh.spawn_seqs().collect::<Vec<_>>(),
            vec![fresh.first, fresh.first + 1, fresh.first + 2]
        );
        assert_eq!(
            fresh.outbox_seqs().collect::<Vec<_>>(),
            vec![fresh.first + 3, fresh.first + 4]
        );
        assert_eq!(fresh.last(), fresh.first + 4);
        // after a collision: past the failed block, whatever the clock
        let floor = next.floor_after_collision(9);
        assert_eq!(floor, next.last() + 10);
        assert_eq!(Rows::next(Some(floor), 1, 0, 1_000, 5).first, floor);
    }

    #[test]
    fn todays_seqs_fit_in_i64_for_centuries() {
        // the year 2200 in milliseconds, shifted, with every random bit set
        let year_2200: i64 = 7_258_118_400_000;
        let rows = Rows::next(None, 99, 0, year_2200, u64::MAX);
        assert!(rows.last() > 0 && rows.last() < i64::MAX);
    }

    #[test]
    fn the_attribute_round_trips_and_bad_ones_are_corrupt() {
        let rows = Rows {
            first: 1 << 60,
            outbox: 3,
            spawns: 0,
        };
        let item = HashMap::from([(ROWS_ATTRIBUTE.to_string(), rows.to_attribute())]);
        assert_eq!(Rows::of_item(&item, "e").ok(), Some(Some(rows)));
        assert_eq!(Rows::of_item(&HashMap::new(), "e").ok(), Some(None));
        let bad = HashMap::from([(ROWS_ATTRIBUTE.to_string(), AttributeValue::S("x".into()))]);
        let err = Rows::of_item(&bad, "e")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("`rows` is not a list of three whole numbers"),
            "{err}"
        );
        let short = HashMap::from([(
            ROWS_ATTRIBUTE.to_string(),
            AttributeValue::L(vec![AttributeValue::N("1".into())]),
        )]);
        assert!(Rows::of_item(&short, "e").is_err());
    }
}
