//! [`EventBridgeBus`]: status events put on an EventBridge bus.

use async_trait::async_trait;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;

use super::{plan_puts, BusEvent, StatusBus};
use crate::queue::PublishFailure;

/// The EventBridge bus named `STM_EVENT_BUS`.
#[derive(Debug, Clone)]
pub struct EventBridgeBus {
    client: aws_sdk_eventbridge::Client,
    bus: String,
    level: super::StatusEvents,
}

impl EventBridgeBus {
    pub fn new(client: aws_sdk_eventbridge::Client, bus: impl Into<String>) -> Self {
        EventBridgeBus {
            client,
            bus: bus.into(),
            level: super::StatusEvents::All,
        }
    }

    /// Put only what `level` publishes (default: every notice it is given).
    pub fn with_level(mut self, level: super::StatusEvents) -> Self {
        self.level = level;
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

#[async_trait]
impl StatusBus for EventBridgeBus {
    fn level(&self) -> super::StatusEvents {
        self.level
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
