//! The protocol as a stateright [`Model`] (its actors' transitions and its properties),
//! its exhaustive exploration with stateright's breadth-first checker, and the report the
//! `check` command prints.

use std::time::{Duration, Instant};

use stateright::{Checker, HasDiscoveries, Model, Path, Property};

use crate::actors;
use crate::model::{representative, Action, Bounds, Mutant, Protocol};
use crate::properties::{self, SAFETY};
use crate::state::State;

impl Model for Protocol {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.initial()]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        actors::enabled(self, state, actions);
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        let mut next = state.clone();
        actors::apply(self, &mut next, action).then_some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all()
    }
}

/// What one exploration found.
#[derive(Debug)]
pub struct Report {
    pub bounds: Bounds,
    pub mutant: Option<Mutant>,
    /// Distinct states (after the worker symmetry).
    pub states: usize,
    /// States generated, duplicates included.
    pub generated: usize,
    pub depth: usize,
    pub elapsed: Duration,
    /// Each safety property and, if it fails, its counterexample.
    pub safety: Vec<(&'static str, Option<Path<State, Action>>)>,
    /// Each reachability check and whether an example was found.
    pub reachable: Vec<(&'static str, bool)>,
}

impl Report {
    /// Every safety property holds and every reachability check found its example.
    pub fn holds(&self) -> bool {
        self.safety.iter().all(|(_, cex)| cex.is_none()) && self.reachable.iter().all(|(_, found)| *found)
    }

    /// The first counterexample found, with its property.
    pub fn counterexample(&self) -> Option<(&'static str, &Path<State, Action>)> {
        self.safety
            .iter()
            .find_map(|(name, cex)| cex.as_ref().map(|path| (*name, path)))
    }
}

/// Explore every state of the protocol within `bounds` (with `mutant` planted, and what it
/// needs to show added: [`Mutant::bounds`]) on `threads` threads. A mutant's run stops at
/// its first counterexample.
pub fn explore(bounds: Bounds, mutant: Option<Mutant>, threads: usize) -> Report {
    let bounds = mutant.map_or(bounds, |m| m.bounds(bounds));
    let model = Protocol::new(bounds, mutant);
    let names: Vec<&'static str> = model.properties().iter().map(|p| p.name).collect();
    let started = Instant::now();
    let finish = if mutant.is_some() {
        HasDiscoveries::AnyFailures
    } else {
        HasDiscoveries::AllFailures
    };
    let checker = model
        .checker()
        .threads(threads.max(1))
        .symmetry_fn(representative)
        .finish_when(finish)
        .spawn_bfs()
        .join();
    let elapsed = started.elapsed();
    let safety = SAFETY
        .iter()
        .map(|name| (*name, checker.discovery(name)))
        .collect();
    let reachable = names
        .iter()
        .filter(|name| !SAFETY.contains(name))
        .map(|name| (*name, checker.discovery(name).is_some()))
        .collect();
    Report {
        bounds,
        mutant,
        states: checker.unique_state_count(),
        generated: checker.state_count(),
        depth: checker.max_depth(),
        elapsed,
        safety,
        reachable,
    }
}
