//! The driver: the one piece of code that turns engine steps into durable commits.
//!
//! For one event it runs the pure engine, serves the actions it asks for (routing a
//! failure to the model's `on error`, or failing the execution as harel does), then
//! commits the execution, its outbox, spawns, dedupe mark, timer changes and trace
//! step in one atomic, version-checked write. The embedded runner (`stm run`), the
//! local stack and the Lambda worker all go through it; they differ only in the
//! store and in how committed outbox entries are delivered (inline here, by queue in
//! the worker). What to do with an event at all (drain, park, release, broadcast or
//! step) is decided once, by [`plan`], for every runner.
//!
//! The flows follow harel 0.9.0's `engine/driving.py` and `engine/hosting.py`.

use std::sync::Arc;

use stm_core::{Definition, Event, Execution};
use stm_store::ExecutionStore;

use crate::actions::ActionRegistry;
use crate::definitions::Definitions;

mod broadcast;
mod burst;
mod clock;
mod embedded;
mod error;
mod explain;
mod parking;
mod plan;
mod spawn;
mod step;

pub use burst::{Burst, BurstStepError, BurstWritten};
pub use clock::{Clock, ManualClock, SystemClock};
pub use embedded::Held;
pub use error::{check_event_size, check_execution_id, DriverError};
pub(crate) use parking::{log_release, Releasing};
pub(crate) use plan::{is_recheck, PARKED_PATH};
pub use plan::{plan, region_ids, route, Arrival, Plan};
pub use spawn::SpawnParents;
pub(crate) use step::Undo;
pub(crate) use step::{armed, outbox_entries, spawn_entries};
pub use step::{StepReport, PARENT_SPAN_KEY, SPAN_KEY};

/// The driver: one step of an execution is effects -> actions -> one atomic commit ->
/// delivery. Cheap to clone; share one per process. Embedded, over a [`MemoryStore`]
/// (what `stm run` does):
///
/// ```
/// use std::sync::Arc;
/// use stm_core::Event;
/// use stm_runtime::{ActionRegistry, Definitions, Driver};
///
/// let text = "event Go {}\nmachine M {\n  initial A\n  state A {}\n  final B done\n  from A to B on Go\n}\n";
/// let mut definitions = Definitions::new();
/// definitions.register(stm_core::dsl::load_definition_str(text, None, None).expect("valid"));
/// let driver = Driver::new(Arc::new(stm_store::MemoryStore::new()), definitions, ActionRegistry::with_builtins());
/// # tokio::runtime::Builder::new_current_thread().build().expect("runtime").block_on(async {
/// let exe = driver.create("M", None, Some("m-1")).await.expect("created");
/// assert_eq!(exe.active_path.as_deref(), Some("A"));
/// let exe = driver.process("m-1", &Event::new("Go")).await.expect("processed");
/// assert_eq!((exe.status.as_str(), exe.outcome.as_deref()), ("DONE", Some("done")));
/// # });
/// ```
///
/// [`MemoryStore`]: stm_store::MemoryStore
#[derive(Clone)]
pub struct Driver {
    pub store: Arc<dyn ExecutionStore>,
    pub definitions: Arc<Definitions>,
    pub actions: Arc<ActionRegistry>,
    pub clock: Arc<dyn Clock>,
    /// Record an execution-trace step with each commit.
    pub trace: bool,
    /// Which status changes its commits announce ([`crate::status`]).
    pub status_events: crate::status::StatusEvents,
    /// How the executions it starts keep their fan-outs' joins (a child takes its
    /// parent's).
    pub fan_out_join: stm_core::FanOutJoin,
    /// How many parked events a release steps into one commit at most
    /// (16 unless set: see `with_release_burst`).
    pub release_burst: usize,
    /// The aliases' routes a new execution's version is picked by ([`crate::rollout`]).
    pub routes: Arc<crate::rollout::RouteCache>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let machines: Vec<&str> = self.definitions.iter().map(|d| d.id.as_str()).collect();
        f.debug_struct("Driver")
            .field("machines", &machines)
            .field("actions", &self.actions)
            .field("trace", &self.trace)
            .finish_non_exhaustive()
    }
}

impl Driver {
    pub fn new(store: Arc<dyn ExecutionStore>, definitions: Definitions, actions: ActionRegistry) -> Self {
        Driver {
            store,
            definitions: Arc::new(definitions),
            actions: Arc::new(actions),
            clock: Arc::new(SystemClock),
            trace: false,
            status_events: crate::status::StatusEvents::None,
            fan_out_join: stm_core::FanOutJoin::Children,
            release_burst: parking::RELEASE_BURST,
            routes: Arc::new(crate::rollout::RouteCache::default()),
        }
    }

    /// Keep the routes read for `ttl` (a second unless set; zero: read them for every
    /// new execution).
    pub fn with_routes_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.routes = Arc::new(crate::rollout::RouteCache::new(ttl));
        self
    }

    /// Release at most `events` parked events in one commit (1: a commit each, as the
    /// protocol's model does).
    pub fn with_release_burst(mut self, events: usize) -> Self {
        self.release_burst = events.max(1);
        self
    }

    /// Executions created from now on keep their fan-outs' joins as `join` says.
    pub fn with_fan_out_join(mut self, join: stm_core::FanOutJoin) -> Self {
        self.fan_out_join = join;
        self
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    pub fn with_trace(mut self, trace: bool) -> Self {
        self.trace = trace;
        self
    }

    /// Announce these status changes on the status bus ([`crate::status`]): each commit
    /// that makes such a change carries its notice as an outbox row.
    pub fn with_status_events(mut self, level: crate::status::StatusEvents) -> Self {
        self.status_events = level;
        self
    }

    /// The definition that drives `exe`: the version it is pinned to; unpinned (as harel
    /// writes it), the current one by id, else (a submachine child) by its FQN.
    pub fn definition_for(&self, exe: &Execution) -> Result<Arc<Definition>, DriverError> {
        if let Some(version) = exe.definition_version {
            return self
                .definitions
                .get_version(&exe.definition_id, version)
                .cloned()
                .ok_or_else(|| DriverError::VersionMissing {
                    execution_id: exe.id.clone(),
                    definition_id: exe.definition_id.clone(),
                    version,
                });
        }
        if let Some(d) = self.definitions.get(&exe.definition_id) {
            return Ok(d.clone());
        }
        if let Some(fqn) = &exe.definition_fqn {
            return self.resolve_machine(fqn);
        }
        Err(DriverError::UnknownDefinition(exe.definition_id.clone()))
    }

    /// [`definition_for`](Self::definition_for), with `None` for an execution pinned to a
    /// version this deploy does not have (its events park): for the callers that can go
    /// on without the machine.
    pub(crate) fn definition_if_deployed(
        &self,
        exe: &Execution,
    ) -> Result<Option<Arc<Definition>>, DriverError> {
        match self.definition_for(exe) {
            Ok(defn) => Ok(Some(defn)),
            Err(DriverError::VersionMissing { .. }) => Ok(None),
            Err(other) => Err(other),
        }
    }

    /// The machine an invoke of `fqn` starts: the one the parent's own version carries
    /// (a parent pinned to an earlier version invokes that version's submachine), else
    /// the current one.
    fn invoked_machine(&self, parent: Option<&Execution>, fqn: &str) -> Result<Arc<Definition>, DriverError> {
        let carried = parent.and_then(|p| self.definition_for(p).ok()).and_then(|pd| {
            let sub = pd.submachines.get(fqn)?;
            self.definitions.get_version(&sub.id, sub.version?).cloned()
        });
        match carried {
            Some(d) => Ok(d),
            None => self.resolve_machine(fqn),
        }
    }

    fn resolve_machine(&self, fqn: &str) -> Result<Arc<Definition>, DriverError> {
        self.definitions
            .get(fqn)
            .cloned()
            .ok_or_else(|| DriverError::Resolve {
                machine: fqn.to_string(),
            })
    }

    /// Validate `event` against the machine's declared events (harel's `check_event`).
    pub fn check_event(defn: &Definition, event: &Event) -> Result<(), DriverError> {
        if stm_core::definition::RESERVED_EVENTS.contains(&event.kind.as_str()) {
            return Ok(());
        }
        if let Some(etype) = defn.events.get(&event.kind) {
            let problems = stm_core::definition::schema_problems(&etype.fields, &event.data, true);
            if !problems.is_empty() {
                return Err(DriverError::Event {
                    kind: event.kind.clone(),
                    problems,
                });
            }
        }
        Ok(())
    }
}
