//! One event's handling: the control events (`Start`, `Reset`, `Cancel`, `SetState`,
//! `Finished`, `Timeout` and the `ttl`'s expiry) and domain events (a transition, else
//! deferred, `on activity` or dropped).

use super::guard::event_matches;
use super::resolve::{resolve_at, safe_teardown};
use super::{is_valid_reposition_target, Effect, Hook, Step, StepError, StepResult, TTL_PATH};
use crate::definition::{Definition, NodeId};
use crate::execution::{Event, Status};
use crate::ids;
use crate::pyvalue::{self, py_eq};
use crate::{Map, Value};

/// The state that defers `kind` when `active` is the active state: it or its innermost
/// ancestor with a `defer` naming it.
pub(super) fn deferring_state(defn: &Definition, active: NodeId, kind: &str) -> Option<NodeId> {
    std::iter::once(active)
        .chain(defn.ancestors(active))
        .find(|n| defn.node(*n).defer.contains(kind))
}

const RESERVED_FINISHED_KEYS: [&str; 5] = [
    "child_id",
    "outcome",
    "__deferred__",
    crate::execution::counted_join::JOIN_SLOT_KEY,
    crate::execution::counted_join::JOINED_KEY,
];

impl Step<'_> {
    fn deferred_kinds_contain(&self, kind: &str) -> bool {
        let Some(active) = self.exe.active_path.as_deref().and_then(|p| self.defn.get(p)) else {
            return false;
        };
        deferring_state(self.defn, active, kind).is_some()
    }

    fn drop_event(&mut self, reason: String) {
        self.effects.push(Effect::Dropped(reason));
    }

    pub(super) fn process(&mut self, event: &Event) -> StepResult {
        match event.kind.as_str() {
            "Reset" => self.reset(),
            "Cancel" => self.cancel(event),
            "Start" => {
                if self.exe.status == Status::Pending {
                    for (k, v) in &event.data {
                        self.exe.context.insert(k.clone(), v.clone());
                    }
                    self.start()?;
                } else {
                    self.drop_event(format!(
                        "the execution is {}, already started: Start starts only a PENDING one",
                        self.exe.status
                    ));
                }
                Ok(())
            }
            "SetState" => match event.data.get("current_state") {
                Some(Value::String(path)) => self.set_state(path),
                _ => Ok(()),
            },
            "Finished" => self.finished(event),
            "Timeout" => self.timeout(event),
            _ => self.domain(event),
        }
    }

    fn reset(&mut self) -> StepResult {
        if self.exe.status == Status::Cancelling {
            return Ok(());
        }
        if let Some(site) = self.exe.active_path.as_deref().and_then(|p| self.defn.get(p)) {
            if self.defn.node(site).is_spawn_site() {
                self.leave_regions(site);
            }
        }
        self.exe.children.clear();
        self.exe.joins.clear();
        self.exe.context.clear();
        if self.exe.parent_id.is_none() || self.exe.definition_fqn.is_some() {
            self.defn.with_context_defaults(&mut self.exe.context);
        }
        self.exe.history.clear();
        self.exe.deferred.clear();
        self.exe.active_path = None;
        self.active_node.set(None);
        self.exe.outcome = None;
        self.exe.error = None;
        self.exe.status = Status::Pending;
        self.start()
    }

    fn cancel(&mut self, event: &Event) -> StepResult {
        if self.exe.status.is_finished() {
            return Ok(());
        }
        let live =
            matches!(self.exe.status, Status::Running | Status::Cancelling) && self.exe.active_path.is_some();
        let found = if live { self.resolve_event(event) } else { None };
        let Some(found) = found else {
            self.exe.status = Status::Cancelled;
            return Ok(());
        };
        self.exe.status = Status::Running;
        self.fire(found, Some(event))?;
        self.drain()?;
        self.exe.processed_events += 1;
        Ok(())
    }

    fn set_state(&mut self, path: &str) -> StepResult {
        if !is_valid_reposition_target(self.defn, self.exe, path)
            || !self.joined()
            || self.exe.status != Status::Running
        {
            return Ok(());
        }
        self.exe.deferred.clear();
        self.exe.active_path = Some(path.to_string());
        self.active_node.set(None);
        self.drain()
    }

    fn finished(&mut self, event: &Event) -> StepResult {
        let cid = event
            .data
            .get("child_id")
            .and_then(Value::as_str)
            .map(str::to_string);
        let outcome = event.data.get("outcome").and_then(Value::as_str);
        let result = || -> Map {
            event
                .data
                .iter()
                .filter(|(k, _)| !RESERVED_FINISHED_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        if let Some(state) = cid.as_ref().and_then(|c| self.exe.children.get_mut(c)) {
            state.finished = true;
            state.outcome = outcome.map(str::to_string);
            state.result = result();
        } else if let Some(cid) = cid.as_deref().filter(|_| !self.exe.joins.is_empty()) {
            self.report_to_counted_join(cid, outcome, &result());
        } else if let Some(joined) = event.data.get(crate::execution::counted_join::JOINED_KEY) {
            self.complete_counted_join(joined)?;
        }
        if let Some(Value::Array(raw)) = event.data.get("__deferred__") {
            for raw_event in raw {
                let ev: Event = serde_json::from_value(raw_event.clone())
                    .map_err(|e| StepError::Invalid(format!("bad deferred event in Finished: {e}")))?;
                self.exe.deferred.push(ev);
            }
        }
        let defn = self.defn;
        let active = self.exe.active_path.as_deref().and_then(|p| defn.get(p));
        if let Some(active) = active {
            let n = defn.node(active);
            if n.invoke.is_some() && n.invoke_each.is_none() && self.exe.status == Status::Running {
                // a single submachine state: its child's completion becomes `Returned`
                let seq = self.exe.invoke_seq.get(&n.full_path).copied().unwrap_or(0);
                let expected = ids::child_id(format!("{}:{}:{}", self.exe.id, n.full_path, seq));
                if cid.as_deref() == Some(expected.as_str()) {
                    let Some(cs) = self.exe.children.get(&expected) else {
                        return Ok(());
                    };
                    let mut data = Map::new();
                    data.insert(
                        "outcome".into(),
                        cs.outcome.clone().map_or(Value::Null, Value::from),
                    );
                    for (k, v) in &cs.result {
                        data.insert(k.clone(), v.clone());
                    }
                    let completion = Event::with_data("Returned", data);
                    if let Some(found) = self.resolve_event(&completion) {
                        self.exe.invoke_seq.insert(n.full_path.clone(), seq + 1);
                        self.exe.children.shift_remove(&expected);
                        self.fire(found, Some(&completion))?;
                        self.drain()?;
                    }
                }
                return Ok(());
            }
        }
        if self.exe.status == Status::Running {
            self.drain()?;
        }
        Ok(())
    }

    fn timeout(&mut self, event: &Event) -> StepResult {
        let path = event.data.get("path");
        if path.and_then(Value::as_str) == Some(TTL_PATH) {
            return self.expire(event);
        }
        let Some(path) = path.and_then(Value::as_str) else {
            return Ok(());
        };
        if self.exe.status != Status::Running || !self.is_active(path) {
            return Ok(()); // a stale timer: its state was left (or left and re-entered)
        }
        let found = {
            let exe = &*self.exe;
            let root = self.defn.get(&exe.root_path);
            root.and_then(|root| {
                resolve_at(self.defn, root, path, &|t| event_matches(t, event, &exe.context))
            })
        };
        if let Some(found) = found {
            self.fire(found, Some(event))?;
            self.drain()?;
            self.exe.processed_events += 1;
        }
        Ok(())
    }

    fn expire(&mut self, event: &Event) -> StepResult {
        let armed = self.exe.expires_at.map_or(Value::Null, pyvalue::float);
        let fired = event.data.get("fire_at").cloned().unwrap_or(Value::Null);
        if self.exe.status != Status::Running || !py_eq(&fired, &armed) {
            return Ok(());
        }
        self.exe.processed_events += 1;
        let expired = Event::new("Expired");
        if let Some(found) = safe_teardown(self.defn, self.exe, &expired) {
            self.fire(found, Some(&expired))?;
            return self.drain();
        }
        if let Some(site) = self.exe.active_path.as_deref().and_then(|p| self.defn.get(p)) {
            if self.defn.node(site).is_spawn_site() {
                self.leave_regions(site);
            }
        }
        self.exe.status = Status::Cancelled;
        self.exe.outcome = Some("expired".into());
        Ok(())
    }

    fn domain(&mut self, event: &Event) -> StepResult {
        if self.exe.status != Status::Running {
            self.drop_event(format!(
                "the execution is {}: it takes no more events (Reset restarts it)",
                self.exe.status
            ));
            return Ok(());
        }
        match self.resolve_event(event) {
            Some(found) => self.fire(found, Some(event))?,
            None => {
                let active = self.active()?;
                if self.deferred_kinds_contain(&event.kind) {
                    self.exe.deferred.push(event.clone());
                } else if self.defn.node(active).on_activity.is_some() {
                    self.run(active, Hook::Activity, Some(event))?;
                } else {
                    self.drop_event(format!(
                        "nothing in {} or above it takes {}, defers it or has an `on activity`",
                        self.defn.node(active).full_path,
                        event.kind
                    ));
                }
            }
        }
        self.drain()?;
        self.exe.processed_events += 1;
        self.arm_ttl();
        Ok(())
    }
}
