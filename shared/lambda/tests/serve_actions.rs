//! `serve_actions`: a project's Rust actions called over HTTP by the worker's own
//! remote-action client (what `stm local` does with an `STM_ACTIONS` binding), through a
//! driver: the async action's context change and value come back, its error arrives as
//! a `RemoteActionError` naming the type, and a malformed request gets a clear refusal.

use std::io::{Read, Write};
use std::sync::Arc;

use serde_json::{json, Value};
use stm_core::Event;
use stm_runtime::remote::{parse_bindings, RemoteActions, RemoteSettings};
use stm_runtime::{ActionRegistry, Definitions, Driver};

const MACHINE: &str = r#"
event Go {}

machine Greeter {
  initial Idle
  state Idle {}
  final Greeted greeted
  final Other other
  final Broken broken
  from Idle select greeter.greet(name: "Ada") on Go {
    "ok" to Greeted
    else to Other
  }
  from Idle to Broken on error
}
"#;

/// The project's side: one async action reading shared state, one failing with `?`.
fn project_actions(fail: bool) -> ActionRegistry {
    let mut actions = ActionRegistry::with_builtins().with_state(Arc::new(String::from("hello")));
    actions.register_async("greeter.greet", async move |input| {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        if fail {
            let _: u8 = "300".parse()?;
        }
        let greeting = input.state::<Arc<String>>()?;
        let name = input.inputs.get("name").and_then(Value::as_str).unwrap_or("?");
        input
            .context
            .insert("greeting".into(), json!(format!("{greeting}, {name}")));
        input.context.insert("key".into(), json!(input.idempotency_key));
        Ok(json!("ok"))
    });
    actions
}

async fn serve(actions: ActionRegistry) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(stm_lambda::serve_actions_on(actions, listener));
    addr
}

/// The caller's side, as `stm local` binds it: the printed `STM_ACTIONS` line.
fn calling_driver(served: &ActionRegistry, addr: std::net::SocketAddr) -> Driver {
    let line = stm_lambda::bindings(served, addr);
    assert_eq!(line, format!("greeter.greet=http://{addr}/greeter.greet"));
    let remote = RemoteActions::start(
        parse_bindings(&line).expect("the line parses"),
        RemoteSettings::default(),
    )
    .expect("the client starts");
    let mut actions = ActionRegistry::with_builtins();
    remote.register_into(&mut actions);
    let mut definitions = Definitions::new();
    definitions.register(stm_core::dsl::load_definition_str(MACHINE, None, None).expect("valid"));
    Driver::new(Arc::new(stm_store::MemoryStore::new()), definitions, actions)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_async_action_runs_for_the_caller() {
    let served = project_actions(false);
    let addr = serve(served.clone()).await;
    let driver = calling_driver(&served, addr);
    driver
        .create("Greeter", None, Some("g-1"))
        .await
        .expect("created");
    let go = Event::new("Go");
    let exe = driver.process("g-1", &go).await.expect("processed");
    assert_eq!(
        (exe.status.as_str(), exe.outcome.as_deref()),
        ("DONE", Some("greeted"))
    );
    assert_eq!(exe.context.get("greeting"), Some(&json!("hello, Ada")));
    assert_eq!(
        exe.context.get("key"),
        Some(&json!(format!("g-1:{}:0:greeter.greet", go.id)))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_actions_error_reaches_on_error_with_its_type() {
    let served = project_actions(true);
    let addr = serve(served.clone()).await;
    let driver = calling_driver(&served, addr);
    driver
        .create("Greeter", None, Some("g-2"))
        .await
        .expect("created");
    let exe = driver.process("g-2", &Event::new("Go")).await.expect("processed");
    assert_eq!(exe.outcome.as_deref(), Some("broken"));
    let error = exe.context.get("_error").cloned().unwrap_or_default();
    assert_eq!(error.get("type"), Some(&json!("RemoteActionError")), "{error}");
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
    assert!(
        message.contains("HTTP 500") && message.contains("ParseIntError"),
        "{message}"
    );
}

/// A machine with no `on error`: an action error the caller gets fails the execution.
const CALLING_MACHINE: &str = r#"
event Go {}

machine Checker {
  initial Idle
  state Idle {}
  final Checked checked
  final Other other
  from Idle select stock.check() on Go {
    "checked" to Checked
    else to Other
  }
}
"#;

/// Served as `worker serve-actions` serves it, an action that reads the clients the
/// worker gives its actions finds them: the execution is DONE, where it was FAILED with a
/// `LookupError` ("no shared state of type aws_sdk_dynamodb::Client").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_action_gets_the_workers_clients_in_its_state() {
    let mut served = ActionRegistry::with_builtins();
    served.register("stock.check", |input| {
        let dynamodb = input.state::<aws_sdk_dynamodb::Client>()?;
        let sqs = input.state::<aws_sdk_sqs::Client>()?;
        let region = |r: Option<&aws_sdk_dynamodb::config::Region>| r.map(ToString::to_string);
        input.context.insert(
            "dynamodb_region".into(),
            json!(region(dynamodb.config().region())),
        );
        input.context.insert(
            "sqs_region".into(),
            json!(sqs.config().region().map(ToString::to_string)),
        );
        Ok(json!("checked"))
    });
    let addr = serve(served.clone()).await;
    let line = stm_lambda::bindings(&served, addr);
    let remote = RemoteActions::start(
        parse_bindings(&line).expect("the line parses"),
        RemoteSettings::default(),
    )
    .expect("the client starts");
    let mut actions = ActionRegistry::with_builtins();
    remote.register_into(&mut actions);
    let mut definitions = Definitions::new();
    definitions.register(stm_core::dsl::load_definition_str(CALLING_MACHINE, None, None).expect("valid"));
    let driver = Driver::new(Arc::new(stm_store::MemoryStore::new()), definitions, actions);
    driver
        .create("Checker", None, Some("c-1"))
        .await
        .expect("created");
    let exe = driver.process("c-1", &Event::new("Go")).await.expect("processed");
    assert_eq!(
        (exe.status.as_str(), exe.outcome.as_deref()),
        ("DONE", Some("checked")),
        "{:?}",
        exe.context.get("_error")
    );
    // built from the variables the worker's own clients are built from
    let region = stm_runtime::config::region(|name| std::env::var(name).ok());
    assert_eq!(exe.context.get("dynamodb_region"), Some(&json!(region)));
    assert_eq!(exe.context.get("sqs_region"), Some(&json!(region)));
}

/// One raw HTTP/1.1 exchange: the status line and the body.
fn exchange(addr: std::net::SocketAddr, request: &str) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(addr).expect("connects");
    stream.write_all(request.as_bytes()).expect("sent");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("read");
    let status = reply.lines().next().unwrap_or_default().to_string();
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
    (status, body)
}

fn post(path: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_with_what_was_wrong() {
    let addr = serve(project_actions(false)).await;
    let cases = [
        (
            post("/greeter.greet", "{not json"),
            "400",
            "not a harel.faas payload: invalid JSON",
        ),
        (
            post("/greeter.greet", r#"{"context": [1]}"#),
            "400",
            "\"context\" must be an object",
        ),
        (
            post("/greeter.greet", r#"{"event": {"data": {}}}"#),
            "400",
            "\"event\" has no string \"kind\"",
        ),
        (
            post("/nope", "{}"),
            "404",
            "no action \"nope\" is registered here; these are:",
        ),
        (
            "GET /greeter.greet HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n".to_string(),
            "405",
            "POST the harel.faas payload",
        ),
    ];
    for (request, status, text) in cases {
        let (line, body) = tokio::task::spawn_blocking(move || exchange(addr, &request))
            .await
            .expect("joined");
        assert!(line.contains(status), "{line} / {body}");
        assert!(body.contains(text), "{status}: {body}");
    }
    // and a well-formed start-step payload runs with no event
    let start = post(
        "/greeter.greet",
        r#"{"context": {}, "event": {"kind": "Start", "data": {}}, "inputs": {"name": "Bo"}, "idempotency_key": "k"}"#,
    );
    let (line, body) = tokio::task::spawn_blocking(move || exchange(addr, &start))
        .await
        .expect("joined");
    assert!(line.contains("200"), "{line}");
    let reply: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(
        reply,
        json!({"context": {"greeting": "hello, Bo", "key": "k"}, "result": "ok"})
    );
}
