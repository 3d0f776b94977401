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
    /// 1-based: the Nth time the run reaches the boundary.
    pub(crate) occurrence: u64,
}

#[derive(Debug)]
pub(crate) struct PlanState {
    pub(crate) armed: Vec<CrashPoint>,
    /// How often each boundary was reached (by a live process), over the whole run.
    seen: [u64; 7],
    dead: bool,
    actor: Actor,
    /// The crashes injected, in order.
    hits: Vec<(CrashPoint, Actor)>,
    /// Per durable commit that wrote spawn intents, the intents each of its spawn rows
    /// holds, in seq order (one each, unless the store packed them).
    spawn_rows: Vec<Vec<usize>>,
}

/// The crash schedule shared by the store and queue wrappers of one run.
#[derive(Clone)]
pub(crate) struct CrashPlan(Arc<Mutex<PlanState>>);

impl CrashPlan {
    pub(crate) fn new(armed: Vec<CrashPoint>) -> Self {
        CrashPlan(Arc::new(Mutex::new(PlanState {
            armed,
            seen: [0; 7],
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
        let point = CrashPoint { boundary, occurrence };
        if st.armed.contains(&point) {
            st.dead = true;
            let actor = st.actor;
            st.hits.push((point, actor));
            return true;
        }
        false
    }

    pub(crate) fn seen(&self) -> [u64; 7] {
        self.lock().seen
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
