//! An OpenTelemetry collector for the tests: an OTLP/HTTP listener on loopback that keeps
//! every span posted to its `/v1/traces` as JSON, and answers 200. It runs on a thread of
//! its own (with its own runtime), so a test of the functions in-process and a test of a
//! `stm local` in another process use it alike.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::http::Conn;

/// The listener and what it received.
#[derive(Debug)]
pub struct Collector {
    /// Its base URL, `http://127.0.0.1:PORT` (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub url: String,
    spans: Arc<Mutex<BTreeMap<String, Value>>>,
    refused: Arc<Mutex<Vec<String>>>,
}

impl Collector {
    /// Listen on a free loopback port.
    pub fn start() -> Collector {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        listener.set_nonblocking(true).expect("non-blocking");
        let spans = Arc::new(Mutex::new(BTreeMap::new()));
        let refused = Arc::new(Mutex::new(Vec::new()));
        let (kept, wrong) = (spans.clone(), refused.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let (kept, wrong) = (kept.clone(), wrong.clone());
                    tokio::spawn(async move {
                        let mut conn = Conn::new(stream);
                        while let Ok(Some(request)) = conn.read_request().await {
                            let problem = if request.method != "POST" || request.path != "/v1/traces" {
                                Some(format!("{} {}", request.method, request.path))
                            } else if request.header("content-type") != Some("application/json") {
                                Some(format!("content-type {:?}", request.header("content-type")))
                            } else {
                                match serde_json::from_slice::<Value>(&request.body) {
                                    Ok(body) => {
                                        keep(&kept, &body);
                                        None
                                    }
                                    Err(err) => Some(format!("a body that is not JSON: {err}")),
                                }
                            };
                            let status = if let Some(problem) = problem {
                                wrong.lock().expect("refused").push(problem);
                                400
                            } else {
                                200
                            };
                            if conn.respond(status, &[], b"", true).await.is_err() {
                                break;
                            }
                        }
                    });
                }
            });
        });
        Collector { url, spans, refused }
    }

    /// Every span received so far, by span id.
    pub fn spans(&self) -> BTreeMap<String, Value> {
        self.spans.lock().expect("spans").clone()
    }

    /// The requests it refused (not an OTLP/JSON post to `/v1/traces`), as what was wrong.
    pub fn refused(&self) -> Vec<String> {
        self.refused.lock().expect("refused").clone()
    }

    /// The spans once `done` says they are all there, or at `timeout` whatever came.
    pub fn spans_when(
        &self,
        timeout: Duration,
        done: impl Fn(&BTreeMap<String, Value>) -> bool,
    ) -> BTreeMap<String, Value> {
        crate::otlp::polled(timeout, || self.spans(), done)
    }
}

/// `read()` once `done` says it is all there, or at `timeout` whatever it reads then
/// (what a listener on a thread of its own has received).
pub(crate) fn polled<T>(timeout: Duration, read: impl Fn() -> T, done: impl Fn(&T) -> bool) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        let got = read();
        if done(&got) || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Keep each span of an `ExportTraceServiceRequest`.
fn keep(kept: &Mutex<BTreeMap<String, Value>>, body: &Value) {
    let mut kept = kept.lock().expect("spans");
    for resource in body["resourceSpans"].as_array().into_iter().flatten() {
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            for span in scope["spans"].as_array().into_iter().flatten() {
                if let Some(id) = span["spanId"].as_str() {
                    kept.insert(id.to_string(), span.clone());
                }
            }
        }
    }
}

/// A span's string attribute.
pub fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a str> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .and_then(|a| a["value"]["stringValue"].as_str())
}
