//! What an operator's console shows of an execution, gathered from the store and the
//! deployment's definitions and independent of how it is drawn: `stm ui` renders it as
//! HTML, `stm monitor` renders the same values in a terminal, and `stm trace` prints the
//! timeline.
//!
//! By concern:
//! - `gather`: loading an execution and everything its page shows (the store's IO);
//! - `steps`: the trace as typed steps with their context diffs ([`TraceStep`]);
//! - `children`: the children as a tree ([`ChildNode`]);
//! - `chart`: the statechart as nested boxes with the active states flagged ([`StateBox`]);
//! - `source`: the machine's `.stm` source with the active states' lines marked
//!   ([`SourceView`]);
//! - `explain`: each recorded step's event explained from the state it started in
//!   ([`TraceExplainer`]);
//! - `timeline`: an execution's trace and its regions' merged in time order, as
//!   `stm trace` prints it (reading the regions' traces is its IO);
//! - `spans`: the steps of an execution and its children as span trees, as
//!   `stm trace --spans` prints them.
//!
//! Everything but the two readers is a pure function over the store's records.

mod chart;
mod children;
mod explain;
mod gather;
mod source;
mod spans;
mod steps;
mod timeline;

pub(crate) use chart::{state_tree, BoxKind, StateBox};
pub(crate) use children::ChildNode;
pub(crate) use explain::TraceExplainer;
pub(crate) use gather::{gather, ExecutionView, MAX_PARKED_SHOWN, MAX_TREE_NODES};
pub(crate) use source::SourceView;
pub(crate) use spans::span_tree;
pub(crate) use steps::{ContextChange, TraceStep};
pub(crate) use timeline::{region_traces, timeline, trace_line};
// the monitor's tests build an `ExecutionView` by hand, as `gather` builds it
#[cfg(test)]
pub(crate) use {chart::active_set, children::ChildRecord, steps::trace_steps};

/// A JSON object literal as a `Map`, for the tests' records.
#[cfg(test)]
fn map(value: serde_json::Value) -> stm_core::Map {
    match value {
        serde_json::Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}
