//! Crash injection at every boundary of the worker, the relay and the sweeper.
//!
//! A Lambda instance can die between any two of its calls: the at-least-once machinery
//! (the version CAS, the processed marks, the outbox and spawn intents, publish-before-ack,
//! publish-before-delete of timers, SQS redelivery) must turn every such death into a
//! retry that changes nothing. The seam: a [`CrashingStore`](wrappers::CrashingStore)
//! around the store and a [`CrashingQueue`](wrappers::CrashingQueue) around the queue share
//! one [`CrashPlan`](plan::CrashPlan), armed with crash points (a boundary and the Nth
//! occurrence of it). Once a point is reached the process is dead:
//! every later call through either wrapper fails until the harness revives it (a new
//! instance), and the harness throws the invocation's result away (a dead worker returns no
//! batch response, so none of its records is deleted: they all come back).
//!
//! The boundaries:
//!
//! 1. before a load (`load` / `load_for_event` fails, nothing read);
//! 2. after the engine ran, before the commit (`commit` fails, nothing written);
//! 3. after the commit, before the inline flush (`commit` applied, then the crash);
//! 4. after a publish, before its ack (`publish_batch` delivered, then the crash, so the
//!    outbox / spawn acks fail): the worker's inline flush and the relay;
//! 5. after the sweeper's publish, before `delete_timer` (the delete fails, not applied);
//! 6. before the batch response (the worker finished, its response is lost).
//!
//! Each scenario runs one machine's event script (the orthogonal `Fork` and `Checkout`, the
//! fan-outs `FanOut` and `Shipment`, the sweeper's `Timed`, the deferring `Deferring` and
//! `Webhook`) twice on fresh stacks with the same knobs (batch size, inline flush on or
//! off, relay passes between polls, the relay's reads of 1 to 100 rows and passes of 1 to
//! 300, and whether the client sends its events back to back or waits for quiescence after
//! each): crash-free (which also counts how often each
//! boundary is reached), then with 1–3 random crash points, each run driven to quiescence
//! (poll until nothing is received; relay and sweeper passes between polls; a manual clock
//! moved by the script so timers come due; a bound on the rounds). The crashed run
//! must end like the crash-free one by `common::scenarios::compare`: the same executions
//! with the same observable state and `processed_events`, the same applied steps in order
//! (each event took effect exactly once, in its sender's order), a version no commit
//! without a step pushed up, the same processed marks for the sent events; and no pending
//! outbox entry, spawn intent or timer left, an empty queue and an empty dead-letter queue.
//!
//! `crashes_change_nothing_in_memory` runs `STM_CRASH_SCENARIOS` scenarios (default 5000)
//! over MemoryStore + MemoryQueue; `crashes_change_nothing_over_dynamodb_and_sqs` runs
//! `STM_CRASH_MOTO_SCENARIOS` (default 50) over DynamoDbStore + SqsQueue on moto (the
//! crash-free reference there runs in memory), and beside them `STM_CRASH_MOTO_WIDE`
//! (default 3) wide fan-outs. `STM_CRASH_SEED` sets the seed of both (printed on a failure).
//! `a_commit_whose_flush_died_is_delivered_before_the_next_event` pins the ordering bug
//! the randomized run found (see there).
//!
//! **A wide fan-out** (`WideFanOut` in `tests/machines/wide_fan_out.stm`: 100 children of
//! one step) is committed in one transaction only because the DynamoDB store packs its
//! spawn intents into a few rows (the MemoryStore does not pack); the inline flush and the
//! relay publish the intents 10 a batch and ack a packed row once all of its intents are
//! out. Its pieces are those publishes and those rows:
//! `a_packed_wide_fan_out_survives_crashes_between_its_pieces_over_dynamodb_and_sqs` puts a
//! crash mid-row, at a row's end before its ack, between rows, after the commit, and
//! between the relay's reads and passes, each at a named occurrence, and checks where it
//! landed (the spawn rows left pending) and that no child is lost or doubled and the parent
//! joins; the moto run adds wide fan-outs with random knobs and crash points.
//!
//! One file per concern, under `crash_injection/`: `plan.rs` (the boundaries and the crash
//! plan), `wrappers.rs` (the store and queue a crashing process sees), `harness.rs` (one
//! run, driven to quiescence), `totals.rs` (the random knobs and crash points, the
//! crash-free reference, what the runs add up to), `randomized.rs` (the randomized runs, in
//! memory and on moto), `flush_order.rs` (a commit's flush before the next event) and
//! `wide.rs` (the wide fan-out).

mod common;

// a crate root looks for its modules beside it: name the directory
#[path = "crash_injection/flush_order.rs"]
mod flush_order;
#[path = "crash_injection/harness.rs"]
mod harness;
#[path = "crash_injection/plan.rs"]
mod plan;
#[path = "crash_injection/randomized.rs"]
mod randomized;
#[path = "crash_injection/totals.rs"]
mod totals;
#[path = "crash_injection/wide.rs"]
mod wide;
#[path = "crash_injection/wrappers.rs"]
mod wrappers;
