//! The state index on DynamoDB: which executions are in a state now, at a cost that grows
//! with the matches, not the table.
//!
//! # The index
//!
//! Every execution item we write that is not DONE or CANCELLED carries
//! [`STATE_KEY_ATTRIBUTE`] (`state_key`, S: `{definition_id}#{state path}#{shard}`) and
//! [`STATE_SINCE_ATTRIBUTE`] (`state_since`, N: when it entered that state), in the same
//! `Put` of the same commit (no extra call). The `executions` table has a global secondary
//! index [`STATE_INDEX`] (`state_index`): partition key `state_key`, sort key
//! `state_since`, projection `KEYS_ONLY` (an entry is `id, state_key, state_since`). It is
//! **sparse**: a DONE or CANCELLED execution's item has no `state_key`, nor has one harel
//! wrote, so neither is in it.
//!
//! While the index is small (at most [`SMALL_STATE_INDEX`] entries) a look reads it whole:
//! one `Scan` page of the index, its entries filtered here. That is one request and ~13
//! read units at most, where the shards of one state are 512 requests: `stm states` on
//! `stm local` with ten executions took 16.7 s of shard queries (12 states) and takes one
//! request. A page that does not end the index (a `LastEvaluatedKey`) says it is larger:
//! the shards are queried, and the probe cost one page. A caller whose policy grants only
//! `Query` gets the shard queries.
//!
//! A query for a state runs one `Query` per shard, in parallel:
//! `state_key = :k [AND state_since <= :by]`, following `LastEvaluatedKey`. It reads only
//! the entries of that state (and age), so its cost is the matches plus one request per
//! shard. A prefix (`Fulfil`) is the machine's states under it, each queried exactly: the
//! caller knows them from the definition.
//!
//! # Writes, and why shards
//!
//! A GSI is written only when a table write changes the item's index key (or projected)
//! attributes, and a change of an index key value takes two index writes, the old entry's
//! delete and the new one's put (AWS, "Provisioned throughput considerations for global
//! secondary indexes", <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html>).
//! So an execution that stays in its state costs the index nothing, and a state change
//! costs two writes: one on the old state's partition, one on the new one's. As with the
//! timers' due index, one partition key value per state would put every execution entering
//! or leaving that state on one partition (1,000 writes/s, and a sort key that only grows,
//! which a split for heat does not help); and a throttled index throttles the commits.
//! [`STATE_SHARDS`] (512) hash shards of each state take 512,000 writes/s. The hardest case
//! is every event moving its execution between the same two states: each state then takes
//! one write per event. The scale simulator's `state churn` workload is exactly that
//! (`bash scripts/scale.sh`, 2026-12-04): its hottest index key, at 100,000 events/s
//! offered (50,231 served), was at 56.2% of a partition's limit with 256 shards and 35.9%
//! with 512 (9.1% at 10,000 events/s). A query pays for the shards: one request per shard
//! of each state asked about (0.5 read units each at least), 128 at a time: `stm states`
//! on a machine of 8 states is 4,096 small requests.
//!
//! # Consistency
//!
//! GSI reads are eventually consistent: an execution that left a state an instant ago may
//! still be listed in it. A caller that acts on an answer re-reads each execution (a
//! strongly consistent `GetItem` or `BatchGetItem`) and checks its state again, as
//! `stm`'s bulk actions do.

use aws_sdk_dynamodb::Client;
use sha2::{Digest, Sha256};

use super::item::{get_f64, get_s, n_f64, req_s, s, Item};
use super::schema::{STATE_INDEX, STATE_KEY_ATTRIBUTE, STATE_SHARDS, STATE_SINCE_ATTRIBUTE};
use super::{sdk_error, DynamoDbStore, RetryPolicy};
use crate::states::StateEntry;
use crate::{InState, StoreError};

/// The shard of execution `id` in the state index (`0 .. STATE_SHARDS`): stable for an id,
/// so its entry stays on one shard of whatever state it is in.
fn state_shard(id: &str) -> u64 {
    let digest = Sha256::digest(id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first) % u64::from(STATE_SHARDS)
}

/// The [`STATE_INDEX`] partition key of `shard` of state `path` of machine `definition_id`:
/// what a look at that state queries (the scale simulator's meter charges it there).
pub fn state_key(definition_id: &str, path: &str, shard: u64) -> String {
    format!("{definition_id}#{path}#{shard}")
}

/// The [`STATE_INDEX`] partition key a commit of `exe` files it under (`None`: it is not
/// in the index): what the scale simulator's meter charges an index write to.
pub fn state_index_key(exe: &stm_core::Execution) -> Option<String> {
    let entry = StateEntry::at_commit(exe, None, 0.0)?;
    Some(state_key(&entry.definition_id, &entry.path, state_shard(&exe.id)))
}

/// How many shard queries a state query runs at once.
const QUERY_CONCURRENCY: usize = 128;

/// Up to how many entries the state index is read whole instead of by shards: one `Scan`
/// page of up to 1,000 entries of ~100 bytes reads ~100 KB (about 13 read units,
/// eventually consistent), where the shard queries of one state are 512 requests (256
/// units at least) whatever they find.
pub const SMALL_STATE_INDEX: i32 = 1_000;

impl StateEntry {
    /// The entry's attributes on the item of execution `id`.
    pub(super) fn to_attributes(
        &self,
        id: &str,
    ) -> Result<[(String, aws_sdk_dynamodb::types::AttributeValue); 2], StoreError> {
        Ok([
            (
                STATE_KEY_ATTRIBUTE.to_string(),
                s(state_key(&self.definition_id, &self.path, state_shard(id))),
            ),
            (
                STATE_SINCE_ATTRIBUTE.to_string(),
                n_f64(STATE_SINCE_ATTRIBUTE, self.since)?,
            ),
        ])
    }

    /// The entry an execution item holds (`None`: none, or one this build cannot read,
    /// which the next commit then writes afresh).
    pub(super) fn of_item(item: &Item) -> Option<StateEntry> {
        let key = get_s(item, STATE_KEY_ATTRIBUTE)?;
        let since = get_f64(item, STATE_SINCE_ATTRIBUTE)?;
        let (rest, _shard) = key.rsplit_once('#')?;
        let (definition_id, path) = rest.split_once('#')?;
        Some(StateEntry {
            definition_id: definition_id.to_string(),
            path: path.to_string(),
            since,
        })
    }
}

impl DynamoDbStore {
    /// [`ExecutionStore::in_states`](crate::ExecutionStore::in_states): one `Query` per
    /// shard of each path, [`QUERY_CONCURRENCY`] at a time.
    pub(super) async fn query_states(
        &self,
        definition_id: &str,
        paths: &[String],
        entered_by: Option<f64>,
    ) -> Result<Vec<InState>, StoreError> {
        use futures_util::stream::{self, StreamExt as _, TryStreamExt as _};
        if let Some(mut found) = self.whole_small_index(definition_id, paths, entered_by).await {
            crate::states::sort_found(&mut found, paths);
            return Ok(found);
        }
        let mut queries = Vec::with_capacity(paths.len() * STATE_SHARDS as usize);
        for path in paths {
            for shard in 0..u64::from(STATE_SHARDS) {
                queries.push((path.clone(), state_key(definition_id, path, shard)));
            }
        }
        let pages: Vec<Vec<InState>> = stream::iter(queries)
            .map(|(path, key)| {
                query_shard(
                    self.client.clone(),
                    self.tables.executions.clone(),
                    key,
                    path,
                    entered_by,
                    self.retry,
                )
            })
            .buffer_unordered(QUERY_CONCURRENCY)
            .try_collect()
            .await?;
        let mut found: Vec<InState> = pages.into_iter().flatten().collect();
        crate::states::sort_found(&mut found, paths);
        Ok(found)
    }
}

impl DynamoDbStore {
    /// The matches, read from one `Scan` page of the whole index when the index holds at
    /// most [`SMALL_STATE_INDEX`] entries (the page then ends it); `None` when it holds more, or
    /// the scan fails (the caller's policy may grant only `Query`): the shards are queried.
    async fn whole_small_index(
        &self,
        definition_id: &str,
        paths: &[String],
        entered_by: Option<f64>,
    ) -> Option<Vec<InState>> {
        if self.small_state_index == 0 {
            return None;
        }
        let page = self
            .client
            .scan()
            .table_name(&self.tables.executions)
            .index_name(STATE_INDEX)
            .limit(self.small_state_index)
            .send()
            .await;
        let page = match page {
            Ok(page) if page.last_evaluated_key().is_none_or(|key| key.is_empty()) => page,
            Ok(_) => return None,
            Err(err) => {
                tracing::debug!(error = %stm_aws::Readable(&err), "the state index's scan failed: querying its shards");
                return None;
            }
        };
        let mut found = Vec::new();
        for item in page.items() {
            let Some(entry) = StateEntry::of_item(item) else {
                continue;
            };
            let wanted = entry.definition_id == definition_id && paths.contains(&entry.path);
            if !wanted || entered_by.is_some_and(|by| entry.since > by) {
                continue;
            }
            let Some(id) = get_s(item, "id") else {
                continue;
            };
            found.push(InState {
                id: id.to_string(),
                path: entry.path,
                since: entry.since,
            });
        }
        Some(found)
    }
}

/// Every entry of one shard of one state (`key`), entered at or before `entered_by`.
async fn query_shard(
    client: Client,
    table: String,
    key: String,
    path: String,
    entered_by: Option<f64>,
    retry: RetryPolicy,
) -> Result<Vec<InState>, StoreError> {
    let mut out = Vec::new();
    let mut start: Option<Item> = None;
    let by = entered_by.map(|by| n_f64("entered_by", by)).transpose()?;
    loop {
        let mut attempt = 1;
        let page = loop {
            let mut query = client
                .query()
                .table_name(&table)
                .index_name(STATE_INDEX)
                .expression_attribute_names("#k", STATE_KEY_ATTRIBUTE)
                .expression_attribute_values(":k", s(&key))
                .set_exclusive_start_key(start.clone());
            query = match &by {
                Some(by) => query
                    .key_condition_expression("#k = :k AND #t <= :by")
                    .expression_attribute_names("#t", STATE_SINCE_ATTRIBUTE)
                    .expression_attribute_values(":by", by.clone()),
                None => query.key_condition_expression("#k = :k"),
            };
            match query.send().await {
                Ok(page) => break page,
                Err(err) if super::due::index_missing(&err) => {
                    return Err(StoreError::backend(format!(
                        "the executions table {table} has no {STATE_INDEX} this caller may read ({}): \
                         a table made by harel or before the index needs it added, and the caller \
                         the template's OperatorPolicy (the book's deploy chapter)",
                        stm_aws::Readable(&err)
                    )));
                }
                Err(err) => {
                    let err = sdk_error("Query", err);
                    if matches!(err, StoreError::Retryable { .. }) && attempt < retry.max_attempts.max(1) {
                        tokio::time::sleep(retry.backoff(attempt)).await;
                        attempt += 1;
                        continue;
                    }
                    return Err(err);
                }
            }
        };
        for item in page.items() {
            out.push(InState {
                id: req_s(item, "id", "state index entry")?.to_string(),
                path: path.clone(),
                since: get_f64(item, STATE_SINCE_ATTRIBUTE).unwrap_or(0.0),
            });
        }
        match page.last_evaluated_key() {
            Some(last) if !last.is_empty() => start = Some(last.clone()),
            _ => return Ok(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_round_trips_through_its_attributes() {
        let entry = StateEntry {
            definition_id: "Order".into(),
            path: "Fulfil.Payment.Charging".into(),
            since: 1_700_000_000.25,
        };
        let item: Item = entry
            .to_attributes("order-1")
            .expect("attributes")
            .into_iter()
            .collect();
        assert_eq!(StateEntry::of_item(&item), Some(entry));
        let key = get_s(&item, STATE_KEY_ATTRIBUTE).expect("key");
        assert!(key.starts_with("Order#Fulfil.Payment.Charging#"), "{key}");
    }

    #[test]
    fn shards_are_stable_and_spread() {
        assert_eq!(state_shard("order-1"), state_shard("order-1"));
        let used: std::collections::BTreeSet<u64> =
            (0..20_000).map(|i| state_shard(&format!("e-{i}"))).collect();
        assert_eq!(used.len(), STATE_SHARDS as usize, "20,000 ids use every shard");
    }
}
