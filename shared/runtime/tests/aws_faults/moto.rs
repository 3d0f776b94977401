//! The stack on moto, through the fault proxy: DynamoDB and SQS clients with a drawn SDK
//! retry budget and short backoffs, the tables and queues of one scenario, and the side
//! the client uses.

use std::sync::Arc;
use std::time::Duration;

use aws_smithy_types::retry::RetryConfig;
use stm_runtime::status::{EventBridgeBus, StatusBus, SOURCE};
use stm_runtime::{Queue, SqsQueue};
use stm_store::{CreateOptions, DedupeMarks, DynamoDbStore, ExecutionStore};
use stm_testkit::{Fault, FaultProxy};

use crate::settings::{DYNAMODB_OPERATIONS, SQS_OPERATIONS, VISIBILITY_SECONDS};

/// The SDK's standard retry mode with `attempts` attempts per call and short backoffs (the
/// default's 1 s base would make the test crawl).
pub(crate) fn quick_retries(attempts: u32) -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(attempts.max(1))
        .with_initial_backoff(Duration::from_millis(10))
        .with_max_backoff(Duration::from_millis(100))
}

async fn dynamodb(
    endpoint: &str,
    prefix: &str,
    sdk_retry: Option<RetryConfig>,
    dedupe_marks: DedupeMarks,
) -> Arc<DynamoDbStore> {
    let options = CreateOptions {
        prefix: prefix.to_string(),
        connect_attempts: 5,
        sdk_retry,
        dedupe_marks,
        ..CreateOptions::default()
    };
    Arc::new(
        DynamoDbStore::create_with(Some(endpoint), stm_testkit::REGION, options)
            .await
            .expect("tables"),
    )
}

pub(crate) async fn sqs_client(endpoint: &str, retry: Option<RetryConfig>) -> aws_sdk_sqs::Client {
    let client = SqsQueue::client(Some(endpoint), stm_testkit::REGION).await;
    match retry {
        None => client,
        Some(retry) => {
            aws_sdk_sqs::Client::from_conf(client.config().to_builder().retry_config(retry).build())
        }
    }
}

/// The functions' and the client's clients of one SDK retry budget and one table layout.
pub(crate) struct Side {
    /// The SDK's attempts per call.
    pub(crate) sdk_attempts: u32,
    /// Where the processed marks live: harel's table (a commit is a `TransactWriteItems`)
    /// or the execution item (a plain event's commit is a conditional `PutItem`).
    pub(crate) dedupe_marks: DedupeMarks,
    /// The functions' (worker, relay, sweeper) store and queue: through the proxy.
    pub(crate) store: Arc<dyn ExecutionStore>,
    pub(crate) queue: Arc<dyn Queue>,
    /// The client's (control plane): through the proxy, an instance of its own.
    pub(crate) client_store: Arc<dyn ExecutionStore>,
    pub(crate) client_queue: Arc<dyn Queue>,
    /// The test's view, straight to moto, reading the marks where this layout keeps them.
    pub(crate) view_store: Arc<dyn ExecutionStore>,
}

/// One set of tables and one FIFO queue (+ DLQ) on moto for every scenario of the test;
/// the functions and the client reach them through the proxy, the test's checks directly.
pub(crate) struct Moto {
    pub(crate) proxy: FaultProxy,
    /// One side per SDK retry budget and table layout under test.
    pub(crate) sides: Vec<Side>,
    pub(crate) main: SqsQueue,
    pub(crate) dlq: SqsQueue,
    /// The scenarios' table and queue prefix (the strict layer's faults per entry).
    pub(crate) prefix: String,
    /// The status bus (`{prefix}-status`, as the template names it), straight to the
    /// strict layer: its `PutEvents` entries are faulted per entry, not per call.
    pub(crate) bus: Arc<dyn StatusBus>,
    /// A rule sends every status event on the bus to this queue, for the test to read.
    status_queue: (aws_sdk_sqs::Client, String),
}

impl Moto {
    /// `sdk_attempts`: the SDK retry budgets (attempts per call) to build sides for.
    pub(crate) async fn start(tag: &str, sdk_attempts: &[u32]) -> Self {
        let moto = stm_testkit::moto().await;
        let proxy = FaultProxy::start(moto.endpoint());
        let prefix = stm_testkit::unique_prefix(tag);
        let direct = sqs_client(moto.endpoint(), None).await;
        let urls = SqsQueue::ensure(&direct, &format!("{prefix}-events"), VISIBILITY_SECONDS, 1_000)
            .await
            .expect("queue");
        let events = EventBridgeBus::client(Some(moto.endpoint()), stm_testkit::REGION).await;
        let bus_name = format!("{prefix}-status");
        events
            .create_event_bus()
            .name(&bus_name)
            .send()
            .await
            .expect("bus");
        let status_queue = format!("{prefix}-status-all");
        let status_url = direct
            .create_queue()
            .queue_name(&status_queue)
            .send()
            .await
            .expect("status queue")
            .queue_url()
            .unwrap_or_default()
            .to_string();
        let arn = format!("arn:aws:sqs:{}:123456789012:{status_queue}", stm_testkit::REGION);
        let pattern = serde_json::json!({"source": [SOURCE]}).to_string();
        stm_runtime::status::route_to_queue(&events, &bus_name, "all", &pattern, &arn)
            .await
            .expect("rule");
        let bus: Arc<dyn StatusBus> = Arc::new(EventBridgeBus::new(events, bus_name));
        let mut sides = Vec::new();
        for &attempts in sdk_attempts {
            // both layouts over the same tables: each scenario is an execution of its own
            for marks in [DedupeMarks::Table, DedupeMarks::OnItem] {
                let retries = Some(quick_retries(attempts));
                let functions_sqs = sqs_client(proxy.endpoint(), retries.clone()).await;
                let client_sqs = sqs_client(proxy.endpoint(), retries.clone()).await;
                sides.push(Side {
                    sdk_attempts: attempts,
                    dedupe_marks: marks,
                    store: dynamodb(proxy.endpoint(), &prefix, retries.clone(), marks).await,
                    queue: Arc::new(SqsQueue::new(functions_sqs, urls.queue_url.clone())),
                    client_store: dynamodb(proxy.endpoint(), &prefix, retries, marks).await,
                    client_queue: Arc::new(SqsQueue::new(client_sqs, urls.queue_url.clone())),
                    view_store: dynamodb(moto.endpoint(), &prefix, None, marks).await,
                });
            }
        }
        Moto {
            proxy,
            sides,
            main: SqsQueue::new(direct.clone(), urls.queue_url),
            dlq: SqsQueue::new(direct.clone(), urls.dead_letter_url),
            prefix,
            bus,
            status_queue: (direct, status_url),
        }
    }

    /// The status events the bus delivered since the last call, as [`announcement`]s
    /// (read off the rule's queue until it stays empty; a re-put after a lost ack repeats
    /// one).
    pub(crate) async fn announced(&self) -> Vec<String> {
        let (sqs, url) = &self.status_queue;
        let mut out = Vec::new();
        let mut empty = 0;
        while empty < 2 {
            let got = sqs
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .send()
                .await
                .expect("receive status events");
            if got.messages().is_empty() {
                empty += 1;
                continue;
            }
            for m in got.messages() {
                let event: serde_json::Value =
                    serde_json::from_str(m.body().unwrap_or_default()).unwrap_or_default();
                out.push(announcement(&event["detail"]));
                sqs.delete_message()
                    .queue_url(url)
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .send()
                    .await
                    .expect("delete a status event");
            }
        }
        out
    }

    /// Arm the random faults: `percent` of the requests of every operation under test fail
    /// whole (the proxy), and `entry_percent` of the batch requests on the scenarios'
    /// tables and queue succeed in part (the strict layer's faults per entry: failed
    /// `SendMessageBatch` entries, `UnprocessedKeys`, `UnprocessedItems`, a transaction
    /// cancelled with a `ThrottlingError` reason).
    pub(crate) fn arm(&self, percent: f64, entry_percent: f64, seed: u64) {
        let strict = stm_testkit::moto_blocking().strict();
        strict.fault_entries(&self.prefix, entry_percent, seed);
        // few BatchWriteItems have two deletes or more (one commit's rows, acked by the
        // relay together) and few BatchGetItems two keys or more, the only ones answerable
        // in part; and a run puts few status events (a notice per finished execution):
        // fault more of each, so every run meets them all
        strict.fault_entries_of(&self.prefix, "BatchWriteItem", (entry_percent * 4.0).min(100.0));
        strict.fault_entries_of(&self.prefix, "BatchGetItem", (entry_percent * 2.0).min(100.0));
        strict.fault_entries_of(&self.prefix, "PutEvents", (entry_percent * 3.0).min(100.0));
        let server_error = |error_type: &str| Fault::Error {
            status: 500,
            error_type: error_type.into(),
            message: "We encountered an internal error. Please try again. (injected)".into(),
        };
        let dynamodb_faults = vec![
            Fault::Throttling,
            Fault::ProvisionedThroughputExceeded,
            server_error("InternalServerError"),
            Fault::DropResponse,
        ];
        let reads_and_writes: Vec<&str> = DYNAMODB_OPERATIONS
            .iter()
            .copied()
            .filter(|op| *op != "TransactWriteItems")
            .collect();
        self.proxy
            .set_rate(&reads_and_writes, percent, dynamodb_faults.clone(), seed);
        let mut transaction_faults = dynamodb_faults;
        // twice: one kind in five gave 2 to 7 conflicts a run, close enough to none for
        // the "never injected" check to fail a rare seed
        transaction_faults.push(Fault::TransactionConflict);
        transaction_faults.push(Fault::TransactionConflict);
        self.proxy
            .set_rate(&["TransactWriteItems"], percent, transaction_faults, seed);
        self.proxy.set_rate(
            &SQS_OPERATIONS,
            percent,
            vec![
                Fault::Throttling,
                server_error("InternalError"),
                Fault::DropResponse,
            ],
            seed,
        );
    }
}

/// A status event's detail as `"{executionId} {status}"`: what the faulty and the
/// fault-free runs must both announce (not the `notificationId`, whose version part may
/// differ where faults split a burst into more commits).
pub(crate) fn announcement(detail: &serde_json::Value) -> String {
    format!(
        "{} {}",
        detail["executionId"].as_str().unwrap_or_default(),
        detail["status"].as_str().unwrap_or_default()
    )
}
