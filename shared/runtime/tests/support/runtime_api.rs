//! A minimal AWS Lambda Runtime API (the `2018-06-01` interface a bootstrap polls), for
//! tests: it hands queued events to `invocation/next` and records what the function
//! posts to `/response` and `/error` (and `/init/error`). Each function binary is spawned
//! with `AWS_LAMBDA_RUNTIME_API` pointing at it, as Lambda would run it.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the function answered for one invocation.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Response(serde_json::Value),
    Error(serde_json::Value),
}

#[derive(Default)]
struct State {
    pending: VecDeque<(String, String)>,
    answers: Vec<(String, Answer)>,
    init_error: Option<String>,
    next_calls: usize,
}

#[derive(Clone)]
pub struct RuntimeApi {
    state: Arc<Mutex<State>>,
    pub address: String,
}

impl RuntimeApi {
    pub async fn start() -> RuntimeApi {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("addr").to_string();
        let api = RuntimeApi {
            state: Arc::new(Mutex::new(State::default())),
            address,
        };
        let server = api.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let server = server.clone();
                tokio::spawn(async move { server.serve(stream).await });
            }
        });
        api
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue an invocation with `payload` (a JSON text).
    pub fn invoke(&self, request_id: &str, payload: &str) {
        self.lock()
            .pending
            .push_back((request_id.to_string(), payload.to_string()));
    }

    /// Wait for the answer to `request_id`.
    pub async fn answer(&self, request_id: &str, within: Duration) -> Option<Answer> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some((_, a)) = self.lock().answers.iter().find(|(id, _)| id == request_id) {
                return Some(a.clone());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    pub fn init_error(&self) -> Option<String> {
        self.lock().init_error.clone()
    }

    /// How many times the function asked for its next invocation (init is done at 1).
    pub fn next_calls(&self) -> usize {
        self.lock().next_calls
    }

    async fn serve(&self, mut stream: TcpStream) {
        let mut buffer = Vec::new();
        loop {
            let Some((method, path, body)) = read_request(&mut stream, &mut buffer).await else {
                return;
            };
            let reply = if method == "GET" && path.ends_with("/runtime/invocation/next") {
                self.lock().next_calls += 1;
                // long poll, as Lambda does, until an invocation is queued
                let (id, payload) = loop {
                    if let Some(next) = self.lock().pending.pop_front() {
                        break next;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                };
                let deadline = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() + 60_000)
                    .unwrap_or(0);
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nLambda-Runtime-Aws-Request-Id: {id}\r\n\
                     Lambda-Runtime-Deadline-Ms: {deadline}\r\nLambda-Runtime-Invoked-Function-Arn: \
                     arn:aws:lambda:us-east-1:123456789012:function:test\r\nLambda-Runtime-Trace-Id: \
                     Root=1-00000000-000000000000000000000000\r\nContent-Length: {}\r\n\r\n{payload}",
                    payload.len()
                )
            } else if method == "POST" && path.contains("/runtime/invocation/") {
                let parts: Vec<&str> = path.split('/').collect();
                let id = parts
                    .get(parts.len().saturating_sub(2))
                    .copied()
                    .unwrap_or_default()
                    .to_string();
                let value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
                let answer = if path.ends_with("/response") {
                    Answer::Response(value)
                } else {
                    Answer::Error(value)
                };
                self.lock().answers.push((id, answer));
                "HTTP/1.1 202 Accepted\r\nContent-Length: 16\r\n\r\n{\"status\":\"OK\"}\n".to_string()
            } else if method == "POST" && path.ends_with("/runtime/init/error") {
                self.lock().init_error = Some(String::from_utf8_lossy(&body).into_owned());
                "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_string()
            } else {
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_string()
            };
            if stream.write_all(reply.as_bytes()).await.is_err() {
                return;
            }
        }
    }
}

/// One HTTP/1.1 request (method, path, body) off a keep-alive connection.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<(String, String, Vec<u8>)> {
    let header_end = loop {
        if let Some(pos) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while buffer.len() < header_end + length {
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body = buffer[header_end..header_end + length].to_vec();
    buffer.drain(..header_end + length);
    Some((method, path, body))
}
