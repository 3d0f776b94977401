//! A counted join's rows: every instance's report counted once, whatever the order and
//! the repeats, and the join's tally answered once it is full.

use stm_core::JoinSlot;

use super::{Rng, SeedOnFailure};
use crate::{ExecutionStore, JoinReport};

/// Reports of drawn joins (1 to 250 instances: one shard, several, a partial last one) in
/// a drawn order, a third of them sent twice: no answer before the last instance's first
/// report, the tally at it and at every report after, and the tally counts each
/// instance's outcome once and lists the ones that did not succeed.
pub async fn join_reports_count_each_instance_once<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let seed = super::env_u64(stm_env::JOIN_REPORTS_SEED, 0x101);
    let _report = SeedOnFailure::new(
        "join_reports_count_each_instance_once",
        stm_env::JOIN_REPORTS_SEED,
        seed,
    );
    let mut rng = Rng::new(seed);
    let store = make(0).await;
    for round in 0..4 {
        let total = [1, 100, 101, 250][round];
        let prefix = format!("parent-{round}:Fan:0:");
        let outcome_of = |i: u64| match i % 7 {
            0 => Some("failed".to_string()),
            3 => None,
            _ => Some("success".to_string()),
        };
        let mut order: Vec<u64> = (0..total).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.index(i + 1));
        }
        let mut sends: Vec<u64> = Vec::new();
        for i in order {
            sends.push(i);
            if rng.chance(33) {
                sends.push(i);
            }
        }
        let mut seen = std::collections::HashSet::new();
        for (at, i) in sends.iter().enumerate() {
            let report = JoinReport {
                slot: JoinSlot {
                    prefix: prefix.clone(),
                    index: *i,
                    total,
                },
                outcome: outcome_of(*i),
            };
            seen.insert(*i);
            let answer = store.report_to_join(&report).await.expect("report");
            let full = seen.len() as u64 == total;
            assert_eq!(
                answer.is_some(),
                full,
                "round {round} (total {total}), report {at} (instance {i}): {} of {total} reported",
                seen.len()
            );
            if let Some(tally) = answer {
                let counted: u64 = tally.outcomes.values().sum();
                assert_eq!(counted, total, "each instance counted once");
                let failed = (0..total).filter(|i| i % 7 == 0).count() as u64;
                let none = (0..total).filter(|i| i % 7 == 3).count() as u64;
                assert_eq!(tally.outcomes.get("failed").copied().unwrap_or(0), failed);
                assert_eq!(tally.outcomes.get("none").copied().unwrap_or(0), none);
                assert_eq!(tally.others.len() as u64, failed + none, "the others listed");
                assert!(tally.others.windows(2).all(|w| w[0].0 < w[1].0), "lowest first");
            }
        }
    }
}
