//! Liveness: from every reachable state, some path reaches quiescence.
//!
//! stateright's `eventually` judges a path only where it ends (a state without successors
//! or the boundary); a path that closes a cycle is not a counterexample to it, and a
//! livelock is exactly such a cycle. So this module builds the explored graph itself
//! (states as fingerprints, edges as pairs of indices) and walks it backwards from the
//! quiescent states. A reachable state that cannot reach one is a trap: under any
//! scheduling the system can never settle once there. With none, the graph being finite,
//! any scheduler that is strongly fair (an action enabled infinitely often is taken
//! infinitely often) reaches quiescence: there is a path from every state, and fairness
//! takes its first step infinitely often. The faults are budgeted, so crashes stop.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use stateright::Model;

use crate::model::{representative, Action, Bounds, Mutant, Protocol};
use crate::state::State;

/// What the graph showed.
#[derive(Debug)]
pub struct Liveness {
    pub states: usize,
    pub edges: usize,
    pub quiescent: usize,
    /// Reachable states from which no quiescent state is reachable.
    pub traps: usize,
    /// The longest of the shortest paths to quiescence (steps).
    pub longest_settle: usize,
    /// A path from the initial state into a trap, if any.
    pub trap_path: Vec<(State, Action)>,
    pub elapsed: Duration,
}

fn fingerprint(state: &State) -> u64 {
    let mut h = DefaultHasher::new();
    representative(state).hash(&mut h);
    h.finish()
}

/// Explore every state within `bounds` and check that quiescence is reachable from each.
pub fn analyse(bounds: Bounds, mutant: Option<Mutant>) -> Liveness {
    let started = Instant::now();
    let model = Protocol::new(bounds, mutant);
    let mut index: HashMap<u64, u32> = HashMap::new();
    // how each state was first reached: (parent, action), for a trap's path
    let mut reached: Vec<Option<(u32, Action)>> = Vec::new();
    let mut quiescent: Vec<bool> = Vec::new();
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut frontier: VecDeque<(u32, State)> = VecDeque::new();
    for init in model.init_states() {
        let id = reached.len() as u32;
        index.insert(fingerprint(&init), id);
        reached.push(None);
        quiescent.push(init.quiescent(bounds.horizon));
        frontier.push_back((id, init));
    }
    let mut actions = Vec::new();
    while let Some((from, state)) = frontier.pop_front() {
        actions.clear();
        model.actions(&state, &mut actions);
        for action in actions.iter().copied() {
            let Some(next) = model.next_state(&state, action) else {
                continue;
            };
            let key = fingerprint(&next);
            let to = match index.get(&key) {
                Some(&to) => to,
                None => {
                    let to = reached.len() as u32;
                    index.insert(key, to);
                    reached.push(Some((from, action)));
                    quiescent.push(next.quiescent(bounds.horizon));
                    frontier.push_back((to, next));
                    to
                }
            };
            edges.push((from, to));
        }
    }
    // backwards from the quiescent states: distance to quiescence
    let n = reached.len();
    edges.sort_unstable_by_key(|&(_, to)| to);
    let mut start = vec![0usize; n + 1];
    for &(_, to) in &edges {
        start[to as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut distance: Vec<u32> = vec![u32::MAX; n];
    let mut queue: VecDeque<u32> = VecDeque::new();
    for (id, q) in quiescent.iter().enumerate() {
        if *q {
            distance[id] = 0;
            queue.push_back(id as u32);
        }
    }
    while let Some(to) = queue.pop_front() {
        for &(from, _) in &edges[start[to as usize]..start[to as usize + 1]] {
            if distance[from as usize] == u32::MAX {
                distance[from as usize] = distance[to as usize] + 1;
                queue.push_back(from);
            }
        }
    }
    let traps = distance.iter().filter(|d| **d == u32::MAX).count();
    let longest_settle = distance
        .iter()
        .filter(|d| **d != u32::MAX)
        .max()
        .copied()
        .unwrap_or(0) as usize;
    let trap_path = distance
        .iter()
        .position(|d| *d == u32::MAX)
        .map(|trap| path_to(&model, &reached, trap as u32))
        .unwrap_or_default();
    Liveness {
        states: n,
        edges: edges.len(),
        quiescent: quiescent.iter().filter(|q| **q).count(),
        traps,
        longest_settle,
        trap_path,
        elapsed: started.elapsed(),
    }
}

/// The path by which `target` was first reached, replayed from the initial state.
fn path_to(model: &Protocol, reached: &[Option<(u32, Action)>], target: u32) -> Vec<(State, Action)> {
    let mut actions = Vec::new();
    let mut at = target;
    while let Some((parent, action)) = reached[at as usize] {
        actions.push(action);
        at = parent;
    }
    actions.reverse();
    let mut state = model.initial();
    let mut path = Vec::new();
    for action in actions {
        let Some(next) = model.next_state(&state, action) else {
            break;
        };
        path.push((state, action));
        state = next;
    }
    path
}
