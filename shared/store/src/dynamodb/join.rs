//! A counted join's rows in DynamoDB ([`crate::join`]): items of the `counters` table (a
//! key-value table; harel keeps its two seq items there and reads no other), each a string
//! set `r` of its reports, updated with `ADD` (idempotent) and read back from the update's
//! answer, so a report costs one small write, and the report that fills the join one
//! `BatchGetItem` of its shards.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, ReturnValue};

use super::due::wall_now;
use super::item::{n_i64, s, Item};
use super::schema::TTL_ATTRIBUTE;
use super::{sdk_error, DynamoDbStore};
use crate::join::{self, JoinReport, JoinTally};
use crate::StoreError;

/// The set attribute of a join row.
const REPORTS: &str = "r";

/// Days a join row is kept: DynamoDB's TTL deletes it (the template enables TTL on
/// `counters`), well after its join completed; a fan-out whose instances run longer than
/// this would refill a shard from nothing, so it is long.
const JOIN_ROW_DAYS: i64 = 90;

impl DynamoDbStore {
    pub(super) async fn record_join_report(
        &self,
        report: &JoinReport,
    ) -> Result<Option<JoinTally>, StoreError> {
        let slot = &report.slot;
        let shard = join::shard_of(slot.index);
        let filled = self
            .add_to_join_row(&join::shard_key(&slot.prefix, shard), join::element(report))
            .await?;
        if filled < join::shard_size(slot.total, shard) {
            return Ok(None);
        }
        let shards = join::shards(slot.total);
        let full = self
            .add_to_join_row(&join::root_key(&slot.prefix), shard.to_string())
            .await?;
        if full < shards {
            return Ok(None);
        }
        let mut elements: Vec<String> = Vec::with_capacity(slot.total as usize);
        let keys: Vec<u64> = (0..shards).collect();
        // BatchGetItem takes 100 keys a request
        for chunk in keys.chunks(100) {
            let mut wanted = KeysAndAttributes::builder().consistent_read(true);
            for shard in chunk {
                let mut key: Item = HashMap::new();
                key.insert("id".to_string(), s(join::shard_key(&slot.prefix, *shard)));
                wanted = wanted.keys(key);
            }
            let wanted = wanted
                .build()
                .map_err(|e| StoreError::backend(format!("a join's BatchGetItem request: {e}")))?;
            let request = HashMap::from([(self.tables.counters.clone(), wanted)]);
            for items in self.batch_get(request).await?.into_values() {
                for item in items {
                    if let Some(AttributeValue::Ss(set)) = item.get(REPORTS) {
                        elements.extend(set.iter().cloned());
                    }
                }
            }
        }
        Ok(Some(join::tally(elements.iter().map(String::as_str))))
    }

    /// `ADD` `element` to the row `id`'s set: the set's size after it.
    async fn add_to_join_row(&self, id: &str, element: String) -> Result<u64, StoreError> {
        let expires = wall_now() as i64 + JOIN_ROW_DAYS * 86_400;
        let out = self
            .client
            .update_item()
            .table_name(&self.tables.counters)
            .key("id", s(id))
            .update_expression("ADD #r :e SET #ttl = :ttl")
            .expression_attribute_names("#r", REPORTS)
            .expression_attribute_names("#ttl", TTL_ATTRIBUTE)
            .expression_attribute_values(":e", AttributeValue::Ss(vec![element]))
            .expression_attribute_values(":ttl", n_i64(expires))
            // the whole row: an ADD of an element already there changes no attribute, and
            // UPDATED_NEW then returns none (moto's answer; DynamoDB's is not promised)
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| sdk_error("UpdateItem", e))?;
        Ok(match out.attributes().and_then(|a| a.get(REPORTS)) {
            Some(AttributeValue::Ss(set)) => set.len() as u64,
            _ => 0,
        })
    }
}
