//! The SQS FIFO queue (feature `aws`): [`SqsQueue`], with [`SqsQueue::ensure`] and
//! [`SqsQueue::join`] for the queue's setup. The message contract it sends and parses is
//! the parent module's ([`super::OutgoingMessage`], [`super::plan_batches`]).

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use aws_sdk_sqs::types::{
    MessageAttributeValue, MessageSystemAttributeName, MessageSystemAttributeNameForSends,
    MessageSystemAttributeValue, QueueAttributeName, SendMessageBatchRequestEntry,
};
use serde_json::json;
use stm_core::Value;

use super::QueueError;
use super::{
    plan_batches, OutgoingMessage, PublishFailure, Queue, ReceivedMessage, MAX_BATCH, MAX_MESSAGE_BYTES,
    MESSAGE_KIND_ATTRIBUTE, SPAWN_KIND,
};
use crate::telemetry::TRACEPARENT_ATTRIBUTE;

/// The SQS FIFO queue.
#[derive(Clone, Debug)]
pub struct SqsQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

/// What [`SqsQueue::ensure`] (or [`SqsQueue::join`]) created or found.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueUrls {
    pub queue_url: String,
    /// The dead-letter queue: the one we created, or the one a joined queue's redrive
    /// policy names. Empty when a joined queue has no redrive policy (or its target is
    /// not reachable with these credentials).
    pub dead_letter_url: String,
    /// The queue existed already (harel, a template, an earlier run) and was used as it is.
    pub joined: bool,
    /// How a joined queue differs from what we would have created, where that does not
    /// stop us: one line each, for the operator (also logged at info).
    pub notes: Vec<String>,
}

/// A failed SQS call: the service's readable message, the SDK error as the source.
fn sqs_error<E>(operation: &str, err: E) -> QueueError
where
    E: aws_sdk_sqs::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let message = stm_aws::Readable(&err).to_string();
    QueueError::from_client(operation, message, err)
}

/// The URL of queue `name`, `None` when there is no such queue.
async fn existing_queue_url(client: &aws_sdk_sqs::Client, name: &str) -> Result<Option<String>, QueueError> {
    match client.get_queue_url().queue_name(name).send().await {
        Ok(out) => Ok(out.queue_url().map(str::to_string).filter(|u| !u.is_empty())),
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_queue_does_not_exist()) =>
        {
            Ok(None)
        }
        Err(err) => Err(sqs_error(&format!("GetQueueUrl {name}"), err)),
    }
}

/// All the attributes of the queue at `url`.
async fn queue_attributes(
    client: &aws_sdk_sqs::Client,
    url: &str,
) -> Result<HashMap<QueueAttributeName, String>, QueueError> {
    match client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
    {
        Ok(out) => Ok(out.attributes().cloned().unwrap_or_default()),
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_queue_does_not_exist()) =>
        {
            Err(QueueError::Missing { url: url.to_string() })
        }
        Err(err) => Err(sqs_error(&format!("GetQueueAttributes {url}"), err)),
    }
}

/// The one attribute we cannot do without. SQS leaves `FifoQueue` out for a standard
/// queue, which is `false`.
fn require_fifo(name: &str, attributes: &HashMap<QueueAttributeName, String>) -> Result<(), QueueError> {
    let fifo = attributes
        .get(&QueueAttributeName::FifoQueue)
        .map(String::as_str)
        .unwrap_or("false");
    if fifo.eq_ignore_ascii_case("true") {
        return Ok(());
    }
    Err(QueueError::NotFifo {
        name: name.to_string(),
        fifo: fifo.to_string(),
    })
}

/// A `RedrivePolicy`'s target ARN and `maxReceiveCount` (a number, or a string of one as
/// some tools write it); what cannot be read is `None`.
fn parse_redrive(policy: &str) -> (Option<String>, Option<i64>) {
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(policy) else {
        return (None, None);
    };
    let target = fields
        .get("deadLetterTargetArn")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .map(str::to_string);
    let count = fields.get("maxReceiveCount").and_then(|c| match c {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    });
    (target, count)
}

/// The URL of the queue `arn` names (`arn:aws:sqs:REGION:ACCOUNT:NAME`), if found.
async fn dead_letter_url_of(client: &aws_sdk_sqs::Client, arn: &str) -> Option<String> {
    let mut parts = arn.rsplitn(3, ':');
    let name = parts.next().filter(|n| !n.is_empty())?;
    let account = parts.next().filter(|a| !a.is_empty());
    let out = client
        .get_queue_url()
        .queue_name(name)
        .set_queue_owner_aws_account_id(account.map(str::to_string))
        .send()
        .await
        .ok()?;
    out.queue_url().map(str::to_string).filter(|u| !u.is_empty())
}

/// The queues' retention, SQS's longest (14 days), as template.yaml sets it: SQS deletes a
/// message at its end whatever its receives, so every retry schedule must end before it.
const RETENTION_SECONDS: &str = "1209600";

impl SqsQueue {
    pub fn new(client: aws_sdk_sqs::Client, url: impl Into<String>) -> Self {
        SqsQueue {
            client,
            url: url.into(),
        }
    }

    /// A client for `endpoint_url` (an emulator) or real AWS (`None`).
    pub async fn client(endpoint_url: Option<&str>, region: &str) -> aws_sdk_sqs::Client {
        Self::client_with_profile(endpoint_url, region, None).await
    }

    /// [`client`](Self::client) with the credentials of a named profile (the operator
    /// CLI's `--profile`).
    pub async fn client_with_profile(
        endpoint_url: Option<&str>,
        region: &str,
        profile: Option<&str>,
    ) -> aws_sdk_sqs::Client {
        let config = stm_aws::sdk_config_with_profile(endpoint_url, region, profile).await;
        let mut builder = aws_sdk_sqs::config::Builder::from(&config);
        if let Some(tag) = stm_aws::function_tag() {
            builder.push_interceptor(tag);
        }
        aws_sdk_sqs::Client::from_conf(builder.build())
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn sqs(&self) -> &aws_sdk_sqs::Client {
        &self.client
    }

    /// Make sure the FIFO queue `name` (with `.fifo` added if missing) exists, and return
    /// its URL.
    ///
    /// An existing queue is joined as it is ([`SqsQueue::join`]): harel creates its queue
    /// with `FifoQueue` alone, and `CreateQueue` refuses an existing name whose attributes
    /// differ (`QueueAlreadyExists`), so asking for ours would lock us out of a queue we can
    /// use. Only when it is missing do we create it: first its dead-letter queue
    /// `{name}-dlq.fifo`, then the queue, redriving to it after `max_receive_count`
    /// receives, with `visibility_seconds` and `MaximumMessageSize` [`MAX_MESSAGE_BYTES`]. Looking
    /// first also keeps us from creating a dead-letter queue nothing redrives to.
    pub async fn ensure(
        client: &aws_sdk_sqs::Client,
        name: &str,
        visibility_seconds: i32,
        max_receive_count: u32,
    ) -> Result<QueueUrls, QueueError> {
        let base = name.strip_suffix(".fifo").unwrap_or(name);
        let main_name = format!("{base}.fifo");
        if let Some(url) = existing_queue_url(client, &main_name).await? {
            return Self::join(client, &url, visibility_seconds, max_receive_count).await;
        }
        // before the first CreateQueue: a name SQS refuses would otherwise leave a
        // dead-letter queue behind, or fail with SQS's words about a name we derived
        if let Some(problem) = super::queue_name_problem(base) {
            return Err(QueueError::failed(format!("CreateQueue {main_name}"), problem));
        }
        let size = MAX_MESSAGE_BYTES.to_string();
        let dlq_name = format!("{base}-dlq.fifo");
        let dead_letter_url = match client
            .create_queue()
            .queue_name(&dlq_name)
            .attributes(QueueAttributeName::FifoQueue, "true")
            .attributes(QueueAttributeName::MaximumMessageSize, &size)
            .attributes(QueueAttributeName::MessageRetentionPeriod, RETENTION_SECONDS)
            .send()
            .await
        {
            Ok(out) => out.queue_url().unwrap_or_default().to_string(),
            // it exists with other attributes (an earlier version of ours, someone else's):
            // any FIFO queue can be a FIFO queue's dead-letter queue
            Err(err) if err.as_service_error().is_some_and(|e| e.is_queue_name_exists()) => {
                let url = existing_queue_url(client, &dlq_name).await?.ok_or_else(|| {
                    QueueError::failed(
                        format!("CreateQueue {dlq_name}"),
                        "it exists, but GetQueueUrl does not find it",
                    )
                })?;
                let attributes = queue_attributes(client, &url).await?;
                require_fifo(&dlq_name, &attributes)?;
                url
            }
            Err(err) => return Err(sqs_error(&format!("CreateQueue {dlq_name}"), err)),
        };
        let arn = queue_attributes(client, &dead_letter_url)
            .await?
            .remove(&QueueAttributeName::QueueArn)
            .filter(|arn| !arn.is_empty())
            .ok_or_else(|| {
                QueueError::failed(
                    format!("GetQueueAttributes {dlq_name}"),
                    "no QueueArn for the redrive policy",
                )
            })?;
        let redrive = json!({"deadLetterTargetArn": arn, "maxReceiveCount": max_receive_count}).to_string();
        let created = client
            .create_queue()
            .queue_name(&main_name)
            .attributes(QueueAttributeName::FifoQueue, "true")
            .attributes(
                QueueAttributeName::VisibilityTimeout,
                visibility_seconds.to_string(),
            )
            .attributes(QueueAttributeName::MaximumMessageSize, &size)
            .attributes(QueueAttributeName::MessageRetentionPeriod, RETENTION_SECONDS)
            .attributes(QueueAttributeName::RedrivePolicy, redrive)
            .send()
            .await;
        match created {
            Ok(out) => Ok(QueueUrls {
                queue_url: out.queue_url().unwrap_or_default().to_string(),
                dead_letter_url,
                joined: false,
                notes: Vec::new(),
            }),
            // someone created it between our look and our create: join theirs
            Err(err) if err.as_service_error().is_some_and(|e| e.is_queue_name_exists()) => {
                let url = existing_queue_url(client, &main_name).await?.ok_or_else(|| {
                    QueueError::failed(
                        format!("CreateQueue {main_name}"),
                        "it exists, but GetQueueUrl does not find it",
                    )
                })?;
                Self::join(client, &url, visibility_seconds, max_receive_count).await
            }
            Err(err) => Err(sqs_error(&format!("CreateQueue {main_name}"), err)),
        }
    }

    /// Use the existing queue at `url` as the event queue, changing nothing on it: check
    /// what we cannot work without and describe what merely differs from what
    /// [`ensure`](Self::ensure) would have created (`visibility_seconds`,
    /// `max_receive_count`) in [`QueueUrls::notes`].
    ///
    /// The one requirement is `FifoQueue=true`: the worker relies on SQS keeping one
    /// in-flight message per execution (`MessageGroupId`), and every send carries a group.
    /// `ContentBasedDeduplication` does not matter: every send (ours and harel's) carries an
    /// explicit `MessageDeduplicationId`. The visibility timeout does not either, since
    /// every receive sets its own; a smaller `MaximumMessageSize`, a missing redrive policy
    /// or another `maxReceiveCount` only change what happens to very large or failing
    /// messages, so they are noted, not refused.
    pub async fn join(
        client: &aws_sdk_sqs::Client,
        url: &str,
        visibility_seconds: i32,
        max_receive_count: u32,
    ) -> Result<QueueUrls, QueueError> {
        let attributes = queue_attributes(client, url).await?;
        let name = attributes
            .get(&QueueAttributeName::QueueArn)
            .and_then(|arn| arn.rsplit(':').next())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| url.trim_end_matches('/').rsplit('/').next().unwrap_or(url))
            .to_string();
        require_fifo(&name, &attributes)?;
        let get = |attr: QueueAttributeName| attributes.get(&attr).map(String::as_str);
        let number = |attr: QueueAttributeName| get(attr).and_then(|v| v.trim().parse::<i64>().ok());
        let mut notes = Vec::new();
        if let Some(visibility) = number(QueueAttributeName::VisibilityTimeout) {
            if visibility != i64::from(visibility_seconds) {
                notes.push(format!(
                    "queue {name} has VisibilityTimeout={visibility} s, not {visibility_seconds} s: kept \
                     (our receives set their own visibility timeout)"
                ));
            }
        }
        if let Some(size) = number(QueueAttributeName::MaximumMessageSize) {
            if usize::try_from(size).is_ok_and(|s| s < MAX_MESSAGE_BYTES) {
                notes.push(format!(
                    "queue {name} has MaximumMessageSize={size}: kept; a message over {size} bytes \
                     (a large event or spawn context) is refused by SQS and reported as a publish failure"
                ));
            }
        }
        if let Some(delay) = number(QueueAttributeName::DelaySeconds).filter(|d| *d > 0) {
            notes.push(format!(
                "queue {name} has DelaySeconds={delay}: kept; every event waits {delay} s before delivery"
            ));
        }
        let mut dead_letter_url = String::new();
        match get(QueueAttributeName::RedrivePolicy).filter(|p| !p.trim().is_empty()) {
            None => {
                let retention = number(QueueAttributeName::MessageRetentionPeriod)
                    .map(|s| format!("{s} s"))
                    .unwrap_or_else(|| "its retention period".to_string());
                notes.push(format!(
                    "queue {name} has no redrive policy (no dead-letter queue): kept; a message \
                     that keeps failing is retried until it expires after {retention}"
                ));
            }
            Some(policy) => {
                let (target, count) = parse_redrive(policy);
                if let Some(count) = count.filter(|c| *c != i64::from(max_receive_count)) {
                    notes.push(format!(
                        "queue {name} dead-letters a message after {count} receives, not \
                         {max_receive_count}: kept"
                    ));
                }
                match target {
                    Some(arn) => match dead_letter_url_of(client, &arn).await {
                        Some(url) => dead_letter_url = url,
                        None => notes.push(format!(
                            "queue {name} redrives to {arn}, which GetQueueUrl does not find here"
                        )),
                    },
                    None => notes.push(format!(
                        "queue {name} has a RedrivePolicy without a deadLetterTargetArn: {policy}"
                    )),
                }
            }
        }
        for note in &notes {
            tracing::info!(queue = %url, "{note}");
        }
        Ok(QueueUrls {
            queue_url: url.to_string(),
            dead_letter_url,
            joined: true,
            notes,
        })
    }

    /// Check that the queue at `url` is a FIFO queue (what an operator command needs of
    /// the queue it sends to), with the same message as [`join`](Self::join).
    pub async fn check_event_queue(client: &aws_sdk_sqs::Client, url: &str) -> Result<(), QueueError> {
        let attributes = queue_attributes(client, url).await?;
        let name = url.trim_end_matches('/').rsplit('/').next().unwrap_or(url);
        require_fifo(name, &attributes)
    }

    /// How many messages the queue holds (visible + in flight), approximately.
    pub async fn approximate_depth(&self) -> Result<u64, QueueError> {
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .map_err(|e| sqs_error("GetQueueAttributes", e))?;
        let attrs = out.attributes();
        let get = |name: QueueAttributeName| {
            attrs
                .and_then(|a| a.get(&name))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok(get(QueueAttributeName::ApproximateNumberOfMessages)
            + get(QueueAttributeName::ApproximateNumberOfMessagesNotVisible))
    }

    /// One `SendMessageBatch` of `messages[i]` for each `i` in `chunk` (a batch of
    /// [`plan_batches`]); failures name indexes into `messages`.
    async fn publish_chunk(&self, messages: &[OutgoingMessage], chunk: &[usize]) -> Vec<PublishFailure> {
        let mut entries = Vec::with_capacity(chunk.len());
        for (i, message) in chunk.iter().filter_map(|&at| messages.get(at)).enumerate() {
            let mut entry = SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(&message.body)
                .message_group_id(&message.group_id)
                .message_deduplication_id(&message.deduplication_id);
            if message.spawn {
                match MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(SPAWN_KIND)
                    .build()
                {
                    Ok(attr) => entry = entry.message_attributes(MESSAGE_KIND_ATTRIBUTE, attr),
                    Err(e) => return whole_chunk_failed(chunk, "Build", &e.to_string()),
                }
            }
            if let Some(ctx) = &message.trace {
                match MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(ctx.traceparent())
                    .build()
                {
                    Ok(attr) => entry = entry.message_attributes(TRACEPARENT_ATTRIBUTE, attr),
                    Err(e) => return whole_chunk_failed(chunk, "Build", &e.to_string()),
                }
                // and X-Ray's header, for AWS's own tracing (Lambda links the invocation
                // to it): a system attribute, which SQS does not count toward the size
                match MessageSystemAttributeValue::builder()
                    .data_type("String")
                    .string_value(ctx.aws_trace_header())
                    .build()
                {
                    Ok(attr) => {
                        entry = entry.message_system_attributes(
                            MessageSystemAttributeNameForSends::AwsTraceHeader,
                            attr,
                        )
                    }
                    Err(e) => return whole_chunk_failed(chunk, "Build", &e.to_string()),
                }
            }
            match entry.build() {
                Ok(entry) => entries.push(entry),
                Err(e) => return whole_chunk_failed(chunk, "Build", &e.to_string()),
            }
        }
        let sent = self
            .client
            .send_message_batch()
            .queue_url(&self.url)
            .set_entries(Some(entries))
            .send()
            .await;
        match sent {
            Err(err) => {
                let text = stm_aws::Readable(&err).to_string();
                tracing::warn!(error = %text, messages = chunk.len(), "SendMessageBatch failed");
                whole_chunk_failed(chunk, "SendMessageBatch", &text)
            }
            Ok(out) => out
                .failed()
                .iter()
                .map(|f| PublishFailure {
                    // ids are the chunk positions we gave; an unknown one fails the first
                    index: f
                        .id()
                        .parse::<usize>()
                        .ok()
                        .and_then(|at| chunk.get(at))
                        .or(chunk.first())
                        .copied()
                        .unwrap_or(0),
                    code: f.code().to_string(),
                    message: f.message().unwrap_or_default().to_string(),
                })
                .collect(),
        }
    }
}

fn whole_chunk_failed(chunk: &[usize], code: &str, message: &str) -> Vec<PublishFailure> {
    chunk
        .iter()
        .map(|&index| PublishFailure {
            index,
            code: code.into(),
            message: message.into(),
        })
        .collect()
}

#[async_trait]
impl Queue for SqsQueue {
    async fn publish_batch(&self, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        let plan = plan_batches(messages);
        for refused in &plan.refused {
            tracing::error!(code = %refused.code, error = %refused.message, "message not sent: SQS would refuse it");
        }
        let mut failures = plan.refused;
        for chunk in &plan.batches {
            failures.extend(self.publish_chunk(messages, chunk).await);
        }
        failures.sort_by_key(|f| f.index);
        failures
    }

    async fn receive(
        &self,
        max: usize,
        visibility_seconds: i32,
        wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, QueueError> {
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(max.clamp(1, MAX_BATCH) as i32)
            .visibility_timeout(visibility_seconds)
            .wait_time_seconds(wait_seconds)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .customize()
            // a long poll waits longer than any other call is allowed to take
            .config_override(aws_sdk_sqs::config::Builder::default().timeout_config(
                stm_aws::long_poll_timeout(std::time::Duration::from_secs(
                    u64::try_from(wait_seconds.max(0)).unwrap_or(0),
                )),
            ))
            .send()
            .await
            .map_err(|e| sqs_error("ReceiveMessage", e))?;
        Ok(out
            .messages()
            .iter()
            .map(|m| {
                let attributes: BTreeMap<String, String> = m
                    .attributes()
                    .map(|a| {
                        a.iter()
                            .map(|(k, v)| (k.as_str().to_string(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                let message_attributes = m
                    .message_attributes()
                    .map(|a| {
                        a.iter()
                            .filter_map(|(k, v)| v.string_value().map(|s| (k.clone(), s.to_string())))
                            .collect()
                    })
                    .unwrap_or_default();
                ReceivedMessage {
                    message_id: m.message_id().unwrap_or_default().to_string(),
                    receipt_handle: m.receipt_handle().unwrap_or_default().to_string(),
                    body: m.body().unwrap_or_default().to_string(),
                    group_id: attributes.get("MessageGroupId").cloned(),
                    receive_count: attributes
                        .get("ApproximateReceiveCount")
                        .and_then(|c| c.parse().ok())
                        .unwrap_or(1),
                    message_attributes,
                    attributes,
                }
            })
            .collect())
    }

    async fn delete(&self, receipt_handle: &str) -> Result<(), QueueError> {
        self.client
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(receipt_handle)
            .send()
            .await
            .map_err(|e| sqs_error("DeleteMessage", e))?;
        Ok(())
    }

    async fn change_visibility(&self, receipt_handle: &str, seconds: i32) -> Result<(), QueueError> {
        self.client
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(receipt_handle)
            .visibility_timeout(seconds)
            .send()
            .await
            .map_err(|e| sqs_error("ChangeMessageVisibility", e))?;
        Ok(())
    }
}
