//! A project's Rust actions served over harel's FaaS wire contract (`harel.faas`), one
//! HTTP endpoint per action at `/{name}`, so that `stm local` (or harel's `http_action`)
//! calls them through an `STM_ACTIONS` binding while the project runs on a laptop:
//!
//! ```text
//! POST /greeter.greet  {"context": {...}, "event": {"kind": ..., "data": {...}},
//!                       "inputs": {...}, "idempotency_key": "..."}
//! 200                  {"context": {...}, "result": ...}
//! ```
//!
//! The start step's `{"kind": "Start", "data": {}}` reaches the action as no event, as
//! the worker calls it. harel's payload carries no execution id, so the action's
//! `execution_id` is empty here; the idempotency key is the handle that stays stable. An
//! action error answers HTTP 500 with `Type: message`, which the caller reports as a
//! `RemoteActionError` carrying that text.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};
use stm_runtime::{ActionFn, ActionInput, ActionRegistry, ActionState};

/// The largest request accepted: a Lambda synchronous invocation's payload limit, which
/// a remote action must fit on AWS too.
pub const MAX_REQUEST_BYTES: usize = 6 * 1024 * 1024;

/// Serve `actions` on `addr` until the process stops. It prints, once listening, the
/// `STM_ACTIONS` line that binds the project's own actions (the `harel.lib.*` built-ins
/// run inside `stm local` already).
///
/// The actions get the state the worker gives them: the registry's own, and the
/// worker's DynamoDB and SQS clients, built from the same variables (`STM_ENDPOINT_URL`
/// or `AWS_ENDPOINT_URL`, `AWS_REGION`), see [`stm_runtime::config::provide_clients`].
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// let mut actions = stm_runtime::ActionRegistry::with_builtins();
/// actions.register("greeter.greet", |input| Ok(serde_json::json!(format!("hello {}", input.idempotency_key))));
/// stm_lambda::serve_actions(actions, "127.0.0.1:9101".parse().expect("an address")).await
/// # }
/// ```
pub async fn serve_actions(actions: ActionRegistry, addr: SocketAddr) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = bindings(&actions, listener.local_addr()?);
    println!("{}={bound}", stm_env::ACTIONS);
    serve_actions_on(actions, listener).await
}

/// [`serve_actions`] on a listener the caller bound (port 0 in a test, say), printing
/// nothing.
pub async fn serve_actions_on(
    mut actions: ActionRegistry,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    // an action that reads the worker's clients must find them here too, or a run that
    // works on AWS fails under `stm local`
    stm_runtime::config::provide_clients_from_env(&mut actions).await;
    let actions = std::sync::Arc::new(actions);
    loop {
        let (stream, _) = listener.accept().await?;
        let actions = actions.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let actions = actions.clone();
                async move { Ok::<_, std::convert::Infallible>(answer(&actions, request).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(err) = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await
            {
                tracing::debug!(error = %err, "an action connection ended with an error");
            }
        });
    }
}

/// `name=http://addr/name` for each action that is not a `harel.lib` built-in.
pub fn bindings(actions: &ActionRegistry, addr: SocketAddr) -> String {
    actions
        .names()
        .filter(|name| !name.starts_with("harel.lib."))
        .map(|name| format!("{name}=http://{addr}/{name}"))
        .collect::<Vec<_>>()
        .join(",")
}

async fn answer(actions: &ActionRegistry, request: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    if request.method() != hyper::Method::POST {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "POST the harel.faas payload".into(),
        );
    }
    let name = request.uri().path().trim_start_matches('/').to_string();
    let Some(action) = actions.get(&name) else {
        let known: Vec<&str> = actions.names().collect();
        return text(
            StatusCode::NOT_FOUND,
            format!(
                "no action {name:?} is registered here; these are: {}",
                known.join(", ")
            ),
        );
    };
    let body = match Limited::new(request.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(err) => {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request could not be read (at most {MAX_REQUEST_BYTES} bytes): {err}"),
            )
        }
    };
    match call(action, actions.state(), &body) {
        Ok(reply) => Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(reply.to_string())))
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()))),
        Err((status, message)) => text(status, message),
    }
}

/// Decode the payload, run the action, encode the reply.
fn call(action: &ActionFn, state: &ActionState, body: &[u8]) -> Result<Value, (StatusCode, String)> {
    let bad = |why: String| {
        (
            StatusCode::BAD_REQUEST,
            format!("not a harel.faas payload: {why}"),
        )
    };
    let text = std::str::from_utf8(body).map_err(|_| bad("the body is not UTF-8 text".into()))?;
    let payload: Value = stm_core::pyjson::loads(text).map_err(|e| bad(format!("invalid JSON ({e})")))?;
    let object = |key: &str| -> Result<stm_core::Map, (StatusCode, String)> {
        match payload.get(key) {
            None | Some(Value::Null) => Ok(stm_core::Map::new()),
            Some(Value::Object(map)) => Ok(map.clone()),
            Some(_) => Err(bad(format!("{key:?} must be an object"))),
        }
    };
    let mut context = object("context")?;
    let inputs = object("inputs")?;
    let event = match payload.get("event") {
        None | Some(Value::Null) => None,
        Some(Value::Object(event)) => {
            let kind = event
                .get("kind")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("\"event\" has no string \"kind\"".into()))?;
            let data = match event.get("data") {
                None | Some(Value::Null) => stm_core::Map::new(),
                Some(Value::Object(data)) => data.clone(),
                Some(_) => return Err(bad("\"event.data\" must be an object".into())),
            };
            // the worker's client sends the start step this way: the action saw no event
            (kind != "Start" || !data.is_empty()).then(|| stm_core::Event::with_data(kind, data))
        }
        Some(_) => return Err(bad("\"event\" must be an object".into())),
    };
    let idempotency_key = payload
        .get("idempotency_key")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let result = action(ActionInput {
        context: &mut context,
        event: event.as_ref(),
        inputs: &inputs,
        idempotency_key: &idempotency_key,
        execution_id: "",
        state,
    })
    .map_err(|err| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{}: {}", err.type_name, err.message),
        )
    })?;
    Ok(json!({"context": context, "result": result}))
}

fn text(status: StatusCode, message: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(message)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}
