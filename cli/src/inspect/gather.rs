//! Loading one execution and everything its console page shows: the only reads of the
//! store a console page makes.

use anyhow::Result;
use stm_core::Execution;
use stm_store::ExecutionStore;

use super::chart::{active_set, leaves_under, state_tree, StateBox};
use super::children::{region_paths, ChildNode, ChildRecord};
use super::explain::TraceExplainer;
use super::source::{source_view, SourceView};
use super::steps::{trace_steps, TraceStep};
use crate::ops::Connected;

/// The most descendants [`gather`] loads for the children tree: a fan-out of thousands is
/// summarised, not read item by item on every page view.
pub(crate) const MAX_TREE_NODES: usize = 200;

/// One execution as a console shows it.
#[derive(Debug, Clone)]
pub(crate) struct ExecutionView {
    pub execution: Execution,
    /// The recorded trace, oldest first (empty when the worker does not record one).
    pub steps: Vec<TraceStep>,
    /// Its children (regions and invoked machines), each with theirs.
    pub children: Vec<ChildNode>,
    /// Whether the tree stopped at [`MAX_TREE_NODES`].
    pub children_truncated: bool,
    /// The statechart with the active states flagged, or why it cannot be drawn.
    pub diagram: Result<StateBox, String>,
    /// The leaves a redrive may resume at (the execution's own branch).
    pub leaves: Vec<String>,
    /// The machine's `.stm` source, where its file is readable here.
    pub source: Option<SourceView>,
    /// The kinds of the events waiting to step on it (parked), oldest first, at most
    /// [`MAX_PARKED_SHOWN`].
    pub parked: Vec<String>,
}

/// The most parked events a page lists (each one read from its row).
pub(crate) const MAX_PARKED_SHOWN: usize = 50;

/// Load execution `id` and everything its console page shows; `None` if there is no such
/// execution.
pub(crate) async fn gather(connected: &Connected, id: &str) -> Result<Option<ExecutionView>> {
    let store = connected.store.as_ref();
    let Some(execution) = store.load(id).await? else {
        return Ok(None);
    };
    let raw = store.read_trace(id).await?;
    let mut steps = trace_steps(&raw);
    // each step's explanation, shown when the step is clicked
    let definitions = &connected.control.driver.definitions;
    let mut explainer = TraceExplainer::new(definitions, &execution, &raw);
    for (step, record) in steps.iter_mut().zip(&raw) {
        step.explained = Some(explainer.explain(record).to_string());
    }
    let mut budget = MAX_TREE_NODES;
    let children = children_of(store, &execution, &mut budget).await?;
    let active = active_set(
        execution
            .active_path
            .iter()
            .map(String::as_str)
            .chain(region_paths(&children)),
    );
    let definition = connected
        .control
        .driver
        .definition_for(&execution)
        .map_err(|_| not_deployed(&execution));
    let diagram = definition.as_ref().map_err(Clone::clone).and_then(|defn| {
        state_tree(defn, &execution.root_path, &active).ok_or_else(|| {
            format!(
                "the machine {} has no state {:?} (the branch this execution runs)",
                defn.id, execution.root_path
            )
        })
    });
    let leaves = definition
        .as_ref()
        .map(|defn| leaves_under(defn, &execution.root_path))
        .unwrap_or_default();
    let source = definition.ok().and_then(|defn| source_view(&defn, &active));
    let parked = stm_store::waiting_on(store, &execution, MAX_PARKED_SHOWN)
        .await?
        .into_iter()
        .map(|e| e.kind)
        .collect();
    Ok(Some(ExecutionView {
        execution,
        steps,
        children,
        children_truncated: budget == 0,
        diagram,
        leaves,
        source,
        parked,
    }))
}

/// Why an execution's statechart is not drawn.
fn not_deployed(exe: &Execution) -> String {
    match exe.definition_version {
        Some(version) => format!(
            "the machine {} at version {version} is not among this console's definitions \
             (pass --definitions DIR, the folder of .stm files the deployment runs)",
            exe.definition_id
        ),
        None => format!(
            "the machine {} is not among this console's definitions (pass --definitions DIR, \
             the folder of .stm files the deployment runs)",
            exe.definition_id
        ),
    }
}

/// The children of `exe` as a tree, loading at most `budget` records in all.
async fn children_of(
    store: &dyn ExecutionStore,
    exe: &Execution,
    budget: &mut usize,
) -> Result<Vec<ChildNode>> {
    let mut nodes = Vec::new();
    let tracked = exe.children.iter().map(|(cid, cs)| ChildNode {
        id: cid.clone(),
        root_path: cs.root_path.clone(),
        submachine: cs.submachine,
        finished: cs.finished,
        outcome: cs.outcome.clone(),
        record: None,
        children: Vec::new(),
    });
    // a counted join keeps no entry per instance: its bit says whether it reported, and
    // its own record what it became
    let counted = exe.joins.iter().flat_map(|join| {
        (0..join.total).map(move |i| ChildNode {
            id: join.child_id(i),
            root_path: String::new(),
            submachine: true,
            finished: join.has_reported(i),
            outcome: None,
            record: None,
            children: Vec::new(),
        })
    });
    for mut node in tracked.chain(counted) {
        let cid = node.id.clone();
        if *budget > 0 {
            *budget -= 1;
            if let Some(child) = store.load(&cid).await? {
                node.record = Some(ChildRecord {
                    definition_id: child.definition_id.clone(),
                    status: child.status,
                    active_path: child.active_path.clone(),
                });
                // a boxed future: the tree is recursive
                node.children = Box::pin(children_of(store, &child, budget)).await?;
            }
        }
        nodes.push(node);
    }
    Ok(nodes)
}
