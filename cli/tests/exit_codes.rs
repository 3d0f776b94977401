//! The book's exit-code table (`docs/commands.md`, "Exit codes"), row by row: each row's
//! example is run in the situation the table describes and must exit with the row's code,
//! so a table that drifts from the binary fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{repo, shell_words, stderr, stdout, stm_command, Local};

struct Row {
    line: usize,
    command: String,
    situation: String,
    example: String,
    against: String,
    exit: i32,
}

/// The rows of the table under `## Exit codes` in docs/commands.md.
fn rows() -> Vec<Row> {
    let text = std::fs::read_to_string(repo().join("docs/commands.md")).expect("docs/commands.md");
    let start = text
        .find("\n## Exit codes\n")
        .expect("docs/commands.md has an Exit codes section")
        + 1;
    // the heading's line (1-based): the lines before it, plus one
    let first_line = text[..start].lines().count() + 1;
    let mut out = Vec::new();
    let mut in_table = false;
    for (i, line) in text[start..].lines().enumerate().skip(1) {
        if line.starts_with("## ") {
            break;
        }
        if !line.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        if line.chars().all(|c| "|-: ".contains(c)) {
            continue; // the header's rule
        }
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        if !in_table {
            in_table = true;
            assert_eq!(
                cells,
                ["command", "situation", "example", "against", "exit"],
                "the exit-code table's columns"
            );
            continue;
        }
        assert_eq!(cells.len(), 5, "docs/commands.md:{}: {line}", first_line + i);
        let code = |c: &str| c.trim_matches('`').to_string();
        out.push(Row {
            line: first_line + i,
            command: code(cells[0]),
            situation: cells[1].to_string(),
            example: code(cells[2]),
            against: cells[3].to_string(),
            exit: cells[4]
                .parse()
                .unwrap_or_else(|_| panic!("docs/commands.md:{}: exit {:?}", first_line + i, cells[4])),
        });
    }
    out
}

/// The directory the rows run in, with the files the chapter names.
fn workdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stm-exit-codes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("machines")).expect("workdir");
    std::fs::create_dir_all(dir.join("changed")).expect("workdir");
    for name in ["examples", "cli"] {
        std::os::unix::fs::symlink(repo().join(name), dir.join(name)).expect("symlink");
    }
    std::fs::write(
        dir.join("broken.stm"),
        "event Go {}\nmachine M {\n  initial A\n  state A {}\n  from A to Nowhere on Go\n}\n",
    )
    .expect("broken.stm");
    std::fs::write(
        dir.join("messy.stm"),
        "event Go {}\nmachine M {\ninitial A\n    state A {}\n  final B done\n  from A to B on Go\n}\n",
    )
    .expect("messy.stm");
    std::fs::write(dir.join("typo.events"), "Submit:{\"amount\": 42.5}\nRefund\n").expect("typo.events");
    let exit = r#"{"jsonrpc":"2.0","method":"exit"}"#;
    std::fs::write(
        dir.join("exit.lsp"),
        format!("Content-Length: {}\r\n\r\n{exit}", exit.len()),
    )
    .expect("exit.lsp");
    let order = std::fs::read_to_string(repo().join("examples/order.stm")).expect("order.stm");
    std::fs::write(dir.join("machines/order.stm"), &order).expect("machines/");
    std::fs::write(
        dir.join("changed/order.stm"),
        order.replace("Shipping", "Dispatch"),
    )
    .expect("changed/");
    dir
}

fn command(dir: &Path, env: &[(String, String)], args: &[String]) -> Command {
    let mut cmd = stm_command(args, dir);
    for var in ["AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"] {
        cmd.env_remove(var);
    }
    // no profile's Region either, for the rows run against nothing
    cmd.env("AWS_CONFIG_FILE", dir.join("no-aws-config"));
    cmd.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd
}

/// Start a long-running command, wait until it says it is serving, stop it with SIGINT:
/// its exit code.
fn interrupted(mut cmd: Command, ready: &str, at: &str) -> i32 {
    let log = std::env::temp_dir().join(format!("stm-exit-codes-{}-serve.log", std::process::id()));
    let file = std::fs::File::create(&log).expect("log");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log"))
        .stderr(file)
        .spawn()
        .expect("start");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        if said.contains(ready) {
            break;
        }
        if let Some(status) = child.try_wait().expect("wait") {
            panic!("{at}: it exited {status} before it served:\n{said}");
        }
        assert!(Instant::now() < deadline, "{at}: never said {ready:?}:\n{said}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let _ = std::fs::remove_file(&log);
            return status.code().unwrap_or(-1);
        }
        assert!(Instant::now() < deadline, "{at}: SIGINT did not stop it");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn every_row_of_the_books_exit_code_table_holds() {
    let rows = rows();
    assert!(rows.len() >= 40, "the exit-code table has {} rows", rows.len());
    let dir = workdir();
    let local = Local::start("exitcodes");
    let unreachable: Vec<(String, String)> = vec![
        ("STM_ENDPOINT_URL".into(), "http://127.0.0.1:9".into()),
        ("STM_EMULATOR".into(), "1".into()),
        ("AWS_REGION".into(), "us-east-1".into()),
    ];
    let mut failures = Vec::new();
    let mut subcommands = std::collections::BTreeSet::new();
    for row in &rows {
        let at = format!("docs/commands.md:{}", row.line);
        let mut words = shell_words(&row.example);
        assert_eq!(
            words.first().map(String::as_str),
            Some("stm"),
            "{at}: {}",
            row.example
        );
        words.remove(0);
        // `list FILE` is `stm list` with a file: the words in capitals are placeholders
        let words_of_command: Vec<&str> = row
            .command
            .split(' ')
            .filter(|w| !w.chars().all(|c| c.is_ascii_uppercase()))
            .collect();
        assert!(
            row.example
                .starts_with(&format!("stm {}", words_of_command.join(" "))),
            "{at}: the example {:?} is not of `{}`",
            row.example,
            row.command
        );
        subcommands.insert(row.command.split(' ').next().unwrap_or_default().to_string());
        let stdin = match words.iter().position(|w| w == "<") {
            Some(i) => {
                let file = words.get(i + 1).cloned().expect("a file after <");
                words.truncate(i);
                Some(file)
            }
            None => None,
        };
        let env: &[(String, String)] = match row.against.as_str() {
            "nothing" => &[],
            "stm local" => &local.env,
            "unreachable" => &unreachable,
            other => panic!("{at}: against {other:?}: nothing, stm local or unreachable"),
        };
        let mut cmd = command(&dir, env, &words);
        let (code, said) = if row.situation.starts_with("stopped with Ctrl-C") {
            let ready = match words[0].as_str() {
                "local" => "export STM_EMULATOR=1",
                "ui" => "http://127.0.0.1:",
                other => panic!("{at}: how does `stm {other}` say it serves?"),
            };
            if words[0] == "local" {
                // a stack of its own on the test's moto (beside the one the rows use)
                let prefix = stm_testkit::unique_prefix("exitlocal");
                cmd.env("STM_TABLE_PREFIX", &prefix)
                    .env("STM_QUEUE_URL", format!("{prefix}-events.fifo"))
                    .env("STM_DEFINITIONS_DIR", repo().join("examples"));
            }
            (interrupted(cmd, ready, &at), String::new())
        } else {
            match stdin {
                Some(file) => {
                    cmd.stdin(std::fs::File::open(dir.join(&file)).expect("the input file"));
                }
                None => {
                    cmd.stdin(Stdio::null());
                }
            }
            let out = cmd.output().expect("run stm");
            (
                out.status.code().unwrap_or(-1),
                format!("{}{}", stdout(&out), stderr(&out)),
            )
        };
        if code != row.exit {
            failures.push(format!(
                "{at}: `{}` ({}) exited {code}, the table says {}:\n{said}",
                row.example, row.situation, row.exit
            ));
        }
        // the next row's execution state follows from this one's (a send processed, ...)
        if row.example.contains("--wait") && code == 0 {
            local.wait_show("o-1", &["at Payment.Charging"]);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    // every subcommand has its rows
    let help = stdout(&common::stm_alone(&["--help"]));
    let commands = help
        .split("Commands:")
        .nth(1)
        .expect("stm --help lists its commands")
        .split("Options:")
        .next()
        .unwrap_or_default();
    // a command's line is indented by two spaces, its wrapped description by more
    for line in commands
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
    {
        let name = line.split_whitespace().next().unwrap_or_default();
        if name != "help" {
            assert!(
                subcommands.contains(name),
                "`stm {name}` has no row in the exit-code table of docs/commands.md"
            );
        }
    }
}
