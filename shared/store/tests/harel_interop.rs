//! Interop with harel 0.9.0's `DynamoDBStore` on the same tables (the same moto server and
//! prefix): what we write harel reads, what harel writes we read and advance with the CAS,
//! the two race fairly, items are byte-identical, and harel's trace reader works with our
//! `trace_idx` shortcut.
//!
//! One file per concern, under `harel_interop/`: `support.rs` (harel's side in Python, our
//! store), `round_trip.rs` (each reads and advances what the other wrote), `cas_race.rs`,
//! `trace.rs`, `items_and_tables.rs`, `list_cursor.rs` and `timers.rs`.

// a crate root looks for its modules beside it: name the directory
#[path = "harel_interop/cas_race.rs"]
mod cas_race;
#[path = "harel_interop/items_and_tables.rs"]
mod items_and_tables;
#[path = "harel_interop/list_cursor.rs"]
mod list_cursor;
#[path = "harel_interop/round_trip.rs"]
mod round_trip;
#[path = "harel_interop/support.rs"]
mod support;
#[path = "harel_interop/timers.rs"]
mod timers;
#[path = "harel_interop/trace.rs"]
mod trace;
