//! What the partition meter knows of an item (its size, its global secondary index
//! entries) and what a write leaves of it, estimated for an update without the new item.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::key_labels::attribute_label;
use super::schema::{Projection, TableSchema};
use super::sizes::{item_size, value_size};

/// What the meter knows of an item it saw written or read whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Stored {
    /// The item's size (for an item only updated, the meter's estimate).
    pub(super) bytes: usize,
    /// Index name -> the item's entry in it.
    pub(super) entries: BTreeMap<String, IndexEntry>,
}

/// An item's entry in a global secondary index.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct IndexEntry {
    /// `attribute=value` of the index's partition key: what an index write is charged to.
    pub(super) partition: String,
    /// The whole index key: when it changes, the index takes a delete and a put.
    pub(super) key: String,
    /// The projected attributes' size, keys included.
    pub(super) bytes: usize,
}

/// What a write leaves of the item.
#[derive(Debug)]
pub(super) enum After {
    /// This item (a put, or an update whose answer carries the new item).
    Item(Stored),
    /// No item.
    Gone,
    /// An update without the new item in hand: an estimate of its size, and the attribute
    /// names its update expression names (whether it may change an index key).
    Updated {
        estimate: usize,
        names: BTreeSet<String>,
    },
}

/// The estimate of an update without the new item in hand: what the request itself writes
/// (its key and the values its expressions use).
pub(super) fn updated(request: &Value) -> After {
    let values: usize = request["ExpressionAttributeValues"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, v)| value_size(v))
        .sum();
    // what the update changes (a condition only reads)
    let mut names = request["UpdateExpression"]
        .as_str()
        .map(|e| names_in(e, &request["ExpressionAttributeNames"]))
        .unwrap_or_default();
    // the legacy `AttributeUpdates` names its attributes as keys
    if let Some(updates) = request["AttributeUpdates"].as_object() {
        names.extend(updates.keys().cloned());
    }
    After::Updated {
        estimate: item_size(&request["Key"]) + values,
        names,
    }
}

/// The attribute names an expression names, `#aliases` resolved.
fn names_in(expression: &str, aliases: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut word = String::new();
    for c in expression.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' || c == '#' || c == ':' {
            word.push(c);
            continue;
        }
        if let Some(alias) = word.strip_prefix('#') {
            if let Some(name) = aliases[format!("#{alias}")].as_str() {
                out.insert(name.to_string());
            }
        } else if !word.is_empty() && !word.starts_with(':') {
            out.insert(word.clone());
        }
        word.clear();
    }
    out
}

/// What the meter keeps of an item: its size and its index entries.
pub(super) fn stored_of(schema: &TableSchema, item: &Value) -> Stored {
    Stored {
        bytes: item_size(item),
        entries: index_entries(schema, item),
    }
}

/// The item's entry in each global secondary index whose key attributes it carries (an
/// item without them is not in the index: a sparse index).
fn index_entries(schema: &TableSchema, item: &Value) -> BTreeMap<String, IndexEntry> {
    let mut out = BTreeMap::new();
    for (index, attributes) in &schema.global_indexes {
        let labels: Option<Vec<String>> = attributes.iter().map(|a| attribute_label(item, a)).collect();
        let Some(labels) = labels else {
            continue;
        };
        let Some(partition) = labels.first().cloned() else {
            continue;
        };
        let projection = schema.index_projections.get(index).cloned().unwrap_or_default();
        let bytes = match projection {
            Projection::All => item_size(item),
            Projection::KeysOnly | Projection::Include(_) => {
                let mut names: BTreeSet<&str> = attributes.iter().map(String::as_str).collect();
                names.insert(&schema.partition_key);
                names.extend(schema.sort_key.as_deref());
                if let Projection::Include(more) = &projection {
                    names.extend(more.iter().map(String::as_str));
                }
                names
                    .into_iter()
                    .filter_map(|n| Some(n.len() + value_size(item.get(n)?)))
                    .sum()
            }
        };
        out.insert(
            index.clone(),
            IndexEntry {
                partition,
                key: labels.join("|"),
                bytes,
            },
        );
    }
    out
}
