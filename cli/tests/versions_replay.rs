//! `stm versions replay`: traces recorded by `stm local` on moto (a DONE order, one that
//! went through a payment retry and its timer, one still in Draft) replayed on the
//! unchanged machine and on one with a planted change, from the store and from a purge
//! archive; and the bad input, each one line and exit 2.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{repo, stderr, stdout, stm_alone, Local};

/// examples/order.stm with `choose`'s guard flipped: a first PaymentFailed gives up.
fn flipped(dir: &Path) -> PathBuf {
    let order = std::fs::read_to_string(repo().join("examples/order.stm")).expect("order.stm");
    let guard = "when context.attempts >= context.max_attempts to GaveUp";
    assert!(order.contains(guard), "examples/order.stm changed: {guard}");
    let file = dir.join("flipped.stm");
    std::fs::write(
        &file,
        order.replace(guard, "when context.attempts < context.max_attempts to GaveUp"),
    )
    .expect("flipped.stm");
    file
}

fn scratch() -> PathBuf {
    stm_testkit::scratch_dir("versions-replay")
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

#[test]
fn replay_passes_the_unchanged_machine_and_names_a_planted_difference() {
    let dir = scratch();
    let flipped = flipped(&dir);
    let flipped = flipped.to_str().expect("utf-8");
    let local = Local::start("replay");
    for id in ["o-1", "o-2", "o-3"] {
        local.ok(&["create", "examples/order.stm", "Order", "--id", id]);
        local.wait_show(id, &["at Draft"]);
    }
    local.ok(&["send", "o-1", r#"Submit:{"amount": 42.5}"#]);
    local.ok(&["send", "o-1", r#"PaymentOk:{"receipt": "r-1"}"#]);
    local.ok(&["send", "o-1", "Shipped"]);
    local.wait_show("o-1", &["DONE"]);
    // o-2: a failed payment, its backoff's 5 s timer fired by the sweeper, then paid
    local.ok(&["send", "o-2", r#"Submit:{"amount": 7}"#]);
    local.ok(&["send", "o-2", r#"PaymentFailed:{"reason": "card declined"}"#]);
    local.wait_show("o-2", &["at Payment.Backoff"]);
    local.wait_show("o-2", &["at Payment.Charging"]);
    local.ok(&["send", "o-2", r#"PaymentOk:{"receipt": "r-2"}"#]);
    local.ok(&["send", "o-2", "Shipped"]);
    local.wait_show("o-2", &["DONE"]);

    // (1) the store, the machine unchanged: every step as recorded
    let out = local.stm(&[
        "versions",
        "replay",
        "examples/order.stm",
        "--from-traces",
        "store",
    ]);
    assert_eq!(code(&out), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out),
        "replayed 3 executions on examples/order.stm: no difference\n"
    );

    // (2) the planted change: o-2's PaymentFailed gives up; the others are the same
    let out = local.stm(&["versions", "replay", flipped, "--from-traces", "store"]);
    assert_eq!(code(&out), Some(1), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out),
        "o-2 (Order) differs at step 2, PaymentFailed:\n  path: recorded Payment.Backoff, new GaveUp\n  \
         actions: recorded harel.lib.exponential_backoff, new none\n  context.attempts: recorded 1, new 0\n  \
         context.retry_in: recorded 5, new (absent)\n",
        "{}",
        stderr(&out)
    );
    assert_eq!(
        stderr(&out),
        format!("error: 1 of 3 executions replayed would differ on {flipped}\n")
    );
    // --definition and --limit select
    let out = local.stm(&[
        "versions",
        "replay",
        flipped,
        "--from-traces",
        "store",
        "--definition",
        "Order",
        "--limit",
        "1",
    ]);
    assert!(matches!(code(&out), Some(0 | 1)), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("replayed 1 execution on") || stderr(&out).contains("1 of 1 execution"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );

    // (3) a purge archive: o-1 and o-2 purged into it
    let archive = dir.join("purged.jsonl");
    let archive = archive.to_str().expect("utf-8");
    local.ok(&["purge", "--older-than", "0", "--archive", archive]);
    let out = stm_alone(&[
        "versions",
        "replay",
        "examples/order.stm",
        "--from-traces",
        archive,
    ]);
    assert_eq!(code(&out), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out),
        "replayed 2 executions on examples/order.stm: no difference\n"
    );
    let out = stm_alone(&["versions", "replay", flipped, "--from-traces", archive]);
    assert_eq!(code(&out), Some(1), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).starts_with("o-2 (Order) differs at step 2, PaymentFailed:\n"),
        "{}",
        stdout(&out)
    );
    drop(local);

    // (4) bad input: one line naming the flag, file or machine, exit 2
    let headless = trace_without_start(&dir, archive);
    let not_archive = repo().join("examples/order.stm");
    let not_archive = not_archive.to_str().expect("utf-8");
    for (args, said) in [
        (
            vec![
                "examples/order.stm",
                "--from-traces",
                archive,
                "--definition",
                "Nope",
            ],
            "error: --definition Nope: no machine named \"Nope\" in examples/order.stm\n".to_string(),
        ),
        (
            vec!["examples/order.stm", "--from-traces", not_archive],
            format!("error: {not_archive}:1: not a purge archive: not JSON: ",),
        ),
        (
            vec!["examples/order.stm", "--from-traces", &headless],
            format!(
                "error: nothing to replay: 1 execution of Order in {headless}, none replayable (o-1: its \
                 trace begins at step 1 (Submit), not at its Start"
            ),
        ),
        (
            vec!["examples/signup.stm", "--from-traces", archive],
            format!("error: nothing to replay: no execution of Signup in {archive}\n"),
        ),
        (
            vec!["examples/nope.stm", "--from-traces", archive],
            "error: no such file or directory: examples/nope.stm\n".to_string(),
        ),
        (
            vec!["examples/order.stm", "--from-traces", "/nonexistent/purged.jsonl"],
            "error: cannot read /nonexistent/purged.jsonl: No such file or directory".to_string(),
        ),
    ] {
        let mut argv = vec!["versions", "replay"];
        argv.extend(args.iter().copied());
        let out = stm_alone(&argv);
        let err = stderr(&out);
        assert_eq!(code(&out), Some(2), "{argv:?}: {}{err}", stdout(&out));
        assert!(err.starts_with(&said), "{argv:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{argv:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An archive of o-1 alone with its trace's first step (its Start) cut off, as the trace
/// ring leaves a long trace.
fn trace_without_start(dir: &Path, archive: &str) -> String {
    let text = std::fs::read_to_string(archive).expect("archive");
    let line = text
        .lines()
        .find(|l| l.starts_with(r#"{"root_id":"o-1""#))
        .expect("o-1 archived");
    let mut bundle: serde_json::Value = serde_json::from_str(line).expect("json");
    let steps = bundle["traces"]["o-1"].as_array_mut().expect("o-1's trace");
    steps.remove(0);
    let file = dir.join("headless.jsonl");
    std::fs::write(&file, format!("{bundle}\n")).expect("headless.jsonl");
    file.to_str().expect("utf-8").to_string()
}

/// The archive the book's exit-code table replays (o-1 paid and delivered, o-2 through a
/// failed payment, its backoff timer and a second charge), replayed with no deployment:
/// the unchanged machine, a renamed state, a timer's new delay, a final state's new outcome.
#[test]
fn the_books_archive_replays_and_each_kind_of_change_shows() {
    let dir = std::env::temp_dir().join(format!("stm-versions-replay-book-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    let archive = "cli/tests/machines/replay/purged.jsonl";
    let order = std::fs::read_to_string(repo().join("examples/order.stm")).expect("order.stm");
    let variant = |name: &str, from: &str, to: &str| {
        assert!(order.contains(from), "examples/order.stm changed: {from}");
        let file = dir.join(format!("{name}.stm"));
        std::fs::write(&file, order.replace(from, to)).expect("a variant");
        file.to_str().expect("utf-8").to_string()
    };
    let replay = |new: &str| {
        let out = stm_alone(&["versions", "replay", new, "--from-traces", archive]);
        (code(&out), stdout(&out), stderr(&out))
    };

    assert_eq!(
        replay("examples/order.stm"),
        (
            Some(0),
            "replayed 2 executions on examples/order.stm: no difference\n".into(),
            String::new()
        )
    );

    let renamed = variant("renamed", "Shipping", "Dispatch");
    let (exit, out, err) = replay(&renamed);
    assert_eq!(exit, Some(1), "{out}{err}");
    assert_eq!(
        out,
        "o-1 (Order) differs at step 2, PaymentOk:\n  path: recorded Shipping, new Dispatch\n\
         o-2 (Order) differs at step 4, PaymentOk:\n  path: recorded Shipping, new Dispatch\n"
    );
    assert_eq!(
        err,
        format!("error: 2 of 2 executions replayed would differ on {renamed}\n")
    );

    // the backoff's timer: 60 s instead of the 5 s o-2's recorded Timeout fired after
    let slower = variant("slower", "timeout context retry_in", "timeout 60");
    let (exit, out, err) = replay(&slower);
    assert_eq!(exit, Some(1), "{out}{err}");
    assert_eq!(
        out,
        "o-2 (Order) differs at step 3, Timeout:\n  timer Payment.Backoff: recorded fired, new armed for 55.0 s later\n"
    );

    // a timer NEW adds, due long before a recorded step: o-1 shipped two minutes after
    // it was paid, and NEW gives Shipping 30 s
    let text = std::fs::read_to_string(repo().join(archive)).expect("the archive");
    let mut late = String::new();
    for line in text.lines() {
        let mut bundle: serde_json::Value = serde_json::from_str(line).expect("json");
        if bundle["root_id"] == "o-1" {
            let shipped = &mut bundle["traces"]["o-1"][3];
            assert_eq!(shipped["event_kind"], "Shipped");
            let at = shipped["timestamp"].as_f64().expect("a time") + 120.0;
            shipped["timestamp"] = at.into();
            bundle["executions"][0]["updated_at"] = at.into();
        }
        late.push_str(&format!("{bundle}\n"));
    }
    let late_archive = dir.join("late.jsonl");
    std::fs::write(&late_archive, late).expect("late.jsonl");
    let late_archive = late_archive.to_str().expect("utf-8");
    let out = stm_alone(&[
        "versions",
        "replay",
        "examples/order.stm",
        "--from-traces",
        late_archive,
    ]);
    assert_eq!(code(&out), Some(0), "{}{}", stdout(&out), stderr(&out));
    let timed = variant(
        "timed",
        "  state Shipping {\n",
        "  state Shipping {\n    timeout 30\n",
    );
    let out = stm_alone(&["versions", "replay", &timed, "--from-traces", late_archive]);
    assert_eq!(code(&out), Some(1), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).starts_with(
            "o-1 (Order) differs at step 3, Shipped:\n  timer Shipping: recorded not fired before this step, new fires 9"
        ),
        "{}",
        stdout(&out)
    );

    // the same path all along, another outcome at the end
    let outcome = variant("outcome", "final Delivered success", "final Delivered delivered");
    let (exit, out, err) = replay(&outcome);
    assert_eq!(exit, Some(1), "{out}{err}");
    assert!(
        out.contains("o-1 (Order) differs at step 3, Shipped:\n  outcome: recorded success, new delivered\n"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
