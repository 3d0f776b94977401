//! `stm-testkit`: dev-only support for tests that talk to AWS services over real HTTP.
//!
//! - [`moto`] starts **one** moto server (DynamoDB, SQS, ...) per test process, on a free
//!   loopback port, and hands every test its endpoint. A missing Python or moto is a test
//!   failure with a message saying to run `.ci/setup.sh`, never a skip.
//! - [`unique_prefix`] gives each test its own table prefix, so tests run in parallel
//!   against the one server.
//! - [`FaultProxy`] is a tiny HTTP proxy in front of moto that can answer the next N
//!   requests of an operation, or a random share of them, with a canned AWS error
//!   (throttling, a transaction conflict, a 5xx, ...) or swallow a response after
//!   forwarding the request (an ambiguous failure).
//! - [`recorder`] records every AWS request a process sends (the IAM checks of the
//!   functions' roles), and [`runtime_api`] is a minimal Lambda Runtime API that starts a
//!   built function as Lambda would.
//! - [`heap`] counts the heap a process holds and its peak (what a simulated function's
//!   call held).
//! - [`Rng`] is the seeded generator of every randomized test (and of the model's walks),
//!   with [`env_u64`] (a seed or a count from the environment) and [`SeedOnFailure`] (the
//!   seed a failure prints); [`python`] the test venv's interpreter; [`scratch_dir`] a
//!   fresh directory per test.
//!
//! ## How the server dies with the test process
//!
//! The server's stdin is a pipe whose write end only the test process holds (Rust opens
//! pipes close-on-exec, so no grandchild inherits it). The launcher blocks reading stdin
//! and exits on EOF, which the kernel delivers however the test process ends: normal exit,
//! panic, `SIGKILL`. No `atexit`, no `Drop` of a static, no `PR_SET_PDEATHSIG` (which
//! fires when the *thread* that spawned the child ends, and the test harness runs each
//! test on its own short-lived thread).
//!
//! ## Expired FIFO messages come back in order
//!
//! moto 5.2.5 hands out the expired (visibility timeout run out, never deleted) messages of
//! one FIFO group last first: it keeps each marked in flight until a receive walks past it,
//! and skips the group's earlier messages while a later one is still marked. The launcher
//! clears the expired marks before every receive, so they come back in order, as from SQS.
//!
//! ## Serialized requests
//!
//! moto evaluates a `TransactWriteItems` condition and applies its writes without a lock,
//! and rolls a cancelled transaction back by restoring a table snapshot. Under concurrent
//! requests that is neither atomic nor isolated, unlike DynamoDB. The launcher therefore
//! wraps moto's WSGI app in one lock: requests are handled one at a time (connections stay
//! concurrent and keep-alive), which is the serializable behaviour DynamoDB guarantees for
//! the items a transaction touches.

pub mod heap;
pub mod http;
pub mod iam;
pub mod meter;
pub mod otlp;
mod proxy;
pub mod recorder;
pub mod runtime_api;
pub mod xray;
// the store's contract draws with the same file: a published crate cannot depend on this
// one, so the file lives there and is compiled here too (see its docs)
#[path = "../../store/src/contract/seeded.rs"]
mod seeded;
pub mod strict;
pub mod template;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use proxy::{Fault, FaultProxy};
pub use seeded::{env_u64, Rng, SeedOnFailure};
pub use strict::{Principal, StrictLayer};

/// The region every test client uses.
pub const REGION: &str = "us-east-1";

/// The moto server shared by the tests of one process, behind the [`StrictLayer`].
#[derive(Debug)]
pub struct Moto {
    /// moto itself, unchecked.
    raw_endpoint: String,
    port: u16,
    log: PathBuf,
    strict: StrictLayer,
    // Held for the life of the process: closing stdin (at exit) stops the server.
    _child: Mutex<(Child, ChildStdin)>,
}

impl Moto {
    /// The strict layer's harness endpoint (`http://127.0.0.1:PORT`): every AWS limit the
    /// layer knows is enforced, IAM is not (it is what CloudFormation and a test's own
    /// setup and assertions do). Code under test uses [`endpoint_as`](Self::endpoint_as).
    pub fn endpoint(&self) -> &str {
        self.strict.endpoint(Principal::Admin)
    }

    /// The endpoint for code acting as `principal`: its requests are also checked against
    /// that principal's policy in `template.yaml`.
    pub fn endpoint_as(&self, principal: Principal) -> &str {
        self.strict.endpoint(principal)
    }

    /// moto itself, behind no layer (moto's own API, diagnostics).
    pub fn raw_endpoint(&self) -> &str {
        &self.raw_endpoint
    }

    /// The strict layer in front of this server (its refusal counts).
    pub fn strict(&self) -> &StrictLayer {
        &self.strict
    }

    /// The strict layer's partition meter ([`StrictLayer::meter`]): DynamoDB's units per
    /// table and key of every request this process sent through the layer.
    pub fn meter(&self) -> meter::PartitionMeter {
        self.strict.meter()
    }

    /// moto's own port (not the layer's).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id (benchmarks read its CPU time from /proc).
    pub fn pid(&self) -> u32 {
        self._child
            .lock()
            .map(|c| c.0.id())
            .unwrap_or_else(|e| e.into_inner().0.id())
    }

    /// Where the server writes its log (stderr).
    pub fn log_path(&self) -> &std::path::Path {
        &self.log
    }
}

static MOTO: OnceLock<Moto> = OnceLock::new();

/// The process-wide moto server, started on first use.
///
/// # Panics
/// When the venv python or moto is missing, or the server does not come up: run
/// `.ci/setup.sh`.
pub async fn moto() -> &'static Moto {
    moto_blocking()
}

/// [`moto`] for synchronous callers.
pub fn moto_blocking() -> &'static Moto {
    MOTO.get_or_init(start_moto)
}

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .and_then(|p| p.parent())
        .map(PathBuf::from)
        .unwrap_or(here)
}

/// The Python the tests use: `$STM_PYTHON`, else `<repo>/.venv/bin/python`.
///
/// # Panics
/// When it does not exist.
pub fn python() -> PathBuf {
    let path = match std::env::var_os(stm_env::PYTHON) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => repo_root().join(".venv/bin/python"),
    };
    assert!(
        path.exists(),
        "stm-testkit: no Python at {} (set STM_PYTHON or run `bash .ci/setup.sh` from the repo root \
         to create the venv with moto[server], boto3 and harel)",
        path.display()
    );
    path
}

/// A fresh, empty directory for one test: `<temp>/stm-<tag>-<pid>`, with whatever an
/// earlier process of the same id left there removed. The process id keeps test binaries
/// running side by side apart, `tag` the tests of one binary.
pub fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stm-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("scratch dir {}: {e}", dir.display()));
    dir
}

/// A table prefix no other test of this process uses: `t<n>_<tag>`, a valid harel prefix
/// (an identifier of at most 30 characters).
pub fn unique_prefix(tag: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let clean: String = tag
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut out = format!("t{n}_{clean}");
    out.truncate(30);
    out
}

const LAUNCHER: &str = concat!(
    r#"
import logging, os, sys, threading
logging.getLogger("werkzeug").setLevel(logging.ERROR)
try:
    from werkzeug.serving import make_server
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from moto.sqs.models import SQSBackend
except Exception as exc:
    print(f"MOTO_MISSING {exc!r}", flush=True)
    sys.exit(3)
# A received FIFO message whose visibility timeout ran out stays "pending" in moto until a
# receive walks past it, and the walk skips a group's messages while a later one of the
# group is still pending: expired messages of one group came back last first. SQS hands
# them out in order again. Forget every expired one before each receive.
_receive_message = SQSBackend.receive_message
def _receive_in_order(self, queue_name, *args, **kwargs):
    queue = self.get_queue(queue_name)
    for message in [m for m in queue.pending_messages if m.visible]:
        queue.pending_messages.discard(message)
    return _receive_message(self, queue_name, *args, **kwargs)
SQSBackend.receive_message = _receive_in_order
"#,
    include_str!("moto_speedups.py"),
    r#"inner = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()
def app(environ, start_response):
    # one request at a time: moto's transactions are only atomic when nothing interleaves
    with lock:
        return [b"".join(inner(environ, start_response))]
srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
threading.Thread(target=srv.serve_forever, daemon=True).start()
print(f"MOTO_READY {srv.server_address[1]}", flush=True)
devnull = os.open(os.devnull, os.O_WRONLY)
os.dup2(devnull, 1)
sys.stdin.buffer.read()  # EOF: the test process is gone
try:
    os.remove(sys.argv[1])  # the server's log: a clean stop leaves none behind
except OSError:
    pass
os._exit(0)
"#
);

fn start_moto() -> Moto {
    let py = python();
    let log = std::env::temp_dir().join(format!("stm-moto-{}.log", std::process::id()));
    let log_file = std::fs::File::create(&log)
        .unwrap_or_else(|e| panic!("stm-testkit: cannot create {}: {e}", log.display()));
    let mut child = Command::new(&py)
        .arg("-c")
        .arg(LAUNCHER)
        .arg(&log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file))
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "stm-testkit: cannot run {}: {e}; run `bash .ci/setup.sh`",
                py.display()
            )
        });
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");

    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout);
        let mut line = String::new();
        let _ = lines.read_line(&mut line);
        let _ = tx.send(line);
        // drain anything else until the server closes its stdout
        let mut sink = Vec::new();
        let _ = lines.read_to_end(&mut sink);
    });
    let line = rx.recv_timeout(Duration::from_secs(90)).unwrap_or_default();
    let fail = |why: &str| -> ! {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        panic!(
            "stm-testkit: moto did not start ({why}) with {}; run `bash .ci/setup.sh` to install \
             moto[server]==5.2.5 into the venv.\n--- server log {} ---\n{text}",
            py.display(),
            log.display()
        )
    };
    let line = line.trim();
    if let Some(why) = line.strip_prefix("MOTO_MISSING") {
        fail(&format!("moto is not importable:{why}"));
    }
    let Some(port) = line
        .strip_prefix("MOTO_READY ")
        .and_then(|p| p.parse::<u16>().ok())
    else {
        fail(&format!("unexpected first line {line:?}"));
    };
    let endpoint = format!("http://127.0.0.1:{port}");
    if !answers(port, Duration::from_secs(30)) {
        fail("it does not answer HTTP");
    }
    emulator();
    Moto {
        strict: StrictLayer::start(&endpoint),
        raw_endpoint: endpoint,
        port,
        log,
        _child: Mutex::new((child, stdin)),
    }
}

/// Panic when the strict layer refused any request of this process so far for IAM: a
/// suite calls it at its end, so a path whose role lacks a grant fails the suite even where
/// the code under test absorbed the `AccessDeniedException` as a retryable error.
pub fn assert_no_access_denied() {
    let refusals = moto_blocking().strict().refusals();
    assert_eq!(
        refusals.get("iam").copied().unwrap_or(0),
        0,
        "the strict layer denied requests of this suite (a role in template.yaml lacks a grant); \
         every refusal so far: {refusals:?}"
    );
}

/// Say that this process's SDK clients talk to emulators (`STM_EMULATOR=1`): they take
/// static dummy credentials only then, never merely because an endpoint is set. [`moto`]
/// calls it; a test whose clients talk to a server of its own (a fake Lambda Invoke API)
/// calls it before building them. Set once, before any client exists, and never unset.
pub fn emulator() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os(stm_env::EMULATOR).is_none() {
            std::env::set_var(stm_env::EMULATOR, "1");
        }
    });
}

/// Whether an HTTP GET on the server gets any response within `within`.
fn answers(port: u16, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let req = "GET /moto-api/reset-auth HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
            if s.write_all(req.as_bytes()).is_ok() {
                let mut buf = [0u8; 12];
                if s.read_exact(&mut buf).is_ok() && buf.starts_with(b"HTTP/1.") {
                    return true;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// Run a Python snippet with the test Python, feeding `stdin`, and return its stdout.
///
/// # Panics
/// When the snippet exits non-zero (its stderr is in the message).
pub fn run_python(code: &str, env: &[(&str, &str)], stdin: &str) -> String {
    let mut cmd = Command::new(python());
    cmd.arg("-c")
        .arg(code)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("stm-testkit: cannot run python: {e}"));
    let feeder = child.stdin.take().map(|mut input| {
        let data = stdin.as_bytes().to_vec();
        // a thread, so a snippet that prints a lot before reading cannot deadlock us
        std::thread::spawn(move || {
            let _ = input.write_all(&data);
        })
    });
    let out = child.wait_with_output().expect("python output");
    if let Some(f) = feeder {
        let _ = f.join();
    }
    assert!(
        out.status.success(),
        "python snippet failed ({}):\n--- stderr ---\n{}\n--- stdout ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A size a test reads from the environment (`STM_SWEEP_PENDING`, ...): `default` when
/// `name` is unset, else its value, which must be a whole number of at least 1.
///
/// # Panics
/// When the value is not such a number: a run asked for zero iterations, or for a count
/// that does not parse, would otherwise pass having checked nothing, or run the default
/// when something else was asked for.
#[track_caller]
pub fn env_count(name: &str, default: usize) -> usize {
    let value = std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
    match parse_count(name, value.as_deref(), default) {
        Ok(n) => n,
        Err(e) => panic!("{e}"),
    }
}

/// [`env_count`]'s reading of `value` (`None`: unset).
fn parse_count(name: &str, value: Option<&str>, default: usize) -> Result<usize, String> {
    let Some(text) = value else {
        return Ok(default);
    };
    match text.trim().parse::<usize>() {
        Ok(0) => Err(format!(
            "{name}=0: a run of zero checks nothing (unset it for the default, {default})"
        )),
        Ok(n) => Ok(n),
        Err(e) => Err(format!(
            "{name}={text:?} is not a count: {e} (unset it for the default, {default})"
        )),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_count_from_the_environment_is_at_least_one_and_parses() {
        let parse = |v| super::parse_count("CHECKS", v, 7);
        assert_eq!(parse(None), Ok(7));
        assert_eq!(parse(Some("12")), Ok(12));
        assert_eq!(parse(Some(" 3 ")), Ok(3));
        let zero = parse(Some("0")).expect_err("zero");
        assert!(zero.contains("CHECKS=0: a run of zero checks nothing"), "{zero}");
        for bad in ["", "ten", "-1", "1e3", "2.5"] {
            let err = parse(Some(bad)).expect_err(bad);
            assert!(err.contains("is not a count"), "{err}");
        }
    }

    #[test]
    fn prefixes_are_unique_valid_identifiers() {
        let a = super::unique_prefix("some-test name that is rather long");
        let b = super::unique_prefix("some-test name that is rather long");
        assert_ne!(a, b);
        for p in [a, b] {
            assert!(p.len() <= 30, "{p}");
            assert!(
                p.starts_with('t') && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{p}"
            );
        }
    }
}
