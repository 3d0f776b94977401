//! A minimal Lambda Runtime API (`2018-06-01`): enough for `lambda_runtime` to start, poll
//! for an invocation, and post its response or error. It notes when the first poll
//! arrives: that is the end of the function's init.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::http::Conn;

/// How an invocation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The handler's response body.
    Response(String),
    /// The error the runtime posted.
    Error(String),
}

impl Outcome {
    /// The response's JSON (`None` for an error, or a body that is not JSON).
    pub fn response_json(&self) -> Option<serde_json::Value> {
        match self {
            Outcome::Response(body) => serde_json::from_str(body).ok(),
            Outcome::Error(_) => None,
        }
    }
}

#[derive(Default)]
struct State {
    pending: Mutex<VecDeque<(String, String)>>,
    arrived: Notify,
    first_poll: Mutex<Option<Instant>>,
    outcomes: Mutex<HashMap<String, Outcome>>,
    finished: Notify,
    init_error: Mutex<Option<String>>,
    next_id: Mutex<u64>,
    next_calls: Mutex<usize>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// See the module docs. Serves on the caller's tokio runtime until dropped.
pub struct RuntimeApi {
    address: String,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for RuntimeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeApi")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl RuntimeApi {
    /// Listen on a free loopback port.
    pub async fn start() -> std::io::Result<RuntimeApi> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        let state: Arc<State> = Arc::default();
        let serving = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = serving.clone();
                tokio::spawn(async move {
                    let mut conn = Conn::new(stream);
                    while let Ok(Some(request)) = conn.read_request().await {
                        if serve(&state, &mut conn, &request).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Ok(RuntimeApi { address, state, task })
    }

    /// `host:port`, for `AWS_LAMBDA_RUNTIME_API`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Queue an invocation with `payload`; its request id.
    pub fn invoke(&self, payload: &str) -> String {
        let id = {
            let mut next = lock(&self.state.next_id);
            *next += 1;
            format!("00000000-0000-4000-8000-{:012}", *next)
        };
        lock(&self.state.pending).push_back((id.clone(), payload.to_string()));
        self.state.arrived.notify_waiters();
        self.state.arrived.notify_one();
        id
    }

    /// When the first `next` poll arrived (waiting up to `timeout`).
    pub async fn first_poll(&self, timeout: Duration) -> Option<Instant> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(at) = *lock(&self.state.first_poll) {
                return Some(at);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The outcome of invocation `id` (waiting up to `timeout`).
    pub async fn outcome(&self, id: &str, timeout: Duration) -> Option<Outcome> {
        let deadline = Instant::now() + timeout;
        loop {
            let notified = self.state.finished.notified();
            if let Some(outcome) = lock(&self.state.outcomes).get(id).cloned() {
                return Some(outcome);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let _ = tokio::time::timeout(left.min(Duration::from_millis(50)), notified).await;
        }
    }

    /// The init error the function posted, if any.
    pub fn init_error(&self) -> Option<String> {
        lock(&self.state.init_error).clone()
    }

    /// How many `invocation/next` polls arrived (0: the function never finished its init).
    pub fn next_calls(&self) -> usize {
        *lock(&self.state.next_calls)
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    state: &State,
    conn: &mut Conn<tokio::net::TcpStream>,
    request: &crate::http::Request,
) -> std::io::Result<()> {
    const PREFIX: &str = "/2018-06-01/runtime/";
    let path = request.path.strip_prefix(PREFIX).unwrap_or(&request.path);
    let body = String::from_utf8_lossy(&request.body).into_owned();
    match (request.method.as_str(), path) {
        ("GET", "invocation/next") => {
            *lock(&state.next_calls) += 1;
            {
                let mut first = lock(&state.first_poll);
                if first.is_none() {
                    *first = Some(Instant::now());
                }
            }
            let (id, payload) = loop {
                let notified = state.arrived.notified();
                if let Some(next) = lock(&state.pending).pop_front() {
                    break next;
                }
                notified.await;
            };
            let deadline = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis())
                + 30_000;
            conn.respond(
                200,
                &[
                    ("Content-Type", "application/json".into()),
                    ("Lambda-Runtime-Aws-Request-Id", id),
                    ("Lambda-Runtime-Deadline-Ms", deadline.to_string()),
                    (
                        "Lambda-Runtime-Invoked-Function-Arn",
                        "arn:aws:lambda:us-east-1:123456789012:function:smoke".into(),
                    ),
                    (
                        "Lambda-Runtime-Trace-Id",
                        "Root=1-00000000-000000000000000000000000;Sampled=0".into(),
                    ),
                ],
                payload.as_bytes(),
                false,
            )
            .await
        }
        ("POST", "init/error") => {
            *lock(&state.init_error) = Some(body);
            conn.respond(202, &[], b"{}", false).await
        }
        ("POST", rest) if rest.starts_with("invocation/") => {
            let mut parts = rest.trim_start_matches("invocation/").splitn(2, '/');
            let id = parts.next().unwrap_or_default().to_string();
            let outcome = match parts.next() {
                Some("response") => Outcome::Response(body),
                _ => Outcome::Error(body),
            };
            lock(&state.outcomes).insert(id, outcome);
            state.finished.notify_waiters();
            conn.respond(202, &[], b"{}", false).await
        }
        _ => conn.respond(404, &[], b"{}", false).await,
    }
}
