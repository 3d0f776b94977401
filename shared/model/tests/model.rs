//! The model checked at the test suite's bound, and every planted hazard caught.

use stm_model::check::explore;
use stm_model::liveness;
use stm_model::model::{Bounds, Mutant};

#[test]
fn every_property_holds_at_the_small_bound() {
    holds_at(Bounds::SMALL);
}

/// Suspension: the operator's suspend and resume anywhere, nothing applied while
/// suspended, nothing lost, and (liveness below) everything applied after resume.
#[test]
fn every_property_holds_at_the_small_suspension_bound() {
    holds_at(Bounds::SMALL_SUSPENSION);
}

/// The rows of releases and operator commands: each released event's rows published
/// before the next release commit, the last block published before a release and before
/// an operator's status commit, a refused entry holding back its group, the status
/// events put on the bus.
#[test]
fn every_property_holds_at_the_small_rows_bound() {
    holds_at(Bounds::SMALL_ROWS);
}

/// The code before issue 43's fix (the release publishing at its end, the operator
/// repointing the last block without publishing it) loses the order of the rows a
/// release writes: the model finds the reorder at the small rows bound.
#[test]
fn the_release_and_operator_before_the_fix_reorder_rows() {
    use stateright::{Checker, Model};
    let checker = stm_model::model::Protocol::legacy(Bounds::SMALL_ROWS)
        .checker()
        .threads(2)
        .finish_when(stateright::HasDiscoveries::AnyFailures)
        .spawn_bfs()
        .join();
    let path = checker
        .discovery("every row reaches its target once, in its execution's commit order")
        .expect("the old release and operator keep the rows' order");
    println!("{}", stm_model::trace::render(&path));
}

fn holds_at(bounds: Bounds) {
    let report = explore(bounds, None, 2);
    for (name, cex) in &report.safety {
        assert!(
            cex.is_none(),
            "{name} fails:\n{}",
            cex.as_ref().map(stm_model::trace::render).unwrap_or_default()
        );
    }
    for (name, found) in &report.reachable {
        assert!(found, "never reached: {name}");
    }
    assert!(
        report.states > 10_000,
        "too few states to mean anything: {}",
        report.states
    );
    println!(
        "{} states, depth {}, {:.1} s",
        report.states,
        report.depth,
        report.elapsed.as_secs_f64()
    );
}

#[test]
fn quiescence_is_reachable_from_every_state_at_the_small_bounds() {
    // the small rows bound: a refused row holding back its group never holds it forever
    for bounds in [Bounds::SMALL, Bounds::SMALL_SUSPENSION, Bounds::SMALL_ROWS] {
        let result = liveness::analyse(bounds, None);
        assert!(result.quiescent > 0);
        assert_eq!(
            result.traps,
            0,
            "a trap: {:?}",
            result.trap_path.iter().map(|(_, a)| *a).collect::<Vec<_>>()
        );
    }
}

/// One child, the re-entered timer, a crash and a lost lease: where each hazard shows.
const MUTANTS: Bounds = Bounds::FULL;

#[test]
fn every_planted_hazard_is_caught_with_a_counterexample() {
    for mutant in Mutant::ALL {
        let report = explore(MUTANTS, Some(mutant), 2);
        let (name, path) = report
            .counterexample()
            .unwrap_or_else(|| panic!("{} was not caught ({} states)", mutant.name(), report.states));
        println!(
            "{}: \"{name}\"\n{}",
            mutant.name(),
            stm_model::trace::render(path)
        );
    }
}
