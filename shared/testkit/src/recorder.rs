//! [`Recorder`]: a loopback HTTP proxy that records every AWS JSON-protocol request (its
//! `X-Amz-Target`, e.g. `DynamoDB_20120810.TransactWriteItems` or
//! `AmazonSQS.SendMessageBatch`, and its body) and forwards it unchanged to an upstream
//! (moto, or a [`FaultProxy`](crate::FaultProxy) in front of it).
//!
//! A function under test gets the recorder's endpoint as `STM_ENDPOINT_URL`; its SDK
//! clients, its retries and its init all run as in production. Every request is recorded
//! before it is forwarded, so a request the upstream fails (an injected fault) still counts:
//! on AWS it would have been authorized first.

use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::http::{forward, Conn};

pub use crate::iam::Recorded;

/// See the module docs. Stops when dropped.
#[derive(Debug)]
pub struct Recorder {
    endpoint: String,
    records: Arc<Mutex<Vec<Recorded>>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Recorder {
    /// Start recording in front of `upstream` (`http://host:port`), on its own thread and
    /// runtime (so it serves whatever runtime flavour the test uses).
    ///
    /// # Panics
    /// When `upstream` is not `http://host:port` or no loopback port is free.
    pub fn start(upstream: &str) -> Recorder {
        let target = upstream
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("Recorder: upstream must be http://host:port, got {upstream}"))
            .trim_end_matches('/')
            .to_string();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("Recorder: bind loopback");
        listener.set_nonblocking(true).expect("Recorder: nonblocking");
        let port = listener.local_addr().expect("Recorder: local addr").port();
        let records: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread_records = records.clone();
        let thread = std::thread::Builder::new()
            .name("aws-recorder".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("Recorder: runtime");
                rt.block_on(async move {
                    let listener = TcpListener::from_std(listener).expect("Recorder: listener");
                    let accept = async {
                        loop {
                            let Ok((stream, _)) = listener.accept().await else {
                                continue;
                            };
                            let records = thread_records.clone();
                            let target = target.clone();
                            tokio::spawn(async move {
                                let mut conn = Conn::new(stream);
                                let Ok(Some(request)) = conn.read_request().await else {
                                    return;
                                };
                                let recorded = Recorded {
                                    at: std::time::Instant::now(),
                                    target: request.header("x-amz-target").unwrap_or_default().to_string(),
                                    body: serde_json::from_slice(&request.body)
                                        .unwrap_or(serde_json::Value::Null),
                                };
                                records.lock().unwrap_or_else(|e| e.into_inner()).push(recorded);
                                if let Ok(response) = forward(&request, &target).await {
                                    let _ = conn.stream().write_all(&response).await;
                                }
                                let _ = conn.stream().shutdown().await;
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
            .expect("Recorder: thread");
        Recorder {
            endpoint: format!("http://127.0.0.1:{port}"),
            records,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Everything recorded so far, in arrival order.
    pub fn records(&self) -> Vec<Recorded> {
        self.records.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Forget what was recorded.
    pub fn clear(&self) {
        self.records.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Everything recorded so far, forgetting it.
    pub fn take(&self) -> Vec<Recorded> {
        std::mem::take(&mut *self.records.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
