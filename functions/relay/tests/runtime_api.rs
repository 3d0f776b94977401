//! The relay binary, built as a Lambda bootstrap, answers a real Runtime API: it takes the
//! sample scheduled event from `events/`, runs against moto and posts its summary.
//!
//! It runs with work to do: an outbox entry and two spawn intents committed and never
//! published (a create whose publish was lost, a worker that died between a commit and
//! its inline flush). After the invocation the test reads the outbox and spawn tables
//! (empty) and the event queue (each entry there, on its group), so a relay that answers
//! without forwarding fails.

use std::time::Duration;

use stm_deploytest::function_env::{self, Deployment};
use stm_deploytest::runtime_api::RuntimeApi;
use stm_deploytest::stm_core::Event;
use stm_deploytest::stm_store::ExecutionStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_bootstrap_forwards_the_pending_entries() {
    let deployment = Deployment::create("fnrelay", &stm_deploytest::repo_root().join("examples")).await;
    let store = deployment.store.clone();
    let driver = deployment.driver();
    // a Checkout entering its orthogonal Fulfil, committed without the inline flush: its
    // two regions' spawn intents wait for the relay
    driver
        .create("Checkout", None, Some("checkout-relay"))
        .await
        .expect("a checkout");
    let mut checkout = store
        .load("checkout-relay")
        .await
        .expect("load")
        .expect("the checkout");
    driver
        .run_step(&mut checkout, Some(&Event::new("Checkout")))
        .await
        .expect("the Checkout step");
    // an Order whose Start is committed and was never published (after the checkout's
    // create: the driver's inline flush would have delivered it)
    function_env::unflushed_start(&driver, "Order", "order-relay")
        .await
        .expect("an unpublished Start");
    let outbox = store.pending_outbox().await.expect("outbox");
    let spawns = store.pending_spawns().await.expect("spawns");
    assert_eq!(outbox.len(), 1, "the seeded outbox: {outbox:?}");
    assert_eq!(outbox[0].target_id.as_deref(), Some("order-relay"));
    let start_id = outbox[0].event.id.clone();
    let mut children: Vec<String> = spawns.iter().map(|s| s.child_id.clone()).collect();
    children.sort();
    assert_eq!(
        children,
        ["checkout-relay:Fulfil.Payment:0", "checkout-relay:Fulfil.Stock:0"],
        "the seeded spawn intents: {spawns:?}"
    );

    // the scheduled relay leaves rows younger than its settling time for its next run (a
    // scan is not a snapshot): these must have settled
    let settle = stm_deploytest::stm_runtime::relay::RELAY_SETTLE_SECONDS;
    tokio::time::sleep(Duration::from_secs_f64(settle + 0.5)).await;
    let api = RuntimeApi::start().await.expect("a Runtime API");
    let mut child = function_env::spawn(env!("CARGO_BIN_EXE_relay"), api.address(), &deployment.env);
    let first = api.invoke(&function_env::sample("relay-scheduled.json"));
    let second = api.invoke(&function_env::sample("relay-scheduled.json"));
    let first = api.outcome(&first, Duration::from_secs(60)).await;
    let second = api.outcome(&second, Duration::from_secs(30)).await;
    let _ = child.start_kill();
    let Some(summary) = first.as_ref().and_then(|o| o.response_json()) else {
        let out = child.wait_with_output().await.expect("output");
        panic!("no response: {first:?}\n{}", String::from_utf8_lossy(&out.stderr));
    };
    assert_eq!(
        summary,
        serde_json::json!({"forwarded": 3, "failed": 0, "unacked": 0, "remaining": 0}),
        "the first run forwards the three entries"
    );
    let Some(second) = second.as_ref().and_then(|o| o.response_json()) else {
        panic!("a warm invocation too: {second:?}");
    };
    assert_eq!(second["forwarded"], 0, "nothing is forwarded twice: {second}");

    // the tables: nothing pending is left
    let outbox = store.pending_outbox().await.expect("outbox");
    let spawns = store.pending_spawns().await.expect("spawns");
    assert!(outbox.is_empty(), "the outbox entry was not acked: {outbox:?}");
    assert!(spawns.is_empty(), "the spawn intents were not acked: {spawns:?}");

    // the queue: each entry on its own group, as the worker will read it
    let mut messages = deployment.receive(3, Duration::from_secs(20)).await;
    messages.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    let seen: Vec<(Option<&str>, Option<&str>)> = messages
        .iter()
        .map(|m| {
            (
                m.group_id.as_deref(),
                m.message_attributes.get("stm_kind").map(String::as_str),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (Some("checkout-relay:Fulfil.Payment:0"), Some("spawn")),
            (Some("checkout-relay:Fulfil.Stock:0"), Some("spawn")),
            (Some("order-relay"), None),
        ],
        "the queue holds the three entries: {messages:?}"
    );
    for spawn in &messages[..2] {
        let body: serde_json::Value = serde_json::from_str(&spawn.body).expect("a JSON spawn intent");
        assert_eq!(body["parent_id"], "checkout-relay", "{body}");
        assert_eq!(
            Some(body["child_id"].as_str()),
            Some(spawn.group_id.as_deref()),
            "{body}"
        );
    }
    let start: serde_json::Value = serde_json::from_str(&messages[2].body).expect("a JSON event");
    assert_eq!(start["kind"], "Start", "{start}");
    // the committed event itself: the worker's dedupe mark keys on its id
    assert_eq!(start["id"], start_id.as_str(), "{start}");
}
