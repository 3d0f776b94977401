//! One step: the engine run with the registry serving its actions (an action failure
//! routed to `on error` or failing the execution), the step's commit prepared from its
//! effects, and written atomically. Every runner steps through here.

use crate::telemetry::in_span;
use stm_core::engine::{self, ActionCall, ActionError, ActionHost, Effect, StepError};
use stm_core::{Definition, Event, Execution, Map, Status, Value};
use stm_store::{Commit, OutboxEntry, SpawnEntry, SpawnIntent, StoreError, TimerClaim, TimerOp};

use super::error::check_step_messages;
use super::plan::{plan, Arrival, Plan};
use super::{Driver, DriverError};
use crate::actions::{ActionInput, ActionRegistry};

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
    /// ([`Driver::check_timeout`]); the trace step says so.
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

/// How a step is undone, when it must be (a message too large for SQS): `exe` put back as
/// it was before the step.
#[derive(Clone, Copy)]
pub(crate) enum Undo<'a> {
    /// From this copy, taken before the step.
    Snapshot(&'a Execution),
    /// From the store: the copy stepped is the one the store holds (the embedded runner's
    /// held execution), so the store has it as it was, and no copy is taken for a step that
    /// is seldom undone. A stored version other than the copy's is a conflict.
    Stored,
}

/// What [`Driver::check_timeout`] found of an event's timer.
enum TimeoutCheck {
    /// A stale `Timeout`, and why: it must not step.
    Stale(String),
    /// The event steps. `gone`: the path of the `Timeout`'s timer when the store holds no
    /// row of it any more (claimed by this check, or deleted by the sweeper after firing).
    Step { gone: Option<String> },
}

/// Take out of a step's timer ops the cancels of `path` that come before any arm of it:
/// its row is already gone, so they would delete nothing. Each costs a transactional
/// delete, and the first one alone turns a plain `PutItem` of the execution into a
/// transaction: a fired timer's `Timeout` that leaves its state would pay both for
/// nothing. A cancel after an arm in the same step stays (it undoes that arm).
fn drop_void_cancels(ops: &mut Vec<TimerOp>, path: &str) {
    let rearmed_at = ops.iter().position(|op| match op {
        TimerOp::Schedule { path: p, .. } | TimerOp::Hold { path: p, .. } => p == path,
        TimerOp::Cancel { .. } => false,
    });
    let mut i = 0;
    ops.retain(|op| {
        let before_rearm = rearmed_at.is_none_or(|at| i < at);
        i += 1;
        !(before_rearm && matches!(op, TimerOp::Cancel { path: p } if p == path))
    });
}

/// The arms among a commit's timer ops; the last op on a path wins, as in the store.
pub(crate) fn armed(ops: &[TimerOp]) -> Vec<(String, f64)> {
    if ops.is_empty() {
        return Vec::new();
    }
    let mut last: indexmap::IndexMap<&str, Option<f64>> = indexmap::IndexMap::new();
    for op in ops {
        match op {
            TimerOp::Schedule { path, fire_at } => last.insert(path.as_str(), Some(*fire_at)),
            // a held timer is not one this commit arms (no doorbell)
            TimerOp::Cancel { path } | TimerOp::Hold { path, .. } => last.insert(path.as_str(), None),
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
    pub(crate) fn enqueued(&self) -> bool {
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

impl Driver {
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
        if exe.status == Status::Pending && exe.parent_id.is_none() {
            // a root takes the deployment's layout as it starts, whichever client created
            // it (a child took its parent's when it was created)
            exe.fan_out_join = self.fan_out_join;
        }
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
            Ok(effects) => {
                let mut collected = Collected::from_effects(effects, ran);
                super::spawn::carry_parent(exe, &mut collected.spawns);
                super::spawn::mark_join_report(exe, &mut collected.emits);
                return Ok(collected);
            }
            Err(err @ StepError::Invalid(_)) => return Err(DriverError::Engine(err)),
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

    /// Drive one step for `exe` (`None`: start it) and commit it atomically: `event`'s
    /// plan as an inline delivery carries it out ([`Arrival::Delivered`]), the caller
    /// having checked that `exe` did not process it yet.
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
        self.step_inline(Arrival::Delivered, exe, event).await
    }

    /// Carry out `event`'s plan on `exe` the embedded runner's way (everything it
    /// enqueues is delivered afterwards, inline). `exe` has not processed `event`.
    pub(crate) async fn step_inline(
        &self,
        arrival: Arrival,
        exe: &mut Execution,
        event: &Event,
    ) -> Result<StepReport, DriverError> {
        let defn = self.definition_if_deployed(exe)?;
        let mut report = StepReport::default();
        loop {
            let step = match (
                plan(arrival, Some(exe), event, false, defn.is_some()),
                defn.as_deref(),
            ) {
                (Plan::ParkForVersion, _) | (_, None) => self.park_for_version(exe, event).await?,
                (Plan::Release, Some(defn)) => {
                    let released = self.release_parked(defn, exe).await?;
                    let took_it = released.released.contains(&event.id);
                    report.absorb(released);
                    if took_it {
                        return Ok(report);
                    }
                    continue;
                }
                (Plan::Recheck, Some(defn)) => self.recheck(defn, exe).await?,
                (Plan::Broadcast { regions }, Some(_)) => {
                    for id in regions {
                        let (region, processed) = self.store.load_for_event(&id, &event.id).await?;
                        if let (Some(mut region), false) = (region, processed) {
                            Box::pin(self.step_inline(Arrival::Delivered, &mut region, event)).await?;
                        }
                    }
                    self.rearm_ttl_after_broadcast(exe, event).await?;
                    StepReport::default()
                }
                (Plan::Step, Some(defn)) => self.step_on(defn, exe, Some(event)).await?,
                // the queue's rows, and those of an execution that is not there or applied
                // the event already, which the caller rules out: nothing steps
                (
                    Plan::Unknown | Plan::Duplicate | Plan::Drain { .. } | Plan::ParkWhileSuspended,
                    Some(_),
                ) => StepReport::default(),
            };
            return Ok(report.followed_by(step));
        }
    }

    /// One step of `exe` on `defn` (its version), and its commit ([`Plan::Step`]).
    pub(crate) async fn step_on(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: Option<&Event>,
    ) -> Result<StepReport, DriverError> {
        self.step_unparking(defn, exe, event, None).await
    }

    /// [`step_on`](Self::step_on) for a parked event released from its row: `unpark`, the
    /// row and claim its commit deletes (in the failure's commit too, if the step's
    /// cannot be written).
    pub(crate) async fn step_unparking(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: Option<&Event>,
        unpark: Option<stm_store::Unpark>,
    ) -> Result<StepReport, DriverError> {
        // the step may have to be undone (see `prepare_step`); a clone is cheap next to
        // the commit's serialization of the same execution
        let before = exe.clone();
        let step_span = tracing::info_span!(
            "step",
            event_kind = event.map_or("Start", |e| e.kind.as_str()),
            from = before.active_path.as_deref().unwrap_or("None"),
            to = tracing::field::Empty,
            actions = tracing::field::Empty,
        );
        let mut step = in_span!(
            step_span.clone(),
            self.prepare_checked(defn, exe, event, Undo::Snapshot(&before), &[])
        )?;
        // the transition taken: where it went and what it ran (recorded only when a
        // subscriber keeps the span: the join allocates)
        if !step_span.is_disabled() {
            step_span.record("to", exe.active_path.as_deref().unwrap_or("None"));
            step_span.record("actions", step.report.actions.join(", ").as_str());
        }
        step.commit.unpark.extend(unpark.clone());
        let actions = step.report.actions.clone();
        let commit_span = tracing::info_span!(
            "commit",
            version = exe.version + 1,
            to = exe.active_path.as_deref().unwrap_or("None"),
            outbox = step.commit.emits.len(),
            spawns = step.commit.spawns.len(),
            timers = step.commit.timers.len(),
        );
        match in_span!(commit_span, self.commit_prepared(exe, step)) {
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
                let mut failure =
                    self.finish_step(exe, event, (before.status, before.active_path.clone()), undone);
                failure.commit.unpark.extend(unpark);
                self.commit_prepared(exe, failure).await
            }
            other => other,
        }
    }

    /// One step of `exe` on `defn`, applied to `exe` in memory: what its commit writes
    /// and what it reports, nothing written yet. `undo` puts `exe` back as it was when the
    /// step must be undone.
    pub(crate) async fn prepare_step(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: Option<&Event>,
        undo: Undo<'_>,
    ) -> Result<PreparedStep, DriverError> {
        let from = (exe.status, exe.active_path.clone());
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
            self.restore(exe, undo).await?;
            exe.status = Status::Failed;
            exe.error = Some(text);
            collected = Collected {
                actions: collected.actions,
                ..Collected::default()
            };
        }
        Ok(self.finish_step(exe, event, from, collected))
    }

    /// Put `exe` back as it was before a step ([`Undo`]).
    async fn restore(&self, exe: &mut Execution, undo: Undo<'_>) -> Result<(), DriverError> {
        match undo {
            Undo::Snapshot(before) => exe.clone_from(before),
            Undo::Stored => {
                let stored = self
                    .store
                    .load(&exe.id)
                    .await?
                    .ok_or_else(|| DriverError::UnknownExecution(exe.id.clone()))?;
                if stored.version != exe.version {
                    // the copy stepped was stale: nothing of it may be written
                    return Err(DriverError::Store(StoreError::Conflict {
                        id: stored.id,
                        expected: exe.version,
                        found: Some(stored.version),
                    }));
                }
                *exe = stored;
            }
        }
        Ok(())
    }

    /// [`prepare_step`](Self::prepare_step), unless `event` is a stale `Timeout`
    /// ([`check_timeout`](Self::check_timeout); `pending`: the timer ops of steps prepared
    /// and not yet written, a burst's): that step runs nothing, and its commit is the
    /// event's processed mark and a trace step saying why it was ignored.
    pub(crate) async fn prepare_checked(
        &self,
        defn: &Definition,
        exe: &mut Execution,
        event: Option<&Event>,
        undo: Undo<'_>,
        pending: &[TimerOp],
    ) -> Result<PreparedStep, DriverError> {
        match self.check_timeout(exe, event, pending).await? {
            TimeoutCheck::Stale(reason) => {
                let ignored = Collected {
                    dropped: Some(reason.clone()),
                    ignored: Some(reason),
                    ..Collected::default()
                };
                Ok(self.finish_step(exe, event, (exe.status, exe.active_path.clone()), ignored))
            }
            TimeoutCheck::Step { gone } => {
                let mut step = self.prepare_step(defn, exe, event, undo).await?;
                if let Some(path) = gone {
                    drop_void_cancels(&mut step.commit.timers, &path);
                }
                Ok(step)
            }
        }
    }

    /// Whether `event` is a stale `Timeout` that must not step: a `Timeout` of a
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
    /// When the store's answer says its row is gone, the step is told so
    /// ([`TimeoutCheck::Step`]'s `gone`).
    async fn check_timeout(
        &self,
        exe: &Execution,
        event: Option<&Event>,
        pending: &[TimerOp],
    ) -> Result<TimeoutCheck, DriverError> {
        let plain = TimeoutCheck::Step { gone: None };
        let Some(event) = event.filter(|e| e.kind == "Timeout") else {
            return Ok(plain);
        };
        let path = event.data.get("path").and_then(Value::as_str);
        let fire_at = event.data.get("fire_at").and_then(Value::as_f64);
        let (Some(path), Some(fire_at)) = (path, fire_at) else {
            return Ok(plain);
        };
        if exe.status != Status::Running || path.starts_with('@') || !fire_at.is_finite() {
            return Ok(plain);
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
                // the row is gone (this claim deleted it, or the sweeper did): a cancel of
                // it by this step would delete nothing, and would make its commit a
                // transaction
                TimerClaim::Claimed | TimerClaim::Absent => {
                    return Ok(TimeoutCheck::Step {
                        gone: Some(path.to_string()),
                    })
                }
                // a store that cannot tell: the engine decides
                _ => None,
            },
        };
        match armed.filter(|armed| *armed != fire_at) {
            None => Ok(plain),
            Some(armed) => {
                let repr = stm_core::pyvalue::float_repr;
                Ok(TimeoutCheck::Stale(format!(
                    "a stale Timeout of {path}: its timer was armed for {} and is now armed for {} \
                     (the state was left and re-entered since)",
                    repr(fire_at),
                    repr(armed)
                )))
            }
        }
    }

    /// What a step's commit writes and what it reports, from what the engine collected.
    fn finish_step(
        &self,
        exe: &mut Execution,
        event: Option<&Event>,
        from: (Status, Option<String>),
        mut collected: Collected,
    ) -> PreparedStep {
        let now = self.clock.now();
        let (from_status, from_path) = from;
        // the status event rides in the same commit as the change it announces
        if let Some(notice) = crate::status::notice(self.status_events, from_status, exe, now) {
            collected.emits.push((None, notice));
        }
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
            // its rows continue the trace of the work that made it, whoever publishes them
            trace_context: crate::telemetry::current().map(|ctx| ctx.traceparent()),
            ..Commit::default()
        };
        PreparedStep { commit, report }
    }

    /// Write a prepared step: its report, with the outbox seqs the store gave its emits.
    pub(super) async fn commit_prepared(
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
}

/// Pair a commit's emits with the seqs the store gave them.
pub(crate) fn outbox_entries(seqs: &[i64], emits: Vec<(Option<String>, Event)>) -> Vec<OutboxEntry> {
    seqs.iter()
        .zip(emits)
        .map(|(seq, (target_id, event))| OutboxEntry {
            seq: *seq,
            target_id,
            event,
            trace_context: None,
        })
        .collect()
}

/// Pair a commit's spawn intents with the seqs the store gave them.
pub(crate) fn spawn_entries(parent_id: &str, seqs: &[i64], spawns: Vec<SpawnIntent>) -> Vec<SpawnEntry> {
    seqs.iter()
        .zip(spawns)
        .map(|(seq, spawn)| SpawnEntry {
            seq: *seq,
            parent_id: parent_id.to_string(),
            child_id: spawn.child_id,
            root_path: spawn.root_path,
            context: spawn.context,
            trace_context: None,
        })
        .collect()
}

/// A trace step's key: the `traceparent` of the span that handled the step's record.
pub const SPAN_KEY: &str = "span";
/// A trace step's key: the id of the span that sent the step's message (16 hex digits).
pub const PARENT_SPAN_KEY: &str = "parent_span";

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
    // keys harel's lack too: the step's span (the record's handling) and the span that
    // sent its message, so `stm trace --spans` draws the span tree from the steps alone
    if let Some(ctx) = crate::telemetry::current() {
        step.insert(SPAN_KEY.into(), Value::from(ctx.traceparent()));
        if let Some(parent) = crate::telemetry::current_parent() {
            step.insert(
                PARENT_SPAN_KEY.into(),
                Value::from(crate::telemetry::span_id_field(&parent)),
            );
        }
    }
    step
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cancel(path: &str) -> TimerOp {
        TimerOp::Cancel { path: path.into() }
    }

    fn arm(path: &str, fire_at: f64) -> TimerOp {
        TimerOp::Schedule {
            path: path.into(),
            fire_at,
        }
    }

    #[test]
    fn only_the_cancels_of_the_gone_row_before_its_rearm_are_dropped() {
        let mut ops = vec![cancel("A"), cancel("B"), arm("A", 5.0), cancel("A"), cancel("A")];
        drop_void_cancels(&mut ops, "A");
        // B's row is not known gone; A's cancels after its re-arm undo that arm
        assert_eq!(ops, vec![cancel("B"), arm("A", 5.0), cancel("A"), cancel("A")]);
        let mut left = vec![cancel("A"), arm("B", 1.0), cancel("A")];
        drop_void_cancels(&mut left, "A");
        assert_eq!(left, vec![arm("B", 1.0)]);
    }
}
