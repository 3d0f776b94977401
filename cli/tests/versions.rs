//! `stm versions` and `stm migrate` through the binary, as docs/versions.md runs them:
//! freeze, check (examples/order.stm against an edited copy prints the states at risk,
//! exit 1), in-use against a `stm local` deployment, and a migration
//! refused without a map, dry-run, then done with one.

mod common;

use std::path::{Path, PathBuf};

use common::{repo, stderr, stdout, stm_alone, Local};

/// A definitions folder holding a copy of examples/order.stm.
fn order_folder(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stm-cli-versions-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("make the folder");
    std::fs::copy(repo().join("examples/order.stm"), dir.join("order.stm")).expect("copy order.stm");
    dir
}

/// Order v2: `Shipping` renamed `Dispatch`, the payment deadline doubled.
fn edit_order(dir: &Path) {
    let path = dir.join("order.stm");
    let text = std::fs::read_to_string(&path).expect("read");
    let edited = text
        .replace("state Shipping {", "state Dispatch {")
        .replace("to Shipping on PaymentOk", "to Dispatch on PaymentOk")
        .replace("from Shipping to Delivered", "from Dispatch to Delivered")
        .replace("timeout 3600", "timeout 7200");
    assert_ne!(text, edited);
    std::fs::write(path, edited).expect("write");
}

fn version_in(listing: &str, machine: &str) -> String {
    listing
        .lines()
        .find_map(|l| l.strip_prefix("versions:  "))
        .and_then(|v| v.split(", ").find_map(|m| m.strip_prefix(&format!("{machine} "))))
        .unwrap_or_else(|| panic!("no version of {machine} in:\n{listing}"))
        .to_string()
}

#[test]
fn freeze_and_check_before_a_deploy() {
    let dir = order_folder("check");
    let folder = dir.to_str().expect("utf-8 path");
    let v1 = version_in(&stdout(&stm_alone(&["list", "examples/order.stm"])), "Order");
    let frozen = stm_alone(&["versions", "freeze", folder, "--label", "v1"]);
    assert!(frozen.status.success(), "{}", stderr(&frozen));
    assert_eq!(
        stdout(&frozen),
        format!("froze Order {v1} (v1) -> versions/Order@{v1}.json\n")
    );
    let again = stm_alone(&["versions", "freeze", folder]);
    assert_eq!(stdout(&again), format!("Order {v1}: already in versions/\n"));

    edit_order(&dir);
    let edited = dir.join("order.stm");
    let check = stm_alone(&[
        "versions",
        "check",
        "examples/order.stm",
        edited.to_str().expect("utf-8"),
    ]);
    assert_eq!(
        check.status.code(),
        Some(1),
        "at risk: exit 1\n{}",
        stderr(&check)
    );
    let report = stdout(&check);
    for line in [
        "  at risk  state Shipping: removed (renamed to Dispatch?): an execution there has no state to be in",
        "  at risk  state Payment: timeout 3600.0 s -> 7200.0 s: an execution already there keeps the timer armed for the old value",
        "  safe     state Dispatch: added (a leaf)",
        "Order: 4 at risk, 2 safe",
    ] {
        assert!(report.lines().any(|l| l == line), "no line {line:?} in:\n{report}");
    }
    // the frozen file against the folder says the same
    let frozen_file = dir.join(format!("versions/Order@{v1}.json"));
    let same = stm_alone(&[
        "versions",
        "check",
        frozen_file.to_str().expect("utf-8"),
        folder,
        "Order",
    ]);
    assert_eq!(stdout(&same), report);
    // no change: exit 0
    let unchanged = stm_alone(&["versions", "check", "examples/order.stm", "examples/order.stm"]);
    assert!(unchanged.status.success());
    assert_eq!(stdout(&unchanged), format!("Order: unchanged ({v1})\n"));
    // a frozen file edited by hand is refused, with what to do
    let text = std::fs::read_to_string(&frozen_file).expect("read");
    std::fs::write(&frozen_file, text.replace("\"Draft\"", "\"Drafted\"")).expect("write");
    let tampered = stm_alone(&["versions", "check", frozen_file.to_str().expect("utf-8"), folder]);
    assert_eq!(tampered.status.code(), Some(1));
    assert!(
        stderr(&tampered).contains("it was edited after freezing; freeze it again from its source"),
        "{}",
        stderr(&tampered)
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn in_use_and_migrate_against_a_deployment() {
    let dir = order_folder("in-use");
    let folder = dir.to_str().expect("utf-8 path").to_string();
    let local = Local::start_with("versions", &dir, &[]);
    let v1 = version_in(&local.ok(&["list", "examples/order.stm"]), "Order");
    for id in ["v-1", "v-2"] {
        local.ok(&["create", "examples/order.stm", "Order", "--id", id]);
        local.ok(&["send", id, r#"Submit:{"amount": 5}"#]);
        local.wait_show(id, &["at Payment.Charging"]);
    }
    let used = local.ok(&["versions", "in-use", "--definitions", &folder]);
    assert!(
        used.starts_with(&format!("Order {v1} (current): 2 live executions\n")),
        "{used}"
    );
    let shown = local.ok(&["show", "v-1"]);
    assert!(
        shown.lines().any(|l| l == format!("  machine version: {v1}")),
        "{shown}"
    );
    assert!(used.lines().any(|l| l.trim() == "2  Payment.Charging"), "{used}");

    // the next deploy: v1 frozen, order.stm edited
    local.ok(&["versions", "freeze", &folder]);
    edit_order(&dir);
    let v2 = version_in(
        &local.ok(&["list", dir.join("order.stm").to_str().expect("utf-8")]),
        "Order",
    );
    let used = local.ok(&["versions", "in-use", "--definitions", &folder]);
    assert!(
        used.starts_with(&format!(
            "Order {v1} (retained): 2 live executions, 2 in states the current version puts at risk\n"
        )),
        "{used}"
    );
    assert!(
        used.lines().any(|l| l.trim() == "2  Payment.Charging  at risk"),
        "{used}"
    );

    // Payment exists in v2: this one moves without a map, Shipping would need one
    let dry = local.ok(&[
        "migrate",
        "v-1",
        "--to",
        &v2,
        "--dry-run",
        "--definitions",
        &folder,
    ]);
    assert_eq!(dry, format!("would migrate v-1: {v1} -> {v2}\n"));
    let unknown = local.stm(&[
        "migrate",
        "v-1",
        "--to",
        "0000000000000000",
        "--definitions",
        &folder,
    ]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        stderr(&unknown).contains("version 0000000000000000 of Order is not deployed here"),
        "{}",
        stderr(&unknown)
    );
    let bad_map = local.stm(&[
        "migrate",
        "v-1",
        "--to",
        &v2,
        "--map",
        "Shipping",
        "--definitions",
        &folder,
    ]);
    assert_eq!(bad_map.status.code(), Some(2), "{}", stderr(&bad_map));
    assert!(
        stderr(&bad_map).contains("write it OLD.PATH=NEW.PATH"),
        "{}",
        stderr(&bad_map)
    );
    let moved = local.ok(&["migrate", "v-1", "--to", &v2, "--definitions", &folder]);
    assert_eq!(moved, format!("migrated v-1: {v1} -> {v2}\n"));
    let used = local.ok(&["versions", "in-use", "--definitions", &folder]);
    assert!(
        used.contains(&format!("Order {v2} (current): 1 live execution\n")),
        "{used}"
    );
    // the rest pinned to v1, in batches
    let all = local.ok(&["migrate", "--all-at", &v1, "--to", &v2, "--definitions", &folder]);
    assert_eq!(
        all,
        format!("migrated v-2: {v1} -> {v2}\nprogress: 1 migrated, 0 refused\n")
    );
    let used = local.ok(&["versions", "in-use", "--definitions", &folder]);
    assert!(
        used.starts_with(&format!("Order {v2} (current): 2 live executions\n")),
        "{used}"
    );
    let not_a_version = local.stm(&["migrate", "v-1", "--to", "v2", "--definitions", &folder]);
    assert_eq!(not_a_version.status.code(), Some(2));
    assert!(
        stderr(&not_a_version).contains("\"v2\" is not a version: a version is 16 hex digits"),
        "{}",
        stderr(&not_a_version)
    );
    // redrive takes only a FAILED execution (its rules are shared/runtime/tests/redrive.rs')
    let not_failed = local.stm(&["redrive", "v-1", "--at", "Draft"]);
    assert_eq!(not_failed.status.code(), Some(1));
    assert!(
        stderr(&not_failed).contains("v-1 is RUNNING, not FAILED: nothing to redrive"),
        "{}",
        stderr(&not_failed)
    );
    drop(local);
    let _ = std::fs::remove_dir_all(dir);
}
