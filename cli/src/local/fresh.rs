//! `stm local --fresh`: start from empty tables and queues, saying what went.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use aws_sdk_sqs::types::QueueAttributeName;

use crate::plural::count;

/// `--fresh` with `--endpoint`: delete this prefix's tables (they are created again
/// right after). Says what went.
pub(super) async fn delete_tables(store: &stm_store::DynamoDbStore) -> Result<String> {
    let client = store.client();
    let mut deleted = Vec::new();
    let mut executions = None;
    for spec in stm_store::table_specs() {
        let name = spec.table_name(store.prefix());
        if spec.name == "executions" {
            executions = client
                .describe_table()
                .table_name(&name)
                .send()
                .await
                .ok()
                .and_then(|out| out.table().and_then(|t| t.item_count()));
        }
        match client.delete_table().table_name(&name).send().await {
            Ok(_) => deleted.push(name),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_resource_not_found_exception()) => {}
            Err(err) => bail!("--fresh: delete the table {name}: {}", stm_aws::Readable(&err)),
        }
    }
    // DynamoDB deletes a table in the background; wait until each one is gone
    let deadline = Instant::now() + Duration::from_secs(120);
    for name in &deleted {
        loop {
            match client.describe_table().table_name(name).send().await {
                Err(err)
                    if err
                        .as_service_error()
                        .is_some_and(|e| e.is_resource_not_found_exception()) =>
                {
                    break
                }
                _ if Instant::now() > deadline => {
                    bail!("--fresh: the table {name} is still there after 2 minutes")
                }
                _ => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }
    let count = executions.map_or(String::new(), |n| {
        format!(", with {}", count(usize::try_from(n).unwrap_or(0), "execution"))
    });
    Ok(format!("deleted the tables {}{count}", deleted.join(", ")))
}

/// `--fresh`: empty the queue at `url`; says which and how many messages it held.
pub(super) async fn purge(client: &aws_sdk_sqs::Client, url: &str) -> Result<String> {
    let name = url.rsplit('/').next().unwrap_or(url).to_string();
    let attributes = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        .send()
        .await
        .map_err(|e| anyhow!("--fresh: read the queue {name}: {}", stm_aws::Readable(&e)))?;
    let held: u64 = attributes
        .attributes()
        .map(|a| a.values().filter_map(|v| v.parse::<u64>().ok()).sum())
        .unwrap_or(0);
    client
        .purge_queue()
        .queue_url(url)
        .send()
        .await
        .map_err(|e| anyhow!("--fresh: purge the queue {name}: {}", stm_aws::Readable(&e)))?;
    Ok(format!("{name} ({})", count(held as usize, "message")))
}
