//! The worker's Lambda entry point (feature `aws`): an SQS event in
//! ([`Record::from_sqs`]), the FIFO batch rule ([`Worker::handle_batch_until`]), the
//! partial-batch response out.

use std::time::Instant;

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};

use super::{Record, Worker};
use crate::queue::MESSAGE_KIND_ATTRIBUTE;

impl Record {
    /// A record of the SQS event Lambda delivers.
    pub fn from_sqs(message: &SqsMessage) -> Self {
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
        }
    }
}

impl Worker {
    /// The Lambda handler's body without a deadline: an SQS event in, the partial-batch
    /// response out.
    pub async fn handle_sqs_event(&self, event: SqsEvent) -> SqsBatchResponse {
        self.handle_sqs_event_until(event, None).await
    }

    /// The Lambda handler's body: an SQS event in, the partial-batch response out; no
    /// record is started with less than `record_reserve` left before `deadline` (the
    /// invocation's, [`super::deadline_from_epoch_millis`]).
    pub async fn handle_sqs_event_until(
        &self,
        event: SqsEvent,
        deadline: Option<Instant>,
    ) -> SqsBatchResponse {
        let records: Vec<Record> = event.records.iter().map(Record::from_sqs).collect();
        let outcome = self.handle_batch_until(&records, deadline).await;
        outcome.metrics().emit();
        let mut response = SqsBatchResponse::default();
        for id in outcome.failed_ids() {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = id;
            response.batch_item_failures.push(failure);
        }
        response
    }
}
