//! A counted join's rows: its instances' reports recorded outside their parent
//! ([`ExecutionStore::report_to_join`](crate::ExecutionStore::report_to_join)).
//!
//! A wide fan-out's parent holds its whole collection in its context (10,000 recipients
//! are about 70 KB), and a report that rewrote it, even ten to a commit, would spend that
//! one key's write units many times over. So each instance's end is added to a row of
//! its shard of [`SHARD`] instances (a set: a report recorded twice is one element), the
//! report that fills a shard adds the shard to the join's root row, and the one that
//! fills the root reads the shards' rows back into one [`JoinTally`], which goes to the
//! parent as one event. Every write is to a small row of its own, and each row takes at
//! most [`SHARD`] writes.

pub use stm_core::execution::counted_join::JoinTally;
use stm_core::execution::counted_join::NO_OUTCOME;
use stm_core::JoinSlot;

/// Instances a shard row records.
pub const SHARD: u64 = 100;

/// One instance's end, for its join's rows.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinReport {
    pub slot: JoinSlot,
    /// Its outcome (`None`: it ended without one).
    pub outcome: Option<String>,
}

pub(crate) fn shard_of(index: u64) -> u64 {
    index / SHARD
}

pub(crate) fn shards(total: u64) -> u64 {
    total.div_ceil(SHARD)
}

/// How many instances shard `shard` of a join of `total` records.
pub(crate) fn shard_size(total: u64, shard: u64) -> u64 {
    (total - shard * SHARD).min(SHARD)
}

/// The row of a join's shard (`counters` in DynamoDB: a key-value table of our own
/// beside harel's two seq items).
pub(crate) fn shard_key(prefix: &str, shard: u64) -> String {
    format!("join:{prefix}#{shard}")
}

/// The row of a join's filled shards.
pub(crate) fn root_key(prefix: &str) -> String {
    format!("join:{prefix}")
}

/// A report as a shard row's set element: `index=outcome`.
pub(crate) fn element(report: &JoinReport) -> String {
    format!(
        "{}={}",
        report.slot.index,
        report.outcome.as_deref().unwrap_or(NO_OUTCOME)
    )
}

/// The tally of every shard's elements.
pub(crate) fn tally<'a>(elements: impl IntoIterator<Item = &'a str>) -> JoinTally {
    let mut tally = JoinTally::default();
    for element in elements {
        let Some((index, outcome)) = element.split_once('=') else {
            continue;
        };
        *tally.outcomes.entry(outcome.to_string()).or_insert(0) += 1;
        if outcome != "success" {
            if let Ok(index) = index.parse() {
                tally.others.push((index, outcome.to_string()));
            }
        }
    }
    tally.others.sort();
    tally
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_instance_once() {
        for total in [1, 99, 100, 101, 250, 10_000] {
            let sizes: u64 = (0..shards(total)).map(|s| shard_size(total, s)).sum();
            assert_eq!(sizes, total, "{total}");
            assert_eq!(shard_of(total - 1), shards(total) - 1);
        }
    }

    #[test]
    fn a_tally_counts_outcomes_and_lists_the_others() {
        let t = tally(["3=failed", "0=success", "1=none", "2=success"]);
        assert_eq!(t.outcomes.get("success"), Some(&2));
        assert_eq!(t.others, vec![(1, "none".to_string()), (3, "failed".to_string())]);
    }
}
