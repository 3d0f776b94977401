//! A `stm local` stack for the CLI's tests: started through the real binary against the
//! test kit's moto (behind its strict AWS layer), and the `stm` commands run against it
//! from other processes, as a user runs them from a second shell.

#![allow(dead_code)] // each test file uses its own part of it

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn repo() -> PathBuf {
    stm_testkit::repo_root()
}

/// A running `stm local`; stopped when dropped.
pub struct Local {
    child: Child,
    /// The second shell's environment (what the export line sets).
    pub env: Vec<(String, String)>,
    /// Where its console output goes.
    pub log: PathBuf,
}

impl Drop for Local {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Local {
    /// A stack on fresh tables `<tag>-…` and the queue `<tag>-…-events.fifo` (the
    /// template's name pattern: the strict layer resolves it to EventQueue and checks the
    /// operator commands against OperatorPolicy), running `examples/`.
    pub fn start(tag: &str) -> Local {
        Local::start_with(tag, &repo().join("examples"), &[])
    }

    /// [`Local::start`] running the machines of `definitions`, with `extra` in its
    /// environment (an `STM_ACTIONS` binding, say).
    pub fn start_with(tag: &str, definitions: &std::path::Path, extra: &[(String, String)]) -> Local {
        let moto = stm_testkit::moto_blocking();
        let prefix = stm_testkit::unique_prefix(tag);
        let queue = format!("{prefix}-events.fifo");
        let env = vec![
            ("STM_EMULATOR".to_string(), "1".to_string()),
            ("STM_ENDPOINT_URL".to_string(), moto.endpoint().to_string()),
            ("STM_TABLE_PREFIX".to_string(), prefix),
            ("STM_QUEUE_URL".to_string(), queue),
            (
                "STM_DEFINITIONS_DIR".to_string(),
                definitions.display().to_string(),
            ),
            ("AWS_REGION".to_string(), "us-east-1".to_string()),
        ];
        let log = std::env::temp_dir().join(format!("stm-local-{tag}-{}.log", std::process::id()));
        let child = stm_local_in(&env, definitions)
            .envs(extra.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start stm local");
        let local = Local { child, env, log };
        // ready when it prints its `export` line (tables and queue made, or joined) and its
        // tables answer: `stm list` alone succeeds as soon as the tables exist, before the
        // queue does, and a `create` right then found no queue
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let said = local.console();
            let out = local.stm(&["list"]);
            if said.contains("export STM_EMULATOR=1 STM_ENDPOINT_URL=") && out.status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "stm local did not come up: {}\n{said}",
                stderr(&out)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        local
    }

    /// What its console said so far.
    pub fn console(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `stm ARGS` from the repo root, with the second shell's environment.
    pub fn stm(&self, args: &[&str]) -> Output {
        stm_with(&self.env, args)
    }

    /// [`Local::ok`] with `extra` variables besides the stack's.
    pub fn ok_with(&self, extra: &[(String, String)], args: &[&str]) -> String {
        let env: Vec<(String, String)> = self.env.iter().chain(extra).cloned().collect();
        let out = stm_with(&env, args);
        assert!(out.status.success(), "stm {args:?} failed: {}", stderr(&out));
        stdout(&out)
    }

    /// Run and require success; stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.stm(args);
        assert!(out.status.success(), "stm {args:?} failed: {}", stderr(&out));
        stdout(&out)
    }

    /// Every event on the status bus copied so far to the queue its rule fills
    /// (`--status-events`: `{queue stem}-status-events`), read with boto3 as a user would,
    /// and deleted: each whole (`source`, `detail-type`, `detail`).
    pub fn status_event_copies(&self) -> Vec<serde_json::Value> {
        let var = |name: &str| {
            self.env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let queue = format!("{}-status-events", var("STM_QUEUE_URL").trim_end_matches(".fifo"));
        let code = r#"
import json, os, boto3
sqs = boto3.client("sqs", endpoint_url=os.environ["ENDPOINT"], region_name="us-east-1",
                   aws_access_key_id="test", aws_secret_access_key="test")
url = sqs.get_queue_url(QueueName=os.environ["QUEUE"])["QueueUrl"]
out = []
while True:
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    if not got:
        break
    for m in got:
        out.append(json.loads(m["Body"]))
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
print(json.dumps(out))
"#;
        let endpoint = var("STM_ENDPOINT_URL");
        let text = stm_testkit::run_python(code, &[("ENDPOINT", &endpoint), ("QUEUE", &queue)], "");
        serde_json::from_str(text.trim()).expect("the events as JSON")
    }

    /// Poll `stm show ID` until its first line contains every needle.
    pub fn wait_show(&self, id: &str, needles: &[&str]) -> String {
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

/// `stm local` in `env` with quick schedules (relay and sweep every second, a 5 s
/// visibility timeout), running `examples/`, its console not yet redirected.
pub fn stm_local(env: &[(String, String)]) -> Command {
    stm_local_in(env, &repo().join("examples"))
}

/// [`stm_local`] running the machines of `definitions`.
pub fn stm_local_in(env: &[(String, String)], definitions: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stm"));
    cmd.args([
        "local",
        "--relay-every",
        "1",
        "--sweep-every",
        "1",
        "--visibility",
        "5",
    ])
    .arg("--definitions")
    .arg(definitions)
    .current_dir(repo())
    .env_remove("STM_ACTIONS")
    .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    .stdin(Stdio::null())
    .stdout(Stdio::null());
    cmd
}

/// `stm ARGS` from the repo root in `env`.
pub fn stm_with(env: &[(String, String)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stm"))
        .args(args)
        .current_dir(repo())
        .env_remove("STM_ACTIONS")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .expect("run stm")
}

/// The deployment variables a test's own environment may carry: a command under test
/// starts without them, and is given what it needs.
pub const DEPLOYMENT_VARIABLES: [&str; 6] = [
    "STM_ENDPOINT_URL",
    "STM_TABLE_PREFIX",
    "STM_QUEUE_URL",
    "STM_DEFINITIONS_DIR",
    "STM_EMULATOR",
    "STM_ACTIONS",
];

/// `stm ARGS` in `dir`, with none of [`DEPLOYMENT_VARIABLES`].
pub fn stm_command<S: AsRef<std::ffi::OsStr>>(args: &[S], dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stm"));
    cmd.args(args).current_dir(dir);
    for var in DEPLOYMENT_VARIABLES {
        cmd.env_remove(var);
    }
    cmd
}

/// `stm ARGS` with no deployment in its environment (the commands that need none).
pub fn stm_alone(args: &[&str]) -> Output {
    stm_command(args, &repo()).output().expect("run stm")
}

/// The `STM_ACTIONS=` line a worker's `serve-actions` prints first, read off its stdout.
pub fn served_bindings(child: &mut Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = std::io::BufReader::new(out).read_line(&mut line);
    }
    line.trim()
        .strip_prefix("STM_ACTIONS=")
        .unwrap_or_else(|| panic!("serve-actions printed {line:?}, not its STM_ACTIONS= line"))
        .to_string()
}

/// `stm validate`'s output without the versions it adds to harel's (`Order: ok (version
/// 1f2e3d4c5b6a7988)` is harel's `Order: ok`).
pub fn without_versions(text: &str) -> String {
    text.lines()
        .map(|line| match line.find(" (version ") {
            Some(at) if line.ends_with(')') => &line[..at],
            _ => line,
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

/// `harel ARGS` in `dir`: harel 0.9.0's command line, from the test Python's venv.
pub fn harel_in(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(stm_testkit::python())
        .args(["-c", "import sys; from harel.cli import main; sys.exit(main())"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run harel")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A shell command line as `sh` splits it: words, 'single' and "double" quotes, and
/// backslash-newline continuations (all the README uses).
pub fn shell_words(line: &str) -> Vec<String> {
    let line = line.replace("\\\n", " ");
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    w.push(q);
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => w.extend(chars.next()),
                        _ => w.push(q),
                    }
                }
            }
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// The cargo target dir this test was built into (the stm binary's `target/<profile>/..`):
/// a scaffolded project's build shares it and reuses the compiled dependencies.
pub fn target_dir() -> PathBuf {
    std::path::Path::new(env!("CARGO_BIN_EXE_stm"))
        .ancestors()
        .nth(2)
        .map(std::path::Path::to_path_buf)
        .expect("the stm binary lives in target/<profile>")
}
