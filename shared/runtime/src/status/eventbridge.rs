//! [`EventBridgeBus`]: status events put on an EventBridge bus.

use async_trait::async_trait;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;

use super::{BusEvent, StatusBus};
use crate::queue::PublishFailure;

/// The EventBridge bus named `STM_EVENT_BUS`.
#[derive(Debug, Clone)]
pub struct EventBridgeBus {
    client: aws_sdk_eventbridge::Client,
    bus: String,
    level: super::StatusEvents,
    tallies: Option<std::sync::Arc<crate::rollout::Tallies>>,
}

impl EventBridgeBus {
    pub fn new(client: aws_sdk_eventbridge::Client, bus: impl Into<String>) -> Self {
        EventBridgeBus {
            client,
            bus: bus.into(),
            level: super::StatusEvents::All,
            tallies: None,
        }
    }

    /// Put only what `level` publishes (default: every notice it is given).
    pub fn with_level(mut self, level: super::StatusEvents) -> Self {
        self.level = level;
        self
    }

    /// Count the canaries' finished executions as their events are put, by `policy`
    /// (nothing when it is off).
    pub fn with_rollout(mut self, policy: crate::rollout::RolloutPolicy) -> Self {
        self.tallies = policy
            .enabled()
            .then(|| std::sync::Arc::new(crate::rollout::Tallies::new(policy)));
        self
    }

    /// A client for `endpoint_url` (an emulator; `None`: AWS) in `region`, its requests
    /// tagged with the function that sends them under an emulator, as every client's.
    pub async fn client(endpoint_url: Option<&str>, region: &str) -> aws_sdk_eventbridge::Client {
        let config = stm_aws::sdk_config(endpoint_url, region).await;
        let mut builder = aws_sdk_eventbridge::config::Builder::from(&config);
        if let Some(tag) = stm_aws::function_tag() {
            builder.push_interceptor(tag);
        }
        aws_sdk_eventbridge::Client::from_conf(builder.build())
    }

    pub fn bus(&self) -> &str {
        &self.bus
    }
}

/// Route every event on `bus` that matches `pattern` (an EventBridge event pattern, JSON)
/// to the SQS queue `queue_arn`, under the rule `rule` (made or replaced): what a
/// deployment's rules do, for a local stack and the tests. The queue must let
/// EventBridge send to it (on AWS, its queue policy).
pub async fn route_to_queue(
    client: &aws_sdk_eventbridge::Client,
    bus: &str,
    rule: &str,
    pattern: &str,
    queue_arn: &str,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    client
        .put_rule()
        .name(rule)
        .event_bus_name(bus)
        .event_pattern(pattern)
        .send()
        .await
        .map_err(|e| format!("put the rule {rule}: {}", stm_aws::Readable(&e)))?;
    let target = aws_sdk_eventbridge::types::Target::builder()
        .id(rule)
        .arn(queue_arn)
        .build()?;
    client
        .put_targets()
        .rule(rule)
        .event_bus_name(bus)
        .targets(target)
        .send()
        .await
        .map_err(|e| format!("target the rule {rule}: {}", stm_aws::Readable(&e)))?;
    Ok(())
}

#[async_trait]
impl StatusBus for EventBridgeBus {
    fn level(&self) -> super::StatusEvents {
        self.level
    }

    fn tallies(&self) -> Option<&crate::rollout::Tallies> {
        self.tallies.as_deref()
    }

    async fn put(&self, events: &[BusEvent]) -> Vec<PublishFailure> {
        let mut failures = Vec::new();
        for range in plan_puts(events) {
            let entries: Vec<PutEventsRequestEntry> = events[range.clone()]
                .iter()
                .map(|e| {
                    PutEventsRequestEntry::builder()
                        .event_bus_name(&self.bus)
                        .source(&e.source)
                        .detail_type(&e.detail_type)
                        .detail(&e.detail)
                        .build()
                })
                .collect();
            match self.client.put_events().set_entries(Some(entries)).send().await {
                Ok(out) => {
                    // one result per entry, in order; a failed one has an error code
                    for (i, result) in out.entries().iter().enumerate() {
                        if let Some(code) = result.error_code() {
                            failures.push(PublishFailure {
                                index: range.start + i,
                                code: code.to_string(),
                                message: result.error_message().unwrap_or_default().to_string(),
                            });
                        }
                    }
                }
                Err(err) => {
                    let message = stm_aws::Readable(&err).to_string();
                    let code = err
                        .as_service_error()
                        .and_then(|e| aws_sdk_eventbridge::error::ProvideErrorMetadata::code(e))
                        .unwrap_or("RequestFailed")
                        .to_string();
                    failures.extend(range.map(|index| PublishFailure {
                        index,
                        code: code.clone(),
                        message: message.clone(),
                    }));
                }
            }
        }
        failures
    }
}

/// The most entries one `PutEvents` takes.
pub(crate) const MAX_PUT_ENTRIES: usize = 10;
/// The most entry bytes ([`BusEvent::entry_bytes`]) one `PutEvents` takes, all entries
/// together: "less than 256 KB".
pub(crate) const MAX_PUT_BYTES: usize = 256 * 1024 - 1;

/// `events` cut into `PutEvents` requests: at most [`MAX_PUT_ENTRIES`] and
/// [`MAX_PUT_BYTES`] each, in order; an event too large alone is a request of its own
/// (the bus refuses it, and says so).
pub(crate) fn plan_puts(events: &[BusEvent]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, event) in events.iter().enumerate() {
        let size = event.entry_bytes();
        if i > start && (i - start == MAX_PUT_ENTRIES || bytes + size > MAX_PUT_BYTES) {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < events.len() {
        out.push(start..events.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puts_keep_to_ten_entries_and_256_kb() {
        let event = |bytes: usize| BusEvent {
            source: String::new(),
            detail_type: String::new(),
            detail: "x".repeat(bytes),
        };
        let small: Vec<BusEvent> = (0..23).map(|_| event(10)).collect();
        assert_eq!(plan_puts(&small), vec![0..10, 10..20, 20..23]);
        let big: Vec<BusEvent> = (0..3).map(|_| event(100 * 1024)).collect();
        assert_eq!(plan_puts(&big), vec![0..2, 2..3]);
        let huge = vec![event(300 * 1024), event(1)];
        assert_eq!(plan_puts(&huge), vec![0..1, 1..2]);
        assert!(plan_puts(&[]).is_empty());
    }
}
