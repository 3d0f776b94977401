//! The drain: following automatic transitions to quiescence, replaying deferred events,
//! spawning a single invoke's child, waiting at a join, and letting a sink bubble up to
//! its composite or end the execution.

use super::guard::{auto_matches, event_matches};
use super::resolve::Found;
use super::{ChildSpec, Effect, Hook, Step, StepResult};
use crate::definition::NodeKind;
use crate::execution::{ChildState, Event, Status};
use crate::ids;
use crate::{Map, Value};

impl Step<'_> {
    /// Pop the first deferred event (FIFO) that has a transition now.
    fn next_deferred(&mut self) -> Option<(Event, Found)> {
        let exe = &*self.exe;
        let (i, found) = exe.deferred.iter().enumerate().find_map(|(i, ev)| {
            self.resolve_here(&|t| event_matches(t, ev, &exe.context), true)
                .map(|f| (i, f))
        })?;
        Some((self.exe.deferred.remove(i), found))
    }

    /// Follow automatic transitions, bubble finished composites up, settle or sink.
    pub(super) fn drain(&mut self) -> StepResult {
        let defn = self.defn;
        let root = self.root()?;
        loop {
            let active = self.active()?;
            let n = defn.node(active);
            if let (Some(fqn), None) = (&n.invoke, &n.invoke_each) {
                // a single submachine: spawn it once per entry, then wait for `Finished`
                let seq = self.exe.invoke_seq.get(&n.full_path).copied().unwrap_or(0);
                let harel_cid = format!("{}:{}:{}", self.exe.id, n.full_path, seq);
                let cid = ids::child_id(harel_cid.clone());
                if !self.exe.children.contains_key(&cid) {
                    let mut ctx = Map::new();
                    for (child_key, parent_key) in &n.invoke_with {
                        if let Some(v) = self.exe.context.get(parent_key) {
                            ctx.insert(child_key.clone(), v.clone());
                        }
                    }
                    ctx.insert("__invoke_fqn__".into(), Value::from(fqn.as_str()));
                    let mut state = ChildState::new("");
                    state.submachine = true;
                    if cid != harel_cid {
                        // harel leaves the key empty and `region_results` strips `{id}:`
                        // off the child id; a bounded id has no such tail, so keep it here
                        state.key = format!("{}:{}", n.full_path, seq);
                    }
                    self.exe.children.insert(cid.clone(), state);
                    self.effects.push(Effect::Spawn(vec![ChildSpec {
                        child_id: cid,
                        root_path: String::new(),
                        context: ctx,
                    }]));
                }
                return Ok(());
            }
            if n.invoke.is_some() {
                // fan-out: spawn once per entry (scoped to this entry's seq), then join
                let seq = self.exe.invoke_seq.get(&n.full_path).copied().unwrap_or(0);
                let prefix = format!("{}:{}:{}:", self.exe.id, n.full_path, seq);
                // harel's prefix test, or (a bounded id may have lost the prefix) this
                // entry's instance 0, which every non-empty fan-out has
                let first = ids::child_id(format!("{prefix}0"));
                if !self.exe.children.keys().any(|c| c.starts_with(&prefix))
                    && !self.exe.children.contains_key(&first)
                    && !self
                        .exe
                        .joins
                        .iter()
                        .any(|j| j.site == n.full_path && j.prefix == prefix)
                {
                    self.fan_out(active)?;
                }
                if !self.joined() {
                    return Ok(());
                }
                self.expose_region_results();
            } else if n.kind == NodeKind::Orthogonal {
                // wait for every region, unless `cancel_on_failure` and one already failed
                let resolved = self.joined() || (n.cancel_on_failure && self.any_region_failed());
                if !resolved {
                    return Ok(());
                }
                self.expose_region_results();
            }

            let auto = {
                let context = &self.exe.context;
                self.resolve_here(&|t| auto_matches(t, context), false)
            };
            if let Some(found) = auto {
                self.fire(found, None)?;
                continue;
            }
            if self.resolve_here(&|_| true, false).is_some() {
                if let Some((event, found)) = self.next_deferred() {
                    self.fire(found, Some(&event))?;
                    continue;
                }
                return Ok(()); // waiting for an event
            }

            // a sink at its own scope: record the verdict, exit, bubble up or finish
            if n.outcome.is_some() && self.exe.outcome.is_none() {
                self.exe.outcome = n.outcome.clone();
            }
            self.run(active, Hook::Exit, None)?;
            if let Some(parent) = n.parent.filter(|p| *p != root) {
                self.exe.history.shift_remove(defn.path(parent));
                self.set_active(parent);
                continue;
            }
            if self.exe.parent_id.is_some() {
                self.run(root, Hook::Exit, None)?;
            }
            if self.exe.status == Status::Running {
                self.exe.status = Status::Done;
                if let Some(parent_id) = self.exe.parent_id.clone() {
                    self.report_finished(root, parent_id);
                }
            }
            return Ok(());
        }
    }
}
