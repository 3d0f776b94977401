//! [`FaultProxy`]: a loopback HTTP/1.1 proxy in front of moto that injects AWS faults.
//!
//! Every request is forwarded as it is (its signature stays valid: the proxy changes no
//! signed header, only asks the upstream to close the connection), unless a rule armed with
//! [`FaultProxy::fail_next`] matches its operation (the part of `X-Amz-Target` after the
//! dot, e.g. `TransactWriteItems`). Each answer closes the client connection, so the client
//! opens a fresh one per request (no half-read keep-alive state to get wrong).
//!
//! It runs on its own thread and runtime, so it works under any test runtime flavour, and
//! stops when dropped.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What to answer instead of moto.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// 400 `ThrottlingException`.
    Throttling,
    /// 400 `ProvisionedThroughputExceededException`.
    ProvisionedThroughputExceeded,
    /// 400 `TransactionCanceledException` whose last cancellation reason is
    /// `TransactionConflict` (the others `None`), sized to the request's `TransactItems`.
    TransactionConflict,
    /// 400 `TransactionCanceledException` with these reason codes for the first items
    /// (`"ConditionalCheckFailed"`, `"ValidationError"`, ...), `None` for the rest. No
    /// reason carries an `Item`.
    Cancelled(Vec<String>),
    /// Any canned JSON error: `{"__type": "...#<error_type>", "message": ...}`.
    Error {
        status: u16,
        error_type: String,
        message: String,
    },
    /// Forward the request (moto applies it) and close the connection without answering:
    /// the client sees an ambiguous failure, as after a timeout or a dropped connection.
    DropResponse,
}

#[derive(Default)]
struct State {
    /// operation -> faults still to inject, in order.
    rules: BTreeMap<String, Vec<Fault>>,
    /// operation -> requests seen.
    seen: BTreeMap<String, usize>,
    /// operation -> faults injected.
    injected: BTreeMap<String, usize>,
    /// operation -> the JSON bodies of its requests, in order (the last 1000).
    bodies: BTreeMap<String, Vec<serde_json::Value>>,
}

/// A fault-injecting proxy; see the module docs.
pub struct FaultProxy {
    endpoint: String,
    state: Arc<Mutex<State>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FaultProxy {
    /// Start a proxy forwarding to `upstream` (`http://host:port`).
    ///
    /// # Panics
    /// When the upstream is not an `http://host:port` URL or no loopback port is free.
    pub fn start(upstream: &str) -> FaultProxy {
        let target = upstream
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("FaultProxy: upstream must be http://host:port, got {upstream}"))
            .trim_end_matches('/')
            .to_string();
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("FaultProxy: bind loopback");
        std_listener
            .set_nonblocking(true)
            .expect("FaultProxy: nonblocking");
        let port = std_listener.local_addr().expect("FaultProxy: local addr").port();
        let state = Arc::new(Mutex::new(State::default()));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread_state = state.clone();
        let thread = std::thread::Builder::new()
            .name("fault-proxy".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("FaultProxy: runtime");
                rt.block_on(async move {
                    let listener = TcpListener::from_std(std_listener).expect("FaultProxy: listener");
                    let accept = async {
                        loop {
                            let Ok((conn, _)) = listener.accept().await else {
                                continue;
                            };
                            let st = thread_state.clone();
                            let target = target.clone();
                            tokio::spawn(async move {
                                let _ = serve(conn, &target, &st).await;
                            });
                        }
                    };
                    tokio::select! {
                        _ = accept => {}
                        _ = rx => {}
                    }
                });
                rt.shutdown_background();
            })
            .expect("FaultProxy: thread");
        FaultProxy {
            endpoint: format!("http://127.0.0.1:{port}"),
            state,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`: point the client here instead of at moto.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answer the next `n` requests of `operation` with `fault` (after any faults already
    /// armed for it).
    pub fn fail_next(&self, operation: &str, n: usize, fault: Fault) {
        let mut st = self.lock();
        let queue = st.rules.entry(operation.to_string()).or_default();
        queue.extend(std::iter::repeat_n(fault, n));
    }

    /// Disarm every rule (counters stay).
    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    /// How many requests of `operation` reached the proxy.
    pub fn requests(&self, operation: &str) -> usize {
        self.lock().seen.get(operation).copied().unwrap_or(0)
    }

    /// How many faults were injected for `operation`.
    pub fn injected(&self, operation: &str) -> usize {
        self.lock().injected.get(operation).copied().unwrap_or(0)
    }

    /// The JSON bodies of the requests of `operation` seen so far (the last 1000), e.g. to
    /// read the `ClientRequestToken` of each attempt.
    pub fn bodies(&self, operation: &str) -> Vec<serde_json::Value> {
        self.lock().bodies.get(operation).cloned().unwrap_or_default()
    }

    /// Faults still armed for `operation`.
    pub fn armed(&self, operation: &str) -> usize {
        self.lock().rules.get(operation).map_or(0, Vec::len)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Request {
    head: Vec<String>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.iter().skip(1).find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// The head with `Connection: close` instead of any Connection header.
    fn bytes_for_upstream(&self) -> Vec<u8> {
        let mut out = String::new();
        for (i, line) in self.head.iter().enumerate() {
            if i > 0
                && line
                    .split_once(':')
                    .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case("connection"))
            {
                continue;
            }
            out.push_str(line);
            out.push_str("\r\n");
        }
        out.push_str("Connection: close\r\n\r\n");
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }
}

async fn read_request(conn: &mut TcpStream) -> std::io::Result<Option<Request>> {
    let mut buf = Vec::with_capacity(8192);
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head_text = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let head: Vec<String> = head_text.split("\r\n").map(str::to_string).collect();
    let mut req = Request {
        head,
        body: buf[head_end + 4..].to_vec(),
    };
    let len: usize = req
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while req.body.len() < len {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        req.body.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(req))
}

async fn serve(mut conn: TcpStream, target: &str, state: &Mutex<State>) -> std::io::Result<()> {
    let Some(req) = read_request(&mut conn).await? else {
        return Ok(());
    };
    let operation = req
        .header("x-amz-target")
        .map(|t| t.rsplit('.').next().unwrap_or(t).to_string())
        .unwrap_or_default();
    let fault = {
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        *st.seen.entry(operation.clone()).or_default() += 1;
        let body = serde_json::from_slice(&req.body).unwrap_or(serde_json::Value::Null);
        let bodies = st.bodies.entry(operation.clone()).or_default();
        if bodies.len() >= 1000 {
            bodies.remove(0);
        }
        bodies.push(body);
        let fault = st
            .rules
            .get_mut(&operation)
            .and_then(|q| (!q.is_empty()).then(|| q.remove(0)));
        if fault.is_some() {
            *st.injected.entry(operation.clone()).or_default() += 1;
        }
        fault
    };
    let canned = |status: u16, error_type: &str, body: serde_json::Value| -> Vec<u8> {
        let text = body.to_string();
        let reason = if status == 400 { "Bad Request" } else { "Error" };
        format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/x-amz-json-1.0\r\n\
             x-amzn-ErrorType: {error_type}\r\nx-amzn-RequestId: stm-fault-proxy\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        )
        .into_bytes()
    };
    let dynamo = |name: &str| format!("com.amazonaws.dynamodb.v20120810#{name}");
    let answer = match fault {
        Some(Fault::Throttling) => canned(
            400,
            "ThrottlingException",
            serde_json::json!({"__type": dynamo("ThrottlingException"),
                               "message": "Rate of requests exceeds the allowed throughput. (injected)"}),
        ),
        Some(Fault::ProvisionedThroughputExceeded) => canned(
            400,
            "ProvisionedThroughputExceededException",
            serde_json::json!({"__type": dynamo("ProvisionedThroughputExceededException"),
                               "message": "The level of configured provisioned throughput for the table was exceeded. (injected)"}),
        ),
        Some(fault @ (Fault::TransactionConflict | Fault::Cancelled(_))) => {
            let items = serde_json::from_slice::<serde_json::Value>(&req.body)
                .ok()
                .and_then(|v| v.get("TransactItems").and_then(|t| t.as_array()).map(Vec::len))
                .unwrap_or(1)
                .max(1);
            let mut codes: Vec<String> = vec!["None".to_string(); items];
            match fault {
                Fault::Cancelled(given) => {
                    for (slot, code) in codes.iter_mut().zip(given) {
                        *slot = code;
                    }
                }
                _ => codes[items - 1] = "TransactionConflict".to_string(),
            }
            let reasons: Vec<serde_json::Value> = codes
                .iter()
                .map(|c| {
                    if c == "None" {
                        serde_json::json!({"Code": "None"})
                    } else {
                        serde_json::json!({"Code": c, "Message": format!("{c} (injected)")})
                    }
                })
                .collect();
            canned(
                400,
                "TransactionCanceledException",
                serde_json::json!({
                    "__type": dynamo("TransactionCanceledException"),
                    "Message": format!("Transaction cancelled, please refer cancellation reasons for specific reasons [{}]", codes.join(", ")),
                    "CancellationReasons": reasons,
                }),
            )
        }
        Some(Fault::Error {
            status,
            error_type,
            message,
        }) => canned(
            status,
            &error_type,
            serde_json::json!({"__type": dynamo(&error_type), "message": message}),
        ),
        Some(Fault::DropResponse) => {
            let _ = forward(&req, target).await?;
            return conn.shutdown().await;
        }
        None => forward(&req, target).await?,
    };
    conn.write_all(&answer).await?;
    conn.shutdown().await
}

/// Send `req` upstream and return the whole response, its `Connection` header forced to
/// `close` (the client connection ends after it).
async fn forward(req: &Request, target: &str) -> std::io::Result<Vec<u8>> {
    let mut up = TcpStream::connect(target).await?;
    up.write_all(&req.bytes_for_upstream()).await?;
    let mut resp = Vec::new();
    up.read_to_end(&mut resp).await?;
    let Some(head_end) = resp.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(resp);
    };
    let head = String::from_utf8_lossy(&resp[..head_end]).into_owned();
    let mut out = String::new();
    for (i, line) in head.split("\r\n").enumerate() {
        if i > 0
            && line
                .split_once(':')
                .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case("connection"))
        {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&resp[head_end + 4..]);
    Ok(bytes)
}
