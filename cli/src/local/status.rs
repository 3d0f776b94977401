//! `stm local --status-events`: the status events of a deployment with `StatusEvents`, on
//! this machine. The bus is named as the template's `StatusBus` is, `{stem}-status`, with
//! the prefix for the stem (a stack's adds its id, which a local run has none of), and a rule
//! copies every event on it to a standard queue beside the event queue, where a user (or
//! a test) reads them with any SQS client: moto's EventBridge delivers to SQS targets.

use std::sync::Arc;

use anyhow::{anyhow, Result};
use stm_runtime::status::{EventBridgeBus, StatusEvents};

/// The bus, made if missing, for the notices `level` publishes, and the URL of the queue
/// its rule copies every event to.
pub(super) async fn local_bus(
    endpoint: Option<&str>,
    region: &str,
    prefix: &str,
    queue_stem: &str,
    sqs: &aws_sdk_sqs::Client,
    level: StatusEvents,
    rollout: stm_runtime::rollout::RolloutPolicy,
) -> Result<(Arc<EventBridgeBus>, String)> {
    let events = EventBridgeBus::client(endpoint, region).await;
    let bus = format!("{prefix}-status");
    let readable = |what: &str, err: &dyn std::fmt::Display| anyhow!("--status-events: {what}: {err}");
    let exists = events.describe_event_bus().name(&bus).send().await.is_ok();
    if !exists {
        events
            .create_event_bus()
            .name(&bus)
            .send()
            .await
            .map_err(|e| readable(&format!("create the bus {bus}"), &stm_aws::Readable(&e)))?;
    }
    let copy = format!("{queue_stem}-status-events");
    let url = sqs
        .create_queue()
        .queue_name(&copy)
        .send()
        .await
        .map_err(|e| readable(&format!("create the queue {copy}"), &stm_aws::Readable(&e)))?
        .queue_url()
        .unwrap_or_default()
        .to_string();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| readable(&format!("read the queue {copy}"), &stm_aws::Readable(&e)))?
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn).cloned())
        .ok_or_else(|| anyhow!("--status-events: the queue {copy} has no ARN"))?;
    let rule = "stm-local-status-events";
    let pattern = serde_json::json!({ "source": [stm_runtime::status::SOURCE] }).to_string();
    stm_runtime::status::route_to_queue(&events, &bus, rule, &pattern, &arn)
        .await
        .map_err(|e| readable("route the bus to the queue", &e))?;
    let bus = EventBridgeBus::new(events, bus)
        .with_level(level)
        .with_rollout(rollout);
    Ok((Arc::new(bus), url))
}
