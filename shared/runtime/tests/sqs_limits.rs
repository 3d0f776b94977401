//! SQS's limits on what the runtime sends: message group ids (execution ids,
//! given or derived) of 1-128 letters, digits and ASCII punctuation; `SendMessageBatch`
//! requests of at most 10 entries and 1 MiB; messages of at most 1 MiB. Run end to end
//! over MemoryStore + MemoryQueue, which refuses what SQS refuses, through the worker (the
//! event-source emulation), the relay and the sweeper, and through the embedded runner.

mod common;

use std::sync::Arc;

use common::{event, object, observable, START};
use serde_json::{json, Value};
use stm_core::ids::{valid_group_id, MAX_GROUP_ID_LEN};
use stm_core::{Event, Execution, Map, Status};
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::queue::{MAX_BATCH, MAX_BATCH_BYTES, MAX_MESSAGE_BYTES};
use stm_runtime::{
    ActionRegistry, Clock, Control, ControlError, Definitions, Driver, DriverError, ManualClock, MemoryQueue,
    Queue, Worker, WorkerSettings,
};
use stm_store::{ExecutionStore, MemoryStore};

/// The queue-driven system over memory for the machines in `source`.
struct Mini {
    store: Arc<MemoryStore>,
    queue: Arc<MemoryQueue>,
    worker: Worker,
    control: Control,
    clock: Arc<ManualClock>,
}

fn definitions(source: &str) -> Definitions {
    common::definitions_from(source)
}

impl Mini {
    fn new(source: &str) -> Self {
        let clock = Arc::new(ManualClock::new(START));
        let store = Arc::new(MemoryStore::new());
        let queue = Arc::new(MemoryQueue::new(5));
        let driver = Driver::new(
            store.clone(),
            definitions(source),
            ActionRegistry::with_builtins(),
        )
        .with_clock(clock.clone());
        let worker = Worker::new(
            driver.clone(),
            queue.clone(),
            WorkerSettings {
                inline_flush: true,
                suspend_recheck_seconds: 1,
                suspend_recheck_max_seconds: 1,
                poison_retry_seconds: 1,
                ..WorkerSettings::default()
            },
        );
        let control = Control::new(driver, queue.clone() as Arc<dyn Queue>);
        Mini {
            store,
            queue,
            worker,
            control,
            clock,
        }
    }

    /// Run worker, relay and sweeper until nothing moves; no record may fail.
    async fn drain(&self) {
        let clock = self.clock.clone();
        let settings = EventSourceSettings {
            batch_size: 10,
            visibility_seconds: 2,
            wait_seconds: 0,
        };
        let outcome = eventsource::drain(
            self.queue.as_ref(),
            &self.worker,
            &settings,
            move || clock.now(),
            500,
        )
        .await
        .expect("drain");
        assert_eq!(outcome.failed, 0, "no record fails: {outcome:?}");
        assert!(
            self.queue.is_empty(),
            "the queue drains: {:?}",
            self.queue.snapshot()
        );
        assert!(self.queue.dead_letters().is_empty());
    }

    async fn load(&self, id: &str) -> Execution {
        self.store
            .load(id)
            .await
            .expect("load")
            .unwrap_or_else(|| panic!("no execution {id}"))
    }

    async fn pending(&self) -> (usize, usize) {
        (
            self.store.pending_outbox().await.expect("outbox").len(),
            self.store.pending_spawns().await.expect("spawns").len(),
        )
    }
}

/// The embedded runner (`stm run`) over `source`.
fn embedded(source: &str) -> (Arc<MemoryStore>, Driver) {
    let store = Arc::new(MemoryStore::new());
    let driver = Driver::new(
        store.clone(),
        definitions(source),
        ActionRegistry::with_builtins(),
    )
    .with_clock(Arc::new(ManualClock::new(START)));
    (store, driver)
}

/// Five orthogonal levels, each region a composite holding the next level: a region's
/// child id is `{parent}:{region path}:{seq}`, and the region path grows at every level.
fn deep_machine() -> String {
    let mut inner = String::from(
        "state Region5 {\n initial Waiting\n state Waiting {}\n final Ok success\n from Waiting to Ok on Go\n}\n",
    );
    for level in (1..=5).rev() {
        let wrapped = format!(
            "orthogonal Level{level} {{\n{inner}state Side{level} {{\n initial W\n state W {{}}\n final F success\n \
             from W to F on Go\n}}\n}}\n"
        );
        inner = if level == 1 {
            wrapped
        } else {
            format!(
                "state Region{} {{\n initial Level{level}\n{wrapped}final Joined{level} success\n final Broken{level} failed\n from Level{level} join all to Joined{level} else to Broken{level}\n}}\n",
                level - 1
            )
        };
    }
    format!("event Go {{}}\nmachine Deep {{\n initial Level1\n{inner}final Done success\n final Failed failed\n from Level1 join all to Done else to Failed\n}}\n")
}

fn all_ids(store: &MemoryStore) -> Vec<String> {
    let mut ids: Vec<String> = store.all_executions().into_iter().map(|e| e.id).collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn five_nested_orthogonal_levels_keep_every_derived_id_within_sqs_rules() {
    let source = deep_machine();
    let mini = Mini::new(&source);
    let root = "deep-nesting-0001";
    mini.control
        .create("Deep", None, Some(root))
        .await
        .expect("create");
    mini.drain().await;
    let ids = all_ids(&mini.store);
    // the root, two regions per level down to the fifth: 1 + 2 + 2*2 ... (each level's
    // `R` region holds the next level, its `Side` region does not)
    assert_eq!(ids.len(), 11, "{ids:#?}");
    for id in &ids {
        assert!(
            valid_group_id(id),
            "{id:?} ({} chars) is not a valid group id",
            id.len()
        );
    }
    // harel's ids exceed 128 characters from the fourth level on: those are bounded
    let bounded: Vec<&String> = ids.iter().filter(|id| id.contains('~')).collect();
    assert!(!bounded.is_empty(), "{ids:#?}");
    assert!(bounded.iter().all(|id| id.len() <= MAX_GROUP_ID_LEN));
    // the tree hangs together: every child is registered in its parent
    for exe in mini.store.all_executions() {
        if let Some(parent) = &exe.parent_id {
            assert!(
                mini.load(parent).await.children.contains_key(&exe.id),
                "{}",
                exe.id
            );
        }
    }

    // the embedded runner (`stm run`) derives the same ids and starts the same tree. (A
    // domain event it broadcasts one level down only, as harel's embedded runner does, so
    // the comparison stops here.)
    let (store, driver) = embedded(&source);
    driver
        .create("Deep", None, Some(root))
        .await
        .expect("embedded create");
    assert_eq!(all_ids(&store), ids);
    for exe in store.all_executions() {
        assert_eq!(
            observable(&exe),
            observable(&mini.load(&exe.id).await),
            "{}",
            exe.id
        );
    }

    // the broadcast reaches the deepest leaves through every level, and they all join
    mini.control
        .send(root, &event("Go", json!({})))
        .await
        .expect("send");
    mini.drain().await;
    let done = mini.load(root).await;
    assert_eq!(
        (done.status, done.active_path.as_deref()),
        (Status::Done, Some("Done")),
        "{done:?}"
    );
    for exe in mini.store.all_executions() {
        assert_eq!(exe.status, Status::Done, "{} at {:?}", exe.id, exe.active_path);
    }
}

const FORK_AND_FAN_OUT: &str = r#"
event Go {}
event Paid { receipt: string }
machine Fork {
  initial Prepare
  state Prepare {}
  orthogonal Work {
    state Billing {
      carry receipt
      initial Charging
      state Charging {}
      final Charged success
      from Charging to Charged on Paid set context.receipt = event.receipt
    }
    state Packing {
      initial Picking
      state Picking {}
      final Boxed success
      from Picking to Boxed on Go
    }
  }
  final Done success
  final Failed failed
  from Prepare to Work on Go
  from Work join all to Done else to Failed
}

machine FanOut {
  context {
    recipients: any = []
  }
  initial Notifying
  state Notifying {
    invoke Notifier for item in recipients
    with { recipient: item }
  }
  final AllSent success
  final SomeBounced failed
  from Notifying join all to AllSent else to SomeBounced
}

machine Notifier {
  carry recipient
  initial Sending
  state Sending {}
  final Sent success
  final Bounced failed
  from Sending choose {
    when context.recipient == "bounce" to Bounced
    else to Sent
  }
}

machine Caller {
  initial Calling
  state Calling { invoke Notifier with { recipient: who } }
  final Called success
  from Calling to Called on Returned where outcome == "success" set context.got = event.recipient
}
"#;

/// Fork, fan-out and single invoke for the root `id`, through the queue; the final states.
async fn run_fork_fan_out_and_invoke(mini: &Mini, id: &str) -> Vec<Execution> {
    let fork = format!("{id}f");
    let fan = format!("{id}n");
    let call = format!("{id}c");
    mini.control
        .create("Fork", None, Some(&fork))
        .await
        .expect("create Fork");
    mini.drain().await;
    mini.control
        .send(&fork, &event("Go", json!({})))
        .await
        .expect("Go");
    mini.drain().await;
    mini.control
        .send(&fork, &event("Paid", json!({"receipt": "r-1"})))
        .await
        .expect("Paid");
    mini.drain().await;
    mini.control
        .send(&fork, &event("Go", json!({})))
        .await
        .expect("Go");
    mini.drain().await;
    mini.control
        .create(
            "FanOut",
            Some(object(json!({"recipients": ["a", "b", "c"]}))),
            Some(&fan),
        )
        .await
        .expect("create FanOut");
    mini.drain().await;
    mini.control
        .create("Caller", Some(object(json!({"who": "w"}))), Some(&call))
        .await
        .expect("create Caller");
    mini.drain().await;
    vec![
        mini.load(&fork).await,
        mini.load(&fan).await,
        mini.load(&call).await,
    ]
}

#[tokio::test]
async fn a_parent_id_near_128_characters_still_forks_fans_out_and_invokes() {
    let mini = Mini::new(FORK_AND_FAN_OUT);
    // 127 characters with the one-letter suffix each root gets: valid, but every child's
    // harel id is longer than 128
    let id = "p".repeat(MAX_GROUP_ID_LEN - 2);
    let long = run_fork_fan_out_and_invoke(&mini, &id).await;
    let short_mini = Mini::new(FORK_AND_FAN_OUT);
    let short = run_fork_fan_out_and_invoke(&short_mini, "s").await;
    for (exe, twin) in long.iter().zip(&short) {
        // the same outcome, context (region_results keys included) and history as with ids
        // that keep harel's format; only the child ids differ
        let strip = |mut v: Value| {
            v["children"] = json!(v["children"].as_object().map_or(0, |c| c.len()));
            v
        };
        assert_eq!(
            strip(observable(exe)),
            strip(observable(twin)),
            "{}",
            exe.definition_id
        );
        assert!(
            matches!(exe.status, Status::Done),
            "{} ended {:?} at {:?}",
            exe.definition_id,
            exe.status,
            exe.active_path
        );
    }
    assert_eq!(long[1].context["region_results"]["Notifying:0"]["recipient"], "a");
    assert_eq!(long[2].context["got"], "w");
    let ids = all_ids(&mini.store);
    assert_eq!(ids.len(), 3 + 2 + 3 + 1, "{ids:#?}");
    for id in &ids {
        assert!(valid_group_id(id), "{id:?}");
    }
    assert_eq!(ids.iter().filter(|i| i.contains('~')).count(), 6, "{ids:#?}");
}

#[tokio::test]
async fn ids_that_fit_keep_harels_exact_format() {
    let mini = Mini::new(FORK_AND_FAN_OUT);
    run_fork_fan_out_and_invoke(&mini, "x").await;
    assert_eq!(
        all_ids(&mini.store),
        [
            "xc",
            "xc:Calling:0",
            "xf",
            "xf:Work.Billing:0",
            "xf:Work.Packing:0",
            "xn",
            "xn:Notifying:0:0",
            "xn:Notifying:0:1",
            "xn:Notifying:0:2",
        ]
    );
}

#[tokio::test]
async fn create_refuses_an_id_sqs_would_refuse_and_writes_nothing() {
    let mini = Mini::new(FORK_AND_FAN_OUT);
    let (store, driver) = embedded(FORK_AND_FAN_OUT);
    let too_long = "x".repeat(129);
    for (id, problem) in [
        ("a b", "character 2 is a space"),
        ("", "it is empty"),
        ("Größe", "character 3 is 'ö'"),
        (too_long.as_str(), "it is 129 characters long"),
    ] {
        for result in [
            mini.control
                .create("Fork", None, Some(id))
                .await
                .map(|_| ())
                .map_err(|e| match e {
                    ControlError::Driver(e) => e,
                    other => panic!("not the driver's refusal: {other:?}"),
                }),
            driver.create("Fork", None, Some(id)).await.map(|_| ()),
        ] {
            let err = result.expect_err("refused");
            assert!(matches!(err, DriverError::InvalidId(_)), "{err:?}");
            let text = err.to_string();
            assert!(
                text.contains("is not a valid SQS message group id")
                    && text.contains(problem)
                    && text.contains("use 1-128 characters, letters, digits and ASCII punctuation"),
                "{text}"
            );
            assert_eq!(err.python_type(), "ValueError");
        }
    }
    assert!(mini.store.all_executions().is_empty() && store.all_executions().is_empty());
    assert!(mini.queue.is_empty() && mini.queue.publish_calls().is_empty());
    assert_eq!(mini.pending().await, (0, 0));
}

/// An orthogonal node with ten regions, each done on one `Big` event.
fn wide_machine() -> String {
    let regions: String = (0..10)
        .map(|i| {
            format!(
                "state R{i} {{\n initial W\n state W {{}}\n final Got success\n from W to Got on Big\n}}\n"
            )
        })
        .collect();
    format!(
        "event Big {{ blob: string }}\nmachine Wide {{\n initial Fan\n orthogonal Fan {{\n{regions}}}\n \
         final Done success\n final Failed failed\n from Fan join all to Done else to Failed\n}}\n"
    )
}

fn big(bytes: usize) -> Event {
    event("Big", json!({"blob": "b".repeat(bytes)}))
}

#[tokio::test]
async fn a_120_kb_event_broadcast_to_ten_regions_goes_out_in_batches_sqs_takes() {
    let mini = Mini::new(&wide_machine());
    mini.control
        .create("Wide", None, Some("wide"))
        .await
        .expect("create");
    mini.drain().await;
    assert_eq!(mini.load("wide").await.children.len(), 10);
    mini.control.send("wide", &big(120_000)).await.expect("send");
    mini.drain().await;
    let wide = mini.load("wide").await;
    assert_eq!(
        (wide.status, wide.active_path.as_deref()),
        (Status::Done, Some("Done"))
    );
    // every publish was one request SQS takes: the ten 120 KB copies went in two
    let calls = mini.queue.publish_calls();
    for call in &calls {
        assert!(
            call.entries <= MAX_BATCH && call.bytes <= MAX_BATCH_BYTES,
            "a publish of {} entries and {} bytes: {calls:?}",
            call.entries,
            call.bytes
        );
    }
    // the ten copies of the event went in more than one request
    let copies: Vec<_> = calls
        .iter()
        .filter(|c| c.entries > 1 && c.bytes >= 2 * 120_000)
        .collect();
    assert!(
        copies.len() >= 2 && copies.iter().map(|c| c.entries).sum::<usize>() == 10,
        "{calls:?}"
    );
    assert_eq!(mini.pending().await, (0, 0));
}

/// A region that carries what two `Fill` events put in its context to its parent: its
/// `Finished` holds both.
const CARRIER: &str = r#"
event Fill { blob: string }
machine Carrier {
  initial Fork
  orthogonal Fork {
    state Region {
      carry a, b
      initial Empty
      state Empty {}
      state Half {}
      final Full success
      from Empty to Half on Fill set context.a = event.blob
      from Half to Full on Fill set context.b = event.blob
    }
  }
  final Done success
  final Failed failed
  from Fork join all to Done else to Failed
}

machine Shipment {
  initial Transit
  state Transit {}
  final Recalled recalled
  from Transit to Recalled on Cancel
}
"#;

fn fill() -> Event {
    event("Fill", json!({"blob": "f".repeat(600_000)}))
}

fn assert_failed_for_size(region: &Execution) {
    assert_eq!(region.status, Status::Failed, "{:?}", region.error);
    // the step is undone: the state and context it started from
    assert_eq!(region.active_path.as_deref(), Some("Fork.Region.Half"));
    assert!(region.context.contains_key("a") && !region.context.contains_key("b"));
    let error = region.error.clone().unwrap_or_default();
    assert!(
        error.starts_with("MessageTooLarge: the event \"Finished\"")
            && error.contains(&MAX_MESSAGE_BYTES.to_string())
            && error.contains("store it elsewhere and pass a reference"),
        "{error}"
    );
}

#[tokio::test]
async fn a_step_whose_message_sqs_could_never_take_fails_the_execution_and_sends_nothing() {
    // through the worker: no retry loop, nothing dead-lettered, nothing pending
    let mini = Mini::new(CARRIER);
    mini.control
        .create("Carrier", None, Some("carrier"))
        .await
        .expect("create");
    mini.drain().await;
    let region_id = "carrier:Fork.Region:0";
    mini.control.send("carrier", &fill()).await.expect("first Fill");
    mini.drain().await;
    let before = mini.load(region_id).await;
    // a broadcast reaches each region under the event's own id
    mini.control
        .send("carrier", &fill().with_id("fill-2"))
        .await
        .expect("second Fill");
    mini.drain().await;
    let region = mini.load(region_id).await;
    assert_failed_for_size(&region);
    assert_eq!(region.version, before.version + 1, "one commit: the failure");
    assert_eq!(mini.pending().await, (0, 0), "no outbox entry, no spawn intent");
    let parent = mini.load("carrier").await;
    assert_eq!(
        (parent.status, parent.active_path.as_deref()),
        (Status::Running, Some("Fork")),
        "the parent heard nothing"
    );
    // a redelivery of the event is a duplicate, not a second attempt
    assert!(mini
        .store
        .is_processed(region_id, "fill-2")
        .await
        .expect("processed"));

    // the embedded runner ends the same way
    let (store, driver) = embedded(CARRIER);
    driver
        .create("Carrier", None, Some("carrier"))
        .await
        .expect("create");
    driver.process("carrier", &fill()).await.expect("first Fill");
    driver.process("carrier", &fill()).await.expect("second Fill");
    let twin = store.load(region_id).await.expect("load").expect("region");
    assert_failed_for_size(&twin);
    assert!(store.pending_outbox().await.expect("outbox").is_empty());

    // and so does its held path (`stm run`'s), which takes no undo snapshot: the step is
    // put back from the store
    let (store, driver) = embedded(CARRIER);
    driver
        .create("Carrier", None, Some("carrier"))
        .await
        .expect("create");
    let region = store.load(region_id).await.expect("load").expect("region");
    let mut held = stm_runtime::driver::Held::new(region);
    driver.process_held(&mut held, &fill()).await.expect("first Fill");
    driver
        .process_held(&mut held, &fill())
        .await
        .expect("second Fill");
    assert_failed_for_size(held.execution());
    let stored = store.load(region_id).await.expect("load").expect("region");
    assert_eq!(&stored, held.execution(), "the held copy is what is stored");
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
}

#[tokio::test]
async fn messages_sqs_could_never_take_are_refused_before_anything_is_written() {
    let mini = Mini::new(CARRIER);
    mini.control
        .create("Carrier", None, Some("carrier"))
        .await
        .expect("create");
    mini.drain().await;
    let before = mini.load("carrier").await;
    let calls = mini.queue.publish_calls().len();
    let huge = event("Fill", json!({"blob": "h".repeat(MAX_MESSAGE_BYTES)}));
    let too_large = |err: DriverError| {
        assert!(matches!(err, DriverError::MessageTooLarge { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("\"Fill\"") && text.contains("1048576"), "{text}");
    };

    // send: refused before publishing
    match mini.control.send("carrier", &huge).await {
        Err(ControlError::Driver(err)) => too_large(err),
        other => panic!("send not refused by its size check: {other:?}"),
    }
    // the broadcast commit (the worker's): refused before the commit
    let mut exe = mini.load("carrier").await;
    let regions = stm_runtime::driver::region_ids(&exe);
    let defn = mini.control.driver.definition_for(&exe).expect("deployed");
    too_large(
        mini.control
            .driver
            .commit_broadcast(&defn, &mut exe, &huge, &regions)
            .await
            .expect_err("broadcast refused"),
    );
    assert_eq!(mini.queue.publish_calls().len(), calls, "nothing was published");
    assert_eq!(
        mini.load("carrier").await.version,
        before.version,
        "nothing was written"
    );
    assert_eq!(mini.pending().await, (0, 0));

    // a cooperative cancel whose reason is too large: refused before CANCELLING
    mini.control
        .create("Shipment", None, Some("ship"))
        .await
        .expect("create");
    mini.drain().await;
    let ship = mini.load("ship").await;
    let calls = mini.queue.publish_calls().len();
    let reason: Map = object(json!({"why": "w".repeat(MAX_MESSAGE_BYTES)}));
    let err = mini
        .control
        .cancel("ship", Some(reason.clone()))
        .await
        .expect_err("cooperative cancel refused");
    assert!(
        matches!(err, ControlError::Driver(DriverError::MessageTooLarge { .. }))
            && err.to_string().contains("\"Cancel\""),
        "{err:?}"
    );
    let unchanged = mini.load("ship").await;
    assert_eq!((unchanged.status, unchanged.version), (ship.status, ship.version));
    // Carrier models no Cancel: the cancel is forceful, sends nothing, so it is not refused
    let err = mini.control.cancel("carrier", Some(reason)).await;
    assert!(err.is_ok(), "{err:?}");
    let after = mini.load("carrier").await;
    assert_eq!(after.status, Status::Cancelled);
    assert_eq!(after.version, before.version + 1, "only the cancel wrote");
    assert_eq!(mini.queue.publish_calls().len(), calls, "nothing was published");
    // what it left pending is the status events of its changes, which the operator writes
    // whatever the level, and a relay without a status bus deletes unsent
    let pending = mini.store.pending_outbox().await.expect("outbox");
    assert!(
        !pending.is_empty()
            && pending
                .iter()
                .all(|e| e.target_id.is_none() && e.event.kind == stm_runtime::status::NOTICE_KIND),
        "{pending:?}"
    );
    stm_runtime::relay::relay_pending(mini.store.as_ref(), mini.queue.as_ref())
        .await
        .expect("relay");
    assert_eq!(
        mini.queue.publish_calls().len(),
        calls,
        "still nothing was published"
    );
    assert_eq!(mini.pending().await, (0, 0));
}

/// The SQS queue itself, over moto (which refuses a `SendMessageBatch` over 1 MiB): eleven
/// 120 KB events go out in requests it takes, in order; what SQS would refuse on its own
/// is reported and never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqs_queue_sends_large_messages_in_requests_sqs_takes() {
    use stm_runtime::queue::SqsQueue;
    use stm_runtime::OutgoingMessage;
    let parts = common::moto_parts("limits", 30, 5).await;
    let queue = SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone());
    let message = |group: &str, n: usize, bytes: usize| {
        OutgoingMessage::event(group, &big(bytes).with_id(format!("big-{n}")))
    };
    let mut messages: Vec<OutgoingMessage> = (0..11).map(|n| message("g", n, 120_000)).collect();
    messages.insert(3, message("g", 99, MAX_MESSAGE_BYTES));
    messages.insert(5, message("not valid", 98, 10));
    let failures = queue.publish_batch(&messages).await;
    let refused: Vec<(usize, &str)> = failures.iter().map(|f| (f.index, f.code.as_str())).collect();
    assert_eq!(
        refused,
        [(3, "MessageTooLong"), (5, "InvalidParameterValue")],
        "{failures:?}"
    );
    let mut received = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while received.len() < 11 && std::time::Instant::now() < deadline {
        for m in queue.receive(10, 30, 1).await.expect("receive") {
            let body: Value = serde_json::from_str(&m.body).expect("json");
            received.push(body["id"].as_str().unwrap_or_default().to_string());
            queue.delete(&m.receipt_handle).await.expect("delete");
        }
    }
    let expected: Vec<String> = (0..11).map(|n| format!("big-{n}")).collect();
    assert_eq!(received, expected, "all eleven, in order");

    // the queues `SqsQueue::ensure` creates (`stm local`, these tests) take messages up
    // to the limit the driver allows, as the template's do
    use aws_sdk_sqs::types::QueueAttributeName;
    for url in [&parts.urls.queue_url, &parts.urls.dead_letter_url] {
        let attributes = parts
            .client
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::MaximumMessageSize)
            .send()
            .await
            .expect("attributes");
        let size = attributes
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::MaximumMessageSize))
            .cloned();
        assert_eq!(size.as_deref(), Some("1048576"), "{url}");
    }
}

/// An outbox entry SQS could never take (committed before the driver checked, or by
/// another writer) is never put in a request: it stays pending, loudly, and holds back
/// the later entries of its group, while other groups go out.
#[tokio::test]
async fn the_relay_holds_back_an_entry_sqs_could_never_take_and_its_group() {
    let store = MemoryStore::new();
    let queue = MemoryQueue::new(5);
    let mut exe = Execution::new("writer", "Carrier");
    let small = |n: usize| event("Fill", json!({"blob": "s"})).with_id(format!("small-{n}"));
    let commit = stm_store::Commit {
        emits: vec![
            (Some("g".into()), big(MAX_MESSAGE_BYTES)),
            (Some("g".into()), small(1)),
            (Some("h".into()), small(2)),
        ],
        ..stm_store::Commit::default()
    };
    store.commit(&mut exe, commit).await.expect("commit");
    let summary = stm_runtime::relay::relay_pending(&store, &queue)
        .await
        .expect("relay");
    assert_eq!(
        (summary.forwarded, summary.failed, summary.remaining),
        (1, 2, 2),
        "{summary:?}"
    );
    let sent: Vec<String> = queue.snapshot().into_iter().map(|m| m.group_id).collect();
    assert_eq!(sent, ["h"]);
    assert!(queue.publish_calls().iter().all(|c| c.bytes < MAX_MESSAGE_BYTES));
    assert_eq!(store.pending_outbox().await.expect("outbox").len(), 2);
}
