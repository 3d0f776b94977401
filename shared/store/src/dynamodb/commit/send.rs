//! One attempt of a commit: send the [`Plan`] (a `TransactWriteItems`, or a `PutItem`
//! when the execution put is the whole commit) and classify what came back ([`Attempt`]).

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{CancellationReason, ReturnValuesOnConditionCheckFailure, TransactWriteItem};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;

use super::plan::Plan;
use crate::dynamodb::item::Item;
use crate::dynamodb::{DynamoDbStore, TRANSIENT_CODES, TRANSIENT_REASONS};
use crate::{CancelReason, CancelledAction, Refusal, StoreError, Unstorable};
use stm_aws::Readable;

/// Cancellation reason codes of an action DynamoDB refuses as invalid: `ValidationError`
/// (AWS: an item too large, a number overflow, a type mismatch, ... see
/// `TransactionCanceledException` in the DynamoDB API reference) and `ValidationException`
/// (moto's spelling). The same transaction is refused every time.
const VALIDATION_REASONS: &[&str] = &["ValidationError", "ValidationException"];

/// What one attempt of a commit came to.
pub(super) enum Attempt {
    Done,
    /// The CAS failed; the stored item if DynamoDB returned it.
    Conflict(Option<Item>),
    /// The trace put's slot was already taken (a stale trace hint).
    TraceSlotTaken,
    /// A row's seq was taken by another commit's row.
    SeqTaken,
    /// A transient failure. `maybe_applied`: the write may have landed (a timeout, a 5xx),
    /// so the retry must be the identical request (same token); otherwise it was
    /// definitely refused and the retry is a new request (new token).
    Retry {
        msg: String,
        maybe_applied: bool,
    },
    Fail(StoreError),
}

impl DynamoDbStore {
    /// Send the commit once.
    pub(super) async fn send_commit(&self, plan: &Plan) -> Attempt {
        if let Some(put) = &plan.single_put {
            let result = self
                .client
                .put_item()
                .table_name(put.table_name())
                .set_item(Some(put.item().clone()))
                .set_condition_expression(put.condition_expression().map(str::to_string))
                .set_expression_attribute_values(put.expression_attribute_values().cloned())
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                .send()
                .await;
            return match result {
                Ok(_) => Attempt::Done,
                Err(err) => match err.as_service_error() {
                    Some(PutItemError::ConditionalCheckFailedException(e)) => {
                        Attempt::Conflict(e.item().cloned())
                    }
                    _ => classify("PutItem", err),
                },
            };
        }
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(plan.tx.clone()))
            .client_request_token(&plan.token)
            .send()
            .await;
        let err = match result {
            Ok(_) => return Attempt::Done,
            Err(err) => err,
        };
        match err.as_service_error() {
            Some(TransactWriteItemsError::TransactionCanceledException(tc)) => {
                let reasons = tc.cancellation_reasons();
                let code = |i: usize| reasons.get(i).and_then(|r| r.code()).unwrap_or("None");
                let listed: Vec<&str> = (0..reasons.len()).map(code).collect();
                let msg = format!(
                    "TransactWriteItems cancelled [{}]: {}",
                    listed.join(", "),
                    tc.message().unwrap_or_default()
                );
                if code(0) == "ConditionalCheckFailed" {
                    Attempt::Conflict(reasons.first().and_then(|r| r.item()).cloned())
                } else if listed.iter().any(|c| VALIDATION_REASONS.contains(c)) {
                    // never transient, whatever else the reasons say
                    let reasons = cancel_reasons(&plan.tx, reasons);
                    Attempt::Fail(StoreError::TooLarge(Unstorable::Invalid {
                        refusal: Refusal::Cancelled { reasons },
                        source: Some(Box::new(err)),
                    }))
                } else if plan
                    .trace_positions
                    .iter()
                    .any(|p| code(*p) == "ConditionalCheckFailed")
                {
                    Attempt::TraceSlotTaken
                } else if plan
                    .row_positions
                    .iter()
                    .any(|p| code(*p) == "ConditionalCheckFailed")
                {
                    Attempt::SeqTaken
                } else if listed.iter().any(|c| *c != "None")
                    && listed
                        .iter()
                        .all(|c| *c == "None" || TRANSIENT_REASONS.contains(c))
                {
                    // cancelled: nothing was written, the next try is a new transaction
                    Attempt::Retry {
                        msg,
                        maybe_applied: false,
                    }
                } else {
                    Attempt::Fail(StoreError::backend(msg))
                }
            }
            // raised by older emulators instead of a cancellation; by DynamoDB when the
            // token was used for a different transaction (another writer's commit of the
            // same version): both mean the CAS was lost
            Some(other)
                if matches!(
                    other.code(),
                    Some("ConditionalCheckFailedException" | "IdempotentParameterMismatchException")
                ) =>
            {
                Attempt::Conflict(None)
            }
            _ => classify("TransactWriteItems", err),
        }
    }
}

/// The reasons of a cancelled transaction, each with the action it is about: what an
/// [`Unstorable::Invalid`] names (`TransactWriteItems cancelled [None, ValidationError]:
/// action 2 (Put on t_timers): ValidationError: Number overflow. ...`).
fn cancel_reasons(tx: &[TransactWriteItem], reasons: &[CancellationReason]) -> Vec<CancelReason> {
    reasons
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let action = tx.get(i).map(|a| {
                let (kind, table) = if let Some(p) = a.put() {
                    ("Put", p.table_name())
                } else if let Some(d) = a.delete() {
                    ("Delete", d.table_name())
                } else if let Some(u) = a.update() {
                    ("Update", u.table_name())
                } else if let Some(c) = a.condition_check() {
                    ("ConditionCheck", c.table_name())
                } else {
                    ("an action", "")
                };
                CancelledAction::new(kind, table)
            });
            CancelReason::new(
                r.code().map(str::to_string),
                r.message().map(str::to_string),
                action,
            )
        })
        .collect()
}

/// A failed call that is not a cancellation or a lost CAS: a `ValidationException` is
/// never retried (the same request is refused every time), a 5xx or a transaction in
/// progress may have been applied, throttling and conflicts were refused before any write.
fn classify<E>(op: &'static str, err: SdkError<E, HttpResponse>) -> Attempt
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let Some(service) = err.as_service_error() else {
        return classify_other(op, &err);
    };
    let code = service.code();
    let message = Readable(service).to_string();
    if code == Some("ValidationException") {
        // the request as it is: the same one is refused every time
        return Attempt::Fail(StoreError::TooLarge(Unstorable::Invalid {
            refusal: Refusal::Call { op, message },
            source: Some(Box::new(err)),
        }));
    }
    let msg = format!("{op}: {message}");
    let server_error = err
        .raw_response()
        .is_some_and(|raw| raw.status().is_server_error());
    if server_error || code == Some("TransactionInProgressException") {
        // the request may have been (or is being) applied
        Attempt::Retry {
            msg,
            maybe_applied: true,
        }
    } else if code.is_some_and(|c| TRANSIENT_CODES.contains(&c)) {
        // throttled or conflicting: refused before any write
        Attempt::Retry {
            msg,
            maybe_applied: false,
        }
    } else {
        Attempt::Fail(StoreError::backend(msg))
    }
}

/// A call that got no answer from the service (a timeout, a dropped connection, ...).
fn classify_other<E>(op: &str, err: &SdkError<E, HttpResponse>) -> Attempt
where
    E: std::error::Error + ProvideErrorMetadata + 'static,
{
    let msg = format!("{op}: {}", Readable(err));
    match err {
        // the request may or may not have been applied: the retry is idempotent (token)
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            Attempt::Retry {
                msg,
                maybe_applied: true,
            }
        }
        _ => Attempt::Fail(StoreError::backend(msg)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::Put;

    use crate::dynamodb::item::s;

    fn put(table: &str) -> TransactWriteItem {
        let put = Put::builder()
            .table_name(table)
            .item("id", s("x"))
            .build()
            .expect("a put");
        TransactWriteItem::builder().put(put).build()
    }

    fn refused_actions(tx: &[TransactWriteItem], reasons: &[CancellationReason]) -> String {
        Refusal::Cancelled {
            reasons: cancel_reasons(tx, reasons),
        }
        .to_string()
    }

    #[test]
    fn a_refused_transaction_names_each_refused_action_in_dynamodbs_words() {
        let tx = vec![put("t_executions"), put("t_processed"), put("t_timers")];
        let reasons = vec![
            CancellationReason::builder().code("None").build(),
            CancellationReason::builder().build(),
            CancellationReason::builder()
                .code("ValidationError")
                .message("Number overflow. Attempting to store a number with magnitude larger than supported range")
                .build(),
        ];
        assert_eq!(
            refused_actions(&tx, &reasons),
            "TransactWriteItems cancelled [None, None, ValidationError]: action 3 (Put on t_timers): \
             ValidationError: Number overflow. Attempting to store a number with magnitude larger \
             than supported range"
        );
        // more reasons than actions (an emulator's answer): still every reason, no panic
        let reasons = vec![
            CancellationReason::builder().code("None").build(),
            CancellationReason::builder().code("ValidationException").build(),
        ];
        assert_eq!(
            refused_actions(&tx[..1], &reasons),
            "TransactWriteItems cancelled [None, ValidationException]: action 2: ValidationException"
        );
    }
}
