//! `stm-model check [--small] [--mutant NAME] [--threads N]`: explore the protocol,
//! print the states explored, the depth, the time and each property's result. A mutant's
//! run exits 1 with its counterexample as a readable trace (the hazard was caught); a
//! property failing without a mutant also exits 1. `stm-model liveness [--small]`: check
//! that quiescence is reachable from every reachable state. `stm-model mutants`: run each
//! mutant and say whether it was caught.

use std::process::ExitCode;

use stm_model::check::{explore, Report};
use stm_model::liveness;
use stm_model::model::{Bounds, Mutant};
use stm_model::trace;

fn usage() -> ExitCode {
    eprintln!(
        "usage: stm-model check [BOUNDS] [--mutant NAME] [--threads N]\n       stm-model liveness [BOUNDS]\n       stm-model mutants [BOUNDS]\nBOUNDS: --small, --small-suspension, --small-rows (the test suite's), --suspension, --fanout, or the full bound,\n        each changed by --children N (0-2), --workers N, --crashes N, --leases N, --windows N, --horizon N, --refusals N,\n        --no-leave-back, --suspend, --no-suspend, --emits, --no-emits, --bus, --no-bus, --cancel, --no-cancel\nmutants: {}",
        Mutant::ALL.map(|m| m.name()).join(", ")
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first() else {
        return usage();
    };
    let mut bounds = Bounds::FULL;
    let mut mutant = None;
    let mut threads = 2;
    let mut rest = args[1..].iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--small" => bounds = Bounds::SMALL,
            "--suspension" => bounds = Bounds::SUSPENSION,
            "--fanout" => bounds = Bounds::FANOUT,
            "--small-rows" => bounds = Bounds::SMALL_ROWS,
            "--small-suspension" => bounds = Bounds::SMALL_SUSPENSION,
            "--mutant" => match rest.next().and_then(|name| Mutant::by_name(name)) {
                Some(m) => mutant = Some(m),
                None => {
                    eprintln!("error: --mutant needs one of the mutants' names");
                    return usage();
                }
            },
            "--children" | "--workers" | "--crashes" | "--leases" | "--windows" | "--horizon"
            | "--refusals" => {
                let Some(n) = rest.next().and_then(|n| n.parse::<u8>().ok()) else {
                    eprintln!("error: {arg} needs a number");
                    return usage();
                };
                match arg.as_str() {
                    "--children" => bounds.children = n.min(2),
                    "--workers" => bounds.workers = n.max(1),
                    "--crashes" => bounds.crashes = n,
                    "--leases" => bounds.leases = n,
                    "--windows" => bounds.windows = n,
                    "--refusals" => bounds.refusals = n,
                    _ => bounds.horizon = n.min(8),
                }
            }
            "--no-leave-back" => bounds.leave_back = false,
            "--no-suspend" => bounds.suspend = false,
            "--suspend" => bounds.suspend = true,
            "--emits" => bounds.emits = true,
            "--no-emits" => bounds.emits = false,
            "--cancel" => bounds.cancel = true,
            "--no-cancel" => bounds.cancel = false,
            "--bus" => bounds.bus = true,
            "--no-bus" => bounds.bus = false,
            "--threads" => match rest.next().and_then(|n| n.parse().ok()) {
                Some(n) => threads = n,
                None => {
                    eprintln!("error: --threads needs a number");
                    return usage();
                }
            },
            other => {
                eprintln!("error: unknown argument {other:?}");
                return usage();
            }
        }
    }
    match command.as_str() {
        "check" => check(bounds, mutant, threads),
        "liveness" => live(bounds),
        "mutants" => mutants(bounds, threads),
        _ => usage(),
    }
}

fn print_report(report: &Report) {
    println!(
        "bounds: {:?}{}",
        report.bounds,
        report
            .mutant
            .map_or(String::new(), |m| format!(", mutant {}", m.name()))
    );
    println!(
        "states: {} distinct ({} generated), depth {}, {:.1} s",
        report.states,
        report.generated,
        report.depth,
        report.elapsed.as_secs_f64()
    );
    for (name, cex) in &report.safety {
        let verdict = if cex.is_some() { "FAILS" } else { "holds" };
        println!("  {verdict:5}  {name}");
    }
    for (name, found) in &report.reachable {
        let verdict = if *found { "reached" } else { "NEVER" };
        println!("  {verdict:7}  {name}");
    }
}

fn check(bounds: Bounds, mutant: Option<Mutant>, threads: usize) -> ExitCode {
    let report = explore(bounds, mutant, threads);
    print_report(&report);
    if let Some((name, path)) = report.counterexample() {
        println!("\ncounterexample to \"{name}\":");
        print!("{}", trace::render(path));
        return ExitCode::from(1);
    }
    if report.holds() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn live(bounds: Bounds) -> ExitCode {
    let result = liveness::analyse(bounds, None);
    println!("bounds: {bounds:?}");
    println!(
        "graph: {} states, {} edges, {} quiescent, {:.1} s",
        result.states,
        result.edges,
        result.quiescent,
        result.elapsed.as_secs_f64()
    );
    println!(
        "longest shortest path to quiescence: {} steps",
        result.longest_settle
    );
    if result.traps == 0 {
        println!("  holds  every reachable state can reach quiescence (no livelock, no deadlock)");
        return ExitCode::SUCCESS;
    }
    println!(
        "  FAILS  {} states cannot reach quiescence; a path into one:",
        result.traps
    );
    for (n, (state, action)) in result.trap_path.iter().enumerate() {
        println!("{:>3}. {}", n + 1, trace::describe(state, *action));
    }
    ExitCode::from(1)
}

fn mutants(bounds: Bounds, threads: usize) -> ExitCode {
    let mut all_caught = true;
    for mutant in Mutant::ALL {
        let report = explore(bounds, Some(mutant), threads);
        match report.counterexample() {
            Some((name, path)) => println!(
                "caught  {:26} \"{name}\" in {} steps ({} states, {:.1} s)",
                mutant.name(),
                path.clone().into_actions().len(),
                report.states,
                report.elapsed.as_secs_f64()
            ),
            None => {
                all_caught = false;
                println!("MISSED  {:26} ({} states)", mutant.name(), report.states);
            }
        }
    }
    if all_caught {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
