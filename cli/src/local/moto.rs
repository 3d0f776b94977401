//! The moto server `stm local` starts when no `--endpoint` names a running emulator: a
//! free port first, then moto listening on it, gone with `stm local` however it ends.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::queue_lock::QueueLock;

/// The Python with moto: `$STM_PYTHON`, else `.venv/bin/python` here, else `python3`.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os(stm_env::PYTHON).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from(".venv/bin/python");
    if venv.exists() {
        return venv;
    }
    PathBuf::from("python3")
}

/// Whether something accepts TCP connections at `addr` (within a second per address).
pub(super) fn answers(addr: &str) -> bool {
    addr.to_socket_addrs()
        .is_ok_and(|mut addrs| addrs.any(|a| TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok()))
}

/// Fail at once if moto could not listen on `port`, saying what to do.
pub(super) fn port_free(port: u16, endpoint: &str, queue_name: &str) -> Result<()> {
    let taken = match std::net::TcpListener::bind(("127.0.0.1", port)) {
        Ok(listener) => {
            drop(listener);
            answers(&format!("127.0.0.1:{port}"))
        }
        Err(err) if err.kind() == std::io::ErrorKind::AddrInUse => true,
        Err(err) => return Err(err).with_context(|| format!("check that port {port} is free")),
    };
    if !taken {
        return Ok(());
    }
    let who = match QueueLock::holder(endpoint, queue_name) {
        Some(pid) => format!("`stm local` pid {pid} serves {queue_name} there"),
        None if speaks_dynamodb(port) => "another DynamoDB emulator: another `stm local`?".to_string(),
        // (`stm ui`, a web server...): no use as an endpoint, so none is offered
        None => bail!(
            "port {port} is taken by a program that is not a DynamoDB emulator: stop it, or start \
             this one on another port with --port N"
        ),
    };
    bail!(
        "port {port} is taken ({who}): stop it, start this one on another port with --port N, \
         or use that emulator with --endpoint {endpoint}"
    )
}

/// Whether what listens on `port` answers DynamoDB's `ListTables` as DynamoDB does (a
/// `TableNames` list): an emulator a command could use as its endpoint, not any server.
fn speaks_dynamodb(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let body = "{}";
    let request = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n\
         Content-Type: application/x-amz-json-1.0\r\nAuthorization: AWS4-HMAC-SHA256 \
         Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let _ = stream.take(64 * 1024).read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).contains("\"TableNames\"")
}

/// The moto server `stm local` started: killed (and reaped) when dropped, however
/// `stm local` ends (a signal, an error, a panic). Were `stm local` killed outright
/// (SIGKILL), moto still goes: it exits when its stdin, a pipe only `stm local` holds,
/// closes ([`MOTO_LAUNCHER`]).
pub(super) struct Moto {
    child: Child,
    _stdin: Option<std::process::ChildStdin>,
    /// The last lines moto wrote to stderr (for the error when it fails to start).
    tail: Arc<Mutex<VecDeque<String>>>,
}

/// moto's server, exiting at the end of its stdin, with the test kit's speed-ups of its
/// bookkeeping (a wide fan-out's commits and sends no longer slow down as the tables and
/// the queue grow).
const MOTO_LAUNCHER: &str = concat!(
    include_str!("../../../shared/testkit/src/moto_speedups.py"),
    "\
import os, sys, threading

def watch():
    sys.stdin.read()
    os._exit(0)

threading.Thread(target=watch, daemon=True).start()
from moto.server import main
main(sys.argv[1:])
"
);

impl Moto {
    pub(super) async fn start(port: u16) -> Result<Moto> {
        let mut child = Command::new(python())
            .args(["-c", MOTO_LAUNCHER, "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("start moto (run `bash .ci/setup.sh` to install it, or pass --endpoint)")?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(stderr) = child.stderr.take() {
            // drained all along (a full pipe would block moto), keeping the last lines
            let tail = tail.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
                    if tail.len() == 20 {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            });
        }
        let stdin = child.stdin.take();
        let mut moto = Moto {
            child,
            _stdin: stdin,
            tail,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let addr = format!("127.0.0.1:{port}");
        loop {
            if let Some(status) = moto.child.try_wait().context("watch moto")? {
                // let the reader catch the last lines
                tokio::time::sleep(Duration::from_millis(100)).await;
                bail!(
                    "moto exited at start ({status}); run `bash .ci/setup.sh` to install it, or pass \
                     --endpoint. It said:\n{}",
                    moto.said()
                );
            }
            if answers(&addr) {
                return Ok(moto);
            }
            if Instant::now() > deadline {
                bail!(
                    "moto did not listen on {addr} within 60 s. It said:\n{}",
                    moto.said()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn said(&self) -> String {
        let tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    pub(super) fn stop(self) {
        drop(self);
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
