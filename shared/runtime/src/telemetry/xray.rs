//! Spans sent to AWS X-Ray as segment documents, through the X-Ray daemon Lambda runs
//! beside a function whose tracing is Active (UDP, one document a datagram, each after
//! the daemon's header line `{"format": "json", "version": 1}`).
//!
//! Each execution's trace is X-Ray's trace: our trace ids start with their start time in
//! Unix seconds, as X-Ray's do, so `1-{8 hex}-{24 hex}` is the same id. A span whose
//! parent is in another process (a record's `record`, the relay's `relay`, the sweeper's
//! `fire`, the client's `send`) is a *segment* named after the function, with its parent
//! (the span that sent the message, wrote the row or armed the timer) as `parent_id`; a
//! span inside one (`load`, `step`, `commit`, `publish`, `burst`) is an independent
//! *subsegment* of it. The spans' fields are the segment's annotations, which X-Ray's
//! filter expressions search (`annotation.execution_id = "…"`).
//!
//! X-Ray charges per trace recorded, so only a share of traces is sent
//! (`STM_XRAY_SAMPLE_RATIO`, the template's `XRaySampleRatio`), picked from the trace id
//! alone: every function keeps or drops the same traces, whole.

use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};

use serde_json::{json, Map, Value};

use super::export::{self, ExportHandle, Finished, Keep, Sink, SpanLayer};
use super::TraceContext;

/// The daemon's header line, before each document.
const HEADER: &str = "{\"format\": \"json\", \"version\": 1}\n";

/// A segment document's size, at most (X-Ray's limit, and a UDP datagram's).
const MAX_DOCUMENT_BYTES: usize = 64 * 1024;

/// Annotations on one segment, at most (X-Ray indexes 50).
const MAX_ANNOTATIONS: usize = 50;

/// Why X-Ray's settings cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum XRayError {
    /// `STM_XRAY_SAMPLE_RATIO` is not a number from 0 to 1.
    #[error(
        "{} is {:?}: give the share of traces sent to X-Ray, a number from 0 (none) to 1 (all), \
         such as 0.05",
        stm_env::XRAY_SAMPLE_RATIO,
        .0
    )]
    Ratio(String),
    /// `AWS_XRAY_DAEMON_ADDRESS` names no UDP address.
    #[error(
        "{} is {:?}, which names no UDP address: give host:port (Lambda sets it when the \
         function's tracing is Active), or set {} to 0",
        stm_env::XRAY_DAEMON_ADDRESS,
        .0,
        stm_env::XRAY_SAMPLE_RATIO
    )]
    Daemon(String),
}

/// Where and how much to send: the daemon's address and the share of traces.
#[derive(Debug, Clone, PartialEq)]
pub struct Daemon {
    pub address: SocketAddr,
    pub ratio: f64,
}

impl Daemon {
    /// The settings the environment names, through `lookup`: `None` when no trace is to be
    /// sent (`STM_XRAY_SAMPLE_RATIO` unset or 0, or no daemon: the function's tracing is
    /// not Active).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, XRayError> {
        let Some(text) = lookup(stm_env::XRAY_SAMPLE_RATIO).filter(|v| !v.trim().is_empty()) else {
            return Ok(None);
        };
        let ratio = text
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|r| (0.0..=1.0).contains(r))
            .ok_or_else(|| XRayError::Ratio(text.clone()))?;
        if ratio == 0.0 {
            return Ok(None);
        }
        let Some(address) = lookup(stm_env::XRAY_DAEMON_ADDRESS).filter(|v| !v.trim().is_empty()) else {
            return Ok(None);
        };
        Ok(Some(Daemon {
            address: udp_address(&address)?,
            ratio,
        }))
    }
}

/// The UDP address in `AWS_XRAY_DAEMON_ADDRESS`: `host:port`, or the SDKs' two-address form
/// `tcp:host:port udp:host:port` (either order).
fn udp_address(text: &str) -> Result<SocketAddr, XRayError> {
    let wrong = || XRayError::Daemon(text.to_string());
    let parts: Vec<&str> = text.split_whitespace().collect();
    let udp = match parts.as_slice() {
        [one] if !one.starts_with("tcp:") => one.strip_prefix("udp:").unwrap_or(one),
        [a, b] => [a, b]
            .into_iter()
            .find_map(|p| p.strip_prefix("udp:"))
            .ok_or_else(wrong)?,
        _ => return Err(wrong()),
    };
    udp.to_socket_addrs()
        .ok()
        .and_then(|mut all| all.next())
        .ok_or_else(wrong)
}

/// A layer sending `daemon.ratio` of the traces to the X-Ray daemon as segments named
/// `service` (the function's name), and its handle.
pub fn layer(daemon: &Daemon, service: &str) -> std::io::Result<(SpanLayer, ExportHandle)> {
    let bind: SocketAddr = if daemon.address.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(bind)?;
    let sink = XRayDaemon {
        socket,
        address: daemon.address,
        service: service.to_string(),
    };
    Ok(export::start(
        Box::new(sink),
        Keep::Share(daemon.ratio),
        "xray-exporter",
    ))
}

struct XRayDaemon {
    socket: UdpSocket,
    address: SocketAddr,
    service: String,
}

impl Sink for XRayDaemon {
    fn send(&self, batch: &[Finished]) -> std::io::Result<()> {
        let mut result = Ok(());
        for span in batch {
            let datagram = format!("{HEADER}{}", document(&self.service, span));
            if datagram.len() > MAX_DOCUMENT_BYTES {
                result = Err(std::io::Error::other("a segment document over 64 KB"));
                continue;
            }
            if let Err(err) = self.socket.send_to(datagram.as_bytes(), self.address) {
                result = Err(err);
            }
        }
        result
    }
}

/// A span's segment document: a segment when its parent is in another process, an
/// independent subsegment when it is in this one.
fn document(service: &str, span: &Finished) -> Value {
    // whole seconds and the fraction apart: nanoseconds since 1970 are past f64's 53 bits
    let seconds = |nanos: u128| (nanos / 1_000_000_000) as f64 + (nanos % 1_000_000_000) as f64 / 1e9;
    let mut doc = json!({
        "id": format!("{:016x}", span.span_id),
        "trace_id": TraceContext { trace_id: span.trace_id, span_id: span.span_id, sampled: true }.xray_trace_id(),
        "start_time": seconds(span.start_nanos),
        "end_time": seconds(span.end_nanos),
    });
    if let Some(parent) = span.parent {
        doc["parent_id"] = json!(format!("{parent:016x}"));
    }
    let mut annotations = Map::new();
    if span.local_parent {
        doc["type"] = json!("subsegment");
        doc["name"] = json!(span.name);
    } else {
        doc["name"] = json!(service);
        annotations.insert("span".into(), json!(span.name));
    }
    for (key, value) in &span.attributes {
        if annotations.len() >= MAX_ANNOTATIONS {
            break;
        }
        // X-Ray's filters take keys of letters, digits and underscores
        let key: String = key
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        annotations.insert(key, json!(value));
    }
    if !annotations.is_empty() {
        doc["annotations"] = Value::Object(annotations);
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_daemon_is_sent_to_only_with_a_share_and_an_address() {
        let daemon = (stm_env::XRAY_DAEMON_ADDRESS, "127.0.0.1:2000");
        assert_eq!(Daemon::from_lookup(env(&[daemon])), Ok(None));
        assert_eq!(
            Daemon::from_lookup(env(&[(stm_env::XRAY_SAMPLE_RATIO, "0")])),
            Ok(None)
        );
        assert_eq!(
            Daemon::from_lookup(env(&[(stm_env::XRAY_SAMPLE_RATIO, "0.05")])),
            Ok(None)
        );
        assert_eq!(
            Daemon::from_lookup(env(&[(stm_env::XRAY_SAMPLE_RATIO, "0.05"), daemon])),
            Ok(Some(Daemon {
                address: "127.0.0.1:2000".parse().expect("an address"),
                ratio: 0.05
            }))
        );
        for wrong in ["1.5", "-0.1", "half", "NaN"] {
            let lookup = move |name: &str| (name == stm_env::XRAY_SAMPLE_RATIO).then(|| wrong.to_string());
            assert_eq!(Daemon::from_lookup(lookup), Err(XRayError::Ratio(wrong.into())));
        }
    }

    #[test]
    fn the_errors_name_the_variable_and_the_value() {
        assert_eq!(
            XRayError::Ratio("half".into()).to_string(),
            format!(
                "{} is \"half\": give the share of traces sent to X-Ray, a number from 0 (none) to 1 \
                 (all), such as 0.05",
                stm_env::XRAY_SAMPLE_RATIO
            )
        );
        let daemon = XRayError::Daemon("x".into()).to_string();
        assert!(
            daemon.starts_with(&format!("{} is \"x\"", stm_env::XRAY_DAEMON_ADDRESS)),
            "{daemon}"
        );
    }

    #[test]
    fn the_daemon_address_is_host_port_or_the_udp_of_two() {
        let at = |text: &str| udp_address(text).map(|a| a.to_string());
        assert_eq!(at("169.254.79.129:2000"), Ok("169.254.79.129:2000".into()));
        assert_eq!(
            at("tcp:127.0.0.1:2000 udp:127.0.0.2:2001"),
            Ok("127.0.0.2:2001".into())
        );
        assert_eq!(
            at("udp:127.0.0.2:2001 tcp:127.0.0.1:2000"),
            Ok("127.0.0.2:2001".into())
        );
        for wrong in ["", "localhost", "tcp:127.0.0.1:2000", "a b c"] {
            assert_eq!(udp_address(wrong), Err(XRayError::Daemon(wrong.into())));
        }
    }

    fn span(name: &'static str, local_parent: bool) -> Finished {
        Finished {
            name,
            trace_id: 0x5f2b_7a00_a006_6491_27e3_7190_3a2d_e979,
            span_id: 0x70de_5b6f_19ff_9a0a,
            parent: Some(0x53995c3f42cd8ad8),
            local_parent,
            start_nanos: 1_478_293_361_271_000_000,
            end_nanos: 1_478_293_361_449_000_000,
            attributes: vec![("execution_id", "e-1".into()), ("group.id", "g".into())],
        }
    }

    #[test]
    fn a_remote_child_is_a_segment_and_a_local_one_a_subsegment() {
        let record = document("stm-worker", &span("record", false));
        assert_eq!(record["name"], "stm-worker");
        assert_eq!(record["trace_id"], "1-5f2b7a00-a006649127e371903a2de979");
        assert_eq!(record["id"], "70de5b6f19ff9a0a");
        assert_eq!(record["parent_id"], "53995c3f42cd8ad8");
        assert_eq!(record["start_time"], 1.478293361271e9);
        assert_eq!(record["end_time"], 1.478293361449e9);
        assert!(record.get("type").is_none());
        assert_eq!(record["annotations"]["span"], "record");
        assert_eq!(record["annotations"]["execution_id"], "e-1");
        assert_eq!(record["annotations"]["group_id"], "g");
        let step = document("stm-worker", &span("step", true));
        assert_eq!(step["type"], "subsegment");
        assert_eq!(step["name"], "step");
        assert_eq!(step["parent_id"], "53995c3f42cd8ad8");
        assert!(step["annotations"].get("span").is_none());
    }

    #[test]
    fn each_span_is_one_datagram_after_the_daemon_header() {
        let receiver = UdpSocket::bind("127.0.0.1:0").expect("a loopback port");
        receiver
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .expect("a timeout");
        let sink = XRayDaemon {
            socket: UdpSocket::bind("127.0.0.1:0").expect("a loopback port"),
            address: receiver.local_addr().expect("its address"),
            service: "stm-relay".into(),
        };
        sink.send(&[span("relay", false), span("publish", true)])
            .expect("sent");
        let mut names = Vec::new();
        for _ in 0..2 {
            let mut buf = vec![0u8; MAX_DOCUMENT_BYTES];
            let n = receiver.recv(&mut buf).expect("a datagram");
            let text = std::str::from_utf8(&buf[..n]).expect("UTF-8");
            let body = text.strip_prefix(HEADER).expect("the header line first");
            let doc: Value = serde_json::from_str(body).expect("JSON");
            names.push(doc["name"].as_str().expect("a name").to_string());
        }
        assert_eq!(names, ["stm-relay", "publish"]);
        let mut huge = span("record", false);
        huge.attributes = vec![("data", "x".repeat(MAX_DOCUMENT_BYTES))];
        assert!(
            sink.send(&[huge]).is_err(),
            "an oversized document is refused, not cut"
        );
    }
}
