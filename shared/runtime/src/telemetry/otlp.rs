//! Spans exported to an OpenTelemetry collector, OTLP over HTTP with JSON bodies
//! (`POST {endpoint}/v1/traces`, `Content-Type: application/json`; ids as hex, times as
//! decimal strings of Unix nanoseconds, as OTLP/JSON has them).
//!
//! [`OtlpLayer`] is a `tracing_subscriber` layer: a span with `trace_id` and `span_id`
//! fields ([`super::trace_id_field`]) starts its place in a trace, and a span opened
//! inside one (the worker's load, step, commit and publish) takes the same trace and a
//! new span id. Spans outside any trace are not exported, nor those of other crates
//! (the AWS SDK's). A closed span goes to a
//! bounded queue ([`QUEUE_SPANS`]) that a thread of its own drains to the collector in
//! batches, so the work never waits on the collector: when the queue is full, spans are
//! dropped and counted ([`OtlpHandle::dropped`]), never held without bound.
//!
//! Only `http://` endpoints: on Lambda the collector is the local one the AWS
//! Distro for OpenTelemetry's layer runs (`http://localhost:4318`), and locally the one
//! the user runs.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use super::context::new_span_id;

/// Closed spans waiting for the exporter thread, at most.
pub const QUEUE_SPANS: usize = 4096;

/// Spans in one request, at most.
const BATCH_SPANS: usize = 512;

/// How long a closed span waits for more to fill its batch.
const BATCH_WAIT: Duration = Duration::from_millis(200);

/// How long one request may take (connect, write, read the status).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Why an OTLP endpoint cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndpointError {
    /// Not an `http://host:port[/path]` URL.
    #[error(
        "the OTLP endpoint {0:?} is not an http:// URL: give the collector's OTLP/HTTP address, \
         such as http://localhost:4318"
    )]
    NotHttp(String),
    /// An `https://` URL: not supported here.
    #[error(
        "the OTLP endpoint {0:?} is https://, which stm does not export to: run a collector beside \
         the function (on Lambda, the AWS Distro for OpenTelemetry layer listens on http://localhost:4318) \
         and give its http:// address"
    )]
    Https(String),
}

/// Where spans are sent: `host:port` and the request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub authority: String,
    pub path: String,
}

impl Endpoint {
    /// The collector's base URL (OpenTelemetry's `OTEL_EXPORTER_OTLP_ENDPOINT`): spans go to
    /// its `/v1/traces`.
    pub fn base(url: &str) -> Result<Self, EndpointError> {
        let mut endpoint = Endpoint::traces(url)?;
        endpoint.path = format!("{}/v1/traces", endpoint.path.trim_end_matches('/'));
        Ok(endpoint)
    }

    /// The full URL spans are posted to (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
    pub fn traces(url: &str) -> Result<Self, EndpointError> {
        let url = url.trim();
        if url.starts_with("https://") {
            return Err(EndpointError::Https(url.to_string()));
        }
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| EndpointError::NotHttp(url.to_string()))?;
        let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        if authority.is_empty() || authority.contains(['@', ' ']) {
            return Err(EndpointError::NotHttp(url.to_string()));
        }
        let authority = if authority
            .rsplit_once(':')
            .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
        {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        Ok(Endpoint {
            authority,
            path: format!("/{path}"),
        })
    }
}

impl Endpoint {
    /// The endpoint OpenTelemetry's variables name, through `lookup` (the environment):
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, else `OTEL_EXPORTER_OTLP_ENDPOINT`'s
    /// `/v1/traces`; `None` when neither is set (nothing is exported).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, EndpointError> {
        let set = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        if let Some(url) = set(stm_env::OTEL_TRACES_ENDPOINT) {
            return Endpoint::traces(&url).map(Some);
        }
        set(stm_env::OTEL_ENDPOINT)
            .map(|url| Endpoint::base(&url))
            .transpose()
    }
}

/// One closed span, as the exporter sends it.
#[derive(Debug, Clone)]
struct Finished {
    name: &'static str,
    trace_id: u128,
    span_id: u64,
    parent: Option<u64>,
    start_nanos: u128,
    end_nanos: u128,
    attributes: Vec<(&'static str, String)>,
}

/// What the exporter thread is asked to do.
#[derive(Debug)]
enum Job {
    Span(Box<Finished>),
    /// Send everything queued so far, then answer.
    Flush(SyncSender<()>),
}

/// The layer: install it beside the log lines (`tracing_subscriber::registry().with(…)`).
#[derive(Debug)]
pub struct OtlpLayer {
    jobs: SyncSender<Job>,
    dropped: Arc<AtomicU64>,
}

/// What the installer keeps: a flush for a function about to be frozen, and the count of
/// spans dropped.
#[derive(Clone, Debug)]
pub struct OtlpHandle {
    jobs: SyncSender<Job>,
    dropped: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
}

impl OtlpHandle {
    /// Send every span closed so far, waiting at most `timeout` (Lambda freezes the
    /// process between invocations: a batch not sent by then would wait for the next).
    pub fn flush(&self, timeout: Duration) {
        let (done, wait) = sync_channel(1);
        if self.jobs.send(Job::Flush(done)).is_ok() {
            let _ = wait.recv_timeout(timeout);
        }
    }

    /// Spans dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Requests the collector did not take (refused, unreachable or timed out).
    pub fn failed_requests(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// A layer exporting to `endpoint` as `service` (OpenTelemetry's `service.name`: the
/// function's name), and its handle. Starts the exporter thread.
pub fn layer(endpoint: Endpoint, service: &str) -> (OtlpLayer, OtlpHandle) {
    let (jobs, queue) = sync_channel(QUEUE_SPANS);
    let dropped = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let exporter = Exporter {
        endpoint,
        service: service.to_string(),
        failed: failed.clone(),
    };
    if let Err(err) = std::thread::Builder::new()
        .name("otlp-exporter".into())
        .spawn(move || exporter.run(queue))
    {
        // the layer then drops every span, counted: the work goes on untraced
        tracing::warn!(error = %err, "could not start the OTLP exporter thread; spans are dropped");
    }
    let handle = OtlpHandle {
        jobs: jobs.clone(),
        dropped: dropped.clone(),
        failed,
    };
    (OtlpLayer { jobs, dropped }, handle)
}

/// A span's place in its trace, kept in the registry's extensions until it closes.
struct Open {
    trace_id: u128,
    span_id: u64,
    parent: Option<u64>,
    start_nanos: u128,
    attributes: Vec<(&'static str, String)>,
}

/// A span's fields as text; the three trace fields apart.
#[derive(Default)]
struct Fields {
    trace_id: Option<u128>,
    span_id: Option<u64>,
    parent: Option<u64>,
    attributes: Vec<(&'static str, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "trace_id" => self.trace_id = u128::from_str_radix(value, 16).ok(),
            "span_id" => self.span_id = u64::from_str_radix(value, 16).ok(),
            "parent_span_id" => self.parent = u64::from_str_radix(value, 16).ok(),
            name => self.attributes.push((name, value.to_string())),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%value` fields arrive here, as their Display
        self.record_str(field, &format!("{value:?}"));
    }
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

impl<S> Layer<S> for OtlpLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        // ours only: the AWS SDK's own spans (each request's attempts) stay out
        if !attrs.metadata().target().starts_with("stm") {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let place = match (fields.trace_id, fields.span_id) {
            (Some(trace_id), Some(span_id)) => Some((trace_id, span_id, fields.parent)),
            // inside a traced span: the same trace, a span of its own
            _ => span.parent().and_then(|parent| {
                parent
                    .extensions()
                    .get::<Open>()
                    .map(|open| (open.trace_id, new_span_id(), Some(open.span_id)))
            }),
        };
        if let Some((trace_id, span_id, parent)) = place {
            span.extensions_mut().insert(Open {
                trace_id,
                span_id,
                parent,
                start_nanos: now_nanos(),
                attributes: fields.attributes,
            });
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        if let Some(open) = extensions.get_mut::<Open>() {
            let mut fields = Fields::default();
            values.record(&mut fields);
            for (name, value) in fields.attributes {
                open.attributes.retain(|(n, _)| *n != name);
                open.attributes.push((name, value));
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(open) = span.extensions_mut().remove::<Open>() else {
            return;
        };
        let finished = Finished {
            name: span.name(),
            trace_id: open.trace_id,
            span_id: open.span_id,
            parent: open.parent,
            start_nanos: open.start_nanos,
            end_nanos: now_nanos(),
            attributes: open.attributes,
        };
        if let Err(TrySendError::Full(_)) = self.jobs.try_send(Job::Span(Box::new(finished))) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The thread that posts batches.
struct Exporter {
    endpoint: Endpoint,
    service: String,
    failed: Arc<AtomicU64>,
}

impl Exporter {
    fn run(self, queue: Receiver<Job>) {
        let mut batch: Vec<Finished> = Vec::new();
        loop {
            let job = if batch.is_empty() {
                queue.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                queue.recv_timeout(BATCH_WAIT)
            };
            match job {
                Ok(Job::Span(span)) => {
                    batch.push(*span);
                    if batch.len() >= BATCH_SPANS {
                        self.send(&mut batch);
                    }
                }
                Ok(Job::Flush(done)) => {
                    self.send(&mut batch);
                    let _ = done.send(());
                }
                Err(RecvTimeoutError::Timeout) => self.send(&mut batch),
                Err(RecvTimeoutError::Disconnected) => {
                    self.send(&mut batch);
                    return;
                }
            }
        }
    }

    fn send(&self, batch: &mut Vec<Finished>) {
        if batch.is_empty() {
            return;
        }
        let body = request_body(&self.service, batch).to_string();
        batch.clear();
        if post(&self.endpoint, &body).is_err() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// An `ExportTraceServiceRequest` in OTLP/JSON.
fn request_body(service: &str, spans: &[Finished]) -> Value {
    let spans: Vec<Value> = spans.iter().map(span_json).collect();
    json!({
        "resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
            "scopeSpans": [{"scope": {"name": "stm"}, "spans": spans}],
        }]
    })
}

/// OTLP's span kinds: a record's handling consumes a message; the rest is internal.
const KIND_INTERNAL: u8 = 1;
const KIND_CONSUMER: u8 = 5;

fn span_json(span: &Finished) -> Value {
    let attributes: Vec<Value> = span
        .attributes
        .iter()
        .map(|(key, value)| json!({"key": key, "value": {"stringValue": value}}))
        .collect();
    let mut out = json!({
        "traceId": format!("{:032x}", span.trace_id),
        "spanId": format!("{:016x}", span.span_id),
        "name": span.name,
        "kind": if span.name == "record" || span.name == "burst" { KIND_CONSUMER } else { KIND_INTERNAL },
        "startTimeUnixNano": span.start_nanos.to_string(),
        "endTimeUnixNano": span.end_nanos.to_string(),
        "attributes": attributes,
    });
    if let Some(parent) = span.parent {
        out["parentSpanId"] = json!(format!("{parent:016x}"));
    }
    out
}

/// One HTTP/1.1 POST of `body`; `Ok` when the collector answered 2xx.
fn post(endpoint: &Endpoint, body: &str) -> std::io::Result<()> {
    let address = endpoint
        .authority
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("the collector's host has no address"))?;
    let mut stream = TcpStream::connect_timeout(&address, REQUEST_TIMEOUT)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    write!(
        stream,
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        endpoint.path,
        endpoint.authority,
        body.len()
    )?;
    let mut status = [0u8; 12];
    stream.read_exact(&mut status)?;
    // "HTTP/1.1 200"
    match status.get(9) {
        Some(b'2') => Ok(()),
        _ => Err(std::io::Error::other("the collector refused the spans")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_http_urls() {
        assert_eq!(
            Endpoint::base("http://localhost:4318"),
            Ok(Endpoint {
                authority: "localhost:4318".into(),
                path: "/v1/traces".into()
            })
        );
        assert_eq!(
            Endpoint::base("http://collector/otlp/").map(|e| (e.authority, e.path)),
            Ok(("collector:80".into(), "/otlp/v1/traces".into()))
        );
        assert_eq!(
            Endpoint::traces("http://127.0.0.1:9/x").map(|e| e.path),
            Ok("/x".into())
        );
        assert!(matches!(
            Endpoint::base("https://api.example"),
            Err(EndpointError::Https(_))
        ));
        assert!(matches!(
            Endpoint::base("localhost:4318"),
            Err(EndpointError::NotHttp(_))
        ));
        assert!(matches!(
            Endpoint::base("http://"),
            Err(EndpointError::NotHttp(_))
        ));
    }

    #[test]
    fn the_traces_variable_wins_and_none_set_exports_nothing() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        assert_eq!(Endpoint::from_lookup(env(&[])), Ok(None));
        assert_eq!(
            Endpoint::from_lookup(env(&[(stm_env::OTEL_ENDPOINT, "http://c:4318")]))
                .map(|e| e.map(|e| e.path)),
            Ok(Some("/v1/traces".to_string()))
        );
        assert_eq!(
            Endpoint::from_lookup(env(&[
                (stm_env::OTEL_ENDPOINT, "http://c:4318"),
                (stm_env::OTEL_TRACES_ENDPOINT, "http://t:1/spans"),
            ]))
            .map(|e| e.map(|e| (e.authority, e.path))),
            Ok(Some(("t:1".to_string(), "/spans".to_string())))
        );
        assert!(Endpoint::from_lookup(env(&[(stm_env::OTEL_ENDPOINT, "https://x")])).is_err());
    }

    #[test]
    fn a_span_is_otlp_json() {
        let span = Finished {
            name: "commit",
            trace_id: 0x4bf92f3577b34da6a3ce929d0e0e4736,
            span_id: 0x00f067aa0ba902b7,
            parent: Some(1),
            start_nanos: 1_000,
            end_nanos: 2_000,
            attributes: vec![("version", "3".into())],
        };
        let body = request_body("stm-worker", &[span]);
        let out = &body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(out["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(out["spanId"], "00f067aa0ba902b7");
        assert_eq!(out["parentSpanId"], "0000000000000001");
        assert_eq!(out["startTimeUnixNano"], "1000");
        assert_eq!(out["kind"], 1);
        assert_eq!(out["attributes"][0]["value"]["stringValue"], "3");
        assert_eq!(
            body["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"],
            "stm-worker"
        );
    }
}
