//! The [`Execution`] and [`Event`] records, serialized exactly as harel 0.9.0's pydantic
//! models (`harel.engine.execution.Execution`, `harel.spec.states.Event`): same field
//! names, same order, same enum spellings, `null` for unset optionals.
//!
//! One deliberate difference: pydantic drops fields it does not know, we keep them
//! (`extra`) and write them back after the known ones, so a record written by a newer
//! harel survives a read-modify-write by us untouched.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::Map;

pub mod counted_join;
pub(crate) mod keep_unknown;
pub use counted_join::{CountedJoin, FanOutJoin, JoinSlot};
use keep_unknown::deserialize_keeping_unknown;

/// Lifecycle status of an execution (harel's `Status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    #[default]
    Pending,
    Running,
    Done,
    Cancelled,
    /// Paused by the control plane; resume puts it back to `Running`.
    Suspended,
    /// A cooperative cancel is in flight: only the injected `Cancel` is processed.
    Cancelling,
    /// Aborted on an action error nothing in the model handled; `error` says why.
    Failed,
}

impl Status {
    /// Every status, in lifecycle order (for messages that list them).
    pub const ALL: [Status; 7] = [
        Status::Pending,
        Status::Running,
        Status::Suspended,
        Status::Cancelling,
        Status::Cancelled,
        Status::Failed,
        Status::Done,
    ];

    /// The spelling used in the JSON and by `harel run` (`DONE`, `RUNNING`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "PENDING",
            Status::Running => "RUNNING",
            Status::Done => "DONE",
            Status::Cancelled => "CANCELLED",
            Status::Suspended => "SUSPENDED",
            Status::Cancelling => "CANCELLING",
            Status::Failed => "FAILED",
        }
    }

    /// DONE or CANCELLED: the statuses that stamp `finished_at`.
    pub fn is_finished(self) -> bool {
        matches!(self, Status::Done | Status::Cancelled)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Status {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_uppercase().as_str() {
            "PENDING" => Status::Pending,
            "RUNNING" => Status::Running,
            "DONE" => Status::Done,
            "CANCELLED" => Status::Cancelled,
            "SUSPENDED" => Status::Suspended,
            "CANCELLING" => Status::Cancelling,
            "FAILED" => Status::Failed,
            other => return Err(format!("unknown status {other:?}")),
        })
    }
}

/// A stimulus processed by a machine (harel's `Event`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// Dedupe key under at-least-once delivery.
    pub id: String,
    pub kind: String,
    /// ISO-8601 datetimes, kept as the text harel wrote.
    pub created_time: Option<String>,
    pub received_time: Option<String>,
    pub data: Map,
    /// Fields this version does not know; written back unchanged.
    #[serde(flatten)]
    pub extra: Map,
}

deserialize_keeping_unknown!(Event,
    required { kind: String },
    defaulted {
        id: String = new_id(),
        created_time: Option<String> = None,
        received_time: Option<String> = None,
        data: Map = Map::new(),
    },
    unknown: extra,
);

impl Event {
    /// An event of `kind` with no data and a fresh random id.
    pub fn new(kind: impl Into<String>) -> Self {
        Event::with_data(kind, Map::new())
    }

    pub fn with_data(kind: impl Into<String>, data: Map) -> Self {
        Event {
            id: new_id(),
            kind: kind.into(),
            created_time: None,
            received_time: None,
            data,
            extra: Map::new(),
        }
    }

    /// The same event with an explicit id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }
}

/// A region or invoke child as its parent tracks it (harel's `ChildState`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChildState {
    pub root_path: String,
    pub finished: bool,
    pub outcome: Option<String>,
    pub result: Map,
    pub submachine: bool,
    pub key: String,
    #[serde(flatten)]
    pub extra: Map,
}

deserialize_keeping_unknown!(ChildState,
    required { root_path: String },
    defaulted {
        finished: bool = false,
        outcome: Option<String> = None,
        result: Map = Map::new(),
        submachine: bool = false,
        key: String = String::new(),
    },
    unknown: extra,
);

impl ChildState {
    pub fn new(root_path: impl Into<String>) -> Self {
        ChildState {
            root_path: root_path.into(),
            finished: false,
            outcome: None,
            result: Map::new(),
            submachine: false,
            key: String::new(),
            extra: Map::new(),
        }
    }
}

/// The serializable running instance of a definition (harel's `Execution`).
///
/// `Clone` is written out so that `clone_from` reuses the target's buffers field by
/// field: a store overwriting its copy on every commit then allocates nothing.
#[derive(Debug, PartialEq, Serialize)]
pub struct Execution {
    pub id: String,
    pub definition_id: String,
    /// Set on a submachine child: the FQN of the definition it runs.
    pub definition_fqn: Option<String>,
    /// The node this execution runs: `""` for a root, the branch node for a region.
    pub root_path: String,
    pub status: Status,
    pub outcome: Option<String>,
    pub error: Option<String>,
    pub active_path: Option<String>,
    /// Composite path -> last active child path.
    pub history: IndexMap<String, String>,
    pub context: Map,
    pub processed_events: i64,
    pub version: i64,
    pub priority: i64,
    pub parent_id: Option<String>,
    pub child_id: Option<String>,
    pub deferred: Vec<Event>,
    pub children: IndexMap<String, ChildState>,
    /// Spawn-site path -> times entered; part of the deterministic child ids.
    pub invoke_seq: IndexMap<String, i64>,
    pub created_at: Option<f64>,
    pub updated_at: Option<f64>,
    pub finished_at: Option<f64>,
    pub expires_at: Option<f64>,
    /// The pin: the [version](crate::version) of the definition this execution started
    /// on, which steps it for as long as a deploy retains it. harel does not know the
    /// field (pydantic ignores it, and drops it if a harel process rewrites the item:
    /// the execution then steps on the current version, as an unpinned one does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub definition_version: Option<crate::version::Version>,
    /// Events that arrived while the pinned version was not deployed, oldest first:
    /// held here, in the execution's own item, until it is back.
    /// Kept for items written before parked events had rows of their own: a release
    /// steps these first. Nothing appends to it any more.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parked_events: Vec<Event>,
    /// `Some(n)` while events wait for this execution in rows of their own (the store's
    /// parked rows, numbered from 1): every one numbered after `n` is still to step.
    /// Parking writes the event's row, not this item (but for the first of a run, which
    /// sets this field), so a parked event costs its own size, not the item's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked_after: Option<u64>,
    /// How this execution keeps its fan-outs' joins, fixed when it starts (the
    /// deployment's setting; a child takes its parent's). harel does not know the field:
    /// only `children` is harel's layout.
    #[serde(skip_serializing_if = "FanOutJoin::is_children")]
    pub fan_out_join: FanOutJoin,
    /// [`FanOutJoin::Counted`]'s joins, one per fan-out site (a handful at most: a `Vec`
    /// keeps the execution, which every step's futures hold, small).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub joins: Vec<CountedJoin>,
    /// Set on an instance of a counted join: where its end is reported (boxed: most
    /// executions have none, and every step's futures hold an execution).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub join_slot: Option<Box<JoinSlot>>,
    #[serde(flatten)]
    pub extra: Map,
}

deserialize_keeping_unknown!(Execution,
    required { definition_id: String },
    defaulted {
        id: String = new_id(),
        definition_fqn: Option<String> = None,
        root_path: String = String::new(),
        status: Status = Status::default(),
        outcome: Option<String> = None,
        error: Option<String> = None,
        active_path: Option<String> = None,
        history: IndexMap<String, String> = IndexMap::new(),
        context: Map = Map::new(),
        processed_events: i64 = 0,
        version: i64 = 0,
        priority: i64 = 0,
        parent_id: Option<String> = None,
        child_id: Option<String> = None,
        deferred: Vec<Event> = Vec::new(),
        children: IndexMap<String, ChildState> = IndexMap::new(),
        invoke_seq: IndexMap<String, i64> = IndexMap::new(),
        created_at: Option<f64> = None,
        updated_at: Option<f64> = None,
        finished_at: Option<f64> = None,
        expires_at: Option<f64> = None,
        definition_version: Option<crate::version::Version> = None,
        parked_events: Vec<Event> = Vec::new(),
        parked_after: Option<u64> = None,
        fan_out_join: FanOutJoin = FanOutJoin::Children,
        joins: Vec<CountedJoin> = Vec::new(),
        join_slot: Option<Box<JoinSlot>> = None,
    },
    unknown: extra,
);

impl Clone for Execution {
    fn clone(&self) -> Self {
        Execution {
            id: self.id.clone(),
            definition_id: self.definition_id.clone(),
            definition_fqn: self.definition_fqn.clone(),
            root_path: self.root_path.clone(),
            status: self.status,
            outcome: self.outcome.clone(),
            error: self.error.clone(),
            active_path: self.active_path.clone(),
            history: self.history.clone(),
            context: self.context.clone(),
            processed_events: self.processed_events,
            version: self.version,
            priority: self.priority,
            parent_id: self.parent_id.clone(),
            child_id: self.child_id.clone(),
            deferred: self.deferred.clone(),
            children: self.children.clone(),
            invoke_seq: self.invoke_seq.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            finished_at: self.finished_at,
            expires_at: self.expires_at,
            definition_version: self.definition_version,
            parked_events: self.parked_events.clone(),
            parked_after: self.parked_after,
            fan_out_join: self.fan_out_join,
            joins: self.joins.clone(),
            join_slot: self.join_slot.clone(),
            extra: self.extra.clone(),
        }
    }

    fn clone_from(&mut self, source: &Self) {
        // the maps go through `clone_map_from`/`clone_json_from`: most are empty, and an
        // empty map's own clone_from still copies its (empty) index table
        self.id.clone_from(&source.id);
        self.definition_id.clone_from(&source.definition_id);
        self.definition_fqn.clone_from(&source.definition_fqn);
        self.root_path.clone_from(&source.root_path);
        self.status = source.status;
        self.outcome.clone_from(&source.outcome);
        self.error.clone_from(&source.error);
        self.active_path.clone_from(&source.active_path);
        clone_map_from(&mut self.history, &source.history);
        clone_json_from(&mut self.context, &source.context);
        self.processed_events = source.processed_events;
        self.version = source.version;
        self.priority = source.priority;
        self.parent_id.clone_from(&source.parent_id);
        self.child_id.clone_from(&source.child_id);
        self.deferred.clone_from(&source.deferred);
        clone_map_from(&mut self.children, &source.children);
        clone_map_from(&mut self.invoke_seq, &source.invoke_seq);
        self.created_at = source.created_at;
        self.updated_at = source.updated_at;
        self.finished_at = source.finished_at;
        self.expires_at = source.expires_at;
        self.definition_version = source.definition_version;
        self.parked_events.clone_from(&source.parked_events);
        self.parked_after = source.parked_after;
        self.fan_out_join = source.fan_out_join;
        self.joins.clone_from(&source.joins);
        self.join_slot.clone_from(&source.join_slot);
        clone_json_from(&mut self.extra, &source.extra);
    }
}

/// `dst.clone_from(src)` for an index map, cheaper in the cases steps leave: an empty
/// source clears `dst` (its buffers kept), and the same keys in the same order (a
/// history over the same composites, say) copy only the values, `dst`'s index table
/// being right for them already.
fn clone_map_from<V: Clone>(dst: &mut IndexMap<String, V>, src: &IndexMap<String, V>) {
    if src.is_empty() {
        dst.clear();
    } else if dst.len() == src.len() && dst.keys().eq(src.keys()) {
        for (d, s) in dst.values_mut().zip(src.values()) {
            d.clone_from(s);
        }
    } else {
        dst.clone_from(src);
    }
}

/// [`clone_map_from`]'s empty case for a JSON object (a context, the unknown fields).
fn clone_json_from(dst: &mut Map, src: &Map) {
    if src.is_empty() {
        dst.clear();
    } else {
        dst.clone_from(src);
    }
}

impl Execution {
    /// A fresh PENDING execution of `definition_id` with the given id.
    pub fn new(id: impl Into<String>, definition_id: impl Into<String>) -> Self {
        Execution {
            id: id.into(),
            definition_id: definition_id.into(),
            definition_fqn: None,
            root_path: String::new(),
            status: Status::Pending,
            outcome: None,
            error: None,
            active_path: None,
            history: IndexMap::new(),
            context: Map::new(),
            processed_events: 0,
            version: 0,
            priority: 0,
            parent_id: None,
            child_id: None,
            deferred: Vec::new(),
            children: IndexMap::new(),
            invoke_seq: IndexMap::new(),
            created_at: None,
            updated_at: None,
            finished_at: None,
            expires_at: None,
            definition_version: None,
            parked_events: Vec::new(),
            parked_after: None,
            fan_out_join: FanOutJoin::Children,
            joins: Vec::new(),
            join_slot: None,
            extra: Map::new(),
        }
    }

    /// Every child this execution has spawned and still tracks: its `children`, then
    /// each counted join's instances.
    pub fn child_ids(&self) -> impl Iterator<Item = String> + '_ {
        let counted = self
            .joins
            .iter()
            .flat_map(|join| (0..join.total).map(|i| join.child_id(i)));
        self.children.keys().cloned().chain(counted)
    }

    /// Whether a child it tracks has not reported its end yet.
    pub fn has_unfinished_children(&self) -> bool {
        self.children.values().any(|c| !c.finished) || self.joins.iter().any(|j| !j.is_complete())
    }

    /// Whether events wait to step on it: on the item (written before parked rows) or in
    /// rows of their own.
    pub fn has_parked(&self) -> bool {
        !self.parked_events.is_empty() || self.parked_after.is_some()
    }

    /// Set the bookkeeping timestamps for a commit about to happen at `now`
    /// (harel's `stamp`): every writer calls it just before committing.
    pub fn stamp(&mut self, now: f64) {
        if self.created_at.is_none() {
            self.created_at = Some(now);
        }
        self.updated_at = Some(now);
        if !self.status.is_finished() {
            self.finished_at = None;
        } else if self.finished_at.is_none() {
            self.finished_at = Some(now);
        }
    }

    /// Compact JSON exactly as harel's `model_dump_json` writes it: the form stored in
    /// DynamoDB's `data` attribute.
    pub fn to_json(&self) -> String {
        to_pydantic_json(self)
    }

    /// Read what [`Execution::to_json`] (or harel) wrote: pydantic reads `NaN`,
    /// `Infinity` and ints of any size, and so does this.
    pub fn from_json(text: &str) -> Result<Self, RecordJsonError> {
        from_record_json(text)
    }
}

impl Event {
    /// Compact JSON exactly as harel's `model_dump_json` writes it (SQS bodies, outbox).
    pub fn to_json(&self) -> String {
        to_pydantic_json(self)
    }

    /// Read what [`Event::to_json`] (or harel) wrote, `NaN`, `Infinity` and big ints
    /// included, as pydantic reads them.
    pub fn from_json(text: &str) -> Result<Self, RecordJsonError> {
        from_record_json(text)
    }
}

pub use crate::pyjson::to_pydantic_json;

/// The fields of ours an execution record may carry beyond harel's model: pydantic
/// ignores them when harel reads the item (and drops them if harel rewrites it).
pub const FIELDS_HAREL_IGNORES: [&str; 3] = ["definition_version", "parked_events", "parked_after"];

/// A random 32-hex-digit id, the shape of Python's `uuid.uuid4().hex`.
///
/// `stm-core` has no RNG dependency: the std hasher's per-process random keys, with the
/// time, seed two 64-bit keys once per process; each id is then a counter mixed with
/// them. The first half is a bijection of the counter, so ids never repeat within a
/// process; the keys make them differ across processes. (`stm run` makes one id per
/// event: this is on its hot path, and a hasher per id cost more than the step.)
pub fn new_id() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static KEYS: OnceLock<[u64; 2]> = OnceLock::new();
    let keys = KEYS.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let state = RandomState::new();
        [0x9e37_79b9_7f4a_7c15_u64, 0xc2b2_ae3d_27d4_eb4f].map(|salt| {
            let mut h = state.build_hasher();
            h.write_u64(nanos ^ salt);
            h.finish()
        })
    });
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let halves = [
        mix(count.wrapping_add(keys[0])),
        mix(count.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ keys[1]),
    ];
    // two digits a byte, from a table: an id is made for every event a client or `stm run`
    // sends without one, and the digit-by-digit loop cost more than the rest of the id
    let mut digits = [0u8; 32];
    for (half, out) in halves.iter().zip(digits.chunks_exact_mut(16)) {
        for (byte, pair) in half.to_be_bytes().iter().zip(out.chunks_exact_mut(2)) {
            pair.copy_from_slice(&HEX_PAIRS[usize::from(*byte)]);
        }
    }
    // ASCII digits: always UTF-8, one allocation of exactly 32 bytes
    std::str::from_utf8(&digits).map_or_else(|_| String::new(), str::to_owned)
}

/// Each byte's two lowercase hex digits.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        pairs[i] = [DIGITS[i >> 4], DIGITS[i & 0xf]];
        i += 1;
    }
    pairs
};

/// SplitMix64's finalizer: a bijection on `u64` that spreads every input bit over the
/// output (consecutive counters give unrelated-looking ids).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A record as pydantic reads it. serde_json's own typed parse reads every record harel
/// or we write, in far fewer instructions than going through a `Value`; only what it
/// refuses (`NaN`, `Infinity`, a lone surrogate) takes [`crate::pyjson::loads`], which
/// reads the first two and explains the third.
fn from_record_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, RecordJsonError> {
    match serde_json::from_str(text) {
        Ok(record) => Ok(record),
        Err(_) => Ok(serde_json::from_value(crate::pyjson::loads(text)?)?),
    }
}

/// Why a stored execution's or event's JSON cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordJsonError {
    #[error("not JSON: {0}")]
    Json(#[from] crate::pyjson::JsonError),
    #[error("not an execution: {0}")]
    Shape(#[from] serde_json::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_32_lowercase_hex_digits_and_do_not_repeat() {
        let ids: std::collections::HashSet<String> = (0..10_000).map(|_| new_id()).collect();
        assert_eq!(ids.len(), 10_000);
        for id in ids.iter().take(100) {
            assert!(
                id.len() == 32
                    && id
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "{id}"
            );
        }
        for (byte, pair) in HEX_PAIRS.iter().enumerate() {
            assert_eq!(
                std::str::from_utf8(pair).ok(),
                Some(format!("{byte:02x}").as_str())
            );
        }
    }
}
