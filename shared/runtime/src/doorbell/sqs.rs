//! Doorbells over SQS (feature `aws`): [`SqsDoorbell`], the standard queue the worker
//! rings, and [`handle_doorbells`], the sweeper's handler for the batches that queue
//! triggers it with.

use async_trait::async_trait;
use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use stm_store::{DueTimer, ExecutionStore};

use super::{answer, delay_seconds, doorbell_body, parse_doorbell, Answered, Doorbell};
use crate::driver::DriverError;
use crate::queue::{sqs_message_bytes, BatchSize, Queue, MAX_MESSAGE_BYTES};
use crate::sweeper::SweepSummary;

/// Doorbells on a standard SQS queue (`DelaySeconds` per message).
#[derive(Clone, Debug)]
pub struct SqsDoorbell {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl SqsDoorbell {
    pub fn new(client: aws_sdk_sqs::Client, url: impl Into<String>) -> Self {
        SqsDoorbell {
            client,
            url: url.into(),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// This doorbell queue as a [`Queue`], for [`handle_doorbells`] to re-delay an early
    /// doorbell (`ChangeMessageVisibility`).
    pub fn queue(&self) -> crate::queue::SqsQueue {
        crate::queue::SqsQueue::new(self.client.clone(), self.url.clone())
    }

    /// Create the standard doorbell queue `name` if missing (the local stack and tests;
    /// `template.yaml` declares it on AWS). Returns its URL.
    pub async fn ensure(client: &aws_sdk_sqs::Client, name: &str) -> Result<String, DriverError> {
        use aws_sdk_sqs::types::QueueAttributeName;
        let out = client
            .create_queue()
            .queue_name(name)
            .attributes(QueueAttributeName::VisibilityTimeout, "30")
            .attributes(QueueAttributeName::MessageRetentionPeriod, "3600")
            .send()
            .await
            .map_err(|e| {
                let message = format!(
                    "cannot create the timer doorbell queue {name}: {}",
                    stm_store::aws::Readable(&e)
                );
                DriverError::from(crate::config::ConfigError::Deployment {
                    message,
                    source: Some(Box::new(e)),
                })
            })?;
        Ok(out.queue_url().unwrap_or_default().to_string())
    }
}

#[async_trait]
impl Doorbell for SqsDoorbell {
    async fn ring(&self, timers: &[DueTimer], now: f64) -> usize {
        use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
        let mut failed = 0;
        // requests cut by count and bytes with the event queue's rule (`BatchSize`); a
        // doorbell is a few hundred bytes, one over SQS's message limit is not sent (the
        // sweep fires its timer)
        let mut chunks: Vec<Vec<(&DueTimer, String)>> = Vec::new();
        let mut size = BatchSize::default();
        for timer in timers {
            let body = doorbell_body(timer);
            let bytes = sqs_message_bytes(body.len(), false);
            if bytes > MAX_MESSAGE_BYTES {
                tracing::warn!(execution_id = %timer.execution_id, bytes, "a timer doorbell is too large to send; the sweep will fire the timer");
                failed += 1;
                continue;
            }
            if chunks.is_empty() || !size.admits(bytes) {
                chunks.push(Vec::new());
                size = BatchSize::default();
            }
            size.add(bytes);
            if let Some(chunk) = chunks.last_mut() {
                chunk.push((timer, body));
            }
        }
        for chunk in chunks {
            let entries: Vec<SendMessageBatchRequestEntry> = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, (timer, body))| {
                    SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(body)
                        .delay_seconds(delay_seconds(timer.fire_at, now))
                        .build()
                        .ok()
                })
                .collect();
            failed += chunk.len() - entries.len();
            match self
                .client
                .send_message_batch()
                .queue_url(&self.url)
                .set_entries(Some(entries))
                .send()
                .await
            {
                Ok(out) => {
                    for f in out.failed() {
                        tracing::warn!(code = %f.code(), error = ?f.message(), "a timer doorbell was not sent; the sweep will fire the timer");
                    }
                    failed += out.failed().len();
                }
                Err(err) => {
                    tracing::warn!(error = %stm_store::aws::Readable(&err), "timer doorbells not sent; the sweep will fire the timers");
                    failed += chunk.len();
                }
            }
        }
        failed
    }
}

/// The sweeper's handler for a batch of doorbells (its SQS trigger). A record that could
/// not be handled (a store error, not due yet) is reported in `batchItemFailures` and
/// retried; a malformed one is logged and dropped: the sweep fires every armed timer anyway.
///
/// A doorbell that arrived early (a clock behind, a delay cut to SQS's 15 minutes) is
/// re-delayed on `doorbells`, the queue it came from, until its `fire_at`
/// (`ChangeMessageVisibility`), instead of coming back only after the queue's visibility
/// timeout: Lambda returns a failed record to the queue as it is, visible again when its
/// visibility timeout ends. Without `doorbells` it waits that timeout out.
///
/// The records are answered at once, not one after another: each waits out its own
/// sub-second remainder, so one record's wait (up to a second) or calls never make a
/// record due earlier in the same batch late.
pub async fn handle_doorbells(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    event: &SqsEvent,
    now: &(dyn Fn() -> f64 + Send + Sync),
    doorbells: Option<&dyn Queue>,
) -> (SqsBatchResponse, SweepSummary) {
    stm_store::aws::as_function("sweeper", async {
        let mut timers = Vec::new();
        for record in &event.records {
            let id = (
                record.message_id.clone().unwrap_or_default(),
                record.receipt_handle.clone().unwrap_or_default(),
            );
            match parse_doorbell(record.body.as_deref().unwrap_or_default()) {
                Ok(timer) => timers.push((id, timer)),
                Err(why) => {
                    tracing::error!(message_id = %id.0, reason = %why, "malformed timer doorbell dropped (the sweep fires armed timers)");
                }
            }
        }
        // earliest first: with the waits running together this only orders their calls
        // when several are due at the same moment
        timers.sort_by(|a, b| a.1.fire_at.total_cmp(&b.1.fire_at));
        let answers = futures_util::future::join_all(timers.iter().map(|((id, receipt), timer)| async move {
            let mut summary = SweepSummary::default();
            let answered = answer(store, queue, timer, now, &mut summary).await;
            if let (Ok(Answered::NotDue), Some(doorbells)) = (&answered, doorbells) {
                redelay(doorbells, id, receipt, timer, now()).await;
            }
            (id, answered, summary)
        }))
        .await;
        let mut response = SqsBatchResponse::default();
        let mut summary = SweepSummary::default();
        let mut stale = 0usize;
        for (id, answered, one) in answers {
            match answered {
                Ok(Answered::Handled) if one.failed == 0 => {}
                Ok(Answered::Stale) => stale += 1,
                Ok(_) | Err(_) => {
                    let mut failure = BatchItemFailure::default();
                    failure.item_identifier = id.clone();
                    response.batch_item_failures.push(failure);
                }
            }
            summary.due += one.due;
            summary.fired += one.fired;
            summary.suspended += one.suspended;
            summary.orphaned += one.orphaned;
            summary.failed += one.failed;
        }
        tracing::info!(
            doorbells = event.records.len(),
            fired = summary.fired,
            stale,
            failed = response.batch_item_failures.len(),
            "timer doorbells"
        );
        (response, summary)
    })
    .await
}

/// Make an early doorbell visible again at its timer's `fire_at` (rounded up to SQS's whole
/// seconds, so never before it). A failure leaves it to the queue's visibility timeout.
async fn redelay(doorbells: &dyn Queue, message_id: &str, receipt_handle: &str, timer: &DueTimer, now: f64) {
    let seconds = (timer.fire_at - now).ceil().clamp(1.0, MAX_REDELAY_SECONDS) as i32;
    if let Err(err) = doorbells.change_visibility(receipt_handle, seconds).await {
        tracing::warn!(message_id = %message_id, error = %err, "an early timer doorbell could not be re-delayed; it comes back after the queue's visibility timeout");
    }
}

/// SQS's longest visibility timeout (12 hours); a doorbell is never more than its 15-minute
/// delay early unless a clock is far off.
const MAX_REDELAY_SECONDS: f64 = 43_200.0;
