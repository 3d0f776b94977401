//! `stm trace` against `stm local`, through the binary: the timeline of an execution with
//! orthogonal regions lists every step the worker's log shows, each execution's in the
//! log's order and each region's Finished after the step that ends the region, the
//! steps of the events broadcast to its regions included (they are recorded on the
//! regions' traces, as harel records them), and the log says a broadcast a region does not
//! take as the normal thing it is, counting the regions in the right number.

mod common;

use common::Local;

/// The console's `event processed` lines of `root` and its regions, as `(execution,
/// event kind, "from -> to")`, and whether each was the parent's broadcast commit.
fn logged_steps(console: &str, root: &str) -> Vec<((String, String, String), bool)> {
    let region_prefix = format!("{root}:");
    console
        .lines()
        .filter_map(|line| {
            // `12:09:03  co-1  Charged  Fulfil -> Fulfil  RUNNING  v4  broadcast to 2 regions  (4.7 ms)`
            let parts: Vec<&str> = line.split("  ").collect();
            let (id, kind, transition) = (parts.get(1)?, parts.get(2)?, parts.get(3)?);
            let ours = *id == root || id.starts_with(&region_prefix);
            (ours && transition.contains(" -> ")).then(|| {
                (
                    (id.to_string(), kind.to_string(), transition.to_string()),
                    line.contains("  broadcast to "),
                )
            })
        })
        .collect()
}

/// `stm trace ROOT`'s lines as `(execution, event kind, "from -> to")`: a line of the
/// execution's own starts with its index (`#1`), a region's names the region.
fn traced_steps(trace: &str, root: &str) -> Vec<(String, String, String)> {
    trace
        .lines()
        .map(|line| {
            let (head, rest) = line
                .split_once("s  ")
                .unwrap_or_else(|| panic!("no time in {line:?}"));
            let (id, rest) = if head.starts_with('#') {
                (root.to_string(), rest)
            } else {
                let (region, rest) = rest
                    .split_once("  ")
                    .unwrap_or_else(|| panic!("no region in {line:?}"));
                let id = region.split(" #").next().unwrap_or(region);
                (id.to_string(), rest)
            };
            let (event, rest) = rest
                .split_once("  ")
                .unwrap_or_else(|| panic!("no event in {line:?}"));
            let kind = event.split(' ').next().unwrap_or(event);
            let transition = rest.split("  ").next().unwrap_or(rest);
            (id, kind.to_string(), transition.to_string())
        })
        .collect()
}

#[test]
fn the_trace_lists_the_broadcast_steps_the_log_shows_in_its_order() {
    let local = Local::start("trace");
    local.ok(&["create", "examples/checkout.stm", "Checkout", "--id", "co-1"]);
    for event in ["Checkout", "Charged", "Reserved"] {
        local.ok(&["send", "co-1", event, "--wait"]);
    }
    // both regions' Finished reach the parent after the last send: then it joins
    local.wait_show("co-1", &["DONE", "at Confirmed"]);

    let console = local.console();
    let logged = logged_steps(&console, "co-1");
    // the parent's broadcasts: Reserved reaches only Stock, Payment has finished
    let broadcasts: Vec<&str> = console
        .lines()
        .filter(|l| l.contains("  co-1  ") && l.contains("  broadcast to "))
        .collect();
    assert!(
        broadcasts
            .iter()
            .any(|l| l.contains("  Charged  ") && l.contains("  broadcast to 2 regions  ")),
        "{console}"
    );
    assert!(
        broadcasts
            .iter()
            .any(|l| l.contains("  Reserved  ") && l.contains("  broadcast to 1 region  ")),
        "{console}"
    );
    // Stock does not take Charged: said as the normal thing it is, not as a drop
    let not_taken = console
        .lines()
        .find(|l| l.contains("co-1:Fulfil.Stock:0 did not take Charged"))
        .unwrap_or_else(|| panic!("no line for Charged in Stock:\n{console}"));
    assert!(
        not_taken.contains("normal for a region") && !not_taken.contains("dropped"),
        "{not_taken}"
    );
    assert!(!console.contains("took nothing"), "{console}");

    let trace = local.ok(&["trace", "co-1"]);
    let traced = traced_steps(&trace, "co-1");
    for (id, kind, transition) in [
        (
            "co-1:Fulfil.Payment:0",
            "Charged",
            "Fulfil.Payment.Charging -> Fulfil.Payment.Paid",
        ),
        (
            "co-1:Fulfil.Stock:0",
            "Charged",
            "Fulfil.Stock.Reserving -> Fulfil.Stock.Reserving",
        ),
        (
            "co-1:Fulfil.Stock:0",
            "Reserved",
            "Fulfil.Stock.Reserving -> Fulfil.Stock.Held",
        ),
    ] {
        let step = (id.to_string(), kind.to_string(), transition.to_string());
        assert!(traced.contains(&step), "the trace lacks {step:?}:\n{trace}");
        assert!(
            logged.iter().any(|(s, _)| *s == step),
            "the log lacks {step:?}:\n{console}"
        );
    }
    // every step the log shows is in the trace, each execution's in the log's order. Not
    // the parent's broadcast commits: harel records no trace step for them (the regions'
    // steps say what the broadcast did). The trace has more: the regions' Start, which the
    // log does not show. Across executions only cause orders steps (the log's lines come
    // as the commits end, the trace's by when each step began): a region's commit that
    // emits its Finished comes before the parent's step that takes it.
    let ids: std::collections::BTreeSet<&str> = logged.iter().map(|((id, _, _), _)| id.as_str()).collect();
    for id in ids {
        let mut rest = traced.iter().filter(|(t, _, _)| t == id);
        for (step, _) in logged
            .iter()
            .filter(|((s, _, _), broadcast)| s == id && !broadcast)
        {
            assert!(
                rest.any(|t| t == step),
                "{step:?} is not in the trace after {id}'s steps before it\n\
                 trace:\n{trace}\nlog:\n{console}"
            );
        }
    }
    let position = |line: &str| {
        trace
            .lines()
            .position(|l| l.contains(line))
            .unwrap_or_else(|| panic!("no {line:?} in the trace:\n{trace}"))
    };
    for (region, last) in [
        (
            "co-1:Fulfil.Payment:0",
            "Charged  Fulfil.Payment.Charging -> Fulfil.Payment.Paid",
        ),
        (
            "co-1:Fulfil.Stock:0",
            "Reserved  Fulfil.Stock.Reserving -> Fulfil.Stock.Held",
        ),
    ] {
        let finished = format!("Finished {{\"child_id\":\"{region}\"");
        assert!(
            position(last) < position(&finished),
            "{region}'s Finished is taken before the step that ends it:\n{trace}"
        );
    }
    assert!(logged.len() >= 8, "the log shows the whole checkout:\n{console}");
}
