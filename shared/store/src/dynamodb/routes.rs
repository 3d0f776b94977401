//! Routes and tallies in DynamoDB ([`crate::route`]): items of the `counters` table, beside
//! the join rows (harel reads only its two seq items there). The routes are one item,
//! [`ROUTES_KEY`], its JSON in `r` and its generation in `g`, written with a condition on
//! `g`; a tally shard is an item with two numbers, `f` (finished) and `x` (FAILED), added
//! with `ADD` and expired by TTL.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};

use super::item::{get_i64, get_s, malformed, n_i64, s, Item};
use super::schema::TTL_ATTRIBUTE;
use super::{sdk_error, DynamoDbStore};
use crate::route::{Routes, Tally, ROUTES_KEY};
use crate::{Malformation, StoreError};

/// The routes' JSON.
const ROUTES: &str = "r";
/// The routes' generation.
const GENERATION: &str = "g";
const FINISHED: &str = "f";
const FAILED: &str = "x";

impl DynamoDbStore {
    pub(super) async fn read_routes(&self) -> Result<Routes, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.counters)
            .key("id", s(ROUTES_KEY))
            // an operator's change is seen by the next read, not a second later
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem", e))?;
        let Some(item) = out.item() else {
            return Ok(Routes::default());
        };
        let mut routes: Routes = get_s(item, ROUTES)
            .and_then(|text| serde_json::from_str(text).ok())
            .ok_or_else(|| malformed("the routes item", "r", Malformation::NotRoutes))?;
        routes.generation = get_i64(item, GENERATION).unwrap_or(0).max(0) as u64;
        Ok(routes)
    }

    pub(super) async fn write_routes(&self, routes: &Routes, read: u64) -> Result<bool, StoreError> {
        let next = Routes {
            generation: read + 1,
            ..routes.clone()
        };
        let text = serde_json::to_string(&next)
            .map_err(|e| StoreError::backend(format!("the routes' JSON: {e}")))?;
        let result = self
            .client
            .put_item()
            .table_name(&self.tables.counters)
            .item("id", s(ROUTES_KEY))
            .item(ROUTES, s(text))
            .item(GENERATION, n_i64(next.generation as i64))
            // generation 0 is the item that was never written
            .condition_expression(if read == 0 {
                "attribute_not_exists(id) OR #g = :read"
            } else {
                "#g = :read"
            })
            .expression_attribute_names("#g", GENERATION)
            .expression_attribute_values(":read", n_i64(read as i64))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(err) if err.code() == Some("ConditionalCheckFailedException") => Ok(false),
            Err(err) => Err(sdk_error("PutItem", err)),
        }
    }

    pub(super) async fn add_to_tallies(
        &self,
        adds: &[(String, Tally)],
        expires: i64,
    ) -> Result<(), StoreError> {
        for (key, tally) in adds {
            self.client
                .update_item()
                .table_name(&self.tables.counters)
                .key("id", s(key.clone()))
                .update_expression("ADD #f :f, #x :x SET #ttl = :ttl")
                .expression_attribute_names("#f", FINISHED)
                .expression_attribute_names("#x", FAILED)
                .expression_attribute_names("#ttl", TTL_ATTRIBUTE)
                .expression_attribute_values(":f", n_i64(tally.finished as i64))
                .expression_attribute_values(":x", n_i64(tally.failed as i64))
                .expression_attribute_values(":ttl", n_i64(expires))
                .send()
                .await
                .map_err(|e| sdk_error("UpdateItem", e))?;
        }
        Ok(())
    }

    pub(super) async fn sum_tallies(&self, keys: &[String]) -> Result<Tally, StoreError> {
        let mut sum = Tally::default();
        // BatchGetItem takes 100 keys a request
        for chunk in keys.chunks(100) {
            let mut wanted = KeysAndAttributes::builder();
            for key in chunk {
                let item: Item = HashMap::from([("id".to_string(), s(key.clone()))]);
                wanted = wanted.keys(item);
            }
            let wanted = wanted
                .build()
                .map_err(|e| StoreError::backend(format!("a tally's BatchGetItem request: {e}")))?;
            let request = HashMap::from([(self.tables.counters.clone(), wanted)]);
            for items in self.batch_get(request).await?.into_values() {
                for item in items {
                    let number = |name| match item.get(name) {
                        Some(AttributeValue::N(_)) => get_i64(&item, name).unwrap_or(0).max(0) as u64,
                        _ => 0,
                    };
                    sum.add(Tally {
                        finished: number(FINISHED),
                        failed: number(FAILED),
                    });
                }
            }
        }
        Ok(sum)
    }
}
