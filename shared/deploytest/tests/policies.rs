//! Each function's role in `template.yaml` allows exactly what the function's code sends.
//!
//! Nothing is listed by hand. Each test builds the function the way its `main.rs` does
//! (`FunctionContext::from_env`, with the environment the template gives the function),
//! points it at moto through a [`Recorder`] (`STM_ENDPOINT_URL`), runs its handler logic
//! over a scenario that reaches every store and queue call site it has, and maps the
//! recorded requests to IAM grants per table ([`iam::required`]). That set, plus what the
//! Lambda service needs (its log group; the SQS event source's polling), must equal the
//! role's grants, both ways: a missing grant is an `AccessDenied` in production, an extra
//! one is privilege nobody uses.
//!
//! The scenarios:
//! - worker: an `Order` through payment retries, timers armed and cancelled; a `Checkout`
//!   forking two regions (spawn intents), a broadcast and a join; with the trace on and a
//!   ring of 2 (trace puts, ring deletes, and the trace-end query on an execution item
//!   written without the store's trace hint, as harel writes it); one lost CAS (injected:
//!   a cancelled transaction without the stored item, so the store reads the version) that
//!   the worker reports failed and releases; records delivered as the Lambda event source
//!   does (receive, invoke, delete what succeeded); then the sample events of `events/`
//!   verbatim (a domain event, a spawn intent, a multi-group batch, a poison message).
//! - relay: pending outbox entries (one without a target) and a spawn intent.
//! - sweeper: a due timer found by the (rare, claimed) full scan, then one found by the
//!   sparse due-time index.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use stm_core::{Event, Execution, Map, Value};
use stm_deploytest::iam::{self, Physical};
use stm_deploytest::recorder::Recorder;
use stm_deploytest::template::{Resolver, Template};
use stm_lambda::{Function, FunctionContext};
use stm_runtime::queue::QueueUrls;
use stm_runtime::{ActionRegistry, Control, Driver, Queue, SqsQueue};
use stm_store::{Commit, CreateOptions, DynamoDbStore, ExecutionStore, SpawnIntent, TimerOp};
use stm_testkit::{Fault, FaultProxy, Principal, REGION};

/// `FunctionContext::from_env` reads the process environment: one function at a time.
static ENV: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Every variable a function reads (ARCHITECTURE.md), cleared before each set-up.
const VARIABLES: [&str; 20] = [
    "STM_TABLE_PREFIX",
    "STM_QUEUE_URL",
    "STM_TIMER_QUEUE_URL",
    "STM_ENDPOINT_URL",
    "STM_DEFINITIONS_DIR",
    "STM_TRACE",
    "STM_TRACE_MAX",
    "STM_PROCESSED_TTL_DAYS",
    "STM_FINISHED_TTL_DAYS",
    "STM_ACTIONS",
    "STM_STATUS_EVENTS",
    "STM_EVENT_BUS",
    "STM_FAN_OUT_JOIN",
    "STM_ROLLBACK_FAILURE_RATE",
    "STM_ROLLBACK_MIN_FINISHED",
    "STM_ROLLBACK_WINDOW_SECONDS",
    "STM_ACTION_TIMEOUT_SECONDS",
    "STM_ACTION_MAX_RESPONSE_BYTES",
    "AWS_ENDPOINT_URL",
    "RUST_LOG",
];

/// moto with fresh tables and queues, a fault proxy in front of it and a recorder in front
/// of that; the template resolved for them.
struct Stack {
    template: Template,
    prefix: String,
    overrides: Vec<(String, String)>,
    urls: QueueUrls,
    /// The precise-timer doorbell queue (the template's `TimerQueue`).
    timer_queue_url: String,
    /// Not recorded: the test's own view of the tables and the queue.
    store: Arc<DynamoDbStore>,
    queue: Arc<SqsQueue>,
    fault: FaultProxy,
    recorder: Recorder,
}

impl Stack {
    /// The function's code talks to the strict layer as `principal`: a request its role
    /// does not allow is refused as AWS would, whatever the recording later shows.
    async fn new(tag: &str, overrides: &[(&str, &str)], principal: Principal) -> Stack {
        let moto = stm_testkit::moto().await;
        let prefix = stm_testkit::unique_prefix(tag);
        let options = CreateOptions {
            prefix: prefix.clone(),
            ..CreateOptions::default()
        };
        let store = DynamoDbStore::create_with(Some(moto.endpoint()), REGION, options)
            .await
            .expect("tables");
        let sqs = SqsQueue::client(Some(moto.endpoint()), REGION).await;
        let urls = SqsQueue::ensure(&sqs, &format!("{prefix}-events"), 180, 5)
            .await
            .expect("queues");
        let timer_queue_url = stm_runtime::doorbell::SqsDoorbell::ensure(&sqs, &format!("{prefix}-timers"))
            .await
            .expect("doorbell queue");
        let queue = Arc::new(SqsQueue::new(sqs, urls.queue_url.clone()));
        // the template's StatusBus, as CloudFormation would make it
        stm_runtime::status::EventBridgeBus::client(Some(moto.endpoint()), REGION)
            .await
            .create_event_bus()
            .name(format!("{prefix}-status"))
            .send()
            .await
            .expect("status bus");
        let fault = FaultProxy::start(moto.endpoint_as(principal));
        let recorder = Recorder::start(fault.endpoint());
        Stack {
            template: Template::repo(),
            prefix,
            overrides: overrides
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            urls,
            timer_queue_url,
            store: Arc::new(store),
            queue,
            fault,
            recorder,
        }
    }

    fn resolver(&self) -> Resolver<'_> {
        let mut overrides: Vec<(&str, &str)> = self
            .overrides
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        overrides.push(("Prefix", &self.prefix));
        Resolver::new(&self.template, &overrides)
            .with_ref("EventQueue", self.urls.queue_url.clone())
            .with_ref("TimerQueue", self.timer_queue_url.clone())
            .with_ref("StatusBus", format!("{}-status", self.prefix))
    }

    /// The folder the definitions layer is built from (the worker's `/opt`).
    fn layer_dir(&self) -> std::path::PathBuf {
        let layer = stm_deploytest::template::referenced(
            &self.template.properties("Worker").expect("worker")["Layers"][0],
        )
        .expect("the worker's layer");
        let uri = self.template.properties(&layer).expect("layer")["ContentUri"]
            .as_str()
            .expect("ContentUri")
            .to_string();
        self.template.dir().join(uri)
    }

    /// The function's context, built by the functions' own init from the environment the
    /// template gives `function` (the layer mounted at its source folder), talking to the
    /// recorder.
    async fn function(&self, function: &str, kind: Function) -> FunctionContext {
        let _guard = ENV.lock().await;
        let mut env = self.resolver().environment(function).expect("environment");
        if env.get("STM_DEFINITIONS_DIR").map(String::as_str) == Some("/opt") {
            env.insert(
                "STM_DEFINITIONS_DIR".into(),
                self.layer_dir().display().to_string(),
            );
        }
        env.insert("STM_ENDPOINT_URL".into(), self.recorder.endpoint().to_string());
        env.insert("AWS_REGION".into(), REGION.into());
        for name in VARIABLES {
            std::env::remove_var(name);
        }
        for (k, v) in &env {
            std::env::set_var(k, v);
        }
        let context = FunctionContext::from_env(kind).await;
        for name in env.keys() {
            std::env::remove_var(name);
        }
        context.unwrap_or_else(|e| panic!("{function} init: {e}"))
    }

    /// A driver and control plane over the test's own (unrecorded) store and queue.
    fn control(&self) -> Control {
        let definitions = stm_runtime::config::load_definitions_dir(&self.layer_dir()).expect("definitions");
        let driver = Driver::new(self.store.clone(), definitions, ActionRegistry::with_builtins());
        Control::new(driver, self.queue.clone())
    }

    /// Play the Lambda SQS event source until the queue is quiet: receive a batch, invoke
    /// the worker's handler, delete what it did not report failed. The number of records
    /// reported failed.
    async fn deliver(&self, worker: &stm_runtime::Worker, arn: &str) -> usize {
        let mut failures = 0;
        let mut idle = 0;
        for _ in 0..300 {
            let messages = self.queue.receive(10, 180, 0).await.expect("receive");
            if messages.is_empty() {
                idle += 1;
                if idle >= 3 {
                    return failures;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            idle = 0;
            let response =
                stm_lambda::handle_sqs_event(worker, stm_lambda::sqs_event(&messages, arn), None).await;
            let failed: BTreeSet<String> = response
                .batch_item_failures
                .iter()
                .map(|f| f.item_identifier.clone())
                .collect();
            failures += failed.len();
            for m in messages.iter().filter(|m| !failed.contains(&m.message_id)) {
                self.queue.delete(&m.receipt_handle).await.expect("delete");
            }
        }
        panic!("the queue did not go quiet after 300 polls");
    }

    /// Compare `function`'s role with what was recorded plus what Lambda needs.
    fn assert_role_matches(&self, function: &str) {
        let records = self.recorder.records();
        assert!(
            !records.is_empty(),
            "{function} sent nothing through the recorder"
        );
        let physical = Physical::exact(
            self.resolver().table_names().expect("tables"),
            BTreeMap::from([
                (self.urls.queue_url.clone(), "EventQueue".to_string()),
                (self.timer_queue_url.clone(), "TimerQueue".to_string()),
            ]),
        )
        .with_bus(format!("{}-status", self.prefix), "StatusBus");
        let code = iam::required(&records, &physical).unwrap_or_else(|e| panic!("{function}: {e:#}"));
        let service = iam::service_grants(&self.template, function).expect("service grants");
        let needed: BTreeSet<_> = code.union(&service).cloned().collect();
        let role = iam::function_role(&self.template, function).expect("role");
        let granted = iam::role_grants(&self.template, &role).expect("grants");
        let missing: BTreeSet<_> = needed.difference(&granted).cloned().collect();
        let unused: BTreeSet<_> = granted.difference(&needed).cloned().collect();
        let mut ops: BTreeMap<String, usize> = BTreeMap::new();
        for r in &records {
            *ops.entry(r.target.clone()).or_default() += 1;
        }
        assert!(
            missing.is_empty() && unused.is_empty(),
            "{role} (template.yaml) does not match what {function} sends.\n\
             missing (AccessDenied in production):\n{}\n\
             granted but never used:\n{}\n\
             requests recorded: {ops:?}\nthe code needs:\n{}",
            iam::show(&missing),
            iam::show(&unused),
            iam::show(&needed),
        );
    }
}

/// A sample event of events/.
fn sample(name: &str) -> String {
    let path = stm_deploytest::repo_root().join("events").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What the scheduled functions' handlers take (functions/{relay,sweeper}/src/main.rs).
fn scheduled(name: &str) -> stm_lambda::events::EventBridgeEvent<serde_json::Value> {
    serde_json::from_str(&sample(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn data(json: serde_json::Value) -> Map {
    match json {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_role_is_exactly_what_the_worker_sends() {
    // trace on with a ring of 2: the trace put, the ring delete and the trace-end query
    // every status event on: the inline flush puts them on the status bus
    // the counted join: a fan-out's reports go to its join's rows in `counters`
    let stack = Stack::new(
        "iam_worker",
        &[
            ("Trace", "true"),
            ("TraceMax", "2"),
            ("StatusEvents", "all"),
            ("FanOutJoin", "counted"),
        ],
        Principal::Worker,
    )
    .await;
    let context = stack
        .function("Worker", Function::Worker(ActionRegistry::with_builtins()))
        .await;
    let worker = context.worker();

    // the test's own client plays the users and the Lambda event source
    let control = stack.control();
    control
        .create("Order", None, Some("order-1"))
        .await
        .expect("create order");
    control
        .create("Checkout", None, Some("checkout-1"))
        .await
        .expect("create checkout");
    // the executions the sample events (events/worker-*.json) address
    control
        .create("Order", None, Some("order-2"))
        .await
        .expect("create order-2");
    control
        .create("Checkout", None, Some("checkout-2"))
        .await
        .expect("create checkout-2");
    // order-1 as harel 0.9.0 writes an execution item: without the store's trace-end hint,
    // so the first traced commit queries the end of the trace
    stack
        .store
        .client()
        .update_item()
        .table_name(format!("{}_executions", stack.prefix))
        .key("id", AttributeValue::S("order-1".into()))
        .update_expression("REMOVE #t")
        .expression_attribute_names("#t", stm_store::dynamodb::TRACE_IDX_ATTRIBUTE)
        .send()
        .await
        .expect("drop the trace hint");
    let sends: [(&str, &str, serde_json::Value); 8] = [
        ("order-1", "Submit", serde_json::json!({"amount": 42.5})),
        (
            "order-1",
            "PaymentFailed",
            serde_json::json!({"reason": "card declined"}),
        ),
        (
            "order-1",
            "Timeout",
            serde_json::json!({"path": "Payment.Backoff"}),
        ),
        ("order-1", "PaymentOk", serde_json::json!({"receipt": "r-1"})),
        ("order-1", "Shipped", serde_json::json!({})),
        ("checkout-1", "Checkout", serde_json::json!({})),
        ("checkout-1", "Charged", serde_json::json!({})),
        ("checkout-1", "Reserved", serde_json::json!({})),
    ];
    for (target, kind, payload) in sends {
        let event = Event::with_data(kind, data(payload)).with_id(format!("{target}-{kind}"));
        control
            .send(target, &event)
            .await
            .unwrap_or_else(|e| panic!("send {kind}: {e}"));
    }

    // one lost CAS: the commit is cancelled without the stored item (as DynamoDB does for
    // a concurrent writer), the store reads the stored version, the worker reports the
    // record failed and releases it for redelivery
    stack.fault.fail_next(
        "TransactWriteItems",
        1,
        Fault::Cancelled(vec!["ConditionalCheckFailed".into()]),
    );

    let arn = format!("arn:aws:sqs:{REGION}:123456789012:{}-events.fifo", stack.prefix);
    let failures = stack.deliver(&worker, &arn).await;
    assert_eq!(
        stack.fault.injected("TransactWriteItems"),
        1,
        "the conflict was injected"
    );
    assert!(failures >= 1, "the conflicted record was reported failed");

    // the scenario ran to its ends
    let order = stack.store.load("order-1").await.expect("load").expect("order-1");
    assert_eq!(order.status, stm_core::Status::Done, "order-1: {order:?}");
    let checkout = stack
        .store
        .load("checkout-1")
        .await
        .expect("load")
        .expect("checkout-1");
    assert_eq!(
        checkout.status,
        stm_core::Status::Done,
        "checkout-1: {checkout:?}"
    );
    assert_eq!(checkout.outcome.as_deref(), Some("success"));

    // a burst that ends with a near timer armed, so the worker rings a doorbell
    // (order-1's backoff timer was armed and cancelled within one coalesced burst: no
    // doorbell, rightly, so that path needs its own walk)
    control
        .create("Order", None, Some("order-3"))
        .await
        .expect("create order-3");
    for (kind, payload) in [
        ("Submit", serde_json::json!({"amount": 7.0})),
        ("PaymentFailed", serde_json::json!({"reason": "card declined"})),
    ] {
        let event = Event::with_data(kind, data(payload)).with_id(format!("order-3-{kind}"));
        control
            .send("order-3", &event)
            .await
            .unwrap_or_else(|e| panic!("send {kind}: {e}"));
    }
    assert_eq!(stack.deliver(&worker, &arn).await, 0, "order-3's burst commits");
    let order3 = stack.store.load("order-3").await.expect("load").expect("order-3");
    assert_eq!(
        order3.active_path.as_deref(),
        Some("Payment.Backoff"),
        "order-3 waits on its backoff timer"
    );

    // parking: order-3 suspended, two events kept in rows of their own (a number taken
    // by `UpdateItem`; the first's row and claim put with the item's commit, the second's
    // with a `ConditionCheck` of the item); resumed, the next event releases them (the
    // last number read by `GetItem`, the rows by `BatchGetItem`, each deleted with its
    // step's commit)
    control.suspend("order-3").await.expect("suspend order-3");
    for i in 0..3 {
        if i == 2 {
            control.resume("order-3").await.expect("resume order-3");
        }
        let event = Event::with_data("PaymentFailed", data(serde_json::json!({"reason": "again"})))
            .with_id(format!("order-3-parked-{i}"));
        control.send("order-3", &event).await.expect("send to order-3");
        assert_eq!(stack.deliver(&worker, &arn).await, 0, "order-3's event {i}");
    }
    let order3 = stack.store.load("order-3").await.expect("load").expect("order-3");
    assert_eq!(order3.parked_after, None, "order-3 released what it parked");

    // a counted fan-out: each parcel's end is added to its join's row (`UpdateItem` on
    // `counters`), and the last one reads the join's rows back (`BatchGetItem`) and sends
    // the parent its tally
    control
        .create(
            "Shipment",
            Some(data(serde_json::json!({"parcels": ["p1", "p2"]}))),
            Some("ship-1"),
        )
        .await
        .expect("create ship-1");
    assert_eq!(stack.deliver(&worker, &arn).await, 0, "ship-1 fans out");
    for i in 0..2 {
        let parcel = format!("ship-1:Dispatching:0:{i}");
        control
            .send(
                &parcel,
                &Event::new("Delivered").with_id(format!("{parcel}-delivered")),
            )
            .await
            .unwrap_or_else(|e| panic!("deliver {parcel}: {e}"));
    }
    assert_eq!(stack.deliver(&worker, &arn).await, 0, "the parcels report");
    let ship = stack.store.load("ship-1").await.expect("load").expect("ship-1");
    assert_eq!(
        (ship.status, ship.active_path.as_deref(), ship.version),
        (stm_core::Status::Done, Some("Complete"), 3),
        "ship-1 joined once, by its tally: {ship:?}"
    );

    // a fired timer's `Timeout`, with its armed `fire_at` as the sweeper sends it: the
    // claim reads the timer (`GetItem`) and, finding it still armed, deletes it
    control
        .create("Order", None, Some("order-4"))
        .await
        .expect("create order-4");
    for (kind, payload) in [
        ("Submit", serde_json::json!({"amount": 7.0})),
        ("PaymentFailed", serde_json::json!({"reason": "card declined"})),
    ] {
        let event = Event::with_data(kind, data(payload)).with_id(format!("order-4-{kind}"));
        control
            .send("order-4", &event)
            .await
            .unwrap_or_else(|e| panic!("send {kind}: {e}"));
    }
    assert_eq!(stack.deliver(&worker, &arn).await, 0, "order-4 backs off");
    let fire_at = stack
        .store
        .armed_timer("order-4", "Payment.Backoff")
        .await
        .expect("read")
        .expect("order-4's backoff timer");
    let timeout = Event::with_data(
        "Timeout",
        data(serde_json::json!({"path": "Payment.Backoff", "fire_at": fire_at})),
    )
    .with_id("order-4-timeout");
    control.send("order-4", &timeout).await.expect("send the Timeout");
    assert_eq!(stack.deliver(&worker, &arn).await, 0, "order-4's Timeout");
    assert_eq!(
        stack
            .store
            .armed_timer("order-4", "Payment.Backoff")
            .await
            .expect("read"),
        None,
        "the claim consumed the timer"
    );
    let order4 = stack.store.load("order-4").await.expect("load").expect("order-4");
    assert_eq!(
        order4.active_path.as_deref(),
        Some("Payment.Charging"),
        "{order4:?}"
    );

    // the sample events, verbatim, as the Lambda event source would hand them over (their
    // receipt handles are fictitious: releasing a failed one fails, which the worker logs)
    let samples = [
        "worker-domain-event.json",
        "worker-spawn-intent.json",
        "worker-multi-group.json",
        "worker-poison.json",
    ];
    for name in samples {
        let event: stm_lambda::events::SqsEvent = serde_json::from_str(&sample(name)).expect(name);
        let records = event.records.len();
        let response = stm_lambda::handle_sqs_event(&worker, event, None).await;
        let failed = response.batch_item_failures.len();
        if name == "worker-poison.json" {
            assert_eq!(failed, records, "{name}: a poison message is reported failed");
        } else {
            assert_eq!(failed, 0, "{name}: {:?}", response.batch_item_failures);
        }
    }
    stack.deliver(&worker, &arn).await;
    // a domain event for checkout-2, whose regions are live: a broadcast (an outbox row per
    // region). Each batch is handed over twice, as SQS redelivers after a lost
    // acknowledgement: the second time a duplicate, which publishes what the execution's
    // last commit may have left pending, read by key (the fork's spawn intents for the
    // multi-group sample, the broadcast's rows for this one)
    let mut broadcast: serde_json::Value =
        serde_json::from_str(&sample("worker-domain-event.json")).expect("sample");
    broadcast["Records"][0]["body"] =
        serde_json::json!(r#"{"id": "evt-checkout-2-charged", "kind": "Charged", "data": {}}"#);
    broadcast["Records"][0]["attributes"]["MessageGroupId"] = serde_json::json!("checkout-2");
    broadcast["Records"][0]["messageId"] = serde_json::json!("0e8f1a52-0000-4000-8000-0000000000c2");
    let batches = [
        sample("worker-multi-group.json"),
        broadcast.to_string(),
        broadcast.to_string(),
    ];
    for (i, batch) in batches.iter().enumerate() {
        let event: stm_lambda::events::SqsEvent = serde_json::from_str(batch).expect("batch");
        let response = stm_lambda::handle_sqs_event(&worker, event, None).await;
        assert!(response.batch_item_failures.is_empty(), "batch {i}: {response:?}");
    }
    stack.deliver(&worker, &arn).await;
    let order2 = stack.store.load("order-2").await.expect("load").expect("order-2");
    assert_eq!(
        order2.active_path.as_deref(),
        Some("Shipping"),
        "order-2 after the multi-group sample"
    );

    // a redelivery of a record already applied (the instance that committed it died
    // before deleting it): the worker publishes whatever that commit left pending before it
    // acknowledges the duplicate, which reads the outbox. Every path of the worker runs
    // under its role, not just the first delivery's.
    let event = Event::with_data("Submit", data(serde_json::json!({"amount": 7.0}))).with_id("dup-submit");
    control
        .create("Order", None, Some("order-dup"))
        .await
        .expect("create order-dup");
    stack.deliver(&worker, &arn).await;
    control.send("order-dup", &event).await.expect("send");
    let messages = stack.queue.receive(10, 180, 0).await.expect("receive");
    assert_eq!(messages.len(), 1, "the Submit");
    let first = stm_lambda::handle_sqs_event(&worker, stm_lambda::sqs_event(&messages, &arn), None).await;
    assert!(
        first.batch_item_failures.is_empty(),
        "{:?}",
        first.batch_item_failures
    );
    let again = stm_lambda::handle_sqs_event(&worker, stm_lambda::sqs_event(&messages, &arn), None).await;
    assert!(
        again.batch_item_failures.is_empty(),
        "the duplicate must be acknowledged, not failed (AccessDenied on the outbox Scan?): {:?}",
        again.batch_item_failures
    );
    for m in &messages {
        stack.queue.delete(&m.receipt_handle).await.expect("delete");
    }
    assert_eq!(
        stm_testkit::moto()
            .await
            .strict()
            .refusals()
            .get("iam")
            .copied()
            .unwrap_or(0),
        0,
        "no request of the worker was denied"
    );

    stack.assert_role_matches("Worker");

    // the dedupe marks carry the TTL attribute the processed table expires on
    let scan = stack
        .store
        .client()
        .scan()
        .table_name(format!("{}_processed", stack.prefix))
        .send()
        .await
        .expect("scan processed");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as f64;
    assert!(!scan.items().is_empty());
    for item in scan.items() {
        let ttl = match item.get(stm_store::dynamodb::schema::TTL_ATTRIBUTE) {
            Some(AttributeValue::N(n)) => n.parse::<f64>().expect("a number"),
            other => panic!("a processed mark without a numeric ttl: {other:?} in {item:?}"),
        };
        let days = (ttl - now) / 86_400.0;
        assert!(
            (29.9..=30.1).contains(&days),
            "ttl {days} days from now, expected the template's 30"
        );
    }
}

/// A FAILED execution's status event, as a worker's commit writes it.
/// Version 2 of `Order` routed as a canary of 10% beside version 1.
async fn route_a_canary(store: &dyn ExecutionStore) -> stm_core::version::Version {
    let version = |n: u64| -> stm_core::version::Version { format!("{n:016x}").parse().expect("a version") };
    let mut routes = stm_store::Routes::default();
    let mut route = stm_store::Route::to(version(1));
    route.canary = Some(stm_store::route::Canary {
        version: version(2),
        weight: 10,
        since: 0.0,
        window_seconds: None,
    });
    routes.machines.insert("Order".into(), route);
    assert!(store.put_routes(&routes, 0).await.expect("routes"));
    version(2)
}

fn status_event(exe: &Execution) -> Event {
    let mut failed = exe.clone();
    failed.status = stm_core::Status::Failed;
    stm_runtime::status::notice(
        stm_runtime::status::StatusEvents::All,
        stm_core::Status::Running,
        &failed,
        0.0,
    )
    .expect("a status event")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_role_is_exactly_what_the_relay_sends() {
    // the rollback's tallies: a canary's FAILED execution among the status events it puts
    // on the bus is added to its tally (the routes read, an ADD)
    let stack = Stack::new(
        "iam_relay",
        &[("StatusEvents", "all"), ("RollbackFailureRate", "0.5")],
        Principal::Relay,
    )
    .await;
    let canary = route_a_canary(stack.store.as_ref()).await;
    // pending entries, as a crash between commit and inline flush leaves them
    let mut exe = Execution::new("relay-src", "Order");
    exe.definition_version = Some(canary);
    let commit = Commit {
        emits: vec![
            (
                Some("relay-target".to_string()),
                Event::new("Ping").with_id("p-1"),
            ),
            (None, Event::new("Nowhere").with_id("p-2")),
            // a status event a worker committed and did not put on the bus
            (None, status_event(&exe)),
        ],
        spawns: vec![SpawnIntent {
            child_id: "relay-src:A".into(),
            root_path: "Order".into(),
            context: Map::new(),
        }],
        ..Commit::default()
    };
    stack.store.commit(&mut exe, commit).await.expect("commit");
    // a counted join's last instance's report, left pending: the relay adds it to the
    // join's row and reads the rows back to send the parent its tally
    let mut instance = Execution::new("relay-parent:Fan:0:0", "Shipment");
    let mut report = data(serde_json::json!({"child_id": "relay-parent:Fan:0:0", "outcome": "success"}));
    let slot = stm_core::JoinSlot {
        prefix: "relay-parent:Fan:0:".into(),
        index: 0,
        total: 1,
    };
    report.insert(
        stm_core::execution::counted_join::JOIN_SLOT_KEY.into(),
        slot.to_value(),
    );
    let commit = Commit {
        emits: vec![(
            Some("relay-parent".to_string()),
            Event::with_data("Finished", report).with_id("report-0"),
        )],
        ..Commit::default()
    };
    stack
        .store
        .commit(&mut instance, commit)
        .await
        .expect("commit the report");

    let context = stack.function("Relay", Function::Relay).await;
    // what functions/relay/src/main.rs runs per invocation (the payload is not read)
    let _event = scheduled("relay-scheduled.json");
    let bus = context
        .status_bus
        .as_deref()
        .map(|b| b as &dyn stm_runtime::status::StatusBus);
    let summary = stm_runtime::relay::scheduled_pass(
        context.store.as_ref(),
        context.queue.as_ref(),
        bus,
        f64::INFINITY,
        None,
    )
    .await
    .expect("relay");
    assert_eq!(summary.forwarded, 4, "{summary:?}");
    assert_eq!(summary.remaining, 0, "{summary:?}");
    assert!(stack.store.pending_outbox().await.expect("outbox").is_empty());
    assert!(stack.store.pending_spawns().await.expect("spawns").is_empty());
    let keys: Vec<String> = (0..2)
        .flat_map(|back| {
            let window = stm_store::route::window_of(stm_deploytest::function_env::now(), 300) - back;
            stm_store::route::tally_keys("Order", canary, 300, &[window])
        })
        .collect();
    assert_eq!(
        stack.store.tally(&keys).await.expect("tally"),
        stm_store::Tally {
            finished: 1,
            failed: 1
        },
        "the canary's FAILED execution is counted"
    );

    stack.assert_role_matches("Relay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeper_role_is_exactly_what_the_sweeper_sends() {
    // the rollouts' evaluation after a scheduled sweep: a canary past the rate is rolled
    // back (the routes and tallies read, the routes written) and announced on the bus
    let stack = Stack::new(
        "iam_sweeper",
        &[
            ("StatusEvents", "all"),
            ("RollbackFailureRate", "0.5"),
            ("RollbackMinFinished", "2"),
        ],
        Principal::Sweeper,
    )
    .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let mut exe = Execution::new("sweep-1", "Order");
    exe.status = stm_core::Status::Running;
    let commit = Commit {
        timers: vec![TimerOp::Schedule {
            path: "Payment".into(),
            fire_at: now - 5.0,
        }],
        ..Commit::default()
    };
    stack.store.commit(&mut exe, commit).await.expect("commit");

    let context = stack.function("Sweeper", Function::Sweeper).await;
    // what functions/sweeper/src/main.rs runs per invocation (the payload is not read)
    let _event = scheduled("sweeper-scheduled.json");
    // the first sweep claims the (rare) full scan, which finds harel's timers too
    let first = stm_runtime::sweeper::sweep(
        context.store.as_ref(),
        context.queue.as_ref(),
        context.driver.clock.now(),
    )
    .await
    .expect("sweep");
    assert_eq!(first.fired, 1, "{first:?}");
    // the next ones read the sparse due-time index (our timers carry its shard)
    let mut exe = Execution::new("sweep-2", "Order");
    exe.status = stm_core::Status::Running;
    let commit = Commit {
        timers: vec![TimerOp::Schedule {
            path: "Payment".into(),
            fire_at: now - 1.0,
        }],
        ..Commit::default()
    };
    stack.store.commit(&mut exe, commit).await.expect("commit");
    let second = stm_runtime::sweeper::sweep(
        context.store.as_ref(),
        context.queue.as_ref(),
        context.driver.clock.now(),
    )
    .await
    .expect("sweep");
    assert_eq!(second.fired, 1, "{second:?}");
    assert_eq!(
        stack.queue.approximate_depth().await.expect("depth"),
        2,
        "two Timeouts are on the queue"
    );

    // its other trigger: a precise-timer doorbell (the worker rang it, unrecorded here)
    let mut exe = Execution::new("sweep-3", "Order");
    exe.status = stm_core::Status::Running;
    let fire_at = now - 0.5;
    let commit = Commit {
        timers: vec![TimerOp::Schedule {
            path: "Payment".into(),
            fire_at,
        }],
        ..Commit::default()
    };
    stack.store.commit(&mut exe, commit).await.expect("commit");
    let sqs = SqsQueue::client(Some(stm_testkit::moto().await.endpoint()), REGION).await;
    let doorbell = stm_runtime::doorbell::SqsDoorbell::new(sqs.clone(), stack.timer_queue_url.clone());
    use stm_runtime::doorbell::Doorbell as _;
    let timer = stm_store::DueTimer {
        execution_id: "sweep-3".into(),
        path: "Payment".into(),
        fire_at,
    };
    assert_eq!(doorbell.ring(std::slice::from_ref(&timer), now).await, 0);
    let doorbells = SqsQueue::new(sqs, stack.timer_queue_url.clone());
    let messages = doorbells.receive(10, 30, 1).await.expect("receive doorbells");
    assert_eq!(messages.len(), 1);
    let clock = context.driver.clock.clone();
    let redelay = context.doorbell.as_ref().map(|d| d.queue());
    let redelay = redelay.as_ref().map(|q| q as &dyn stm_runtime::queue::Queue);
    assert!(redelay.is_some(), "the sweeper has STM_TIMER_QUEUE_URL");
    let (response, summary) = stm_lambda::handle_doorbell_event(
        context.store.as_ref(),
        context.queue.as_ref(),
        &stm_lambda::sqs_event(&messages, "arn:aws:sqs:us-east-1:123456789012:timers"),
        &move || clock.now(),
        redelay,
    )
    .await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(summary.fired, 1, "{summary:?}");

    // a doorbell that arrives early (here: rung as if its timer were due, 3 s before it
    // is) is made visible again at the timer's fire_at, not after the 30 s it was
    // received for
    let mut exe = Execution::new("sweep-4", "Order");
    exe.status = stm_core::Status::Running;
    let fire_at = context.driver.clock.now() + 3.0;
    let commit = Commit {
        timers: vec![TimerOp::Schedule {
            path: "Payment".into(),
            fire_at,
        }],
        ..Commit::default()
    };
    stack.store.commit(&mut exe, commit).await.expect("commit");
    let early = stm_store::DueTimer {
        execution_id: "sweep-4".into(),
        path: "Payment".into(),
        fire_at,
    };
    assert_eq!(doorbell.ring(std::slice::from_ref(&early), fire_at).await, 0);
    let messages = doorbells.receive(10, 30, 1).await.expect("receive doorbells");
    assert_eq!(messages.len(), 1);
    let clock = context.driver.clock.clone();
    let (response, summary) = stm_lambda::handle_doorbell_event(
        context.store.as_ref(),
        context.queue.as_ref(),
        &stm_lambda::sqs_event(&messages, "arn:aws:sqs:us-east-1:123456789012:timers"),
        &move || clock.now(),
        redelay,
    )
    .await;
    assert_eq!(response.batch_item_failures.len(), 1, "not due: retried");
    assert_eq!(summary.fired, 0, "{summary:?}");
    assert!(
        doorbells.receive(10, 30, 0).await.expect("receive").is_empty(),
        "hidden until fire_at"
    );
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let again = doorbells.receive(10, 30, 1).await.expect("receive doorbells");
    assert_eq!(again.len(), 1, "visible again at its fire_at, not after 30 s");

    let canary = route_a_canary(stack.store.as_ref()).await;
    let now = stm_deploytest::function_env::now();
    let window = stm_store::route::window_of(now, 300);
    let key = stm_store::route::tally_key("Order", canary, 300, window, 3);
    let failing = stm_store::Tally {
        finished: 3,
        failed: 2,
    };
    stack
        .store
        .add_tallies(&[(key, failing)], now as i64 + 900)
        .await
        .expect("tally");
    let bus = context
        .status_bus
        .as_deref()
        .map(|b| b as &dyn stm_runtime::status::StatusBus);
    let evaluated = stm_runtime::rollout::evaluate_on(context.store.as_ref(), bus, now)
        .await
        .expect("evaluate");
    assert_eq!(evaluated.rolled_back, vec!["Order".to_string()], "{evaluated:?}");
    assert_eq!(evaluated.announced, 1, "{evaluated:?}");

    stack.assert_role_matches("Sweeper");
}
