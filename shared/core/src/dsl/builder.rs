//! An expanded machine config -> a [`Definition`]: harel's `definition/builder.py`.
//!
//! The root is the machine (harel's `ParallelState`, path `""`, children unprefixed);
//! each state's `full_path` is its parent's joined with its name by `.`; a state is
//! orthogonal when declared so, composite when it has children, else a leaf. Nodes
//! are created depth-first in declaration order; an inline `invoke { ... }` body is
//! built as its own definition under the synthetic id `Machine#path` when its node is
//! created. Transitions are resolved once every node exists, composite by composite in
//! the order their subtrees complete (harel's `pending` list), so the first
//! unresolvable target reported is the one harel reports. A state with no children
//! keeps no transitions (harel's builder ignores them).

use indexmap::IndexMap;

use super::program::{ActionCfg, InputCfg, PredCfg, SrcPos, StateCfg, TimeoutCfg, TransCfg};
use crate::definition::{
    ActionRef, Choice, Definition, EventFilter, Node, NodeId, NodeKind, Pos, Predicate, Selector, Timeout,
    Transition,
};
use crate::{pyvalue, Map, Value};

/// A construction failure, located at the offending transition or state.
#[derive(Debug)]
pub(crate) struct BuildError {
    pub message: String,
    pub pos: Option<SrcPos>,
    /// What to do about it ("did you mean `Paid`?"), when there is something to say.
    pub hint: Option<String>,
}

type BResult<T> = Result<T, BuildError>;

/// Build the definition `id` (root node named `name`) from an expanded config.
pub(crate) fn build_definition(cfg: &StateCfg, name: &str, id: &str) -> BResult<Definition> {
    let mut b = Builder {
        defn: Definition::new(id),
        pending: Vec::new(),
        mach_name: name.to_string(),
    };
    let root = b.defn.root;
    b.defn.node_mut(root).name = name.to_string();
    b.node(root, cfg)?;
    let pending = std::mem::take(&mut b.pending);
    for (node, transitions) in pending {
        for raw in transitions {
            let t = b.transition(node, raw)?;
            b.defn.node_mut(node).transitions.push(t);
        }
    }
    b.defn.ttl = cfg.ttl;
    b.defn.context_schema = cfg.context_schema.clone().unwrap_or_default();
    Ok(b.defn)
}

struct Builder<'c> {
    defn: Definition,
    pending: Vec<(NodeId, &'c [TransCfg])>,
    mach_name: String,
}

impl<'c> Builder<'c> {
    /// Fill node `id` from `cfg`, then create its children (recursively).
    fn node(&mut self, id: NodeId, cfg: &'c StateCfg) -> BResult<()> {
        {
            let node = self.defn.node_mut(id);
            node.on_enter = cfg.on_enter.as_ref().map(action_ref);
            node.on_activity = cfg.on_activity.as_ref().map(action_ref);
            node.on_exit = cfg.on_exit.as_ref().map(action_ref);
            node.outcome = cfg.outcome.clone();
            node.carry = cfg.carry.clone().unwrap_or_default();
            node.defer = cfg.defer.iter().flatten().cloned().collect();
            node.invoke = cfg.invoke.clone();
            node.invoke_with = cfg.invoke_with.clone().unwrap_or_default();
            node.invoke_each = cfg.invoke_each.clone();
            node.start_state = cfg.start.clone();
            node.allow_history = cfg.allow_history.unwrap_or(true);
            node.cancel_on_failure = cfg.cancel_on_failure.unwrap_or(false);
            node.pos = cfg.pos.map(|p| Pos {
                line: p.line,
                column: p.col,
            });
        }
        let timeout = match &cfg.timeout {
            None => None,
            Some(TimeoutCfg::Context(k)) => Some(Timeout::ContextKey(k.clone())),
            Some(TimeoutCfg::Value(v @ Value::Number(_))) => {
                Some(Timeout::Seconds(pyvalue::as_seconds(v).unwrap_or(0.0)))
            }
            Some(TimeoutCfg::Value(v)) => {
                return Err(BuildError {
                    message: format!(
                        "timeout of {} must be a number of seconds, got {}",
                        state_label(&self.defn, id),
                        pyvalue::repr(v)
                    ),
                    pos: cfg.pos,
                    hint: None,
                })
            }
            // unbound value parameters are reported before building
            Some(TimeoutCfg::Param(p)) => {
                return Err(BuildError {
                    message: format!("unbound value params: {p}"),
                    pos: cfg.pos,
                    hint: None,
                })
            }
        };
        self.defn.node_mut(id).timeout = timeout;

        if let Some(inline) = &cfg.invoke_inline {
            // an inline `invoke` body: its own definition under a synthetic id
            let syn = format!("{}#{}", self.mach_name, self.defn.path(id));
            let sub = build_definition(inline, &syn, &syn)?;
            self.defn.node_mut(id).invoke = Some(syn.clone());
            let nested: Vec<(String, Definition)> = sub
                .submachines
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            self.defn.submachines.insert(syn, sub);
            self.defn.submachines.extend(nested);
        }

        if !cfg.states.is_empty() {
            let parent_path = self.defn.path(id).to_string();
            for (name, child) in &cfg.states {
                let full_path = match (parent_path.is_empty(), name.is_empty()) {
                    (_, true) => parent_path.clone(),
                    (true, false) => name.clone(),
                    (false, false) => format!("{parent_path}.{name}"),
                };
                let kind = if child.orthogonal {
                    NodeKind::Orthogonal
                } else if !child.states.is_empty() {
                    NodeKind::Composite
                } else {
                    NodeKind::Leaf
                };
                let cid = self.defn.add_node(id, Node::new(name.clone(), full_path, kind));
                self.node(cid, child)?;
            }
            self.pending.push((id, &cfg.transitions));
        }
        Ok(())
    }

    fn transition(&self, scope: NodeId, raw: &TransCfg) -> BResult<Transition> {
        // pointed at the name that does not resolve, with the nearest one that does
        let unresolved = |what: &str, name: &str, pos: SrcPos, candidates: Vec<String>| BuildError {
            message: format!(
                "cannot resolve {what} {} from {}",
                py_repr(name),
                state_label(&self.defn, scope)
            ),
            pos: Some(pos),
            hint: crate::suggest::nearest(name, candidates.iter().map(String::as_str))
                .map(|near| format!("did you mean `{near}`?")),
        };
        let source = self
            .defn
            .descend(scope, &raw.from)
            .ok_or_else(|| unresolved("transition source", &raw.from, raw.from_pos, self.below(scope)))?;
        let target = match &raw.to {
            Some(to) => Some(self.defn.resolve_relative(scope, to).ok_or_else(|| {
                unresolved(
                    "transition target",
                    to,
                    raw.to_pos.unwrap_or(raw.pos),
                    self.reachable(scope),
                )
            })?),
            None => None,
        };
        let event_filter = raw.on_event.as_ref().map(|oe| EventFilter {
            kinds: oe.kind.split('|').map(|k| k.trim().to_string()).collect(),
            predicate: oe.pred.as_ref().map(predicate),
        });
        let selector = raw.selector.as_ref().map(|sel| Selector {
            action: action_ref(&sel.function),
            mapper: sel.mapper.clone(),
            default: sel.default.clone(),
            enum_values: sel
                .enum_values
                .as_ref()
                .map(|v| v.iter().cloned().map(Value::String).collect()),
        });
        let choice = match &raw.choice {
            None => None,
            Some(c) => {
                // the n-th target as written (the branches', then the default's)
                let resolve = |name: &str, n: usize| {
                    self.defn.resolve_relative(scope, name).ok_or_else(|| {
                        let pos = c.targets_pos.get(n).copied().unwrap_or(raw.pos);
                        unresolved("choice target", name, pos, self.reachable(scope))
                    })
                };
                let mut branches = Vec::with_capacity(c.branches.len());
                let mut branch_assignments = Vec::with_capacity(c.branches.len());
                for (n, (pred, to, set)) in c.branches.iter().enumerate() {
                    branches.push((predicate(pred), resolve(to, n)?));
                    branch_assignments.push(set.clone());
                }
                let default = match &c.default {
                    Some(d) => Some(resolve(d, c.branches.len())?),
                    None => None,
                };
                Some(Choice {
                    branches,
                    default,
                    branch_assignments,
                    default_assignments: c.default_set.clone(),
                })
            }
        };
        Ok(Transition {
            source,
            target,
            event_filter,
            selector,
            choice,
            assignments: raw.set.clone(),
            pos: Some(Pos {
                line: raw.pos.line,
                column: raw.pos.col,
            }),
            event_pos: raw
                .on_event
                .as_ref()
                .map(|oe| {
                    oe.kinds_pos
                        .iter()
                        .map(|p| Pos {
                            line: p.line,
                            column: p.col,
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

impl Builder<'_> {
    /// The names a source may use from `scope`: the paths below it, relative to it.
    fn below(&self, scope: NodeId) -> Vec<String> {
        let base = self.defn.path(scope);
        let mut out = Vec::new();
        let mut frontier: Vec<NodeId> = self.defn.node(scope).children.clone();
        while let Some(id) = frontier.pop() {
            let path = self.defn.path(id);
            let relative = if base.is_empty() {
                path
            } else {
                path.strip_prefix(base)
                    .map_or(path, |p| p.trim_start_matches('.'))
            };
            out.push(relative.to_string());
            frontier.extend(self.defn.node(id).children.iter().copied());
        }
        out.sort();
        out
    }

    /// The names a target may use from `scope`: those below it and below each of its
    /// ancestors (innermost first, as [`Definition::resolve_relative`] looks).
    fn reachable(&self, scope: NodeId) -> Vec<String> {
        std::iter::once(scope)
            .chain(self.defn.ancestors(scope))
            .flat_map(|n| self.below(n))
            .collect()
    }
}

fn py_repr(s: &str) -> String {
    super::program::py_repr(s)
}

fn state_label(defn: &Definition, id: NodeId) -> String {
    let path = defn.path(id);
    if path.is_empty() {
        format!("machine {}", defn.node(id).name)
    } else {
        format!("state {path}")
    }
}

fn action_ref(a: &ActionCfg) -> ActionRef {
    let (function, inputs) = match a {
        ActionCfg::Resolved { function, inputs } => (function, inputs),
        ActionCfg::Spec { name, inputs, .. } => (name, inputs),
    };
    ActionRef {
        function: function.clone(),
        inputs: inputs_map(inputs),
    }
}

fn inputs_map(inputs: &IndexMap<String, InputCfg>) -> Map {
    let mut m = Map::new();
    for (k, v) in inputs {
        let v = match v {
            InputCfg::Lit(v) => v.clone(),
            InputCfg::Param(p) => {
                let mut o = Map::new();
                o.insert("__param__".into(), Value::String(p.clone()));
                Value::Object(o)
            }
        };
        m.insert(k.clone(), v);
    }
    m
}

fn predicate(p: &PredCfg) -> Predicate {
    match p {
        PredCfg::Leaf {
            source,
            field,
            op,
            value,
            value_ref,
        } => Predicate::Leaf {
            source: *source,
            field: field.clone(),
            op: *op,
            value: value.clone(),
            value_ref: value_ref.clone(),
        },
        PredCfg::All(v) => Predicate::All(v.iter().map(predicate).collect()),
        PredCfg::Any(v) => Predicate::Any(v.iter().map(predicate).collect()),
        PredCfg::Not(c) => Predicate::Not(Box::new(predicate(c))),
        // unbound guards are reported before building
        PredCfg::Guard(_) => Predicate::All(Vec::new()),
    }
}
