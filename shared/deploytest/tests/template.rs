//! `template.yaml`'s static invariants: the tables are the store's, the queue is FIFO with
//! its dead-letter queue, the worker reports partial batch failures, the functions are
//! built by cargo-lambda for arm64 with their own roles and the documented environment,
//! the alarms and outputs are there. (What each role allows is `tests/policies.rs`.)
//!
//! One file per concern, under `template/`: `support.rs` (the functions, a resource's
//! property), `tables.rs` (the store's tables and their capacity), `queues.rs` (the event
//! queue, the worker's batches, the queue names), `functions.rs` (schedules, build,
//! environment, layer, roles and log groups, timeouts), `alarms_and_outputs.rs`,
//! `existing_tables.rs` (a stack over tables already there), `side_by_side.rs` (two
//! stacks over one Prefix share no name but the tables'; the queues kept when replaced)
//! and `remote_actions.rs`.

// a crate root looks for its modules beside it: name the directory
#[path = "template/alarms_and_outputs.rs"]
mod alarms_and_outputs;
#[path = "template/existing_tables.rs"]
mod existing_tables;
#[path = "template/functions.rs"]
mod functions;
#[path = "template/queues.rs"]
mod queues;
#[path = "template/remote_actions.rs"]
mod remote_actions;
#[path = "template/side_by_side.rs"]
mod side_by_side;
#[path = "template/support.rs"]
mod support;
#[path = "template/tables.rs"]
mod tables;
