//! Lambda's event types at the boundary: an SQS event becomes the runtime's [`Record`]s,
//! the failed message ids become the partial-batch response, and the context's deadline
//! becomes an [`Instant`]. Nothing below this crate knows these types.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use aws_lambda_events::eventbridge::EventBridgeEvent;
pub use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};

use aws_lambda_events::sqs::{BatchItemFailure, SqsMessage, SqsMessageAttribute};
use stm_runtime::queue::{ReceivedMessage, MESSAGE_KIND_ATTRIBUTE};
use stm_runtime::sweeper::SweepSummary;
use stm_runtime::telemetry::{self, TraceContext, AWS_TRACE_HEADER, TRACEPARENT_ATTRIBUTE};
use stm_runtime::{Queue, Record, Worker};
use stm_store::ExecutionStore;

/// A record of the SQS event Lambda delivers. A message without a receive count (a
/// hand-written sample) counts as its first delivery.
pub fn record_from_sqs(message: &SqsMessage) -> Record {
    Record {
        message_id: message.message_id.clone().unwrap_or_default(),
        receipt_handle: message.receipt_handle.clone(),
        body: message.body.clone().unwrap_or_default(),
        group_id: message.attributes.get("MessageGroupId").cloned(),
        kind: message
            .message_attributes
            .get(MESSAGE_KIND_ATTRIBUTE)
            .and_then(|a| a.string_value.clone()),
        receive_count: message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|n| n.parse().ok())
            .unwrap_or(1),
        trace: trace_of(message),
    }
}

/// The trace context a Lambda SQS record carries: its `traceparent` message attribute,
/// else the `AWSTraceHeader` system attribute a traced sender (or Lambda) set.
fn trace_of(message: &SqsMessage) -> Option<TraceContext> {
    let traceparent: BTreeMap<String, String> = message
        .message_attributes
        .get(TRACEPARENT_ATTRIBUTE)
        .and_then(|a| a.string_value.clone())
        .map(|v| (TRACEPARENT_ATTRIBUTE.to_string(), v))
        .into_iter()
        .collect();
    let system: BTreeMap<String, String> = message
        .attributes
        .get(AWS_TRACE_HEADER)
        .map(|v| (AWS_TRACE_HEADER.to_string(), v.clone()))
        .into_iter()
        .collect();
    telemetry::carried(&traceparent, &system)
}

/// The records of an SQS event, in the event's order (FIFO order within each group).
pub fn records(event: &SqsEvent) -> Vec<Record> {
    event.records.iter().map(record_from_sqs).collect()
}

/// The partial-batch response that reports `failed_ids` (map it with
/// `ReportBatchItemFailures`): Lambda deletes every other record of the batch.
pub fn batch_response(failed_ids: Vec<String>) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    for id in failed_ids {
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = id;
        response.batch_item_failures.push(failure);
    }
    response
}

/// The event Lambda's SQS event source builds for a batch of received messages: what the
/// tests and the smoke run hand a function as Lambda would.
pub fn sqs_event(messages: &[ReceivedMessage], queue_arn: &str) -> SqsEvent {
    let mut event = SqsEvent::default();
    for m in messages {
        let mut record = SqsMessage::default();
        record.message_id = Some(m.message_id.clone());
        record.receipt_handle = Some(m.receipt_handle.clone());
        record.body = Some(m.body.clone());
        record.attributes = m.attributes.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (name, value) in &m.message_attributes {
            let mut attr = SqsMessageAttribute::default();
            attr.string_value = Some(value.clone());
            attr.data_type = Some("String".into());
            record.message_attributes.insert(name.clone(), attr);
        }
        record.event_source = Some("aws:sqs".into());
        record.event_source_arn = Some(queue_arn.to_string());
        record.aws_region = Some("us-east-1".into());
        event.records.push(record);
    }
    event
}

/// The worker handler's body: an SQS event in, the partial-batch response out; no record
/// is started with less than a record's reserve left before `deadline`
/// ([`deadline_from_epoch_millis`]; `None`: no deadline).
///
/// ```no_run
/// # async fn example(worker: &stm_runtime::Worker, event: aws_lambda_events::sqs::SqsEvent) {
/// let response = stm_lambda::handle_sqs_event(worker, event, None).await;
/// for failure in &response.batch_item_failures {
///     println!("{} comes back for another try", failure.item_identifier);
/// }
/// # }
/// ```
pub async fn handle_sqs_event(
    worker: &Worker,
    event: SqsEvent,
    deadline: Option<Instant>,
) -> SqsBatchResponse {
    batch_response(worker.handle_invocation(&records(&event), deadline).await)
}

/// The sweeper's doorbell handler body: a batch of precise-timer doorbells in, the
/// partial-batch response and what was fired out. An early doorbell is re-delayed on
/// `doorbells`, the queue it came from.
pub async fn handle_doorbell_event(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    event: &SqsEvent,
    now: &(dyn Fn() -> f64 + Send + Sync),
    doorbells: Option<&dyn Queue>,
) -> (SqsBatchResponse, SweepSummary) {
    let (failed, summary) =
        stm_runtime::doorbell::handle_doorbells(store, queue, &records(event), now, doorbells).await;
    (batch_response(failed), summary)
}

/// The invocation deadline Lambda gives as milliseconds since the epoch
/// (`LambdaEvent::context.deadline`), as an [`Instant`] on this machine's clock; `None`
/// for 0 (no deadline known, as in a hand-built context). A deadline already past is now.
pub fn deadline_from_epoch_millis(millis: u64) -> Option<Instant> {
    if millis == 0 {
        return None;
    }
    let deadline = UNIX_EPOCH.checked_add(Duration::from_millis(millis))?;
    let now = Instant::now();
    match deadline.duration_since(SystemTime::now()) {
        // a deadline beyond what an Instant can hold is no deadline at all
        Ok(left) => now.checked_add(left),
        Err(_) => Some(now),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn the_lambda_deadline_becomes_an_instant() {
        assert_eq!(deadline_from_epoch_millis(0), None, "no deadline known");
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default();
        let before = Instant::now();
        let deadline = deadline_from_epoch_millis(now_ms + 10_000).expect("a deadline");
        let left = deadline.saturating_duration_since(before);
        assert!(
            left > Duration::from_millis(9_000) && left <= Duration::from_millis(10_100),
            "{left:?}"
        );
        // already past: now (nothing more is started)
        let past = deadline_from_epoch_millis(now_ms - 5_000).expect("a deadline");
        assert!(past <= Instant::now() && past >= before, "{past:?}");
        // beyond what an Instant holds: no deadline rather than a panic
        let _ = deadline_from_epoch_millis(u64::MAX);
    }

    fn received(id: usize, group: Option<&str>, kind: Option<&str>, receive_count: u32) -> ReceivedMessage {
        let mut attributes = BTreeMap::new();
        if let Some(group) = group {
            attributes.insert("MessageGroupId".to_string(), group.to_string());
        }
        attributes.insert("ApproximateReceiveCount".to_string(), receive_count.to_string());
        attributes.insert("SentTimestamp".to_string(), "1700000000000".to_string());
        let mut message_attributes = BTreeMap::new();
        if let Some(kind) = kind {
            message_attributes.insert(MESSAGE_KIND_ATTRIBUTE.to_string(), kind.to_string());
        }
        message_attributes.insert("other".to_string(), "ignored".to_string());
        ReceivedMessage {
            message_id: format!("m-{id}"),
            receipt_handle: format!("r-{id}"),
            body: format!("{{\"n\": {id}, \"text\": \"é\\n\"}}"),
            group_id: group.map(str::to_string),
            receive_count,
            message_attributes,
            attributes,
        }
    }

    /// The local stack hands the worker `Record::from_received(message)`; Lambda hands it
    /// the record read from its SQS event. The two must be the same record, or a local run
    /// would prove nothing about the deployed worker.
    #[test]
    fn a_record_from_lambdas_event_equals_the_record_the_local_stack_builds() {
        let mut messages = Vec::new();
        for (i, group) in [Some("exec-1"), None, Some("exec-2")].into_iter().enumerate() {
            for (j, kind) in [None, Some("event"), Some("spawn")].into_iter().enumerate() {
                for receive_count in [1, 2, 7] {
                    messages.push(received(
                        100 * i + 10 * j + receive_count as usize,
                        group,
                        kind,
                        receive_count,
                    ));
                }
            }
        }
        let event = sqs_event(&messages, "arn:aws:sqs:us-east-1:123456789012:q.fifo");
        // through JSON, as Lambda delivers it
        let event: SqsEvent =
            serde_json::from_value(serde_json::to_value(&event).expect("to JSON")).expect("from JSON");
        let from_lambda = records(&event);
        let local: Vec<Record> = messages.iter().map(Record::from_received).collect();
        assert_eq!(from_lambda.len(), 27);
        assert_eq!(from_lambda, local);
    }

    #[test]
    fn the_failed_ids_are_the_batch_item_failures_in_order() {
        let response = batch_response(vec!["b".into(), "a".into()]);
        let json = serde_json::to_value(&response).expect("to JSON");
        assert_eq!(
            json,
            serde_json::json!({"batchItemFailures": [{"itemIdentifier": "b"}, {"itemIdentifier": "a"}]})
        );
        assert_eq!(
            serde_json::to_value(batch_response(Vec::new())).expect("to JSON"),
            serde_json::json!({"batchItemFailures": []})
        );
    }
}
