//! The README's walkthrough, end to end through the `stm` binary: `stm local` runs the
//! worker, relay and sweeper against moto (over HTTP), and the operator commands
//! (`create`, `send`, `show`, `list`, `trace`, `suspend`, `resume`, `cancel`,
//! `terminate`) drive it from other processes, as a user would from another shell. Bad
//! arguments get a clear error and a non-zero exit.

mod common;

use std::time::{Duration, Instant};

use common::{stderr, Local};

#[test]
fn the_readme_walkthrough_and_every_operator_command() {
    let local = Local::start("ops");

    // an order, start to finish
    assert_eq!(
        local
            .ok(&["create", "examples/order.stm", "Order", "--id", "o-1"])
            .trim(),
        "o-1"
    );
    local.wait_show("o-1", &["[Order] RUNNING", "at Draft"]);
    let sent = local.ok(&["send", "o-1", r#"Submit:{"amount": 42.5}"#]);
    assert!(sent.starts_with("queued Submit (event id "), "{sent}");
    let shown = local.wait_show("o-1", &["at Payment.Charging"]);
    assert!(
        shown.contains(r#""amount":42.5"#),
        "the context is shown: {shown}"
    );
    local.ok(&["send", "o-1", r#"PaymentOk:{"receipt": "r-1"}"#]);
    local.ok(&["send", "o-1", "Shipped"]);
    local.wait_show("o-1", &["DONE", "at Delivered", "outcome success"]);

    let listed = local.ok(&["list", "--status", "DONE"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("o-1 ") && l.contains("Order")),
        "{listed}"
    );
    let listed = local.ok(&["list", "--definition", "Order"]);
    assert!(listed.contains("o-1"), "{listed}");
    let trace = local.ok(&["trace", "o-1"]);
    for step in ["Submit", "Payment.Charging", "PaymentOk", "Shipped", "Delivered"] {
        assert!(trace.contains(step), "trace lacks {step}:\n{trace}");
    }

    // an orthogonal checkout: `show` draws the regions as a tree under the parent
    local.ok(&["create", "examples/checkout.stm", "Checkout", "--id", "c-1"]);
    local.ok(&["send", "c-1", "Checkout"]);
    let tree = local.wait_show("c-1", &["at Fulfil"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut tree = tree;
    while tree
        .lines()
        .filter(|l| l.starts_with("    ") && l.contains("RUNNING"))
        .count()
        < 2
    {
        assert!(Instant::now() < deadline, "regions never showed:\n{tree}");
        std::thread::sleep(Duration::from_millis(300));
        tree = local.ok(&["show", "c-1"]);
    }

    // suspend parks the events; resume lets them through
    local.ok(&["create", "examples/order.stm", "Order", "--id", "o-2"]);
    local.wait_show("o-2", &["at Draft"]);
    assert_eq!(local.ok(&["suspend", "o-2"]).trim(), "o-2: RUNNING -> SUSPENDED");
    local.ok(&["send", "o-2", r#"Submit:{"amount": 1.0}"#]);
    std::thread::sleep(Duration::from_secs(3));
    local.wait_show("o-2", &["SUSPENDED", "at Draft"]);
    assert_eq!(local.ok(&["resume", "o-2"]).trim(), "o-2: SUSPENDED -> RUNNING");
    local.wait_show("o-2", &["RUNNING", "at Payment.Charging"]);

    // cancel (forceful here: Order models no `on Cancel`) and terminate
    let cancelled = local.ok(&["cancel", "o-2", "--reason", r#"{"why": "test"}"#]);
    assert!(cancelled.starts_with("o-2: RUNNING -> CANCEL"), "{cancelled}");
    local.wait_show("o-2", &["CANCELLED"]);
    local.ok(&["create", "examples/order.stm", "Order", "--id", "o-3"]);
    local.wait_show("o-3", &["at Draft"]);
    assert_eq!(
        local.ok(&["terminate", "o-3"]).trim(),
        "o-3: RUNNING -> CANCELLED"
    );

    // bad input: a clear message naming what was wrong, and a failing exit
    for (args, needle) in [
        (vec!["send", "o-1", "Submit:{not json"], "JSON"),
        (vec!["create", "examples/nope.stm", "Order"], "nope.stm"),
        (
            vec!["show", "no-such-execution"],
            "no execution \"no-such-execution\"",
        ),
        (vec!["list", "--status", "BOGUS"], "--status"),
        (
            vec!["create", "examples/order.stm", "Order", "--seed", "[1]"],
            "seed",
        ),
        (
            vec!["create", "examples/order.stm", "Order", "--id", "o-1"],
            "o-1",
        ),
        (
            vec!["create", "examples/order.stm", "Order", "--id", "a b"],
            "execution id \"a b\" is not a valid SQS message group id",
        ),
    ] {
        let out = local.stm(&args);
        assert!(!out.status.success(), "stm {args:?} should fail");
        let err = stderr(&out);
        assert!(err.contains(needle), "stm {args:?}: {err}");
        assert!(!err.contains("panicked"), "stm {args:?} panicked: {err}");
    }
}
