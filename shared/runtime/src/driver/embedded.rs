//! The embedded runner (harel's `DurableRunner`, what `stm run` drives): a create or an
//! event stepped as its [`plan`](super::plan) says, then everything it enqueued delivered
//! inline to quiescence, and due timers fired inline. The worker carries out the same
//! plans with delivery by queue.

use stm_core::engine;
use stm_core::{Event, Execution, Map};

use super::error::check_execution_id;
use super::plan::{plan, Arrival, Plan};
use super::{Driver, DriverError, Undo};
use crate::sweeper::TimerFate;

/// An execution the embedded runner keeps between its events
/// ([`Driver::process_held`]): what the store holds, so its steps take no undo snapshot
/// (a step that must be undone is put back from the store).
#[derive(Debug, Clone)]
pub struct Held {
    exe: Execution,
    /// The last call on it delivered everything to quiescence: nothing is pending but what
    /// the next step enqueues.
    settled: bool,
}

impl Held {
    /// Hold `exe`, as `create` or `process` returned it.
    pub fn new(exe: Execution) -> Self {
        Held { exe, settled: false }
    }

    /// The execution as its last step left it: what the store holds.
    pub fn execution(&self) -> &Execution {
        &self.exe
    }

    pub fn into_execution(self) -> Execution {
        self.exe
    }
}

impl Driver {
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
        let id = execution_id.map_or_else(stm_core::execution::new_id, str::to_string);
        let defn = self.routed_definition(definition_id, &id).await?;
        let mut context = context.unwrap_or_default();
        defn.with_context_defaults(&mut context);
        let problems = defn.context_problems(&context, true);
        if !problems.is_empty() {
            return Err(DriverError::Context { problems });
        }
        let mut exe = Execution::new(id, defn.id.clone());
        exe.definition_version = defn.version;
        exe.context = context;
        Ok(exe)
    }

    /// The version of `definition_id` a new execution `id` starts on: its alias's pick
    /// when the machine has a route (`stm_store::route`), else the current version.
    async fn routed_definition(
        &self,
        definition_id: &str,
        id: &str,
    ) -> Result<std::sync::Arc<stm_core::Definition>, DriverError> {
        let current = self
            .definitions
            .get(definition_id)
            .ok_or_else(|| DriverError::UnknownDefinition(definition_id.to_string()))?;
        let routes = self.routes.routes(self.store.as_ref()).await?;
        let Some(version) = routes.version_for(&current.id, id) else {
            return Ok(current.clone());
        };
        self.definitions
            .get_version(&current.id, version)
            .cloned()
            .ok_or_else(|| DriverError::RoutedVersionMissing {
                alias: stm_store::route::ALIAS,
                definition_id: current.id.clone(),
                version,
            })
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
        self.deliver_pending().await?;
        self.store
            .load(&id)
            .await?
            .ok_or(DriverError::UnknownExecution(id))
    }

    /// Feed one event to a stored execution and deliver what follows, inline: the event's
    /// [`plan`](super::plan) for a caller ([`Arrival::Caller`]) carried out, then everything
    /// it enqueued.
    pub async fn process(&self, execution_id: &str, event: &Event) -> Result<Execution, DriverError> {
        let (exe, processed) = self.store.load_for_event(execution_id, &event.id).await?;
        let mut exe = exe.ok_or_else(|| DriverError::UnknownExecution(execution_id.to_string()))?;
        // checked before anything runs, on a deployed version (a parked event is unchecked)
        if let Some(defn) = self.definition_if_deployed(&exe)? {
            Driver::check_event(&defn, event)?;
        }
        let stepped_alone = matches!(
            plan(Arrival::Caller, Some(&exe), event, processed, true),
            Plan::Step | Plan::Duplicate
        );
        if !processed {
            self.step_inline(Arrival::Caller, &mut exe, event).await?;
        }
        // a broadcast or a release wrote more than `exe` (the regions, the parent's ttl):
        // reload it
        self.settle(&mut exe, !stepped_alone).await?;
        Ok(exe)
    }

    /// [`process`](Self::process) for a caller that keeps the execution between its events
    /// (`stm run`): `held` is what the last `create`, `process` or `process_held` of it
    /// returned, and becomes what `process` would return now, without the load.
    ///
    /// The plain case (no children, nothing parked, its version deployed, no parked
    /// recheck) steps the held copy itself, without an undo snapshot (a step that must be
    /// undone is put back from the store, which holds the copy as it was); anything else
    /// goes through `process`, which reloads.
    /// The commit's CAS still guards the copy: a stale one loses it, and the stored
    /// execution is reloaded and processed instead (the stale attempt's actions have run
    /// then, as they do when a worker loses a race: actions are at-least-once). After an
    /// error, `held` is the stored execution again.
    pub async fn process_held(&self, held: &mut Held, event: &Event) -> Result<(), DriverError> {
        let result = match self.step_held(held, event).await {
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
        };
        // an error may have left rows undelivered: the next step looks
        held.settled = result.is_ok();
        result
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
        let settled = held.settled;
        let exe = &mut held.exe;
        let Some(defn) = self.definition_if_deployed(exe)? else {
            return Ok(false);
        };
        // a broadcast to regions, a release of parked events, a recheck: `process`
        if plan(Arrival::Caller, Some(exe), event, false, true) != Plan::Step {
            return Ok(false);
        }
        Driver::check_event(&defn, event)?;
        if self.store.is_processed(&exe.id, &event.id).await? {
            return Ok(true);
        }
        // `run_step` with nothing parked: `step_on`, undone (if it must be) from the store
        let step = match self
            .prepare_checked(&defn, exe, Some(event), Undo::Stored, &[])
            .await
        {
            Err(err) if err.is_conflict() => return Ok(false),
            other => other?,
        };
        let report = match self.commit_prepared(exe, step).await {
            Err(err) if err.is_conflict() => return Ok(false),
            other => other?,
        };
        // when the last call delivered everything, and this step enqueued nothing, there is
        // nothing to deliver and nothing to reload: the pending rows are not read again
        if report.enqueued() || !settled {
            self.settle(exe, false).await?;
        }
        Ok(true)
    }

    /// After a step of `exe`: deliver inline what it enqueued, and make `exe` what is
    /// stored. With nothing enqueued, nothing else wrote `exe` and it is kept as it is
    /// (no load), unless `reload`.
    async fn settle(&self, exe: &mut Execution, reload: bool) -> Result<(), DriverError> {
        let quiet =
            self.store.pending_spawns().await?.is_empty() && self.store.pending_outbox().await?.is_empty();
        if quiet && !reload {
            return Ok(());
        }
        self.deliver_pending().await?;
        *exe = self
            .store
            .load(&exe.id)
            .await?
            .ok_or_else(|| DriverError::UnknownExecution(exe.id.clone()))?;
        Ok(())
    }

    /// Deliver everything pending, inline, to quiescence: create the children, then
    /// process the outbox events in seq order (the embedded relay; the worker's "inline
    /// flush" only publishes a commit's entries to the queue).
    pub(crate) async fn deliver_pending(&self) -> Result<(), DriverError> {
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

    /// Deliver every timer due now inline, then remove it (guarded). Returns how many
    /// fired. Each timer's fate is the sweeper's (`sweeper::TimerFate`): a suspended execution's
    /// stays armed until it is resumed.
    pub async fn fire_due_timers(&self) -> Result<usize, DriverError> {
        let mut fired = 0;
        for timer in self.store.due_timers(self.clock.now()).await? {
            let exe = self.store.load(&timer.execution_id).await?;
            let fate = TimerFate::of(exe.as_ref());
            if fate == TimerFate::KeepArmed {
                continue;
            }
            // an execution whose version is not deployed takes its timers too: they park
            let runnable = |e: &Execution| self.definition_if_deployed(e).is_ok();
            if fate == TimerFate::Fire && exe.as_ref().is_some_and(runnable) {
                let event = engine::timeout_event(&timer.execution_id, &timer.path, timer.fire_at);
                // deliver before delete: a crash between the two is safe (dedupe)
                self.deliver_inline(&timer.execution_id, &event).await?;
                self.deliver_pending().await?;
            }
            self.store
                .delete_timer(&timer.execution_id, &timer.path, timer.fire_at)
                .await?;
            fired += 1;
        }
        Ok(fired)
    }
}
