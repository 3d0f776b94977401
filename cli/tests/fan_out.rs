//! A wide fan-out on `stm local`, over moto behind the strict AWS layer: the parent's one
//! commit holds more spawn intents than a transaction's 100 items (packed into a few rows),
//! the worker's inline flush and the relay start every child through SQS, and each
//! child's `Finished` comes back to the parent, which joins all of them. What a user runs,
//! process for process: `stm local` in one shell, `stm create` and `stm show` from another.
//!
//! The suite's run draws 250 children (two and a half transactions of intents, so a row is
//! cut and the last one is partial), which joins in about 20 s; 1,000 children take about
//! a minute and a half on 2 cores, so that run is ignored by default and recorded in the
//! book:
//!
//! ```text
//! cargo test -p stm --test fan_out -- --ignored --nocapture
//! STM_FAN_OUT_WIDTH=10000 cargo test -p stm --test fan_out -- --ignored --nocapture
//! ```

mod common;

use std::time::{Duration, Instant};

use common::{repo, Local};
use serde_json::{json, Value};

#[test]
fn a_fan_out_of_250_children_joins_on_stm_local() {
    fan_out_joins(250);
}

#[test]
#[ignore = "a minute and a half on 2 cores: run with --ignored; STM_FAN_OUT_WIDTH sets the width (1,000 by default)"]
fn a_fan_out_of_a_thousand_children_or_more_joins_on_stm_local() {
    let width = match std::env::var("STM_FAN_OUT_WIDTH") {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("STM_FAN_OUT_WIDTH={text:?}: expected a count of children")),
        Err(_) => 1_000,
    };
    fan_out_joins(width);
}

/// Starts a parent of `width` children, waits for the join, and checks every child.
fn fan_out_joins(width: usize) {
    let machines = repo().join("cli/tests/machines");
    let local = Local::start_with("fanout", &machines, &[]);
    let file = machines.join("fan_out.stm");
    let recipients: Vec<String> = (0..width).map(|n| format!("r{n}")).collect();
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
    // ten minutes, or more for a width past 1,000 (the join's pace is about linear)
    let patience = Duration::from_secs(600).max(Duration::from_millis(600 * width as u64));
    let deadline = Instant::now() + patience;
    let parent = loop {
        let shown: Value =
            serde_json::from_str(&local.ok(&["show", "wide", "--json"])).expect("show --json is JSON");
        if shown["status"] != "RUNNING" && shown["status"] != "PENDING" {
            break shown;
        }
        assert!(
            Instant::now() < deadline,
            "the fan-out did not join in {patience:?}: {} of {width} children finished\n{}",
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
    assert_eq!(children.len(), width, "one child per recipient");
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
    assert_eq!(sent, width, "{width} children DONE at Sent:\n{tree}");
    let console = local.console();
    for needle in ["  ERROR  ", "poison"] {
        assert!(
            !console.contains(needle),
            "nothing failed or retried ({needle:?}):\n{console}"
        );
    }
    println!("a fan-out of {width} children started and joined on stm local in {took:.2?}");
}
