//! A newcomer's first hour, through the `stm` binary: the README's commands exactly as it
//! prints them (read from README.md, between its `<!-- newcomer: … -->` markers), and the
//! mistakes a newcomer makes, each with its exact message and exit code.

mod common;

use std::process::Output;

use common::{shell_words, stderr, stdout, stm_alone, without_versions, Local};

/// The fenced blocks after `<!-- newcomer: NAME -->`: the first and the one after it,
/// without their info strings (`sh`, `text`).
fn readme_blocks(name: &str) -> (String, Option<String>) {
    let readme = std::fs::read_to_string(common::repo().join("README.md")).expect("README.md");
    let marker = format!("<!-- newcomer: {name} -->");
    let at = readme
        .find(&marker)
        .unwrap_or_else(|| panic!("README.md has no {marker}"));
    // split on the fences: odd pieces are the blocks' info strings and insides
    let inside = |piece: &str| piece.split_once('\n').map_or("", |(_, body)| body).to_string();
    let mut pieces = readme[at..].split("```");
    let first = pieces.nth(1).expect("a fenced block after the marker");
    let second = pieces.nth(1);
    (inside(first), second.map(inside))
}

fn as_strs(words: &[String]) -> Vec<&str> {
    words.iter().map(String::as_str).collect()
}

/// The single `error: …` line a failure prints, and its exit code.
fn failure(out: &Output) -> (String, i32) {
    let err = stderr(out);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(lines.len(), 1, "one error line: {err}");
    for bad in [
        "panicked",
        "KeyError",
        "ValueError",
        "DispatchFailure",
        "Error {",
        "ConnectorError",
    ] {
        assert!(!err.contains(bad), "{bad} in {err}");
    }
    (lines[0].to_string(), out.status.code().unwrap_or(-1))
}

#[test]
fn the_first_command_prints_what_the_readme_shows() {
    let (command, expected) = readme_blocks("first-run");
    let words = shell_words(&command);
    let prefix = [
        "cargo",
        "run",
        "--profile",
        "quick",
        "-p",
        "stm",
        "--no-default-features",
        "--",
    ];
    assert_eq!(&words[..prefix.len()], prefix, "{command}");
    let out = stm_alone(&as_strs(&words[prefix.len()..]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), expected.expect("the output block"));
}

#[test]
fn the_walkthrough_as_the_readme_prints_it_then_the_newcomers_mistakes() {
    let local = Local::start("newcomer");
    let (block, _) = readme_blocks("walkthrough");
    let commands: Vec<Vec<String>> = block
        .lines()
        .filter(|l| l.starts_with("stm "))
        .map(shell_words)
        .collect();
    assert!(commands.len() >= 6, "{block}");
    let mut outputs = Vec::new();
    for words in &commands {
        let out = local.stm(&as_strs(&words[1..]));
        assert!(out.status.success(), "{words:?}: {}", stderr(&out));
        outputs.push((words.clone(), stdout(&out)));
    }
    for (words, out) in &outputs {
        match as_strs(&words[1..]).as_slice() {
            ["create", .., id] => assert_eq!(out.trim(), *id),
            ["send", id, kind, "--wait"] => {
                assert!(out.starts_with(&format!("{id}: {kind} processed: ")), "{out}")
            }
            ["show", id] => assert!(out.starts_with(&format!("{id}  [Checkout] ")), "{out}"),
            ["trace", _] => {
                // the parent's steps, and its regions' (Charged and Reserved step the regions)
                for kind in ["Start", "Checkout", "Finished", "Charged", "Reserved"] {
                    assert!(out.contains(kind), "the trace lacks {kind}: {out}");
                }
            }
            ["list", ..] => assert!(out.starts_with("ID "), "{out}"),
            other => panic!("a README command this test does not know: {other:?}"),
        }
    }
    // the regions' Finished reach the parent after the last send: then it joins
    local.wait_show("co-1", &["DONE", "at Confirmed"]);
    let listed = local.ok(&["list", "--status", "DONE"]);
    assert!(listed.lines().any(|l| l.starts_with("co-1 ")), "{listed}");
    let console = local.console();
    assert!(
        console.contains("co-1") && console.contains("Checkout"),
        "a line per processed event on the console:\n{console}"
    );

    // the control plane says what it did, and says so when there is nothing to do
    local.ok(&["create", "examples/order.stm", "Order", "--id", "o-9"]);
    local.wait_show("o-9", &["at Draft"]);
    assert_eq!(local.ok(&["suspend", "o-9"]).trim(), "o-9: RUNNING -> SUSPENDED");
    let waited = local.stm(&["send", "o-9", r#"Submit:{"amount": 1.0}"#, "--wait", "2"]);
    let (line, code) = failure(&waited);
    assert_eq!(code, 1);
    assert!(
        line.starts_with("error: Submit (event id ")
            && line.ends_with(
                "was queued but not processed within 2 s: o-9 is SUSPENDED: its events wait until `stm resume o-9`"
            ),
        "{line}"
    );
    assert_eq!(local.ok(&["resume", "o-9"]).trim(), "o-9: SUSPENDED -> RUNNING");
    local.wait_show("o-9", &["at Payment.Charging"]);

    // a cooperative cancel (a Draft order models `on Cancel`): the reason is the Cancel's
    // data, and `show` shows it; a forceful one says that the reason is not kept
    local.ok(&["create", "examples/order.stm", "Order", "--id", "o-10"]);
    local.wait_show("o-10", &["at Draft"]);
    let said = local.ok(&["cancel", "o-10", "--reason", r#"{"why": "customer"}"#]);
    assert!(
        said.starts_with("o-10: RUNNING -> CANCELLING  (cooperative: "),
        "{said}"
    );
    let shown = local.wait_show("o-10", &["DONE", "at Withdrawn", "outcome withdrawn"]);
    assert_eq!(
        shown.lines().nth(1),
        Some(r#"  cancel reason: {"why":"customer"}"#),
        "{shown}"
    );
    let said = local.ok(&["cancel", "o-9", "--reason", r#"{"why": "late"}"#]);
    assert!(
        said.starts_with("o-9: RUNNING -> CANCELLED  (forceful: ") && said.contains("it is not kept"),
        "{said}"
    );

    let mistakes: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec!["show", "nope"],
            1,
            "error: no execution \"nope\" in this deployment (`stm list` shows them)",
        ),
        (
            vec!["cancel", "nope"],
            1,
            "error: no execution \"nope\" in this deployment (`stm list` shows them)",
        ),
        (
            vec!["trace", "nope"],
            1,
            "error: no execution \"nope\" in this deployment (`stm list` shows them)",
        ),
        (
            vec!["send", "nope", "Checkout"],
            1,
            "error: no execution \"nope\" in this deployment (`stm list` shows them)",
        ),
        (
            vec!["send", "co-1", "Bogus"],
            2,
            "error: co-1 is a Checkout and no state of it handles \"Bogus\" (nothing sent): it knows \
             Checkout, Charged, Declined, Reserved, OutOfStock, and the control events Cancel, Reset, SetState",
        ),
        (
            vec!["send", "o-9", "Submit:{not json"],
            2,
            "error: the data of Submit is not valid JSON (expecting a property name in double quotes at line 1 column 2)",
        ),
        (
            vec!["send", "o-9", "Submit:[1]"],
            2,
            "error: the data of Submit must be a JSON object, got list",
        ),
        (
            vec!["suspend", "co-1"],
            1,
            "error: co-1 is already DONE: nothing to suspend",
        ),
        (
            vec!["cancel", "co-1"],
            1,
            "error: co-1 is already DONE: nothing to cancel",
        ),
        (
            vec!["resume", "o-9"],
            1,
            "error: o-9 is already CANCELLED: nothing to resume",
        ),
        (
            vec!["suspend", "o-10"],
            1,
            "error: o-10 is already DONE: nothing to suspend",
        ),
        (
            vec!["create", "examples/missing.stm", "Order"],
            2,
            "error: no such file: examples/missing.stm",
        ),
        (
            vec!["create", "examples/order.stm", "Order", "--id", "o-9"],
            1,
            "error: execution \"o-9\" already exists",
        ),
        (
            vec!["list", "--status", "BOGUS"],
            2,
            "error: --status \"BOGUS\" is not a status: use one of PENDING, RUNNING, SUSPENDED, \
             CANCELLING, CANCELLED, FAILED, DONE",
        ),
        (
            vec!["create", "examples/order.stm", "Order", "--seed", "[1]"],
            2,
            "error: --seed must be a JSON object, got list",
        ),
    ];
    for (args, code, message) in mistakes {
        let (line, got) = failure(&local.stm(&args));
        assert_eq!((line.as_str(), got), (message, code), "stm {args:?}");
    }

    // a machine the file lacks: harel's message with the file's machines as the hint
    let out = local.stm(&["create", "examples/order.stm", "Nope"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: no machine named 'Nope'") && err.contains("the file declares: Order"),
        "{err}"
    );

    // no emulator where the export line would have pointed: one line, the address named
    let (line, code) = failure(&local.stm(&["show", "co-1", "--endpoint", "http://127.0.0.1:9"]));
    assert_eq!(code, 1);
    assert!(line.contains("127.0.0.1:9"), "{line}");
    assert!(line.len() < 400, "one readable line: {line}");
}

#[test]
fn the_commands_that_need_no_deployment_and_their_mistakes() {
    // validate: several files, a directory, harel's FILE NAME form
    let all = stm_alone(&["validate", "examples/"]);
    assert!(all.status.success(), "{}", stderr(&all));
    let text = without_versions(&stdout(&all));
    for machine in ["Order: ok", "Checkout: ok"] {
        assert!(text.lines().any(|l| l == machine), "{text}");
    }
    assert!(
        text.lines().last().unwrap_or_default().starts_with("checked ")
            && text.trim_end().ends_with("all valid"),
        "{text}"
    );
    let two = stm_alone(&["validate", "examples/order.stm", "examples/checkout.stm"]);
    assert_eq!(
        without_versions(&stdout(&two)),
        "Order: ok\nCheckout: ok\nchecked 2 machines in 2 files: all valid\n"
    );
    let one = stm_alone(&["validate", "examples/order.stm", "Order"]);
    let version = stm_core::version::version_of(
        &stm_core::dsl::load_definition_file(&common::repo().join("examples/order.stm"), None)
            .expect("loads"),
    );
    assert_eq!(
        stdout(&one),
        format!("Order: ok (version {version})\n"),
        "harel's output, and the version"
    );
    let bad_name = stm_alone(&["validate", "examples/order.stm", "Nope"]);
    assert_eq!(bad_name.status.code(), Some(2), "{}", stderr(&bad_name));

    // a file with an error: its location, exit 1
    let dir = std::env::temp_dir().join(format!("stm-newcomer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let broken = dir.join("broken.stm");
    std::fs::write(
        &broken,
        "machine M {\n  initial A\n  state A {}\n  from A to Nowhere on Go\n}\n",
    )
    .expect("write");
    let out = stm_alone(&["validate", broken.to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    // an undeclared event (a validation finding) is shown as the unresolved target (a
    // loader error) is: one shape, with where, the line, a caret and the did-you-mean
    let undeclared = dir.join("undeclared.stm");
    std::fs::write(
        &undeclared,
        "event Go {}\nmachine M {\n  initial A\n  state A {}\n  final B success\n  from A to B on Gox\n}\n",
    )
    .expect("write");
    let out = stm_alone(&["validate", undeclared.to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "error[unknown_event]: transition references undeclared event 'Gox'\n --> {}:6:18\n  |\n\
             6 |   from A to B on Gox\n  |                  ^\n  = hint: did you mean `Go`?\n",
            undeclared.display()
        )
    );
    // `stm run --validate` shows the same finding the same way
    let ran = stm_alone(&[
        "run",
        "--validate",
        undeclared.to_str().expect("utf-8 path"),
        "-e",
        "Go",
    ]);
    assert_eq!(ran.status.code(), Some(1), "{}{}", stdout(&ran), stderr(&ran));
    assert!(
        stderr(&ran).contains(&format!(
            "error[unknown_event]: transition references undeclared event 'Gox'\n --> {}:6:18\n",
            undeclared.display()
        )),
        "{}",
        stderr(&ran)
    );
    let unresolved = format!(
        "error: cannot resolve transition target 'Nowhere' from machine M\n --> {}:4:13\n  |\n\
         4 |   from A to Nowhere on Go\n  |             ^\n",
        broken.display()
    );
    assert_eq!(
        stdout(&stm_alone(&["validate", broken.to_str().expect("utf-8 path")])),
        unresolved
    );

    for (args, code, message) in [
        (
            vec!["run", "examples/nope.stm"],
            2,
            "error: no such file: examples/nope.stm",
        ),
        (
            vec!["run", "examples"],
            2,
            "error: examples is a directory: name a .stm file",
        ),
        (
            vec!["run", "examples/order.stm", "-e", ""],
            2,
            "error: -e \"\": the event kind is empty (KIND or KIND:JSON)",
        ),
        (
            vec!["run", "examples/order.stm", "--seed", "3"],
            2,
            "error: --seed must be a JSON object, got int",
        ),
        (
            vec!["validate", "examples/missing/"],
            2,
            "error: no such file or directory: examples/missing/",
        ),
    ] {
        let (line, got) = failure(&stm_alone(&args));
        assert_eq!((line.as_str(), got), (message, code), "stm {args:?}");
    }
    std::fs::remove_dir_all(&dir).expect("clean up");

    // help: the exit codes, and each subcommand with only its own flags
    let help = stdout(&stm_alone(&["--help"]));
    assert!(
        help.contains("Exit codes:") && help.contains("2  usage"),
        "{help}"
    );
    let run_help = stdout(&stm_alone(&["run", "--help"]));
    for foreign in ["--endpoint", "--prefix", "--queue", "--definitions", "--region"] {
        assert!(
            !run_help.contains(foreign),
            "run --help shows {foreign}:\n{run_help}"
        );
    }
    // a flag a command would not use is refused, never accepted and ignored
    // (`list --in` reads the machine's states from --definitions, `trace --explain` the
    // machines' transitions)
    for (command, foreigners) in [
        ("show", &["--queue", "--definitions"][..]),
        ("trace", &["--queue"][..]),
        ("list", &["--queue"][..]),
    ] {
        let help = stdout(&stm_alone(&[command, "--help"]));
        assert!(help.contains("--prefix"), "{help}");
        for foreign in foreigners {
            assert!(
                !help.contains(foreign),
                "{command} --help shows {foreign}:\n{help}"
            );
        }
    }
    let refused = stm_alone(&["show", "co-1", "--queue", "q.fifo"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let send_help = stdout(&stm_alone(&["send", "--help"]));
    assert!(
        send_help.contains("--wait") && send_help.contains("--endpoint"),
        "{send_help}"
    );
    // every argument has a description
    for command in ["validate", "render", "run", "create", "send", "show", "cancel"] {
        let help = stdout(&stm_alone(&[command, "--help"]));
        let args = help.split("Arguments:").nth(1).unwrap_or_default();
        let args = args.split("Options:").next().unwrap_or_default();
        for line in args.lines().filter(|l| l.trim_start().starts_with(['<', '['])) {
            assert!(
                line.trim().split("  ").filter(|p| !p.trim().is_empty()).count() >= 2,
                "stm {command}: an argument without a description: {line}"
            );
        }
    }
}

/// `stm local` binds remote actions from the worker's own configuration: a bad bound on
/// them fails the start as the worker's cold start would, naming the variable.
#[test]
fn stm_local_reads_the_remote_action_settings_as_the_worker_does() {
    let moto = stm_testkit::moto_blocking();
    let prefix = stm_testkit::unique_prefix("actions");
    let env = vec![
        ("STM_EMULATOR".to_string(), "1".to_string()),
        ("STM_ENDPOINT_URL".to_string(), moto.endpoint().to_string()),
        ("STM_TABLE_PREFIX".to_string(), prefix.clone()),
        ("STM_QUEUE_URL".to_string(), format!("{prefix}-events.fifo")),
        ("AWS_REGION".to_string(), "us-east-1".to_string()),
    ];
    let out = common::stm_local(&env)
        .env("STM_ACTIONS", "notify=https://hooks.example.com/notify")
        .env("STM_ACTION_TIMEOUT_SECONDS", "0")
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run stm local");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(r#"STM_ACTION_TIMEOUT_SECONDS="0": expected seconds, above 0 and at most 900"#),
        "{err}"
    );
}
