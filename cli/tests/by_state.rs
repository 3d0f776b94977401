//! The deployment by state, through the `stm` binary against `stm local` on moto:
//! `stm list --in STATE` and `stm states MACHINE` read the state index, and agree exactly
//! with what a scan of the executions (`stm list`) says. Bad input names the state, the
//! machine or the flag.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{stderr, stdout, Local};

/// `(id, status, active path)` of each Order execution, from the scan (`stm list`).
fn scanned(local: &Local) -> Vec<(String, String, String)> {
    let listed = local.ok(&["list", "--definition", "Order"]);
    listed
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            (cols.len() >= 4).then(|| (cols[0].to_string(), cols[2].to_string(), cols[3].to_string()))
        })
        .collect()
}

/// The ids `stm list --in` printed.
fn ids(listing: &str) -> BTreeSet<String> {
    listing
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// What `stm list --in STATE --definition Order [--status S]` prints.
fn listed_in(local: &Local, state: &str, status: Option<&str>) -> String {
    let mut args = vec!["list", "--in", state, "--definition", "Order"];
    args.extend(status.iter().flat_map(|s| ["--status", *s]));
    local.ok(&args)
}

/// The ids the scan puts in `state` or under it, not DONE or CANCELLED.
fn scan_in(scan: &[(String, String, String)], state: &str) -> BTreeSet<String> {
    scan.iter()
        .filter(|(_, status, path)| {
            status != "DONE"
                && status != "CANCELLED"
                && (path == state || path.starts_with(&format!("{state}.")))
        })
        .map(|(id, _, _)| id.clone())
        .collect()
}

#[test]
fn list_in_and_states_agree_with_a_scan() {
    let local = Local::start("bystate");
    for i in 1..=6 {
        let id = format!("s-{i}");
        local.ok(&["create", "examples/order.stm", "Order", "--id", &id]);
        local.wait_show(&id, &["at Draft"]);
    }
    for id in ["s-1", "s-2", "s-3", "s-4"] {
        local.ok(&["send", id, r#"Submit:{"amount": 5.0}"#]);
        local.wait_show(id, &["at Payment.Charging"]);
    }
    // s-1 goes on to Shipping, then DONE (out of the index); s-4 is suspended in Charging
    local.ok(&["send", "s-1", r#"PaymentOk:{"receipt": "r"}"#]);
    local.ok(&["send", "s-1", "Shipped"]);
    local.wait_show("s-1", &["DONE", "at Delivered"]);
    local.ok(&["send", "s-2", r#"PaymentOk:{"receipt": "r"}"#]);
    local.wait_show("s-2", &["at Shipping"]);
    local.ok(&["suspend", "s-4"]);
    local.wait_show("s-4", &["SUSPENDED"]);

    let scan = scanned(&local);
    assert_eq!(scan.len(), 6, "{scan:?}");
    for state in ["Payment", "Payment.Charging", "Draft", "Shipping"] {
        let listed = listed_in(&local, state, None);
        assert_eq!(ids(&listed), scan_in(&scan, state), "--in {state}:\n{listed}");
    }
    let charging = listed_in(&local, "Payment", None);
    assert!(
        charging
            .lines()
            .any(|l| l.starts_with("s-4 ") && l.contains("SUSPENDED") && l.contains("Payment.Charging")),
        "a suspended execution stays in its state:\n{charging}"
    );
    let suspended = listed_in(&local, "Payment", Some("SUSPENDED"));
    assert_eq!(ids(&suspended), BTreeSet::from(["s-4".to_string()]));

    // nobody has been anywhere for an hour: said plainly, exit 1
    let old = local.stm(&[
        "list",
        "--in",
        "Payment",
        "--definition",
        "Order",
        "--older-than",
        "1h",
    ]);
    assert_eq!(old.status.code(), Some(1), "{}", stderr(&old));
    assert_eq!(
        stderr(&old).trim(),
        "no execution of Order is in Payment for longer than 1h 0m"
    );
    assert!(stdout(&old).is_empty());
    let recent = local.ok(&[
        "list",
        "--in",
        "Payment",
        "--definition",
        "Order",
        "--older-than",
        "0s",
    ]);
    assert_eq!(ids(&recent), scan_in(&scan, "Payment"));

    // stm states: each state's count is the scan's
    let table = local.ok(&["states", "Order"]);
    let counts: BTreeMap<String, usize> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let count = cols.get(1)?.parse::<usize>().ok()?;
            Some((cols[0].to_string(), count))
        })
        .collect();
    for state in [
        "Draft",
        "Payment",
        "Payment.Charging",
        "Payment.Backoff",
        "Shipping",
        "Delivered",
    ] {
        let exactly: usize = scan
            .iter()
            .filter(|(_, status, path)| status != "DONE" && status != "CANCELLED" && path == state)
            .count();
        assert_eq!(counts.get(state), Some(&exactly), "{state} in:\n{table}");
    }
    assert!(
        table
            .lines()
            .last()
            .unwrap_or_default()
            .starts_with("5 executions of Order in "),
        "{table}"
    );
}

#[test]
fn bad_selections_name_what_was_wrong() {
    let local = Local::start("bystate-bad");
    let typo = local.stm(&["list", "--in", "Paymnet", "--definition", "Order"]);
    assert_eq!(typo.status.code(), Some(2));
    assert_eq!(
        stderr(&typo).trim(),
        "error: machine Order has no state \"Paymnet\" (did you mean \"Payment\"?)"
    );
    let no_machine = local.stm(&["list", "--in", "Payment"]);
    assert_eq!(no_machine.status.code(), Some(2));
    assert_eq!(
        stderr(&no_machine).trim(),
        "error: --in needs the machine: pass --definition NAME"
    );
    let unknown = local.stm(&["states", "Nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).starts_with("error: no machine \"Nope\" in "),
        "{}",
        stderr(&unknown)
    );
    let age = local.stm(&[
        "list",
        "--in",
        "Payment",
        "--definition",
        "Order",
        "--older-than",
        "soon",
    ]);
    assert_eq!(age.status.code(), Some(2));
    assert!(stderr(&age).contains("invalid age 'soon'"), "{}", stderr(&age));
    let nothing = local.stm(&["list", "--in", "Draft", "--definition", "Order"]);
    assert_eq!(nothing.status.code(), Some(1));
    assert_eq!(stderr(&nothing).trim(), "no execution of Order is in Draft");
}

/// The `ID: FROM -> TO` lines of a bulk run's output: the ids it changed.
fn changed(output: &str) -> Vec<String> {
    output
        .lines()
        .filter(|l| l.contains(" -> "))
        .filter_map(|l| l.split(':').next().map(str::to_string))
        .collect()
}

#[test]
fn a_bulk_action_by_state_touches_exactly_the_selection_and_resumes_after_a_kill() {
    use std::io::{BufRead as _, BufReader};
    use std::process::{Command, Stdio};

    let local = Local::start("bystate-bulk");
    let created: Vec<String> = (1..=8).map(|i| format!("b-{i}")).collect();
    for id in &created {
        local.ok(&["create", "examples/order.stm", "Order", "--id", id]);
        local.wait_show(id, &["at Draft"]);
    }
    let paying: Vec<&String> = created.iter().take(6).collect();
    for id in &paying {
        local.ok(&["send", id, r#"Submit:{"amount": 1.0}"#]);
        local.wait_show(id, &["at Payment.Charging"]);
    }
    let selection = ["--definition", "Order", "--in", "Payment"];

    // a dry run counts and names them, and changes nothing
    let dry = local.ok(&[&["suspend"][..], &selection, &["--dry-run"]].concat());
    assert!(
        dry.starts_with("would suspend 6 executions of Order in Payment\n"),
        "{dry}"
    );
    assert_eq!(dry.lines().filter(|l| l.starts_with("  b-")).count(), 6, "{dry}");
    let still = listed_in(&local, "Payment", Some("RUNNING"));
    assert_eq!(ids(&still).len(), 6, "a dry run changed something:\n{still}");

    // without --yes and no terminal to ask on: refused
    let unasked = local.stm(&[&["suspend"][..], &selection].concat());
    assert_eq!(unasked.status.code(), Some(2), "{}", stderr(&unasked));
    assert!(stderr(&unasked).contains("pass --yes"), "{}", stderr(&unasked));

    // killed after its second change
    let mut first = Command::new(env!("CARGO_BIN_EXE_stm"))
        .args([&["suspend"][..], &selection, &["--yes", "--rate", "2"]].concat())
        .current_dir(common::repo())
        .env_remove("STM_ACTIONS")
        .envs(local.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the bulk suspend");
    let mut before_kill = String::new();
    {
        let stdout = first.stdout.take().expect("its stdout");
        let mut lines = BufReader::new(stdout).lines();
        while changed(&before_kill).len() < 2 {
            let line = lines.next().expect("a line before the kill").expect("readable");
            before_kill.push_str(&line);
            before_kill.push('\n');
        }
        first.kill().expect("kill it mid-way");
    }
    let _ = first.wait();
    let first_changed = changed(&before_kill);
    assert!(
        first_changed.len() >= 2 && first_changed.len() < 6,
        "{before_kill}"
    );

    // the same command again finishes the job: the rest, each once
    let again = local.ok(&[&["suspend"][..], &selection, &["--yes"]].concat());
    let second_changed = changed(&again);
    let mut all: Vec<String> = first_changed.iter().chain(&second_changed).cloned().collect();
    all.sort();
    let mut expected: Vec<String> = paying.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(
        all, expected,
        "each of the six suspended exactly once:\n{before_kill}---\n{again}"
    );
    assert!(
        again.lines().last().unwrap_or_default().starts_with(&format!(
            "suspended: {} of {} executions of Order in Payment; skipped",
            second_changed.len(),
            second_changed.len()
        )) || first_changed.len() == 6,
        "{again}"
    );
    let suspended = listed_in(&local, "Payment", Some("SUSPENDED"));
    assert_eq!(ids(&suspended).len(), 6, "{suspended}");
    let drafts = listed_in(&local, "Draft", Some("RUNNING"));
    assert_eq!(ids(&drafts).len(), 2, "the drafts were not touched:\n{drafts}");

    // cancel exactly the suspended ones in Payment: the drafts stay
    let cancelled = local.ok(&[
        "cancel",
        "--definition",
        "Order",
        "--in",
        "Payment",
        "--status",
        "SUSPENDED",
        "--yes",
    ]);
    assert_eq!(changed(&cancelled).len(), 6, "{cancelled}");
    assert!(
        cancelled.contains("cancelled: 6 of 6 executions of Order in Payment"),
        "{cancelled}"
    );
    let gone = local.stm(&["list", "--in", "Payment", "--definition", "Order"]);
    assert_eq!(gone.status.code(), Some(1), "{}", stdout(&gone));
    assert_eq!(ids(&listed_in(&local, "Draft", None)).len(), 2);

    // nothing to do: said, with why, exit 1
    let idle = local.stm(&["resume", "--definition", "Order", "--in", "Draft", "--yes"]);
    assert_eq!(idle.status.code(), Some(1));
    assert_eq!(
        stderr(&idle).trim(),
        "nothing to resume: no execution of Order in Draft needs it (2 skipped: 2 RUNNING, not SUSPENDED)"
    );
    // a redrive target the machine does not have
    let nowhere = local.stm(&["redrive", "--definition", "Order", "--at", "Nowhere", "--yes"]);
    assert_eq!(nowhere.status.code(), Some(2));
    assert_eq!(
        stderr(&nowhere).trim(),
        "error: --at: machine Order has no state \"Nowhere\""
    );
    // an id and a selection
    let both = local.stm(&["suspend", "b-7", "--definition", "Order"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(stderr(&both).contains("not both"), "{}", stderr(&both));
}

/// The state index is eventually consistent (the strict layer holds it still here): an
/// execution it still lists in a state it has left is re-read and left out, by the
/// listing and by a bulk action alike.
#[test]
fn a_stale_index_never_lists_or_acts_on_an_execution_that_moved_on() {
    let local = Local::start("bystate-lag");
    let prefix = local
        .env
        .iter()
        .find(|(k, _)| k == "STM_TABLE_PREFIX")
        .map(|(_, v)| v.clone())
        .expect("the stack's prefix");
    for id in ["l-1", "l-2"] {
        local.ok(&["create", "examples/order.stm", "Order", "--id", id]);
        local.wait_show(id, &["at Draft"]);
    }
    local.ok(&["send", "l-1", r#"Submit:{"amount": 1.0}"#]);
    local.wait_show("l-1", &["at Payment.Charging"]);

    let strict = stm_testkit::moto_blocking().strict();
    strict.hold_indexes(&prefix);
    local.ok(&["send", "l-1", r#"PaymentOk:{"receipt": "r"}"#]);
    local.wait_show("l-1", &["at Shipping"]);
    local.ok(&["send", "l-2", r#"Submit:{"amount": 1.0}"#]);
    local.wait_show("l-2", &["at Payment.Charging"]);

    // the held index lists l-1 in Payment and l-2 in Draft; neither is there any more
    for state in ["Payment", "Draft"] {
        let listed = local.stm(&["list", "--in", state, "--definition", "Order"]);
        assert_eq!(
            listed.status.code(),
            Some(1),
            "--in {state}:\n{}",
            stdout(&listed)
        );
        assert_eq!(
            stderr(&listed).trim(),
            format!("no execution of Order is in {state}")
        );
    }
    let bulk = local.stm(&["suspend", "--definition", "Order", "--in", "Payment", "--yes"]);
    assert_eq!(bulk.status.code(), Some(1), "{}", stdout(&bulk));
    assert_eq!(
        stderr(&bulk).trim(),
        "nothing to suspend: no execution of Order in Payment needs it (1 skipped: 1 moved on from Payment.Charging)"
    );
    local.wait_show("l-1", &["RUNNING", "at Shipping"]);

    strict.live_indexes(&prefix);
    let caught_up = listed_in(&local, "Payment", None);
    assert_eq!(ids(&caught_up), BTreeSet::from(["l-2".to_string()]));
}
