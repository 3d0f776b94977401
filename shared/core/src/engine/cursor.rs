//! Where the step stands: the root and active nodes (each looked up once), moving the
//! active path, and recording history as states are left and entered.

use indexmap::IndexMap;

use super::{Step, StepError, StepResult};
use crate::definition::{Definition, NodeId};
use crate::execution::Execution;

/// `history.get_mut(key)`, by a scan while the map is small: a history holds an entry
/// per composite left, a handful, and hashing the key (SipHash) costs more than
/// comparing that many.
fn history_entry<'h>(history: &'h mut IndexMap<String, String>, key: &str) -> Option<&'h mut String> {
    if history.len() <= 8 {
        history
            .iter_mut()
            .find_map(|(k, v)| (k.as_str() == key).then_some(v))
    } else {
        history.get_mut(key)
    }
}

impl Step<'_> {
    pub(super) fn node_at(&self, path: &str) -> StepResult<NodeId> {
        self.defn
            .get(path)
            .ok_or_else(|| StepError::Invalid(format!("state {path:?} is not in machine {}", self.defn.id)))
    }

    pub(super) fn root(&self) -> StepResult<NodeId> {
        if let Some(node) = self.root_node.get() {
            return Ok(node);
        }
        let node = self.node_at(&self.exe.root_path)?;
        self.root_node.set(Some(node));
        Ok(node)
    }

    pub(super) fn active(&self) -> StepResult<NodeId> {
        if let Some(node) = self.active_node.get() {
            return Ok(node);
        }
        let node = match &self.exe.active_path {
            Some(p) => self.node_at(p)?,
            None => {
                return Err(StepError::Invalid(format!(
                    "execution {} has no active state",
                    self.exe.id
                )))
            }
        };
        self.active_node.set(Some(node));
        Ok(node)
    }

    pub(super) fn set_active(&mut self, node: NodeId) {
        self.active_node.set(Some(node));
        // reuse the string's buffer: the active path moves several times per step
        let path = self.defn.path(node);
        match &mut self.exe.active_path {
            Some(current) => {
                current.clear();
                current.push_str(path);
            }
            None => self.exe.active_path = Some(path.to_string()),
        }
    }

    pub(super) fn record_history(&mut self, node: NodeId) {
        if let Some(parent) = self.defn.node(node).parent {
            let (parent_path, path) = (self.defn.path(parent), self.defn.path(node));
            match history_entry(&mut self.exe.history, parent_path) {
                Some(current) if current == path => {}
                Some(current) => {
                    current.clear();
                    current.push_str(path);
                }
                None => {
                    self.exe.history.insert(parent_path.to_string(), path.to_string());
                }
            }
        }
    }

    pub(super) fn is_active(&self, path: &str) -> bool {
        path_is_active(self.defn, self.exe, path)
    }
}

/// Whether the state at `path` is active in `exe`: the active state or an ancestor of it,
/// within the execution's branch (what makes a `Timeout` current).
pub(super) fn path_is_active(defn: &Definition, exe: &Execution, path: &str) -> bool {
    let (Some(active), Some(node), Some(root)) = (
        exe.active_path.as_deref().and_then(|p| defn.get(p)),
        defn.get(path),
        defn.get(&exe.root_path),
    ) else {
        return false;
    };
    defn.chain(root, active)
        .is_some_and(|chain| chain.contains(&node))
}
