//! Every sample event in `events/` (the shapes `sam local invoke -e` takes) parses into
//! the type its function takes and runs through that function's real handler against
//! DynamoDB + SQS on moto, with the deployment's definitions (`examples/`).

use std::sync::Arc;

use aws_lambda_events::eventbridge::EventBridgeEvent;
use aws_lambda_events::sqs::SqsEvent;
use stm_runtime::config::load_definitions_dir;
use stm_runtime::eventsource::{self, EventSourceSettings};
use stm_runtime::queue::SqsQueue;
use stm_runtime::{ActionRegistry, Control, Driver, Queue, Worker, WorkerSettings};
use stm_store::{CreateOptions, DynamoDbStore, ExecutionStore};

use stm_testkit::repo_root as repo;

fn read(name: &str) -> String {
    std::fs::read_to_string(repo().join("events").join(name)).unwrap_or_else(|e| panic!("events/{name}: {e}"))
}

fn sqs(name: &str) -> SqsEvent {
    serde_json::from_str(&read(name)).unwrap_or_else(|e| panic!("events/{name} is not an SqsEvent: {e}"))
}

fn scheduled(name: &str) -> EventBridgeEvent<serde_json::Value> {
    serde_json::from_str(&read(name))
        .unwrap_or_else(|e| panic!("events/{name} is not a scheduled event: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sample_event_runs_through_its_handler() {
    let mut files: Vec<String> = std::fs::read_dir(repo().join("events"))
        .expect("events/")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "relay-scheduled.json",
            "sweeper-doorbell.json",
            "sweeper-scheduled.json",
            "worker-domain-event.json",
            "worker-multi-group.json",
            "worker-poison.json",
            "worker-spawn-intent.json"
        ],
        "a new sample needs a check here"
    );

    let moto = stm_testkit::moto().await;
    let prefix = stm_testkit::unique_prefix("events");
    let options = CreateOptions {
        prefix: prefix.clone(),
        ..CreateOptions::default()
    };
    let store = Arc::new(
        DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
            .await
            .expect("tables"),
    );
    let client = SqsQueue::client(Some(moto.endpoint()), stm_testkit::REGION).await;
    let urls = SqsQueue::ensure(&client, &format!("{prefix}-events"), 2, 3)
        .await
        .expect("queue");
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(client, urls.queue_url));
    let definitions = load_definitions_dir(&repo().join("examples")).expect("the examples load and validate");
    let driver = Driver::new(store.clone(), definitions, ActionRegistry::with_builtins());
    let worker = Worker::new(driver.clone(), queue.clone(), WorkerSettings::default());
    let control = Control::new(driver, queue.clone());
    let settings = EventSourceSettings {
        wait_seconds: 0,
        visibility_seconds: 2,
        ..Default::default()
    };
    for (definition, id) in [
        ("Order", "order-1"),
        ("Order", "order-2"),
        ("Checkout", "checkout-1"),
        ("Checkout", "checkout-2"),
    ] {
        control.create(definition, None, Some(id)).await.expect("create");
    }
    eventsource::drain(queue.as_ref(), &worker, &settings, || 0.0, 50)
        .await
        .expect("drain");

    // a domain event
    let response = stm_lambda::handle_sqs_event(&worker, sqs("worker-domain-event.json"), None).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let order = store.load("order-1").await.expect("load").expect("order-1");
    assert_eq!(order.active_path.as_deref(), Some("Payment.Charging"));
    // redelivered: a no-op (the dedupe mark)
    let again = stm_lambda::handle_sqs_event(&worker, sqs("worker-domain-event.json"), None).await;
    assert!(again.batch_item_failures.is_empty());
    assert_eq!(
        store
            .load("order-1")
            .await
            .expect("load")
            .expect("order-1")
            .version,
        order.version
    );

    // a spawn intent creates its child, once
    let response = stm_lambda::handle_sqs_event(&worker, sqs("worker-spawn-intent.json"), None).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let child = store
        .load("checkout-1:Fulfil.Payment:1")
        .await
        .expect("load")
        .expect("the region child");
    assert_eq!(child.parent_id.as_deref(), Some("checkout-1"));
    assert_eq!(child.active_path.as_deref(), Some("Fulfil.Payment.Charging"));
    let again = stm_lambda::handle_sqs_event(&worker, sqs("worker-spawn-intent.json"), None).await;
    assert!(again.batch_item_failures.is_empty());
    assert_eq!(
        store
            .load("checkout-1:Fulfil.Payment:1")
            .await
            .expect("load")
            .expect("child")
            .version,
        child.version
    );

    // a poison message is reported, not a crash
    let poison = sqs("worker-poison.json");
    let poison_id = poison.records[0].message_id.clone().unwrap_or_default();
    let response = stm_lambda::handle_sqs_event(&worker, poison, None).await;
    let reported: Vec<String> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    assert_eq!(reported, [poison_id]);

    // a batch over two groups, in order
    let response = stm_lambda::handle_sqs_event(&worker, sqs("worker-multi-group.json"), None).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let order2 = store.load("order-2").await.expect("load").expect("order-2");
    assert_eq!(
        order2.active_path.as_deref(),
        Some("Shipping"),
        "Submit then PaymentOk, in order"
    );
    let checkout2 = store.load("checkout-2").await.expect("load").expect("checkout-2");
    assert_eq!(checkout2.active_path.as_deref(), Some("Fulfil"));
    // the fork's spawn intents went out with the inline flush
    assert!(store.pending_spawns().await.expect("spawns").is_empty());

    // the relay: leave an entry pending (a commit without a flush), then a scheduled run
    let quiet = Worker::new(
        worker.driver.clone(),
        queue.clone(),
        WorkerSettings {
            inline_flush: false,
            ..WorkerSettings::default()
        },
    );
    control
        .create("Order", None, Some("order-3"))
        .await
        .expect("create");
    eventsource::drain(
        queue.as_ref(),
        &quiet,
        &EventSourceSettings {
            wait_seconds: 0,
            ..settings.clone()
        },
        || 0.0,
        1,
    )
    .await
    .expect("drain");
    // order-3's Start emits nothing: leave a row pending as a crash between a commit and
    // its flush would (an event order-3 sends itself)
    let mut order3 = store.load("order-3").await.expect("load").expect("order-3");
    store
        .commit(
            &mut order3,
            stm_store::Commit {
                emits: vec![(
                    Some("order-3".into()),
                    stm_core::Event::new("Nudge").with_id("order-3-nudge"),
                )],
                ..stm_store::Commit::default()
            },
        )
        .await
        .expect("a commit left unflushed");
    let wall_clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    // a run now leaves the row just committed for the next run (it has not settled) ...
    // the schedule's event carries nothing the relay reads: it must parse, that is all
    scheduled("relay-scheduled.json");
    let summary = stm_runtime::relay::scheduled_pass(store.as_ref(), queue.as_ref(), None, wall_clock, None)
        .await
        .expect("relay");
    let pending = store.pending_outbox().await.expect("outbox").len()
        + store.pending_spawns().await.expect("spawns").len();
    assert_eq!(pending, 1, "the unflushed commit's row");
    assert_eq!(summary.forwarded, 0, "not settled yet: {summary:?}");
    // ... which forwards it
    let settled = wall_clock + stm_runtime::relay::RELAY_SETTLE_SECONDS + 1.0;
    let summary = stm_runtime::relay::scheduled_pass(store.as_ref(), queue.as_ref(), None, settled, None)
        .await
        .expect("relay");
    assert_eq!(summary.forwarded, pending, "{summary:?}");
    assert_eq!(summary.failed, 0, "{summary:?}");
    assert_eq!(summary.remaining, 0, "{summary:?}");
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
    assert!(store.pending_spawns().await.expect("spawns").is_empty());

    // the sweeper: Order's payment phase has a 3600 s timeout; sweep an hour later
    let later = worker.driver.clock.now() + 3700.0;
    let trigger: stm_lambda::SweeperTrigger =
        serde_json::from_str(&read("sweeper-scheduled.json")).expect("the sweeper's trigger");
    assert!(
        matches!(trigger, stm_lambda::SweeperTrigger::Schedule(_)),
        "{trigger:?}"
    );
    let summary = stm_runtime::sweeper::scheduled_sweep(store.as_ref(), queue.as_ref(), later, None)
        .await
        .expect("sweep");
    assert!(summary.fired >= 1, "{summary:?}");
    assert_eq!(summary.failed, 0, "{summary:?}");

    // the sweeper's doorbell trigger: a doorbell for a timer that is no longer armed (the
    // sweep above fired it) is stale: acknowledged, nothing published
    let trigger: stm_lambda::SweeperTrigger =
        serde_json::from_str(&read("sweeper-doorbell.json")).expect("the sweeper's trigger");
    assert!(
        matches!(trigger, stm_lambda::SweeperTrigger::Doorbells(_)),
        "{trigger:?}"
    );
    let doorbells = sqs("sweeper-doorbell.json");
    let now = move || later;
    let (response, summary) =
        stm_lambda::handle_doorbell_event(store.as_ref(), queue.as_ref(), &doorbells, &now, None).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(summary.fired, 0, "{summary:?}");
}
