//! The relay and the sweeper over MemoryStore + MemoryQueue: failed publishes stay pending
//! (nothing is dropped) and keep their group's order; a double sweep sends one Timeout; in
//! shapes drawn from a seed, every row reaches its group once, in commit order.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::faulty::Faulty;
use common::scenarios::{env_u64, relay_bounds, scenario_count, Rng, SeedOnFailure};
use common::{event, object, Stack};
use serde_json::{json, Value};
use stm_core::{Event, Execution, Status};
use stm_runtime::{relay, sweeper, MemoryQueue, Queue};
use stm_store::contract::{wide_fan_out, WIDE_MIN_BYTES};
use stm_store::{Commit, CreateOptions, DynamoDbStore, ExecutionStore, MemoryStore, SpawnIntent};

#[tokio::test]
async fn failed_publishes_stay_pending_and_the_next_run_delivers_them() {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(5));
    let stack = Stack::new(store.clone(), queue.clone());
    for id in ["a", "b", "c"] {
        // the Start publishes fail: the creates still succeed, the entries stay queued
        queue.fail_next_publishes(1);
        stack
            .control
            .create("Flat", None, Some(id))
            .await
            .expect("create");
    }
    assert_eq!(store.pending_outbox().await.expect("outbox").len(), 3);
    assert!(queue.is_empty());

    queue.fail_next_publishes(1);
    let first = relay::relay_pending(store.as_ref(), queue.as_ref())
        .await
        .expect("relay");
    assert_eq!(
        (first.forwarded, first.failed, first.remaining),
        (2, 1, 1),
        "{first:?}"
    );
    let second = relay::relay_pending(store.as_ref(), queue.as_ref())
        .await
        .expect("relay");
    assert_eq!(
        (second.forwarded, second.failed, second.remaining),
        (1, 0, 0),
        "{second:?}"
    );
    stack.drain().await;
    for id in ["a", "b", "c"] {
        assert_eq!(stack.load(id).await.status, Status::Running);
    }
}

#[tokio::test]
async fn a_group_with_a_failed_publish_is_held_back_in_order() {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(5));
    let stack = Stack::new(store.clone(), queue.clone());
    // the fork's spawn intents fail to publish in the inline flush; the broadcast that
    // follows must not overtake them (it would reach regions that do not exist yet)
    stack
        .control
        .create("Fork", None, Some("f"))
        .await
        .expect("create");
    stack.drain().await;
    stack
        .control
        .send("f", &event("Go", json!({})))
        .await
        .expect("send");
    queue.fail_next_publishes(2);
    stack.drain().await;
    stack
        .control
        .send("f", &event("PaymentOk", json!({"receipt": "r"})))
        .await
        .expect("send");
    stack
        .control
        .send("f", &event("Packed", json!({})))
        .await
        .expect("send");
    stack.drain().await;
    let parent = stack.load("f").await;
    assert_eq!(parent.status, Status::Done, "{parent:?}");
    assert!(store.pending_spawns().await.expect("spawns").is_empty());
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
}

#[tokio::test]
async fn a_double_sweep_sends_one_timeout_and_suspended_timers_wait() {
    let store = Arc::new(MemoryStore::new());
    let queue = Arc::new(MemoryQueue::new(5));
    let stack = Stack::new(store.clone(), queue.clone());
    stack
        .control
        .create("Timed", None, Some("t"))
        .await
        .expect("create");
    stack
        .control
        .create("Timed", None, Some("s"))
        .await
        .expect("create");
    stack.drain().await;
    stack.control.suspend("s").await.expect("suspend");
    let later = common::START + 10.0;
    let before = queue.published();
    // the delete "fails" to happen between two sweeps: the same timer is swept twice;
    // the suspended execution's timer is held out of the listing
    let due = store.due_timers(later).await.expect("due");
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].execution_id, "t");
    let first = sweeper::sweep(store.as_ref(), queue.as_ref(), later)
        .await
        .expect("sweep");
    assert_eq!((first.fired, first.suspended), (1, 0), "{first:?}");
    let message = stm_runtime::OutgoingMessage::timeout("t", &due[0].path, due[0].fire_at);
    assert!(queue.publish_batch(&[message]).await.is_empty());
    assert_eq!(
        queue.published() - before,
        1,
        "the re-sent Timeout is deduplicated"
    );
    stack.clock.set(later);
    stack.drain().await;
    assert_eq!(stack.load("t").await.active_path.as_deref(), Some("Expired"));
    assert_eq!(
        stack.load("s").await.active_path.as_deref(),
        Some("Waiting"),
        "suspended: not fired"
    );
    stack.control.resume("s").await.expect("resume");
    stack.drain().await;
    assert_eq!(
        stack.load("s").await.active_path.as_deref(),
        Some("Expired"),
        "fires once resumed"
    );
}

/// A worker commits while a relay is between its two reads: a step that spawns a region,
/// then the broadcast to that region. The relay's pass reads the outbox before the spawn
/// intents (`ExecutionStore::oldest_pending_seqs`),
/// so every event it sees was committed after the intents of the regions it goes to, and
/// its second read finds those (or they were published already): an event never reaches a
/// region's group before the region's spawn intent (it would find no execution there and
/// be dropped as a no-op, lost).
#[tokio::test]
async fn an_event_committed_between_the_relays_reads_never_overtakes_its_regions_spawn() {
    let store = Arc::new(Faulty::default());
    let queue = Arc::new(MemoryQueue::new(5));
    let stack = Stack::new(store.clone(), queue.clone());
    stack
        .control
        .create("Flat", None, Some("p"))
        .await
        .expect("create");
    stack.drain().await;
    let region = "p:Work.Region:0";
    *store.between_reads.lock().expect("lock") = vec![
        (
            "p".to_string(),
            Commit {
                spawns: vec![SpawnIntent {
                    child_id: region.into(),
                    root_path: "Work.Region".into(),
                    context: Default::default(),
                }],
                ..Commit::default()
            },
        ),
        (
            "p".to_string(),
            Commit {
                emits: vec![(Some(region.into()), event("Ping", json!({})))],
                ..Commit::default()
            },
        ),
    ];
    let region_messages = || -> Vec<&'static str> {
        queue
            .snapshot()
            .iter()
            .filter(|m| m.group_id == region)
            .map(|m| if m.spawn { "spawn" } else { "event" })
            .collect()
    };
    relay::relay_pending(store.as_ref(), queue.as_ref())
        .await
        .expect("relay");
    let first = region_messages();
    assert!(
        first.first() != Some(&"event"),
        "the event went out before its region's spawn intent: {first:?}"
    );
    relay::relay_pending(store.as_ref(), queue.as_ref())
        .await
        .expect("relay");
    assert_eq!(region_messages(), ["spawn", "event"]);
}

/// What the drawn shapes covered, summed over a run.
#[derive(Default)]
struct ShapeTotals {
    rows: usize,
    inline_flushes: usize,
    relay_runs: usize,
    /// Relay runs whose pending rows took more than one read (pages fall between rows).
    multi_page_runs: usize,
    /// Relay runs with 2 or more pending rows of one execution to one group.
    shared_group_runs: usize,
    /// Publishes cut by bytes before SQS's 10 entries.
    byte_cut_chunks: usize,
    largest_group_in_a_commit: usize,
    /// Relay runs that ended with rows pending (the next run took them).
    /// Spawn intents that shared a row with an earlier one (DynamoDB's packed rows).
    packed_intents: usize,
}

/// How large a shape's commits may be: a MemoryStore takes any; DynamoDB's transaction
/// takes 100 items and 4 MB, and a wide fan-out is drawn to fill most of one.
#[derive(Clone, Copy)]
struct Room {
    /// Outbox rows a commit writes at most.
    rows: usize,
    /// The largest pad of an emitted event.
    pad: u64,
    /// A wide fan-out (past 100 intents, contexts filling several packed rows) in one
    /// commit of the shape.
    wide: bool,
}

const IN_MEMORY: Room = Room {
    rows: usize::MAX,
    pad: 250_000,
    wide: false,
};
const IN_DYNAMODB: Room = Room {
    rows: 60,
    pad: 50_000,
    wide: true,
};

/// The largest message a drawn row becomes (a 250 KB pad and its envelope).
const LARGEST_ROW_MESSAGE: usize = 260_000;

/// A size in `0..=max`, as often tiny as large ([`Rng::spread`]).
fn drawn_bytes(rng: &mut Rng, max: u64) -> usize {
    (rng.spread(max + 1) - 1) as usize
}

/// Scheduled relay runs with drawn bounds until nothing is pending (no publish fails here).
/// A run may end before the backlog does (a pass that forwarded nothing, only rows without
/// a target, ends it): the next one, a minute later in a deployment, goes on.
async fn relay_run(
    store: &dyn ExecutionStore,
    queue: &MemoryQueue,
    rng: &mut Rng,
    totals: &mut ShapeTotals,
    what: &str,
) {
    let bounds = relay_bounds(rng);
    let spawns = store.pending_spawns().await.expect("spawns");
    let outbox = store.pending_outbox().await.expect("outbox");
    let mut per_group: BTreeMap<(String, String), usize> = BTreeMap::new();
    for s in &spawns {
        *per_group
            .entry((s.parent_id.clone(), s.child_id.clone()))
            .or_default() += 1;
    }
    for o in &outbox {
        let source = o.event.id.split("/c").next().unwrap_or_default().to_string();
        *per_group
            .entry((source, o.target_id.clone().unwrap_or_default()))
            .or_default() += 1;
    }
    totals.relay_runs += 1;
    let rows_of_spawns: std::collections::BTreeSet<i64> = spawns.iter().map(|s| s.seq).collect();
    totals.packed_intents += spawns.len() - rows_of_spawns.len();
    totals.multi_page_runs += usize::from(spawns.len() + outbox.len() > bounds.read_rows);
    totals.shared_group_runs += usize::from(per_group.values().any(|n| *n >= 2));
    let rows = spawns.len() + outbox.len();
    let summary = relay::relay_pending_until(store, queue, None, None, f64::INFINITY, bounds)
        .await
        .expect("relay");
    assert_eq!(
        (summary.failed, summary.remaining),
        (0, 0),
        "{what}: relay with {bounds:?}: {summary:?}"
    );
    // one run drains the whole backlog, pass after pass, also when a pass acks only rows
    // it does not send (a run that stopped there left the rest for the next minute's)
    let left = store.pending_spawns().await.expect("spawns").len()
        + store.pending_outbox().await.expect("outbox").len();
    assert_eq!(
        left, 0,
        "{what}: {rows} rows, one relay run with {bounds:?} left some"
    );
}

/// One drawn shape: 1–3 executions commit 2–8 times in a random interleaving; a commit
/// writes 1–30 rows to each of a few groups (shared targets, and children its execution
/// spawned earlier), interleaved, of 0 to 250 KB each (so byte limits cut SQS batches
/// before their 10 entries), and 0–3 spawn intents. A commit is flushed inline (its rows
/// alone, as the worker does) unless its execution already has rows waiting for the
/// scheduled relay, which runs now and then with drawn bounds, and at the end. Within
/// `room`; with `room.wide`, one commit is a wide fan-out
/// ([`stm_store::contract::wide_fan_out`]) whose intents DynamoDB packs into several rows.
async fn relay_shape(
    store: &dyn ExecutionStore,
    room: Room,
    rng: &mut Rng,
    n: u64,
    totals: &mut ShapeTotals,
) {
    let queue = MemoryQueue::new(5);
    let executions = rng.between(1, 3) as usize;
    let shared: Vec<String> = (0..rng.between(1, 4)).map(|g| format!("s{n}-g{g}")).collect();
    let mut exes: Vec<Execution> = (0..executions)
        .map(|e| Execution::new(format!("s{n}-x{e}"), "Flat"))
        .collect();
    for exe in &mut exes {
        store.save(exe).await.expect("create");
    }
    let mut children: Vec<Vec<String>> = vec![Vec::new(); executions];
    // rows of an execution wait for the relay: its later commits wait too (the worker
    // never flushes a commit before its execution's earlier rows are out)
    let mut waiting = vec![false; executions];
    // per (source execution, group): the rows it sent, in its commit order
    let mut expected: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let what = format!("shape {n}");
    let commits = rng.between(2, 8);
    let wide_at = room.wide.then(|| rng.below(commits));
    for k in 0..commits {
        let wide = wide_at == Some(k);
        let e = rng.below(executions as u64) as usize;
        let id = exes[e].id.clone();
        let mut targets: Vec<Option<String>> = shared
            .iter()
            .filter(|_| rng.chance(60))
            .cloned()
            .map(Some)
            .collect();
        targets.extend(children[e].iter().filter(|_| rng.chance(30)).cloned().map(Some));
        if rng.chance(20) {
            // an emit without a target: acked, never sent
            targets.push(None);
        }
        let mut slots: Vec<Option<String>> = Vec::new();
        for target in targets {
            let rows = rng.between(1, 30) as usize;
            totals.largest_group_in_a_commit = totals.largest_group_in_a_commit.max(rows);
            slots.extend(std::iter::repeat_n(target, rows));
        }
        // the groups' rows interleaved in the commit
        rng.shuffle(&mut slots);
        slots.truncate(if wide { 5 } else { room.rows });
        // the commit's largest row, tiny to 250 KB: its rows drawn evenly below it, so a
        // commit of large rows fills SQS batches by bytes before their 10 entries
        let largest = if rng.chance(25) {
            250_000
        } else {
            drawn_bytes(rng, 250_000) as u64
        }
        .min(if wide { 4_000 } else { room.pad });
        let emits: Vec<(Option<String>, Event)> = slots
            .into_iter()
            .enumerate()
            .map(|(r, target)| {
                let row = format!("{id}/c{k}-r{r}");
                let pad = "p".repeat(rng.below(largest + 1) as usize);
                (target, event("Shaped", json!({ "pad": pad })).with_id(row))
            })
            .collect();
        let spawns: Vec<SpawnIntent> = if wide {
            wide_fan_out(rng.next(), &id, &format!("c{k}"), WIDE_MIN_BYTES)
        } else {
            (0..rng.below(4))
                .map(|j| SpawnIntent {
                    child_id: format!("{id}:c{k}:{j}"),
                    root_path: "root".into(),
                    context: object(json!({ "pad": "c".repeat(drawn_bytes(rng, 100_000)) })),
                })
                .collect()
        };
        for sp in &spawns {
            expected
                .entry((id.clone(), sp.child_id.clone()))
                .or_default()
                .push(sp.child_id.clone());
            children[e].push(sp.child_id.clone());
        }
        for (target, ev) in &emits {
            if let Some(target) = target {
                expected
                    .entry((id.clone(), target.clone()))
                    .or_default()
                    .push(ev.id.clone());
            }
        }
        totals.rows += spawns.len() + emits.len();
        let commit = Commit {
            emits,
            spawns,
            ..Commit::default()
        };
        store.commit(&mut exes[e], commit).await.expect("commit");
        if !waiting[e] && rng.chance(60) {
            // the inline flush: this commit's rows alone
            let rows = store.pending_rows_of(&id).await.expect("rows of the commit");
            let summary = relay::deliver(store, &queue, None, &rows.spawns, &rows.outbox).await;
            assert_eq!(
                (summary.failed, summary.remaining),
                (0, 0),
                "{what}: inline flush of commit {k}: {summary:?}"
            );
            totals.inline_flushes += 1;
        } else {
            waiting[e] = true;
        }
        if rng.chance(30) {
            relay_run(store, &queue, rng, totals, &format!("{what}, after commit {k}")).await;
            waiting.fill(false);
        }
    }
    relay_run(store, &queue, rng, totals, &format!("{what}, the last run")).await;
    assert!(
        store.pending_spawns().await.expect("spawns").is_empty(),
        "{what}: spawns left"
    );
    assert!(
        store.pending_outbox().await.expect("outbox").is_empty(),
        "{what}: outbox left"
    );

    totals.byte_cut_chunks += queue
        .publish_calls()
        .iter()
        .filter(|call| {
            // under 10 entries and within a largest row of the byte limit: cut by bytes
            call.entries < stm_runtime::queue::MAX_BATCH
                && call.bytes + LARGEST_ROW_MESSAGE > stm_runtime::queue::MAX_BATCH_BYTES
        })
        .count();
    let mut arrived: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for message in queue.snapshot() {
        let body: Value = serde_json::from_str(&message.body).expect("a message body is JSON");
        let (source, row) = if message.spawn {
            let parent = body["parent_id"].as_str().expect("parent").to_string();
            (parent, body["child_id"].as_str().expect("child").to_string())
        } else {
            let row = body["id"].as_str().expect("event id").to_string();
            (row.split("/c").next().unwrap_or_default().to_string(), row)
        };
        arrived
            .entry((source, message.group_id.clone()))
            .or_default()
            .push(row);
    }
    for (key, rows) in &expected {
        let got = arrived.get(key).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(
            got,
            rows.as_slice(),
            "{what}: the rows {} sent to group {} arrived out of its commit order, or not once",
            key.0,
            key.1
        );
    }
    assert_eq!(
        arrived.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "{what}: messages to groups nobody sent to"
    );
}

/// The relay's order in shapes drawn from a seed (`STM_RELAY_SHAPES_SEED`, printed on a
/// failure; `STM_RELAY_SHAPES` shapes, default 30; see `relay_shape`): its reads of 1 to
/// 100 rows and passes of 1 to 300, the byte cuts of its `SendMessageBatch` chunks and a
/// group's 1 to 30 rows in one commit fall on each other at random, so a reorder inside
/// one read, across reads or across chunks changes what a group receives. Each row must
/// reach its group once, and the rows one execution sends to one group arrive in its
/// commit order.
#[tokio::test]
async fn drawn_shapes_reach_each_group_once_in_commit_order() {
    let seed = env_u64("STM_RELAY_SHAPES_SEED", 0x5A9E_0F0A_D3E5);
    let shapes = scenario_count("STM_RELAY_SHAPES", 30);
    let _report = SeedOnFailure::new(
        "drawn_shapes_reach_each_group_once_in_commit_order",
        "STM_RELAY_SHAPES_SEED",
        seed,
    );
    let mut master = Rng::new(seed);
    let mut totals = ShapeTotals::default();
    for n in 0..shapes {
        let mut rng = Rng::new(master.next());
        relay_shape(&MemoryStore::new(), IN_MEMORY, &mut rng, n, &mut totals).await;
    }
    eprintln!(
        "relay shapes: seed {seed:#x}, {shapes} shapes, {} rows; {} inline flushes, {} relay runs ({} over \
         several reads, {} with 2+ rows of one group); {} publishes cut by bytes; up to {} rows of one group in a commit",
        totals.rows,
        totals.inline_flushes,
        totals.relay_runs,
        totals.multi_page_runs,
        totals.shared_group_runs,
        totals.byte_cut_chunks,
        totals.largest_group_in_a_commit,
    );
    if shapes >= 20 {
        // the shapes this suite is for were drawn
        assert!(totals.multi_page_runs > 0 && totals.shared_group_runs > 0 && totals.byte_cut_chunks > 0);
    }
}

/// The same over DynamoDB on moto (`STM_RELAY_MOTO_SHAPES` shapes, default 3, each on its
/// own tables; the queue in memory): commits within a transaction's limits, one of them a
/// wide fan-out whose intents the store packs into several rows, published 10 (or fewer,
/// by bytes) a batch by the inline flush or the relay, a row acked once all its intents
/// are out. Every intent reaches its child's group once; every row its group once, in its
/// execution's commit order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drawn_shapes_over_dynamodb_reach_each_group_once_in_commit_order() {
    let seed = env_u64("STM_RELAY_SHAPES_SEED", 0x5A9E_0F0A_D3E5);
    let shapes = scenario_count("STM_RELAY_MOTO_SHAPES", 3);
    let _report = SeedOnFailure::new(
        "drawn_shapes_over_dynamodb_reach_each_group_once_in_commit_order",
        "STM_RELAY_SHAPES_SEED",
        seed,
    );
    let moto = stm_testkit::moto().await;
    // not the in-memory test's shapes: these must fit DynamoDB's limits
    let mut master = Rng::new(seed ^ 0xD7A_A0DB);
    let mut totals = ShapeTotals::default();
    for n in 0..shapes {
        let options = CreateOptions {
            prefix: stm_testkit::unique_prefix("relay-shapes"),
            ..CreateOptions::default()
        };
        let store = DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
            .await
            .expect("tables");
        let mut rng = Rng::new(master.next());
        relay_shape(&store, IN_DYNAMODB, &mut rng, n, &mut totals).await;
    }
    eprintln!(
        "relay shapes on DynamoDB: seed {seed:#x}, {shapes} shapes, {} rows ({} spawn intents in a row \
         after another); {} inline flushes, {} relay runs ({} over several reads); {} publishes cut by bytes",
        totals.rows,
        totals.packed_intents,
        totals.inline_flushes,
        totals.relay_runs,
        totals.multi_page_runs,
        totals.byte_cut_chunks,
    );
    assert!(totals.packed_intents > 0, "no spawn row was packed");
    stm_testkit::assert_no_access_denied();
}

/// A backlog of large rows over DynamoDB (moto answers a `BatchGetItem` with at most 16 MB
/// of items, the rest in `UnprocessedKeys`, as DynamoDB does): the relay reads them a few
/// megabytes at a time by their recorded sizes, so no answer is partial; and a read that
/// is answered in part (the bound lifted) is finished by asking the rest, which spends
/// none of the store's attempts (one attempt here: a partial answer that spent it would
/// fail the run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_rows_are_read_by_their_size_and_a_cut_answer_spends_no_attempt() {
    let moto = stm_testkit::moto().await;
    let options = CreateOptions {
        prefix: stm_testkit::unique_prefix("relay-large"),
        retry: stm_store::RetryPolicy {
            max_attempts: 1,
            ..stm_store::RetryPolicy::default()
        },
        ..CreateOptions::default()
    };
    let store = DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("tables");
    // 6 commits of 17 emits of ~220 KB (a commit's transaction stays under 4 MB): 102
    // rows, about 22 MB, more than one 16 MB answer
    let mut exe = Execution::new("large-rows", "Flat");
    store.save(&mut exe).await.expect("create");
    let pad = "p".repeat(220_000);
    let (commits, per_commit) = (6, 17);
    let rows = commits * per_commit;
    let mut backlog = 0;
    let mut relay_a_backlog = async |bounds: relay::RelayBounds| {
        for _ in 0..commits {
            let emits = (0..per_commit)
                .map(|r| {
                    let id = format!("large-rows/c{backlog}-r{r}");
                    (
                        Some(format!("g{r}")),
                        event("Shaped", json!({ "pad": pad })).with_id(id),
                    )
                })
                .collect::<Vec<_>>();
            backlog += 1;
            let commit = Commit {
                emits,
                ..Commit::default()
            };
            store.commit(&mut exe, commit).await.expect("commit");
        }
        let queue = MemoryQueue::new(5);
        let cut_before = moto.strict().partial_batch_gets();
        let summary = relay::relay_pending_until(&store, &queue, None, None, f64::INFINITY, bounds)
            .await
            .expect("relay");
        (
            summary,
            moto.strict().partial_batch_gets() - cut_before,
            queue.len(),
        )
    };
    // by bytes: reads of 4 MB at most, no answer cut
    let (summary, cut, queued) = relay_a_backlog(relay::RelayBounds::DEFAULT).await;
    assert_eq!(
        (summary.forwarded, summary.remaining, queued),
        (rows, 0, rows),
        "{summary:?}"
    );
    assert_eq!(
        cut,
        0,
        "reads of {} bytes at most are answered whole",
        relay::RELAY_READ_BYTES
    );
    // the same backlog again, read 100 rows at a time whatever their size
    let (summary, cut, queued) = relay_a_backlog(relay::RelayBounds {
        read_bytes: usize::MAX,
        ..relay::RelayBounds::DEFAULT
    })
    .await;
    assert!(cut > 0, "a read of 22 MB is answered in parts");
    assert_eq!(
        (summary.forwarded, summary.remaining, queued),
        (rows, 0, rows),
        "{summary:?}"
    );
    stm_testkit::assert_no_access_denied();
}

/// Publishes in order, holding the first one until `hold_until` (a slow first page).
#[derive(Debug)]
struct SlowFirstPublish {
    hold_until: std::time::Instant,
    published: std::sync::Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl stm_runtime::queue::QueueHook for SlowFirstPublish {
    async fn publish_batch(
        &self,
        inner: &dyn Queue,
        messages: &[stm_runtime::queue::OutgoingMessage],
    ) -> Vec<stm_runtime::queue::PublishFailure> {
        let first = {
            let mut published = self.published.lock().expect("lock");
            let first = published.is_empty();
            published.extend(messages.iter().map(|m| m.group_id.clone()));
            first
        };
        if first {
            tokio::time::sleep_until(self.hold_until.into()).await;
        }
        inner.publish_batch(messages).await
    }
}

/// Over DynamoDB's 64 due-index shards: a sweep whose deadline comes while it fires its
/// first page stops there, having fired the earliest timers, and says it was cut; the next
/// sweep goes on from the earliest left, page after page in due order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_cut_by_its_deadline_fired_the_earliest_and_the_next_goes_on() {
    let moto = stm_testkit::moto().await;
    let options = CreateOptions {
        prefix: stm_testkit::unique_prefix("sweep-cut"),
        timer_full_scan_interval: None,
        ..CreateOptions::default()
    };
    let store = DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("tables");
    let seed = env_u64("STM_SWEEP_CUT_SEED", 0xc07);
    let _report = SeedOnFailure::new(
        "a_sweep_cut_by_its_deadline_fired_the_earliest_and_the_next_goes_on",
        "STM_SWEEP_CUT_SEED",
        seed,
    );
    let mut rng = Rng::new(seed);
    // armed in a drawn order; execution i is due at i
    let count = rng.between(60, 140) as usize;
    let mut order: Vec<usize> = (0..count).collect();
    rng.shuffle(&mut order);
    for i in order {
        let mut exe = Execution::new(format!("cut-{i:03}"), "Flat");
        let commit = Commit {
            timers: vec![stm_store::TimerOp::Schedule {
                path: "root.wait".into(),
                fire_at: i as f64,
            }],
            ..Commit::default()
        };
        store.commit(&mut exe, commit).await.expect("arm");
    }
    let page = rng.between(5, 30) as usize;
    let now = 1_000.0;
    let hold = std::time::Duration::from_millis(1_500);
    let queue = stm_runtime::queue::HookedQueue::new(
        Arc::new(MemoryQueue::new(5)),
        SlowFirstPublish {
            hold_until: std::time::Instant::now() + hold,
            published: Default::default(),
        },
    );
    let budget = sweeper::SweepBudget {
        deadline: Some(std::time::Instant::now() + hold / 2),
        page,
    };
    let first = sweeper::sweep_within(&store, &queue, now, budget)
        .await
        .expect("sweep");
    assert!(first.cut, "{first:?}");
    assert_eq!((first.due, first.fired), (page, page), "{first:?}");
    let fired_first: std::collections::BTreeSet<String> = queue
        .hook
        .published
        .lock()
        .expect("lock")
        .iter()
        .cloned()
        .collect();
    let earliest: std::collections::BTreeSet<String> = (0..page).map(|i| format!("cut-{i:03}")).collect();
    assert_eq!(fired_first, earliest, "the cut sweep fired the earliest timers");

    let rest = sweeper::sweep_within(&store, &queue, now, sweeper::SweepBudget { deadline: None, page })
        .await
        .expect("sweep");
    assert!(!rest.cut, "{rest:?}");
    assert_eq!((rest.due, rest.fired), (count - page, count - page), "{rest:?}");
    // page after page in due order: each page's timers all before the next page's
    let published = queue.hook.published.lock().expect("lock").clone();
    let due_at = |id: &String| id["cut-".len()..].parse::<usize>().expect("id");
    let pages: Vec<(usize, usize)> = published
        .chunks(page)
        .map(|c| {
            (
                c.iter().map(due_at).min().expect("page"),
                c.iter().map(due_at).max().expect("page"),
            )
        })
        .collect();
    assert!(
        pages.windows(2).all(|w| w[0].1 < w[1].0),
        "pages out of due order: {pages:?}"
    );
    assert!(store.due_timers(now).await.expect("due").is_empty());
}
