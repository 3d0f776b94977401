//! The processed window of [`DedupeMarks::OnItem`](super::DedupeMarks::OnItem): the last
//! [`RECENT_MARKS`] event ids an execution processed, kept on its item as one binary
//! attribute ([`RECENT_ATTRIBUTE`](super::RECENT_ATTRIBUTE)).
//!
//! Wire form: one flags byte, then one 8-byte prefix of each id's SHA-256, oldest first
//! (81 bytes at most; DynamoDB counts a binary attribute by its length in bytes). Flag bit
//! 0, *table*: the window was started on an item that had none (written by the `Table`
//! layout or by harel), so events older than it may be marked only in the `processed`
//! table; a load that does not find an event in the window asks the table. The flag is
//! dropped once the window holds [`RECENT_MARKS`] events processed since: anything the
//! table alone knows is then older than the window, the same guarantee as any `OnItem`
//! execution.
//!
//! Eight bytes of SHA-256 make two distinct ids of one execution's last ten collide with
//! a probability near 45 / 2^64: never, for practical purposes.

use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_types::Blob;
use sha2::{Digest, Sha256};

use super::item::{malformed, Item};
use super::{RECENT_ATTRIBUTE, RECENT_MARKS};
use crate::{Malformation, StoreError};

const FLAG_TABLE: u8 = 1;
const HASH_BYTES: usize = 8;

/// The window, as read from an item or as a commit leaves it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Recent {
    /// Older marks may be in the `processed` table (see the module docs).
    pub(crate) table: bool,
    /// Oldest first, at most [`RECENT_MARKS`].
    hashes: Vec<[u8; HASH_BYTES]>,
}

fn hash(event_id: &str) -> [u8; HASH_BYTES] {
    let digest = Sha256::digest(event_id.as_bytes());
    let mut out = [0u8; HASH_BYTES];
    out.copy_from_slice(&digest[..HASH_BYTES]);
    out
}

impl Recent {
    /// What a commit continues from an item without a window: a fresh one that still
    /// defers to the table.
    pub(crate) fn carried_over() -> Self {
        Recent {
            table: true,
            hashes: Vec::new(),
        }
    }

    /// The window of `item`: `Ok(None)` when it has none (the `Table` layout or harel
    /// wrote it).
    pub(crate) fn of_item(item: &Item, id: &str) -> Result<Option<Self>, StoreError> {
        let Some(value) = item.get(RECENT_ATTRIBUTE) else {
            return Ok(None);
        };
        let bad = |problem| malformed(format!("execution {id}"), RECENT_ATTRIBUTE, problem);
        let AttributeValue::B(blob) = value else {
            return Err(bad(Malformation::NotBinary));
        };
        Self::decode(blob.as_ref())
            .map(Some)
            .ok_or_else(|| bad(Malformation::NotWindow))
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let (&flags, rest) = bytes.split_first()?;
        if rest.len() % HASH_BYTES != 0 {
            return None;
        }
        let mut hashes: Vec<[u8; HASH_BYTES]> = rest
            .chunks_exact(HASH_BYTES)
            .filter_map(|c| c.try_into().ok())
            .collect();
        let excess = hashes.len().saturating_sub(RECENT_MARKS);
        hashes.drain(..excess);
        Some(Recent {
            table: flags & FLAG_TABLE != 0,
            hashes,
        })
    }

    /// The attribute value.
    pub(crate) fn to_attribute(&self) -> AttributeValue {
        let mut bytes = Vec::with_capacity(1 + HASH_BYTES * self.hashes.len());
        bytes.push(if self.table { FLAG_TABLE } else { 0 });
        for h in &self.hashes {
            bytes.extend_from_slice(h);
        }
        AttributeValue::B(Blob::new(bytes))
    }

    /// The largest attribute value (for the size checks).
    pub(crate) fn max_attribute_bytes() -> usize {
        1 + HASH_BYTES * RECENT_MARKS
    }

    pub(crate) fn contains(&self, event_id: &str) -> bool {
        let h = hash(event_id);
        self.hashes.contains(&h)
    }

    /// The window after processing `event_ids` (in order): the last [`RECENT_MARKS`] kept;
    /// the table flag dropped once the window is full of events processed since it was
    /// set (a carried-over window only ever holds those).
    pub(crate) fn with(&self, event_ids: &[String]) -> Self {
        let mut hashes = self.hashes.clone();
        hashes.extend(event_ids.iter().map(|e| hash(e)));
        let excess = hashes.len().saturating_sub(RECENT_MARKS);
        hashes.drain(..excess);
        Recent {
            table: self.table && hashes.len() < RECENT_MARKS,
            hashes,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.hashes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(range: std::ops::Range<usize>) -> Vec<String> {
        range.map(|i| format!("ev-{i}")).collect()
    }

    #[test]
    fn keeps_the_last_ten_newest_last() {
        let r = Recent::default().with(&ids(0..4)).with(&ids(4..12));
        assert_eq!(r.len(), RECENT_MARKS);
        assert!(
            !r.contains("ev-0") && !r.contains("ev-1"),
            "the two oldest are gone"
        );
        assert!((2..12).all(|i| r.contains(&format!("ev-{i}"))));
        assert!(!r.table);
    }

    #[test]
    fn round_trips_through_the_attribute() {
        for r in [
            Recent::default(),
            Recent::default().with(&ids(0..3)),
            Recent::carried_over().with(&ids(0..15)),
            Recent::carried_over().with(&ids(0..2)),
        ] {
            let AttributeValue::B(blob) = r.to_attribute() else {
                panic!("not binary")
            };
            assert!(blob.as_ref().len() <= Recent::max_attribute_bytes());
            assert_eq!(Recent::decode(blob.as_ref()), Some(r));
        }
        assert_eq!(Recent::decode(&[]), None);
        assert_eq!(Recent::decode(&[0, 1, 2]), None);
    }

    #[test]
    fn the_table_flag_lasts_until_the_window_is_full() {
        let mut r = Recent::carried_over();
        for i in 0..RECENT_MARKS {
            assert!(r.table, "after {i} events the table may still know older ones");
            r = r.with(&[format!("ev-{i}")]);
        }
        assert!(!r.table, "ten events since: the table knows only older ones");
        assert!(!Recent::default().with(&ids(0..1)).table);
    }
}
