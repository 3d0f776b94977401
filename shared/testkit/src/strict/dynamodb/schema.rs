//! A table's keys and indexes, as the rules and the meter need them, from moto's
//! `DescribeTable` answer.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// A table's keys and indexes (from `DescribeTable`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableSchema {
    pub partition_key: String,
    pub sort_key: Option<String>,
    /// Global secondary index name -> its key attributes, the partition key first.
    pub global_indexes: BTreeMap<String, Vec<String>>,
    /// Global secondary index name -> what its entries carry besides the keys.
    pub index_projections: BTreeMap<String, Projection>,
    /// Local secondary index names.
    pub local_indexes: BTreeSet<String>,
}

/// What a global secondary index's entries carry besides the table's and the index's keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Projection {
    KeysOnly,
    /// These attributes too.
    Include(Vec<String>),
    /// The whole item.
    #[default]
    All,
}

impl Projection {
    fn from_description(projection: &Value) -> Projection {
        match projection["ProjectionType"].as_str() {
            Some("KEYS_ONLY") => Projection::KeysOnly,
            Some("INCLUDE") => Projection::Include(
                projection["NonKeyAttributes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str().map(str::to_string))
                    .collect(),
            ),
            _ => Projection::All,
        }
    }
}

impl TableSchema {
    /// From a `DescribeTable` answer's `Table`.
    pub fn from_description(table: &Value) -> Option<TableSchema> {
        let keys = |schema: &Value| -> Vec<(String, String)> {
            schema
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|k| {
                    Some((
                        k["AttributeName"].as_str()?.to_string(),
                        k["KeyType"].as_str()?.to_string(),
                    ))
                })
                .collect()
        };
        let own = keys(&table["KeySchema"]);
        let partition_key = own.iter().find(|(_, t)| t == "HASH")?.0.clone();
        let sort_key = own.iter().find(|(_, t)| t == "RANGE").map(|(n, _)| n.clone());
        let mut global_indexes = BTreeMap::new();
        let mut index_projections = BTreeMap::new();
        for index in table["GlobalSecondaryIndexes"].as_array().into_iter().flatten() {
            if let Some(name) = index["IndexName"].as_str() {
                let mut index_keys = keys(&index["KeySchema"]);
                // the partition key first, whatever order the description lists them in
                index_keys.sort_by_key(|(_, kind)| kind != "HASH");
                global_indexes.insert(name.to_string(), index_keys.into_iter().map(|(n, _)| n).collect());
                index_projections.insert(
                    name.to_string(),
                    Projection::from_description(&index["Projection"]),
                );
            }
        }
        let local_indexes = table["LocalSecondaryIndexes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["IndexName"].as_str().map(str::to_string))
            .collect();
        Some(TableSchema {
            partition_key,
            sort_key,
            global_indexes,
            index_projections,
            local_indexes,
        })
    }
}
