//! A spawn intent applied: the child created and started, once, whatever the retries.

use std::collections::HashMap;
use std::sync::Arc;

use stm_core::{Execution, Value};
use stm_store::SpawnEntry;

use super::{Driver, DriverError, StepReport};

impl Driver {
    /// Create and start one pending child, idempotently: an existing child means the
    /// intent was already applied (a crash-and-retry), and its progress is kept.
    pub(crate) async fn create_spawn(&self, entry: &SpawnEntry) -> Result<(), DriverError> {
        self.create_spawn_reported(entry).await.map(|_| ())
    }

    /// [`create_spawn`](Self::create_spawn), returning the child's start step when this
    /// call created it (`None`: it already existed), for a delivery of what it enqueued.
    pub(crate) async fn create_spawn_reported(
        &self,
        entry: &SpawnEntry,
    ) -> Result<Option<StepReport>, DriverError> {
        self.create_spawn_remembering(entry, &mut SpawnParents::default())
            .await
    }

    /// [`create_spawn_reported`](Self::create_spawn_reported), reading each parent at most
    /// once per `parents`: the intents of one fan-out arrive together (a worker's batch is
    /// up to 10 of them), and a wide parent's item is large (about 130 bytes a child, so
    /// 33 read units at 1,000 children), all of it read for the two things a child takes
    /// from it: its machine's version and its priority.
    pub(crate) async fn create_spawn_remembering(
        &self,
        entry: &SpawnEntry,
        parents: &mut SpawnParents,
    ) -> Result<Option<StepReport>, DriverError> {
        if self.store.load(&entry.child_id).await?.is_some() {
            return Ok(None);
        }
        let parent = match parents.known.get(&entry.parent_id) {
            Some(parent) => parent.clone(),
            None => {
                let parent = self.store.load(&entry.parent_id).await?.map(Arc::new);
                if parents.known.len() >= SpawnParents::CAPACITY {
                    parents.known.clear();
                }
                parents.known.insert(entry.parent_id.clone(), parent.clone());
                parent
            }
        };
        let parent = parent.as_deref();
        let mut context = entry.context.clone();
        let fqn = match context.shift_remove("__invoke_fqn__") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let child_defn = match &fqn {
            Some(fqn) => {
                let d = self.invoked_machine(parent, fqn)?;
                // an invoked machine starts with its own context defaults
                d.with_context_defaults(&mut context);
                d
            }
            // a region runs its parent's machine. (harel uses the relaying driver's
            // machine, which differs only for a region forked inside a submachine.)
            None => match &parent {
                Some(p) => self.definition_for(p)?,
                None => return Err(DriverError::UnknownExecution(entry.parent_id.clone())),
            },
        };
        let mut child = Execution::new(entry.child_id.clone(), child_defn.id.clone());
        child.definition_version = child_defn.version;
        child.definition_fqn = fqn;
        child.root_path = entry.root_path.clone();
        child.context = context;
        child.parent_id = Some(entry.parent_id.clone());
        child.child_id = Some(entry.child_id.clone());
        child.priority = parent.map_or(0, |p| p.priority);
        match self.run_step(&mut child, None).await {
            // another relay created it between our load and our insert: same outcome
            Err(e) if e.is_conflict() => Ok(None),
            other => other.map(Some),
        }
    }
}

/// The parents a worker's batch has read to create their children
/// (`Driver::create_spawn_remembering`): a few at most (a batch holds 10 records), each
/// as it was when its first child of the batch was created. Kept for one batch only, so a
/// parent's later change (a migration to another version, its priority) reaches the
/// children of the next batch.
#[derive(Debug, Default)]
pub struct SpawnParents {
    known: HashMap<String, Option<Arc<Execution>>>,
}

impl SpawnParents {
    /// Parents kept at most (a batch's records are 10).
    const CAPACITY: usize = 16;
}
