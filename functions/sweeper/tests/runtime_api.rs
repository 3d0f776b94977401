//! The sweeper binary, built as a Lambda bootstrap, answers a real Runtime API: it takes the
//! sample scheduled and doorbell events from `events/`, runs against moto and posts its
//! summary.
//!
//! It runs with work to do: two Orders whose one-hour payment deadline passed a minute
//! ago, one fired by a precise-timer doorbell, the other by the scheduled sweep. After the
//! invocations the test reads the timers table (both disarmed) and the event queue (each
//! Order's `Timeout` on its group), so a sweeper that answers without firing fails.

use std::time::Duration;

use stm_deploytest::function_env::{self, Deployment};
use stm_deploytest::runtime_api::RuntimeApi;
use stm_deploytest::stm_store::ExecutionStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeper_bootstrap_fires_the_due_timers() {
    let deployment = Deployment::create("fnsweeper", &stm_deploytest::repo_root().join("examples")).await;
    let store = deployment.store.clone();
    let driver = deployment.driver();
    let swept = function_env::order_past_its_deadline(&driver, "order-swept")
        .await
        .expect("an overdue order");
    let rung = function_env::order_past_its_deadline(&driver, "order-rung")
        .await
        .expect("an overdue order");
    let due = store.due_timers(function_env::now()).await.expect("due timers");
    assert_eq!(due.len(), 2, "the seeded timers are due: {due:?}");

    let api = RuntimeApi::start().await.expect("a Runtime API");
    let mut child = function_env::spawn(env!("CARGO_BIN_EXE_sweeper"), api.address(), &deployment.env);
    // the doorbell first, or the sweep would fire its timer too: the doorbell's shape is
    // the sample's, its body `order-rung`'s armed timer
    let doorbell = serde_json::json!({"execution_id": "order-rung", "path": "Payment", "fire_at": rung});
    let bell = function_env::sample_batch(
        "sweeper-doorbell.json",
        &[(
            "5d1c0b7e-0000-4000-8000-0000000000aa",
            None,
            &doorbell.to_string(),
        )],
    );
    let bell = api.invoke(&bell.to_string());
    let first = api.invoke(&function_env::sample("sweeper-scheduled.json"));
    let second = api.invoke(&function_env::sample("sweeper-scheduled.json"));
    // the sample doorbell's timer (order-1's) is not armed: a stale doorbell
    let stale = api.invoke(&function_env::sample("sweeper-doorbell.json"));
    let bell = api.outcome(&bell, Duration::from_secs(60)).await;
    let first = api.outcome(&first, Duration::from_secs(30)).await;
    let second = api.outcome(&second, Duration::from_secs(30)).await;
    let stale = api.outcome(&stale, Duration::from_secs(30)).await;
    let _ = child.start_kill();
    let Some(bell) = bell.as_ref().and_then(|o| o.response_json()) else {
        let out = child.wait_with_output().await.expect("output");
        panic!("no response: {bell:?}\n{}", String::from_utf8_lossy(&out.stderr));
    };
    assert_eq!(
        bell,
        serde_json::json!({"batchItemFailures": []}),
        "the doorbell is acknowledged"
    );
    let Some(summary) = first.as_ref().and_then(|o| o.response_json()) else {
        panic!("the sweep got no response: {first:?}");
    };
    assert_eq!(
        summary,
        serde_json::json!({"due": 1, "fired": 1, "suspended": 0, "orphaned": 0, "failed": 0, "stale": 0, "cut": false}),
        "the sweep fires the one timer the doorbell left"
    );
    let Some(second) = second.as_ref().and_then(|o| o.response_json()) else {
        panic!("a warm invocation too: {second:?}");
    };
    assert_eq!(second["due"], 0, "nothing is fired twice: {second}");
    let Some(stale) = stale.as_ref().and_then(|o| o.response_json()) else {
        panic!("the doorbell batch got no response: {stale:?}");
    };
    assert_eq!(
        stale,
        serde_json::json!({"batchItemFailures": []}),
        "stale doorbell acknowledged"
    );

    // the timers table: both fired timers are gone, and nothing else is due
    for id in ["order-swept", "order-rung"] {
        let armed = store.armed_timer(id, "Payment").await.expect("timer");
        assert_eq!(armed, None, "{id}'s fired timer is still armed");
    }
    let due = store.due_timers(function_env::now()).await.expect("due timers");
    assert!(due.is_empty(), "{due:?}");

    // the queue: each Order's Timeout on its own group, for the timer that fired
    let mut messages = deployment.receive(2, Duration::from_secs(20)).await;
    messages.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    let groups: Vec<Option<&str>> = messages.iter().map(|m| m.group_id.as_deref()).collect();
    assert_eq!(
        groups,
        [Some("order-rung"), Some("order-swept")],
        "a Timeout for each: {messages:?}"
    );
    for (message, fire_at) in messages.iter().zip([rung, swept]) {
        let timeout: serde_json::Value = serde_json::from_str(&message.body).expect("a JSON event");
        assert_eq!(timeout["kind"], "Timeout", "{timeout}");
        assert_eq!(timeout["data"]["path"], "Payment", "{timeout}");
        assert_eq!(timeout["data"]["fire_at"].as_f64(), Some(fire_at), "{timeout}");
    }
    // the executions themselves wait for the worker: the sweeper only sends
    for id in ["order-swept", "order-rung"] {
        let exe = store.load(id).await.expect("load").expect("the order");
        assert_eq!(exe.active_path.as_deref(), Some("Payment.Charging"), "{id}");
    }
}
