//! The strict AWS layer: a loopback proxy in front of moto that refuses what AWS refuses
//! and moto lets through, with AWS's error code and shape.
//!
//! - **IAM, per request.** The layer listens on one port per [`Principal`]. A request that
//!   arrives on a function's port is checked against that function's role in
//!   `template.yaml` (the same `(action, resource)` grants the exact-grant policies test
//!   compares, [`crate::iam`]); the operator's port against the template's operator
//!   policy. A request the role does not allow gets `AccessDeniedException`, as on AWS.
//!   Table and queue names resolve to the template's resources by the template's own
//!   name patterns (`${Prefix}_outbox` -> `OutboxTable`). The admin port is the harness
//!   (what CloudFormation and the test's own setup do): no IAM, the limits still apply.
//! - **SQS** ([`sqs`]): group and deduplication ids, body size against the queue's
//!   `MaximumMessageSize`, batches (10 entries, 1 MiB, distinct valid ids), `DelaySeconds`
//!   (0-900, never per message on FIFO), message attributes, visibility ranges. A batch
//!   entry that breaks a message rule fails alone (`SenderFault`), as on AWS.
//! - **DynamoDB** ([`dynamodb`]): key values (non-empty, partition ≤ 2,048 B, sort ≤
//!   1,024 B), item ≤ 400 KB, numbers a write sends (≤ 38 significant digits, zero or a
//!   magnitude from 1E-130 to below 1E+126: a `ValidationException`, inside a transaction
//!   a `ValidationError` cancellation reason), transactions (≤ 100 actions, ≤ 4 MB, one
//!   action per item),
//!   reserved words used bare in any expression, `ConsistentRead` on a GSI, `BatchGetItem`
//!   ≤ 100 keys, `BatchWriteItem` ≤ 25, `ClientRequestToken` ≤ 36 characters.
//!
//! The principal is the port's, or, on the harness port, the function the code says it runs
//! (`x-stm-function`, set by `stm_store::aws::as_function` under an emulator): the worker's,
//! relay's, sweeper's and operator's entry points scope themselves, so every path any suite
//! walks is checked against the role it needs on AWS, even where a test shares one client
//! between functions. Requests to other services (Lambda, moto's own API) pass through
//! unchecked.
//! Every refusal is counted by rule ([`StrictLayer::refusals`]).
//!
//! - **Eventually consistent indexes** ([`index_lag`]), opt-in per table-name prefix
//!   ([`StrictLayer::lag_indexes`], [`StrictLayer::hold_indexes`]): a `Query` on a GSI of
//!   those tables is answered with the index as it was a while ago, as AWS's GSIs are
//!   eventually consistent; moto's are always current.
//!
//! - **SQS's retention on a moved clock** ([`retention`]), opt-in per queue-name prefix
//!   ([`StrictLayer::advance_queues`]): a message as old as its queue's retention period
//!   is deleted, not received; moto keeps the wall clock.
//!
//! - **A slow AWS**, opt-in per name prefix ([`StrictLayer::slow_requests`]): requests on
//!   those tables and queues are held before they go on, for tests of deadlines.
//!
//! Every DynamoDB request moto answers with 200 is charged to the layer's partition meter
//! ([`StrictLayer::meter`], [`dynamodb::Metering::observe`]): DynamoDB's read and write
//! units per table, key and second, before the answer goes back to the client.

pub mod dynamodb;
pub mod index_lag;
pub mod retention;
pub mod sqs;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::http::{forward, Conn, Request};
use crate::iam::{self, Grant, Physical};
use crate::meter::PartitionMeter;
use crate::template::Template;

use self::dynamodb::{Metering, TableSchema};
use self::index_lag::{IndexLag, IndexView};
use self::retention::QueueClocks;
use self::sqs::QueueInfo;

/// Whose credentials a request carries: which port of the layer it was sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Principal {
    /// The test harness and the deployment tooling: no IAM check.
    Admin,
    /// The worker function's role (`WorkerRole`).
    Worker,
    /// The relay function's role (`RelayRole`).
    Relay,
    /// The sweeper function's role (`SweeperRole`).
    Sweeper,
    /// The operator CLI (`stm create/send/show/...`): the template's `OperatorPolicy`.
    Operator,
    /// `stm purge`: the template's `PurgePolicy`.
    Purger,
}

impl Principal {
    /// Every principal the layer serves.
    pub const ALL: [Principal; 6] = [
        Principal::Admin,
        Principal::Worker,
        Principal::Relay,
        Principal::Sweeper,
        Principal::Operator,
        Principal::Purger,
    ];

    /// The template resource whose policy applies (`None`: unchecked).
    pub fn policy(self) -> Option<&'static str> {
        match self {
            Principal::Admin => None,
            Principal::Worker => Some("WorkerRole"),
            Principal::Relay => Some("RelayRole"),
            Principal::Sweeper => Some("SweeperRole"),
            Principal::Operator => Some("OperatorPolicy"),
            Principal::Purger => Some("PurgePolicy"),
        }
    }

    /// The principal whose code calls itself `function` (`stm_store::aws::as_function`).
    pub fn of_function(function: &str) -> Option<Principal> {
        match function {
            "worker" => Some(Principal::Worker),
            "relay" => Some(Principal::Relay),
            "sweeper" => Some(Principal::Sweeper),
            "operator" => Some(Principal::Operator),
            "purger" => Some(Principal::Purger),
            _ => None,
        }
    }

    fn arn(self) -> String {
        match self.policy() {
            Some(id) => format!("arn:aws:sts::123456789012:assumed-role/stm-{id}/{self:?}"),
            None => "arn:aws:iam::123456789012:user/admin".into(),
        }
    }
}

/// An answer in AWS's shape instead of moto's.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: u16,
    /// The error code (`ValidationException`, `InvalidParameterValue`, ...).
    pub code: String,
    pub message: String,
    /// The layer's name for the rule (`sqs.group_id.format`, ...), for counts.
    pub rule: &'static str,
    service: Service,
    /// For a cancelled transaction: its reasons.
    reasons: Option<Vec<Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Service {
    DynamoDb,
    Sqs,
}

impl Refusal {
    pub(crate) fn sqs(code: &str, rule: &'static str, message: String) -> Refusal {
        Refusal {
            status: 400,
            code: code.to_string(),
            message,
            rule,
            service: Service::Sqs,
            reasons: None,
        }
    }

    pub(crate) fn dynamodb_validation(rule: &'static str, message: String) -> Refusal {
        Refusal {
            status: 400,
            code: "ValidationException".into(),
            message,
            rule,
            service: Service::DynamoDb,
            reasons: None,
        }
    }

    pub(crate) fn transaction_cancelled(
        rule: &'static str,
        items: usize,
        index: usize,
        code: &str,
        message: &str,
    ) -> Refusal {
        let reasons: Vec<Value> = (0..items)
            .map(|i| {
                if i == index {
                    json!({"Code": code, "Message": message})
                } else {
                    json!({"Code": "None"})
                }
            })
            .collect();
        let codes: Vec<&str> = (0..items)
            .map(|i| if i == index { code } else { "None" })
            .collect();
        Refusal {
            status: 400,
            code: "TransactionCanceledException".into(),
            message: format!(
                "Transaction cancelled, please refer cancellation reasons for specific reasons [{}]",
                codes.join(", ")
            ),
            rule,
            service: Service::DynamoDb,
            reasons: Some(reasons),
        }
    }

    fn access_denied(service: Service, principal: Principal, action: &str, resource: &str) -> Refusal {
        // SQS names the action in lower case (`sqs:sendmessage`), DynamoDB as written
        let action = if service == Service::Sqs {
            action.to_ascii_lowercase()
        } else {
            action.to_string()
        };
        let message = format!(
            "User: {} is not authorized to perform: {action} on resource: {resource} because no identity-based policy allows the {action} action",
            principal.arn()
        );
        Refusal {
            status: if service == Service::Sqs { 403 } else { 400 },
            code: if service == Service::Sqs {
                "AccessDenied".into()
            } else {
                "AccessDeniedException".into()
            },
            message,
            rule: "iam",
            service,
            reasons: None,
        }
    }

    /// The HTTP answer, as the service's JSON protocol shapes it: DynamoDB's validation
    /// and IAM errors carry coral's `__type`s; SQS's JSON protocol adds the query-protocol
    /// code in `x-amzn-query-error`, which is where the SDKs read the code from.
    fn to_http(&self) -> Vec<u8> {
        let code = self.code.as_str();
        let (type_name, query_error) = match self.service {
            Service::DynamoDb => (
                match code {
                    "ValidationException" => "com.amazon.coral.validate#ValidationException".to_string(),
                    "AccessDeniedException" => "com.amazon.coral.service#AccessDeniedException".to_string(),
                    other => format!("com.amazonaws.dynamodb.v20120810#{other}"),
                },
                None,
            ),
            Service::Sqs => match code {
                "InvalidParameterValue" | "MissingParameter" | "AccessDenied" => (
                    format!("com.amazon.coral.service#{code}Exception"),
                    Some(format!("{code};Sender")),
                ),
                // the batch errors keep the query protocol's service prefix in their code
                "TooManyEntriesInBatchRequest"
                | "EmptyBatchRequest"
                | "BatchEntryIdsNotDistinct"
                | "InvalidBatchEntryId"
                | "BatchRequestTooLong" => (
                    format!("com.amazonaws.sqs#{code}"),
                    Some(format!("AWS.SimpleQueueService.{code};Sender")),
                ),
                other => (
                    format!("com.amazonaws.sqs#{other}"),
                    Some(format!("{other};Sender")),
                ),
            },
        };
        let mut body = json!({"__type": type_name, "message": self.message});
        if let Some(reasons) = &self.reasons {
            body["CancellationReasons"] = Value::Array(reasons.clone());
            body["Message"] = Value::String(self.message.clone());
        }
        let text = body.to_string();
        let mut head = format!(
            "HTTP/1.1 {} Bad Request\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: stm-strict-layer\r\nx-amzn-ErrorType: {}\r\n",
            self.status, self.code
        );
        if let Some(q) = query_error {
            head.push_str(&format!("x-amzn-query-error: {q}\r\n"));
        }
        head.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            text.len()
        ));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(text.as_bytes());
        bytes
    }
}

/// The roles' grants, read once from the repository's `template.yaml`.
struct Policies {
    grants: BTreeMap<Principal, BTreeSet<Grant>>,
    physical: Physical,
}

impl Policies {
    fn load() -> Result<Policies, String> {
        let path = crate::repo_root().join("template.yaml");
        let template = Template::load(&path).map_err(|e| format!("{}: {e:#}", path.display()))?;
        let mut grants = BTreeMap::new();
        for principal in Principal::ALL {
            if let Some(id) = principal.policy() {
                let g = iam::role_grants(&template, id).map_err(|e| format!("template.yaml {id}: {e:#}"))?;
                grants.insert(principal, g);
            }
        }
        Ok(Policies {
            grants,
            physical: Physical::from_template(&template),
        })
    }

    /// `None` when allowed; else the first action the principal lacks, on what.
    fn denied(
        &self,
        principal: Principal,
        service: &str,
        operation: &str,
        body: &Value,
    ) -> Option<(String, String)> {
        let granted = self.grants.get(&principal)?;
        match iam::required_by(service, operation, body, &self.physical) {
            Ok(needed) => needed
                .into_iter()
                .find(|g| !granted.contains(g))
                .map(|(action, resource)| (action, arn_of(&resource, service, body))),
            // a table or queue outside the template: no policy can name it
            Err(why) => Some((
                format!("{}:{operation}", service_prefix(service)),
                format!("({why:#})"),
            )),
        }
    }
}

fn service_prefix(service: &str) -> &'static str {
    if service == SQS_TARGET {
        "sqs"
    } else {
        "dynamodb"
    }
}

/// A readable ARN for a denied resource (the logical id with the physical name the
/// request used, when there is one).
fn arn_of(logical: &str, service: &str, body: &Value) -> String {
    if service == SQS_TARGET {
        let name = body["QueueUrl"]
            .as_str()
            .and_then(|u| u.rsplit('/').next())
            .or(body["QueueName"].as_str())
            .unwrap_or(logical);
        return format!("arn:aws:sqs:us-east-1:123456789012:{name} ({logical})");
    }
    let (table, index) = logical
        .split_once("/index/")
        .map_or((logical, None), |(t, i)| (t, Some(i)));
    let name = body["TableName"].as_str().unwrap_or(table);
    match index {
        Some(i) => format!("arn:aws:dynamodb:us-east-1:123456789012:table/{name}/index/{i} ({table})"),
        None => format!("arn:aws:dynamodb:us-east-1:123456789012:table/{name} ({table})"),
    }
}

/// The header in which the code under test names its function (stm-store's
/// `aws::FUNCTION_HEADER`; the test kit does not depend on the SDK crates).
pub const FUNCTION_HEADER: &str = "x-stm-function";

const DYNAMODB_TARGET: &str = "DynamoDB_20120810";
const SQS_TARGET: &str = "AmazonSQS";

struct Shared {
    /// moto's `host:port`.
    upstream: String,
    policies: Result<Policies, String>,
    schemas: Mutex<BTreeMap<String, TableSchema>>,
    queues: Mutex<BTreeMap<String, QueueInfo>>,
    refusals: Mutex<BTreeMap<String, usize>>,
    metering: Metering,
    /// The tables whose GSIs lag, and their items' history.
    index_lag: IndexLag,
    /// The queues whose clocks the tests moved (SQS's retention on them).
    queue_clocks: QueueClocks,
    /// Messages SQS's retention deleted (on moved queues), by queue name.
    expired: Mutex<BTreeMap<String, usize>>,
    /// Name prefix -> how long its requests are held ([`StrictLayer::slow_requests`]).
    slow: Mutex<BTreeMap<String, std::time::Duration>>,
}

/// The layer; see the module docs. It runs on its own thread and runtime, for the life
/// of the process (the test process's moto server is behind it).
pub struct StrictLayer {
    endpoints: BTreeMap<Principal, String>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for StrictLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StrictLayer")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

impl StrictLayer {
    /// Start the layer in front of `upstream` (`http://host:port`).
    ///
    /// # Panics
    /// When no loopback port is free, or `template.yaml` cannot be read (every role
    /// check would be meaningless).
    pub fn start(upstream: &str) -> StrictLayer {
        let upstream = upstream
            .strip_prefix("http://")
            .unwrap_or(upstream)
            .trim_end_matches('/')
            .to_string();
        let policies = Policies::load();
        if let Err(why) = &policies {
            panic!("stm-testkit: the strict layer cannot read the roles: {why}");
        }
        let shared = Arc::new(Shared {
            upstream,
            policies,
            schemas: Mutex::default(),
            queues: Mutex::default(),
            refusals: Mutex::default(),
            metering: Metering::new(),
            index_lag: IndexLag::default(),
            queue_clocks: QueueClocks::default(),
            expired: Mutex::default(),
            slow: Mutex::default(),
        });
        let mut listeners = Vec::new();
        let mut endpoints = BTreeMap::new();
        for principal in Principal::ALL {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("strict layer: bind loopback");
            listener.set_nonblocking(true).expect("strict layer: nonblocking");
            let port = listener.local_addr().expect("strict layer: local addr").port();
            endpoints.insert(principal, format!("http://127.0.0.1:{port}"));
            listeners.push((principal, listener));
        }
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("strict-aws-layer".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("strict layer: runtime");
                rt.block_on(async move {
                    let mut tasks = Vec::new();
                    for (principal, listener) in listeners {
                        let shared = thread_shared.clone();
                        tasks.push(tokio::spawn(async move {
                            let listener = TcpListener::from_std(listener).expect("strict layer: listener");
                            loop {
                                let Ok((stream, _)) = listener.accept().await else {
                                    continue;
                                };
                                let shared = shared.clone();
                                tokio::spawn(async move {
                                    let _ = serve(stream, principal, &shared).await;
                                });
                            }
                        }));
                    }
                    for t in tasks {
                        let _ = t.await;
                    }
                });
            })
            .expect("strict layer: thread");
        StrictLayer { endpoints, shared }
    }

    /// The endpoint a client acting as `principal` uses.
    pub fn endpoint(&self, principal: Principal) -> &str {
        self.endpoints
            .get(&principal)
            .map(String::as_str)
            .unwrap_or_default()
    }

    /// Refusals so far, by rule (`iam`, `sqs.group_id.format`, ...).
    pub fn refusals(&self) -> BTreeMap<String, usize> {
        self.shared
            .refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The partition meter: the read and write units of every DynamoDB request moto
    /// answered with 200, per table and key, on the clock of
    /// [`meter_clock`](Self::meter_clock) ([`dynamodb::Metering::observe`] says what is
    /// charged). A clone shares the counts; the tests of one process share the layer, so a
    /// test reads its own tables ([`PartitionMeter::report_where`]).
    pub fn meter(&self) -> PartitionMeter {
        self.shared.metering.meter()
    }

    /// The meter's clock now: wall-clock seconds since the layer started.
    pub fn meter_clock(&self) -> f64 {
        self.shared.metering.now()
    }

    /// From now on, a `Query` on a global secondary index of a table whose name starts
    /// with `table_prefix` sees the index as it was `lag` ago, as on AWS, where every GSI
    /// read is eventually consistent (see [`index_lag`]). Other tables are not affected:
    /// a test lags its own prefix. The lag is wall-clock time.
    pub fn lag_indexes(&self, table_prefix: &str, lag: std::time::Duration) {
        self.shared
            .index_lag
            .set(table_prefix, IndexView::Behind(lag.as_secs_f64()));
    }

    /// From now on, the GSIs of the tables named with `table_prefix` show the tables as they
    /// are at this instant, whatever is written later, until [`live_indexes`](Self::live_indexes)
    /// (or [`lag_indexes`](Self::lag_indexes)): propagation at its slowest, held still so a
    /// test can act while the index is stale.
    pub fn hold_indexes(&self, table_prefix: &str) {
        let now = self.shared.metering.now();
        self.shared.index_lag.set(table_prefix, IndexView::HeldAt(now));
    }

    /// Move on by `by` the clock of every queue whose name starts with `queue_prefix`, for
    /// SQS's retention: from now on a receive on such a queue deletes, and does not hand
    /// out, a message whose age on that clock has reached the queue's
    /// `MessageRetentionPeriod` (see [`retention`]). Moves add up; other queues keep the
    /// wall clock (moto's own retention).
    pub fn advance_queues(&self, queue_prefix: &str, by: std::time::Duration) {
        self.shared.queue_clocks.advance(queue_prefix, by.as_secs_f64());
    }

    /// From now on, every request naming a table or queue whose name starts with `prefix`
    /// is held `by` before it goes to moto: a slow AWS (a throttled partition, a far
    /// Region), for tests of work under a deadline. [`normal_speed`](Self::normal_speed)
    /// ends it.
    pub fn slow_requests(&self, prefix: &str, by: std::time::Duration) {
        self.shared
            .slow
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(prefix.to_string(), by);
    }

    /// Requests naming `prefix`'s tables and queues are no longer held.
    pub fn normal_speed(&self, prefix: &str) {
        self.shared
            .slow
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(prefix);
    }

    /// Messages deleted by SQS's retention on moved queues so far, by queue name.
    pub fn expired_messages(&self) -> BTreeMap<String, usize> {
        self.shared
            .expired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The GSIs of the tables named with `table_prefix` answer from the live table again
    /// (moto's own behaviour).
    pub fn live_indexes(&self, table_prefix: &str) {
        self.shared.index_lag.clear(table_prefix);
    }
}

/// The rules the layer enforces, by name (docs/reliability.md lists them).
pub const RULES: &[&str] = &[
    "iam",
    "sqs.group_id.missing",
    "sqs.group_id.format",
    "sqs.dedup_id.missing",
    "sqs.dedup_id.format",
    "sqs.body.empty",
    "sqs.body.characters",
    "sqs.body.size",
    "sqs.batch.empty",
    "sqs.batch.entries",
    "sqs.batch.bytes",
    "sqs.batch.entry_id",
    "sqs.batch.distinct_ids",
    "sqs.delay.fifo",
    "sqs.delay.range",
    "sqs.attributes.count",
    "sqs.attributes.name",
    "sqs.attributes.type",
    "sqs.attributes.value",
    "sqs.visibility.range",
    "sqs.receive.max_messages",
    "sqs.receive.wait",
    "sqs.queue_attributes.range",
    "sqs.queue_name",
    "dynamodb.table_name",
    "dynamodb.key.missing",
    "dynamodb.key.empty",
    "dynamodb.key.size",
    "dynamodb.item.size",
    "dynamodb.number.range",
    "dynamodb.number.precision",
    "dynamodb.transaction.actions",
    "dynamodb.transaction.bytes",
    "dynamodb.transaction.one_item_twice",
    "dynamodb.transaction.client_request_token",
    "dynamodb.expression.reserved_word",
    "dynamodb.consistent_read.gsi",
    "dynamodb.batch_get.keys",
    "dynamodb.batch_write.requests",
    "dynamodb.batch_write.duplicates",
];

/// A JSON request of ours to moto (the schema and attribute look-ups).
async fn ask_upstream(upstream: &str, target: &str, body: &Value) -> Option<Value> {
    let service = if target.starts_with(SQS_TARGET) {
        "sqs"
    } else {
        "dynamodb"
    };
    let request = Request {
        method: "POST".into(),
        path: "/".into(),
        headers: vec![
            ("Host".into(), upstream.to_string()),
            ("Content-Type".into(), "application/x-amz-json-1.0".into()),
            ("X-Amz-Target".into(), target.to_string()),
            (
                "Authorization".into(),
                format!("AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"),
            ),
        ],
        body: body.to_string().into_bytes(),
    };
    let answer = forward(&request, upstream).await.ok()?;
    let (status, body) = split_response(&answer)?;
    (status == 200)
        .then(|| serde_json::from_slice(body).ok())
        .flatten()
}

/// The item a lagged write names, as moto holds it now (a consistent `GetItem`); `None`
/// when there is none (or moto did not answer: the index then shows no item).
async fn read_item(upstream: &str, write: &index_lag::LaggedWrite) -> Option<Value> {
    let answer = ask_upstream(
        upstream,
        &format!("{DYNAMODB_TARGET}.GetItem"),
        &IndexLag::get_item_request(write),
    )
    .await?;
    answer.get("Item").filter(|i| i.is_object()).cloned()
}

/// `(status, body)` of a whole HTTP response.
fn split_response(bytes: &[u8]) -> Option<(u16, &[u8])> {
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&bytes[..head_end]).ok()?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, &bytes[head_end + 4..]))
}

/// A response with a new JSON body (the layer's merge of a partial batch).
fn replace_body(bytes: &[u8], body: &Value) -> Vec<u8> {
    let text = body.to_string();
    let head_end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(bytes.len());
    let head = String::from_utf8_lossy(&bytes[..head_end]);
    let mut out = String::new();
    for (i, line) in head.split("\r\n").enumerate() {
        if i > 0
            && line.split_once(':').is_some_and(|(k, _)| {
                let k = k.trim();
                k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("transfer-encoding")
            })
        {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str(&format!("Content-Length: {}\r\n\r\n", text.len()));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(text.as_bytes());
    bytes
}

impl Shared {
    fn count(&self, rule: &str) {
        *self
            .refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(rule.to_string())
            .or_default() += 1;
    }

    async fn schemas_for(&self, tables: &[String]) -> BTreeMap<String, TableSchema> {
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

    async fn queue_info(&self, url: &str) -> Option<QueueInfo> {
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
    fn hold_for(&self, service: &str, operation: &str, body: &Value) -> Option<std::time::Duration> {
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
    async fn delete_expired(&self, url: &str, receipt_handles: &[String]) {
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
    fn invalidate(&self, operation: &str, body: &Value) {
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

async fn serve(stream: tokio::net::TcpStream, principal: Principal, shared: &Shared) -> std::io::Result<()> {
    let mut conn = Conn::new(stream);
    let Some(mut request) = conn.read_request().await? else {
        return Ok(());
    };
    // a function's own port names it; on the harness port, the code says which function it
    // runs (stm_store::aws::as_function, under an emulator)
    let principal = match (principal, request.header(FUNCTION_HEADER)) {
        (Principal::Admin, Some(function)) => Principal::of_function(function).unwrap_or(Principal::Admin),
        _ => principal,
    };
    let target = request.header("x-amz-target").unwrap_or_default().to_string();
    let (service, operation) = target.split_once('.').unwrap_or(("", ""));
    let checked = service == DYNAMODB_TARGET || service == SQS_TARGET;
    let body: Value = if checked {
        serde_json::from_slice(&request.body).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let mut partial_failures = None;
    // the key schemas of the tables a DynamoDB request names: for the check, then the meter
    let mut schemas = BTreeMap::new();
    if checked {
        let refusal = 'verdict: {
            if let Ok(policies) = &shared.policies {
                if let Some((action, resource)) = policies.denied(principal, service, operation, &body) {
                    let s = if service == SQS_TARGET {
                        Service::Sqs
                    } else {
                        Service::DynamoDb
                    };
                    break 'verdict Some(Refusal::access_denied(s, principal, &action, &resource));
                }
            }
            if service == SQS_TARGET {
                let queue = match body["QueueUrl"].as_str() {
                    Some(url) => shared.queue_info(url).await,
                    None => None,
                };
                match sqs::check(operation, &body, queue.as_ref()) {
                    sqs::Verdict::Forward => None,
                    sqs::Verdict::Refuse(r) => Some(r),
                    sqs::Verdict::Partial { keep, failed, rules } => {
                        for rule in rules {
                            shared.count(rule);
                        }
                        if keep.is_empty() {
                            let answer = json!({"Successful": [], "Failed": failed});
                            let text = answer.to_string();
                            let head = format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: stm-strict-layer\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                text.len()
                            );
                            conn.stream().write_all(head.as_bytes()).await?;
                            conn.stream().write_all(text.as_bytes()).await?;
                            return conn.stream().shutdown().await;
                        }
                        request.body = sqs::keep_entries(&body, &keep).to_string().into_bytes();
                        partial_failures = Some(failed);
                        None
                    }
                }
            } else {
                schemas = shared
                    .schemas_for(&dynamodb::tables_named(operation, &body))
                    .await;
                dynamodb::check(operation, &body, &schemas).err()
            }
        };
        if let Some(refusal) = refusal {
            shared.count(refusal.rule);
            conn.stream().write_all(&refusal.to_http()).await?;
            return conn.stream().shutdown().await;
        }
        shared.invalidate(operation, &body);
    }
    // the items a write changes on tables whose indexes lag: their state before the first
    // write the layer sees, so the index can go on showing it
    let lagged_writes = if service == DYNAMODB_TARGET {
        shared.index_lag.writes_of(operation, &body, &schemas)
    } else {
        Vec::new()
    };
    for write in lagged_writes.iter().filter(|w| shared.index_lag.unknown(w)) {
        let before = read_item(&shared.upstream, write).await;
        let now = shared.metering.now();
        shared.index_lag.record(write, f64::NEG_INFINITY, before, now);
    }
    // a receive on a queue whose clock a test moved: SQS's retention on that clock
    let mut moved_receive = None;
    if service == SQS_TARGET && operation == "ReceiveMessage" {
        let mut asked = body.clone();
        if let Some(moved) = shared.queue_clocks.before_receive(&mut asked) {
            request.body = asked.to_string().into_bytes();
            moved_receive = Some(moved);
        }
    }
    if let Some(hold) = shared.hold_for(service, operation, &body) {
        tokio::time::sleep(hold).await;
    }
    let mut answer = forward(&request, &shared.upstream).await?;
    if service == SQS_TARGET {
        if let Some((200, bytes)) = split_response(&answer) {
            let moto: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
            shared.queue_clocks.record_sends(operation, &body, &moto);
            if let (Some(moved), Some(url)) = (moved_receive, body["QueueUrl"].as_str()) {
                let retention = shared
                    .queue_info(url)
                    .await
                    .map_or(sqs::DEFAULT_RETENTION_SECONDS, |q| q.retention_seconds);
                let (kept, expired) = shared.queue_clocks.after_receive(&moto, moved, retention);
                shared.delete_expired(url, &expired).await;
                answer = replace_body(&answer, &kept);
            }
        }
    }
    if service == DYNAMODB_TARGET {
        let mut lagged_answer = None;
        // charged before the client has the answer, so a test that reads the meter after
        // its request sees the request's units
        if let Some((200, bytes)) = split_response(&answer) {
            let moto_answer = if Metering::reads_answer(operation, &body) {
                serde_json::from_slice(bytes).unwrap_or(Value::Null)
            } else {
                Value::Null
            };
            let at = shared.metering.now();
            shared
                .metering
                .observe(operation, &body, &moto_answer, &schemas, at);
            for write in &lagged_writes {
                let after = read_item(&shared.upstream, write).await;
                shared.index_lag.record(write, at, after, shared.metering.now());
            }
            if operation == "Query" {
                // (a `Query` is one of the requests whose answer the meter reads)
                lagged_answer =
                    shared
                        .index_lag
                        .answer_query(&body, &moto_answer, &schemas, shared.metering.now());
            }
        }
        if let Some(lagged) = lagged_answer {
            answer = replace_body(&answer, &lagged);
        }
    }
    let answer = match partial_failures {
        Some(failed) => match split_response(&answer) {
            Some((200, bytes)) => {
                let moto: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
                replace_body(&answer, &sqs::merge_failed(&moto, failed))
            }
            _ => answer,
        },
        None => answer,
    };
    conn.stream().write_all(&answer).await?;
    conn.stream().shutdown().await
}
