//! The worker/relay/sweeper protocol, model-checked.
//!
//! [`model::Protocol`] is the protocol as a [stateright] model: a fan-out parent and its
//! children, a timed execution left and re-entered (and, in the suspension bounds,
//! suspended and resumed by an operator: its events parked on its item, its timer kept
//! armed, the `@parked` recheck), workers, the relay and the sweeper running concurrently
//! over a FIFO queue (visibility timeouts, redelivery, the deduplication window) and a
//! store (transactions, conditions, a lagging due index), with crashes at every step;
//! with the rows every path commits (the timed execution's rows released after a
//! suspension, the operator's status rows after the last block is published, status
//! events put on a bus, an entry of any batch publish refused). [`check`] explores it
//! exhaustively and reports each property; [`liveness`] proves that no reachable state
//! is a trap; [`replay`] runs the model's traces against the real worker, relay and
//! sweeper over `MemoryStore` and `MemoryQueue`, comparing states step by step.

pub mod actors;
pub mod check;
pub mod liveness;
pub mod machines;
pub mod model;
pub mod properties;
pub mod replay;
pub mod state;
pub mod trace;
