//! The model checks the code: the model's traces replayed against the real worker, relay
//! and sweeper (over `MemoryStore` and `MemoryQueue`), compared step by step.
//!
//! The walks are the fixed protocol of issue 43 (the release publishing the last block
//! first, parking the arriving event behind the released ones and publishing each release
//! commit before the next; the operator publishing the last block before a commit that
//! writes rows), which the code has since 3d24fd6.

use stateright::Model as _;
use stm_model::model::{Action, Bounds, Mutant, Protocol};
use stm_model::replay::{random_walk, replay, Plant};

/// Everything the model has, at a size a walk covers: two children, the re-entered timer,
/// the operator's suspend, resume and cancel, a crash and a lost lease, three ticks.
const REPLAYED: Bounds = Bounds {
    children: 2,
    timed: true,
    leave_back: true,
    suspend: true,
    workers: 2,
    crashes: 1,
    leases: 1,
    windows: 0,
    horizon: 2,
    // the real `Timed` machine writes no rows (the DSL emits only a child's report, a
    // `Cancel` and spawn intents), the replay's relay has no status bus, and
    // `MemoryQueue` refuses no entry
    emits: false,
    bus: false,
    cancel: true,
    refusals: 0,
};

/// Where the mutants are caught in under a second each.
const MUTANTS: Bounds = Bounds {
    children: 1,
    horizon: 1,
    ..REPLAYED
};

fn walks() -> u64 {
    stm_testkit::env_u64("STM_MODEL_WALKS", 400)
}

/// The suspended execution alone, where a walk's suspension is far likelier to meet
/// events that park and a resume that releases them.
const SUSPENDED: Bounds = Bounds {
    children: 0,
    ..REPLAYED
};

/// Replay `walks` random walks at `bounds`; the steps replayed and how many walks
/// released a parked event.
fn replay_walks(
    bounds: Bounds,
    walks: u64,
) -> (
    usize,
    usize,
    std::collections::HashSet<std::mem::Discriminant<Action>>,
) {
    let model = Protocol::new(bounds, None);
    let mut steps = 0;
    let mut released = 0;
    let mut seen = std::collections::HashSet::new();
    for seed in 0..walks {
        let walk = random_walk(&model, seed, 120);
        steps += walk.len();
        for action in &walk {
            seen.insert(std::mem::discriminant(action));
        }
        let end = walk
            .iter()
            .try_fold(model.initial(), |state, action| model.next_state(&state, *action));
        released += usize::from(end.is_some_and(|end| end.ghost.released));
        if let Err(divergence) = replay(&model, &walk, Plant::None) {
            panic!("seed {seed}: {divergence}");
        }
    }
    (steps, released, seen)
}

#[test]
fn random_traces_of_the_model_are_what_the_code_does() {
    let (steps, _, seen) = replay_walks(REPLAYED, walks());
    println!("{} walks, {steps} steps replayed", walks());
    // every kind of step was replayed somewhere: all but the deduplication window's (not
    // replayable) and, rare in a uniform walk, the sweeper's and the operator's crashes
    assert!(seen.len() >= 11, "kinds of steps replayed: {seen:?}");
}

/// Control::suspend and resume, the worker's gate (park while suspended, release after)
/// and the sweeper's `KeepArmed`, step by step against the model.
#[test]
fn suspension_traces_of_the_model_are_what_the_code_does() {
    // a few uniform walks in a thousand suspend, park an event and resume: five times the
    // walks (seconds more) release several, where 400 may release none
    let walks = 5 * walks();
    let (steps, released, _) = replay_walks(SUSPENDED, walks);
    println!("{walks} walks, {steps} steps replayed, {released} releasing parked events");
    assert!(released > 0, "no walk released a parked event");
}

/// A planted change to the code (its commits lose their processed marks) makes the replay
/// fail: the test above can fail.
#[test]
fn a_code_change_that_departs_from_the_model_fails_the_replay() {
    let model = Protocol::new(REPLAYED, None);
    let diverged = (0..200u64).find_map(|seed| {
        let walk = random_walk(&model, seed, 120);
        replay(&model, &walk, Plant::DropMarks).err()
    });
    let divergence = diverged.expect("no walk noticed commits without their marks");
    println!("planted change caught: {divergence}");
}

/// The code has the fixed release and operator: walks of the model as the code was before
/// (`Protocol::legacy`: the release publishing at its end, the operator publishing
/// nothing before its status commit) depart from it once they suspend and release.
#[test]
fn the_code_no_longer_releases_as_before_the_fix() {
    let model = Protocol::legacy(SUSPENDED);
    let diverged = (0..200u64).find_map(|seed| {
        let walk = random_walk(&model, seed, 120);
        replay(&model, &walk, Plant::None).err()
    });
    let divergence = diverged.expect("no walk of the old release and operator departed from the code");
    println!("the code departs from the old protocol at {divergence}");
}

/// Each mutant's counterexample, replayed against the real code, departs from it: the
/// code does not have the hazard, and the replay tells the mutant from the code. (The
/// mutants that need rows from the timed execution, a status bus or a refused entry are
/// not replayable: see `REPLAYED`.)
#[test]
fn no_mutants_counterexample_is_what_the_code_does() {
    let replayable = |m: &Mutant| {
        let b = m.bounds(MUTANTS);
        !b.emits && !b.bus && b.refusals == 0
    };
    for mutant in Mutant::ALL.into_iter().filter(replayable) {
        let report = stm_model::check::explore(MUTANTS, Some(mutant), 2);
        let (_, path) = report
            .counterexample()
            .unwrap_or_else(|| panic!("{} not caught", mutant.name()));
        let actions: Vec<Action> = path.clone().into_actions();
        let mutated = Protocol::new(MUTANTS, Some(mutant));
        match replay(&mutated, &actions, Plant::None) {
            Ok(()) => panic!(
                "the real code followed {}'s counterexample to its end",
                mutant.name()
            ),
            Err(divergence) => println!("{}: the code departs at {divergence}", mutant.name()),
        }
    }
}
