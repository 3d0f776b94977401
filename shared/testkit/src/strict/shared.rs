//! What the layer's connections share: moto's address, the roles, the caches of table
//! schemas and queue attributes (asked of moto, dropped by the requests that change them),
//! the refusal counts, the meter, the lagging indexes, the moved queue clocks and the slowed
//! prefixes.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{json, Value};

use super::dynamodb::{self, Metering, TableSchema};
use super::entry_faults::EntryFaults;
use super::index_lag::IndexLag;
use super::policies::Policies;
use super::retention::QueueClocks;
use super::sqs::{self, QueueInfo};
use super::wire::{ask_upstream, DYNAMODB_TARGET, SQS_TARGET};

pub(super) struct Shared {
    /// moto's `host:port`.
    pub(super) upstream: String,
    pub(super) policies: Result<Policies, String>,
    pub(super) schemas: Mutex<BTreeMap<String, TableSchema>>,
    pub(super) queues: Mutex<BTreeMap<String, QueueInfo>>,
    pub(super) refusals: Mutex<BTreeMap<String, usize>>,
    pub(super) metering: Metering,
    /// The tables whose GSIs lag, and their items' history.
    pub(super) index_lag: IndexLag,
    /// The queues whose clocks the tests moved (SQS's retention on them).
    pub(super) queue_clocks: QueueClocks,
    /// Messages SQS's retention deleted (on moved queues), by queue name.
    pub(super) expired: Mutex<BTreeMap<String, usize>>,
    /// Name prefix -> how long its requests are held ([`StrictLayer::slow_requests`]).
    ///
    /// [`StrictLayer::slow_requests`]: super::StrictLayer::slow_requests
    pub(super) slow: Mutex<BTreeMap<String, std::time::Duration>>,
    /// The fault mode per entry: its prefixes and counts.
    pub(super) entry_faults: EntryFaults,
    /// `BatchGetItem` answers moto gave in part (past 16 MB of items).
    pub(super) partial_batch_gets: std::sync::atomic::AtomicUsize,
}

impl Shared {
    pub(super) fn count(&self, rule: &str) {
        *self
            .refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(rule.to_string())
            .or_default() += 1;
    }

    pub(super) async fn schemas_for(&self, tables: &[String]) -> BTreeMap<String, TableSchema> {
        let mut out = BTreeMap::new();
        for table in tables {
            let cached = self
                .schemas
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(table)
                .cloned();
            let schema = match cached {
                Some(s) => Some(s),
                None => {
                    let answer = ask_upstream(
                        &self.upstream,
                        &format!("{DYNAMODB_TARGET}.DescribeTable"),
                        &json!({"TableName": table}),
                    )
                    .await;
                    let schema = answer.and_then(|a| TableSchema::from_description(&a["Table"]));
                    if let Some(s) = &schema {
                        self.schemas
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(table.clone(), s.clone());
                    }
                    schema
                }
            };
            if let Some(s) = schema {
                out.insert(table.clone(), s);
            }
        }
        out
    }

    pub(super) async fn queue_info(&self, url: &str) -> Option<QueueInfo> {
        if let Some(info) = self.queues.lock().unwrap_or_else(|e| e.into_inner()).get(url) {
            return Some(info.clone());
        }
        let answer = ask_upstream(
            &self.upstream,
            &format!("{SQS_TARGET}.GetQueueAttributes"),
            &json!({"QueueUrl": url, "AttributeNames": ["All"]}),
        )
        .await?;
        let attrs = &answer["Attributes"];
        let info = QueueInfo {
            fifo: attrs["FifoQueue"] == "true" || url.ends_with(".fifo"),
            content_based_dedup: attrs["ContentBasedDeduplication"] == "true",
            max_message_size: attrs["MaximumMessageSize"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(sqs::MAX_BATCH_BYTES),
            retention_seconds: attrs["MessageRetentionPeriod"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(sqs::DEFAULT_RETENTION_SECONDS),
        };
        self.queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(url.to_string(), info.clone());
        Some(info)
    }

    /// How long to hold a request that names a table or queue a test slowed down.
    pub(super) fn hold_for(
        &self,
        service: &str,
        operation: &str,
        body: &Value,
    ) -> Option<std::time::Duration> {
        let slow = self.slow.lock().unwrap_or_else(|e| e.into_inner());
        if slow.is_empty() {
            return None;
        }
        let names: Vec<String> = match service {
            DYNAMODB_TARGET => dynamodb::tables_named(operation, body),
            SQS_TARGET => body["QueueUrl"]
                .as_str()
                .and_then(|url| url.rsplit('/').next())
                .map(String::from)
                .into_iter()
                .collect(),
            _ => Vec::new(),
        };
        slow.iter()
            .filter(|(prefix, _)| names.iter().any(|n| n.starts_with(prefix.as_str())))
            .map(|(_, by)| *by)
            .max()
    }

    /// Delete from moto the messages SQS's retention would have deleted, and count them.
    pub(super) async fn delete_expired(&self, url: &str, receipt_handles: &[String]) {
        for handle in receipt_handles {
            let _ = ask_upstream(
                &self.upstream,
                &format!("{SQS_TARGET}.DeleteMessage"),
                &json!({"QueueUrl": url, "ReceiptHandle": handle}),
            )
            .await;
        }
        if !receipt_handles.is_empty() {
            let name = url.rsplit('/').next().unwrap_or(url).to_string();
            *self
                .expired
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(name)
                .or_default() += receipt_handles.len();
        }
    }

    /// A request that changes what the caches hold drops their entries.
    pub(super) fn invalidate(&self, operation: &str, body: &Value) {
        if matches!(operation, "CreateTable" | "DeleteTable" | "UpdateTable") {
            if let Some(t) = body["TableName"].as_str() {
                self.schemas.lock().unwrap_or_else(|e| e.into_inner()).remove(t);
                if operation != "UpdateTable" {
                    self.index_lag.forget_table(t);
                }
            }
        }
        if matches!(operation, "SetQueueAttributes" | "DeleteQueue" | "CreateQueue") {
            let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            match (body["QueueUrl"].as_str(), body["QueueName"].as_str()) {
                (Some(url), _) => {
                    queues.remove(url);
                }
                (None, Some(name)) => queues.retain(|url, _| url.rsplit('/').next() != Some(name)),
                _ => {}
            }
        }
    }
}
