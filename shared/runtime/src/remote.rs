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
//!
//! The bindings, the settings and the wire contract here are plain Rust; the client
//! (`RemoteActions`: the I/O thread, the Lambda SDK client and the hyper + rustls HTTPS
//! client) is `remote/client.rs`, feature `aws`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};
use stm_core::engine::ActionError;
use stm_core::{Event, Map};

use crate::actions::ActionInput;

// the client: the I/O thread and its Lambda and HTTPS clients (feature `aws`)
#[cfg(feature = "aws")]
mod client;
#[cfg(feature = "aws")]
pub use client::RemoteActions;

/// The default time a remote action may take, end to end. With the SDK's operation timeout
/// it makes the worker's per-record reserve (`worker::record_reserve`), which must fit
/// inside the worker's function timeout with room for the batch's other records.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default cap on a remote action's response body (a context bigger than a
/// DynamoDB item, 400 KB, could not be committed anyway).
pub(crate) const DEFAULT_MAX_RESPONSE_BYTES: usize = 1024 * 1024;

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

/// What can keep remote actions from being offered: a binding that does not parse (the
/// cold start stops, naming the entry), or the client that cannot start. A failed call is
/// no error of this kind: it is the action's error, routed like any other.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// One `STM_ACTIONS` entry that does not parse, and why.
    #[error("{} entry {entry:?}: {problem}", stm_env::ACTIONS)]
    Binding { entry: String, problem: BindingProblem },
    /// The client's I/O thread or its runtime could not be started.
    #[error("cannot start {what}: {source}")]
    Startup {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Why an `STM_ACTIONS` entry does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BindingProblem {
    #[error("expected name=lambda:<function> or name=https://<url>")]
    NotAPair,
    #[error("the action name is empty or has spaces")]
    BadName,
    #[error("no function name after lambda:")]
    NoFunction,
    #[error("no host after https://")]
    NoHost,
    #[error(
        "plain http:// is only allowed to a loopback host (the context travels in the request); use https://"
    )]
    PlainHttp,
    #[error("the target must start with lambda:, https:// or http://localhost")]
    UnknownScheme,
    #[error("{0} is bound twice")]
    BoundTwice(String),
}

/// Parse `STM_ACTIONS`: `name=target` pairs separated by commas or newlines, where a
/// target is `lambda:<function>` or an `https://` URL (`http://` to a loopback host only).
pub fn parse_bindings(spec: &str) -> Result<BTreeMap<String, RemoteTarget>, RemoteError> {
    let bad = |entry: &str, problem: BindingProblem| RemoteError::Binding {
        entry: entry.to_string(),
        problem,
    };
    let mut bindings = BTreeMap::new();
    for entry in spec.split([',', '\n']).map(str::trim).filter(|e| !e.is_empty()) {
        let (name, target) = entry
            .split_once('=')
            .ok_or_else(|| bad(entry, BindingProblem::NotAPair))?;
        let (name, target) = (name.trim(), target.trim());
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return Err(bad(entry, BindingProblem::BadName));
        }
        let target = if let Some(function) = target.strip_prefix("lambda:") {
            if function.is_empty() {
                return Err(bad(entry, BindingProblem::NoFunction));
            }
            RemoteTarget::Lambda(function.to_string())
        } else if let Some(rest) = target.strip_prefix("https://") {
            if rest.is_empty() {
                return Err(bad(entry, BindingProblem::NoHost));
            }
            RemoteTarget::Http(target.to_string())
        } else if let Some(rest) = target.strip_prefix("http://") {
            let host = rest.split(['/', '?']).next().unwrap_or("");
            let host = host.rsplit_once(':').map_or(host, |(h, _port)| h);
            if !matches!(host, "localhost" | "127.0.0.1" | "[::1]") {
                return Err(bad(entry, BindingProblem::PlainHttp));
            }
            RemoteTarget::Http(target.to_string())
        } else {
            return Err(bad(entry, BindingProblem::UnknownScheme));
        };
        if bindings.insert(name.to_string(), target).is_some() {
            return Err(bad(entry, BindingProblem::BoundTwice(name.to_string())));
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
            region: stm_store::DEFAULT_REGION.into(),
        }
    }
}

/// The request body for one call (harel's `_build_payload`). The wire contract builds and
/// is tested without the SDK; only the `aws` build's client sends it.
#[cfg_attr(not(feature = "aws"), allow(dead_code))]
pub(crate) fn request_payload(input: &ActionInput<'_>) -> Value {
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
#[cfg_attr(not(feature = "aws"), allow(dead_code))]
pub(crate) fn apply_response(
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

#[cfg_attr(not(feature = "aws"), allow(dead_code))]
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
            assert!(err.contains(stm_env::ACTIONS), "{spec}: {err}");
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
            state: &crate::actions::ActionState::default(),
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
