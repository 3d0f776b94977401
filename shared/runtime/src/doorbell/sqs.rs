//! Doorbells over SQS (feature `aws`): [`SqsDoorbell`], the standard queue the worker
//! rings, and [`handle_doorbells`], the sweeper's handler for the batches that queue
//! triggers it with.

use async_trait::async_trait;
use stm_store::DueTimer;

use super::{delay_seconds, doorbell_body, Doorbell};
use crate::config::ConfigError;
use crate::queue::{sqs_message_bytes, BatchSize, MAX_MESSAGE_BYTES};

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

    /// This doorbell queue as a [`Queue`](crate::queue::Queue), for [`handle_doorbells`](crate::doorbell::handle_doorbells) to re-delay an early
    /// doorbell (`ChangeMessageVisibility`).
    pub fn queue(&self) -> crate::queue::SqsQueue {
        crate::queue::SqsQueue::new(self.client.clone(), self.url.clone())
    }

    /// Create the standard doorbell queue `name` if missing (the local stack and tests;
    /// `template.yaml` declares it on AWS). Returns its URL; a queue that cannot be created
    /// is the deployment's problem, a configuration error.
    pub async fn ensure(client: &aws_sdk_sqs::Client, name: &str) -> Result<String, ConfigError> {
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
                    stm_aws::Readable(&e)
                );
                ConfigError::Deployment {
                    message,
                    source: Some(Box::new(e)),
                }
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
                    tracing::warn!(error = %stm_aws::Readable(&err), "timer doorbells not sent; the sweep will fire the timers");
                    failed += chunk.len();
                }
            }
        }
        failed
    }
}
