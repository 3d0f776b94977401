//! A wide fan-out (its spawn intents packed into a few rows of one commit): crashes between
//! its pieces, at named occurrences and at random on moto; no child lost or doubled, the
//! parent joins.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use stm_runtime::{Definitions, Queue, SqsQueue};
use stm_store::{ExecutionStore, SpawnEntry};

use crate::common::queue_view::QueueView;
use crate::common::scenarios::{
    compare, definitions_with_examples as definitions, Outcome, Rng, Scenario, Tally,
};
use crate::common::{self, object};
use crate::harness::{Harness, Knobs};
use crate::plan::{Actor, Boundary, CrashPlan, CrashPoint};
use crate::totals::{add_run, crash_points, knobs, reference, Totals};

/// How many children the wide fan-out spawns: with the parent's other items, past a
/// transaction's 100, so the DynamoDB store packs the spawn intents of its one commit.
const WIDE_WIDTH: usize = 100;

/// The bytes of each child's `pad` (`tests/machines/wide_fan_out.stm`): large enough that
/// the packed intents take several rows (the store cuts a row at ~350 KB, counting an
/// intent's context twice), small enough for the parent's item, which holds it once.
const WIDE_PAD: usize = 6_000;

/// The intents one `SendMessageBatch` holds (SQS's 10; these messages are far below its
/// byte limit), so the Nth publish of a flush ends at intent `10 * N`.
const PUBLISH_BATCH: usize = 10;

/// The relay's reads of 2 rows and passes of 3: the packed rows' crash points (between
/// reads, between passes) are named by these.
const WIDE_RELAY: stm_runtime::relay::RelayBounds = stm_runtime::relay::RelayBounds {
    pass_rows: 3,
    read_rows: 2,
    ..stm_runtime::relay::RelayBounds::DEFAULT
};

/// The scenario machines, the examples and the wide fan-out.
fn wide_definitions() -> Definitions {
    let mut defs = definitions();
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/machines/wide_fan_out.stm");
    for defn in stm_runtime::config::load_file(&file).expect("wide_fan_out.stm loads and validates") {
        defs.register(defn);
    }
    defs
}

fn wide_scenario() -> Scenario {
    let recipients: Vec<String> = (0..WIDE_WIDTH).map(|i| format!("r{i}")).collect();
    Scenario {
        definition: "WideFanOut",
        seed: Some(json!({ "recipients": recipients, "pad": "p".repeat(WIDE_PAD) })),
        steps: vec![],
        burst_ok: true,
    }
}

/// Batches of 10 and no relay pass between polls: the relay runs only once the queue is
/// empty, so each boundary's occurrences come in the same order on every run and a crash
/// point names the same moment of the fan-out every time.
fn wide_knobs(inline_flush: bool) -> Knobs {
    Knobs {
        batch: 10,
        inline_flush,
        relay_between_polls: 0,
        burst: false,
        relay: WIDE_RELAY,
    }
}

/// The run lengths of `entries`' seqs: the intents of each spawn row, in order.
fn rows_of(entries: &[SpawnEntry]) -> Vec<usize> {
    let mut rows: Vec<(i64, usize)> = Vec::new();
    for entry in entries {
        match rows.last_mut() {
            Some((seq, n)) if *seq == entry.seq => *n += 1,
            _ => rows.push((entry.seq, 1)),
        }
    }
    rows.into_iter().map(|(_, n)| n).collect()
}

/// A harness that crashes as `plan` says, over fresh tables and a fresh queue on moto
/// (moto slows down as its tables fill, and the wide runs go side by side).
async fn wide_harness(plan: CrashPlan, defs: &Definitions, knobs: Knobs, rng: Rng) -> Harness {
    let parts = common::moto_parts("crash-wide", 0, 1_000).await;
    let queue: Arc<dyn Queue> = Arc::new(SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()));
    let backend = QueueView::Sqs {
        main: SqsQueue::new(parts.client.clone(), parts.urls.queue_url.clone()),
        dlq: SqsQueue::new(parts.client.clone(), parts.urls.dead_letter_url.clone()),
    };
    Harness::new(parts.store, queue, backend, defs, plan, knobs, rng)
}

impl Harness {
    /// Create the wide fan-out `id` and handle its `Start` (one poll: the commit holding
    /// every spawn intent, then the inline flush as far as it gets); the spawn rows then
    /// pending, read back from the store, in seq order.
    async fn start_wide(&mut self, id: &str, what: &str) -> Vec<usize> {
        let sc = wide_scenario();
        self.control
            .create(sc.definition, sc.seed.map(object), Some(id))
            .await
            .expect("create");
        assert_eq!(self.poll().await, 1, "{what}: the parent's Start alone");
        let pending = self.store.pending_rows_of(id).await.expect("pending rows");
        rows_of(&pending.spawns)
    }
}

/// The spawn rows the DynamoDB store cuts the wide fan-out's commit into, read back from
/// the store before anything is published (inline flush off, no relay run yet); asserted
/// packed. Ids of the same length pack the same (a child's id is part of its intent's size).
async fn wide_layout(defs: &Definitions) -> Vec<usize> {
    let mut probe = wide_harness(CrashPlan::new(Vec::new()), defs, wide_knobs(false), Rng::new(1)).await;
    let rows = probe.start_wide("wide-p", "layout probe").await;
    assert_eq!(
        rows.iter().sum::<usize>(),
        WIDE_WIDTH,
        "every intent pending: {rows:?}"
    );
    // packed: a few rows (enough for the relay's reads of 2 and passes of 3 to fall between
    // them), each spanning several publishes
    assert!(
        rows.len() >= 4 && rows.len() <= WIDE_WIDTH / PUBLISH_BATCH,
        "the {WIDE_WIDTH} intents are not packed into a few rows: {rows:?}"
    );
    assert!(
        rows[..rows.len() - 1].iter().all(|n| *n > PUBLISH_BATCH),
        "a row spans several publishes: {rows:?}"
    );
    rows
}

/// One crash schedule for the wide fan-out.
struct WideCase {
    what: &'static str,
    inline_flush: bool,
    point: CrashPoint,
    /// Who dies there.
    actor: Actor,
    /// How many of the parent's spawn rows are acked (delivered) right after the crash:
    /// after the poll that handled the parent's `Start` (its commit, and its inline flush
    /// as far as it got) or, without the inline flush, after the relay's first run.
    acked_at_crash: usize,
}

/// Run `case` as `id` on fresh tables and a fresh queue, drive it to quiescence and check
/// it (see the test); returns what it tallied against a crash-free run in memory (the
/// MemoryStore does not pack: the same fan-out, one intent a row).
async fn wide_case(defs: Definitions, layout: Vec<usize>, id: String, case: WideCase) -> Tally {
    let started = Instant::now();
    let sc = wide_scenario();
    let knobs = wide_knobs(case.inline_flush);
    let (expected, _, _) = reference(&defs, &sc, &id, knobs, Rng::new(1)).await;
    let plan = CrashPlan::new(vec![case.point]);
    let mut crashed = wide_harness(plan.clone(), &defs, knobs, Rng::new(1)).await;
    let what = format!("{id}: {} ({:?})", case.what, case.point);

    let mut pending = crashed.start_wide(&id, &what).await;
    let rows = plan
        .spawn_rows()
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("{what}: the parent's commit wrote no spawn row"));
    assert_eq!(rows, layout, "{what}: the parent's commit packed as the probe's");
    if case.actor == Actor::Relay {
        // no inline flush: every row waits for the relay, whose first run dies
        assert_eq!(pending, rows, "{what}: the spawn rows pending before the relay");
        crashed.relay().await;
        let left = crashed.store.pending_rows_of(&id).await.expect("pending rows");
        pending = rows_of(&left.spawns);
    }
    // the crash landed where the case says, once, and left the rows it should: a packed
    // row is pending whole, unless all its intents were published and it was acked
    assert_eq!(plan.hits(), vec![(case.point, case.actor)], "{what}: the crash");
    assert_eq!(
        pending,
        rows[case.acked_at_crash..],
        "{what}: the spawn rows pending after the crash (the commit's: {rows:?})"
    );
    crashed.drain(&what).await;
    let got = crashed.outcome(&id, &[], &what).await;
    assert_wide_joined(crashed.store.as_ref(), &id, &got, &what).await;
    // and everything else as the crash-free run: the records, each step once, in order
    let mut tally = Tally::default();
    compare(&expected, &got, &mut tally, ("crash-free", "crashed"), &what);
    eprintln!(
        "{what}: {:.1} s, {} deliveries, {} redeliveries dropped as duplicates",
        started.elapsed().as_secs_f64(),
        crashed.stats.deliveries,
        crashed.stats.dropped_redeliveries
    );
    tally
}

/// The wide fan-out `id` ended as it must: every child created once (by id prefix) and
/// its `Start` run once, all finished with success, and the parent joined them in its
/// success final state.
async fn assert_wide_joined(store: &dyn ExecutionStore, id: &str, got: &Outcome, what: &str) {
    let parent = &got.executions[id];
    assert_eq!(
        (parent.status, parent.active_path.as_deref()),
        (stm_core::execution::Status::Done, Some("AllSent")),
        "{what}: the parent"
    );
    assert!(
        parent.children.len() == WIDE_WIDTH
            && parent
                .children
                .values()
                .all(|c| c.finished && c.outcome.as_deref() == Some("success")),
        "{what}: the parent's children: {:?}",
        parent.children
    );
    let created = store
        .ids_with_prefix(&format!("{id}:"))
        .await
        .expect("children by prefix");
    let mut children: Vec<String> = parent.children.keys().cloned().collect();
    children.sort();
    assert_eq!(
        created, children,
        "{what}: the children created are the parent's, each once"
    );
    for child in &created {
        let steps = &got.traces[child];
        assert_eq!(steps.len(), 1, "{what}: {child} ran its Start once: {steps:?}");
    }
}

/// A wide fan-out on DynamoDB and SQS (moto), with a crash between each kind of its
/// pieces. Its one commit holds 100 spawn intents, which the store packs into a few rows
/// (asserted: read back pending before any publish, and from the seqs each run's commit
/// gave); the inline flush and the relay publish them 10 a `SendMessageBatch` and ack a
/// row only once all its intents are out. The crash points, named by occurrence (the same
/// moment on every run: see [`wide_knobs`]), land:
///
/// * after the commit, before the inline flush (every row pending; the redelivered `Start`
///   is a duplicate that publishes them all);
/// * in the worker's inline flush: after the first publish of the first row (mid-row: ten
///   children's `Start`s sent, the row not acked); after the publish that completes the
///   first row, before its ack; after the next publish (the first row acked, the second
///   partly sent: between rows);
/// * in the relay (inline flush off; it reads 2 rows at a time, in passes of 3): after its
///   first publish (mid-row); before the second read of its first pass (two rows acked,
///   the rest pending: between reads); before the first read of its second pass (three
///   rows acked: between passes).
///
/// Each run must end with every child created exactly once (by id prefix, and each ran
/// its `Start` once), the parent `DONE` in `AllSent` having joined all of them, nothing
/// pending, an empty queue and dead-letter queue, and everything else as in a crash-free
/// run (`common::scenarios::compare`): a re-published intent is dropped by SQS's
/// deduplication or by the idempotent create, never a second child or a second `Finished`
/// applied. The cases run side by side, each on its own tables and queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packed_wide_fan_out_survives_crashes_between_its_pieces_over_dynamodb_and_sqs() {
    let started = Instant::now();
    let defs = wide_definitions();
    let layout = wide_layout(&defs).await;
    // the publish of the inline flush that holds the first row's last intent
    let first_row_done = layout[0].div_ceil(PUBLISH_BATCH) as u64;
    let at = CrashPoint::at;
    let case = |what, inline_flush, point, actor, acked_at_crash| WideCase {
        what,
        inline_flush,
        point,
        actor,
        acked_at_crash,
    };
    let cases = vec![
        case(
            "after the commit, before the inline flush",
            true,
            at(Boundary::AfterCommit, 1),
            Actor::Worker,
            0,
        ),
        case(
            "worker, mid-row: after the first publish of the first row, before its ack",
            true,
            at(Boundary::AfterPublish, 1),
            Actor::Worker,
            0,
        ),
        case(
            "worker: after the publish that completes the first row, before its ack",
            true,
            at(Boundary::AfterPublish, first_row_done),
            Actor::Worker,
            0,
        ),
        case(
            "worker, between rows: the first row acked, the second partly published",
            true,
            at(Boundary::AfterPublish, first_row_done + 1),
            Actor::Worker,
            1,
        ),
        case(
            "relay, mid-row: after its first publish, before the row's ack",
            false,
            at(Boundary::AfterPublish, 1),
            Actor::Relay,
            0,
        ),
        case(
            "relay, between reads: two rows acked, the rest pending",
            false,
            at(Boundary::BetweenRelayReads, 2),
            Actor::Relay,
            2,
        ),
        case(
            "relay, between passes: the first pass's three rows acked",
            false,
            at(Boundary::BetweenRelayReads, 3),
            Actor::Relay,
            3,
        ),
    ];
    let n = cases.len();
    let mut runs = tokio::task::JoinSet::new();
    for (i, case) in cases.into_iter().enumerate() {
        // ids of one length: the same packing
        runs.spawn(wide_case(defs.clone(), layout.clone(), format!("wide-{i}"), case));
    }
    let mut tally = Tally::default();
    while let Some(run) = runs.join_next().await {
        let got = run.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        tally.processed += got.processed;
        tally.commits += got.commits;
        tally.lost += got.lost;
        tally.duplicates += got.duplicates;
    }
    assert_eq!((tally.lost, tally.duplicates), (0, 0), "{tally:?}");
    eprintln!(
        "wide fan-out on moto: {WIDE_WIDTH} children in spawn rows {layout:?}, {n} crash cases; {:.1} s",
        started.elapsed().as_secs_f64()
    );
    stm_testkit::assert_no_access_denied();
}

/// `count` wide fan-outs with random knobs and crash points as the moto run draws them,
/// but the first point, in turn: after one of the publishes of the fan-out's intents (by
/// the inline flush or, without it, the relay), before one of the relay's reads of its
/// packed rows (inline flush off), after its commit. Each runs on its own tables and queue
/// and must end as its crash-free run in memory, every child created once and joined, its
/// commit packed.
pub(crate) async fn random_wide_runs(seed: u64, count: u64) -> Totals {
    let defs = wide_definitions();
    let sc = wide_scenario();
    let mut rng = Rng::new(seed);
    let mut totals = Totals::default();
    for n in 0..count {
        let mut knobs = knobs(&mut rng, &sc);
        let piece = match n % 3 {
            // the first publishes carry the parent's intents, whoever sends them
            0 => CrashPoint::at(
                Boundary::AfterPublish,
                1 + rng.below((WIDE_WIDTH / PUBLISH_BATCH) as u64),
            ),
            // the relay's first run reads the parent's few packed rows (2 a read, 3 a pass)
            1 => {
                knobs.inline_flush = false;
                knobs.relay = WIDE_RELAY;
                CrashPoint::at(Boundary::BetweenRelayReads, 1 + rng.below(3))
            }
            _ => CrashPoint::at(Boundary::AfterCommit, 1),
        };
        let run_rng = Rng::new(rng.next());
        let id = format!("rw{n}-widefanout");
        let (expected, clean_stats, reached) = reference(&defs, &sc, &id, knobs, run_rng.clone()).await;
        let mut points = crash_points(&mut rng, &reached, &totals);
        points[0] = piece;
        let what = format!("moto wide fan-out {n} ({knobs:?}, crash points {points:?})");
        let plan = CrashPlan::new(points);
        let mut crashed = wide_harness(plan.clone(), &defs, knobs, run_rng).await;
        let got = crashed.run(&sc, &id, &what).await;
        let rows = plan
            .spawn_rows()
            .into_iter()
            .find(|rows| rows.iter().sum::<usize>() == WIDE_WIDTH)
            .unwrap_or_else(|| panic!("{what}: no commit wrote the {WIDE_WIDTH} spawn intents"));
        assert!(
            rows.len() <= WIDE_WIDTH / PUBLISH_BATCH,
            "{what}: not packed: {rows:?}"
        );
        assert_wide_joined(crashed.store.as_ref(), &id, &got, &what).await;
        compare(
            &expected,
            &got,
            &mut totals.tally,
            ("crash-free", "crashed"),
            &what,
        );
        eprintln!(
            "{what}: spawn rows {rows:?}, crashes {:?}, {} deliveries",
            plan.hits(),
            crashed.stats.deliveries
        );
        add_run(&mut totals, &sc, &plan, &crashed.stats, &clean_stats);
    }
    totals
}
