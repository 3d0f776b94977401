//! `stm run --events FILE` (or `-`, standard input) delivers the file's events, one a line
//! as `-e` takes them, with the output `-e` gives for the same events; a mistake names
//! the file and its line and runs nothing; `-e` and `--events` together are refused.
//! Files are drawn: their events, data, blank and comment lines, line ends and padding.

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{repo, stderr, stdout, stm_alone, stm_command};
use stm_testkit::{env_u64, Rng, SeedOnFailure};

const FILE: &str = "examples/order.stm";

/// One event of `examples/order.stm`, as `-e` takes it.
fn draw_event(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => format!(r#"Submit:{{"amount": {}.5}}"#, rng.below(100)),
        1 => r#"PaymentFailed:{"reason": "card declined"}"#.to_string(),
        2 => "PaymentFailed".to_string(),
        3 => r#"Timeout:{"path": "Payment.Backoff"}"#.to_string(),
        4 => format!(r#"PaymentOk:{{"receipt": "r-{}"}}"#, rng.below(10)),
        _ => "Shipped".to_string(),
    }
}

/// The file's text for `events`: between them blank and comment lines, each line padded
/// or not, ended by `\n` or `\r\n`, the last one ended or not.
fn file_text(rng: &mut Rng, events: &[String]) -> String {
    let mut text = String::new();
    for (i, event) in events.iter().enumerate() {
        for _ in 0..rng.below(3) {
            text.push_str(["", "   ", "# a comment: -e Nope", "  # indented"][rng.index(4)]);
            text.push_str(if rng.chance(50) { "\n" } else { "\r\n" });
        }
        let pad = ["", " ", "\t", "  "];
        text.push_str(pad[rng.index(pad.len())]);
        text.push_str(event);
        text.push_str(pad[rng.index(pad.len())]);
        let last = i + 1 == events.len();
        if !last || rng.chance(50) {
            text.push_str(if rng.chance(50) { "\n" } else { "\r\n" });
        }
    }
    text
}

fn write_temp(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("stm-run-events-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the events");
    path
}

/// `stm run FILE --events -` with `text` on its standard input.
fn run_stdin(text: &str) -> std::process::Output {
    let mut child = stm_command(&["run", FILE, "--events", "-"], &repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run stm");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(text.as_bytes()).expect("write stdin");
    drop(stdin);
    child.wait_with_output().expect("stm's output")
}

#[test]
fn a_file_of_events_runs_as_the_same_events_given_with_e() {
    let seed = env_u64(stm_env::RUN_EVENTS_SEED, 0x5eed_e7e5);
    let _report = SeedOnFailure::new("run --events", stm_env::RUN_EVENTS_SEED, seed);
    let mut rng = Rng::new(seed);
    for round in 0..6 {
        let events: Vec<String> = (0..rng.between(1, 12)).map(|_| draw_event(&mut rng)).collect();
        let mut args = vec!["run", FILE];
        for event in &events {
            args.extend(["-e", event.as_str()]);
        }
        let by_flags = stm_alone(&args);
        assert!(by_flags.status.success(), "{}", stderr(&by_flags));

        let text = file_text(&mut rng, &events);
        let path = write_temp(&format!("round-{round}.events"), &text);
        let by_file = stm_alone(&["run", FILE, "--events", path.to_str().expect("a UTF-8 path")]);
        assert_eq!(
            (stdout(&by_file), by_file.status.code()),
            (stdout(&by_flags), Some(0)),
            "{events:?} from\n{text:?}\n{}",
            stderr(&by_file)
        );
        let by_stdin = run_stdin(&text);
        assert_eq!(
            (stdout(&by_stdin), by_stdin.status.code()),
            (stdout(&by_flags), Some(0)),
            "{events:?} from standard input\n{text:?}\n{}",
            stderr(&by_stdin)
        );
    }
}

#[test]
fn a_bad_line_is_named_by_its_number_and_nothing_runs() {
    let seed = env_u64(stm_env::RUN_EVENTS_SEED, 0x5eed_e7e5);
    let _report = SeedOnFailure::new("run --events", stm_env::RUN_EVENTS_SEED, seed);
    let mut rng = Rng::new(seed ^ 0xbad);
    let mistakes = [
        (
            "Refund",
            "no state of machine Order handles \"Refund\" (nothing run): it knows ",
        ),
        (
            r#"Submit:{"amount": "three"}"#,
            "event 'Submit' doesn't fit its declaration",
        ),
        (r#"Submit:{"amount": "#, "the data of Submit is not valid JSON"),
        (r#":{"amount": 1.5}"#, "the event kind is empty"),
    ];
    for (mistake, says) in mistakes {
        let mut events: Vec<String> = (0..rng.between(0, 8)).map(|_| draw_event(&mut rng)).collect();
        let at = rng.index(events.len() + 1);
        events.insert(at, mistake.to_string());
        let text = file_text(&mut rng, &events);
        // the line the mistake is on, counted as an editor counts them
        let line = text
            .lines()
            .position(|l| l.trim() == mistake.trim())
            .expect("the mistake is in the file")
            + 1;
        let path = write_temp("bad.events", &text);
        let out = stm_alone(&["run", FILE, "--events", path.to_str().expect("a UTF-8 path")]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(stdout(&out).is_empty(), "nothing ran: {}", stdout(&out));
        let head = format!("error: {} line {line}: ", path.display());
        assert!(
            err.starts_with(&head) && err.contains(says) && err.lines().count() == 1,
            "{mistake} at line {line}, said as {says:?}:\n{err}\nin\n{text:?}"
        );

        let out = run_stdin(&text);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(stdout(&out).is_empty(), "nothing ran: {}", stdout(&out));
        assert!(
            err.starts_with(&format!("error: standard input line {line}: ")) && err.contains(says),
            "{err}"
        );
    }
}

#[test]
fn a_missing_file_or_both_ways_at_once_is_refused() {
    let out = stm_alone(&["run", FILE, "--events", "no/such.events"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error: cannot read --events no/such.events: "),
        "{}",
        stderr(&out)
    );
    let path = write_temp("one.events", "Shipped\n");
    let file = path.to_str().expect("a UTF-8 path");
    // `-e Shipped` goes by the command line's fast path, `-e=Shipped` by clap: both refused
    for flag in [["-e", "Shipped"].as_slice(), ["-e=Shipped"].as_slice()] {
        let mut args = vec!["run", FILE, "--events", file];
        args.extend(flag);
        let out = stm_alone(&args);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{}", stdout(&out));
        assert_eq!(
            stderr(&out).trim_end(),
            "error: give the events with -e or with --events, not both"
        );
    }
}
