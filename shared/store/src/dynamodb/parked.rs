//! Parked events' rows in DynamoDB ([`crate::parked`]): items of the `counters` table, a
//! counter per execution (`ADD`), a row per event and a claim per event id, none with a
//! `ttl` (the table's TTL must never delete an event that waits).
//!
//! The counter is also the run's **guard**: while events are parked (before a commit or
//! after it), every commit of the execution sets the guard to the item's new version, in
//! its transaction. A park without the item then checks the guard, a small item, instead of
//! the execution's item: it holds the item's version exactly while the run is open, so the
//! check fails whenever the item moved since the parker read it, as a `ConditionCheck` of
//! the item would, without costing the item's size (a transaction performs "two underlying
//! reads or writes of every item", *Amazon DynamoDB Transactions: How it works*).

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, KeysAndAttributes, Put, ReturnValue, TransactWriteItem, Update,
};
use stm_core::Event;

use super::item::{corrupt, get_i64, n_i64, req_s, s, Item};
use super::{build_err, sdk_error, DynamoDbStore, TRANSIENT_REASONS};
use crate::parked::{self, Parked, ParkedEvent, Unpark};
use crate::{Corruption, StoreError};

/// The counter's attribute: the last number taken.
const LAST: &str = "n";
/// The counter's attribute: the guard, the execution item's version while events are
/// parked.
const GUARD: &str = "v";
/// A row's event, as JSON.
const EVENT: &str = "event";

/// The key of the `counters` item `id`.
fn key(id: String) -> Item {
    HashMap::from([("id".to_string(), s(id))])
}

impl DynamoDbStore {
    pub(super) async fn take_park_number_of(&self, id: &str) -> Result<u64, StoreError> {
        let out = self
            .client
            .update_item()
            .table_name(&self.tables.counters)
            .set_key(Some(key(parked::counter_key(id))))
            .update_expression("ADD #n :one")
            .expression_attribute_names("#n", LAST)
            .expression_attribute_values(":one", n_i64(1))
            .return_values(ReturnValue::UpdatedNew)
            .send()
            .await
            .map_err(|e| sdk_error("UpdateItem", e))?;
        match out.attributes().and_then(|a| get_i64(a, LAST)) {
            Some(n) if n > 0 => Ok(n as u64),
            _ => Err(StoreError::backend(format!(
                "the parked-events counter of {id} answered no number"
            ))),
        }
    }

    pub(super) async fn last_park_number_of(&self, id: &str) -> Result<u64, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.counters)
            .set_key(Some(key(parked::counter_key(id))))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem", e))?;
        Ok(out
            .item()
            .and_then(|i| get_i64(i, LAST))
            .map_or(0, |n| n.max(0) as u64))
    }

    /// The row and the claim of `parked`, as puts (the claim only if none is there).
    pub(super) fn park_puts(
        &self,
        id: &str,
        parked: &ParkedEvent,
    ) -> Result<[TransactWriteItem; 2], StoreError> {
        let claim = Put::builder()
            .table_name(&self.tables.counters)
            .set_item(Some(HashMap::from([
                ("id".to_string(), s(parked::claim_key(id, &parked.event.id))),
                (LAST.to_string(), n_i64(parked.number as i64)),
            ])))
            .condition_expression("attribute_not_exists(id)")
            .build()
            .map_err(build_err)?;
        let row = Put::builder()
            .table_name(&self.tables.counters)
            .set_item(Some(HashMap::from([
                ("id".to_string(), s(parked::row_key(id, parked.number))),
                (EVENT.to_string(), s(parked.event.to_json())),
            ])))
            .build()
            .map_err(build_err)?;
        Ok([
            TransactWriteItem::builder().put(claim).build(),
            TransactWriteItem::builder().put(row).build(),
        ])
    }

    /// The deletes of a released event's row and claim.
    pub(super) fn unpark_deletes(
        &self,
        id: &str,
        released: &Unpark,
    ) -> Result<[TransactWriteItem; 2], StoreError> {
        let delete = |k: String| -> Result<TransactWriteItem, StoreError> {
            let del = Delete::builder()
                .table_name(&self.tables.counters)
                .set_key(Some(key(k)))
                .build()
                .map_err(build_err)?;
            Ok(TransactWriteItem::builder().delete(del).build())
        };
        Ok([
            delete(parked::row_key(id, released.number))?,
            delete(parked::claim_key(id, &released.event_id))?,
        ])
    }

    /// The guard's update in a commit that writes version `new` of `id`'s item.
    pub(super) fn parked_guard_update(&self, id: &str, new: i64) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.tables.counters)
            .set_key(Some(key(parked::counter_key(id))))
            .update_expression("SET #v = :v")
            .expression_attribute_names("#v", GUARD)
            .expression_attribute_values(":v", n_i64(new))
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    pub(super) async fn park_event(
        &self,
        id: &str,
        version: i64,
        parked: &ParkedEvent,
    ) -> Result<Parked, StoreError> {
        // the guard, not the item: it holds the item's version while events are parked
        let check = ConditionCheck::builder()
            .table_name(&self.tables.counters)
            .set_key(Some(key(parked::counter_key(id))))
            .condition_expression("#v = :v")
            .expression_attribute_names("#v", GUARD)
            .expression_attribute_values(":v", n_i64(version))
            .build()
            .map_err(build_err)?;
        let mut items = vec![TransactWriteItem::builder().condition_check(check).build()];
        items.extend(self.park_puts(id, parked)?);
        let Err(err) = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
        else {
            return Ok(Parked::Kept);
        };
        if let Some(TransactWriteItemsError::TransactionCanceledException(tc)) = err.as_service_error() {
            let code = |i: usize| tc.cancellation_reasons().get(i).and_then(|r| r.code());
            // a redelivery first: kept already, whatever the item did since
            if code(1) == Some("ConditionalCheckFailed") {
                return Ok(Parked::AlreadyKept);
            }
            if code(0) == Some("ConditionalCheckFailed") {
                return Err(StoreError::Conflict {
                    id: id.to_string(),
                    expected: version,
                    found: None,
                });
            }
            if tc
                .cancellation_reasons()
                .iter()
                .filter_map(|r| r.code())
                .any(|c| TRANSIENT_REASONS.contains(&c))
            {
                return Err(StoreError::retryable(format!(
                    "parking an event of {id}: TransactWriteItems cancelled: {}",
                    tc.message().unwrap_or_default()
                )));
            }
        }
        Err(sdk_error("TransactWriteItems", err))
    }

    pub(super) async fn parked_events_of(
        &self,
        id: &str,
        after: u64,
        through: u64,
    ) -> Result<Vec<ParkedEvent>, StoreError> {
        let numbers: Vec<u64> = parked::page(after, through).collect();
        if numbers.is_empty() {
            return Ok(Vec::new());
        }
        let mut wanted = KeysAndAttributes::builder().consistent_read(true);
        for number in &numbers {
            wanted = wanted.keys(key(parked::row_key(id, *number)));
        }
        let wanted = wanted.build().map_err(build_err)?;
        let request = HashMap::from([(self.tables.counters.clone(), wanted)]);
        let mut found: HashMap<String, Item> = HashMap::new();
        for items in self.batch_get(request).await?.into_values() {
            for item in items {
                if let Some(AttributeValue::S(k)) = item.get("id") {
                    found.insert(k.clone(), item);
                }
            }
        }
        let mut events = Vec::with_capacity(found.len());
        for number in numbers {
            let Some(item) = found.get(&parked::row_key(id, number)) else {
                continue;
            };
            let what = format!("parked event {number} of {id}");
            let event = Event::from_json(req_s(item, EVENT, &what)?)
                .map_err(|e| corrupt(what.clone(), Corruption::Record(e)))?;
            events.push(ParkedEvent { number, event });
        }
        Ok(events)
    }
}
