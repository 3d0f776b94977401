//! The README's walkthrough, end to end through the `stm` binary: `stm local` runs the
//! worker, relay and sweeper against moto (over HTTP), and the operator commands
//! (`create`, `send`, `show`, `list`, `trace`, `suspend`, `resume`, `cancel`,
//! `terminate`) drive it from other processes, as a user would from another shell. Bad
//! arguments get a clear error and a non-zero exit.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Local {
    child: Child,
    env: Vec<(String, String)>,
}

impl Drop for Local {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn repo() -> PathBuf {
    stm_testkit::repo_root()
}

impl Local {
    fn start(tag: &str) -> Local {
        let moto = stm_testkit::moto_blocking();
        let prefix = stm_testkit::unique_prefix(tag);
        // the template's name pattern (`<stack>-events.fifo`): the strict layer resolves the
        // queue to EventQueue and checks the operator commands against OperatorPolicy
        let queue = format!("{prefix}-events.fifo");
        let env = vec![
            ("STM_ENDPOINT_URL".to_string(), moto.endpoint().to_string()),
            ("STM_TABLE_PREFIX".to_string(), prefix),
            ("STM_QUEUE_URL".to_string(), queue),
            (
                "STM_DEFINITIONS_DIR".to_string(),
                repo().join("examples").display().to_string(),
            ),
            ("AWS_REGION".to_string(), "us-east-1".to_string()),
        ];
        let log = std::env::temp_dir().join(format!("stm-local-{tag}-{}.log", std::process::id()));
        let child = Command::new(env!("CARGO_BIN_EXE_stm"))
            .args([
                "local",
                "--relay-every",
                "1",
                "--sweep-every",
                "1",
                "--visibility",
                "5",
            ])
            .arg("--machines")
            .arg(repo().join("examples"))
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env_remove("STM_ACTIONS")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start stm local");
        let local = Local { child, env };
        // ready when it prints its `export` line (tables and queue made, or joined) and its
        // tables answer: `stm list` alone succeeds as soon as the tables exist, before the
        // queue does, and a `create` right then found no queue
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            let out = local.stm(&["list"]);
            if said.contains("export STM_EMULATOR=1 STM_ENDPOINT_URL=") && out.status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "stm local did not come up: {}\n{}",
                stderr(&out),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        local
    }

    fn stm(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_stm"))
            .args(args)
            .current_dir(repo())
            .env_remove("STM_ACTIONS")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .expect("run stm")
    }

    /// Run and require success; stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.stm(args);
        assert!(out.status.success(), "stm {args:?} failed: {}", stderr(&out));
        stdout(&out)
    }

    /// Poll `stm show ID` until its first line contains every needle.
    fn wait_show(&self, id: &str, needles: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let shown = self.ok(&["show", id]);
            let first = shown.lines().next().unwrap_or_default();
            if needles.iter().all(|n| first.contains(n)) {
                return shown;
            }
            assert!(
                Instant::now() < deadline,
                "{id} never showed {needles:?}; last:\n{shown}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_readme_walkthrough_and_every_operator_command() {
    let local = Local::start("ops");

    // an order, start to finish
    assert_eq!(
        local
            .ok(&["create", "examples/order.stm", "Order", "--id", "o-1"])
            .trim(),
        "o-1"
    );
    local.wait_show("o-1", &["[Order] RUNNING", "at Draft"]);
    let sent = local.ok(&["send", "o-1", r#"Submit:{"amount": 42.5}"#]);
    assert!(sent.starts_with("sent Submit "), "{sent}");
    let shown = local.wait_show("o-1", &["at Payment.Charging"]);
    assert!(
        shown.contains(r#""amount":42.5"#),
        "the context is shown: {shown}"
    );
    local.ok(&["send", "o-1", r#"PaymentOk:{"receipt": "r-1"}"#]);
    local.ok(&["send", "o-1", "Shipped"]);
    local.wait_show("o-1", &["DONE", "at Delivered", "outcome success"]);

    let listed = local.ok(&["list", "--status", "DONE"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("o-1 ") && l.contains("Order")),
        "{listed}"
    );
    let listed = local.ok(&["list", "--definition", "Order"]);
    assert!(listed.contains("o-1"), "{listed}");
    let trace = local.ok(&["trace", "o-1"]);
    for step in ["Submit", "Payment.Charging", "PaymentOk", "Shipped", "Delivered"] {
        assert!(trace.contains(step), "trace lacks {step}:\n{trace}");
    }

    // an orthogonal checkout: `show` draws the regions as a tree under the parent
    local.ok(&["create", "examples/checkout.stm", "Checkout", "--id", "c-1"]);
    local.ok(&["send", "c-1", "Checkout"]);
    let tree = local.wait_show("c-1", &["at Fulfil"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut tree = tree;
    while tree
        .lines()
        .filter(|l| l.starts_with("    ") && l.contains("RUNNING"))
        .count()
        < 2
    {
        assert!(Instant::now() < deadline, "regions never showed:\n{tree}");
        std::thread::sleep(Duration::from_millis(300));
        tree = local.ok(&["show", "c-1"]);
    }

    // suspend parks the events; resume lets them through
    local.ok(&["create", "examples/order.stm", "Order", "--id", "o-2"]);
    local.wait_show("o-2", &["at Draft"]);
    assert_eq!(local.ok(&["suspend", "o-2"]).trim(), "o-2: SUSPENDED");
    local.ok(&["send", "o-2", r#"Submit:{"amount": 1.0}"#]);
    std::thread::sleep(Duration::from_secs(3));
    local.wait_show("o-2", &["SUSPENDED", "at Draft"]);
    assert_eq!(local.ok(&["resume", "o-2"]).trim(), "o-2: RUNNING");
    local.wait_show("o-2", &["RUNNING", "at Payment.Charging"]);

    // cancel (forceful here: Order models no `on Cancel`) and terminate
    let cancelled = local.ok(&["cancel", "o-2", "--reason", r#"{"why": "test"}"#]);
    assert!(cancelled.starts_with("o-2: CANCEL"), "{cancelled}");
    local.wait_show("o-2", &["CANCELLED"]);
    local.ok(&["create", "examples/order.stm", "Order", "--id", "o-3"]);
    local.wait_show("o-3", &["at Draft"]);
    assert_eq!(local.ok(&["terminate", "o-3"]).trim(), "o-3: CANCELLED");

    // bad input: a clear message naming what was wrong, and a failing exit
    for (args, needle) in [
        (vec!["send", "o-1", "Submit:{not json"], "JSON"),
        (vec!["create", "examples/nope.stm", "Order"], "nope.stm"),
        (
            vec!["show", "no-such-execution"],
            "no execution no-such-execution",
        ),
        (vec!["list", "--status", "BOGUS"], "--status"),
        (
            vec!["create", "examples/order.stm", "Order", "--seed", "[1]"],
            "seed",
        ),
        (
            vec!["create", "examples/order.stm", "Order", "--id", "o-1"],
            "o-1",
        ),
        (
            vec!["create", "examples/order.stm", "Order", "--id", "a b"],
            "execution id \"a b\" is not a valid SQS message group id",
        ),
    ] {
        let out = local.stm(&args);
        assert!(!out.status.success(), "stm {args:?} should fail");
        let err = stderr(&out);
        assert!(err.contains(needle), "stm {args:?}: {err}");
        assert!(!err.contains("panicked"), "stm {args:?} panicked: {err}");
    }
}
