//! The [`Definition`]: the immutable program a `.stm` machine compiles to.
//!
//! A tree of [`Node`]s kept in an arena and navigated by [`NodeId`]. `full_path`
//! (`"Order.Payment.Retry"`, `""` for the machine root) is the stable address stored
//! in an [`Execution`](crate::Execution); navigation never parses it. Transitions
//! belong to the composite that is their *scope* and apply to their `source` node
//! and its descendants. The shape mirrors harel 0.9.0's `definition/model.py`.

use std::collections::BTreeSet;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

// the operators belong to Python's values, which evaluate them
pub use crate::pyvalue::ArithOp;
use crate::{Map, Value};

/// Index of a node in [`Definition::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub usize);

/// A 1-based line and column in a source file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeKind {
    /// A leaf state.
    Leaf,
    /// A state with children, one active at a time.
    Composite,
    /// The machine root (harel's `ParallelState`): composite for navigation.
    Root,
    /// An AND-state: each child region runs as its own child execution.
    Orthogonal,
}

/// A reference to a user function plus its bound inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionRef {
    /// The handler name after binding: a dotted path (`pkg.mod.fn`) or a bare name.
    pub function: String,
    pub inputs: Map,
}

/// Where a predicate leaf or an expression reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Source {
    Event,
    Context,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Event => "event",
            Source::Context => "context",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
}

impl CmpOp {
    /// The `.stm` spelling (`==`, `in`, ...).
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::In => "in",
        }
    }
}

/// A composable guard (harel's `Predicate`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Predicate {
    /// `source.field op value`, or `source.field op other_source.other_field`.
    Leaf {
        source: Source,
        field: String,
        op: CmpOp,
        value: Value,
        value_ref: Option<(Source, String)>,
    },
    All(Vec<Predicate>),
    Any(Vec<Predicate>),
    Not(Box<Predicate>),
}

/// The trigger of an event transition: its kinds (`A | B`) and an optional guard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventFilter {
    pub kinds: Vec<String>,
    pub predicate: Option<Predicate>,
}

/// `select fn [returns {..}] { "x" to S ... else to T }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selector {
    pub action: ActionRef,
    /// `str(result)` -> target name, resolved relative to the transition's scope.
    pub mapper: IndexMap<String, String>,
    pub default: Option<String>,
    /// Declared result values (validation only).
    pub enum_values: Option<Vec<Value>>,
}

/// The right-hand side of a `set`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    Ref {
        source: Source,
        field: String,
    },
    Lit(Value),
    Arith {
        op: ArithOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
}

/// `set context.<field> = <expr>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assign {
    pub field: String,
    pub expr: Expr,
}

/// `choose { when <pred> to S [set ..] ... else to T [set ..] }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    pub branches: Vec<(Predicate, NodeId)>,
    pub default: Option<NodeId>,
    pub branch_assignments: Vec<Vec<Assign>>,
    pub default_assignments: Vec<Assign>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    pub source: NodeId,
    /// Exactly one of `target`, `selector` and `choice` is set.
    pub target: Option<NodeId>,
    /// `None` for an automatic transition.
    pub event_filter: Option<EventFilter>,
    pub selector: Option<Selector>,
    pub choice: Option<Choice>,
    pub assignments: Vec<Assign>,
    /// Where it was declared, for messages: not part of the compiled form.
    #[serde(skip)]
    pub pos: Option<Pos>,
    /// Where each of the event filter's kinds is written, in order (empty when unknown),
    /// for messages: not part of the compiled form.
    #[serde(skip)]
    pub event_pos: Vec<Pos>,
}

impl Transition {
    pub fn is_automatic(&self) -> bool {
        self.event_filter.is_none()
    }
}

/// A state's `timeout`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Timeout {
    /// Literal seconds.
    Seconds(f64),
    /// Seconds read from this context key when the timer is scheduled.
    ContextKey(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    pub full_path: String,
    pub kind: NodeKind,
    pub parent: Option<NodeId>,
    pub children: Vec<NodeId>,
    pub on_enter: Option<ActionRef>,
    pub on_activity: Option<ActionRef>,
    pub on_exit: Option<ActionRef>,
    pub timeout: Option<Timeout>,
    /// The verdict recorded on the execution when this state is a terminal.
    pub outcome: Option<String>,
    /// Context keys a region propagates on its `Finished`.
    pub carry: Vec<String>,
    /// Event kinds held while unhandled in this node's scope.
    pub defer: BTreeSet<String>,
    /// Submachine FQN (or the synthetic id of an inline body) this state invokes.
    pub invoke: Option<String>,
    /// `with { child_key: parent_key }`, in declaration order.
    pub invoke_with: IndexMap<String, String>,
    /// `for var in coll`: (loop variable, collection context key).
    pub invoke_each: Option<(String, String)>,
    /// Name of the initial child.
    pub start_state: Option<String>,
    pub allow_history: bool,
    pub cancel_on_failure: bool,
    /// Transitions whose scope is this node.
    pub transitions: Vec<Transition>,
    /// Where it was declared, for messages: not part of the compiled form.
    #[serde(skip)]
    pub pos: Option<Pos>,
}

impl Node {
    /// A bare node, as a builder starts it.
    pub fn new(name: impl Into<String>, full_path: impl Into<String>, kind: NodeKind) -> Self {
        Node {
            name: name.into(),
            full_path: full_path.into(),
            kind,
            parent: None,
            children: Vec::new(),
            on_enter: None,
            on_activity: None,
            on_exit: None,
            timeout: None,
            outcome: None,
            carry: Vec::new(),
            defer: BTreeSet::new(),
            invoke: None,
            invoke_with: IndexMap::new(),
            invoke_each: None,
            start_state: None,
            allow_history: true,
            cancel_on_failure: false,
            transitions: Vec::new(),
            pos: None,
        }
    }

    /// Anything but a leaf (the root, composites and orthogonal states).
    pub fn is_composite(&self) -> bool {
        self.kind != NodeKind::Leaf
    }

    /// An orthogonal, invoke or fan-out node: entering it spawns child executions.
    pub fn is_spawn_site(&self) -> bool {
        self.kind == NodeKind::Orthogonal || self.invoke.is_some() || self.invoke_each.is_some()
    }
}

/// The type of a declared event field or context field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FieldType {
    String,
    Int,
    Float,
    Bool,
    Any,
}

impl FieldType {
    pub fn as_str(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Int => "int",
            FieldType::Float => "float",
            FieldType::Bool => "bool",
            FieldType::Any => "any",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "string" => FieldType::String,
            "int" => FieldType::Int,
            "float" => FieldType::Float,
            "bool" => FieldType::Bool,
            "any" => FieldType::Any,
            _ => return None,
        })
    }

    /// Whether `value` is of this type (harel's `value_fits`): `int` excludes
    /// booleans, `float` accepts an int too.
    pub fn fits(self, value: &Value) -> bool {
        match self {
            FieldType::Any => true,
            FieldType::String => value.is_string(),
            FieldType::Bool => value.is_boolean(),
            FieldType::Int => matches!(value, Value::Number(n) if !crate::pynum::is_float_text(n.as_str())),
            FieldType::Float => value.is_number(),
        }
    }
}

/// One declared field of an event's data or of the machine context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldSpec {
    pub ty: FieldType,
    pub required: bool,
    /// The value an execution starts with when none is passed (context fields only).
    pub default: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventType {
    pub name: String,
    pub fields: IndexMap<String, FieldSpec>,
}

/// Events the engine emits or consumes itself; they never need declaring.
pub const RESERVED_EVENTS: [&str; 9] = [
    "Timeout", "Finished", "Cancel", "Reset", "SetState", "Start", "Returned", "error", "Expired",
];

/// Control events: never broadcast to regions, always processed by the execution itself.
pub const CONTROL_EVENTS: [&str; 6] = ["Start", "Reset", "Cancel", "SetState", "Finished", "Timeout"];

/// A whole machine.
///
/// Built from `.stm` source by [`dsl`](crate::dsl), checked by
/// [`validate`](crate::validate::validate), and navigated by path or [`NodeId`]:
///
/// ```
/// use stm_core::dsl::load_definition_str;
/// use stm_core::validate::validate;
/// use stm_core::NodeKind;
///
/// let defn = load_definition_str(
///     r#"
/// event Open {}
/// machine Door {
///   initial Closed
///   state Closed {}
///   state Opened {
///     initial Ajar
///     state Ajar {}
///     final Wide success
///     from Ajar to Wide on Open
///   }
///   from Closed to Opened on Open
/// }
/// "#,
///     None,
///     None,
/// )?;
/// assert_eq!(defn.id, "Door");
/// assert!(validate(&defn).is_empty());
///
/// let wide = defn.get("Opened.Wide").expect("a nested state");
/// assert_eq!(defn.node(wide).kind, NodeKind::Leaf);
/// assert_eq!(defn.node(wide).outcome.as_deref(), Some("success"));
/// let opened = defn.node(wide).parent.expect("its composite");
/// assert_eq!(defn.path(opened), "Opened");
/// assert_eq!(defn.node(opened).kind, NodeKind::Composite);
/// // a transition belongs to the composite that is its scope
/// assert_eq!(defn.node(opened).transitions.len(), 1);
/// assert_eq!(defn.node(defn.root).transitions.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Definition {
    pub id: String,
    pub nodes: Vec<Node>,
    pub root: NodeId,
    /// `full_path` -> node; rebuilt from `nodes` when read back.
    #[serde(skip)]
    pub index: crate::FastMap<String, NodeId>,
    pub events: IndexMap<String, EventType>,
    /// Inline `invoke` bodies, each its own definition under a synthetic id
    /// (`Machine#path`), flattened (nested inline machines included).
    pub submachines: IndexMap<String, Definition>,
    /// Seconds a root execution may go without a domain event before `Expired`.
    pub ttl: Option<u64>,
    pub context_schema: IndexMap<String, FieldSpec>,
    /// The file the machine came from, for messages: not part of the compiled form.
    #[serde(skip)]
    pub source_file: Option<String>,
    /// Its [version](crate::version), once a registry has computed it (the runtime's
    /// `Definitions` does when it registers a machine): not part of the compiled form.
    #[serde(skip)]
    pub version: Option<crate::version::Version>,
}

impl Definition {
    /// An empty definition whose root node is named `id` (path `""`).
    pub fn new(id: impl Into<String>) -> Self {
        let id = id.into();
        let root = Node::new(id.clone(), "", NodeKind::Root);
        let mut index = crate::FastMap::default();
        index.insert(String::new(), NodeId(0));
        Definition {
            id,
            nodes: vec![root],
            root: NodeId(0),
            index,
            events: IndexMap::new(),
            submachines: IndexMap::new(),
            ttl: None,
            context_schema: IndexMap::new(),
            source_file: None,
            version: None,
        }
    }

    /// Rebuild the path index from `nodes` (a definition read back from its compiled
    /// form), the inline and imported machines' too.
    pub fn rebuild_index(&mut self) {
        self.index = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.full_path.clone(), NodeId(i)))
            .collect();
        for sub in self.submachines.values_mut() {
            sub.rebuild_index();
        }
    }

    /// Every node id it holds points into its arena, so navigating it cannot go out of
    /// bounds (a definition read back from a file, not built by the compiler).
    pub fn check_arena(&self) -> Result<(), String> {
        let len = self.nodes.len();
        let bad = |what: &str, id: NodeId| -> Result<(), String> {
            if id.0 < len {
                Ok(())
            } else {
                Err(format!(
                    "machine {}: {what} points at node {} of {len}",
                    self.id, id.0
                ))
            }
        };
        bad("the root", self.root)?;
        for node in &self.nodes {
            let at = |what: &str| format!("{} of {:?}", what, node.full_path);
            for &child in &node.children {
                bad(&at("a child"), child)?;
            }
            if let Some(parent) = node.parent {
                bad(&at("the parent"), parent)?;
            }
            for t in &node.transitions {
                bad(&at("a transition's source"), t.source)?;
                if let Some(target) = t.target {
                    bad(&at("a transition's target"), target)?;
                }
                if let Some(choice) = &t.choice {
                    for &(_, target) in &choice.branches {
                        bad(&at("a choice branch"), target)?;
                    }
                    if let Some(default) = choice.default {
                        bad(&at("a choice default"), default)?;
                    }
                }
            }
        }
        self.submachines.values().try_for_each(Definition::check_arena)
    }

    /// Add `node` under `parent`, indexing it by its `full_path`.
    pub fn add_node(&mut self, parent: NodeId, mut node: Node) -> NodeId {
        let id = NodeId(self.nodes.len());
        node.parent = Some(parent);
        self.index.insert(node.full_path.clone(), id);
        self.nodes.push(node);
        self.nodes[parent.0].children.push(id);
        id
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0]
    }

    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[id.0]
    }

    /// The node at `path`, if any.
    pub fn get(&self, path: &str) -> Option<NodeId> {
        self.index.get(path).copied()
    }

    pub fn path(&self, id: NodeId) -> &str {
        &self.nodes[id.0].full_path
    }

    /// The child of `parent` named `name`.
    pub fn child(&self, parent: NodeId, name: &str) -> Option<NodeId> {
        self.nodes[parent.0]
            .children
            .iter()
            .copied()
            .find(|c| self.nodes[c.0].name == name)
    }

    /// `id`'s ancestors from its parent up to the root.
    pub fn ancestors(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        std::iter::successors(self.nodes[id.0].parent, move |n| self.nodes[n.0].parent)
    }

    /// Whether `node` is `ancestor` or below it.
    pub fn is_descendant(&self, node: NodeId, ancestor: NodeId) -> bool {
        node == ancestor || self.ancestors(node).any(|a| a == ancestor)
    }

    /// The nodes from `top` down to `leaf`, both included; `None` if `top` is not an
    /// ancestor-or-self of `leaf`.
    pub fn chain(&self, top: NodeId, leaf: NodeId) -> Option<Vec<NodeId>> {
        let mut out = vec![leaf];
        let mut cur = leaf;
        while cur != top {
            cur = self.nodes[cur.0].parent?;
            out.push(cur);
        }
        out.reverse();
        Some(out)
    }

    /// Least common ancestor (the UML transition pivot).
    pub fn lca(&self, a: NodeId, b: NodeId) -> NodeId {
        let mut cur = Some(b);
        while let Some(n) = cur {
            if self.is_descendant(a, n) {
                return n;
            }
            cur = self.nodes[n.0].parent;
        }
        self.root
    }

    /// Resolve a dotted `name` by descending from `scope` child by child.
    pub fn descend(&self, scope: NodeId, name: &str) -> Option<NodeId> {
        name.split('.').try_fold(scope, |node, seg| self.child(node, seg))
    }

    /// Resolve a target name relative to `scope`, then each ancestor in turn
    /// (innermost match wins).
    pub fn resolve_relative(&self, scope: NodeId, name: &str) -> Option<NodeId> {
        let mut cur = Some(scope);
        while let Some(n) = cur {
            if let Some(found) = self.descend(n, name) {
                return Some(found);
            }
            cur = self.nodes[n.0].parent;
        }
        None
    }

    /// The event kinds this machine knows, in order: its declared events, then every
    /// other kind a transition or a `defer` names (its inline submachines' included), then
    /// the reserved ones the engine itself handles (`Cancel`, `Reset`, `Timeout`, ...).
    /// A sender checks a kind against it: any other kind is dropped by every state.
    ///
    /// ```
    /// let program = "event Go {}\nmachine M {\n  initial A\n  state A {}\n  state B {}\n  from A to B on Go\n  from B to A on Back\n}\n";
    /// let defn = stm_core::dsl::load_definition_str(program, None, None).expect("valid");
    /// let kinds = defn.event_kinds();
    /// assert_eq!(&kinds[..2], ["Go", "Back"]);
    /// assert!(kinds.iter().any(|k| k == "Cancel"));
    /// assert!(!kinds.iter().any(|k| k == "Bogus"));
    /// ```
    pub fn event_kinds(&self) -> Vec<String> {
        let mut kinds: indexmap::IndexSet<String> = self.events.keys().cloned().collect();
        self.collect_handled_kinds(&mut kinds);
        kinds.extend(RESERVED_EVENTS.iter().map(|k| k.to_string()));
        kinds.into_iter().collect()
    }

    /// Every state path of the machine, its root left out, in declaration order: what an
    /// execution's `active_path` can be.
    pub fn state_paths(&self) -> impl Iterator<Item = &str> + '_ {
        let root = self.root;
        self.nodes
            .iter()
            .enumerate()
            .filter(move |(i, n)| *i != root.0 && !n.full_path.is_empty())
            .map(|(_, n)| n.full_path.as_str())
    }

    /// The state paths at or under `prefix` (`Payment`: `Payment`, `Payment.Charging`,
    /// ...): the active paths of an execution that is "in" `prefix`. An unknown `prefix`
    /// is refused with the nearest state path.
    ///
    /// ```
    /// let defn = stm_core::dsl::load_definition_str(
    ///     "machine M {\n  initial Payment\n  state Payment {\n    initial Charging\n    \
    ///      state Charging {}\n    state Backoff {}\n  }\n  state Shipped {}\n}\n",
    ///     None,
    ///     None,
    /// )
    /// .expect("parses");
    /// assert_eq!(defn.paths_under("Payment").expect("known"), ["Payment", "Payment.Charging", "Payment.Backoff"]);
    /// let err = defn.paths_under("Paymnet").expect_err("unknown");
    /// assert_eq!(err.to_string(), "machine M has no state \"Paymnet\" (did you mean \"Payment\"?)");
    /// ```
    pub fn paths_under(&self, prefix: &str) -> Result<Vec<String>, UnknownState> {
        let under: Vec<String> = self
            .state_paths()
            .filter(|p| *p == prefix || p.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('.')))
            .map(str::to_string)
            .collect();
        if under.is_empty() {
            return Err(UnknownState {
                machine: self.id.clone(),
                path: prefix.to_string(),
                nearest: crate::suggest::nearest(prefix, self.state_paths()).map(str::to_string),
            });
        }
        Ok(under)
    }

    fn collect_handled_kinds(&self, kinds: &mut indexmap::IndexSet<String>) {
        for node in &self.nodes {
            for t in &node.transitions {
                if let Some(filter) = &t.event_filter {
                    let named = filter.kinds.iter().flat_map(|k| k.split('|')).map(str::trim);
                    kinds.extend(named.filter(|k| !k.is_empty()).map(str::to_string));
                }
            }
            kinds.extend(node.defer.iter().cloned());
        }
        for sub in self.submachines.values() {
            sub.collect_handled_kinds(kinds);
        }
    }

    /// Every action this machine (and its inline submachines) may call, by handler
    /// name, for a load-time binding check.
    pub fn action_names(&self) -> Vec<String> {
        let mut out = BTreeSet::new();
        for node in &self.nodes {
            for a in [&node.on_enter, &node.on_exit, &node.on_activity]
                .into_iter()
                .flatten()
            {
                out.insert(a.function.clone());
            }
            for t in &node.transitions {
                if let Some(sel) = &t.selector {
                    out.insert(sel.action.function.clone());
                }
            }
        }
        for sub in self.submachines.values() {
            out.extend(sub.action_names());
        }
        out.into_iter().collect()
    }

    /// The machine's declared context defaults applied to `context` (harel's
    /// `with_defaults`): every declared field it lacks that has a default is added.
    pub fn with_context_defaults(&self, context: &mut Map) {
        for (name, spec) in &self.context_schema {
            if let Some(default) = &spec.default {
                if !context.contains_key(name) {
                    context.insert(name.clone(), default.clone());
                }
            }
        }
    }

    /// What in `values` breaks the context schema (harel's `schema_problems`).
    pub fn context_problems(&self, values: &Map, check_required: bool) -> Vec<String> {
        schema_problems(&self.context_schema, values, check_required)
    }
}

/// What in `values` breaks `schema`: a declared field of the wrong type (`null` is only
/// accepted for an optional one), or, with `check_required`, a required field absent.
pub fn schema_problems(
    schema: &IndexMap<String, FieldSpec>,
    values: &Map,
    check_required: bool,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, spec) in schema {
        match values.get(name) {
            None => {
                if check_required && spec.required {
                    problems.push(format!("missing required field '{name}' ({})", spec.ty.as_str()));
                }
            }
            Some(Value::Null) if !spec.required => {}
            Some(value) => {
                if !spec.ty.fits(value) {
                    problems.push(format!(
                        "field '{name}' must be {}, got {} {}",
                        spec.ty.as_str(),
                        crate::pyvalue::type_name(value),
                        crate::pyvalue::repr(value)
                    ));
                }
            }
        }
    }
    problems
}

/// A state path a machine does not have ([`Definition::paths_under`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("machine {machine} has no state {path:?}{}", nearest.as_ref().map(|n| format!(" (did you mean {n:?}?)")).unwrap_or_default())]
pub struct UnknownState {
    pub machine: String,
    pub path: String,
    /// The nearest state path, when one is close enough to be a slip.
    pub nearest: Option<String>,
}
