//! A spawn intent applied: the child created and started, once, whatever the retries.

use std::collections::HashMap;
use std::sync::Arc;

use stm_core::execution::counted_join::JOIN_SLOT_KEY;
use stm_core::{Execution, FanOutJoin, JoinSlot, Value};
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
        let mut context = entry.context.clone();
        let carried = carried_parent(&entry.parent_id, &mut context).map(Arc::new);
        let parent = match (carried, parents.known.get(&entry.parent_id)) {
            (Some(carried), _) => Some(carried),
            (None, Some(parent)) => parent.clone(),
            (None, None) => {
                let parent = self.store.load(&entry.parent_id).await?.map(Arc::new);
                if parents.known.len() >= SpawnParents::CAPACITY {
                    parents.known.clear();
                }
                parents.known.insert(entry.parent_id.clone(), parent.clone());
                parent
            }
        };
        let parent = parent.as_deref();
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
        // a counted join's instance: where its end is reported, out of its context
        let join_slot = context
            .shift_remove(JOIN_SLOT_KEY)
            .and_then(|slot| JoinSlot::from_value(&slot))
            .map(Box::new);
        let mut child = Execution::new(entry.child_id.clone(), child_defn.id.clone());
        child.join_slot = join_slot;
        child.definition_version = child_defn.version;
        child.definition_fqn = fqn;
        child.root_path = entry.root_path.clone();
        child.context = context;
        child.parent_id = Some(entry.parent_id.clone());
        child.child_id = Some(entry.child_id.clone());
        child.priority = parent.map_or(0, |p| p.priority);
        child.fan_out_join = parent.map_or(self.fan_out_join, |p| p.fan_out_join);
        match self.run_step(&mut child, None).await {
            // another relay created it between our load and our insert: same outcome
            Err(e) if e.is_conflict() => Ok(None),
            other => other.map(Some),
        }
    }
}

/// What a child takes from its parent, as [`carry_parent`] carries it.
#[derive(serde::Serialize, serde::Deserialize)]
struct ParentFacts {
    definition_id: String,
    definition_version: Option<stm_core::version::Version>,
    definition_fqn: Option<String>,
    priority: i64,
}

/// The context key under which a counted parent's spawn intents carry what a child takes
/// from its parent (see [`carry_parent`]); taken out before the child starts.
const CARRIED_PARENT: &str = "__parent__";

/// Have `intents` carry what their children take from `parent`, so that creating them
/// reads no parent: the machine and version it runs (a child runs the same, or the
/// submachine pinned with it), its priority, its join layout. A wide fan-out's parent
/// holds its whole collection in its context (10,000 recipients are about 70 KB), and
/// reading it once per batch of ten children would spend that key's read units many
/// times over. Only a [`FanOutJoin::Counted`] parent's intents carry it: in harel's
/// layout a harel worker may create the child and would keep the key in its context.
/// The facts are the parent's as it spawned, which is what a child should take.
pub(crate) fn carry_parent(parent: &Execution, intents: &mut [stm_store::SpawnIntent]) {
    if parent.fan_out_join != FanOutJoin::Counted || intents.is_empty() {
        return;
    }
    let facts = ParentFacts {
        definition_id: parent.definition_id.clone(),
        definition_version: parent.definition_version,
        definition_fqn: parent.definition_fqn.clone(),
        priority: parent.priority,
    };
    // one string (its JSON) rather than an object: every intent of a wide fan-out holds
    // a copy through the commit and the flush, and a string is one allocation
    let Ok(facts) = serde_json::to_string(&facts) else {
        return;
    };
    let facts = Value::from(facts);
    for intent in intents {
        intent.context.insert(CARRIED_PARENT.into(), facts.clone());
    }
}

/// Have a counted join's instance's `Finished` (among `emits`) carry its [`JoinSlot`]: its
/// delivery then records the report in the join's rows instead of sending it to the
/// parent (`crate::join`).
pub(crate) fn mark_join_report(exe: &Execution, emits: &mut [(Option<String>, stm_core::Event)]) {
    let (Some(slot), Some(parent)) = (&exe.join_slot, &exe.parent_id) else {
        return;
    };
    let slot = slot.to_value();
    for (to, event) in emits {
        if to.as_ref() == Some(parent) && event.kind == "Finished" {
            event.data.insert(JOIN_SLOT_KEY.into(), slot.clone());
        }
    }
}

/// The parent as [`carry_parent`] carried it in `context` (taken out of it), if it did:
/// an execution with just those facts, in place of reading the parent.
fn carried_parent(parent_id: &str, context: &mut stm_core::Map) -> Option<Execution> {
    let Value::String(facts) = context.shift_remove(CARRIED_PARENT)? else {
        return None;
    };
    let facts: ParentFacts = serde_json::from_str(&facts).ok()?;
    let mut parent = Execution::new(parent_id, facts.definition_id);
    parent.definition_version = facts.definition_version;
    parent.definition_fqn = facts.definition_fqn;
    parent.priority = facts.priority;
    parent.fan_out_join = FanOutJoin::Counted;
    Some(parent)
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
