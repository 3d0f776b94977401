//! What the randomized runs share: the knobs and crash points drawn per scenario, the
//! crash-free reference run, and the totals, summary and coverage of a set of runs.

use std::collections::BTreeMap;

use stm_runtime::Definitions;

use crate::common::scenarios::{relay_bounds, Outcome, Rng, Scenario, Tally};
use crate::harness::{Harness, Knobs, RunStats, MAX_ROUNDS};
use crate::plan::{Actor, Boundary, CrashPlan, CrashPoint, Reached, BOUNDARIES};

#[derive(Default)]
pub(crate) struct Totals {
    scenarios: usize,
    by_machine: BTreeMap<&'static str, usize>,
    armed: usize,
    crashes: BTreeMap<Boundary, usize>,
    after_publish_by: BTreeMap<Actor, usize>,
    deliveries: usize,
    dropped_redeliveries: usize,
    extra_deliveries: i64,
    longest_drain: usize,
    pub(crate) tally: Tally,
}

impl Totals {
    /// Count in another set of runs (run beside these).
    pub(crate) fn absorb(&mut self, other: Totals) {
        self.scenarios += other.scenarios;
        for (machine, n) in other.by_machine {
            *self.by_machine.entry(machine).or_default() += n;
        }
        self.armed += other.armed;
        for (boundary, n) in other.crashes {
            *self.crashes.entry(boundary).or_default() += n;
        }
        for (actor, n) in other.after_publish_by {
            *self.after_publish_by.entry(actor).or_default() += n;
        }
        self.deliveries += other.deliveries;
        self.dropped_redeliveries += other.dropped_redeliveries;
        self.extra_deliveries += other.extra_deliveries;
        self.longest_drain = self.longest_drain.max(other.longest_drain);
        self.tally.processed += other.tally.processed;
        self.tally.commits += other.tally.commits;
        self.tally.lost += other.tally.lost;
        self.tally.duplicates += other.tally.duplicates;
    }
}

/// 1–3 crash points at boundaries the crash-free run reached, at an occurrence it reached
/// (a later crash shifts the counts, so a point may also land on a retry, or miss). The
/// first goes to the reachable boundary with the fewest crashes so far, so that the rare
/// ones (the sweeper's, the relay's) are covered by a small sample too; the rest are random.
/// Until the relay has died after a publish, a run in which it publishes gets a point
/// there too: most publishes are the worker's inline flush, so a sample drawn by boundary
/// alone may never give the relay one.
pub(crate) fn crash_points(rng: &mut Rng, reached: &Reached, totals: &Totals) -> Vec<CrashPoint> {
    let mut points = boundary_points(rng, &reached.boundaries, totals);
    let relay_uncovered = totals.after_publish_by.get(&Actor::Relay).copied().unwrap_or(0) == 0;
    if relay_uncovered && reached.relay_publishes > 0 {
        points.push(CrashPoint {
            boundary: Boundary::AfterPublish,
            occurrence: 1 + rng.below(reached.relay_publishes),
            by: Some(Actor::Relay),
        });
    }
    points
}

fn boundary_points(rng: &mut Rng, reached: &[u64; 7], totals: &Totals) -> Vec<CrashPoint> {
    let candidates: Vec<Boundary> = BOUNDARIES
        .iter()
        .copied()
        .filter(|b| reached[b.index()] > 0)
        .collect();
    let least = candidates
        .iter()
        .copied()
        .min_by_key(|b| totals.crashes.get(b).copied().unwrap_or(0));
    let n = 1 + rng.below(3) as usize;
    (0..n)
        .map(|i| {
            let boundary = match least {
                Some(b) if i == 0 => b,
                _ => candidates[rng.below(candidates.len() as u64) as usize],
            };
            // a little past the clean count too: retries reach a boundary more often
            let occurrence = 1 + rng.below(reached[boundary.index()] + 1);
            CrashPoint::at(boundary, occurrence)
        })
        .collect()
}

pub(crate) fn knobs(rng: &mut Rng, sc: &Scenario) -> Knobs {
    Knobs {
        batch: 1 + rng.below(10) as usize,
        // mostly the production setting; without it the relay publishes everything
        inline_flush: rng.chance(75),
        relay_between_polls: [0, 10, 30][rng.below(3) as usize],
        burst: rng.chance(50) && sc.burst_ok,
        relay: relay_bounds(rng),
    }
}

pub(crate) fn add_run(
    totals: &mut Totals,
    sc: &Scenario,
    plan: &CrashPlan,
    stats: &RunStats,
    clean: &RunStats,
) {
    totals.scenarios += 1;
    *totals.by_machine.entry(sc.definition).or_default() += 1;
    totals.armed += plan.lock().armed.len();
    for (point, actor) in plan.hits() {
        *totals.crashes.entry(point.boundary).or_default() += 1;
        if point.boundary == Boundary::AfterPublish {
            *totals.after_publish_by.entry(actor).or_default() += 1;
        }
    }
    totals.deliveries += stats.deliveries;
    totals.dropped_redeliveries += stats.dropped_redeliveries;
    totals.extra_deliveries += stats.deliveries as i64 - clean.deliveries as i64;
    totals.longest_drain = totals.longest_drain.max(stats.longest_drain);
}

pub(crate) fn summarize(test: &str, seed: u64, totals: &Totals, elapsed: std::time::Duration) {
    let crashes: Vec<String> = BOUNDARIES
        .iter()
        .map(|b| format!("{} {}", b.label(), totals.crashes.get(b).copied().unwrap_or(0)))
        .collect();
    let injected: usize = totals.crashes.values().sum();
    eprintln!(
        "{test}: seed {seed:#x}, {} scenarios {:?}; crash points armed {}, crashes injected {injected} \
         ({}; after-publish in worker {} / relay {}); events processed {} (processed_events) in {} \
         commits (versions); worker deliveries {} ({} more than crash-free, {} redeliveries dropped \
         as duplicates); longest drain {} rounds (bound {MAX_ROUNDS}); lost {}, duplicates {}; {:.1} s",
        totals.scenarios,
        totals.by_machine,
        totals.armed,
        crashes.join(", "),
        totals.after_publish_by.get(&Actor::Worker).copied().unwrap_or(0),
        totals.after_publish_by.get(&Actor::Relay).copied().unwrap_or(0),
        totals.tally.processed,
        totals.tally.commits,
        totals.deliveries,
        totals.extra_deliveries,
        totals.dropped_redeliveries,
        totals.longest_drain,
        totals.tally.lost,
        totals.tally.duplicates,
        elapsed.as_secs_f64(),
    );
}

/// No event lost or applied twice; with `coverage`, every boundary (and the after-publish
/// one in both the worker and the relay) had a crash.
pub(crate) fn assert_totals(totals: &Totals, coverage: bool) {
    assert_eq!(totals.tally.lost, 0, "events lost");
    assert_eq!(totals.tally.duplicates, 0, "events applied twice");
    if !coverage {
        return;
    }
    for b in BOUNDARIES {
        assert!(
            totals.crashes.get(&b).copied().unwrap_or(0) > 0,
            "no crash was injected at {}",
            b.label()
        );
    }
    for actor in [Actor::Worker, Actor::Relay] {
        assert!(
            totals.after_publish_by.get(&actor).copied().unwrap_or(0) > 0,
            "no after-publish crash in the {actor:?}"
        );
    }
}

/// The crash-free reference run of a scenario, over memory: its outcome, its stats and how
/// often it reached each boundary.
pub(crate) async fn reference(
    defs: &Definitions,
    sc: &Scenario,
    id: &str,
    knobs: Knobs,
    rng: Rng,
) -> (Outcome, RunStats, Reached) {
    let plan = CrashPlan::new(Vec::new());
    let mut clean = Harness::memory(defs, plan.clone(), knobs, rng);
    let expected = clean.run(sc, id, &format!("{id} (crash-free)")).await;
    (expected, clean.stats, plan.reached())
}
