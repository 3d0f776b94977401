//! `--explain`, through the binary: `stm run --explain` on the examples prints, under
//! each event, every transition its kind triggers with the guard values and the reasons;
//! `stm trace ID --explain` prints the same from a recorded trace on `stm local`; a
//! wrong combination or an unknown execution says so in one line.

mod common;

use common::{stderr, stdout, stm_alone, Local};

const ORDER_EVENTS: [&str; 8] = [
    "-e",
    r#"Submit:{"amount": 42.5}"#,
    "-e",
    r#"PaymentFailed:{"reason": "card declined"}"#,
    "-e",
    r#"Timeout:{"path": "Payment.Backoff"}"#,
    "-e",
    r#"PaymentOk:{"receipt": "r-1"}"#,
];

#[test]
fn run_explain_prints_the_guard_values_and_the_reasons() {
    let mut args = vec!["run", "--explain", "examples/order.stm"];
    args.extend(ORDER_EVENTS);
    let out = stm_alone(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "(start)              -> Draft\n\
         Submit               -> Payment.Charging\n\
         \x20   1. Draft -> Payment on Submit [no guard]: taken\n\
         PaymentFailed        -> Payment.Backoff\n\
         \x20   1. Payment.Charging -> choose on PaymentFailed [no guard]: taken\n\
         \x20        when context.attempts >= context.max_attempts: false -> GaveUp\n\
         \x20        else -> Payment.Backoff (chosen)\n\
         Timeout              -> Payment.Charging\n\
         \x20   1. Payment.Backoff -> Payment.Charging on Timeout [no guard]: taken\n\
         \x20   2. Payment -> GaveUp on Timeout [no guard]: outranked by an inner transition\n\
         PaymentOk            -> Shipping\n\
         \x20   1. Payment -> Shipping on PaymentOk [no guard]: taken\n\
         status: RUNNING  outcome: None\n"
    );

    // a `where` guard's value, a deferred event, a state not active
    let out = stm_alone(&[
        "run",
        "--explain",
        "examples/webhook.stm",
        "-e",
        r#"PaymentSucceeded:{"ref": "pi_1"}"#,
        "-e",
        "Confirmed",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "    -  AwaitingPayment -> Paid on PaymentSucceeded [no guard]: state not active\n\
             \x20   => event deferred: Pending defers PaymentSucceeded\n"
        ),
        "{text}"
    );
    // an event broadcast to an orthogonal state's regions: explained per region
    let out = stm_alone(&[
        "run",
        "--explain",
        "examples/checkout.stm",
        "-e",
        "Checkout",
        "-e",
        "Charged",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            ":Fulfil.Payment:0:\n    1. Fulfil.Payment.Charging -> Fulfil.Payment.Paid on Charged [no guard]: taken\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(":Fulfil.Stock:0:\n    => no transition for the event: it is dropped\n"),
        "{text}"
    );
    let out = stm_alone(&[
        "run",
        "--explain",
        "cli/tests/machines/run/exits.stm",
        "-e",
        r#"Pay:{"amount": 3}"#,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains(": taken\n"), "{}", stdout(&out));
}

#[test]
fn without_explain_the_output_is_harels_line_for_line() {
    let mut args = vec!["run", "examples/order.stm"];
    args.extend(ORDER_EVENTS);
    let out = stm_alone(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stdout(&out).contains("taken"), "{}", stdout(&out));
}

#[test]
fn explain_with_json_is_a_usage_error_naming_both() {
    let out = stm_alone(&["run", "--explain", "--json", "examples/webhook.stm"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("'--explain' cannot be used with '--json'"), "{err}");
    assert!(stdout(&out).is_empty());

    // trace --explain needs the machines: said before any deployment is reached
    let out = stm_alone(&["trace", "o-1", "--explain"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim_end(),
        "error: --explain needs the machines the execution ran: pass --definitions DIR (the \
         folder of .stm files the deployment runs) or set STM_DEFINITIONS_DIR"
    );
}

#[test]
fn trace_explain_explains_each_recorded_step_and_names_an_unknown_id() {
    let local = Local::start("explain");
    local.ok(&["create", "examples/order.stm", "Order", "--id", "o-1"]);
    local.wait_show("o-1", &["at Draft"]);
    local.ok(&["send", "o-1", r#"Submit:{"amount": 42.5}"#]);
    local.wait_show("o-1", &["at Payment.Charging"]);
    local.ok(&["send", "o-1", r#"PaymentFailed:{"reason": "declined"}"#]);
    local.wait_show("o-1", &["at Payment.Backoff"]);

    let text = local.ok(&["trace", "o-1", "--explain"]);
    for line in [
        "    => Start starts a PENDING execution: it enters the initial state\n",
        "    1. Draft -> Payment on Submit [no guard]: taken\n",
        "    1. Payment.Charging -> choose on PaymentFailed [no guard]: taken\n",
        "         when context.attempts >= context.max_attempts: false -> GaveUp\n",
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }
    // without --explain: one line per step, as before
    let plain = local.ok(&["trace", "o-1"]);
    assert_eq!(plain.lines().count(), 3, "{plain}");

    let out = local.stm(&["trace", "no-such-id", "--explain"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim_end(),
        "error: no execution \"no-such-id\" in this deployment (`stm list` shows them)"
    );
}
