//! The fault-injection seam's schedule: the boundaries a process can die at, the crash
//! points, and the crash plan the store and queue wrappers of one run share.

use std::sync::{Arc, Mutex, MutexGuard};

/// Where a process can die.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Boundary {
    BeforeLoad,
    BeforeCommit,
    AfterCommit,
    AfterPublish,
    AfterSweepPublish,
    BeforeResponse,
    /// The relay between two reads of a pass (and between passes): what it read before is
    /// published and acked, the rest still pending.
    BetweenRelayReads,
}

pub(crate) const BOUNDARIES: [Boundary; 7] = [
    Boundary::BeforeLoad,
    Boundary::BeforeCommit,
    Boundary::AfterCommit,
    Boundary::AfterPublish,
    Boundary::AfterSweepPublish,
    Boundary::BeforeResponse,
    Boundary::BetweenRelayReads,
];

impl Boundary {
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Boundary::BeforeLoad => "before-load",
            Boundary::BeforeCommit => "before-commit",
            Boundary::AfterCommit => "after-commit",
            Boundary::AfterPublish => "after-publish",
            Boundary::AfterSweepPublish => "after-sweep-publish",
            Boundary::BeforeResponse => "before-response",
            Boundary::BetweenRelayReads => "between-relay-reads",
        }
    }
}

/// Which function the harness is running (the plan tells the sweeper's publish apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Actor {
    Worker,
    Relay,
    Sweeper,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CrashPoint {
    pub(crate) boundary: Boundary,
    /// 1-based: the Nth time the run reaches the boundary (by `by`, when it names a
    /// function).
    pub(crate) occurrence: u64,
    /// Only this function's reaches count: a boundary two functions share (the worker's
    /// inline flush and the relay both publish) where one of them seldom gets there.
    pub(crate) by: Option<Actor>,
}

impl CrashPoint {
    /// The `occurrence`th time the run reaches `boundary`, whoever reaches it.
    pub(crate) fn at(boundary: Boundary, occurrence: u64) -> Self {
        CrashPoint {
            boundary,
            occurrence,
            by: None,
        }
    }
}

#[derive(Debug)]
pub(crate) struct PlanState {
    pub(crate) armed: Vec<CrashPoint>,
    /// How often each boundary was reached (by a live process), over the whole run.
    seen: [u64; 7],
    /// The same, by the function that reached it.
    seen_by: std::collections::BTreeMap<(Boundary, Actor), u64>,
    dead: bool,
    actor: Actor,
    /// The crashes injected, in order.
    hits: Vec<(CrashPoint, Actor)>,
    /// Per durable commit that wrote spawn intents, the intents each of its spawn rows
    /// holds, in seq order (one each, unless the store packed them).
    spawn_rows: Vec<Vec<usize>>,
}

/// How often a run reached each boundary ([`Boundary::index`]), and how often of those the
/// relay reached [`Boundary::AfterPublish`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reached {
    pub(crate) boundaries: [u64; 7],
    pub(crate) relay_publishes: u64,
}

/// The crash schedule shared by the store and queue wrappers of one run.
#[derive(Clone)]
pub(crate) struct CrashPlan(Arc<Mutex<PlanState>>);

impl CrashPlan {
    pub(crate) fn new(armed: Vec<CrashPoint>) -> Self {
        CrashPlan(Arc::new(Mutex::new(PlanState {
            armed,
            seen: [0; 7],
            seen_by: Default::default(),
            dead: false,
            actor: Actor::Worker,
            hits: Vec::new(),
            spawn_rows: Vec::new(),
        })))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, PlanState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn set_actor(&self, actor: Actor) {
        self.lock().actor = actor;
    }

    pub(crate) fn actor(&self) -> Actor {
        self.lock().actor
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.lock().dead
    }

    /// A new instance: calls go through again.
    pub(crate) fn revive(&self) {
        self.lock().dead = false;
    }

    /// Count one occurrence of `boundary` by a live process; `true`: it dies here.
    pub(crate) fn reach(&self, boundary: Boundary) -> bool {
        let mut st = self.lock();
        debug_assert!(!st.dead, "a dead process reached {boundary:?}");
        st.seen[boundary.index()] += 1;
        let occurrence = st.seen[boundary.index()];
        let actor = st.actor;
        let by_actor = {
            let n = st.seen_by.entry((boundary, actor)).or_default();
            *n += 1;
            *n
        };
        let hit = st.armed.iter().copied().find(|p| {
            p.boundary == boundary
                && match p.by {
                    None => p.occurrence == occurrence,
                    Some(by) => by == actor && p.occurrence == by_actor,
                }
        });
        if let Some(point) = hit {
            st.dead = true;
            st.hits.push((point, actor));
            return true;
        }
        false
    }

    /// How often the run reached each boundary, and how often the relay published.
    pub(crate) fn reached(&self) -> Reached {
        let st = self.lock();
        Reached {
            boundaries: st.seen,
            relay_publishes: st
                .seen_by
                .get(&(Boundary::AfterPublish, Actor::Relay))
                .copied()
                .unwrap_or(0),
        }
    }

    pub(crate) fn hits(&self) -> Vec<(CrashPoint, Actor)> {
        self.lock().hits.clone()
    }

    /// Note the spawn rows of a durable commit: `seqs` is each intent's row seq, in order.
    pub(crate) fn record_spawn_rows(&self, seqs: &[i64]) {
        if seqs.is_empty() {
            return;
        }
        let mut rows: Vec<usize> = Vec::new();
        for (i, seq) in seqs.iter().enumerate() {
            match rows.last_mut() {
                Some(n) if i > 0 && seqs[i - 1] == *seq => *n += 1,
                _ => rows.push(1),
            }
        }
        self.lock().spawn_rows.push(rows);
    }

    pub(crate) fn spawn_rows(&self) -> Vec<Vec<usize>> {
        self.lock().spawn_rows.clone()
    }
}
