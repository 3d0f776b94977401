//! [`FaultProxy`]: a loopback HTTP/1.1 proxy in front of moto that injects AWS faults.
//!
//! Every request is forwarded as it is (its signature stays valid: the proxy changes no
//! signed header, only asks the upstream to close the connection), unless a rule matches its
//! operation: the part of `X-Amz-Target` after the dot, e.g. `TransactWriteItems` for
//! DynamoDB (`DynamoDB_20120810.TransactWriteItems`) and `SendMessageBatch` for SQS's JSON
//! protocol (`AmazonSQS.SendMessageBatch`); a request without the header (an AWS query
//! protocol client) is named by the `Action` of its form body. Two kinds of rules:
//!
//! - [`FaultProxy::fail_next`]: the next N requests of an operation get a given fault;
//! - [`FaultProxy::set_rate`]: every request of the given operations fails with a given
//!   probability, with a fault drawn from a list (a seeded generator per operation, so a
//!   run is reproducible as far as its requests are). An armed `fail_next` goes first.
//!
//! Error answers are shaped for the service the request went to: DynamoDB's
//! `com.amazonaws.dynamodb.v20120810#<Code>` or SQS's `com.amazonaws.sqs#<Code>` `__type`.
//! Each answer closes the client connection, so the client opens a fresh one per request
//! (no half-read keep-alive state to get wrong).
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
    /// Any canned JSON error: `{"__type": "<service namespace>#<error_type>", "message": ...}`
    /// with that status (a 5xx is a server fault the SDKs retry, e.g. DynamoDB's
    /// `InternalServerError` or SQS's `InternalError`).
    Error {
        status: u16,
        error_type: String,
        message: String,
    },
    /// Forward the request (moto applies it) and close the connection without answering:
    /// the client sees an ambiguous failure, as after a timeout or a dropped connection.
    DropResponse,
}

impl Fault {
    /// A short name for counts: `Throttling`, `TransactionConflict`, `500 InternalError`,
    /// `DropResponse`, ...
    pub fn label(&self) -> String {
        match self {
            Fault::Throttling => "Throttling".into(),
            Fault::ProvisionedThroughputExceeded => "ProvisionedThroughputExceeded".into(),
            Fault::TransactionConflict => "TransactionConflict".into(),
            Fault::Cancelled(codes) => format!("Cancelled({})", codes.join(",")),
            Fault::Error {
                status, error_type, ..
            } => format!("{status} {error_type}"),
            Fault::DropResponse => "DropResponse".into(),
        }
    }
}

/// A random-rate rule of one operation.
struct Rate {
    /// Probability of a fault per request, in percent.
    percent: f64,
    faults: Vec<Fault>,
    rng: crate::Rng,
}

impl Rate {
    /// Whether this request fails, and with what.
    fn draw(&mut self) -> Option<Fault> {
        if self.faults.is_empty() {
            return None;
        }
        if self.rng.unit() * 100.0 >= self.percent {
            return None;
        }
        Some(self.rng.pick(&self.faults).clone())
    }
}

/// A seed for `operation`'s generator: the run's seed mixed with the name (FNV-1a), so
/// each operation draws its own sequence whatever the others do.
fn operation_seed(seed: u64, operation: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in operation.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h ^ seed.rotate_left(17)).max(1)
}

#[derive(Default)]
struct State {
    /// operation -> faults still to inject, in order.
    rules: BTreeMap<String, Vec<Fault>>,
    /// operation -> its random-rate rule.
    rates: BTreeMap<String, Rate>,
    /// fault label -> faults injected.
    injected_kinds: BTreeMap<String, usize>,
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

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
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

    /// From now on, fail each request of every operation in `operations` with probability
    /// `percent` (0 to 100), answering with a fault drawn uniformly from `faults` (each
    /// operation its own generator, seeded from `seed` and its name). Replaces an earlier
    /// rate of those operations; `percent` 0 or no `faults` removes it. Faults armed with
    /// [`fail_next`](Self::fail_next) still go first.
    pub fn set_rate(&self, operations: &[&str], percent: f64, faults: Vec<Fault>, seed: u64) {
        let mut st = self.lock();
        for op in operations {
            if percent <= 0.0 || faults.is_empty() {
                st.rates.remove(*op);
                continue;
            }
            st.rates.insert(
                op.to_string(),
                Rate {
                    percent: percent.min(100.0),
                    faults: faults.clone(),
                    rng: crate::Rng::new(operation_seed(seed, op)),
                },
            );
        }
    }

    /// Stop every random-rate rule (armed `fail_next` faults and the counters stay).
    pub fn clear_rates(&self) {
        self.lock().rates.clear();
    }

    /// Disarm every rule, `fail_next` and [`set_rate`](Self::set_rate) alike (counters
    /// stay).
    pub fn clear(&self) {
        let mut st = self.lock();
        st.rules.clear();
        st.rates.clear();
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

    /// Requests seen so far, per operation.
    pub fn requests_by_operation(&self) -> BTreeMap<String, usize> {
        self.lock().seen.clone()
    }

    /// Faults injected so far, per operation.
    pub fn injected_by_operation(&self) -> BTreeMap<String, usize> {
        self.lock().injected.clone()
    }

    /// Faults injected so far, per kind ([`Fault::label`]).
    pub fn injected_by_fault(&self) -> BTreeMap<String, usize> {
        self.lock().injected_kinds.clone()
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

impl Request {
    /// The operation: after the dot of `X-Amz-Target` (JSON protocols: DynamoDB, SQS), else
    /// the `Action` of a form-encoded body (the AWS query protocol); empty if neither.
    fn operation(&self) -> String {
        if let Some(target) = self.header("x-amz-target") {
            return target.rsplit('.').next().unwrap_or(target).to_string();
        }
        String::from_utf8_lossy(&self.body)
            .split('&')
            .find_map(|pair| pair.strip_prefix("Action="))
            .unwrap_or_default()
            .to_string()
    }

    /// The `__type` namespace of the service the request is for.
    fn error_namespace(&self) -> &'static str {
        let target = self.header("x-amz-target").unwrap_or_default();
        if target.starts_with("AmazonSQS") {
            "com.amazonaws.sqs"
        } else {
            "com.amazonaws.dynamodb.v20120810"
        }
    }
}

async fn serve(mut conn: TcpStream, target: &str, state: &Mutex<State>) -> std::io::Result<()> {
    let Some(req) = read_request(&mut conn).await? else {
        return Ok(());
    };
    let operation = req.operation();
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
            .and_then(|q| (!q.is_empty()).then(|| q.remove(0)))
            .or_else(|| st.rates.get_mut(&operation).and_then(Rate::draw));
        if let Some(f) = &fault {
            *st.injected.entry(operation.clone()).or_default() += 1;
            *st.injected_kinds.entry(f.label()).or_default() += 1;
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
    let namespace = req.error_namespace();
    let error_type_of = |name: &str| format!("{namespace}#{name}");
    let answer = match fault {
        Some(Fault::Throttling) => canned(
            400,
            "ThrottlingException",
            serde_json::json!({"__type": error_type_of("ThrottlingException"),
                               "message": "Rate of requests exceeds the allowed throughput. (injected)"}),
        ),
        Some(Fault::ProvisionedThroughputExceeded) => canned(
            400,
            "ProvisionedThroughputExceededException",
            serde_json::json!({"__type": error_type_of("ProvisionedThroughputExceededException"),
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
                    "__type": error_type_of("TransactionCanceledException"),
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
            serde_json::json!({"__type": error_type_of(&error_type), "message": message}),
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
    crate::http::exchange(&req.bytes_for_upstream(), target).await
}
