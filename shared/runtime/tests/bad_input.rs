//! A catalogue of bad input (issue #6 §4): each case asserts the exact outcome (a record
//! reported failed, or acknowledged as a no-op), that the error text (and the log line)
//! names what was wrong, and that nothing else was touched or lost.
//!
//! - SQS bodies, one table: not JSON, JSON of the wrong shape, a wrong `MessageGroupId`
//!   or `stm_kind`, malformed spawn intents, ids DynamoDB cannot take as keys (empty, or
//!   an event id over 1,024 bytes, an execution or spawn id over 2,048), unknown
//!   executions and definitions, event kinds the machine does not know, a 250 KB body.
//!   Each bad record sits between two good records of other executions, so the FIFO
//!   batch rule (the record after it, of another group, is processed) and the untouched
//!   rest of the store are checked every time.
//! - Event data that does not fit its declaration: refused by `Control::send`; taken by
//!   the worker (harel's behaviour), where a mistyped `set` fails the execution.
//! - A batch mixing good and bad records across groups, driven to quiescence through
//!   the queue-driven stack (MemoryStore + MemoryQueue): the poison messages end in the
//!   dead-letter queue, everything else is processed. The FIFO batch rule holds back only
//!   the failed record's group (Powertools' `skip_group_on_error`): good records of other
//!   groups behind failures are processed on their first receive and never age into the
//!   dead-letter queue; a later record of the failed group is skipped while the other
//!   groups' records around it are processed; the failed groups of one batch do not
//!   carry over to the next. The limit that remains is pinned down next to it: an event
//!   behind a poison message in its own group is dead-lettered with it (documented).
//! - A context over DynamoDB's 400 KB item limit (over moto): the store refuses the
//!   commit before the call, the record fails with that message, the stored execution is
//!   unchanged, and the message is dead-lettered without blocking its group for good.
//!   With the trace on, a trace step over the limit fails the same way.
//! - Broken definitions directories and bad function configuration: the cold start fails
//!   naming the file:line:col, the machine, the action or the variable.
//!
//! One file per concern, under `bad_input/`: `support.rs` (the started in-memory
//! deployment and the records fed to its worker), `logs.rs` (what a test logged),
//! `body_table.rs` (the catalogue of bad SQS bodies) and `bodies.rs` (its run, and what the
//! no-op cases leave), `event_data.rs`, `mixed_batch.rs`, `item_limit.rs` and
//! `cold_start.rs` (definitions directories and function configuration).

mod common;

// a crate root looks for its modules beside it: name the directory
#[path = "bad_input/bodies.rs"]
mod bodies;
#[path = "bad_input/body_table.rs"]
mod body_table;
#[path = "bad_input/cold_start.rs"]
mod cold_start;
#[path = "bad_input/event_data.rs"]
mod event_data;
#[path = "bad_input/item_limit.rs"]
mod item_limit;
#[path = "bad_input/logs.rs"]
mod logs;
#[path = "bad_input/mixed_batch.rs"]
mod mixed_batch;
#[path = "bad_input/support.rs"]
mod support;
