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
        let listed = local.ok(&["list", "--in", state, "--definition", "Order"]);
        assert_eq!(ids(&listed), scan_in(&scan, state), "--in {state}:\n{listed}");
    }
    let charging = local.ok(&["list", "--in", "Payment", "--definition", "Order"]);
    assert!(
        charging
            .lines()
            .any(|l| l.starts_with("s-4 ") && l.contains("SUSPENDED") && l.contains("Payment.Charging")),
        "a suspended execution stays in its state:\n{charging}"
    );
    let suspended = local.ok(&[
        "list",
        "--in",
        "Payment",
        "--definition",
        "Order",
        "--status",
        "SUSPENDED",
    ]);
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
