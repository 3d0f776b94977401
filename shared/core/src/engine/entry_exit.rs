//! Entering and leaving states: a state's hooks and its timer, the start of an
//! execution (and its `ttl`), the descent into an initial or history child, and taking
//! a transition in UML order (exits up to the LCA, the `set`, entries down to the target).

use super::resolve::SHALLOW;
use super::{ttl_delay, ActionCall, Effect, Hook, Step, StepError, StepResult, TTL_PATH};
use crate::definition::{Assign, NodeId, NodeKind, Timeout};
use crate::execution::{Event, Status};
use crate::Map;

impl Step<'_> {
    /// Run `node`'s own hook, and arm/disarm its timer on enter/exit.
    pub(super) fn run(&mut self, node: NodeId, hook: Hook, event: Option<&Event>) -> StepResult {
        let defn = self.defn;
        let n = defn.node(node);
        let action = match hook {
            Hook::Enter => &n.on_enter,
            Hook::Exit => &n.on_exit,
            Hook::Activity => &n.on_activity,
        };
        if let Some(action) = action {
            let call = ActionCall {
                node,
                hook: Some(hook),
                action,
                event,
            };
            if let Err(error) = self.host.call(&call, &mut self.exe.context) {
                return Err(StepError::Action {
                    error,
                    on_exit: hook == Hook::Exit,
                });
            }
        }
        if let Some(timeout) = &n.timeout {
            match hook {
                Hook::Enter => {
                    let delay = match timeout {
                        Timeout::Seconds(s) => *s,
                        Timeout::ContextKey(key) => self.context_seconds(key)?,
                    };
                    self.effects.push(Effect::ScheduleTimer {
                        path: n.full_path.clone(),
                        fire_at: self.now + delay,
                    });
                }
                Hook::Exit => self.effects.push(Effect::CancelTimer {
                    path: n.full_path.clone(),
                }),
                Hook::Activity => {}
            }
        }
        Ok(())
    }

    /// A timeout read from the context: `float(context.get(key, 0.0))` in harel, whose
    /// `ValueError` or `TypeError` escapes the step unrouted.
    fn context_seconds(&self, key: &str) -> StepResult<f64> {
        match self.exe.context.get(key) {
            None => Ok(0.0),
            Some(v) => crate::pyvalue::py_float(v).map_err(|e| StepError::Raised {
                type_name: e.type_name,
                message: e.message,
            }),
        }
    }

    pub(super) fn start(&mut self) -> StepResult {
        self.exe.status = Status::Running;
        let root = self.root()?;
        let defn = self.defn;
        let start_node = defn
            .node(root)
            .start_state
            .as_deref()
            .and_then(|name| defn.child(root, name))
            .ok_or_else(|| StepError::Invalid(format!("{:?} has no initial state", defn.path(root))))?;
        if self.exe.parent_id.is_some() {
            self.run(root, Hook::Enter, None)?;
        }
        self.set_active(start_node);
        self.run(start_node, Hook::Enter, None)?;
        self.descend(start_node, None)?;
        self.drain()?;
        self.arm_ttl();
        Ok(())
    }

    pub(super) fn arm_ttl(&mut self) {
        if let Some(delay) = ttl_delay(self.defn, self.exe) {
            let fire_at = self.now + delay;
            self.effects.push(Effect::ScheduleTimer {
                path: TTL_PATH.into(),
                fire_at,
            });
            self.exe.expires_at = Some(fire_at);
        }
    }

    /// Enter a composite's initial (or history) child, down to a leaf; an orthogonal
    /// node forks instead.
    fn descend(&mut self, mut node: NodeId, event: Option<&Event>) -> StepResult {
        let defn = self.defn;
        while defn.node(node).is_composite() {
            let n = defn.node(node);
            if n.kind == NodeKind::Orthogonal {
                self.fork(node);
                return Ok(());
            }
            if !n.allow_history {
                self.exe.history.shift_remove(&n.full_path);
            }
            let child = match self.exe.history.get(&n.full_path) {
                Some(path) => Some(self.node_at(path)?),
                None => n.start_state.as_deref().and_then(|name| defn.child(node, name)),
            };
            let Some(child) = child else {
                return Ok(());
            };
            // position on the child before its enter runs, so a failing enter is
            // routed from the child (harel does the same)
            self.set_active(child);
            self.run(child, Hook::Enter, event)?;
            self.exe
                .history
                .insert(n.full_path.clone(), defn.path(child).to_string());
            node = child;
        }
        Ok(())
    }

    /// Take a transition with UML LCA semantics (see the module docs).
    pub(super) fn take(
        &mut self,
        target: NodeId,
        event: Option<&Event>,
        assignments: &[Assign],
    ) -> StepResult {
        let values = if assignments.is_empty() {
            Map::new()
        } else {
            self.evaluate(assignments, event)?
        };
        let defn = self.defn;
        let source = self.active()?;
        let pivot = defn.lca(source, target);
        // exited levels, innermost first: walk up from the source to the pivot
        let mut exiting = (source != pivot).then_some(source);
        while let Some(node) = exiting {
            exiting = defn.node(node).parent.filter(|p| *p != pivot);
            self.set_active(node);
            self.run(node, Hook::Exit, event)?;
            self.record_history(node);
            let n = defn.node(node);
            if n.kind == NodeKind::Orthogonal || n.invoke_each.is_some() {
                self.leave_regions(node);
            }
        }
        self.set_active(pivot);
        if !values.is_empty() {
            for (k, v) in &values {
                self.exe.context.insert(k.clone(), v.clone());
            }
            self.effects.push(Effect::Assigned(values));
        }
        // entered levels, outermost first
        let mut entered = [pivot; SHALLOW];
        let mut depth = 0;
        let mut cur = target;
        while cur != pivot && depth < SHALLOW {
            entered[depth] = cur;
            depth += 1;
            cur = defn.node(cur).parent.unwrap_or(pivot);
        }
        let deep; // deeper than SHALLOW below the pivot: rare, allocate
        let entered: &[NodeId] = if cur == pivot {
            entered[..depth].reverse();
            &entered[..depth]
        } else {
            deep = defn.chain(pivot, target).unwrap_or_default();
            deep.get(1..).unwrap_or_default()
        };
        for &node in entered {
            self.set_active(node);
            self.run(node, Hook::Enter, event)?;
            self.record_history(node);
        }
        self.descend(target, event)
    }
}
