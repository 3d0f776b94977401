//! An X-Ray daemon for the tests: a UDP listener on loopback that keeps every segment
//! document sent to it (`AWS_XRAY_DAEMON_ADDRESS`), by id, and what it could not read
//! (a datagram without the daemon's header line, or a document that is not JSON).

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

/// The daemon's header line, before each document.
const HEADER: &str = "{\"format\": \"json\", \"version\": 1}\n";

/// The listener and what it received.
#[derive(Debug)]
pub struct Daemon {
    /// Its `host:port`.
    pub address: String,
    documents: Arc<Mutex<BTreeMap<String, Value>>>,
    refused: Arc<Mutex<Vec<String>>>,
}

impl Daemon {
    /// Listen on a free loopback port.
    pub fn start() -> Daemon {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a loopback port");
        let address = socket.local_addr().expect("its address").to_string();
        let documents = Arc::new(Mutex::new(BTreeMap::new()));
        let refused = Arc::new(Mutex::new(Vec::new()));
        let (kept, wrong) = (documents.clone(), refused.clone());
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while let Ok(n) = socket.recv(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                let parsed = text
                    .strip_prefix(HEADER)
                    .ok_or_else(|| format!("no header line: {text:.80}"))
                    .and_then(|body| {
                        serde_json::from_str::<Value>(body).map_err(|e| format!("not JSON: {e}"))
                    });
                match parsed {
                    Ok(doc) => {
                        let id = doc["id"].as_str().unwrap_or_default().to_string();
                        kept.lock().expect("documents").insert(id, doc);
                    }
                    Err(problem) => wrong.lock().expect("refused").push(problem),
                }
            }
        });
        Daemon {
            address,
            documents,
            refused,
        }
    }

    /// Every document received so far, by id.
    pub fn documents(&self) -> BTreeMap<String, Value> {
        self.documents.lock().expect("documents").clone()
    }

    /// The datagrams it could not read, as what was wrong.
    pub fn refused(&self) -> Vec<String> {
        self.refused.lock().expect("refused").clone()
    }

    /// The documents once `done` says they are all there, or at `timeout` whatever came.
    pub fn documents_when(
        &self,
        timeout: Duration,
        done: impl Fn(&BTreeMap<String, Value>) -> bool,
    ) -> BTreeMap<String, Value> {
        crate::otlp::polled(timeout, || self.documents(), done)
    }
}
