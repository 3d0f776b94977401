//! Remote actions: an action's implementation running as a function elsewhere (an AWS
//! Lambda function, or any HTTP(S) endpoint such as OpenFaaS, Knative or a Cloudflare
//! Worker), over harel 0.9.0's FaaS wire contract (`harel.faas`):
//!
//! ```text
//! worker -> function: {"context": {...}, "event": {"kind": ..., "data": {...}},
//!                      "inputs": {...}, "idempotency_key": "..."}
//! function -> worker: {"context": {...}, "result": ...}
//! ```
//!
//! The returned context replaces the execution's context; `result` is the action's value
//! (a selector routes on it). A function written with `harel.faas.handler` works as is.
//!
//! Bindings come only from configuration (`STM_ACTIONS`), never from an event or a
//! `.stm` file: `charge=lambda:payments-charge,notify=https://hooks.example.com/notify`.
//! Every call has a timeout and a response-size cap; a failure (timeout, non-2xx, Lambda
//! `FunctionError`, a malformed or oversized response) is an action error, which the
//! driver routes like any other (`on error`, else the execution fails terminally).
//!
//! Differences from harel, on purpose:
//! - harel sends `event.kind` of the triggering event and crashes on the start step, which
//!   has none (`None.kind`); we send `{"kind": "Start", "data": {}}` there.
//! - plain `http://` is accepted only for a loopback host (local development and tests):
//!   the context travels in the request.
//!
//! The engine calls actions synchronously, in the middle of a step. A remote call is
//! async I/O, so the calls run on one dedicated thread with its own small tokio runtime
//! and the calling thread waits for the answer: this works under any caller runtime
//! (multi-thread on Lambda, current-thread in tests) without `block_in_place`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use stm_core::engine::ActionError;
use stm_core::{Event, Map};

use crate::actions::{ActionInput, ActionRegistry};
use crate::driver::DriverError;

/// The default time a remote action may take, end to end. With the SDK's operation timeout
/// it makes the worker's per-record reserve (`worker::record_reserve`), which must fit
/// inside the worker's function timeout with room for the batch's other records.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default cap on a remote action's response body (a context bigger than a
/// DynamoDB item, 400 KB, could not be committed anyway).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Where a remote action runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteTarget {
    /// An AWS Lambda function (name, ARN or partial ARN), invoked `RequestResponse`.
    Lambda(String),
    /// An HTTP(S) endpoint, sent the payload as a JSON `POST`.
    Http(String),
}

impl std::fmt::Display for RemoteTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteTarget::Lambda(name) => write!(f, "lambda:{name}"),
            RemoteTarget::Http(url) => f.write_str(url),
        }
    }
}

/// Parse `STM_ACTIONS`: `name=target` pairs separated by commas or newlines, where a
/// target is `lambda:<function>` or an `https://` URL (`http://` to a loopback host only).
pub fn parse_bindings(spec: &str) -> Result<BTreeMap<String, RemoteTarget>, DriverError> {
    let bad = |entry: &str, why: &str| DriverError::Config(format!("STM_ACTIONS entry {entry:?}: {why}"));
    let mut bindings = BTreeMap::new();
    for entry in spec.split([',', '\n']).map(str::trim).filter(|e| !e.is_empty()) {
        let (name, target) = entry
            .split_once('=')
            .ok_or_else(|| bad(entry, "expected name=lambda:<function> or name=https://<url>"))?;
        let (name, target) = (name.trim(), target.trim());
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return Err(bad(entry, "the action name is empty or has spaces"));
        }
        let target = if let Some(function) = target.strip_prefix("lambda:") {
            if function.is_empty() {
                return Err(bad(entry, "no function name after lambda:"));
            }
            RemoteTarget::Lambda(function.to_string())
        } else if let Some(rest) = target.strip_prefix("https://") {
            if rest.is_empty() {
                return Err(bad(entry, "no host after https://"));
            }
            RemoteTarget::Http(target.to_string())
        } else if let Some(rest) = target.strip_prefix("http://") {
            let host = rest.split(['/', '?']).next().unwrap_or("");
            let host = host.rsplit_once(':').map_or(host, |(h, _port)| h);
            if !matches!(host, "localhost" | "127.0.0.1" | "[::1]") {
                return Err(bad(
                    entry,
                    "plain http:// is only allowed to a loopback host (the context travels in the request); use https://",
                ));
            }
            RemoteTarget::Http(target.to_string())
        } else {
            return Err(bad(
                entry,
                "the target must start with lambda:, https:// or http://localhost",
            ));
        };
        if bindings.insert(name.to_string(), target).is_some() {
            return Err(bad(entry, &format!("{name} is bound twice")));
        }
    }
    Ok(bindings)
}

/// The limits and the endpoint every remote call uses.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteSettings {
    pub timeout: Duration,
    pub max_response_bytes: usize,
    /// The Lambda API endpoint override (moto, LocalStack); `None` on AWS.
    pub lambda_endpoint_url: Option<String>,
    pub region: String,
}

impl Default for RemoteSettings {
    fn default() -> Self {
        RemoteSettings {
            timeout: DEFAULT_TIMEOUT,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            lambda_endpoint_url: None,
            region: "us-east-1".into(),
        }
    }
}

/// The request body for one call (harel's `_build_payload`).
pub fn request_payload(input: &ActionInput<'_>) -> Value {
    let event = match input.event {
        Some(Event { kind, data, .. }) => json!({"kind": kind, "data": data}),
        None => json!({"kind": "Start", "data": {}}),
    };
    json!({
        "context": input.context,
        "event": event,
        "inputs": input.inputs,
        "idempotency_key": input.idempotency_key,
    })
}

/// Apply a response (harel's `_apply`): the returned context replaces the execution's
/// (a missing one empties it, as harel's does), and `result` is the action's value.
pub fn apply_response(
    context: &mut Map,
    response: Value,
    target: &RemoteTarget,
) -> Result<Value, ActionError> {
    let Value::Object(mut response) = response else {
        return Err(ActionError::new(
            "RemoteActionError",
            format!("{target} answered {}, not a JSON object", type_name(&response)),
        ));
    };
    let new_context = match response.remove("context") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(ActionError::new(
                "RemoteActionError",
                format!(
                    "{target} answered a context that is {}, not an object",
                    type_name(&other)
                ),
            ))
        }
    };
    *context = new_context;
    Ok(response.remove("result").unwrap_or(Value::Null))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

type Reply = std::sync::mpsc::SyncSender<Result<Value, ActionError>>;

struct Job {
    target: RemoteTarget,
    body: Vec<u8>,
    reply: Reply,
}

/// The client side of remote actions: owns the I/O thread and its clients.
#[derive(Clone)]
pub struct RemoteActions {
    bindings: BTreeMap<String, RemoteTarget>,
    settings: RemoteSettings,
    jobs: tokio::sync::mpsc::UnboundedSender<Job>,
}

impl std::fmt::Debug for RemoteActions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteActions")
            .field("bindings", &self.bindings)
            .field("settings", &self.settings)
            .finish()
    }
}

impl RemoteActions {
    /// Start the I/O thread. The clients are built on it once, the Lambda client only
    /// when a binding needs it.
    pub fn start(
        bindings: BTreeMap<String, RemoteTarget>,
        settings: RemoteSettings,
    ) -> Result<Self, DriverError> {
        let (jobs, mut queue) = tokio::sync::mpsc::unbounded_channel::<Job>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| DriverError::Config(format!("cannot start the remote-action runtime: {e}")))?;
        let needs_lambda = bindings.values().any(|t| matches!(t, RemoteTarget::Lambda(_)));
        let io_settings = settings.clone();
        std::thread::Builder::new()
            .name("stm-remote-actions".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let clients = Arc::new(Clients::new(&io_settings, needs_lambda).await);
                    while let Some(job) = queue.recv().await {
                        let clients = clients.clone();
                        let settings = io_settings.clone();
                        tokio::spawn(async move {
                            let outcome = tokio::time::timeout(
                                settings.timeout,
                                clients.call(&job.target, job.body, settings.max_response_bytes),
                            )
                            .await
                            .unwrap_or_else(|_| {
                                Err(ActionError::new(
                                    "TimeoutError",
                                    format!("{} did not answer within {:?}", job.target, settings.timeout),
                                ))
                            });
                            // the caller may have given up already: nothing to do then
                            let _ = job.reply.send(outcome);
                        });
                    }
                });
            })
            .map_err(|e| DriverError::Config(format!("cannot start the remote-action thread: {e}")))?;
        Ok(RemoteActions {
            bindings,
            settings,
            jobs,
        })
    }

    pub fn bindings(&self) -> &BTreeMap<String, RemoteTarget> {
        &self.bindings
    }

    /// Register every binding into `registry` (a remote binding replaces a Rust function
    /// of the same name: configuration wins over code, so an operator can re-point one).
    pub fn register_into(&self, registry: &mut ActionRegistry) {
        for (name, target) in &self.bindings {
            let this = self.clone();
            let target = target.clone();
            registry.register(name.clone(), move |input: ActionInput<'_>| {
                this.call(&target, input)
            });
        }
    }

    /// One call: build the payload, send it, wait (bounded), apply the response.
    pub fn call(&self, target: &RemoteTarget, input: ActionInput<'_>) -> Result<Value, ActionError> {
        let body = serde_json::to_vec(&request_payload(&input))
            .map_err(|e| ActionError::new("RemoteActionError", format!("cannot encode the payload: {e}")))?;
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        self.jobs
            .send(Job {
                target: target.clone(),
                body,
                reply,
            })
            .map_err(|_| ActionError::new("RemoteActionError", "the remote-action thread has stopped"))?;
        // the I/O side enforces the timeout; the margin covers only its scheduling
        let response = answer
            .recv_timeout(self.settings.timeout + Duration::from_secs(5))
            .map_err(|_| {
                ActionError::new(
                    "TimeoutError",
                    format!("{target} did not answer within {:?}", self.settings.timeout),
                )
            })??;
        apply_response(input.context, response, target)
    }
}

type HttpClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    http_body_util::Full<bytes::Bytes>,
>;

struct Clients {
    http: HttpClient,
    lambda: Option<aws_sdk_lambda::Client>,
}

impl Clients {
    async fn new(settings: &RemoteSettings, needs_lambda: bool) -> Self {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(Arc::new(rustls::crypto::ring::default_provider()))
            .map(|b| b.https_or_http().enable_http1().build())
            // no usable root store: https calls will fail with a clear TLS error, but
            // loopback http still works (and the worker still starts)
            .unwrap_or_else(|_| {
                hyper_rustls::HttpsConnectorBuilder::new()
                    .with_tls_config(
                        rustls::ClientConfig::builder_with_provider(Arc::new(
                            rustls::crypto::ring::default_provider(),
                        ))
                        .with_safe_default_protocol_versions()
                        .map(|b| {
                            b.with_root_certificates(rustls::RootCertStore::empty())
                                .with_no_client_auth()
                        })
                        .unwrap_or_else(|_| {
                            rustls::ClientConfig::builder()
                                .with_root_certificates(rustls::RootCertStore::empty())
                                .with_no_client_auth()
                        }),
                    )
                    .https_or_http()
                    .enable_http1()
                    .build()
            });
        let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(connector);
        let lambda = if needs_lambda {
            let config =
                stm_store::aws::sdk_config(settings.lambda_endpoint_url.as_deref(), &settings.region).await;
            Some(aws_sdk_lambda::Client::new(&config))
        } else {
            None
        };
        Clients { http, lambda }
    }

    async fn call(
        &self,
        target: &RemoteTarget,
        body: Vec<u8>,
        max_bytes: usize,
    ) -> Result<Value, ActionError> {
        let bytes = match target {
            RemoteTarget::Lambda(function) => self.invoke_lambda(function, body, max_bytes).await?,
            RemoteTarget::Http(url) => self.post(url, body, max_bytes).await?,
        };
        serde_json::from_slice(&bytes).map_err(|e| {
            ActionError::new(
                "RemoteActionError",
                format!("{target} answered invalid JSON: {e}"),
            )
        })
    }

    async fn invoke_lambda(
        &self,
        function: &str,
        body: Vec<u8>,
        max_bytes: usize,
    ) -> Result<Vec<u8>, ActionError> {
        let target = || format!("lambda:{function}");
        let client = self
            .lambda
            .as_ref()
            .ok_or_else(|| ActionError::new("RemoteActionError", "no Lambda client was configured"))?;
        let out = client
            .invoke()
            .function_name(function)
            .invocation_type(aws_sdk_lambda::types::InvocationType::RequestResponse)
            .payload(aws_smithy_types::Blob::new(body))
            .send()
            .await
            .map_err(|e| {
                ActionError::new(
                    "RemoteActionError",
                    format!(
                        "{} could not be invoked: {}",
                        target(),
                        stm_store::aws::Readable(&e)
                    ),
                )
            })?;
        let payload = out
            .payload
            .map(aws_smithy_types::Blob::into_inner)
            .unwrap_or_default();
        if let Some(kind) = out.function_error {
            // the function raised: its error document ({"errorType", "errorMessage"}) is
            // the most useful thing to record, as harel does
            let text = String::from_utf8_lossy(&payload[..payload.len().min(2048)]).into_owned();
            return Err(ActionError::new(
                "RemoteActionError",
                format!("{} failed ({kind}): {text}", target()),
            ));
        }
        if payload.len() > max_bytes {
            return Err(too_large(&target(), max_bytes));
        }
        Ok(payload)
    }

    async fn post(&self, url: &str, body: Vec<u8>, max_bytes: usize) -> Result<Vec<u8>, ActionError> {
        use http_body_util::BodyExt;
        let request = http::Request::post(url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .map_err(|e| ActionError::new("RemoteActionError", format!("{url}: bad request: {e}")))?;
        let response =
            self.http.request(request).await.map_err(|e| {
                ActionError::new("RemoteActionError", format!("{url} could not be reached: {e}"))
            })?;
        let status = response.status();
        let collected = http_body_util::Limited::new(response.into_body(), max_bytes)
            .collect()
            .await
            .map_err(|e| {
                if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
                    too_large(url, max_bytes)
                } else {
                    ActionError::new(
                        "RemoteActionError",
                        format!("{url}: reading the response failed: {e}"),
                    )
                }
            })?
            .to_bytes();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&collected[..collected.len().min(2048)]).into_owned();
            return Err(ActionError::new(
                "RemoteActionError",
                format!("{url} answered HTTP {status}: {text}"),
            ));
        }
        Ok(collected.to_vec())
    }
}

fn too_large(target: &str, max_bytes: usize) -> ActionError {
    ActionError::new(
        "RemoteActionError",
        format!("{target} answered more than {max_bytes} bytes (the response-size cap)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_parse_lambda_https_and_loopback_http() {
        let b = parse_bindings(
            "charge=lambda:payments-charge, notify=https://hooks.example.com/n\nlocal=http://127.0.0.1:9000/x",
        )
        .expect("valid");
        assert_eq!(b["charge"], RemoteTarget::Lambda("payments-charge".into()));
        assert_eq!(
            b["notify"],
            RemoteTarget::Http("https://hooks.example.com/n".into())
        );
        assert_eq!(b["local"], RemoteTarget::Http("http://127.0.0.1:9000/x".into()));
    }

    #[test]
    fn bindings_reject_what_they_cannot_honour() {
        for (spec, needle) in [
            ("charge", "expected name=lambda"),
            ("=lambda:f", "action name is empty"),
            ("a=lambda:", "no function name"),
            ("a=ftp://x", "must start with lambda:"),
            ("a=http://example.com/x", "only allowed to a loopback host"),
            ("a=lambda:f,a=lambda:g", "bound twice"),
        ] {
            let err = parse_bindings(spec).expect_err(spec).to_string();
            assert!(err.contains(needle), "{spec}: {err}");
            assert!(err.contains("STM_ACTIONS"), "{spec}: {err}");
        }
    }

    #[test]
    fn payload_and_response_follow_harels_wire_contract() {
        let mut ctx = Map::new();
        ctx.insert("amount".into(), json!(10));
        let inputs = json!({"currency": "EUR"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let event = Event::with_data(
            "Pay",
            json!({"card": "x"}).as_object().cloned().unwrap_or_default(),
        );
        let input = ActionInput {
            context: &mut ctx,
            event: Some(&event),
            inputs: &inputs,
            idempotency_key: "e1:ev1:0:charge",
            execution_id: "e1",
        };
        assert_eq!(
            request_payload(&input),
            json!({"context": {"amount": 10}, "event": {"kind": "Pay", "data": {"card": "x"}},
                   "inputs": {"currency": "EUR"}, "idempotency_key": "e1:ev1:0:charge"})
        );
        let target = RemoteTarget::Lambda("f".into());
        let result = apply_response(
            &mut ctx,
            json!({"context": {"paid": true}, "result": "ok"}),
            &target,
        );
        assert_eq!(result.expect("applies"), json!("ok"));
        assert_eq!(Value::Object(ctx.clone()), json!({"paid": true}));
        let err = apply_response(&mut ctx, json!([1]), &target).expect_err("not an object");
        assert!(err.to_string().contains("not a JSON object"), "{err}");
        assert_eq!(
            Value::Object(ctx),
            json!({"paid": true}),
            "a bad answer changes nothing"
        );
    }
}
