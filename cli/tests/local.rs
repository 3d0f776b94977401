//! `stm local` itself, through the binary: its console (one line per processed event, a
//! line naming why an event was dropped), `--env`, Ctrl-C's twin SIGTERM (moto goes with
//! it), one stack per port and per queue, and `--fresh`.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    stm_testkit::repo_root()
}

/// `stm` in the repo, with none of the deployment's variables of the test's environment.
fn stm_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stm"));
    cmd.current_dir(repo())
        .env("STM_PYTHON", stm_testkit::python())
        .env("AWS_REGION", "us-east-1");
    for var in [
        "STM_ENDPOINT_URL",
        "STM_TABLE_PREFIX",
        "STM_QUEUE_URL",
        "STM_DEFINITIONS_DIR",
        "STM_ACTIONS",
        "STM_METRICS",
        "AWS_LAMBDA_FUNCTION_NAME",
        "RUST_LOG",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// A running `stm local`, its stderr in a file; killed if the test ends without stopping it.
struct Local {
    child: Child,
    log: PathBuf,
}

impl Drop for Local {
    fn drop(&mut self) {
        // as `terminate` does, so a failed test leaves no moto behind
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Local {
    fn start(tag: &str, args: &[&str]) -> Local {
        Local::start_with_env(tag, args, &[])
    }

    /// [`Local::start`] with more variables in its environment.
    fn start_with_env(tag: &str, args: &[&str], vars: &[(&str, &std::path::Path)]) -> Local {
        let log = std::env::temp_dir().join(format!("stm-local-test-{tag}-{}.log", std::process::id()));
        let mut cmd = stm_command();
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let child = cmd
            .arg("local")
            .args(["--relay-every", "1", "--sweep-every", "1", "--visibility", "5"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start stm local");
        let mut local = Local { child, log };
        let deadline = Instant::now() + Duration::from_secs(90);
        while local.export_line().is_none() {
            if let Some(status) = local.child.try_wait().expect("try_wait") {
                panic!("stm local exited ({status}):\n{}", local.said());
            }
            assert!(
                Instant::now() < deadline,
                "stm local did not come up:\n{}",
                local.said()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        local
    }

    fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The `export ...` line it printed for another shell.
    fn export_line(&self) -> Option<String> {
        self.said()
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("export STM_EMULATOR=1 "))
            .map(str::to_string)
    }

    /// The variables of the export line.
    fn env(&self) -> BTreeMap<String, String> {
        let line = self.export_line().expect("export line");
        line.trim_start_matches("export ")
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// An operator command against this stack, with its export line's variables.
    fn stm(&self, args: &[&str]) -> Output {
        stm_command()
            .args(args)
            .envs(self.env())
            .output()
            .expect("run stm")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.stm(args);
        assert!(out.status.success(), "stm {args:?} failed: {}", text(&out.stderr));
        text(&out.stdout)
    }

    /// Poll until its console has a line with every needle; that line.
    fn wait_line(&self, needles: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let said = self.said();
            if let Some(line) = said.lines().find(|l| needles.iter().all(|n| l.contains(n))) {
                return line.to_string();
            }
            assert!(Instant::now() < deadline, "no line with {needles:?} in:\n{said}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// SIGTERM, as a service manager or `kill` stops it; its exit status.
    fn terminate(mut self) -> (ExitStatus, String) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
        assert!(sent.success(), "kill -TERM {pid}");
        let status = wait_for(&mut self.child, Duration::from_secs(30));
        (status, self.said())
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn wait_for(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Run `stm ARGS` that must end on its own (quickly); its status, stdout and stderr.
fn finish(cmd: &mut Command) -> (ExitStatus, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stm");
    let status = wait_for(&mut child, Duration::from_secs(30));
    let out = child.wait_with_output().expect("output");
    (status, text(&out.stdout), text(&out.stderr))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn listening(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500)).is_ok()
}

/// One stack with its own moto: the export line and `--env`, a second `stm local` on the
/// port, the console lines of processed and dropped events, and SIGTERM.
#[test]
fn a_stack_with_its_own_moto() {
    let port = free_port();
    let p = port.to_string();
    let examples = repo().join("examples");
    let local = Local::start(
        "moto",
        &[
            "--port",
            &p,
            "--definitions",
            examples.to_str().expect("utf-8 path"),
        ],
    );
    let pid = local.child.id();

    // the export line is absolute and what runs
    let env = local.env();
    let endpoint = format!("http://127.0.0.1:{port}");
    assert_eq!(env["STM_ENDPOINT_URL"], endpoint);
    assert_eq!(env["STM_TABLE_PREFIX"], "harel");
    assert!(
        env["STM_QUEUE_URL"].starts_with("http://") && env["STM_QUEUE_URL"].ends_with("/harel-events.fifo"),
        "{env:?}"
    );
    let canonical = std::fs::canonicalize(&examples).expect("examples");
    assert_eq!(PathBuf::from(&env["STM_DEFINITIONS_DIR"]), canonical);

    // --env, with a relative folder: that very line, alone on stdout
    let (status, stdout, stderr) =
        finish(stm_command().args(["local", "--env", "--port", &p, "--definitions", "examples"]));
    assert!(status.success(), "stm local --env: {stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert_eq!(stdout.trim(), local.export_line().expect("export line"));

    // a second stack on the same port: refused at once, naming the way out
    let (status, _, stderr) = finish(stm_command().args(["local", "--port", &p]));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one error line: {stderr}");
    for needle in [
        "error: port ",
        &format!("port {port} is taken"),
        &format!("pid {pid}"),
        "--port N",
        &format!("--endpoint {endpoint}"),
    ] {
        assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
    }

    // one console line per processed event
    local.ok(&["create", "examples/order.stm", "Order", "--id", "o-1"]);
    local.wait_line(&["  o-1  Start  ", "-> Draft  RUNNING  v"]);
    // an event nothing in Draft takes: processed as nothing, and said so
    local.ok(&["send", "o-1", "Shipped"]);
    let dropped = local.wait_line(&["o-1 did not take Shipped"]);
    assert!(
        dropped.contains("reason=") && dropped.contains("nothing in Draft or above it takes Shipped"),
        "{dropped}"
    );
    local.ok(&["send", "o-1", r#"Submit:{"amount": 1.5}"#]);
    let line = local.wait_line(&["  o-1  Submit  "]);
    let (time, rest) = line.split_once("  ").expect("two spaces after the time");
    assert!(
        time.len() == 8 && time.chars().filter(|c| *c == ':').count() == 2,
        "a time of day first: {line}"
    );
    assert!(
        rest.starts_with("o-1  Submit  Draft -> Payment.Charging  RUNNING  v") && rest.ends_with(" ms)"),
        "{line}"
    );
    local.ok(&["send", "o-1", r#"PaymentOk:{"receipt": "r-1"}"#]);
    local.ok(&["send", "o-1", "Shipped"]);
    local.wait_line(&["  o-1  Shipped  Shipping -> Delivered  DONE success  v"]);

    // an event for the DONE execution: processed as nothing, and said so
    local.ok(&["send", "o-1", "Shipped"]);
    let dropped = local.wait_line(&["o-1 did not take Shipped", "the execution is DONE"]);
    assert!(dropped.contains("reason="), "{dropped}");
    let said = local.said();
    assert!(
        !said.lines().any(|l| l.starts_with('{')),
        "no JSON lines:\n{said}"
    );

    // SIGTERM stops it as Ctrl-C does: moto goes with it
    let (status, said) = local.terminate();
    assert!(status.success(), "exit after SIGTERM: {status}\n{said}");
    assert!(said.contains("SIGTERM: stopping"), "{said}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while listening(port) {
        assert!(
            Instant::now() < deadline,
            "moto still listens on {port} after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // nothing runs there now: --env says so
    let (status, stdout, stderr) = finish(stm_command().args(["local", "--env", "--port", &p]));
    assert_eq!(status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains(&format!("error: `stm local` is not running at {endpoint}")),
        "{stderr}"
    );

    // killed outright (SIGKILL, no handler runs): moto still goes, at the end of its stdin
    let port = free_port();
    let mut killed = Local::start("killed", &["--port", &port.to_string()]);
    killed.child.kill().expect("SIGKILL");
    killed.child.wait().expect("reap");
    let deadline = Instant::now() + Duration::from_secs(10);
    while listening(port) {
        assert!(
            Instant::now() < deadline,
            "moto outlived a SIGKILLed stm local on {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Against a running emulator (`--endpoint`): a second stack on the queue is refused, and
/// `--fresh` starts from empty tables and queues.
#[test]
fn fresh_and_one_stack_per_queue_on_an_emulator() {
    let moto = stm_testkit::moto_blocking();
    let prefix = stm_testkit::unique_prefix("fresh");
    let queue = format!("{prefix}-events.fifo");
    let examples = repo().join("examples");
    let flags = [
        "--endpoint",
        moto.endpoint(),
        "--prefix",
        &prefix,
        "--queue",
        &queue,
        "--definitions",
        examples.to_str().expect("utf-8 path"),
    ];
    let first = Local::start("fresh-1", &flags);

    let (status, _, stderr) = finish(stm_command().arg("local").args(flags));
    assert_eq!(status.code(), Some(1), "{stderr}");
    let needle = format!("(pid {}) is serving the queue {queue}", first.child.id());
    assert!(stderr.contains(&needle), "{needle:?} not in: {stderr}");

    first.ok(&["create", "examples/order.stm", "Order", "--id", "f-1"]);
    first.wait_line(&["  f-1  Start  "]);
    let (status, said) = first.terminate();
    assert!(status.success(), "{said}");

    let fresh = Local::start("fresh-2", &[&flags[..], &["--fresh"][..]].concat());
    let said = fresh.said();
    assert!(
        said.contains(&format!("--fresh: deleted the tables {prefix}_executions, ")),
        "{said}"
    );
    assert!(said.contains(&format!("--fresh: purged {queue} (")), "{said}");
    let listed = fresh.ok(&["list"]);
    assert!(!listed.contains("f-1"), "f-1 survived --fresh:\n{listed}");
    let shown = fresh.stm(&["show", "f-1"]);
    assert_eq!(shown.status.code(), Some(1), "{}", text(&shown.stderr));
    let (status, said) = fresh.terminate();
    assert!(status.success(), "{said}");
}

/// A queue name SQS would refuse (here: its dead-letter queue's name would be 81
/// characters) is a usage error before anything starts, naming the limit and what fits.
#[test]
fn a_queue_name_sqs_would_refuse_is_a_usage_error_up_front() {
    let long = "q".repeat(72);
    let out = stm_command()
        .args(["local", "--queue", &long, "--port", "1"])
        .output()
        .expect("stm local");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "--queue: the queue name \"{long}\" is too long: its dead-letter queue {long}-dlq.fifo would be 81 characters, over SQS's 80; choose a name of at most 71 characters"
        )),
        "{stderr}"
    );
}

/// A port held by a program that is not a DynamoDB emulator (`stm ui`, a web server):
/// `stm local` says so and offers another port, not that program as an endpoint (it
/// guessed "another `stm local`?" and offered `--endpoint` to it).
#[test]
fn a_port_held_by_another_kind_of_server_is_not_offered_as_an_endpoint() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().expect("its address").port();
    // a web server that answers every request with a page
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ =
                stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
        }
    });
    let (status, _, stderr) = finish(stm_command().args(["local", "--port", &port.to_string()]));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "error: port {port} is taken by a program that is not a DynamoDB emulator: stop it, or start \
             this one on another port with --port N\n"
        )
    );
}

/// `stm local` started from a project's directory, with no `.venv` there, no `STM_PYTHON`.
fn stm_local_elsewhere(dir: &std::path::Path, port: u16) -> Command {
    let mut cmd = stm_command();
    cmd.env_remove("STM_PYTHON")
        .env("XDG_DATA_HOME", dir.join("data"))
        .current_dir(dir)
        .args(["local", "--port", &port.to_string(), "--definitions", "machines"]);
    cmd
}

/// A project folder of one machine, away from the repository.
fn a_project(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stm-local-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("machines")).expect("project dir");
    std::fs::copy(repo().join("examples/order.stm"), dir.join("machines/order.stm")).expect("machine");
    dir
}

/// Wait for `child`'s stderr (in `log`) to say moto serves, then stop it.
fn serves_then_stops(mut child: Child, log: &std::path::Path, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let said = std::fs::read_to_string(log).unwrap_or_default();
        if said.contains("[stm local] relay every")
            || Instant::now() > deadline
            || !matches!(child.try_wait(), Ok(None))
        {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = wait_for(&mut child, Duration::from_secs(10));
            return std::fs::read_to_string(log).unwrap_or_default();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// From a project's own folder (no `.venv` there, no `STM_PYTHON`, and a `python3` on the
/// `PATH` without moto), `stm local` finds the environment of the checkout it was built
/// from.
#[test]
fn stm_local_starts_from_any_directory() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = a_project("anywhere");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let python3 = bin.join("python3");
    std::fs::write(&python3, "#!/bin/sh\necho 'No module named moto' >&2\nexit 1\n").expect("python3");
    std::fs::set_permissions(&python3, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let log = dir.join("stderr");
    let child = stm_local_elsewhere(&dir, free_port())
        .env("PATH", path)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("stm local");
    let said = serves_then_stops(child, &log, Duration::from_secs(60));
    assert!(said.contains("[stm local] moto server on"), "{said}");
    assert!(said.contains("machines from"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// With no environment with moto to be found, `stm local` makes its own once (pip's lines
/// shown), and the next start uses it without installing anything.
#[test]
fn stm_local_makes_its_own_moto_environment_once() {
    let dir = a_project("own-env");
    let own = dir.join("moto-env");
    let mut starts = Vec::new();
    for round in 0..2 {
        let log = dir.join(format!("stderr-{round}"));
        let child = stm_local_elsewhere(&dir, free_port())
            .env("STM_MOTO_ENV", &own)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("stm local");
        starts.push(serves_then_stops(child, &log, Duration::from_secs(600)));
    }
    let first = &starts[0];
    assert!(first.contains("making stm's own in"), "{first}");
    assert!(
        first.contains("moto-5.2.5")
            || first.contains("moto==5.2.5")
            || first.contains("Successfully installed"),
        "pip's progress: {first}"
    );
    assert!(first.contains("[stm local] moto server on"), "{first}");
    let second = &starts[1];
    assert!(!second.contains("making stm's own"), "made again: {second}");
    assert!(second.contains("[stm local] moto server on"), "{second}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A command run in a shell that missed the export line, while a `stm local` runs: no
/// Region, or no credentials, each says so and gives the running stack's export line.
#[test]
fn a_command_without_the_export_line_is_pointed_at_the_running_stack() {
    let port = free_port();
    let p = port.to_string();
    let examples = repo().join("examples");
    let home = std::env::temp_dir().join(format!("stm-hint-home-{}", std::process::id()));
    // a temp dir of their own (where `stm local` keeps its lock file): another test's stack
    // is not the one this command is pointed at
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp).expect("home");
    let local = Local::start_with_env(
        "hint",
        &[
            "--port",
            &p,
            "--definitions",
            examples.to_str().expect("utf-8 path"),
        ],
        &[("TMPDIR", &tmp)],
    );
    let export = local.export_line().expect("export line");
    let bare = |region: Option<&str>| {
        let mut cmd = stm_command();
        cmd.args(["show", "x"])
            .env_remove("AWS_REGION")
            .env_remove("AWS_DEFAULT_REGION")
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_SESSION_TOKEN")
            .env("HOME", &home)
            .env("TMPDIR", &tmp)
            .env("AWS_CONFIG_FILE", home.join("config"))
            .env("AWS_SHARED_CREDENTIALS_FILE", home.join("credentials"))
            // no instance metadata to wait for
            .env("AWS_EC2_METADATA_DISABLED", "true");
        if let Some(region) = region {
            cmd.env("AWS_REGION", region);
        }
        finish(&mut cmd)
    };
    for (region, what) in [(None, "no AWS Region"), (Some("us-east-1"), "no AWS credentials")] {
        let (status, _, stderr) = bare(region);
        assert!(!status.success(), "{stderr}");
        assert!(stderr.starts_with(&format!("error: {what}")), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "a local stack (`stm local`) runs at http://127.0.0.1:{port}"
            )),
            "{stderr}"
        );
        assert!(
            stderr.lines().any(|l| l.trim() == export),
            "the stack's export line ({export}) in: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&home);
    drop(local);
}
