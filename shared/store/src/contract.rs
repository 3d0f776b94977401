//! The store contract, written once and run against every
//! [`ExecutionStore`](crate::ExecutionStore) (feature `contract`).
//!
//! Each check is a `pub async fn` taking a factory `make(trace_max) -> store` that returns
//! a **fresh, empty** store. [`store_contract_tests!`](crate::store_contract_tests) turns
//! them into one `#[tokio::test]` each:
//!
//! ```text
//! async fn make(trace_max: usize) -> MemoryStore { MemoryStore::with_trace_max(trace_max) }
//! stm_store::store_contract_tests!(make);
//! stm_store::store_limit_tests!(make); // stores that enforce DynamoDB's size limits
//! stm_store::store_dedupe_tests!(make, None); // how far back duplicates are recognised
//! ```
//!
//! The checks live in one submodule per concern and are re-exported here: their paths
//! (`stm_store::contract::<check>`) are what the macros and the tests call.

mod cas;
mod dedupe;
mod joins;
mod limits;
mod listing;
mod parked;
mod purge;
mod routes;
mod rows;
mod seeded;
mod shapes;
mod states;
mod timers;
mod trace;

use stm_core::{Event, Execution, Map, Value};

use crate::StoreError;

pub use cas::{
    failed_cas_writes_nothing, insert_and_update_cas, racing_creates_one_wins,
    stale_update_reports_found_version, update_of_missing_execution_conflicts,
};
pub use dedupe::{
    burst_commit_records_every_mark, dedupe_remembers_its_window, load_for_event_with_and_without_mark,
};
pub use joins::join_reports_count_each_instance_once;
pub use limits::{
    oversized_context_is_too_large, too_many_transaction_items_is_too_large, unstorable_timer_is_too_large,
};
pub use listing::cursor_pages_through_250_executions_with_filters;
pub use parked::parked_rows_keep_order_and_claims;
pub use purge::{
    ids_with_prefix_contract, purge_contract, purge_sweeps_partitions_past_one_batch,
    purge_while_paging_skips_nothing,
};
pub use routes::{routes_are_guarded_by_their_generation, tallies_add_up};
pub use rows::{
    a_wide_fan_out_commits_whole, oldest_pending_seqs_bounded_and_in_order,
    outbox_and_spawns_round_trip_and_ack, pending_rows_of_the_last_commit,
    seq_blocks_monotonic_across_concurrent_committers,
};
pub use seeded::{env_u64, Rng, SeedOnFailure};
pub use shapes::{
    drawn_shapes_come_back_whole_and_in_order, wide_fan_out, SHAPES_SEED_VAR, SHAPES_VAR, WIDE_MIN_BYTES,
};
pub use states::{in_states_finds_every_match_in_order, in_states_follow_each_commit};
pub use timers::{
    due_pages_give_each_due_timer_once_in_due_order, due_timers_earliest_first,
    guarded_delete_survives_reschedule, held_timers_wait_out_of_the_due_listing,
    timer_cancel_and_collapse_in_one_commit, DUE_PAGES_SEED_VAR,
};
pub use trace::{append_trace_and_read_back, trace_ring_keeps_last_n};

/// One `#[tokio::test]` per contract check, over the factory `$make`.
#[macro_export]
macro_rules! store_contract_tests {
    ($make:path) => {
        $crate::store_contract_tests!(@each $make;
            insert_and_update_cas,
            racing_creates_one_wins,
            stale_update_reports_found_version,
            update_of_missing_execution_conflicts,
            failed_cas_writes_nothing,
            seq_blocks_monotonic_across_concurrent_committers,
            pending_rows_of_the_last_commit,
            oldest_pending_seqs_bounded_and_in_order,
            a_wide_fan_out_commits_whole,
            drawn_shapes_come_back_whole_and_in_order,
            outbox_and_spawns_round_trip_and_ack,
            trace_ring_keeps_last_n,
            append_trace_and_read_back,
            cursor_pages_through_250_executions_with_filters,
            due_timers_earliest_first,
            due_pages_give_each_due_timer_once_in_due_order,
            held_timers_wait_out_of_the_due_listing,
            timer_cancel_and_collapse_in_one_commit,
            guarded_delete_survives_reschedule,
            load_for_event_with_and_without_mark,
            burst_commit_records_every_mark,
            purge_contract,
            ids_with_prefix_contract,
            purge_sweeps_partitions_past_one_batch,
            purge_while_paging_skips_nothing,
            in_states_follow_each_commit,
            in_states_finds_every_match_in_order,
            join_reports_count_each_instance_once,
            routes_are_guarded_by_their_generation,
            tallies_add_up,
            parked_rows_keep_order_and_claims,
        );
    };
    (@each $make:path; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                $crate::contract::$check($make).await;
            }
        )*
    };
}

/// The dedupe window check, for a store that surely recognises the last `$window`
/// processed events of an execution as duplicates (`None`: every one, as harel's
/// `processed` table does; `Some(10)`: `DedupeMarks::OnItem`).
#[macro_export]
macro_rules! store_dedupe_tests {
    ($make:path, $window:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn dedupe_remembers_its_window() {
            $crate::contract::dedupe_remembers_its_window($make, $window).await;
        }
    };
}

/// The checks of DynamoDB's size limits, for stores that enforce them.
#[macro_export]
macro_rules! store_limit_tests {
    ($make:path) => {
        $crate::store_contract_tests!(@each $make;
            oversized_context_is_too_large,
            too_many_transaction_items_is_too_large,
            unstorable_timer_is_too_large,
        );
    };
}

fn exe(id: &str, definition_id: &str) -> Execution {
    Execution::new(id, definition_id)
}

fn event(kind: &str, id: &str, data: Value) -> Event {
    let data = match data {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Event::with_data(kind, data).with_id(id)
}

fn map(v: Value) -> Map {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

#[track_caller]
fn assert_conflict<T: std::fmt::Debug>(
    result: Result<T, StoreError>,
    id: &str,
    expected: i64,
    found: Option<i64>,
) {
    match result {
        Err(StoreError::Conflict {
            id: got_id,
            expected: got_expected,
            found: got_found,
        }) => {
            assert_eq!(
                (got_id.as_str(), got_expected, got_found),
                (id, expected, found),
                "conflict carries (id, expected, found)"
            );
        }
        other => panic!("expected a conflict on {id} (expected {expected}, found {found:?}), got {other:?}"),
    }
}
