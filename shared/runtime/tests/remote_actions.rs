//! Remote actions over harel's FaaS wire contract, through the real driver:
//!
//! * HTTP endpoints: a small HTTP/1.1 function server on loopback (its own thread, so a
//!   blocking action call cannot starve it) answers per path: a normal answer, a decline,
//!   HTTP 500, an oversized body, a slow answer and a non-JSON one. The payload it received
//!   (context, event, inputs, idempotency key) and the execution that results are checked.
//! * AWS Lambda: the real `aws-sdk-lambda` `Invoke` against moto over HTTP, with moto's
//!   Docker-free Lambda backend (it answers queued results), to check the SDK path,
//!   `lambda:<function>` bindings and `FunctionError` handling.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use stm_core::{Event, Map, Status};
use stm_runtime::remote::{parse_bindings, RemoteActions, RemoteSettings};
use stm_runtime::{ActionRegistry, Definitions, Driver};
use stm_store::MemoryStore;

fn definitions() -> Definitions {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/machines/remote.stm");
    let mut defs = Definitions::new();
    for defn in stm_runtime::config::load_file(&file).expect("remote.stm loads and validates") {
        defs.register(defn);
    }
    defs
}

/// A function endpoint speaking harel's contract, one thread per connection.
struct FunctionServer {
    base: String,
    received: Arc<Mutex<Vec<(String, Value)>>>,
}

impl FunctionServer {
    fn start() -> FunctionServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let received: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let log = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = log.clone();
                std::thread::spawn(move || serve(stream, &log));
            }
        });
        FunctionServer { base, received }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn received(&self, path: &str) -> Vec<Value> {
        self.received
            .lock()
            .expect("log")
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

fn serve(stream: TcpStream, log: &Mutex<Vec<(String, Value)>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let payload: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    log.lock().expect("log").push((path.clone(), payload.clone()));
    let mut context = payload["context"].as_object().cloned().unwrap_or_default();
    let mut extra_header = "";
    let (status, answer): (&str, Vec<u8>) = match path.as_str() {
        "/prepare" => {
            context.insert("prepared".into(), payload["inputs"]["step"].clone());
            context.insert("seen_kind".into(), payload["event"]["kind"].clone());
            (
                "200 OK",
                json!({"context": context, "result": null})
                    .to_string()
                    .into_bytes(),
            )
        }
        "/charge" => {
            context.insert("charged".into(), payload["inputs"]["currency"].clone());
            context.insert("amount".into(), payload["event"]["data"]["amount"].clone());
            (
                "200 OK",
                json!({"context": context, "result": "ok"})
                    .to_string()
                    .into_bytes(),
            )
        }
        "/decline" => (
            "200 OK",
            json!({"context": context, "result": "no"})
                .to_string()
                .into_bytes(),
        ),
        "/error" => (
            "500 Internal Server Error",
            br#"{"errorMessage": "card service down"}"#.to_vec(),
        ),
        "/big" => {
            let filler = "x".repeat(256 * 1024);
            (
                "200 OK",
                json!({"context": {"filler": filler}, "result": "ok"})
                    .to_string()
                    .into_bytes(),
            )
        }
        "/slow" => {
            std::thread::sleep(Duration::from_secs(3));
            (
                "200 OK",
                json!({"context": context, "result": "ok"})
                    .to_string()
                    .into_bytes(),
            )
        }
        // the Lambda Invoke API, for a function that raised: 200 + X-Amz-Function-Error
        p if p.starts_with("/2015-03-31/functions/") => {
            extra_header = "X-Amz-Function-Error: Unhandled\r\n";
            (
                "200 OK",
                br#"{"errorType": "ValueError", "errorMessage": "card declined"}"#.to_vec(),
            )
        }
        _ => ("200 OK", b"this is not json".to_vec()),
    };
    let mut out = stream;
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra_header}Connection: close\r\n\r\n",
        answer.len()
    );
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(&answer);
}

fn settings() -> RemoteSettings {
    RemoteSettings {
        timeout: Duration::from_millis(1500),
        max_response_bytes: 64 * 1024,
        ..RemoteSettings::default()
    }
}

fn driver(bindings: &str, settings: RemoteSettings) -> Driver {
    let remote = RemoteActions::start(parse_bindings(bindings).expect("bindings"), settings).expect("start");
    let mut actions = ActionRegistry::with_builtins();
    remote.register_into(&mut actions);
    Driver::new(Arc::new(MemoryStore::new()), definitions(), actions)
}

fn pay(amount: i64) -> Event {
    let mut data = Map::new();
    data.insert("amount".into(), json!(amount));
    let mut e = Event::with_data("Pay", data);
    e.id = "ev-pay".into();
    e
}

#[tokio::test]
async fn http_action_sends_harels_payload_and_applies_the_answer() {
    let server = FunctionServer::start();
    let d = driver(
        &format!(
            "remote.prepare={},remote.charge={}",
            server.url("/prepare"),
            server.url("/charge")
        ),
        settings(),
    );
    let exe = d.create("Remote", None, Some("r1")).await.expect("create");
    assert_eq!(exe.context.get("prepared"), Some(&json!("start")));
    assert_eq!(
        exe.context.get("seen_kind"),
        Some(&json!("Start")),
        "the start step's event"
    );

    let exe = d.process("r1", &pay(42)).await.expect("pay");
    assert_eq!(
        exe.active_path.as_deref(),
        Some("Paid"),
        "routed on the answer's result"
    );
    assert_eq!(exe.context.get("charged"), Some(&json!("EUR")));
    assert_eq!(exe.context.get("amount"), Some(&json!(42)));
    assert_eq!(exe.status, Status::Running);

    let sent = server.received("/charge");
    assert_eq!(sent.len(), 1);
    let payload = &sent[0];
    assert_eq!(payload["event"], json!({"kind": "Pay", "data": {"amount": 42}}));
    assert_eq!(payload["inputs"], json!({"currency": "EUR"}));
    assert_eq!(
        payload["context"]["prepared"],
        json!("start"),
        "the live context is sent"
    );
    assert_eq!(payload["idempotency_key"], json!("r1:ev-pay:0:remote.charge"));
    let keys: Vec<&str> = payload
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["context", "event", "inputs", "idempotency_key"]);
}

#[tokio::test]
async fn a_selector_routes_on_the_remote_result() {
    let server = FunctionServer::start();
    let d = driver(
        &format!(
            "remote.prepare={},remote.charge={}",
            server.url("/prepare"),
            server.url("/decline")
        ),
        settings(),
    );
    d.create("Remote", None, Some("r2")).await.expect("create");
    let exe = d.process("r2", &pay(1)).await.expect("pay");
    assert_eq!(exe.active_path.as_deref(), Some("Declined"));
}

/// Every failure mode is an action error: `on error` routes it, and without a handler the
/// execution fails terminally with a message naming the endpoint and what went wrong.
#[tokio::test]
async fn failures_are_action_errors_with_a_clear_message() {
    let server = FunctionServer::start();
    for (path, needle) in [
        (
            "/error",
            "answered HTTP 500 Internal Server Error: {\"errorMessage\": \"card service down\"}",
        ),
        ("/big", "answered more than 65536 bytes (the response-size cap)"),
        ("/slow", "did not answer within 1.5s"),
        ("/nonsense", "answered invalid JSON"),
    ] {
        let url = server.url(path);
        let d = driver(
            &format!("remote.prepare={},remote.charge={url}", server.url("/prepare")),
            settings(),
        );
        // handled: the model's `on error` transition
        d.create("Remote", None, Some("handled")).await.expect("create");
        let exe = d.process("handled", &pay(5)).await.expect("pay");
        assert_eq!(exe.active_path.as_deref(), Some("Broken"), "{path}");
        assert_eq!(exe.status, Status::Running, "{path}");
        assert_eq!(
            exe.context.get("charged"),
            None,
            "{path}: a failed call changes no context"
        );

        // unhandled: FAILED, the error recorded
        d.create("RemoteStrict", None, Some("strict"))
            .await
            .expect("create");
        let exe = d.process("strict", &pay(5)).await.expect("pay");
        assert_eq!(exe.status, Status::Failed, "{path}");
        let error = exe.error.unwrap_or_default();
        assert!(error.contains(&url), "{path}: {error}");
        assert!(error.contains(needle), "{path}: {error}");
    }
}

/// An unreachable endpoint is an action error too, not a hang or a crash.
#[tokio::test]
async fn an_unreachable_endpoint_fails_the_action() {
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port(); // dropped: nothing listens there now
    let d = driver(
        &format!("remote.charge=http://127.0.0.1:{port}/charge,remote.prepare=http://127.0.0.1:{port}/p"),
        settings(),
    );
    let err = d.create("RemoteStrict", None, Some("s")).await;
    let exe = err.expect("a start without actions works");
    assert_eq!(exe.active_path.as_deref(), Some("Idle"));
    let exe = d.process("s", &pay(1)).await.expect("pay");
    assert_eq!(exe.status, Status::Failed);
    assert!(
        exe.error
            .as_deref()
            .unwrap_or_default()
            .contains("could not be reached"),
        "{:?}",
        exe.error
    );
}

// --- AWS Lambda through moto ---------------------------------------------------------

/// Switch moto to its Docker-free Lambda backend, create a function, queue its answers.
fn moto_lambda(endpoint: &str, function: &str, answers: &[Value]) {
    let answers: Vec<String> = answers.iter().map(Value::to_string).collect();
    let code = r#"
import json, os, sys, urllib.request, boto3
ep = os.environ["EP"]
def post(path, body):
    req = urllib.request.Request(ep + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
post("/moto-api/config", {"lambda": {"use_docker": False}})
kw = dict(endpoint_url=ep, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
iam = boto3.client("iam", **kw)
try:
    role = iam.create_role(RoleName="stm-remote-actions", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
except iam.exceptions.EntityAlreadyExistsException:
    role = iam.get_role(RoleName="stm-remote-actions")["Role"]["Arn"]
lam = boto3.client("lambda", **kw)
lam.create_function(FunctionName=os.environ["FN"], Runtime="python3.12", Role=role,
                    Handler="h.handler", Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18})
post("/moto-api/static/lambda-simple/response", {"results": json.loads(sys.stdin.read())})
print("ok")
"#;
    let out = stm_testkit::run_python(
        code,
        &[("EP", endpoint), ("FN", function)],
        &serde_json::to_string(&answers).expect("answers"),
    );
    assert_eq!(out.trim(), "ok");
}

#[tokio::test]
async fn lambda_action_invokes_the_function_through_the_sdk() {
    let moto = stm_testkit::moto().await;
    let function = format!("charge-{}", std::process::id());
    moto_lambda(
        moto.endpoint(),
        &function,
        &[
            json!({"context": {"charged": "EUR", "by": "lambda"}, "result": "ok"}),
            json!({"context": {}, "result": "no"}),
            json!([1, 2]),
        ],
    );
    let server = FunctionServer::start();
    let remote = RemoteSettings {
        lambda_endpoint_url: Some(moto.endpoint().to_string()),
        ..settings()
    };
    let d = driver(
        &format!(
            "remote.prepare={},remote.charge=lambda:{function}",
            server.url("/prepare")
        ),
        remote,
    );
    d.create("Remote", None, Some("l1")).await.expect("create");
    let exe = d.process("l1", &pay(3)).await.expect("pay");
    assert_eq!(exe.active_path.as_deref(), Some("Paid"));
    assert_eq!(exe.context.get("by"), Some(&json!("lambda")));

    d.create("Remote", None, Some("l2")).await.expect("create");
    let exe = d.process("l2", &pay(3)).await.expect("pay");
    assert_eq!(exe.active_path.as_deref(), Some("Declined"));

    // an answer that is not an object: an action error naming the function
    d.create("RemoteStrict", None, Some("l3")).await.expect("create");
    let exe = d.process("l3", &pay(3)).await.expect("pay");
    assert_eq!(exe.status, Status::Failed);
    let error = exe.error.unwrap_or_default();
    assert!(
        error.contains(&format!("lambda:{function} answered an array, not a JSON object")),
        "{error}"
    );
}

/// A function that raised: Lambda answers 200 with `X-Amz-Function-Error` and the error
/// document. (moto's Docker-free backend cannot raise, so the function server plays the
/// Lambda Invoke API here, reached by the real SDK client.)
#[tokio::test]
async fn a_lambda_function_error_is_an_action_error_with_its_message() {
    // the SDK client talks to the test's server: an emulator, so dummy credentials
    stm_testkit::emulator();
    let server = FunctionServer::start();
    let d = driver(
        &format!(
            "remote.prepare={},remote.charge=lambda:fails",
            server.url("/prepare")
        ),
        RemoteSettings {
            lambda_endpoint_url: Some(server.base.clone()),
            ..settings()
        },
    );
    d.create("RemoteStrict", None, Some("f1")).await.expect("create");
    let exe = d.process("f1", &pay(3)).await.expect("pay");
    assert_eq!(exe.status, Status::Failed);
    let error = exe.error.unwrap_or_default();
    assert!(
        error.contains("lambda:fails failed (Unhandled): {\"errorType\": \"ValueError\", \"errorMessage\": \"card declined\"}"),
        "{error}"
    );
    let invoked = server.received("/2015-03-31/functions/fails/invocations");
    assert_eq!(invoked.len(), 1, "one Invoke");
    assert_eq!(invoked[0]["idempotency_key"], json!("f1:ev-pay:0:remote.charge"));
}

/// `STM_ACTIONS` is read and checked with the rest of the configuration: a typo fails
/// the cold start with the entry named; a valid one starts the remote actions.
#[test]
fn the_environment_binds_remote_actions() {
    use stm_runtime::config::FunctionConfig;
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_string())
        }
    };
    let err = FunctionConfig::from_lookup(env(&[("STM_QUEUE_URL", "q"), ("STM_ACTIONS", "charge=ftp://x")]))
        .expect_err("bad binding");
    assert!(
        err.to_string().contains("STM_ACTIONS entry \"charge=ftp://x\""),
        "{err}"
    );
    let err = FunctionConfig::from_lookup(env(&[
        ("STM_QUEUE_URL", "q"),
        ("STM_ACTION_TIMEOUT_SECONDS", "0"),
    ]))
    .expect_err("bad timeout");
    assert!(err.to_string().contains("STM_ACTION_TIMEOUT_SECONDS"), "{err}");

    let config = FunctionConfig::from_lookup(env(&[
        ("STM_QUEUE_URL", "q"),
        ("STM_ACTIONS", "a=lambda:fn-a, b=https://example.com/b"),
        ("STM_ACTION_TIMEOUT_SECONDS", "2.5"),
    ]))
    .expect("valid");
    assert_eq!(config.actions.timeout, Duration::from_millis(2500));
    let remote = config.remote_actions().expect("starts").expect("bound");
    let mut names: VecDeque<&str> = remote.bindings().keys().map(String::as_str).collect();
    assert_eq!(names.pop_front(), Some("a"));
    assert_eq!(names.pop_front(), Some("b"));
    let mut registry = ActionRegistry::new();
    remote.register_into(&mut registry);
    assert!(registry.get("a").is_some() && registry.get("b").is_some());
}
