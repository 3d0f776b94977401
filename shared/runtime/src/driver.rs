//! The driver: the one piece of code that turns engine steps into durable commits.
//!
//! For one event it runs the pure engine, serves the actions it asks for (routing a
//! failure to the model's `on error`, or failing the execution as harel does), then
//! commits the execution, its outbox, spawns, dedupe mark, timer changes and trace
//! step in one atomic, version-checked write. The embedded runner (`stm run`), the
//! local stack and the Lambda worker all go through it; they differ only in the
//! store and in how committed outbox entries are delivered (inline here, by queue in
//! the worker).
//!
//! The flows follow harel 0.9.0's `engine/driving.py` and `engine/hosting.py`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use stm_core::definition::CONTROL_EVENTS;
use stm_core::engine::{self, ActionCall, ActionError, ActionHost, Effect, StepError};
use stm_core::{Definition, Event, Execution, Map, Status, Value};
use stm_store::{
    Commit, ExecutionStore, OutboxEntry, SpawnEntry, SpawnIntent, StoreError, TimerClaim, TimerOp,
};

use crate::actions::{ActionInput, ActionRegistry};
use crate::definitions::Definitions;
use crate::queue::{event_message_bytes, spawn_message_bytes, MAX_MESSAGE_BYTES};

mod burst;
mod parking;

pub use burst::{Burst, BurstStepError, BurstWritten};
pub(crate) use parking::PARKED_PATH;

/// Seconds since the epoch, as harel's `time.time`.
pub trait Clock: Send + Sync {
    fn now(&self) -> f64;
}

/// The wall clock.
#[derive(Debug)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> f64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    }
}

/// A clock that only moves when told (tests, conformance, `stm run`'s replay).
#[derive(Debug, Default)]
pub struct ManualClock(Mutex<f64>);

impl ManualClock {
    pub fn new(start: f64) -> Self {
        ManualClock(Mutex::new(start))
    }
    pub fn advance(&self, seconds: f64) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) += seconds;
    }
    pub fn set(&self, now: f64) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = now;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> f64 {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What can go wrong driving a step (a lost CAS included, as a store error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{}", stm_core::pyvalue::repr(&Value::from(.0.as_str())))]
    UnknownExecution(String),
    #[error("execution {0:?} already exists")]
    AlreadyExists(String),
    #[error("unknown definition {0:?}")]
    UnknownDefinition(String),
    /// The execution is pinned to a version of its machine this deploy does not retain.
    /// Its events are parked, not failed (see [`Driver::run_step`]).
    #[error(
        "execution {execution_id:?} is pinned to version {version} of {definition_id:?}, which is not \
         deployed: put that version back (`stm versions freeze` keeps it in `versions/`) or move the \
         execution to a deployed one (`stm migrate`)"
    )]
    VersionMissing {
        execution_id: String,
        definition_id: String,
        version: stm_core::version::Version,
    },
    /// harel's `ContextError`.
    #[error("context doesn't fit the machine's `context` schema: {0}")]
    Context(String),
    /// harel's `EventError`.
    #[error("event {} doesn't fit its declaration: {problems}", stm_core::pyvalue::repr(&Value::from(kind.as_str())))]
    Event { kind: String, problems: String },
    /// harel's `ResolveError`: an `invoke` whose machine this driver doesn't have.
    #[error("invoke {} but this runner has no machine resolver", stm_core::pyvalue::repr(&Value::from(.0.as_str())))]
    Resolve(String),
    /// The engine met a definition/execution mismatch (harel's `AssertionError`).
    #[error("{0}")]
    Engine(String),
    /// A Python exception harel lets escape the step unrouted (an arithmetic
    /// `OverflowError`): nothing of the step commits, as in harel.
    #[error("{message}")]
    Raised {
        type_name: &'static str,
        message: String,
    },
    /// A redrive refused by one of its rules (harel's `ValueError`), with the reason.
    #[error("{0}")]
    Redrive(String),
    /// A migration that cannot be done as asked (a version not deployed, a state the
    /// target lacks and no map covers): nothing was written.
    #[error("{0}")]
    Migration(String),
    /// The event queue refused a call (publishes report failures per message instead).
    #[error("queue error: {0}")]
    Queue(#[from] crate::queue::QueueError),
    /// The process is misconfigured (environment, definitions, bindings).
    #[error("configuration error: {0}")]
    Config(#[from] crate::config::ConfigError),
    /// An execution id SQS would refuse as a message group id (the message says which
    /// rule it breaks): such an execution could never receive an event.
    #[error("{0}")]
    InvalidId(String),
    /// A message SQS would refuse for its size (over [`MAX_MESSAGE_BYTES`], body and
    /// attributes): what it was, its size and what to do. Deterministic: the same input
    /// gives it again, so retrying never helps.
    #[error("{0}")]
    MessageTooLarge(String),
}

impl DriverError {
    pub fn is_conflict(&self) -> bool {
        matches!(self, DriverError::Store(e) if e.is_conflict())
    }

    /// The Python exception name harel raises for the same failure.
    pub fn python_type(&self) -> &'static str {
        match self {
            DriverError::Store(e) if e.is_conflict() => "StoreConflict",
            DriverError::Store(_) => "StoreError",
            DriverError::UnknownExecution(_)
            | DriverError::UnknownDefinition(_)
            | DriverError::VersionMissing { .. } => "KeyError",
            DriverError::AlreadyExists(_) => "ExecutionAlreadyExists",
            DriverError::Context(_) => "ContextError",
            DriverError::Event { .. } => "EventError",
            DriverError::Resolve(_) => "ResolveError",
            DriverError::Engine(_) => "AssertionError",
            DriverError::Raised { type_name, .. } => type_name,
            DriverError::Migration(_) | DriverError::Redrive(_) => "ValueError",
            DriverError::Queue(_) => "TransportError",
            DriverError::Config(_) => "ValueError",
            DriverError::InvalidId(_) => "ValueError",
            DriverError::MessageTooLarge(_) => "MessageTooLarge",
        }
    }
}

/// Refuse an execution id SQS would refuse as a message group id (`MessageGroupId` is
/// the execution id), before anything is written: the rule is `stm_core::ids`'.
pub fn check_execution_id(id: &str) -> Result<(), DriverError> {
    match stm_core::ids::execution_id_error(id) {
        Some(text) => Err(DriverError::InvalidId(text)),
        None => Ok(()),
    }
}

/// What to tell the user about a message too large for SQS.
fn too_large(what: &str, bytes: usize) -> DriverError {
    DriverError::MessageTooLarge(format!(
        "{what} would be a {bytes}-byte SQS message (body and attributes); SQS takes at most \
         {MAX_MESSAGE_BYTES} bytes, so it could never be delivered: keep large data out of \
         events and contexts passed to children (store it elsewhere and pass a reference)"
    ))
}

/// Refuse an event whose message would be too large for SQS (`kind` and `target` name it).
pub fn check_event_size(target: &str, event: &Event) -> Result<(), DriverError> {
    let bytes = event_message_bytes(event);
    if bytes > MAX_MESSAGE_BYTES {
        return Err(too_large(
            &format!("the event {:?} (id {:?}) to {target:?}", event.kind, event.id),
            bytes,
        ));
    }
    Ok(())
}

/// The first of a step's messages (its emits and spawn intents, as the queue will carry
/// them) that SQS would refuse for its size. An emit without a target is never sent.
fn check_step_messages(
    execution_id: &str,
    emits: &[(Option<String>, Event)],
    spawns: &[SpawnIntent],
) -> Result<(), DriverError> {
    for (to, event) in emits {
        if let Some(target) = to {
            check_event_size(target, event)?;
        }
    }
    for spawn in spawns {
        let bytes = spawn_message_bytes(execution_id, &spawn.child_id, &spawn.root_path, &spawn.context);
        if bytes > MAX_MESSAGE_BYTES {
            return Err(too_large(
                &format!("the spawn intent of child {:?} (its context)", spawn.child_id),
                bytes,
            ));
        }
    }
    Ok(())
}

/// The idempotency keys of one step's actions: `{execution}:{event id|start}:{i}:{action}`.
struct ActionKeys<'e> {
    execution_id: String,
    /// The id of the event the step processes (`start` when it starts the execution).
    step: &'e str,
    index: usize,
}

impl<'e> ActionKeys<'e> {
    fn new(execution_id: &str, step: &'e str) -> Self {
        ActionKeys {
            execution_id: execution_id.to_string(),
            step,
            index: 0,
        }
    }
    fn next(&mut self, action: &str) -> String {
        let key = format!("{}:{}:{}:{}", self.execution_id, self.step, self.index, action);
        self.index += 1;
        key
    }
}

/// Serves the engine's action calls from the registry, recording what ran.
struct RegistryHost<'a, 'e> {
    actions: &'a ActionRegistry,
    keys: &'a mut ActionKeys<'e>,
    ran: Vec<String>,
}

impl ActionHost for RegistryHost<'_, '_> {
    fn call(&mut self, call: &ActionCall<'_>, context: &mut Map) -> Result<Value, ActionError> {
        let name = call.action.function.as_str();
        self.ran.push(name.to_string());
        let key = self.keys.next(name);
        let f = self
            .actions
            .get(name)
            .ok_or_else(|| ActionError::new("LookupError", format!("action {name:?} is not registered")))?;
        f(ActionInput {
            context,
            event: call.event,
            inputs: &call.action.inputs,
            idempotency_key: &key,
            execution_id: &self.keys.execution_id,
            state: self.actions.state(),
        })
    }
}

/// The durable results of one step, gathered from the engine's effects.
#[derive(Default)]
struct Collected {
    emits: Vec<(Option<String>, Event)>,
    timers: Vec<TimerOp>,
    spawns: Vec<SpawnIntent>,
    actions: Vec<String>,
    assigned: Map,
    dropped: Option<String>,
    /// Why the step did not run the engine at all: a stale `Timeout`
    /// ([`Driver::stale_timeout`]); the trace step says so.
    ignored: Option<String>,
}

impl Collected {
    fn from_effects(effects: Vec<Effect>, actions: Vec<String>) -> Self {
        let mut c = Collected {
            actions,
            ..Collected::default()
        };
        for effect in effects {
            match effect {
                Effect::Emit { to, event } => c.emits.push((to, event)),
                Effect::Spawn(specs) => c.spawns.extend(specs.into_iter().map(|s| SpawnIntent {
                    child_id: s.child_id,
                    root_path: s.root_path,
                    context: s.context,
                })),
                Effect::ScheduleTimer { path, fire_at } => c.timers.push(TimerOp::Schedule { path, fire_at }),
                Effect::CancelTimer { path } => c.timers.push(TimerOp::Cancel { path }),
                Effect::Assigned(values) => c.assigned.extend(values),
                Effect::Dropped(reason) => c.dropped = Some(reason),
            }
        }
        c
    }
}

/// The arms among a commit's timer ops; the last op on a path wins, as in the store.
pub(crate) fn armed(ops: &[TimerOp]) -> Vec<(String, f64)> {
    let mut last: indexmap::IndexMap<&str, Option<f64>> = indexmap::IndexMap::new();
    for op in ops {
        match op {
            TimerOp::Schedule { path, fire_at } => last.insert(path.as_str(), Some(*fire_at)),
            TimerOp::Cancel { path } => last.insert(path.as_str(), None),
        };
    }
    last.into_iter()
        .filter_map(|(path, at)| at.map(|at| (path.to_string(), at)))
        .collect()
}

/// One step applied in memory and not yet written: its commit and its report (without
/// the outbox seqs, which the store gives at the commit).
pub(crate) struct PreparedStep {
    pub(crate) commit: Commit,
    pub(crate) report: StepReport,
}

/// What a committed step left for delivery.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepReport {
    /// The outbox seqs of this commit's emits.
    pub outbox_seqs: Vec<i64>,

    /// The names of the actions the committed step ran.
    pub actions: Vec<String>,
    /// This commit's outbox entries (seq, target, event), for a delivery by queue right
    /// after the commit (the worker's inline flush).
    pub outbox: Vec<OutboxEntry>,
    /// This commit's spawn intents (seq, parent, child, ...), for the inline flush.
    pub spawns: Vec<SpawnEntry>,
    /// Why the engine took nothing from the event, when it did not (the worker logs it).
    pub dropped: Option<String>,
    /// The timers this commit armed, `(path, fire_at)` (the worker rings the precise-timer
    /// doorbell for the near ones).
    pub armed_timers: Vec<(String, f64)>,
    /// The event did not step: the execution's version is not deployed, and the event
    /// waits on the execution until it is.
    pub parked: bool,
    /// The ids of the parked events this call stepped first (their version is back).
    pub released: Vec<String>,
}

impl StepReport {
    pub fn enqueued(&self) -> bool {
        !self.spawns.is_empty() || !self.outbox_seqs.is_empty()
    }

    /// This report (what a release stepped) followed by `later`'s (the event's own
    /// commit): `later` as it is when nothing was released, the common case.
    pub(crate) fn followed_by(mut self, later: StepReport) -> StepReport {
        if self.released.is_empty() && !self.parked {
            return later;
        }
        self.absorb(later);
        self
    }

    /// Add what a later commit of the same call left (a released parked event's step,
    /// then the event's own).
    pub(crate) fn absorb(&mut self, later: StepReport) {
        self.outbox_seqs.extend(later.outbox_seqs);
        self.actions.extend(later.actions);
        self.outbox.extend(later.outbox);
        self.spawns.extend(later.spawns);
        if later.dropped.is_some() {
            self.dropped = later.dropped;
        }
        self.armed_timers.extend(later.armed_timers);
        self.parked |= later.parked;
        self.released.extend(later.released);
    }
}

/// An execution the embedded runner keeps between its events
/// ([`Driver::process_held`]), with the buffer each step's undo snapshot is copied into:
/// reused from step to step rather than a fresh clone each time.
#[derive(Debug, Clone)]
pub struct Held {
    exe: Execution,
    before: Execution,
}

impl Held {
    /// Hold `exe`, as `create` or `process` returned it.
    pub fn new(exe: Execution) -> Self {
        let before = exe.clone();
        Held { exe, before }
    }

    /// The execution as its last step left it: what the store holds.
    pub fn execution(&self) -> &Execution {
        &self.exe
    }

    pub fn into_execution(self) -> Execution {
        self.exe
    }
}

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
        }
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    pub fn with_trace(mut self, trace: bool) -> Self {
        self.trace = trace;
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
    pub fn definition_if_deployed(&self, exe: &Execution) -> Result<Option<Arc<Definition>>, DriverError> {
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
            .ok_or_else(|| DriverError::Resolve(fqn.to_string()))
    }

    fn fail(exe: &mut Execution, err: &StepError, original: Option<&StepError>) {
        let (ty, msg) = err.type_and_message();
        let mut text = format!("{ty}: {msg}");
        if let Some(orig) = original {
            let (oty, omsg) = orig.type_and_message();
            text.push_str(&format!(" (while recovering from {oty}: {omsg})"));
        }
        tracing::warn!(execution_id = %exe.id, error = %text, "unhandled action error; failing execution");
        exe.status = Status::Failed;
        exe.error = Some(text);
    }

    /// Run the engine for one step and gather its effects. A failed action (or `set`)
    /// is routed to the model's `on error` if the active configuration has one, else the
    /// execution fails terminally; partial effects are dropped either way.
    fn drive(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: Option<&Event>,
        keys: &mut ActionKeys<'_>,
        original: Option<&StepError>,
    ) -> Result<Collected, DriverError> {
        let now = self.clock.now();
        let mut host = RegistryHost {
            actions: &self.actions,
            keys,
            ran: Vec::new(),
        };
        let result = match event {
            None => engine::start(defn, exe, now, &mut host),
            Some(ev) => engine::process(defn, exe, ev, now, &mut host),
        };
        let ran = std::mem::take(&mut host.ran);
        let err = match result {
            Ok(effects) => return Ok(Collected::from_effects(effects, ran)),
            Err(StepError::Invalid(msg)) => return Err(DriverError::Engine(msg)),
            Err(StepError::Raised { type_name, message }) => {
                return Err(DriverError::Raised { type_name, message })
            }
            Err(err) => err,
        };
        if original.is_some() || matches!(err, StepError::Action { on_exit: true, .. }) {
            // already recovering, or an `on exit` failed (leaving a state can't be
            // routed anywhere without re-running that very hook): fail
            Driver::fail(exe, &err, original);
            return Ok(Collected::default());
        }
        let (ty, msg) = err.type_and_message();
        let error_event = engine::error_event(&ty, &msg);
        if engine::has_error_handler(defn, exe, &error_event) {
            exe.context
                .insert("_error".into(), Value::Object(error_event.data.clone()));
            return self.drive(defn, exe, Some(&error_event), keys, Some(&err));
        }
        Driver::fail(exe, &err, None);
        Ok(Collected::default())
    }

    /// Drive one step for `exe` (`None`: start it) and commit it atomically.
    ///
    /// An execution pinned to a version this deploy does not retain cannot step: the
    /// event is parked on the execution instead ([`StepReport::parked`]), and the events
    /// parked there run, in order, before the next one once the version is back.
    pub async fn run_step(
        &self,
        exe: &mut Execution,
        event: Option<&Event>,
    ) -> Result<StepReport, DriverError> {
        let Some(event) = event else {
            // a start: a new execution is on the version it was just pinned to
            let defn = self.definition_for(exe)?;
            return self.step_on(&defn, exe, None).await;
        };
        match self.parking_gate(exe, event).await? {
            parking::Gate::Done(report) => Ok(report),
            parking::Gate::Go(released, defn) => {
                let step = self.step_on(&defn, exe, Some(event)).await?;
                Ok(released.followed_by(step))
            }
        }
    }

    /// One step of `exe` on `defn` (its version), and its commit.
    async fn step_on(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: Option<&Event>,
    ) -> Result<StepReport, DriverError> {
        // the step may have to be undone (see `prepare_step`); a clone is cheap next to
        // the commit's serialization of the same execution
        let before = exe.clone();
        let step = self.prepare_checked(defn, exe, event, &before, &[]).await?;
        let actions = step.report.actions.clone();
        match self.commit_prepared(exe, step).await {
            Err(DriverError::Store(err @ StoreError::TooLarge(_))) => {
                // A commit the store refuses whatever the retry (DynamoDB: an item over
                // 400 KB, over 100 actions or 4 MB in the transaction; a context too large, a
                // fan-out too wide). Retrying the event would only hold its FIFO group until
                // the dead-letter queue. As for a message too large for SQS, the step is
                // undone and the execution fails where it was, with the reason, the event
                // marked processed and the step traced. If even that cannot be written (the
                // event itself too large for the trace), the record stays poison.
                let text = format!("StoreError: {err}");
                tracing::warn!(execution_id = %exe.id, error = %text, "a step's commit can never be written; failing execution");
                exe.clone_from(&before);
                exe.status = Status::Failed;
                exe.error = Some(text);
                let undone = Collected {
                    actions,
                    ..Collected::default()
                };
                let failure = self.finish_step(exe, event, before.active_path.clone(), undone);
                self.commit_prepared(exe, failure).await
            }
            other => other,
        }
    }

    /// One step of `exe` on `defn`, applied to `exe` in memory: what its commit writes
    /// and what it reports, nothing written yet. `before` is `exe` as it was, for the undo.
    pub(crate) fn prepare_step(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: Option<&Event>,
        before: &Execution,
    ) -> Result<PreparedStep, DriverError> {
        let from_path = exe.active_path.clone();
        let mut keys = ActionKeys::new(&exe.id, event.map_or("start", |e| e.id.as_str()));
        let mut collected = self.drive(defn, exe, event, &mut keys, None)?;
        if let Err(err) = check_step_messages(&exe.id, &collected.emits, &collected.spawns) {
            // A message SQS can never take: retrying the event gives it again. As harel
            // fails an execution on an error nothing handles (its default policy: the
            // FAILED record is the dead letter, not an endless retry), the step is undone
            // (no message, no spawn, no timer, the state and context as before it) and
            // the execution fails where it was, with the event marked processed.
            let text = format!("{}: {err}", err.python_type());
            tracing::warn!(execution_id = %exe.id, error = %text, "a step's message is too large for SQS; failing execution");
            exe.clone_from(before);
            exe.status = Status::Failed;
            exe.error = Some(text);
            collected = Collected {
                actions: collected.actions,
                ..Collected::default()
            };
        }
        Ok(self.finish_step(exe, event, from_path, collected))
    }

    /// [`prepare_step`](Self::prepare_step), unless `event` is a stale `Timeout`
    /// ([`stale_timeout`](Self::stale_timeout); `pending`: the timer ops of steps prepared
    /// and not yet written, a burst's): that step runs nothing, and its commit is the
    /// event's processed mark and a trace step saying why it was ignored.
    pub(crate) async fn prepare_checked(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: Option<&Event>,
        before: &Execution,
        pending: &[TimerOp],
    ) -> Result<PreparedStep, DriverError> {
        match self.stale_timeout(exe, event, pending).await? {
            Some(reason) => {
                let ignored = Collected {
                    dropped: Some(reason.clone()),
                    ignored: Some(reason),
                    ..Collected::default()
                };
                Ok(self.finish_step(exe, event, exe.active_path.clone(), ignored))
            }
            None => self.prepare_step(defn, exe, event, before),
        }
    }

    /// Why `event` is a stale `Timeout` that must not step, if it is one: a `Timeout` of a
    /// state's timer whose `fire_at` is not the one armed now. Its state was left and
    /// re-entered (the timer re-armed) after the sweeper fired it, by events ahead of it in
    /// the execution's group, or the sweeper read a stale due index; applied, it would time
    /// the new visit out early. The engine's own guard only asks whether the state is
    /// active, which a re-entered state is (harel 0.9.0's guard, `_is_active`, is the same).
    ///
    /// The armed timer is the last op on the path among `pending`, else the store's,
    /// claimed ([`ExecutionStore::claim_timer`]): deleted if it is this `Timeout`'s, so
    /// the step that applies it consumes it. Only a timer armed with another `fire_at`
    /// makes the `Timeout` stale; none armed (cancelled, or fired and deleted) leaves it to
    /// the engine's guard, as does a store that cannot tell. Not checked: a `Timeout`
    /// without a numeric `fire_at` (one sent by hand: harel's sweep always sets it), the
    /// `@` timers (the engine checks `@ttl` against `expires_at`, the parking gate handles
    /// `@parked`), and an execution that is not running (the engine drops it anyway).
    async fn stale_timeout(
        &self,
        exe: &Execution,
        event: Option<&Event>,
        pending: &[TimerOp],
    ) -> Result<Option<String>, DriverError> {
        let Some(event) = event.filter(|e| e.kind == "Timeout") else {
            return Ok(None);
        };
        let path = event.data.get("path").and_then(Value::as_str);
        let fire_at = event.data.get("fire_at").and_then(Value::as_f64);
        let (Some(path), Some(fire_at)) = (path, fire_at) else {
            return Ok(None);
        };
        if exe.status != Status::Running || path.starts_with('@') || !fire_at.is_finite() {
            return Ok(None);
        }
        let last_pending = pending.iter().rev().find_map(|op| match op {
            TimerOp::Schedule { path: p, fire_at } if p == path => Some(Some(*fire_at)),
            TimerOp::Cancel { path: p } if p == path => Some(None),
            _ => None,
        });
        let armed = match last_pending {
            Some(armed) => armed,
            None => match self.store.claim_timer(&exe.id, path, fire_at).await? {
                TimerClaim::Rearmed(armed) => Some(armed),
                // claimed (the current arming's), absent or unknown: the engine decides
                _ => None,
            },
        };
        Ok(armed.filter(|armed| *armed != fire_at).map(|armed| {
            let repr = stm_core::pyvalue::float_repr;
            format!(
                "a stale Timeout of {path}: its timer was armed for {} and is now armed for {} \
                 (the state was left and re-entered since)",
                repr(fire_at),
                repr(armed)
            )
        }))
    }

    /// What a step's commit writes and what it reports, from what the engine collected.
    fn finish_step(
        &self,
        exe: &mut Execution,
        event: Option<&Event>,
        from_path: Option<String>,
        collected: Collected,
    ) -> PreparedStep {
        let now = self.clock.now();
        let traces = if self.trace {
            vec![trace_step(event, from_path, exe, &collected, now)]
        } else {
            Vec::new()
        };
        exe.stamp(now);
        let report = StepReport {
            armed_timers: armed(&collected.timers),
            actions: collected.actions,
            dropped: collected.dropped,
            ..StepReport::default()
        };
        let commit = Commit {
            emits: collected.emits,
            processed_event_ids: event.map(|e| e.id.clone()).into_iter().collect(),
            timers: collected.timers,
            spawns: collected.spawns,
            traces,
        };
        PreparedStep { commit, report }
    }

    /// Write a prepared step: its report, with the outbox seqs the store gave its emits.
    async fn commit_prepared(
        &self,
        exe: &mut Execution,
        step: PreparedStep,
    ) -> Result<StepReport, DriverError> {
        let PreparedStep { commit, mut report } = step;
        let emits = commit.emits.clone();
        let spawns = commit.spawns.clone();
        let written = self.store.commit(exe, commit).await?;
        report.outbox = outbox_entries(&written.outbox, emits);
        report.spawns = spawn_entries(&exe.id, &written.spawns, spawns);
        report.outbox_seqs = written.outbox;
        Ok(report)
    }

    /// The queue-delivered broadcast (the worker's): a domain event for a parent whose
    /// regions are live becomes one outbox entry per region, committed atomically with the
    /// parent's processed mark (and, for a machine with `ttl`, the re-armed budget: the
    /// broadcast is activity). Nothing runs on the parent itself.
    pub async fn commit_broadcast(
        &self,
        exe: &mut Execution,
        event: &Event,
        region_ids: &[String],
    ) -> Result<StepReport, DriverError> {
        match self.parking_gate(exe, event).await? {
            parking::Gate::Done(report) => Ok(report),
            parking::Gate::Go(released, defn) => {
                // what was released may have finished regions: broadcast to those still live
                let live = Driver::region_ids(exe);
                let region_ids = if released.released.is_empty() {
                    region_ids
                } else {
                    &live
                };
                let step = self.broadcast_on(&defn, exe, event, region_ids).await?;
                Ok(released.followed_by(step))
            }
        }
    }

    /// The broadcast commit of `exe` on `defn` (its version).
    async fn broadcast_on(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: &Event,
        region_ids: &[String],
    ) -> Result<StepReport, DriverError> {
        // Refused before anything is written. The event reached us through SQS, so it
        // fits unless our serialization of it is larger than the sender's (a harel body
        // without the null time fields, within a few bytes of the limit): rare, and the
        // same each time, so the worker should not retry it (see `DriverError::MessageTooLarge`).
        if let Some(first) = region_ids.first() {
            check_event_size(first, event)?;
        }
        let now = self.clock.now();
        let timers: Vec<TimerOp> = rearm_ttl(defn, exe, now).into_iter().collect();
        exe.stamp(now);
        let emits: Vec<(Option<String>, Event)> = region_ids
            .iter()
            .map(|id| (Some(id.clone()), event.clone()))
            .collect();
        let armed_timers = armed(&timers);
        let commit = Commit {
            emits: emits.clone(),
            processed_event_ids: vec![event.id.clone()],
            timers,
            ..Commit::default()
        };
        let outbox_seqs = self.store.commit(exe, commit).await?.outbox;
        let outbox = outbox_entries(&outbox_seqs, emits);
        Ok(StepReport {
            outbox_seqs,
            outbox,
            armed_timers,
            ..StepReport::default()
        })
    }

    /// The regions a domain event for `exe` goes to when delivered by queue: every
    /// unfinished, non-submachine child, whether or not its record exists yet. (A child
    /// whose spawn intent is still on its way is created first: the intent was published
    /// to the child's FIFO group before anything the parent sends it later.)
    pub fn region_ids(exe: &Execution) -> Vec<String> {
        exe.children
            .iter()
            .filter(|(_, cs)| !cs.finished && !cs.submachine)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Create and start one pending child, idempotently: an existing child means the
    /// intent was already applied (a crash-and-retry), and its progress is kept.
    pub async fn create_spawn(&self, entry: &SpawnEntry) -> Result<(), DriverError> {
        self.create_spawn_reported(entry).await.map(|_| ())
    }

    /// [`create_spawn`](Self::create_spawn), returning the child's start step when this
    /// call created it (`None`: it already existed), for a delivery of what it enqueued.
    pub async fn create_spawn_reported(&self, entry: &SpawnEntry) -> Result<Option<StepReport>, DriverError> {
        self.create_spawn_remembering(entry, &mut SpawnParents::default())
            .await
    }

    /// [`create_spawn_reported`](Self::create_spawn_reported), reading each parent at most
    /// once per `parents`: the intents of one fan-out arrive together (a worker's batch is
    /// up to 10 of them), and a wide parent's item is large (about 130 bytes a child, so
    /// 33 read units at 1,000 children), all of it read for the two things a child takes
    /// from it: its machine's version and its priority.
    pub async fn create_spawn_remembering(
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

    /// Deliver everything pending, inline, to quiescence: create the children, then
    /// process the outbox events in seq order (the embedded relay).
    pub async fn flush_inline(&self) -> Result<(), DriverError> {
        loop {
            let spawns = self.store.pending_spawns().await?;
            let outbox = self.store.pending_outbox().await?;
            if spawns.is_empty() && outbox.is_empty() {
                return Ok(());
            }
            for spawn in &spawns {
                self.create_spawn(spawn).await?;
            }
            for spawn in &spawns {
                self.store.ack_spawn(spawn.seq).await?;
            }
            for entry in outbox {
                if let Some(target_id) = &entry.target_id {
                    self.deliver_inline(target_id, &entry.event).await?;
                }
                self.store.ack_outbox(entry.seq).await?;
            }
        }
    }

    /// Process `event` on execution `target_id` unless it is unknown or already did.
    async fn deliver_inline(&self, target_id: &str, event: &Event) -> Result<(), DriverError> {
        let (target, processed) = self.store.load_for_event(target_id, &event.id).await?;
        if let (Some(mut target), false) = (target, processed) {
            self.run_step(&mut target, Some(event)).await?;
        }
        Ok(())
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
                    problems: problems.join("; "),
                });
            }
        }
        Ok(())
    }

    /// The live (unfinished, not submachine) regions of `exe` that a domain event is
    /// broadcast to.
    pub async fn live_regions(&self, exe: &Execution) -> Result<Vec<Execution>, DriverError> {
        let mut live = Vec::new();
        for id in Driver::region_ids(exe) {
            if let Some(child) = self.store.load(&id).await? {
                live.push(child);
            }
        }
        Ok(live)
    }

    /// Whether `event`, for an execution with `regions` live regions, is broadcast to
    /// them rather than processed by the execution itself: a domain event, and regions.
    pub fn is_broadcast(event: &Event, regions: usize) -> bool {
        !CONTROL_EVENTS.contains(&event.kind.as_str()) && regions > 0
    }

    /// A domain event broadcast to regions never runs on the parent, but it is still
    /// activity for the parent's `ttl`: restart the budget and record the event as
    /// processed by the parent.
    pub async fn rearm_ttl_after_broadcast(
        &self,
        exe: &mut Execution,
        event: &Event,
    ) -> Result<(), DriverError> {
        let defn = self.definition_for(exe)?;
        if engine::ttl_delay(&defn, exe).is_none() || self.store.is_processed(&exe.id, &event.id).await? {
            return Ok(());
        }
        let now = self.clock.now();
        let timers = rearm_ttl(&defn, exe, now).into_iter().collect();
        exe.stamp(now);
        let commit = Commit {
            processed_event_ids: vec![event.id.clone()],
            timers,
            ..Commit::default()
        };
        self.store.commit(exe, commit).await?;
        Ok(())
    }

    // --- the embedded (inline) runner: harel's DurableRunner ---------------------

    /// A new, not yet stored execution of `definition_id`: its id checked (the SQS message
    /// group id of everything sent to it: an id SQS refuses would make an execution that
    /// never starts, on every runner alike) and free, its context defaulted and checked
    /// against the machine's schema. Both `create`s start from it.
    pub async fn new_execution(
        &self,
        definition_id: &str,
        context: Option<Map>,
        execution_id: Option<&str>,
    ) -> Result<Execution, DriverError> {
        if let Some(id) = execution_id {
            check_execution_id(id)?;
            if self.store.load(id).await?.is_some() {
                return Err(DriverError::AlreadyExists(id.to_string()));
            }
        }
        let defn = self
            .definitions
            .get(definition_id)
            .cloned()
            .ok_or_else(|| DriverError::UnknownDefinition(definition_id.to_string()))?;
        let mut context = context.unwrap_or_default();
        defn.with_context_defaults(&mut context);
        let problems = defn.context_problems(&context, true);
        if !problems.is_empty() {
            return Err(DriverError::Context(problems.join("; ")));
        }
        let id = execution_id.map_or_else(stm_core::execution::new_id, str::to_string);
        let mut exe = Execution::new(id, defn.id.clone());
        exe.definition_version = defn.version;
        exe.context = context;
        Ok(exe)
    }

    /// Create, start and persist a new execution; deliver what it enqueued inline.
    pub async fn create(
        &self,
        definition_id: &str,
        context: Option<Map>,
        execution_id: Option<&str>,
    ) -> Result<Execution, DriverError> {
        let mut exe = self.new_execution(definition_id, context, execution_id).await?;
        let id = exe.id.clone();
        self.run_step(&mut exe, None).await?;
        self.flush_inline().await?;
        self.store
            .load(&id)
            .await?
            .ok_or(DriverError::UnknownExecution(id))
    }

    /// Feed one event to a stored execution and deliver what follows, inline.
    pub async fn process(&self, execution_id: &str, event: &Event) -> Result<Execution, DriverError> {
        let mut exe = self
            .store
            .load(execution_id)
            .await?
            .ok_or_else(|| DriverError::UnknownExecution(execution_id.to_string()))?;
        let Some(defn) = self.definition_if_deployed(&exe)? else {
            // its version is not deployed: the event is parked on it (run_step), unchecked
            if !self.store.is_processed(&exe.id, &event.id).await? {
                self.run_step(&mut exe, Some(event)).await?;
            }
            return Ok(exe);
        };
        Driver::check_event(&defn, event)?;
        let live = self.live_regions(&exe).await?;
        let broadcast = Driver::is_broadcast(event, live.len());
        if broadcast {
            for mut region in live {
                if !self.store.is_processed(&region.id, &event.id).await? {
                    self.run_step(&mut region, Some(event)).await?;
                }
            }
            self.rearm_ttl_after_broadcast(&mut exe, event).await?;
        } else if !self.store.is_processed(&exe.id, &event.id).await? {
            self.run_step(&mut exe, Some(event)).await?;
        }
        let quiet =
            self.store.pending_spawns().await?.is_empty() && self.store.pending_outbox().await?.is_empty();
        if quiet && !broadcast {
            // nothing left to deliver, so nothing else wrote `exe`: it is what is stored
            return Ok(exe);
        }
        self.flush_inline().await?;
        self.store
            .load(execution_id)
            .await?
            .ok_or_else(|| DriverError::UnknownExecution(execution_id.into()))
    }

    /// [`process`](Self::process) for a caller that keeps the execution between its events
    /// (`stm run`): `held` is what the last `create`, `process` or `process_held` of it
    /// returned, and becomes what `process` would return now, without the load.
    ///
    /// The plain case (no children, nothing parked, its version deployed, no parked
    /// recheck) steps the held copy itself, its undo snapshot copied into `held`'s own
    /// buffer rather than cloned; anything else goes through `process`, which reloads.
    /// The commit's CAS still guards the copy: a stale one loses it, and the stored
    /// execution is reloaded and processed instead (the stale attempt's actions have run
    /// then, as they do when a worker loses a race: actions are at-least-once). After an
    /// error, `held` is the stored execution again.
    pub async fn process_held(&self, held: &mut Held, event: &Event) -> Result<(), DriverError> {
        match self.step_held(held, event).await {
            Ok(true) => Ok(()),
            Ok(false) => self.process_into(held, event).await,
            Err(err) => {
                // the failed step may have changed the copy in memory: put back what is
                // stored (the step's own error is the one to report, whatever the load says)
                if let Ok(Some(stored)) = self.store.load(&held.exe.id).await {
                    held.exe = stored;
                }
                Err(err)
            }
        }
    }

    /// `process`, its result kept in `held`.
    async fn process_into(&self, held: &mut Held, event: &Event) -> Result<(), DriverError> {
        let id = held.exe.id.clone();
        held.exe = self.process(&id, event).await?;
        Ok(())
    }

    /// `process`'s steps on the held copy, in `process`'s order, when the case is plain
    /// (see [`process_held`](Self::process_held)); `false` when not, or when the copy
    /// turned out stale at the commit (nothing written then): `process` takes over.
    async fn step_held(&self, held: &mut Held, event: &Event) -> Result<bool, DriverError> {
        let Held { exe, before } = held;
        // children: the event may be a broadcast to regions (which `process` loads);
        // parked events: they are released first, each in its own commit; a recheck
        // steps nothing
        if !exe.children.is_empty() || !exe.parked_events.is_empty() || parking::is_recheck(event) {
            return Ok(false);
        }
        let Some(defn) = self.definition_if_deployed(exe)? else {
            return Ok(false);
        };
        Driver::check_event(&defn, event)?;
        if self.store.is_processed(&exe.id, &event.id).await? {
            return Ok(true);
        }
        // `run_step` with nothing parked: `step_on`, its undo snapshot reusing `before`
        before.clone_from(exe);
        let step = self.prepare_checked(&defn, exe, Some(event), before, &[]).await?;
        match self.commit_prepared(exe, step).await {
            Err(err) if err.is_conflict() => return Ok(false),
            other => other?,
        };
        let quiet =
            self.store.pending_spawns().await?.is_empty() && self.store.pending_outbox().await?.is_empty();
        if !quiet {
            self.flush_inline().await?;
            *exe = self
                .store
                .load(&exe.id)
                .await?
                .ok_or_else(|| DriverError::UnknownExecution(exe.id.clone()))?;
        }
        Ok(true)
    }

    /// Deliver every timer due now inline, then remove it (guarded). Returns how many
    /// fired. A suspended execution's timer stays armed until it is resumed.
    pub async fn fire_due_timers(&self) -> Result<usize, DriverError> {
        let mut fired = 0;
        for timer in self.store.due_timers(self.clock.now()).await? {
            let exe = self.store.load(&timer.execution_id).await?;
            if exe.as_ref().is_some_and(|e| e.status == Status::Suspended) {
                continue;
            }
            // an execution whose version is not deployed takes its timers too: they park
            let runnable = |e: &Execution| self.definition_if_deployed(e).is_ok();
            if exe.as_ref().is_some_and(runnable) {
                let event = engine::timeout_event(&timer.execution_id, &timer.path, timer.fire_at);
                // deliver before delete: a crash between the two is safe (dedupe)
                self.deliver_inline(&timer.execution_id, &event).await?;
                self.flush_inline().await?;
            }
            self.store
                .delete_timer(&timer.execution_id, &timer.path, timer.fire_at)
                .await?;
            fired += 1;
        }
        Ok(fired)
    }
}

/// Restart a machine's `ttl` budget at `now` (a broadcast is activity): the new deadline
/// on `exe` and the timer op that arms it; `None` for a machine without `ttl`.
fn rearm_ttl(defn: &Definition, exe: &mut Execution, now: f64) -> Option<TimerOp> {
    let delay = engine::ttl_delay(defn, exe)?;
    exe.expires_at = Some(now + delay);
    Some(TimerOp::Schedule {
        path: engine::TTL_PATH.into(),
        fire_at: now + delay,
    })
}

/// Pair a commit's emits with the seqs the store gave them.
fn outbox_entries(seqs: &[i64], emits: Vec<(Option<String>, Event)>) -> Vec<OutboxEntry> {
    seqs.iter()
        .zip(emits)
        .map(|(seq, (target_id, event))| OutboxEntry {
            seq: *seq,
            target_id,
            event,
        })
        .collect()
}

/// Pair a commit's spawn intents with the seqs the store gave them.
fn spawn_entries(parent_id: &str, seqs: &[i64], spawns: Vec<SpawnIntent>) -> Vec<SpawnEntry> {
    seqs.iter()
        .zip(spawns)
        .map(|(seq, spawn)| SpawnEntry {
            seq: *seq,
            parent_id: parent_id.to_string(),
            child_id: spawn.child_id,
            root_path: spawn.root_path,
            context: spawn.context,
        })
        .collect()
}

/// One execution-trace step, harel's `_trace_step` shape.
fn trace_step(
    event: Option<&Event>,
    from_path: Option<String>,
    exe: &Execution,
    c: &Collected,
    now: f64,
) -> Map {
    let opt = |s: Option<String>| s.map_or(Value::Null, Value::from);
    let mut step = Map::new();
    step.insert(
        "event_kind".into(),
        Value::from(event.map_or("Start", |e| e.kind.as_str())),
    );
    step.insert(
        "event_data".into(),
        Value::Object(event.map(|e| e.data.clone()).unwrap_or_default()),
    );
    step.insert("from_path".into(), opt(from_path));
    step.insert("to_path".into(), opt(exe.active_path.clone()));
    step.insert("actions".into(), Value::from(c.actions.clone()));
    step.insert("context_out".into(), Value::Object(exe.context.clone()));
    step.insert("timestamp".into(), stm_core::pyvalue::float(now));
    if !c.assigned.is_empty() {
        step.insert("assigned".into(), Value::Object(c.assigned.clone()));
    }
    // a key harel's trace steps lack (a reader of them ignores it): the step ran nothing
    if let Some(reason) = &c.ignored {
        step.insert("ignored".into(), Value::from(reason.as_str()));
    }
    step
}

/// The parents a worker's batch has read to create their children
/// ([`Driver::create_spawn_remembering`]): a few at most (a batch holds 10 records), each
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
