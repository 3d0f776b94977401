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

/// The moto `stm local` runs, pinned as the repository's own setup pins it.
const MOTO_REQUIREMENT: &str = "moto[server]==5.2.5";

/// The Python with moto: `$STM_PYTHON` as given; else the first that has moto among
/// `.venv` here, the `.venv` of the checkout `stm` was built from, and stm's own
/// environment (`$STM_MOTO_ENV`, before the checkout's when set, else under the user's data
/// folder), made once the first time none is found, with pip's progress shown.
fn python() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(stm_env::PYTHON).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let checkout = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    let chosen = std::env::var_os(stm_env::MOTO_ENV).filter(|d| !d.is_empty());
    let own = match &chosen {
        Some(dir) => PathBuf::from(dir),
        None => own_environment()?,
    };
    let mut candidates = vec![PathBuf::from(".venv/bin/python")];
    // an environment named by STM_MOTO_ENV comes before the checkout's
    if chosen.is_none() {
        candidates.push(checkout);
    }
    candidates.push(own.join("bin/python"));
    for candidate in candidates {
        if has_moto(&candidate) {
            return Ok(candidate);
        }
    }
    make_own_environment(&own)?;
    Ok(own.join("bin/python"))
}

/// Where stm keeps its own Python environment with moto: `$XDG_DATA_HOME/stm/moto`, else
/// `~/.local/share/stm/moto`.
fn own_environment() -> Result<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".local/share"))
        })
        .context(
            "stm local needs Python 3 with moto: set STM_PYTHON to one that has it, or HOME              (stm makes its own environment under it)",
        )?;
    Ok(data.join("stm/moto"))
}

/// Whether `python` runs and has moto (found, not imported: a few milliseconds, where
/// importing moto's server takes a second).
fn has_moto(python: &std::path::Path) -> bool {
    python.exists()
        && Command::new(python)
            .args([
                "-c",
                "import importlib.util, sys; sys.exit(importlib.util.find_spec('moto') is None)",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// Make stm's own environment at `dir` with `python3 -m venv` and pip (its progress on
/// stderr), once: later runs find it.
fn make_own_environment(dir: &std::path::Path) -> Result<()> {
    eprintln!(
        "[stm local] no Python with moto found (STM_PYTHON, .venv here, or {}): making stm's \
         own in {} with {MOTO_REQUIREMENT}, once (about a minute)",
        dir.join("bin/python").display(),
        dir.display()
    );
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(dir)
        .stdin(Stdio::null())
        .status();
    match made {
        Ok(status) if status.success() => {}
        Ok(status) => bail!(
            "`python3 -m venv {}` failed ({status}): install Python 3 with its venv module \
             (Debian: python3-venv), or set STM_PYTHON to a Python with {MOTO_REQUIREMENT}",
            dir.display()
        ),
        Err(err) => bail!(
            "stm local needs Python 3 to run moto, and `python3` did not start ({err}): install \
             Python 3, or set STM_PYTHON to a Python with {MOTO_REQUIREMENT}"
        ),
    }
    let pip = Command::new(dir.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
            MOTO_REQUIREMENT,
        ])
        .stdin(Stdio::null())
        // pip's lines, each package as it comes, on stderr with stm's
        .stdout(Stdio::from(std::io::stderr()))
        .status();
    if !pip.as_ref().is_ok_and(|s| s.success()) {
        // a half-made environment would be found next time and fail there: remove it
        let _ = std::fs::remove_dir_all(dir);
        bail!(
            "pip could not install {MOTO_REQUIREMENT} into {} (its errors are above): check the \
             network or your pip configuration, or set STM_PYTHON to a Python that has it",
            dir.display()
        );
    }
    Ok(())
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
        let python = python()?;
        let mut child = Command::new(&python)
            .args(["-c", MOTO_LAUNCHER, "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| {
                format!(
                    "start moto with {} (set STM_PYTHON to a Python with {MOTO_REQUIREMENT}, or \
                     pass --endpoint URL of a running emulator)",
                    python.display()
                )
            })?;
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
                    "moto exited at start ({status}) under {}: set STM_PYTHON to a Python with \
                     {MOTO_REQUIREMENT}, or pass --endpoint URL of a running emulator. It said:\n{}",
                    python.display(),
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
