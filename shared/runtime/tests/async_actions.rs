//! Async actions and shared state, through the driver: an `async` closure awaits, reads
//! the registry's state, changes the live context and returns the value a selector
//! routes on; its `?` errors route through `on error` by their type name; its
//! idempotency key is the step's; on a current-thread runtime it fails with a message
//! that says what to change.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use stm_core::Event;
use stm_runtime::{ActionRegistry, Definitions, Driver};

const MACHINE: &str = r#"
event Pay { amount: int }

machine Checkout {
  initial Waiting
  state Waiting {}
  final Paid paid
  final Declined declined
  final Broken broken
  from Waiting select payments.charge(currency: "EUR") on Pay {
    "ok" to Paid
    else to Declined
  }
  from Waiting to Broken on error
}
"#;

/// What the user shares with every action: a client built once, here a ledger.
#[derive(Default)]
struct Ledger {
    keys: Mutex<Vec<String>>,
}

fn driver(actions: ActionRegistry) -> Driver {
    let mut definitions = Definitions::new();
    definitions
        .register(stm_core::dsl::load_definition_str(MACHINE, None, None).expect("the machine is valid"));
    Driver::new(Arc::new(stm_store::MemoryStore::new()), definitions, actions)
}

fn charging_actions(ledger: Arc<Ledger>) -> ActionRegistry {
    let mut actions = ActionRegistry::with_builtins().with_state(ledger);
    actions.register_async("payments.charge", async |input| {
        // real awaiting: a timer needs the runtime's driver while the step waits
        tokio::time::sleep(Duration::from_millis(5)).await;
        let amount = input
            .event
            .and_then(|e| e.data.get("amount"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let limit: i64 = input
            .inputs
            .get("currency")
            .and_then(Value::as_str)
            .map_or("0", |c| if c == "EUR" { "100" } else { "0" })
            .parse()?;
        if amount > limit {
            // any std::error::Error converts, and its type name is what `on error` sees
            let _: u8 = "300".parse()?;
        }
        input
            .state::<Arc<Ledger>>()?
            .keys
            .lock()
            .expect("ledger")
            .push(input.idempotency_key.to_string());
        input.context.insert("charged".into(), json!(true));
        Ok(json!("ok"))
    });
    actions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_action_awaits_reads_state_and_changes_the_context() {
    let ledger = Arc::new(Ledger::default());
    let driver = driver(charging_actions(ledger.clone()));
    driver
        .create("Checkout", None, Some("c-1"))
        .await
        .expect("created");
    let pay = Event::with_data(
        "Pay",
        json!({"amount": 40}).as_object().cloned().unwrap_or_default(),
    );
    let exe = driver.process("c-1", &pay).await.expect("processed");
    assert_eq!(
        (exe.status.as_str(), exe.outcome.as_deref()),
        ("DONE", Some("paid"))
    );
    assert_eq!(exe.context.get("charged"), Some(&json!(true)));
    assert_eq!(
        *ledger.keys.lock().expect("ledger"),
        vec![format!("c-1:{}:0:payments.charge", pay.id)],
        "the action ran once, with the step's idempotency key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_actions_question_mark_error_routes_on_error_by_type_name() {
    let ledger = Arc::new(Ledger::default());
    let driver = driver(charging_actions(ledger.clone()));
    driver
        .create("Checkout", None, Some("c-2"))
        .await
        .expect("created");
    let pay = Event::with_data(
        "Pay",
        json!({"amount": 400}).as_object().cloned().unwrap_or_default(),
    );
    let exe = driver.process("c-2", &pay).await.expect("processed");
    assert_eq!(
        (exe.status.as_str(), exe.outcome.as_deref()),
        ("DONE", Some("broken"))
    );
    let error = exe.context.get("_error").cloned().unwrap_or_default();
    assert_eq!(error.get("type"), Some(&json!("ParseIntError")), "{error}");
    assert!(ledger.keys.lock().expect("ledger").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_state_is_an_action_error_naming_the_type() {
    // the ledger was never given: `input.state()?` fails the action, routed as any other
    let driver = driver({
        let mut actions = charging_actions(Arc::new(Ledger::default()));
        let mut bare = ActionRegistry::with_builtins();
        bare.register("payments.charge", {
            let charge = actions.get("payments.charge").cloned().expect("registered");
            move |input| charge(input)
        });
        actions = bare;
        actions
    });
    driver
        .create("Checkout", None, Some("c-3"))
        .await
        .expect("created");
    let pay = Event::with_data(
        "Pay",
        json!({"amount": 1}).as_object().cloned().unwrap_or_default(),
    );
    let exe = driver.process("c-3", &pay).await.expect("processed");
    let error = exe.context.get("_error").cloned().unwrap_or_default();
    assert_eq!(error.get("type"), Some(&json!("LookupError")), "{error}");
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
    assert!(
        message.contains("Ledger") && message.contains("with_state"),
        "{message}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn on_a_current_thread_runtime_the_call_fails_saying_what_to_change() {
    let driver = driver(charging_actions(Arc::new(Ledger::default())));
    driver
        .create("Checkout", None, Some("c-4"))
        .await
        .expect("created");
    let pay = Event::with_data(
        "Pay",
        json!({"amount": 1}).as_object().cloned().unwrap_or_default(),
    );
    let exe = driver.process("c-4", &pay).await.expect("processed");
    let error = exe.context.get("_error").cloned().unwrap_or_default();
    assert_eq!(error.get("type"), Some(&json!("RuntimeError")), "{error}");
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
    assert!(message.contains("multi-thread"), "{message}");
}
