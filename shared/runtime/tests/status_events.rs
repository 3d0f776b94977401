//! Status events on EventBridge (moto's, behind the strict layer, each function under its
//! role in `template.yaml`): a FAILED execution's event reaches the bus, and through the
//! template's example rule its queue, once, also when the worker dies between its commit
//! and its flush; an operator's change the level leaves out is deleted unsent. A flush
//! whose delete is lost after the put sends it again, with the same `notificationId`: the
//! one case the bus cannot deduplicate.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::hooked_store::{Call, HookedStore, StoreHook};
use serde_json::{json, Value};
use stm_core::{Event, Status};
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::status::{EventBridgeBus, StatusBus, StatusEvents, DETAIL_TYPE, SOURCE};
use stm_runtime::{relay, ActionRegistry, Control, Driver, Queue, SqsQueue, Worker, WorkerSettings};
use stm_store::{ExecutionStore, StoreError, Written};

/// Dies once, armed: after the next commit made durable (the write stays, the worker
/// never learns it), or at the next delete of rows (a function that put its events on
/// the bus and died before deleting their rows).
#[derive(Default)]
struct Dies {
    after_commit: AtomicBool,
    at_ack: AtomicBool,
    acks_refused: AtomicUsize,
}

#[async_trait::async_trait]
impl StoreHook for Dies {
    async fn before(&self, call: &Call<'_>) -> Result<(), StoreError> {
        if matches!(call, Call::AckRows) && self.at_ack.swap(false, Ordering::SeqCst) {
            self.acks_refused.fetch_add(1, Ordering::SeqCst);
            return Err(StoreError::retryable("the relay died before its ack"));
        }
        Ok(())
    }

    fn committed(&self, _written: &Written) -> Result<(), StoreError> {
        if self.after_commit.swap(false, Ordering::SeqCst) {
            return Err(StoreError::retryable("the worker died after its commit"));
        }
        Ok(())
    }
}

struct Rig {
    store: Arc<HookedStore<Dies>>,
    queue: Arc<dyn Queue>,
    bus: Arc<EventBridgeBus>,
    control: Control,
    worker: Worker,
    settings: EventSourceSettings,
    sqs: aws_sdk_sqs::Client,
    /// The example rule's queue: FAILED executions.
    failed_url: String,
    /// A catch-all rule's queue: every status event.
    all_url: String,
    /// The bus's name (the strict layer's faults per entry are keyed by it).
    bus_name: String,
}

fn actions() -> ActionRegistry {
    let mut actions = ActionRegistry::with_builtins();
    actions.register("payments.charge", |_input| {
        Err(std::io::Error::other("card declined").into())
    });
    actions
}

/// The bus `{prefix}-status` (the template's `StatusBus` name, `{stem}-status`, with the
/// test's prefix for the stem, as the strict layer maps it), the example rule to a
/// queue and a catch-all rule to another, made as CloudFormation would (the admin port).
async fn bus_and_rules(prefix: &str, sqs: &aws_sdk_sqs::Client, endpoint: &str) -> (String, String, String) {
    let events = EventBridgeBus::client(Some(endpoint), stm_testkit::REGION).await;
    let bus = format!("{prefix}-status");
    events.create_event_bus().name(&bus).send().await.expect("bus");
    let mut urls = Vec::new();
    for (rule, pattern) in [
        (
            "failed",
            json!({"source": [SOURCE], "detail-type": [DETAIL_TYPE], "detail": {"status": ["FAILED"]}}),
        ),
        ("all", json!({"source": [SOURCE]})),
    ] {
        let queue = format!("{prefix}-{rule}-executions");
        let url = sqs
            .create_queue()
            .queue_name(&queue)
            .send()
            .await
            .expect("target queue")
            .queue_url()
            .unwrap_or_default()
            .to_string();
        let arn = format!("arn:aws:sqs:{}:123456789012:{queue}", stm_testkit::REGION);
        stm_runtime::status::route_to_queue(&events, &bus, rule, &pattern.to_string(), &arn)
            .await
            .expect("rule");
        urls.push(url);
    }
    (bus, urls.remove(0), urls.remove(0))
}

impl Rig {
    async fn new(tag: &str, level: StatusEvents, worker_has_bus: bool) -> Rig {
        let parts = common::moto_parts(tag, 1, 50).await;
        let (bus_name, failed_url, all_url) =
            bus_and_rules(&parts.prefix, &parts.client, &parts.endpoint).await;
        let bus = Arc::new(
            EventBridgeBus::new(
                EventBridgeBus::client(Some(&parts.endpoint), stm_testkit::REGION).await,
                bus_name.clone(),
            )
            .with_level(level),
        );
        let store = Arc::new(HookedStore::new(parts.store.clone(), Dies::default()));
        let queue: Arc<dyn Queue> =
            Arc::new(SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()));
        let driver = Driver::new(store.clone(), common::definitions_of("status.stm"), actions())
            .with_status_events(level);
        let mut worker = Worker::new(
            driver.clone(),
            queue.clone(),
            WorkerSettings {
                retry_seconds: 0,
                retry_max_seconds: 0,
                ..WorkerSettings::default()
            },
        );
        if worker_has_bus {
            worker = worker.with_status_bus(bus.clone());
        }
        Rig {
            store,
            control: Control::new(driver, queue.clone()),
            queue,
            bus,
            worker,
            settings: EventSourceSettings {
                batch_size: 10,
                visibility_seconds: 1,
                wait_seconds: 0,
            },
            sqs: parts.client,
            failed_url,
            all_url,
            bus_name,
        }
    }

    /// The worker until the queue is quiet (the emulated event source; its relay runs
    /// with the worker's bus, as the relay function is configured like the worker).
    async fn drain(&self) {
        eventsource::drain(self.queue.as_ref(), &self.worker, &self.settings, now, 60)
            .await
            .expect("drain");
    }

    /// The scheduled relay function, with the bus.
    async fn relay(&self) -> stm_runtime::RelaySummary {
        stm_aws::as_function("relay", async {
            relay::relay_pending_until(
                self.store.as_ref(),
                self.queue.as_ref(),
                Some(self.bus.as_ref() as &dyn StatusBus),
                None,
                f64::INFINITY,
                relay::RelayBounds::default(),
            )
            .await
        })
        .await
        .expect("relay")
    }

    /// Every event a rule delivered to `url` so far (its detail), read until the queue
    /// stays empty.
    async fn delivered(&self, url: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut empty = 0;
        while empty < 2 {
            let got = self
                .sqs
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .send()
                .await
                .expect("receive");
            let messages = got.messages();
            if messages.is_empty() {
                empty += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            for m in messages {
                let event: Value = serde_json::from_str(m.body().unwrap_or_default()).expect("an event");
                assert_eq!(event["source"], SOURCE);
                assert_eq!(event["detail-type"], DETAIL_TYPE);
                out.push(event["detail"].clone());
                self.sqs
                    .delete_message()
                    .queue_url(url)
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .send()
                    .await
                    .expect("delete");
            }
        }
        out
    }

    async fn status(&self, id: &str) -> Status {
        self.store.load(id).await.expect("load").expect("exists").status
    }
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_execution_is_on_the_bus_once_through_a_worker_that_dies_after_its_commit() {
    let rig = Rig::new("status_once", StatusEvents::Failures, true).await;
    rig.control
        .create("Charge", None, Some("c1"))
        .await
        .expect("create");
    rig.drain().await;
    // the worker dies right after the commit that fails c1: no inline flush, the record
    // comes back as a duplicate, which flushes what the commit left pending
    rig.store.hook.after_commit.store(true, Ordering::SeqCst);
    rig.control.send("c1", &Event::new("Pay")).await.expect("send");
    rig.drain().await;
    assert_eq!(rig.status("c1").await, Status::Failed);
    assert!(
        !rig.store.hook.after_commit.load(Ordering::SeqCst),
        "the crash happened"
    );
    // a relay run after it finds nothing left to send
    let relayed = rig.relay().await;
    assert_eq!((relayed.forwarded, relayed.remaining), (0, 0), "{relayed:?}");

    let failed = rig.delivered(&rig.failed_url).await;
    assert_eq!(failed.len(), 1, "exactly once on the bus: {failed:?}");
    let detail = &failed[0];
    assert_eq!(detail["executionId"], "c1");
    assert_eq!(detail["definitionId"], "Charge");
    assert_eq!(detail["status"], "FAILED");
    assert_eq!(detail["previousStatus"], "RUNNING");
    assert_eq!(detail["activeState"], "Charging");
    assert!(
        detail["error"]
            .as_str()
            .is_some_and(|e| e.contains("card declined")),
        "{detail}"
    );
    assert!(detail["stopDate"].as_i64().is_some(), "{detail}");
    // `failures` announces nothing else: the catch-all rule saw the same one event
    assert_eq!(rig.delivered(&rig.all_url).await.len(), 1);

    // an operator's suspension: its notice is written (the operator does not know the
    // level) and the relay, whose bus publishes failures only, deletes it unsent
    rig.control
        .create("Charge", None, Some("c2"))
        .await
        .expect("create");
    rig.drain().await;
    stm_aws::as_function("operator", async {
        rig.control.suspend("c2").await.expect("suspend");
    })
    .await;
    assert_eq!(rig.store.pending_outbox().await.expect("outbox").len(), 1);
    let relayed = rig.relay().await;
    assert_eq!((relayed.forwarded, relayed.remaining), (0, 0), "{relayed:?}");
    assert!(rig.store.pending_outbox().await.expect("outbox").is_empty());
    assert!(rig.delivered(&rig.all_url).await.is_empty());
    stm_testkit::assert_no_access_denied();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_status_change_is_announced_and_a_lost_delete_repeats_its_id() {
    let rig = Rig::new("status_all", StatusEvents::All, true).await;
    for id in ["c1", "c2", "c3"] {
        rig.control
            .create("Charge", None, Some(id))
            .await
            .expect("create");
    }
    rig.drain().await;
    // the worker puts c1's FAILED event, then dies before deleting its row: the relay's
    // next run puts it again
    rig.store.hook.at_ack.store(true, Ordering::SeqCst);
    rig.control.send("c1", &Event::new("Pay")).await.expect("pay");
    rig.drain().await;
    assert_eq!(rig.store.hook.acks_refused.load(Ordering::SeqCst), 1);
    rig.control.send("c2", &Event::new("Ship")).await.expect("ship");
    rig.drain().await;
    // an operator's change goes out with the relay's next run
    stm_aws::as_function("operator", async {
        rig.control.suspend("c3").await.expect("suspend");
    })
    .await;
    let relayed = rig.relay().await;
    assert_eq!((relayed.forwarded, relayed.remaining), (1, 0), "{relayed:?}");
    assert_eq!(
        (
            rig.status("c1").await,
            rig.status("c2").await,
            rig.status("c3").await
        ),
        (Status::Failed, Status::Done, Status::Suspended)
    );
    assert!(rig.store.pending_outbox().await.expect("outbox").is_empty());

    let all = rig.delivered(&rig.all_url).await;
    let mut by_id: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for detail in &all {
        by_id
            .entry(detail["notificationId"].as_str().unwrap_or_default().to_string())
            .or_default()
            .push(format!(
                "{} {}",
                detail["executionId"].as_str().unwrap_or("?"),
                detail["status"].as_str().unwrap_or("?")
            ));
    }
    let counted: Vec<(String, usize)> = by_id.values().map(|v| (v[0].clone(), v.len())).collect();
    assert_eq!(
        counted,
        vec![
            ("c1 FAILED".to_string(), 2),
            ("c2 DONE".to_string(), 1),
            ("c3 SUSPENDED".to_string(), 1),
        ],
        "FAILED twice (the lost delete) under one notificationId, the others once: {by_id:?}"
    );
    // the example rule takes the FAILED ones only
    let failed = rig.delivered(&rig.failed_url).await;
    assert_eq!(failed.len(), 2);
    assert!(failed.iter().all(|d| d["status"] == "FAILED"));
    stm_testkit::assert_no_access_denied();
}

/// Status events the bus refused stay pending and go out with a later run, each once:
/// none is acknowledged as sent. The strict layer's faults per entry answer every
/// `PutEvents` on the bus with 200, `FailedEntryCount` and `ThrottlingException` results
/// for drawn entries (the rest put), first under the worker's inline flushes, then under
/// a relay run; then the bus takes everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_events_the_bus_refused_stay_pending_until_it_takes_them() {
    use stm_testkit::strict::entry_faults::EVENTS_FAILED_ENTRY;
    let rig = Rig::new("status_refused", StatusEvents::All, true).await;
    let ids: Vec<String> = (0..6).map(|i| format!("r{i}")).collect();
    for id in &ids {
        rig.control
            .create("Charge", None, Some(id))
            .await
            .expect("create");
    }
    rig.drain().await;
    let strict = stm_testkit::moto().await.strict();
    strict.fault_entries(&rig.bus_name, 100.0, 43);
    for id in &ids {
        rig.control.send(id, &Event::new("Pay")).await.expect("pay");
    }
    // each inline flush puts its record's notice, which the bus refuses: the record is
    // still done (a bus that is down must not hold back the execution's group)
    rig.drain().await;
    for id in &ids {
        assert_eq!(rig.status(id).await, Status::Failed);
    }
    let refused = rig.relay().await;
    let counts = strict.entry_faults(&rig.bus_name);
    assert!(counts.injected(EVENTS_FAILED_ENTRY) > 0, "{counts:?}");
    let left = rig.store.pending_outbox().await.expect("outbox").len();
    assert!(
        left > 0 && refused.remaining == left,
        "the refused status events must stay pending: {left} rows left, {refused:?}, {counts:?}"
    );
    strict.fault_entries(&rig.bus_name, 0.0, 43);
    let relayed = rig.relay().await;
    assert_eq!(relayed.remaining, 0, "{relayed:?}");
    assert!(rig.store.pending_outbox().await.expect("outbox").is_empty());

    let mut announced: Vec<String> = rig
        .delivered(&rig.all_url)
        .await
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d["executionId"].as_str().unwrap_or("?"),
                d["status"].as_str().unwrap_or("?")
            )
        })
        .collect();
    announced.sort();
    let expected: Vec<String> = ids.iter().map(|id| format!("{id} FAILED")).collect();
    assert_eq!(
        announced, expected,
        "each FAILED on the bus once, the refused ones included ({counts:?})"
    );
    let counts = strict.entry_faults(&rig.bus_name);
    assert_eq!(
        counts.outstanding.get(EVENTS_FAILED_ENTRY).copied().unwrap_or(0),
        0,
        "{counts:?}"
    );
    stm_testkit::assert_no_access_denied();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_strict_layer_refuses_what_eventbridge_refuses() {
    let moto = stm_testkit::moto().await;
    let prefix = stm_testkit::unique_prefix("status_strict");
    let sqs = SqsQueue::client(Some(moto.endpoint()), stm_testkit::REGION).await;
    let (bus_name, _, _) = bus_and_rules(&prefix, &sqs, moto.endpoint()).await;
    let bus = EventBridgeBus::new(
        EventBridgeBus::client(Some(moto.endpoint()), stm_testkit::REGION).await,
        bus_name,
    );
    let event = |source: &str, detail: String| stm_runtime::status::BusEvent {
        source: source.into(),
        detail_type: DETAIL_TYPE.into(),
        detail,
    };
    // an `aws.` source and a detail that is not an object fail alone; the third is put
    let failures = stm_aws::as_function("relay", async {
        bus.put(&[
            event("aws.states", "{}".into()),
            event(SOURCE, "[1]".into()),
            event(SOURCE, "{}".into()),
        ])
        .await
    })
    .await;
    let codes: Vec<(usize, &str)> = failures.iter().map(|f| (f.index, f.code.as_str())).collect();
    assert_eq!(
        codes,
        vec![(0, "NotAuthorizedForSourceException"), (1, "MalformedDetail")]
    );
    let refusals = moto.strict().refusals();
    for rule in ["events.entry.source", "events.entry.detail"] {
        assert!(
            refusals.get(rule).copied().unwrap_or(0) >= 1,
            "{rule}: {refusals:?}"
        );
    }
    stm_testkit::assert_no_access_denied();
}
