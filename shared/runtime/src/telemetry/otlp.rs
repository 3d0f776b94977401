//! Spans exported to an OpenTelemetry collector, OTLP over HTTP with JSON bodies
//! (`POST {endpoint}/v1/traces`, `Content-Type: application/json`; ids as hex, times as
//! decimal strings of Unix nanoseconds, as OTLP/JSON has them).
//!
//! The layer and its queue are [`super::export`]'s; this module sends its batches.
//!
//! Only `http://` endpoints: on Lambda the collector is the local one the AWS
//! Distro for OpenTelemetry's layer runs (`http://localhost:4318`), and locally the one
//! the user runs.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::{json, Value};

use super::export::{self, ExportHandle, Finished, Keep, Sink, SpanLayer};

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

/// A layer exporting to `endpoint` as `service` (OpenTelemetry's `service.name`: the
/// function's name), and its handle. Starts the exporter thread.
pub fn layer(endpoint: Endpoint, service: &str) -> (SpanLayer, ExportHandle) {
    let sink = Collector {
        endpoint,
        service: service.to_string(),
    };
    export::start(Box::new(sink), Keep::All, "otlp-exporter")
}

/// An OTLP/HTTP collector.
struct Collector {
    endpoint: Endpoint,
    service: String,
}

impl Sink for Collector {
    fn send(&self, batch: &[Finished]) -> std::io::Result<()> {
        post(&self.endpoint, &request_body(&self.service, batch).to_string())
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
            local_parent: true,
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
