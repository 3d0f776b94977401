//! Child executions: forking an orthogonal node's regions, fanning out invoke
//! instances, cancelling them when their spawn site is left, exposing their results at
//! the join, and reporting a finished child to its parent.

use super::{ChildSpec, Effect, Step, StepError, StepResult};
use crate::definition::NodeId;
use crate::execution::counted_join::{Joined, Report, JOIN_SLOT_KEY};
use crate::execution::{ChildState, CountedJoin, Event, FanOutJoin, JoinSlot};
use crate::ids;
use crate::pyvalue;
use crate::{Map, Value};

/// Whether a child's region key `key` names something under spawn site `path` joined by
/// `sep` (`path.child` for a region, `path:i` for a fan-out instance).
fn key_under(key: &str, path: &str, sep: char) -> bool {
    key.strip_prefix(path).is_some_and(|rest| rest.starts_with(sep))
}

impl Step<'_> {
    pub(super) fn fork(&mut self, node: NodeId) {
        let defn = self.defn;
        let n = defn.node(node);
        let seq = self.exe.invoke_seq.get(&n.full_path).copied().unwrap_or(0);
        self.exe.children.clear();
        self.exe.joins.clear();
        let mut specs = Vec::with_capacity(n.children.len());
        for &child in &n.children {
            let child_path = defn.path(child);
            // harel's id, bounded only where SQS would refuse it (see `ids`)
            let child_id = ids::child_id(format!("{}:{}:{}", self.exe.id, child_path, seq));
            let mut passed = Map::new();
            for (child_key, parent_key) in &n.invoke_with {
                if let Some(v) = self.exe.context.get(parent_key) {
                    passed.insert(child_key.clone(), v.clone());
                }
            }
            specs.push(ChildSpec {
                child_id: child_id.clone(),
                root_path: child_path.to_string(),
                context: passed,
            });
            let mut state = ChildState::new(child_path);
            state.key = child_path.to_string();
            self.exe.children.insert(child_id, state);
        }
        self.effects.push(Effect::Spawn(specs));
    }

    pub(super) fn fan_out(&mut self, node: NodeId) -> StepResult {
        let defn = self.defn;
        let n = defn.node(node);
        let Some((loop_var, coll_key)) = &n.invoke_each else {
            return Ok(());
        };
        let seq = self.exe.invoke_seq.get(&n.full_path).copied().unwrap_or(0);
        let owned = format!("{}:{}:", self.exe.id, n.full_path);
        // harel's test is the id prefix; a bounded id (see `ids`) may have lost it, and
        // its instance key `{path}:{i}` (set below, harel's too) says the same
        let path = n.full_path.as_str();
        self.exe
            .children
            .retain(|cid, cs| !(cid.starts_with(&owned) || (cs.submachine && key_under(&cs.key, path, ':'))));
        let items: Vec<Value> = match self.exe.context.get(coll_key) {
            None => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(Value::Object(map)) => map.keys().map(|k| Value::from(k.as_str())).collect(),
            Some(Value::String(s)) => s.chars().map(|c| Value::from(c.to_string())).collect(),
            Some(other) => {
                return Err(StepError::Invalid(format!(
                    "fan-out over context.{coll_key}: '{}' object is not iterable",
                    pyvalue::type_name(other)
                )))
            }
        };
        let counted = self.exe.fan_out_join == FanOutJoin::Counted;
        let prefix = format!("{}:{}:{}:", self.exe.id, n.full_path, seq);
        let total = items.len() as u64;
        if counted {
            // this entry's join replaces the site's last one, as `retain` above drops
            // harel's entries of it
            let join = CountedJoin::new(n.full_path.clone(), prefix.clone(), n.full_path.clone(), total);
            self.exe.joins.retain(|j| j.site != n.full_path);
            self.exe.joins.push(join);
        }
        let mut specs = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let child_id = ids::child_id(format!("{}:{}:{}:{}", self.exe.id, n.full_path, seq, i));
            let mut ctx = Map::new();
            for (child_key, source) in &n.invoke_with {
                let v = if source == loop_var {
                    item.clone()
                } else {
                    self.exe.context.get(source).cloned().unwrap_or(Value::Null)
                };
                ctx.insert(child_key.clone(), v);
            }
            ctx.insert(
                "__invoke_fqn__".into(),
                n.invoke.clone().map_or(Value::Null, Value::from),
            );
            if counted {
                let slot = JoinSlot {
                    prefix: prefix.clone(),
                    index: i as u64,
                    total,
                };
                ctx.insert(JOIN_SLOT_KEY.into(), slot.to_value());
            } else {
                let mut state = ChildState::new("");
                state.submachine = true;
                state.key = format!("{}:{}", n.full_path, i);
                self.exe.children.insert(child_id.clone(), state);
            }
            specs.push(ChildSpec {
                child_id,
                root_path: String::new(),
                context: ctx,
            });
        }
        self.effects.push(Effect::Spawn(specs));
        Ok(())
    }

    /// Whether `cid` was spawned by `node` (a region `id:node.child:seq` or a fan-out
    /// instance `id:node:seq:i`). harel tests the id's prefix; a bounded id (see `ids`)
    /// may have lost it, so the child's key (`node.child` for a region, `node:i` for an
    /// instance, as harel sets them) is tested too: for a harel-form id both agree.
    fn region_of(&self, node: NodeId, cid: &str, state: &ChildState) -> bool {
        let path = self.defn.path(node);
        let owned = format!("{}:{}", self.exe.id, path);
        cid.strip_prefix(&owned)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with(':'))
            || key_under(&state.key, path, '.')
            || key_under(&state.key, path, ':')
    }

    /// Leaving a spawn site: bump its entry counter (a re-entry spawns fresh ids) and
    /// cancel every region still running.
    pub(super) fn leave_regions(&mut self, node: NodeId) {
        let path = self.defn.path(node).to_string();
        *self.exe.invoke_seq.entry(path.clone()).or_insert(0) += 1;
        let unfinished: Vec<String> = self
            .exe
            .children
            .iter()
            .filter(|(cid, cs)| !cs.finished && self.region_of(node, cid, cs))
            .map(|(cid, _)| cid.clone())
            .collect();
        // a counted join is kept until its instances have all reported, as harel keeps
        // cancelled children until theirs: a later join waits for them either way
        let counted: Vec<String> = self
            .exe
            .joins
            .iter()
            .find(|j| j.site == path)
            .map(|join| join.unreported().map(|i| join.child_id(i)).collect())
            .unwrap_or_default();
        for cid in unfinished.into_iter().chain(counted) {
            self.effects.push(Effect::Emit {
                to: Some(cid),
                event: Event::new("Cancel"),
            });
        }
    }

    pub(super) fn joined(&self) -> bool {
        !self.exe.has_unfinished_children()
    }

    /// A counted join's whole tally, recorded outside the parent and delivered at once
    /// (`{prefix, outcomes: {outcome: n}, others: [[index, outcome]]}`): the join is
    /// complete. One for a join already complete, or left for good, changes nothing.
    pub(super) fn complete_counted_join(&mut self, joined: &Value) -> StepResult {
        let joined: Joined = serde_json::from_value(joined.clone())
            .map_err(|e| StepError::Invalid(format!("a joined report that does not read: {e}: {joined}")))?;
        if let Some(join) = self.exe.joins.iter_mut().find(|j| j.prefix == joined.prefix) {
            join.complete(joined.tally.outcomes, &joined.tally.others);
        }
        Ok(())
    }

    /// Record `cid`'s report in the counted join it belongs to, if any. Returns whether
    /// it was one of a counted join's instances (reported before or not).
    pub(super) fn report_to_counted_join(&mut self, cid: &str, outcome: Option<&str>, result: &Map) -> bool {
        for join in &mut self.exe.joins {
            if let Some(index) = join.index_of(cid) {
                join.record(index, Report { outcome, result });
                return true;
            }
        }
        false
    }

    pub(super) fn any_region_failed(&self) -> bool {
        self.exe
            .children
            .values()
            .any(|c| c.finished && c.outcome.as_deref().is_some_and(|o| o != "success"))
    }

    pub(super) fn expose_region_results(&mut self) {
        let prefix = format!("{}:", self.exe.id);
        let mut results = Map::new();
        let mut reported = false;
        for (cid, cs) in &self.exe.children {
            let key = if cs.key.is_empty() {
                cid.strip_prefix(&prefix).unwrap_or(cid).to_string()
            } else {
                cs.key.clone()
            };
            let mut r = Map::new();
            r.insert(
                "outcome".into(),
                cs.outcome.clone().map_or(Value::Null, Value::from),
            );
            for (k, v) in &cs.result {
                r.insert(k.clone(), v.clone());
            }
            reported |= cs.outcome.is_some() || r.len() > 1;
            results.insert(key, Value::Object(r));
        }
        for join in &self.exe.joins {
            reported |= join.reports() > 0;
            results.insert(join.site.clone(), join.summary());
        }
        if reported {
            self.exe
                .context
                .insert("region_results".into(), Value::Object(results));
        }
    }

    /// A region or invoke child reached its global sink: tell the parent, carrying the
    /// outcome, the `carry`-projected context and any still-deferred events.
    pub(super) fn report_finished(&mut self, root: NodeId, parent_id: String) {
        let mut data = Map::new();
        data.insert(
            "child_id".into(),
            self.exe.child_id.clone().map_or(Value::Null, Value::from),
        );
        data.insert(
            "outcome".into(),
            self.exe.outcome.clone().map_or(Value::Null, Value::from),
        );
        for key in &self.defn.node(root).carry {
            if let Some(v) = self.exe.context.get(key) {
                data.insert(key.clone(), v.clone());
            }
        }
        if !self.exe.deferred.is_empty() {
            let deferred: Vec<Value> = self
                .exe
                .deferred
                .drain(..)
                .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
                .collect();
            data.insert("__deferred__".into(), Value::Array(deferred));
        }
        self.effects.push(Effect::Emit {
            to: Some(parent_id),
            event: Event::with_data("Finished", data),
        });
    }
}
