//! The scale simulator and its gate: the REAL worker (`Worker::handle_batch`), relay
//! (`relay::relay_pending`) and sweeper (`sweeper::sweep`, and its doorbell trigger's
//! `doorbell::handle_doorbells`) over a metered in-memory store
//! (`common/metered.rs`: DynamoDB's requests and units per partition key, as the DynamoDB
//! store would send them) and an in-memory SQS FIFO queue ([`SimQueue`](queue::SimQueue)),
//! in SIMULATED time.
//!
//! It prints one table: per workload and rate, the events/s offered and served under AWS's
//! quotas and the quota that binds first (`scale/quotas.rs`), the hottest partition key and
//! its units/s against DynamoDB's per-key limits (1,000 WCU/s, 3,000 RCU/s), the busiest
//! table against its table-level quota, the DynamoDB and SQS requests and the units per
//! event, the Lambda concurrency the worker needs, an event's latency (p50/p99), each
//! function's peak memory against its `MemorySize`, and the DynamoDB cost per million events
//! (on-demand prices read from `bench/cost_model.py` at run time); then the latency table
//! and the quotas to raise. Its last line is
//! `scale: hottest key NN% of its limit; per-event requests flat: yes|no; served NN% of offered; peak memory NN% of the function's`.
//!
//! The gate (asserted): at least 99% of the offered events served at the run's largest rate,
//! no function above 50% of its `MemorySize`, at the modelled rates no key above 50% of its
//! limit in any workload but the single hot execution and a fan-out's parent (one key by
//! definition: a ceiling is reported instead), and the DynamoDB requests per event of the same workload equal (within 2%)
//! with a small table and with a large one (10^4 idle executions in the quick run, 10^6 in
//! the full one). A shared item written by every emitting commit (a seq counter, say) puts
//! that key over the limit at 10,000 events/s with 10% emits: the gate fails.
//!
//! ```text
//! cargo test -p stm-runtime --test scale -- --nocapture     # quick: 1k and 10k events/s
//! STM_SCALE=full cargo test -p stm-runtime --test scale -- --nocapture   # + 100k, 10^6 rows
//! bash scripts/scale.sh [--quick]
//! ```
//!
//! # Simulated time
//!
//! One `ManualClock` is the driver's clock and the meter's: the producer's events arrive at
//! the workload's rate (evenly spaced), each message group (one execution) takes a batch of
//! the messages visible in it (up to 10, as SQS FIFO hands a group's messages to one
//! invocation), and is busy for the batch's cycle: the event source's receive, its invoke,
//! the handler's calls one after another and the delete, each drawn from its kind's
//! latency distribution (`scale/latency.rs`). Groups are independent (as many Lambda
//! instances as needed); within a group everything is serial. A commit that arms a timer
//! due within 15 minutes rings its doorbell (`Worker::ring`): a message on a standard
//! queue, delayed to the whole second before its `fire_at`, which the sweeper's SQS
//! trigger hands to `doorbell::handle_doorbells` in batches of up to its `BatchSize`, at
//! most `DoorbellMaxConcurrency` invocations at once (`scale/doorbell.rs`); a record
//! waits in its invocation until its `fire_at`, then fires its timer. The sweeper runs
//! every simulated second (the template's schedule is a minute: this is the sweeper's
//! path at its most frequent) and fires what no doorbell fired first; the relay runs once
//! per run, after the window.
//!
//! - **Lambda concurrency needed** = offered events/s x modelled worker seconds per event
//!   (its invoke and its handler).
//! - **Served** = offered capped by every quota (`scale/quotas.rs`); for the hot execution
//!   min(offered, its group's ceiling); with timers, the timer events the sweeps fired are
//!   also capped by what a sweep fires per modelled second (`SWEEP_CONCURRENCY` slots side
//!   by side, each slot's timers one after another, a page at a time), and those the
//!   doorbells fired by what `DoorbellMaxConcurrency` instances fire a second (an
//!   instance's timers per second of work: a trigger behind its doorbells receives them
//!   due and waits for none); the timer events a late timer kept from happening (a
//!   `Ticker` re-arms when its `Timeout` is stepped) are offered and not served.
//! - **Peak memory** = the function's resident memory at init plus the most heap one call
//!   held, counted by the test's allocator (`stm_testkit::heap`).
//!
//! # Workloads
//!
//! The machines are `tests/machines/scale.stm`. A mix's producer sends `Ping`s to
//! `Counter`s (10 events/s each on average, at least 1,000 of them) and to `Duo` parents (a
//! broadcast: the parent's commit writes one outbox row for its region, which the inline
//! flush publishes: an event to another execution); `Ticker`s arm a 1.5 s timer that the
//! doorbell (or the sweeper) fires, and its `Timeout` moves them to their other timed
//! state, which cancels the old timer and arms the next.
//! - plain: only `Counter`s;
//! - emits: 10% of the events are emitted by another execution's commit;
//! - timers: 10% of the events are `Timeout`s (the cost model's default share);
//! - hot execution: every event to one `Counter`;
//! - fan-out: one `Broadcast` over 1,000 recipients (today the commit of 1,000 spawn rows is
//!   over DynamoDB's 100-item transaction: the row reports the failure and its reason);
//! - mix (the table, small and large): 10% emits and 10% timers, its executions alone, then
//!   next to idle executions (half waiting on a 30-day timer, half suspended) seeded straight
//!   into the store: the flatness pair;
//! - relay backlog: pending outbox rows (10^4 quick, 10^6 full) seeded straight into the
//!   store, one run of the scheduled relay's code (its lanes and its scan's segments timed
//!   side by side): requests and units per forwarded row, the run's modelled time against
//!   the relay function's `Timeout` and the one-minute runs the backlog takes to drain
//!   (the goal: 5 minutes for 10^6 rows), and what it held at once (the
//!   most seqs and row bytes one store call handed back, with the rows' messages) against
//!   its `MemorySize` (both from template.yaml): the ceiling row.
//!
//! Also: status events at a high completion rate, a 10,000-child fan-out, a relay backlog
//! of packed spawn rows, a bulk suspend of timed executions and their resume, a bulk cancel
//! by state and timers due at once (`scale/bulk.rs`).
//!
//! One file per concern, under `scale/`: `config.rs` (the run's configuration, the gate's
//! constants, the prices and the deployment's figures), `latency.rs` (the latency model),
//! `quotas.rs` (AWS's quotas), `queue.rs` (the simulated SQS FIFO queue), `doorbell.rs`
//! (the doorbells' standard queue and its trigger's instances), `sim.rs` (the
//! simulation: worker, relay, sweeper, doorbells and control plane in simulated time), `results.rs` (a
//! run's row), `workloads.rs` and `bulk.rs` (the workloads) and `gate.rs` (the table, the
//! gate and the test).

#![cfg(feature = "aws")]

/// Every allocation counted: a function's peak memory is measured, not estimated.
#[global_allocator]
static HEAP: stm_testkit::heap::CountingAlloc = stm_testkit::heap::CountingAlloc;

#[path = "common/metered.rs"]
mod metered;

// a crate root looks for its modules beside it: name the directory
#[path = "scale/bulk.rs"]
mod bulk;
#[path = "scale/config.rs"]
mod config;
#[path = "scale/doorbell.rs"]
mod doorbell;
#[path = "scale/gate.rs"]
mod gate;
#[path = "scale/latency.rs"]
mod latency;
#[path = "scale/parking.rs"]
mod parking;
#[path = "scale/queue.rs"]
mod queue;
#[path = "scale/quotas.rs"]
mod quotas;
#[path = "scale/results.rs"]
mod results;
#[path = "scale/sim.rs"]
mod sim;
#[path = "scale/workloads.rs"]
mod workloads;
