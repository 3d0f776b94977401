//! The longest literal timeout (`MAX_TIMEOUT_SECONDS`, 2^53 - 1): a deliberate difference
//! from harel 0.9.0, which validates a timeout of any size although a timer's `fire_at`
//! past DynamoDB's numbers (1E+126) makes every commit entering the state fail.

use std::path::Path;

use stm_core::validate::{validate, Finding, MAX_TIMEOUT_SECONDS};

/// The error findings of `text`'s machine `M`, loaded as from `m.stm`.
fn errors(text: &str) -> Vec<Finding> {
    let defn = stm_core::dsl::load_definition_str(text, Some("M"), Some(Path::new("m.stm"))).expect("loads");
    validate(&defn).into_iter().filter(Finding::is_error).collect()
}

fn machine(timeout: &str) -> String {
    format!(
        "event Go {{}}\n\
         machine M {{\n\
         \x20 initial A\n\
         \x20 state A {{ timeout {timeout} }}\n\
         \x20 final Done success\n\
         \x20 from A to Done on Timeout\n\
         }}\n"
    )
}

#[test]
fn the_longest_timeout_is_two_to_the_53_minus_one_seconds() {
    assert_eq!(MAX_TIMEOUT_SECONDS, 9_007_199_254_740_991);
    // the largest integer an f64 holds exactly: the next one up is not held at all
    assert_eq!(MAX_TIMEOUT_SECONDS as f64 as u64, MAX_TIMEOUT_SECONDS);
    assert_eq!((MAX_TIMEOUT_SECONDS + 2) as f64, (MAX_TIMEOUT_SECONDS + 1) as f64);
    assert!(errors(&machine("9007199254740991")).is_empty());
    assert!(errors(&machine("86400")).is_empty());
}

#[test]
fn a_longer_literal_timeout_is_an_error_naming_the_place_and_the_maximum() {
    for (literal, shown) in [
        ("9007199254740992", "9007199254740992"),
        ("9007199254740993", "9007199254740992"),
        (&*format!("1{}", "0".repeat(129)), "1e+129"),
    ] {
        let found = errors(&machine(literal));
        assert_eq!(found.len(), 1, "{literal}: {found:?}");
        assert_eq!(
            found[0].to_string(),
            format!(
                "m.stm:4:3: [error] timeout_too_large at A: timeout must be at most 9007199254740991 \
                 seconds (2**53 - 1, the longest a timer's fire_at holds exactly and DynamoDB can \
                 store), got {shown}"
            ),
            "{literal}"
        );
    }
}

#[test]
fn a_fragment_parameter_is_checked_as_a_literal() {
    let text = format!(
        "fragment Wait(secs: value) {{\n\
         \x20 initial W\n\
         \x20 state W {{ timeout secs }}\n\
         \x20 final Out success\n\
         \x20 from W to Out on Timeout\n\
         }}\n\
         machine M {{\n\
         \x20 initial A\n\
         \x20 use Wait(secs = 1{}) as A\n\
         }}\n",
        "0".repeat(40)
    );
    let found = errors(&text);
    assert_eq!(
        found.iter().map(|f| f.code.as_str()).collect::<Vec<_>>(),
        ["timeout_too_large"],
        "{found:?}"
    );
    assert!(found[0].message.ends_with("got 1e+40"), "{}", found[0].message);
}

#[test]
fn a_timeout_from_the_context_is_left_to_the_store() {
    // its value is only known at run time: the store refuses a fire_at DynamoDB cannot
    // hold, and the execution fails with the reason
    assert!(errors(&machine("context delay")).is_empty());
}
