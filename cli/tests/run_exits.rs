//! `stm run` tells the truth in its exit code: 0 for a run that ends well, 1 for one whose
//! execution ends FAILED (with the reason on stderr, the output above it harel's line for
//! line), 2 before anything runs for an event kind the machine does not know (naming the
//! kinds it knows) or data that does not fit the event's declaration.

mod common;

use common::{stderr, stdout, stm_alone};

const FILE: &str = "cli/tests/machines/run/exits.stm";

#[test]
fn a_run_that_ends_well_exits_0() {
    let out = stm_alone(&["run", FILE, "-e", r#"Pay:{"amount": 3}"#]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "(start)              -> Open\nPay                  -> Paid\nstatus: DONE  outcome: success\n"
    );
}

#[test]
fn a_run_whose_execution_fails_exits_1_with_the_reason() {
    let out = stm_alone(&["run", FILE, "-e", "Divide"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "(start)              -> Open\nDivide               -> Open\nstatus: FAILED  outcome: None\n",
        "harel's output, line for line"
    );
    let err = stderr(&out);
    assert!(
        err.starts_with("error: execution ")
            && err.contains(" ended FAILED: ExpressionError: division by zero")
            && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn an_unknown_kind_or_bad_data_exits_2_before_anything_runs() {
    let out = stm_alone(&["run", FILE, "-e", r#"Pay:{"amount": 1}"#, "-e", "Refund"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stdout(&out).is_empty(), "nothing ran: {}", stdout(&out));
    let err = stderr(&out);
    assert_eq!(
        err.trim_end(),
        "error: -e Refund: no state of machine Exits handles \"Refund\" (nothing run): it knows Pay, Divide, \
         and the control events Cancel, Reset, SetState"
    );

    let out = stm_alone(&["run", FILE, "-e", r#"Pay:{"amount": "three"}"#]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stdout(&out).is_empty(), "nothing ran: {}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: -e Pay: ") && err.contains("amount") && err.lines().count() == 1,
        "{err}"
    );
}
