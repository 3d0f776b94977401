//! One timer by its key: the point read of what is armed, and the guarded delete that
//! claims a timer for a `Timeout` (after that read) or removes a swept one, only if it
//! still holds the `fire_at` it was read with.

use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;

use super::item::{get_f64, get_s, missing, n_f64, req_s, s, Item};
use super::rows::TRACE_CONTEXT_ATTRIBUTE;
use super::schema::TIMER_HELD_ATTRIBUTE;
use super::{sdk_error, DynamoDbStore};
use crate::{ArmedTimer, AttributeType, StoreError, TimerClaim};

impl DynamoDbStore {
    /// [`ExecutionStore::delete_timer`](crate::ExecutionStore::delete_timer).
    pub(super) async fn delete_timer_at(&self, id: &str, path: &str, fire_at: f64) -> Result<(), StoreError> {
        // the guarded delete alone: the sweeper read the timer just before, and a timer
        // re-scheduled (or already gone) since is left (a `fire_at` DynamoDB cannot hold is
        // refused there)
        self.guarded_delete(id, path, fire_at).await.map(|_| ())
    }

    /// [`ExecutionStore::armed_timer_in_trace`](crate::ExecutionStore::armed_timer_in_trace):
    /// a consistent `GetItem` of the timer, its `fire_at` and its arming's trace context.
    pub(super) async fn armed_fire_at(
        &self,
        id: &str,
        path: &str,
    ) -> Result<Option<(f64, Option<String>)>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.timers)
            .key("execution_id", s(id))
            .key("path", s(path))
            .projection_expression("fire_at, #t")
            .expression_attribute_names("#t", TRACE_CONTEXT_ATTRIBUTE)
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem", e))?;
        match out.item() {
            None => Ok(None),
            Some(item) => get_f64(item, "fire_at")
                .map(|fire_at| Some((fire_at, get_s(item, TRACE_CONTEXT_ATTRIBUTE).map(str::to_string))))
                .ok_or_else(|| missing(format!("timer {id}/{path}"), "fire_at", AttributeType::Number)),
        }
    }

    /// [`ExecutionStore::timers_of`](crate::ExecutionStore::timers_of): a consistent
    /// `Query` of the execution's partition of `timers` (all pages).
    pub(super) async fn armed_timers_of(&self, id: &str) -> Result<Vec<ArmedTimer>, StoreError> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.tables.timers)
                .consistent_read(true)
                .key_condition_expression("execution_id = :id")
                .projection_expression("#p, fire_at, #h")
                .expression_attribute_names("#p", "path")
                .expression_attribute_names("#h", TIMER_HELD_ATTRIBUTE)
                .expression_attribute_values(":id", s(id))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| sdk_error("Query", e))?;
            for item in page.items() {
                let what = format!("timer of {id}");
                out.push(ArmedTimer {
                    path: req_s(item, "path", &what)?.to_string(),
                    fire_at: get_f64(item, "fire_at")
                        .ok_or_else(|| missing(&what, "fire_at", AttributeType::Number))?,
                    held: item
                        .get(TIMER_HELD_ATTRIBUTE)
                        .is_some_and(|v| matches!(v.as_bool(), Ok(true))),
                });
            }
            match page.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(out),
            }
        }
    }

    /// [`ExecutionStore::claim_timer`](crate::ExecutionStore::claim_timer): a consistent
    /// read of the timer, then, only if it is armed with this `fire_at`, the guarded delete.
    ///
    /// Why read first: a fired timer's row is almost always gone when its `Timeout` is
    /// stepped (the sweeper deletes it right after sending), and a refused conditional
    /// delete bills a write unit where the read bills a read unit, a fifth of the price
    /// on-demand. The read decides nothing it could get wrong: a row absent, or armed with
    /// another `fire_at`, can only be armed again by this execution's own commit, which
    /// the step's commit conflicts with; the one answer that consumes the timer is still
    /// decided by the conditional write.
    pub(super) async fn claim_timer_at(
        &self,
        id: &str,
        path: &str,
        fire_at: f64,
    ) -> Result<TimerClaim, StoreError> {
        // a number DynamoDB cannot hold is no armed timer's `fire_at`: nothing to compare
        if n_f64("fire_at", fire_at).is_err() {
            return Ok(TimerClaim::Unknown);
        }
        match self.armed_fire_at(id, path).await? {
            None => Ok(TimerClaim::Absent),
            Some((armed, _)) if armed != fire_at => Ok(TimerClaim::Rearmed(armed)),
            Some(_) => self.guarded_delete(id, path, fire_at).await,
        }
    }

    /// Delete the timer if it is armed with `fire_at`, returning the item when the guard
    /// fails (`ReturnValuesOnConditionCheckFailure = ALL_OLD`): what is armed instead, or
    /// nothing, decided by the same write.
    async fn guarded_delete(&self, id: &str, path: &str, fire_at: f64) -> Result<TimerClaim, StoreError> {
        let value = n_f64("fire_at", fire_at)?;
        let result = self
            .client
            .delete_item()
            .table_name(&self.tables.timers)
            .key("execution_id", s(id))
            .key("path", s(path))
            .condition_expression("fire_at = :f")
            .expression_attribute_values(":f", value)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(TimerClaim::Claimed),
            Err(err) => {
                if let Some(DeleteItemError::ConditionalCheckFailedException(failed)) = err.as_service_error()
                {
                    return match failed.item() {
                        None => Ok(TimerClaim::Absent),
                        Some(item) => get_f64(item, "fire_at").map(TimerClaim::Rearmed).ok_or_else(|| {
                            missing(format!("timer {id}/{path}"), "fire_at", AttributeType::Number)
                        }),
                    };
                }
                Err(sdk_error("DeleteItem", err))
            }
        }
    }
}
