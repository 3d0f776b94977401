//! A fan-out's join kept as counts instead of one `children` entry per instance
//! ([`FanOutJoin::Counted`], not harel's layout).
//!
//! harel records every instance of a fan-out in its parent's `children`, about 130 bytes
//! each, and rewrites them all with each instance's `Finished`. A parent item therefore
//! holds at most about 3,000 instances (DynamoDB's 400 KB), and a wide join rewrites one
//! growing item per report. A counted join keeps, per fan-out site, one bit per instance
//! (which have reported, so a report delivered twice counts once), a count per outcome,
//! and whole only the reports worth reading: those that did not succeed or carried data,
//! within [`LISTED_BUDGET`] bytes. 10,000 instances take about 2.6 KB of the parent's
//! item; every instance's own outcome and context stay on its own item.

use indexmap::IndexMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ids;
use crate::{Map, Value};

/// How a parent keeps the join of its fan-outs (`invoke ... for each`). Orthogonal
/// regions and single invokes are always kept as harel keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum FanOutJoin {
    /// harel's: one `children` entry per instance, in the parent's item.
    #[default]
    Children,
    /// A [`CountedJoin`] per fan-out site: any width, a parent item of a few KB.
    Counted,
}

impl FanOutJoin {
    /// The spelling in the item and in the deployment's setting.
    pub fn as_str(self) -> &'static str {
        match self {
            FanOutJoin::Children => "children",
            FanOutJoin::Counted => "counted",
        }
    }

    pub(crate) fn is_children(&self) -> bool {
        *self == FanOutJoin::Children
    }
}

impl std::fmt::Display for FanOutJoin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for FanOutJoin {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "children" => Ok(FanOutJoin::Children),
            "counted" => Ok(FanOutJoin::Counted),
            other => Err(format!(
                "unknown fan-out join {other:?}: expected children or counted"
            )),
        }
    }
}

/// Bytes of serialized reports a counted join keeps whole. The parent's item is
/// rewritten with every burst of reports, so what it keeps is paid in write units on
/// each: 4 KB keeps a wide join's writes to a few units.
pub const LISTED_BUDGET: usize = 4_096;

/// The outcome a report without one is counted under.
pub const NO_OUTCOME: &str = "none";

/// One fan-out site's join (see the module).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountedJoin {
    /// The fan-out state's path.
    pub site: String,
    /// The instances' ids less their index, `{parent}:{site}:{seq}:`: instance `i` is
    /// `ids::child_id(prefix + i)`. Kept rather than derived, so a migration that
    /// renames the site still finds them.
    pub prefix: String,
    /// The `region_results` key of instance `i` is `{key}:{i}` (harel's instance key).
    pub key: String,
    pub total: u64,
    /// Which instances have reported, one bit each, instance 0 the lowest bit of the
    /// first byte; hex in the item.
    #[serde(serialize_with = "to_hex", deserialize_with = "from_hex")]
    pub reported: Vec<u8>,
    /// Reports per outcome, in the order first seen ([`NO_OUTCOME`] for none).
    pub outcomes: IndexMap<String, u64>,
    /// The reports kept whole, by instance key: `{outcome, ...carried}`, as harel's
    /// `region_results` entries.
    pub listed: Map,
    /// Reports that did not succeed or carried data but did not fit [`LISTED_BUDGET`].
    pub unlisted: u64,
    /// The serialized size of `listed`, kept so a report is not paid for by
    /// re-serializing all the others.
    pub listed_bytes: u64,
}

/// Which instance of which counted join an execution is: the fan-out put it in the
/// instance's spawn (`__join__` in its context), and the instance's `Finished` carries it,
/// so its report can be recorded without its parent (the runtime's join rows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinSlot {
    /// The join's [`CountedJoin::prefix`].
    pub prefix: String,
    pub index: u64,
    pub total: u64,
}

/// The context and event key a [`JoinSlot`] travels under.
pub const JOIN_SLOT_KEY: &str = "__join__";

impl JoinSlot {
    /// As it travels: its JSON in one string. A fan-out's spawn holds one per instance,
    /// copied through the commit and the flush, and a string is one allocation where an
    /// object is a map of three.
    pub fn to_value(&self) -> Value {
        serde_json::to_string(self).map_or(Value::Null, Value::from)
    }

    /// The slot [`to_value`](Self::to_value) wrote, if `value` is one.
    pub fn from_value(value: &Value) -> Option<JoinSlot> {
        serde_json::from_str(value.as_str()?).ok()
    }
}

/// The `Finished` data key of a whole join's tally, recorded elsewhere and delivered at
/// once ([`CountedJoin::complete`]).
pub const JOINED_KEY: &str = "__joined__";

/// A counted join every instance of which has reported: the outcomes counted, and the
/// instances that did not succeed with theirs, lowest first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct JoinTally {
    pub outcomes: IndexMap<String, u64>,
    /// `[index, outcome]` pairs.
    pub others: Vec<(u64, String)>,
}

/// A whole join's tally as its parent's `Finished` carries it under [`JOINED_KEY`]: the
/// runtime writes it, the engine reads it ([`CountedJoin::complete`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Joined {
    /// The join's [`CountedJoin::prefix`].
    pub prefix: String,
    #[serde(flatten)]
    pub tally: JoinTally,
}

/// A report as a join records it.
#[derive(Debug, Clone, Copy)]
pub struct Report<'a> {
    pub outcome: Option<&'a str>,
    pub result: &'a Map,
}

impl CountedJoin {
    pub fn new(site: String, prefix: String, key: String, total: u64) -> Self {
        CountedJoin {
            site,
            prefix,
            key,
            total,
            reported: vec![0; total.div_ceil(8) as usize],
            outcomes: IndexMap::new(),
            listed: Map::new(),
            unlisted: 0,
            listed_bytes: 0,
        }
    }

    /// Instance `index`'s execution id.
    pub fn child_id(&self, index: u64) -> String {
        ids::child_id(format!("{}{index}", self.prefix))
    }

    /// Reports recorded so far.
    pub fn reports(&self) -> u64 {
        self.outcomes.values().sum()
    }

    pub fn is_complete(&self) -> bool {
        self.reports() >= self.total
    }

    pub fn has_reported(&self, index: u64) -> bool {
        self.reported
            .get((index / 8) as usize)
            .is_some_and(|byte| byte & (1 << (index % 8)) != 0)
    }

    /// The instances that have not reported, lowest first.
    pub fn unreported(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.total).filter(|i| !self.has_reported(*i))
    }

    /// Which instance `child_id` is, if it is one of this join's. A bounded id (see
    /// `ids`: only ids past SQS's 128 characters) has lost its index and is found by
    /// computing the instances' ids, which only such a wide id's join pays for.
    pub fn index_of(&self, child_id: &str) -> Option<u64> {
        if let Some(rest) = child_id.strip_prefix(&self.prefix) {
            if let Ok(i) = rest.parse::<u64>() {
                if i < self.total && rest == i.to_string() {
                    return Some(i);
                }
            }
        }
        if !child_id.contains('~') {
            return None;
        }
        (0..self.total).find(|i| self.child_id(*i) == child_id)
    }

    /// Record instance `index`'s report; a second report of the same instance changes
    /// nothing (returns false).
    pub fn record(&mut self, index: u64, report: Report<'_>) -> bool {
        if index >= self.total || self.has_reported(index) {
            return false;
        }
        self.reported[(index / 8) as usize] |= 1 << (index % 8);
        let outcome = report.outcome.unwrap_or(NO_OUTCOME);
        *self.outcomes.entry(outcome.to_string()).or_insert(0) += 1;
        if report.outcome == Some("success") && report.result.is_empty() {
            return true; // counted: its entry would say only what the count says
        }
        self.list(index, report.outcome, report.result);
        true
    }

    /// Every instance reported, as `outcomes` counts them; `others` are the instances
    /// that did not succeed, with their outcome (listed within the budget). What a join
    /// recorded outside its parent comes back as. Returns false (and changes nothing) if
    /// the join had completed already.
    pub fn complete(&mut self, outcomes: IndexMap<String, u64>, others: &[(u64, String)]) -> bool {
        if self.is_complete() {
            return false;
        }
        for index in 0..self.total {
            self.reported[(index / 8) as usize] |= 1 << (index % 8);
        }
        self.outcomes = outcomes;
        self.listed = Map::new();
        self.listed_bytes = 0;
        self.unlisted = 0;
        let empty = Map::new();
        for (index, outcome) in others {
            self.list(*index, Some(outcome), &empty);
        }
        true
    }

    /// Keep one report whole if it fits [`LISTED_BUDGET`], else count it unlisted.
    fn list(&mut self, index: u64, outcome: Option<&str>, result: &Map) {
        let mut entry = Map::new();
        entry.insert("outcome".into(), outcome.map_or(Value::Null, Value::from));
        for (k, v) in result {
            entry.insert(k.clone(), v.clone());
        }
        let key = format!("{}:{index}", self.key);
        // the entry's key, its object and the separators around them
        let size = serde_json::to_string(&entry).map_or(usize::MAX, |s| s.len()) + key.len() + 4;
        // the object's braces
        if self.listed_bytes as usize + size + 2 <= LISTED_BUDGET {
            self.listed_bytes += size as u64;
            self.listed.insert(key, Value::Object(entry));
        } else {
            self.unlisted += 1;
        }
    }

    /// The site's one `region_results` entry: `outcome` is `"success"` when every
    /// instance succeeded, else `"failed"` (what harel's per-instance entries add up to
    /// for `join all`); `outcomes` counts them (`join any` reads it, see the runtime's
    /// `join_success`); `listed` holds the reports kept whole, by instance key.
    pub fn summary(&self) -> Value {
        let succeeded = self.outcomes.get("success").copied().unwrap_or(0);
        let all_succeeded = succeeded == self.total && self.total > 0;
        let mut counts = Map::new();
        for (outcome, n) in &self.outcomes {
            counts.insert(outcome.clone(), Value::from(*n));
        }
        let mut summary = Map::new();
        summary.insert(
            "outcome".into(),
            Value::from(if all_succeeded { "success" } else { "failed" }),
        );
        summary.insert("total".into(), Value::from(self.total));
        summary.insert("outcomes".into(), Value::Object(counts));
        summary.insert("listed".into(), Value::Object(self.listed.clone()));
        summary.insert("unlisted".into(), Value::from(self.unlisted));
        Value::Object(summary)
    }
}

fn to_hex<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    s.serialize_str(&out)
}

fn from_hex<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let text = String::deserialize(d)?;
    if text.len() % 2 != 0 {
        return Err(serde::de::Error::custom(
            "a counted join's bitmap has an odd number of digits",
        ));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&text[i..i + 2], 16)
                .map_err(|_| serde::de::Error::custom("a counted join's bitmap is not hex"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn success() -> Report<'static> {
        static EMPTY: std::sync::OnceLock<Map> = std::sync::OnceLock::new();
        Report {
            outcome: Some("success"),
            result: EMPTY.get_or_init(Map::new),
        }
    }

    #[test]
    fn each_instance_counts_once_and_the_join_completes_at_the_last() {
        let mut join = CountedJoin::new("Fan".into(), "p:Fan:0:".into(), "Fan".into(), 10);
        for i in (0..10).rev() {
            assert!(!join.is_complete());
            assert!(join.record(i, success()));
            assert!(!join.record(i, success()), "instance {i} counted twice");
        }
        assert!(join.is_complete());
        assert_eq!(join.outcomes.get("success"), Some(&10));
        assert!(!join.record(10, success()), "an index past the fan-out");
        assert_eq!(join.unreported().count(), 0);
    }

    #[test]
    fn instances_are_found_by_id_bounded_or_not() {
        let join = CountedJoin::new("Fan".into(), "p:Fan:2:".into(), "Fan".into(), 12);
        assert_eq!(join.index_of("p:Fan:2:11"), Some(11));
        assert_eq!(join.index_of("p:Fan:2:12"), None);
        assert_eq!(join.index_of("p:Fan:2:011"), None);
        assert_eq!(join.index_of("p:Fan:1:3"), None);
        let long = format!("{}:Fan:0:", "x".repeat(130));
        let wide = CountedJoin::new("Fan".into(), long, "Fan".into(), 5);
        let bounded = wide.child_id(3);
        assert!(bounded.contains('~'), "{bounded}");
        assert_eq!(wide.index_of(&bounded), Some(3));
    }

    #[test]
    fn reports_worth_reading_are_listed_within_the_budget_and_the_rest_counted() {
        let mut join = CountedJoin::new("Fan".into(), "p:Fan:0:".into(), "Fan".into(), 400);
        let mut carried = Map::new();
        carried.insert("note".into(), Value::from("x".repeat(100)));
        for i in 0..400 {
            let outcome = if i % 2 == 0 { "failed" } else { "success" };
            join.record(
                i,
                Report {
                    outcome: Some(outcome),
                    result: &carried,
                },
            );
        }
        let listed_len = serde_json::to_string(&join.listed).expect("JSON").len();
        assert!(listed_len <= LISTED_BUDGET, "{listed_len}");
        assert_eq!(join.listed.len() as u64 + join.unlisted, 400);
        assert!(join.listed.contains_key("Fan:0"));
        assert_eq!(join.outcomes.get("failed"), Some(&200));
    }

    #[test]
    fn the_bitmap_reads_back_from_its_hex() {
        let mut join = CountedJoin::new("Fan".into(), "p:Fan:0:".into(), "Fan".into(), 21);
        for i in [0, 7, 8, 20] {
            join.record(i, success());
        }
        let text = serde_json::to_string(&join).expect("JSON");
        assert!(text.contains("\"reported\":\"810110\""), "{text}");
        let back: CountedJoin = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back, join);
        assert_eq!(back.unreported().count(), 17);
    }
}
