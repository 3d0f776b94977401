//! The randomized runs: scenarios with random knobs and crash points, in memory and over
//! DynamoDB and SQS on moto, each ending as its crash-free run.

use std::sync::Arc;
use std::time::Instant;

use stm_runtime::{Queue, SqsQueue};
use stm_store::ExecutionStore;

use crate::common;
use crate::common::queue_view::QueueView;
use crate::common::scenarios::{
    compare, definitions_with_examples as definitions, env_u64, scenario, scenario_count, Rng, SeedOnFailure,
};
use crate::harness::Harness;
use crate::plan::CrashPlan;
use crate::totals::{add_run, assert_totals, crash_points, knobs, reference, summarize, Totals};
use crate::wide::random_wide_runs;

#[tokio::test]
async fn crashes_change_nothing_in_memory() {
    let scenarios = scenario_count("STM_CRASH_SCENARIOS", 5_000);
    let seed = env_u64("STM_CRASH_SEED", 0xC2A5_4ED0_0D1E);
    let _report = SeedOnFailure::new("crashes_change_nothing_in_memory", "STM_CRASH_SEED", seed);
    let defs = definitions();
    let started = Instant::now();
    let mut master = Rng::new(seed);
    let mut totals = Totals::default();
    for n in 0..scenarios {
        let sc = scenario(&mut master);
        let knobs = knobs(&mut master, &sc);
        let run_rng = Rng::new(master.next());
        let id = format!("s{n}-{}", sc.definition.to_lowercase());
        let (expected, clean_stats, reached) = reference(&defs, &sc, &id, knobs, run_rng.clone()).await;

        let points = crash_points(&mut master, &reached, &totals);
        let what = format!(
            "scenario {n} ({}, {knobs:?}, crash points {points:?})",
            sc.definition
        );
        let plan = CrashPlan::new(points);
        let mut crashed = Harness::memory(&defs, plan.clone(), knobs, run_rng);
        let got = crashed.run(&sc, &id, &what).await;
        compare(
            &expected,
            &got,
            &mut totals.tally,
            ("crash-free", "crashed"),
            &what,
        );
        add_run(&mut totals, &sc, &plan, &crashed.stats, &clean_stats);
    }
    summarize("crash_injection (memory)", seed, &totals, started.elapsed());
    assert_totals(&totals, scenarios >= 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_change_nothing_over_dynamodb_and_sqs() {
    let scenarios = scenario_count("STM_CRASH_MOTO_SCENARIOS", 50);
    let base_seed = env_u64("STM_CRASH_SEED", 0xC2A5_4ED0_0D1E);
    let _report = SeedOnFailure::new(
        "crashes_change_nothing_over_dynamodb_and_sqs",
        "STM_CRASH_SEED",
        base_seed,
    );
    let seed = base_seed ^ 0x5EED_0FD1_5C00;
    let defs = definitions();
    // visibility 0: a batch a dead instance held comes back at once, as after its timeout
    let parts = common::moto_parts("crash", 0, 1_000).await;
    let store: Arc<dyn ExecutionStore> = parts.store.clone();
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()));
    let started = Instant::now();
    // the wide fan-outs run beside the others (each on its own tables and queue): alone,
    // one takes as long as a dozen of the others
    let wide = tokio::spawn(random_wide_runs(
        seed ^ 0x0057_1DE0_FA40,
        env_u64("STM_CRASH_MOTO_WIDE", 3),
    ));
    let mut master = Rng::new(seed);
    let mut totals = Totals::default();
    for n in 0..scenarios {
        let sc = scenario(&mut master);
        let knobs = knobs(&mut master, &sc);
        let run_rng = Rng::new(master.next());
        let id = format!("s{n}-{}", sc.definition.to_lowercase());
        let (expected, clean_stats, reached) = reference(&defs, &sc, &id, knobs, run_rng.clone()).await;

        let points = crash_points(&mut master, &reached, &totals);
        let what = format!(
            "moto scenario {n} ({}, {knobs:?}, crash points {points:?})",
            sc.definition
        );
        let plan = CrashPlan::new(points);
        let backend = QueueView::Sqs {
            main: SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()),
            dlq: SqsQueue::new(parts.client.clone(), parts.urls.dead_letter_url.clone()),
        };
        let mut crashed = Harness::new(
            store.clone(),
            queue.clone(),
            backend,
            &defs,
            plan.clone(),
            knobs,
            run_rng,
        );
        let got = crashed.run(&sc, &id, &what).await;
        compare(
            &expected,
            &got,
            &mut totals.tally,
            ("crash-free", "crashed"),
            &what,
        );
        add_run(&mut totals, &sc, &plan, &crashed.stats, &clean_stats);
    }
    let wide = wide
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    totals.absorb(wide);
    summarize(
        "crash_injection (dynamodb+sqs on moto)",
        seed,
        &totals,
        started.elapsed(),
    );
    assert_totals(&totals, scenarios >= 30);
    // every recovery path (redeliveries, duplicates, relay and sweep reruns) ran under the
    // functions' roles
    stm_testkit::assert_no_access_denied();
}
