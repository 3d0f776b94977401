//! The seven tables, as data: what [`super::DynamoDbStore::ensure_tables`] creates and
//! what `template.yaml` must declare (key schema, attribute definitions and secondary
//! indexes: the `executions` table's sparse state index (`dynamodb/states.rs`), and the
//! `timers` table's sparse due-time index, see [`super::due`]).

/// A key attribute's DynamoDB scalar type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    /// `S`
    String,
    /// `N`
    Number,
}

impl KeyType {
    /// The `AttributeType` spelling: `S` or `N`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyType::String => "S",
            KeyType::Number => "N",
        }
    }
}

/// One key attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyAttr {
    pub name: &'static str,
    pub ty: KeyType,
}

/// What a global secondary index copies from the table. Only `KEYS_ONLY` is used: the
/// table's key attributes plus the index's own are all the sweeper and a state query read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Projection {
    /// `KEYS_ONLY`
    KeysOnly,
}

impl Projection {
    /// The `ProjectionType` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Projection::KeysOnly => "KEYS_ONLY",
        }
    }
}

/// A global secondary index (on-demand, like its table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexSpec {
    pub name: &'static str,
    pub hash: KeyAttr,
    pub range: Option<KeyAttr>,
    pub projection: Projection,
}

impl IndexSpec {
    /// The index's key attributes, partition key first.
    pub fn keys(&self) -> Vec<KeyAttr> {
        std::iter::once(self.hash).chain(self.range).collect()
    }
}

/// One table: its short name (the full name is `{prefix}_{name}`), its partition key, its
/// sort key if any, its global secondary indexes. Every table is on-demand
/// (`PAY_PER_REQUEST`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSpec {
    pub name: &'static str,
    pub hash: KeyAttr,
    pub range: Option<KeyAttr>,
    /// Our additions to harel's schema (harel creates none; it ignores them).
    pub indexes: &'static [IndexSpec],
}

impl TableSpec {
    /// `{prefix}_{name}`.
    pub fn table_name(&self, prefix: &str) -> String {
        format!("{prefix}_{}", self.name)
    }

    /// The key attributes, partition key first.
    pub fn keys(&self) -> Vec<KeyAttr> {
        std::iter::once(self.hash).chain(self.range).collect()
    }

    /// The `AttributeDefinitions`: the table's key attributes, then those of its indexes
    /// (each attribute once).
    pub fn attribute_definitions(&self) -> Vec<KeyAttr> {
        let mut out = self.keys();
        for key in self.indexes.iter().flat_map(IndexSpec::keys) {
            if !out.iter().any(|k| k.name == key.name) {
                out.push(key);
            }
        }
        out
    }
}

/// The `timers` table's sparse global secondary index on due time (see [`super::due`]).
pub const TIMER_DUE_INDEX: &str = "due_index";
/// The timer-item attribute naming a timer's shard of [`TIMER_DUE_INDEX`]
/// (`due#0` .. `due#{TIMER_SHARDS - 1}`): the index's partition key. Items without it
/// (written by harel) are not in the index.
pub const TIMER_SHARD_ATTRIBUTE: &str = "due_shard";
/// The timer-item attribute (BOOL `true`) of a timer held while its execution is
/// suspended ([`crate::TimerOp::Hold`]): the item has no [`TIMER_SHARD_ATTRIBUTE`], so it
/// is out of [`TIMER_DUE_INDEX`], and the full scan passes over it.
pub const TIMER_HELD_ATTRIBUTE: &str = "held";
/// The number of shards of [`TIMER_DUE_INDEX`]; a sweep queries each one.
pub const TIMER_SHARDS: u32 = 64;

const TIMER_INDEXES: &[IndexSpec] = &[IndexSpec {
    name: TIMER_DUE_INDEX,
    hash: key(TIMER_SHARD_ATTRIBUTE, KeyType::String),
    range: Some(key("fire_at", KeyType::Number)),
    projection: Projection::KeysOnly,
}];

/// The `executions` table's sparse global secondary index by state (`dynamodb/states.rs`,
/// and [`crate::states`]): which executions are in a state now, and since when.
pub const STATE_INDEX: &str = "state_index";
/// The execution-item attribute `{definition_id}#{state path}#{shard}`: the partition key
/// of [`STATE_INDEX`]. Items without it (DONE and CANCELLED executions, harel's writes)
/// are not in the index.
pub const STATE_KEY_ATTRIBUTE: &str = "state_key";
/// The execution-item attribute holding when it entered its state (epoch seconds): the
/// sort key of [`STATE_INDEX`].
pub const STATE_SINCE_ATTRIBUTE: &str = "state_since";
/// The number of shards of each state in [`STATE_INDEX`]; a query reads each one.
pub const STATE_SHARDS: u32 = 512;

const EXECUTION_INDEXES: &[IndexSpec] = &[IndexSpec {
    name: STATE_INDEX,
    hash: key(STATE_KEY_ATTRIBUTE, KeyType::String),
    range: Some(key(STATE_SINCE_ATTRIBUTE, KeyType::Number)),
    projection: Projection::KeysOnly,
}];

const fn key(name: &'static str, ty: KeyType) -> KeyAttr {
    KeyAttr { name, ty }
}

/// harel's seven tables, in its order (with our two indexes: by state on `executions`, by
/// due time on `timers`).
pub fn table_specs() -> Vec<TableSpec> {
    use KeyType::{Number as N, String as S};
    vec![
        TableSpec {
            name: "executions",
            hash: key("id", S),
            range: None,
            indexes: EXECUTION_INDEXES,
        },
        TableSpec {
            name: "outbox",
            hash: key("seq", N),
            range: None,
            indexes: &[],
        },
        TableSpec {
            name: "spawns",
            hash: key("seq", N),
            range: None,
            indexes: &[],
        },
        TableSpec {
            name: "timers",
            hash: key("execution_id", S),
            range: Some(key("path", S)),
            indexes: TIMER_INDEXES,
        },
        TableSpec {
            name: "processed",
            hash: key("execution_id", S),
            range: Some(key("event_id", S)),
            indexes: &[],
        },
        TableSpec {
            name: "counters",
            hash: key("id", S),
            range: None,
            indexes: &[],
        },
        TableSpec {
            name: "trace",
            hash: key("execution_id", S),
            range: Some(key("idx", N)),
            indexes: &[],
        },
    ]
}

/// The attribute holding an item's expiry (epoch seconds) when a retention is configured:
/// a processed mark's, a finished execution's, a trace row's. The name `template.yaml`
/// gives the TTL of the `processed`, `executions` and `trace` tables.
pub const TTL_ATTRIBUTE: &str = "ttl";

/// Whether `prefix` is a valid table prefix: harel's rule (an identifier of at most 30
/// characters: a letter or `_`, then letters, digits or `_`).
pub fn valid_prefix(prefix: &str) -> bool {
    let mut chars = prefix.chars();
    let Some(first) = chars.next() else { return false };
    (first.is_ascii_alphabetic() || first == '_')
        && prefix.len() <= 30
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
