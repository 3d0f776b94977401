//! What an operator's console shows of an execution, gathered from the store and the
//! deployment's definitions and independent of how it is drawn: `stm ui` renders it as
//! HTML, a terminal monitor can render the same values.
//!
//! The gathering ([`gather`]) is the only part that does IO; the rest are pure functions
//! over the store's records: the trace as typed steps with their context diffs
//! ([`trace_steps`]), the children as a tree ([`ChildNode`]), and the statechart as nested
//! boxes with the active states flagged ([`state_tree`], [`active_set`]).

use std::collections::BTreeSet;

use anyhow::Result;
use serde_json::Value;
use stm_core::definition::{Definition, NodeId, NodeKind};
use stm_core::{Execution, Map, Status};
use stm_store::ExecutionStore;

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
}

/// A machine's `.stm` source, each line with whether an active state is declared on it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SourceView {
    pub file: String,
    pub lines: Vec<(String, bool)>,
}

impl SourceView {
    /// `text`, from `file`, with the lines in `marked` (1-based) marked.
    pub(crate) fn new(file: String, text: &str, marked: &BTreeSet<usize>) -> SourceView {
        let lines = text
            .lines()
            .enumerate()
            .map(|(i, line)| (line.to_string(), marked.contains(&(i + 1))))
            .collect();
        SourceView { file, lines }
    }
}

/// The source of `defn` with the declarations of its `active` states marked: `None` when
/// it has no file (a version read back from its frozen form) or the file is not readable
/// from here.
pub(crate) fn source_view(defn: &Definition, active: &BTreeSet<String>) -> Option<SourceView> {
    let file = defn.source_file.clone()?;
    let text = std::fs::read_to_string(&file).ok()?;
    let marked = defn
        .nodes
        .iter()
        .filter(|node| !node.full_path.is_empty() && active.contains(&node.full_path))
        .filter_map(|node| node.pos.as_ref().map(|pos| pos.line))
        .collect();
    Some(SourceView::new(file, &text, &marked))
}

/// One step of the trace.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TraceStep {
    pub index: Option<i64>,
    /// The event's kind, or the control command's name (`redrive`, `migrate`).
    pub event: String,
    pub event_data: Map,
    /// A control-plane command rather than an event.
    pub control: bool,
    pub from: Option<String>,
    pub to: Option<String>,
    pub actions: Vec<String>,
    /// What the step changed in the context (against the previous step's).
    pub changes: Vec<ContextChange>,
    /// Seconds since the epoch.
    pub timestamp: Option<f64>,
}

/// One context key a step added, changed or removed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContextChange {
    pub key: String,
    /// `None`: the step added the key.
    pub before: Option<Value>,
    /// `None`: the step removed the key.
    pub after: Option<Value>,
}

/// A child execution in the tree.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChildNode {
    pub id: String,
    /// The state it runs (a region's path) or was invoked from.
    pub root_path: String,
    /// An invoked machine (else a region of its parent's).
    pub submachine: bool,
    /// What the parent records of it.
    pub finished: bool,
    pub outcome: Option<String>,
    /// Its own record, when it exists yet (and the tree was not cut short before it).
    pub record: Option<ChildRecord>,
    pub children: Vec<ChildNode>,
}

/// The part of a child's record the tree shows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChildRecord {
    pub definition_id: String,
    pub status: Status,
    pub active_path: Option<String>,
}

/// What a state box is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BoxKind {
    /// The machine itself.
    Machine,
    /// A state with sub-states, one active at a time.
    Composite,
    /// An AND-state: its children are regions, all active at once.
    Orthogonal,
    /// A region of an orthogonal state (it runs as a child execution).
    Region,
    Leaf,
    /// A leaf that records an outcome when reached.
    Final,
}

impl BoxKind {
    /// A short lowercase name (CSS classes, a terminal's legend).
    pub fn as_str(self) -> &'static str {
        match self {
            BoxKind::Machine => "machine",
            BoxKind::Composite => "composite",
            BoxKind::Orthogonal => "orthogonal",
            BoxKind::Region => "region",
            BoxKind::Leaf => "leaf",
            BoxKind::Final => "final",
        }
    }
}

/// One state of the statechart, with its sub-states.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StateBox {
    pub name: String,
    /// Its full path (`""` for the machine).
    pub path: String,
    pub kind: BoxKind,
    /// Active in the execution (or one of its regions).
    pub active: bool,
    /// Its parent's initial state.
    pub initial: bool,
    /// The outcome a final state records.
    pub outcome: Option<String>,
    /// The machine it invokes, if any.
    pub invokes: Option<String>,
    pub children: Vec<StateBox>,
}

/// Load execution `id` and everything its console page shows; `None` if there is no such
/// execution.
pub(crate) async fn gather(connected: &Connected, id: &str) -> Result<Option<ExecutionView>> {
    let store = connected.store.as_ref();
    let Some(execution) = store.load(id).await? else {
        return Ok(None);
    };
    let steps = trace_steps(&store.read_trace(id).await?);
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
    Ok(Some(ExecutionView {
        execution,
        steps,
        children,
        children_truncated: budget == 0,
        diagram,
        leaves,
        source,
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
    for (cid, cs) in &exe.children {
        let mut node = ChildNode {
            id: cid.clone(),
            root_path: cs.root_path.clone(),
            submachine: cs.submachine,
            finished: cs.finished,
            outcome: cs.outcome.clone(),
            record: None,
            children: Vec::new(),
        };
        if *budget > 0 {
            *budget -= 1;
            if let Some(child) = store.load(cid).await? {
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

/// The active paths of the region children in `children`, and of their regions in turn:
/// an invoked machine runs another statechart, so its subtree is left out.
pub(crate) fn region_paths(children: &[ChildNode]) -> impl Iterator<Item = &str> {
    let mut out = Vec::new();
    let mut frontier: Vec<&ChildNode> = children.iter().collect();
    while let Some(node) = frontier.pop() {
        if node.submachine {
            continue;
        }
        if let Some(path) = node.record.as_ref().and_then(|r| r.active_path.as_deref()) {
            out.push(path);
        }
        frontier.extend(node.children.iter());
    }
    out.into_iter()
}

/// Every state active when `paths` are: each path and its ancestors (`A.B.C` makes
/// `A`, `A.B` and `A.B.C` active).
pub(crate) fn active_set<'a>(paths: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    for path in paths {
        let mut end = 0;
        for (at, c) in path.char_indices() {
            if c == '.' {
                set.insert(path[..at].to_string());
            }
            end = at + c.len_utf8();
        }
        if end > 0 {
            set.insert(path.to_string());
        }
    }
    set
}

/// The statechart below `root_path` (`""`: the whole machine) as nested boxes, the states
/// in `active` flagged; `None` if the machine has no such state.
pub(crate) fn state_tree(defn: &Definition, root_path: &str, active: &BTreeSet<String>) -> Option<StateBox> {
    let root = defn.get(root_path)?;
    Some(state_box(defn, root, active))
}

fn state_box(defn: &Definition, id: NodeId, active: &BTreeSet<String>) -> StateBox {
    let node = defn.node(id);
    let parent = node.parent.map(|p| defn.node(p));
    let kind = match node.kind {
        NodeKind::Root => BoxKind::Machine,
        NodeKind::Orthogonal => BoxKind::Orthogonal,
        _ if parent.is_some_and(|p| p.kind == NodeKind::Orthogonal) => BoxKind::Region,
        NodeKind::Composite => BoxKind::Composite,
        NodeKind::Leaf if node.outcome.is_some() => BoxKind::Final,
        NodeKind::Leaf => BoxKind::Leaf,
    };
    StateBox {
        name: if node.kind == NodeKind::Root {
            defn.id.clone()
        } else {
            node.name.clone()
        },
        path: node.full_path.clone(),
        kind,
        // the machine box is active whenever anything in it is
        active: active.contains(&node.full_path) || (node.kind == NodeKind::Root && !active.is_empty()),
        initial: parent.is_some_and(|p| p.start_state.as_deref() == Some(node.name.as_str())),
        outcome: node.outcome.clone(),
        invokes: node.invoke.clone(),
        children: node
            .children
            .iter()
            .map(|&child| state_box(defn, child, active))
            .collect(),
    }
}

/// The leaf states under `root_path` that belong to its own execution (not to a region's
/// child execution): where `redrive` may resume.
pub(crate) fn leaves_under(defn: &Definition, root_path: &str) -> Vec<String> {
    let Some(root) = defn.get(root_path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(id) = frontier.pop() {
        let node = defn.node(id);
        match node.kind {
            NodeKind::Leaf => out.push(node.full_path.clone()),
            // its regions run as their own executions
            NodeKind::Orthogonal => {}
            NodeKind::Composite | NodeKind::Root => frontier.extend(node.children.iter().rev()),
        }
    }
    out
}

/// The store's trace records as typed steps, each with what it changed in the context
/// (the first against an empty context: it shows the context the execution started with).
pub(crate) fn trace_steps(raw: &[Map]) -> Vec<TraceStep> {
    let empty = Map::new();
    let mut previous = &empty;
    let mut steps = Vec::with_capacity(raw.len());
    for record in raw {
        let text = |key: &str| record.get(key).and_then(Value::as_str).map(str::to_string);
        let context = match record.get("context_out") {
            Some(Value::Object(map)) => map,
            _ => previous,
        };
        steps.push(TraceStep {
            index: record.get("index").and_then(Value::as_i64),
            event: text("event_kind").unwrap_or_else(|| "?".to_string()),
            event_data: match record.get("event_data") {
                Some(Value::Object(map)) => map.clone(),
                _ => Map::new(),
            },
            control: text("cause").as_deref() == Some("control"),
            from: text("from_path"),
            to: text("to_path"),
            actions: match record.get("actions") {
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|a| a.as_str().map_or_else(|| a.to_string(), str::to_string))
                    .collect(),
                _ => Vec::new(),
            },
            changes: context_diff(previous, context),
            timestamp: record.get("timestamp").and_then(Value::as_f64),
        });
        previous = context;
    }
    steps
}

/// The keys `after` added, changed or removed relative to `before`: `after`'s keys in its
/// order, then the removed ones.
pub(crate) fn context_diff(before: &Map, after: &Map) -> Vec<ContextChange> {
    let mut changes: Vec<ContextChange> = after
        .iter()
        .filter(|(key, value)| before.get(*key) != Some(value))
        .map(|(key, value)| ContextChange {
            key: key.clone(),
            before: before.get(key).cloned(),
            after: Some(value.clone()),
        })
        .collect();
    changes.extend(
        before
            .iter()
            .filter(|(key, _)| !after.contains_key(*key))
            .map(|(key, value)| ContextChange {
                key: key.clone(),
                before: Some(value.clone()),
                after: None,
            }),
    );
    changes
}

/// The most region executions `stm trace` reads into one timeline (an orthogonal state
/// re-entered in a loop leaves a new set of regions each time).
pub(crate) const MAX_TRACE_REGIONS: usize = MAX_TREE_NODES;

/// One step of an execution's timeline as `stm trace` prints it: a trace record, and the
/// region execution that recorded it (`None`: the execution asked for).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TimelineStep {
    pub region: Option<String>,
    pub record: Map,
}

/// The traces of `exe`'s regions, and of their regions in turn, read from the store.
#[derive(Debug, Default)]
pub(crate) struct RegionTraces {
    /// `(region id, its trace)`, depth first, in the order the parents list them.
    pub traces: Vec<(String, Vec<Map>)>,
    /// Regions not read: [`MAX_TRACE_REGIONS`] were read already.
    pub left_out: usize,
}

/// Read the traces of the regions under `exe` (regions only: an invoked machine is
/// another statechart with a timeline of its own, as in [`region_paths`]).
pub(crate) async fn region_traces(store: &dyn ExecutionStore, exe: &Execution) -> Result<RegionTraces> {
    let mut out = RegionTraces::default();
    let mut budget = MAX_TRACE_REGIONS;
    collect_region_traces(store, exe, &mut budget, &mut out).await?;
    Ok(out)
}

async fn collect_region_traces(
    store: &dyn ExecutionStore,
    exe: &Execution,
    budget: &mut usize,
    out: &mut RegionTraces,
) -> Result<()> {
    for (cid, _) in exe.children.iter().filter(|(_, cs)| !cs.submachine) {
        if *budget == 0 {
            out.left_out += 1;
            continue;
        }
        *budget -= 1;
        // a region whose spawn is still on its way, or that was purged, has no steps
        let Some(region) = store.load(cid).await? else {
            continue;
        };
        out.traces.push((cid.clone(), store.read_trace(cid).await?));
        // a boxed future: regions nest
        Box::pin(collect_region_traces(store, &region, budget, out)).await?;
    }
    Ok(())
}

/// An execution's own trace and its regions' merged into one timeline, in time order.
///
/// Why merge here rather than record more: a domain event for an execution with live
/// regions is broadcast to them, and harel's broadcast commit writes no trace step on the
/// parent (its `_broadcast_step` goes to the step log, `trace=None`); each region records
/// its own step on its own trace. The trace table stays harel's, row for row (the
/// conformance suite compares it with harel's), so `stm trace` reads the regions' rows
/// too: the user then sees every step the worker's log shows, the broadcasts included.
///
/// Each trace keeps its own order (its index order, whatever the clocks say); between
/// traces, the earlier timestamp goes first, the execution's own step first on a tie. A
/// step without a timestamp counts as at its predecessor's.
pub(crate) fn timeline(own: Vec<Map>, regions: Vec<(String, Vec<Map>)>) -> Vec<TimelineStep> {
    let mut sources: Vec<(Option<String>, std::iter::Peekable<std::vec::IntoIter<Map>>, f64)> =
        std::iter::once((None, own))
            .chain(regions.into_iter().map(|(id, steps)| (Some(id), steps)))
            .map(|(region, steps)| (region, steps.into_iter().peekable(), f64::NEG_INFINITY))
            .collect();
    let mut merged = Vec::new();
    loop {
        let mut next: Option<(usize, f64)> = None;
        for (at, (_, steps, last)) in sources.iter_mut().enumerate() {
            let Some(step) = steps.peek() else {
                continue;
            };
            let when = step.get("timestamp").and_then(Value::as_f64).unwrap_or(*last);
            if next.is_none_or(|(_, best)| when.total_cmp(&best).is_lt()) {
                next = Some((at, when));
            }
        }
        let Some((at, when)) = next else {
            return merged;
        };
        let (region, steps, last) = &mut sources[at];
        *last = when;
        if let Some(record) = steps.next() {
            merged.push(TimelineStep {
                region: region.clone(),
                record,
            });
        }
    }
}

/// One line of `stm trace`: the step's index, its time since `first` (seconds since the
/// epoch), the event and its data, the transition and the actions it ran. A region's step
/// names the region in place of the index column (with the region's own index), as the
/// log names the execution of each step:
///
/// ```text
/// #1    +    0.217s  Checkout  Cart -> Fulfil
///       +    0.301s  co-1:Fulfil.Payment:0 #1  Charged  Fulfil.Payment.Charging -> Fulfil.Payment.Paid
/// ```
pub(crate) fn trace_line(step: &TimelineStep, first: f64) -> String {
    let record = &step.record;
    let get = |k: &str| record.get(k).cloned().unwrap_or(Value::Null);
    let text = |k: &str| match get(k) {
        Value::String(s) => s,
        Value::Null => "-".to_string(),
        other => other.to_string(),
    };
    let at = get("timestamp").as_f64().unwrap_or(first) - first;
    let data = match get("event_data") {
        Value::Object(m) if !m.is_empty() => format!(" {}", Value::Object(m)),
        _ => String::new(),
    };
    let actions = match get("actions") {
        Value::Array(a) if !a.is_empty() => {
            format!(
                "  actions: {}",
                a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")
            )
        }
        _ => String::new(),
    };
    let (index, region) = match &step.region {
        None => (format!("#{:<4}", text("index")), String::new()),
        Some(id) => (" ".repeat(5), format!("{id} #{}  ", text("index"))),
    };
    format!(
        "{index} +{at:>9.3}s  {region}{}{data}  {} -> {}{actions}",
        text("event_kind"),
        text("from_path"),
        text("to_path"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(value: Value) -> Map {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    const CHECKOUT: &str = r#"
event Go {}
machine Shop {
  initial Cart
  state Cart {}
  orthogonal Fulfil {
    state Payment {
      initial Charging
      state Charging {}
      final Paid success
      from Charging to Paid on Go
    }
    state Stock {
      initial Reserving
      state Reserving {}
      final Held success
      from Reserving to Held on Go
    }
  }
  final Done success
  from Cart to Fulfil on Go
  from Fulfil join all to Done else to Done
}
"#;

    fn shop() -> Definition {
        stm_core::dsl::load_definition_str(CHECKOUT, Some("Shop"), None).expect("the test machine compiles")
    }

    #[test]
    fn a_path_makes_its_ancestors_active() {
        let set = active_set(["Fulfil.Payment.Charging", "Fulfil.Stock.Reserving"]);
        let got: Vec<&str> = set.iter().map(String::as_str).collect();
        assert_eq!(
            got,
            [
                "Fulfil",
                "Fulfil.Payment",
                "Fulfil.Payment.Charging",
                "Fulfil.Stock",
                "Fulfil.Stock.Reserving"
            ]
        );
        assert!(active_set([""]).is_empty());
    }

    #[test]
    fn the_tree_nests_regions_under_their_orthogonal_state_and_flags_the_active_ones() {
        let active = active_set(["Fulfil", "Fulfil.Payment.Charging"]);
        let tree = state_tree(&shop(), "", &active).expect("the machine's root");
        assert_eq!(
            (tree.name.as_str(), tree.kind, tree.active),
            ("Shop", BoxKind::Machine, true)
        );
        let names: Vec<&str> = tree.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Cart", "Fulfil", "Done"]);
        assert!(tree.children[0].initial && !tree.children[0].active);
        let fulfil = &tree.children[1];
        assert_eq!((fulfil.kind, fulfil.active), (BoxKind::Orthogonal, true));
        let payment = &fulfil.children[0];
        assert_eq!((payment.kind, payment.active), (BoxKind::Region, true));
        let charging = &payment.children[0];
        assert_eq!(
            (
                charging.path.as_str(),
                charging.kind,
                charging.active,
                charging.initial
            ),
            ("Fulfil.Payment.Charging", BoxKind::Leaf, true, true)
        );
        let paid = &payment.children[1];
        assert_eq!(
            (paid.kind, paid.outcome.as_deref(), paid.active),
            (BoxKind::Final, Some("success"), false)
        );
        assert!(!fulfil.children[1].active, "Stock has no active path given");
        assert_eq!(tree.children[2].kind, BoxKind::Final);
    }

    #[test]
    fn a_region_execution_draws_its_own_branch_and_an_unknown_one_nothing() {
        let tree = state_tree(&shop(), "Fulfil.Stock", &BTreeSet::new()).expect("the region");
        assert_eq!((tree.name.as_str(), tree.kind), ("Stock", BoxKind::Region));
        assert!(state_tree(&shop(), "Nowhere", &BTreeSet::new()).is_none());
    }

    #[test]
    fn redrive_leaves_stop_at_the_regions() {
        assert_eq!(leaves_under(&shop(), ""), ["Cart", "Done"]);
        assert_eq!(
            leaves_under(&shop(), "Fulfil.Payment"),
            ["Fulfil.Payment.Charging", "Fulfil.Payment.Paid"]
        );
    }

    #[test]
    fn the_diff_names_added_changed_and_removed_keys() {
        let before = map(json!({"a": 1, "b": 2, "gone": true}));
        let after = map(json!({"a": 1, "b": 3, "new": "x"}));
        let changes = context_diff(&before, &after);
        assert_eq!(
            changes,
            [
                ContextChange {
                    key: "b".into(),
                    before: Some(json!(2)),
                    after: Some(json!(3))
                },
                ContextChange {
                    key: "new".into(),
                    before: None,
                    after: Some(json!("x"))
                },
                ContextChange {
                    key: "gone".into(),
                    before: Some(json!(true)),
                    after: None
                },
            ]
        );
        assert!(context_diff(&after, &after).is_empty());
    }

    #[test]
    fn trace_steps_diff_each_context_against_the_previous_one() {
        let raw = [
            map(
                json!({"index": 0, "event_kind": "Start", "event_data": {}, "from_path": null,
                "to_path": "Draft", "actions": [], "context_out": {"amount": 0.0}, "timestamp": 10.0}),
            ),
            map(
                json!({"index": 1, "event_kind": "Submit", "event_data": {"amount": 4.5},
                "from_path": "Draft", "to_path": "Payment.Charging", "actions": ["charge"],
                "context_out": {"amount": 4.5}, "timestamp": 11.5}),
            ),
            map(
                json!({"index": 2, "cause": "control", "event_kind": "redrive", "from_path": "X",
                "to_path": "Draft", "timestamp": 12.0}),
            ),
        ];
        let steps = trace_steps(&raw);
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[0].changes.len(), 1, "the start shows the initial context");
        assert_eq!(steps[0].from, None);
        let submit = &steps[1];
        assert_eq!(
            (
                submit.event.as_str(),
                submit.from.as_deref(),
                submit.to.as_deref()
            ),
            ("Submit", Some("Draft"), Some("Payment.Charging"))
        );
        assert_eq!(submit.actions, ["charge"]);
        assert_eq!(submit.changes[0].after, Some(json!(4.5)));
        assert_eq!(submit.timestamp, Some(11.5));
        // a step without a context keeps the previous one: no spurious removals
        assert!(steps[2].control && steps[2].changes.is_empty());
    }

    fn step(index: i64, kind: &str, from: &str, to: &str, at: Option<f64>) -> Map {
        let mut record = map(json!({"index": index, "event_kind": kind, "event_data": {},
            "from_path": from, "to_path": to, "actions": [], "context_out": {}}));
        if let Some(at) = at {
            record.insert("timestamp".into(), json!(at));
        }
        record
    }

    fn who_did_what(merged: &[TimelineStep]) -> Vec<(Option<&str>, &str)> {
        merged
            .iter()
            .map(|s| {
                (
                    s.region.as_deref(),
                    s.record.get("event_kind").and_then(Value::as_str).unwrap_or("?"),
                )
            })
            .collect()
    }

    #[test]
    fn the_timeline_puts_the_regions_steps_between_the_parents_in_time_order() {
        let parent = vec![
            step(0, "Start", "-", "Cart", Some(10.0)),
            step(1, "Checkout", "Cart", "Fulfil", Some(11.0)),
            step(2, "Finished", "Fulfil", "Fulfil", Some(13.0)),
            step(3, "Finished", "Fulfil", "Confirmed", Some(15.0)),
        ];
        let payment = vec![
            step(0, "Start", "-", "Fulfil.Payment.Charging", Some(11.1)),
            step(
                1,
                "Charged",
                "Fulfil.Payment.Charging",
                "Fulfil.Payment.Paid",
                Some(12.0),
            ),
        ];
        let stock = vec![
            step(0, "Start", "-", "Fulfil.Stock.Reserving", Some(11.2)),
            step(
                1,
                "Charged",
                "Fulfil.Stock.Reserving",
                "Fulfil.Stock.Reserving",
                Some(12.1),
            ),
            step(
                2,
                "Reserved",
                "Fulfil.Stock.Reserving",
                "Fulfil.Stock.Held",
                Some(14.0),
            ),
        ];
        let merged = timeline(
            parent,
            vec![("co-1:P".to_string(), payment), ("co-1:S".to_string(), stock)],
        );
        assert_eq!(
            who_did_what(&merged),
            [
                (None, "Start"),
                (None, "Checkout"),
                (Some("co-1:P"), "Start"),
                (Some("co-1:S"), "Start"),
                (Some("co-1:P"), "Charged"),
                (Some("co-1:S"), "Charged"),
                (None, "Finished"),
                (Some("co-1:S"), "Reserved"),
                (None, "Finished"),
            ]
        );
    }

    #[test]
    fn the_timeline_keeps_each_traces_own_order_whatever_its_clock_says() {
        // a region's clock behind (another Lambda's): its steps still keep their order,
        // a step without a timestamp stays after its predecessor, and a tie goes to the parent
        let parent = vec![
            step(0, "Start", "-", "A", Some(5.0)),
            step(1, "Go", "A", "B", Some(7.0)),
        ];
        let region = vec![
            step(0, "Start", "-", "B.R.X", Some(7.0)),
            step(1, "Late", "B.R.X", "B.R.Y", Some(6.0)),
            step(2, "Untimed", "B.R.Y", "B.R.Z", None),
        ];
        let merged = timeline(parent, vec![("r".to_string(), region)]);
        assert_eq!(
            who_did_what(&merged),
            [
                (None, "Start"),
                (None, "Go"),
                (Some("r"), "Start"),
                (Some("r"), "Late"),
                (Some("r"), "Untimed"),
            ]
        );
        assert!(timeline(Vec::new(), Vec::new()).is_empty());
    }

    #[test]
    fn a_trace_line_names_the_region_of_a_regions_step() {
        let mut own = step(1, "Checkout", "Cart", "Fulfil", Some(10.25));
        own.insert("actions".into(), json!(["charge", "reserve"]));
        let line = trace_line(
            &TimelineStep {
                region: None,
                record: own,
            },
            10.0,
        );
        assert_eq!(
            line,
            "#1    +    0.250s  Checkout  Cart -> Fulfil  actions: charge, reserve"
        );
        let mut charged = step(
            1,
            "Charged",
            "Fulfil.Payment.Charging",
            "Fulfil.Payment.Paid",
            Some(11.5),
        );
        charged.insert("event_data".into(), json!({"receipt": "r-1"}));
        let region = TimelineStep {
            region: Some("co-1:Fulfil.Payment:0".into()),
            record: charged,
        };
        assert_eq!(
            trace_line(&region, 10.0),
            "      +    1.500s  co-1:Fulfil.Payment:0 #1  Charged {\"receipt\":\"r-1\"}  \
             Fulfil.Payment.Charging -> Fulfil.Payment.Paid"
        );
        // a record missing its fields still prints (a harel row, a foreign writer)
        let bare = TimelineStep {
            region: None,
            record: Map::new(),
        };
        assert_eq!(trace_line(&bare, 3.0), "#-    +    0.000s  -  - -> -");
    }

    #[test]
    fn region_paths_skip_invoked_machines() {
        let record = |path: &str| {
            Some(ChildRecord {
                definition_id: "M".into(),
                status: Status::Running,
                active_path: Some(path.into()),
            })
        };
        let child = |id: &str, submachine: bool, path: &str, children: Vec<ChildNode>| ChildNode {
            id: id.into(),
            root_path: String::new(),
            submachine,
            finished: false,
            outcome: None,
            record: record(path),
            children,
        };
        let tree = vec![
            child(
                "r1",
                false,
                "A.R1.X",
                vec![child("r1a", false, "A.R1.X.Q.Y", Vec::new())],
            ),
            child(
                "sub",
                true,
                "Elsewhere",
                vec![child("deep", false, "Z", Vec::new())],
            ),
        ];
        let mut paths: Vec<&str> = region_paths(&tree).collect();
        paths.sort_unstable();
        assert_eq!(paths, ["A.R1.X", "A.R1.X.Q.Y"]);
    }
}
