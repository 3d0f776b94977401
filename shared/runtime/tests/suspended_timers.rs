//! Suspended executions' timers leave the sweep: `suspend` holds them out of the due
//! listing and `resume` lists them again, so 2×10^5 suspended executions with overdue
//! timers cost a sweep nothing, and a running execution's later timer fires in the first
//! sweep that would fire it without them.
//!
//! Each store call takes a millisecond while the sweeps run (a DynamoDB round trip is
//! several), and each sweep has two seconds: a sweeper that still read the suspended
//! timers (two reads each, 32 at a time) would spend every sweep on the first of them and
//! never reach the running execution's.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use common::hooked_store::{Call, HookedStore, StoreHook};
use common::scenarios::{env_u64, Rng, SeedOnFailure};
use common::{Stack, START};
use stm_core::{Execution, Status};
use stm_runtime::{sweeper, MemoryQueue};
use stm_store::{Commit, ExecutionStore, MemoryStore, StoreError, TimerOp};

/// Every store call waits `per_call` while `on`.
struct Slow {
    on: AtomicBool,
    per_call: Duration,
}

#[async_trait]
impl StoreHook for Slow {
    async fn before(&self, _call: &Call<'_>) -> Result<(), StoreError> {
        if self.on.load(Ordering::SeqCst) {
            tokio::time::sleep(self.per_call).await;
        }
        Ok(())
    }
}

/// The group ids of the `Timeout`s published so far.
fn timeouts_to(queue: &MemoryQueue) -> Vec<String> {
    queue
        .snapshot()
        .iter()
        .filter(|m| m.body.contains("\"Timeout\""))
        .map(|m| m.group_id.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspended_executions_overdue_timers_leave_the_sweep_to_a_running_ones_later_timer() {
    let suspended = env_u64("STM_SUSPENDED_EXECUTIONS", 200_000) as usize;
    let seed = env_u64("STM_SUSPENDED_SEED", 0x5005);
    let _report = SeedOnFailure::new(
        "suspended_executions_overdue_timers_leave_the_sweep_to_a_running_ones_later_timer",
        "STM_SUSPENDED_SEED",
        seed,
    );
    let mut rng = Rng::new(seed);
    let hooked = Arc::new(HookedStore::new(
        Arc::new(MemoryStore::new()) as Arc<dyn ExecutionStore>,
        Slow {
            on: AtomicBool::new(false),
            per_call: Duration::from_millis(1),
        },
    ));
    let queue = Arc::new(MemoryQueue::new(5));
    let stack = Stack::new(hooked.clone(), queue.clone());
    let store: &dyn ExecutionStore = hooked.as_ref();
    let arm = async |id: &str, fire_at: f64| {
        let mut exe = Execution::new(id, "Timed");
        exe.status = Status::Running;
        let commit = Commit {
            timers: vec![TimerOp::Schedule {
                path: "Waiting".into(),
                fire_at,
            }],
            ..Commit::default()
        };
        store.commit(&mut exe, commit).await.expect("arm");
    };
    // every suspended execution's timer is overdue before the running one's
    let started = Instant::now();
    for i in 0..suspended {
        let id = format!("held-{i:06}");
        arm(&id, START + 1.0 + i as f64 * 1e-6).await;
        stack.control.suspend(&id).await.expect("suspend");
    }
    arm("running", START + 5.0).await;
    assert_eq!(stack.load("held-000000").await.status, Status::Suspended);
    eprintln!(
        "{suspended} executions armed and suspended in {:.1?}",
        started.elapsed()
    );

    let now = START + 10.0;
    hooked.hook.on.store(true, Ordering::SeqCst);
    let mut fired_in = None;
    for sweep in 1..=3 {
        let budget = sweeper::SweepBudget {
            deadline: Some(Instant::now() + Duration::from_secs(2)),
            page: sweeper::SWEEP_PAGE,
        };
        let summary = sweeper::sweep_within(store, queue.as_ref(), now, budget)
            .await
            .expect("sweep");
        eprintln!("sweep {sweep}: {summary:?}");
        if timeouts_to(&queue).iter().any(|group| group == "running") {
            fired_in = Some(sweep);
            break;
        }
    }
    assert!(
        fired_in.is_some(),
        "the running execution's timer did not fire in 3 sweeps under {suspended} suspended executions"
    );

    // resumed, a drawn few are listed again and fire at the next sweep; the rest wait
    hooked.hook.on.store(false, Ordering::SeqCst);
    let mut resumed: Vec<String> = (0..rng.between(1, 20))
        .map(|_| format!("held-{:06}", rng.index(suspended)))
        .collect();
    resumed.sort();
    resumed.dedup();
    for id in &resumed {
        stack.control.resume(id).await.expect("resume");
    }
    let summary = sweeper::sweep(store, queue.as_ref(), now).await.expect("sweep");
    assert_eq!(
        (summary.fired, summary.suspended),
        (resumed.len(), 0),
        "{summary:?}"
    );
    let mut fired: Vec<String> = timeouts_to(&queue)
        .into_iter()
        .filter(|group| group != "running")
        .collect();
    fired.sort();
    assert_eq!(fired, resumed, "the resumed executions' timers, and only theirs");
}
