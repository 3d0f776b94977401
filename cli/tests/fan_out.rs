//! A fan-out of 1,000 children on `stm local`, over moto behind the strict AWS layer: the
//! parent's one commit holds ten times a transaction's 100 items of spawn intents (packed
//! into a few rows), the worker's inline flush and the relay start every child through
//! SQS, and each child's `Finished` comes back to the parent, which joins all of them.
//! What a user runs, process for process: `stm local` in one shell, `stm create` and
//! `stm show` from another.

mod common;

use std::time::{Duration, Instant};

use common::{repo, Local};
use serde_json::{json, Value};

const WIDTH: usize = 1_000;

#[test]
fn a_fan_out_of_a_thousand_children_joins_on_stm_local() {
    let machines = repo().join("cli/tests/machines");
    let local = Local::start_with("fanout", &machines, &[]);
    let file = machines.join("fan_out.stm");
    let recipients: Vec<String> = (0..WIDTH).map(|n| format!("r{n}")).collect();
    let seed = json!({ "recipients": recipients }).to_string();
    let started = Instant::now();
    local.ok(&[
        "create",
        file.to_str().expect("a UTF-8 path"),
        "FanOut",
        "--id",
        "wide",
        "--seed",
        &seed,
    ]);

    // the parent alone (`--json` reads no child), until it leaves its fan-out state
    let deadline = Instant::now() + Duration::from_secs(600);
    let parent = loop {
        let shown: Value =
            serde_json::from_str(&local.ok(&["show", "wide", "--json"])).expect("show --json is JSON");
        if shown["status"] != "RUNNING" && shown["status"] != "PENDING" {
            break shown;
        }
        assert!(
            Instant::now() < deadline,
            "the fan-out did not join in 10 minutes: {} of {WIDTH} children finished\n{}",
            shown["children"]
                .as_object()
                .map_or(0, |c| c.values().filter(|c| c["finished"] == true).count()),
            local.console()
        );
        std::thread::sleep(Duration::from_secs(2));
    };
    let took = started.elapsed();
    assert_eq!(
        (&parent["status"], &parent["active_path"], &parent["error"]),
        (&json!("DONE"), &json!("AllSent"), &Value::Null),
        "the parent joined: {parent}"
    );
    let children = parent["children"].as_object().expect("children");
    assert_eq!(children.len(), WIDTH, "one child per recipient");
    assert!(
        children
            .values()
            .all(|c| c["finished"] == true && c["outcome"] == "success"),
        "every child finished with success"
    );

    // each child exists once, finished where its machine ends
    let tree = local.ok(&["show", "wide"]);
    let sent = tree
        .lines()
        .filter(|l| l.starts_with("    wide:") && l.contains("[Notifier] DONE  at Sent"))
        .count();
    assert_eq!(sent, WIDTH, "{WIDTH} children DONE at Sent:\n{tree}");
    let console = local.console();
    for needle in ["  ERROR  ", "poison"] {
        assert!(
            !console.contains(needle),
            "nothing failed or retried ({needle:?}):\n{console}"
        );
    }
    println!("a fan-out of {WIDTH} children started and joined on stm local in {took:.2?}");
}
