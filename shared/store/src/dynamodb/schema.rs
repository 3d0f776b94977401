//! The seven tables, as data: what [`super::DynamoDbStore::ensure_tables`] creates and
//! what `template.yaml` must declare.

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

/// One table: its short name (the full name is `{prefix}_{name}`), its partition key, its
/// sort key if any. Every table is on-demand (`PAY_PER_REQUEST`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSpec {
    pub name: &'static str,
    pub hash: KeyAttr,
    pub range: Option<KeyAttr>,
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
}

const fn key(name: &'static str, ty: KeyType) -> KeyAttr {
    KeyAttr { name, ty }
}

/// The seed's seven tables, in its order.
pub fn table_specs() -> Vec<TableSpec> {
    use KeyType::{Number as N, String as S};
    vec![
        TableSpec {
            name: "executions",
            hash: key("id", S),
            range: None,
        },
        TableSpec {
            name: "outbox",
            hash: key("seq", N),
            range: None,
        },
        TableSpec {
            name: "spawns",
            hash: key("seq", N),
            range: None,
        },
        TableSpec {
            name: "timers",
            hash: key("execution_id", S),
            range: Some(key("path", S)),
        },
        TableSpec {
            name: "processed",
            hash: key("execution_id", S),
            range: Some(key("event_id", S)),
        },
        TableSpec {
            name: "counters",
            hash: key("id", S),
            range: None,
        },
        TableSpec {
            name: "trace",
            hash: key("execution_id", S),
            range: Some(key("idx", N)),
        },
    ]
}

/// The attribute holding a processed mark's expiry (epoch seconds) when a retention is
/// configured: the name `template.yaml` gives the `processed` table's TTL.
pub const PROCESSED_TTL_ATTRIBUTE: &str = "ttl";

/// Whether `prefix` is a valid table prefix: harel's rule (an identifier of at most 30
/// characters: a letter or `_`, then letters, digits or `_`).
pub fn valid_prefix(prefix: &str) -> bool {
    let mut chars = prefix.chars();
    let Some(first) = chars.next() else { return false };
    (first.is_ascii_alphabetic() || first == '_')
        && prefix.len() <= 30
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
