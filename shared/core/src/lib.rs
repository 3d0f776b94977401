//! `stm-core`: the `.stm` language, the [`Definition`] it builds, validation, the
//! harel-compatible [`Execution`]/[`Event`] JSON types, and the pure engine.
//!
//! The engine does no IO and runs no user code (only the DSL loader reads files: the
//! `.stm` files it is given): it takes a definition, an execution, an event and the time,
//! mutates the execution and returns the effects the caller must carry out (see
//! [`engine`]). Blocking actions are served through the [`engine::ActionHost`] seam, which
//! the driver in `stm-runtime` implements.

pub mod definition;
pub mod dsl;
pub mod engine;
pub mod execution;
pub mod fmt;
pub mod ids;
pub mod pyjson;
pub mod pynum;
pub mod pyvalue;
pub mod render;
mod suggest;
pub mod validate;
pub mod version;

pub use definition::{Definition, Node, NodeId, NodeKind};

/// A `HashMap` with the fast hasher: for the maps every step looks up by path or id.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// A `HashSet` with the fast hasher.
pub type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
pub use execution::{ChildState, CountedJoin, Event, Execution, FanOutJoin, JoinSlot, Status};

/// A JSON object, insertion-ordered like a Python dict.
pub type Map = serde_json::Map<String, serde_json::Value>;
pub use serde_json::Value;
