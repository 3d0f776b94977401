//! The sending side and the control plane, over the store and the queue (harel 0.9.0's
//! `SenderLogic` and `engine/control.py`):
//!
//! - `create` writes a PENDING execution with its `Start` in the outbox (one atomic
//!   commit), then publishes that entry and acks it: a worker runs the start, never the
//!   caller. A failed publish is not an error: the entry stays for the relay.
//! - `send` checks the event against the machine's declaration, then publishes it (after
//!   the `Start` of a `PENDING` execution, if that is still in the outbox: see
//!   `deliver_last_block`).
//! - `cancel`, `terminate`, `suspend`, `resume` change the status by CAS (retried on a
//!   concurrent writer), propagate to the children, and take effect at the next event
//!   boundary. `cancel` is cooperative when the active state models `on Cancel`: the
//!   execution goes to CANCELLING and a `Cancel` is emitted in the same commit (the
//!   worker drains the backlog until it arrives); otherwise it is forceful.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use stm_core::{engine, Definition, Event, Execution, Map, Status};
use stm_store::{Commit, OutboxEntry};
use tracing::Instrument;

use crate::driver::{check_event_size, Driver};
use crate::queue::{OutgoingMessage, Queue};
use crate::relay;
use crate::telemetry::{self, TraceContext};

mod error;
mod migrate;
mod redrive;
pub use error::ControlError;
pub use migrate::{Migration, MigrationRefusal, PathMap, UnmappedPath};
pub use redrive::RedriveRefusal;

/// The trace step of a control-plane command that moves an execution (`migrate`,
/// `redrive`): in the shape of an event step (what `stm trace` reads), with `cause`
/// `control` and the command's name where an event's kind would be, as harel's commit
/// describes it (`Step(cause="control", command=...)`).
pub(crate) fn control_step(
    command: &str,
    from_status: Status,
    from_path: Option<String>,
    exe: &Execution,
    now: f64,
    data: Map,
) -> Map {
    use stm_core::Value;
    let path = |p: Option<String>| p.map_or(Value::Null, Value::from);
    let mut step = Map::new();
    step.insert("cause".into(), Value::from("control"));
    step.insert("command".into(), Value::from(command));
    step.insert("event_kind".into(), Value::from(command));
    step.insert("event_data".into(), Value::Object(data));
    step.insert("from_status".into(), Value::from(from_status.as_str()));
    step.insert("to_status".into(), Value::from(exe.status.as_str()));
    step.insert("from_path".into(), path(from_path));
    step.insert("to_path".into(), path(exe.active_path.clone()));
    step.insert("actions".into(), Value::Array(Vec::new()));
    step.insert("context_out".into(), Value::Object(exe.context.clone()));
    step.insert("timestamp".into(), stm_core::pyvalue::float(now));
    step
}

/// Why [`Control::deliver_last_block`] runs: it words its failure.
#[derive(Debug, Clone, Copy)]
enum Before {
    /// An event sent to a `PENDING` execution.
    EventToPending,
    /// A command's commit that writes rows.
    RowsCommit,
}

/// How many times a status change is retried against concurrent writers (harel's).
const RETRIES: usize = 5;

/// The control plane of one deployment.
#[derive(Clone)]
pub struct Control {
    pub driver: Driver,
    pub queue: Arc<dyn Queue>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("driver", &self.driver)
            .finish_non_exhaustive()
    }
}

fn is_terminal(status: Status) -> bool {
    matches!(status, Status::Cancelled | Status::Done)
}

impl Control {
    pub fn new(driver: Driver, queue: Arc<dyn Queue>) -> Self {
        Control { driver, queue }
    }

    async fn load(&self, id: &str) -> Result<Execution, ControlError> {
        self.driver
            .store
            .load(id)
            .await?
            .ok_or_else(|| ControlError::UnknownExecution(id.to_string()))
    }

    /// Create an execution of `definition_id` and queue its `Start`.
    pub async fn create(
        &self,
        definition_id: &str,
        context: Option<Map>,
        execution_id: Option<&str>,
    ) -> Result<Execution, ControlError> {
        let (ctx, span) = self.client_span(execution_id.unwrap_or("-"));
        let work = stm_aws::as_function("operator", async {
            let mut exe = self
                .driver
                .new_execution(definition_id, context, execution_id)
                .await?;
            let id = exe.id.clone();
            exe.stamp(self.driver.clock.now());
            let start = Event::new("Start");
            let commit = Commit {
                emits: vec![(Some(id.clone()), start.clone())],
                ..Commit::default()
            };
            let seqs = self.driver.store.commit(&mut exe, commit).await?.outbox;
            let outbox: Vec<OutboxEntry> = seqs
                .iter()
                .map(|seq| OutboxEntry {
                    seq: *seq,
                    target_id: Some(id.clone()),
                    event: start.clone(),
                    trace_context: None,
                })
                .collect();
            self.flush(&outbox).await;
            Ok(exe)
        });
        telemetry::in_context(ctx, work).instrument(span).await
    }

    /// The client's span of a send: the root of the trace its messages start, or a child
    /// of the caller's current context ([`telemetry`]).
    fn client_span(&self, execution_id: &str) -> (TraceContext, tracing::Span) {
        let parent = telemetry::current();
        let ctx = match parent {
            Some(parent) => parent.child(),
            None => TraceContext::new_trace(self.driver.clock.now()),
        };
        let span = tracing::info_span!(
            "send",
            execution_id,
            trace_id = %telemetry::trace_id_field(&ctx),
            span_id = %telemetry::span_id_field(&ctx),
            parent_span_id = telemetry::parent_field(parent).as_deref(),
        );
        (ctx, span)
    }

    /// Publish `event` to execution `execution_id`, checked against the machine's
    /// declaration when the execution exists.
    pub async fn send(&self, execution_id: &str, event: &Event) -> Result<(), ControlError> {
        let (ctx, span) = self.client_span(execution_id);
        let work = stm_aws::as_function("operator", async {
            Self::check_alone(execution_id, event)?;
            if let Some(defn) = self.ready_for_events(execution_id).await? {
                Driver::check_event(&defn, event)?;
            }
            let message = OutgoingMessage::event(execution_id, event);
            match self
                .queue
                .publish_batch(std::slice::from_ref(&message))
                .await
                .first()
            {
                None => Ok(()),
                Some(failure) => Err(ControlError::Refused {
                    code: failure.code.clone(),
                    message: failure.message.clone(),
                }),
            }
        });
        telemetry::in_context(ctx, work).instrument(span).await
    }

    /// Publish several events, each to its execution and each checked as [`send`] checks
    /// one, in as few requests as SQS allows (ten messages to a `SendMessageBatch`): how a
    /// producer sends past the queue's per-action quota (70,000 requests a second for a
    /// FIFO queue in high-throughput mode, each batch one request). One answer per event,
    /// in order. An event its check refuses holds back no other; an event SQS refuses, or
    /// whose execution could not be read, holds back the execution's later events
    /// ([`ControlError::HeldBack`]), so an execution's events never arrive out of order.
    /// Each execution is read once, however many of the events are its.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stm_core::Event;
    /// use stm_runtime::{ActionRegistry, Control, Definitions, Driver, MemoryQueue};
    ///
    /// let text = "event Go { n: int }\nmachine M {\n  initial A\n  state A {}\n  final B done\n  from A to B on Go\n}\n";
    /// let mut definitions = Definitions::new();
    /// definitions.register(stm_core::dsl::load_definition_str(text, None, None).expect("valid"));
    /// let driver = Driver::new(Arc::new(stm_store::MemoryStore::new()), definitions, ActionRegistry::with_builtins());
    /// let control = Control::new(driver, Arc::new(MemoryQueue::default()));
    /// let go = |n: serde_json::Value| {
    ///     let mut data = stm_core::Map::new();
    ///     data.insert("n".to_string(), n);
    ///     Event::with_data("Go", data)
    /// };
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(async {
    /// control.create("M", None, Some("m-1")).await.expect("created");
    /// control.create("M", None, Some("m-2")).await.expect("created");
    /// let answers = control
    ///     .send_batch(&[
    ///         ("m-1".to_string(), go(1.into())),
    ///         ("m-2".to_string(), go("two".into())),
    ///         ("m-2".to_string(), go(2.into())),
    ///     ])
    ///     .await;
    /// assert!(answers[0].is_ok() && answers[2].is_ok());
    /// // Go's n is an int: that event alone is refused, and says why
    /// let refused = answers[1].as_ref().expect_err("n is not an int");
    /// assert!(refused.to_string().contains("'n' must be int"), "{refused}");
    /// # });
    /// ```
    ///
    /// [`send`]: Self::send
    pub async fn send_batch(&self, events: &[(String, Event)]) -> Vec<Result<(), ControlError>> {
        stm_aws::as_function("operator", async {
            let mut answers: Vec<Result<(), ControlError>> = Vec::with_capacity(events.len());
            // each execution read once: its machine, or (`Err`) none because its first event
            // got the reason and its later ones are held back
            let mut machines: HashMap<&str, Result<Option<Arc<Definition>>, ()>> = HashMap::new();
            for (execution_id, event) in events {
                if let Err(refused) = Self::check_alone(execution_id, event) {
                    answers.push(Err(refused));
                    continue;
                }
                if !machines.contains_key(execution_id.as_str()) {
                    match self.ready_for_events(execution_id).await {
                        Ok(defn) => {
                            machines.insert(execution_id, Ok(defn));
                        }
                        Err(why) => {
                            machines.insert(execution_id, Err(()));
                            answers.push(Err(why));
                            continue;
                        }
                    }
                }
                answers.push(match &machines[execution_id.as_str()] {
                    Ok(Some(defn)) => Driver::check_event(defn, event).map_err(ControlError::from),
                    Ok(None) => Ok(()),
                    Err(()) => Err(ControlError::HeldBack {
                        execution_id: execution_id.clone(),
                    }),
                });
            }
            // in waves, the n-th event of each execution in the n-th: an execution is in a
            // request at most once, and one that SQS refused sends nothing after it
            let mut waves: Vec<Vec<usize>> = Vec::new();
            let mut sent_before: HashMap<&str, usize> = HashMap::new();
            for (i, (execution_id, _)) in events.iter().enumerate() {
                if answers[i].is_ok() {
                    let wave = sent_before.entry(execution_id).or_default();
                    if waves.len() <= *wave {
                        waves.push(Vec::new());
                    }
                    waves[*wave].push(i);
                    *wave += 1;
                }
            }
            let mut refused: HashSet<&str> = HashSet::new();
            for wave in waves {
                let mut sending = Vec::with_capacity(wave.len());
                for i in wave {
                    let execution_id = events[i].0.as_str();
                    if refused.contains(execution_id) {
                        answers[i] = Err(ControlError::HeldBack {
                            execution_id: execution_id.to_string(),
                        });
                    } else {
                        sending.push(i);
                    }
                }
                let messages: Vec<OutgoingMessage> = sending
                    .iter()
                    .map(|&i| OutgoingMessage::event(&events[i].0, &events[i].1))
                    .collect();
                for failure in self.queue.publish_batch(&messages).await {
                    if let Some(&i) = sending.get(failure.index) {
                        refused.insert(events[i].0.as_str());
                        answers[i] = Err(ControlError::Refused {
                            code: failure.code,
                            message: failure.message,
                        });
                    }
                }
            }
            answers
        })
        .await
    }

    /// What SQS or the engine refuses of an event before any read: a `Start` (only
    /// `create` starts an execution), an event too large for a message.
    fn check_alone(execution_id: &str, event: &Event) -> Result<(), ControlError> {
        if event.kind == "Start" {
            return Err(ControlError::StartRefused);
        }
        check_event_size(execution_id, event)?;
        Ok(())
    }

    /// Ready `execution_id` for events: its machine when it exists and this deploy has its
    /// version (`None`: nothing to check against, and the worker parks its events until
    /// that version is back), after publishing a `PENDING` execution's `Start` if that is
    /// still pending (an event must not reach the group before it).
    async fn ready_for_events(&self, execution_id: &str) -> Result<Option<Arc<Definition>>, ControlError> {
        let Some(exe) = self.driver.store.load(execution_id).await? else {
            return Ok(None);
        };
        let defn = self.driver.definition_if_deployed(&exe)?;
        if exe.status == Status::Pending {
            self.deliver_last_block(execution_id, Before::EventToPending)
                .await?;
        }
        Ok(defn)
    }

    /// Cancel respecting the machine: cooperative when the active state models `Cancel`,
    /// forceful otherwise (and always for a FAILED execution). Children are terminated.
    ///
    /// Each control command returns the status it left the execution in, as it committed
    /// it (its status as found when there was nothing to do): a worker may have moved it
    /// on since, as a cooperative cancel's `Cancel` does, so a reload would not tell.
    pub async fn cancel(&self, execution_id: &str, reason: Option<Map>) -> Result<Status, ControlError> {
        stm_aws::as_function("operator", async {
            for _ in 0..RETRIES {
                let mut exe = self.load(execution_id).await?;
                if is_terminal(exe.status) {
                    return Ok(exe.status);
                }
                let cancel = Event::with_data("Cancel", reason.clone().unwrap_or_default());
                // a machine version this deploy does not have cannot say whether the state
                // models `on Cancel`: the cancel is forceful, as for a FAILED execution
                let cooperative = match self.driver.definition_if_deployed(&exe)? {
                    Some(defn) => {
                        exe.status != Status::Failed && engine::has_cancel_handler(&defn, &exe, &cancel)
                    }
                    None => false,
                };
                if !cooperative {
                    return self.force(execution_id, Status::Cancelled).await;
                }
                // a reason too large for SQS: refused before the CANCELLING commit, which
                // would otherwise wait for a Cancel that can never arrive
                check_event_size(execution_id, &cancel)?;
                // the Cancel is a row: its commit repoints the item's last block
                self.deliver_last_block(execution_id, Before::RowsCommit).await?;
                exe.status = Status::Cancelling;
                exe.stamp(self.driver.clock.now());
                let commit = Commit {
                    emits: vec![(Some(exe.id.clone()), cancel.clone())],
                    ..Commit::default()
                };
                let seqs = match self.driver.store.commit(&mut exe, commit).await {
                    Ok(written) => written.outbox,
                    Err(e) if e.is_conflict() => continue,
                    Err(e) => return Err(e.into()),
                };
                self.propagate(execution_id, Status::Cancelled).await?;
                let outbox: Vec<OutboxEntry> = seqs
                    .iter()
                    .map(|seq| OutboxEntry {
                        seq: *seq,
                        target_id: Some(exe.id.clone()),
                        event: cancel.clone(),
                        trace_context: None,
                    })
                    .collect();
                self.flush(&outbox).await;
                return Ok(Status::Cancelling);
            }
            Err(ControlError::Store(stm_store::StoreError::retryable(format!(
                "cancel {execution_id}: still conflicting after {RETRIES} attempts"
            ))))
        })
        .await
    }

    /// Forceful cancel: CANCELLED now, no hooks; children follow.
    pub async fn terminate(&self, execution_id: &str) -> Result<Status, ControlError> {
        stm_aws::as_function("operator", async {
            self.force(execution_id, Status::Cancelled).await
        })
        .await
    }

    /// RUNNING -> SUSPENDED (no-op otherwise); children follow. Nothing is lost: the
    /// worker keeps the events that come meanwhile on the execution's item until `resume`.
    pub async fn suspend(&self, execution_id: &str) -> Result<Status, ControlError> {
        stm_aws::as_function("operator", async {
            let found = self.load(execution_id).await?.status;
            if found != Status::Running {
                return Ok(found);
            }
            self.force(execution_id, Status::Suspended).await
        })
        .await
    }

    /// SUSPENDED -> RUNNING (no-op otherwise); children follow. The events that came
    /// while it was suspended wait on its item: the same commit arms its recheck timer for
    /// now, whose `Timeout` (the sweeper's next run) steps them in order, unless its next
    /// event comes first and does.
    pub async fn resume(&self, execution_id: &str) -> Result<Status, ControlError> {
        stm_aws::as_function("operator", async {
            let found = self.load(execution_id).await?.status;
            if found != Status::Suspended {
                return Ok(found);
            }
            self.force(execution_id, Status::Running).await
        })
        .await
    }

    async fn force(&self, execution_id: &str, status: Status) -> Result<Status, ControlError> {
        let committed = self.commit_status(execution_id, status).await?;
        self.propagate(execution_id, status).await?;
        Ok(committed)
    }

    /// CAS `execution_id` to `status`, re-loading on a concurrent write; a finished
    /// execution is left alone. The status it is left in.
    async fn commit_status(&self, execution_id: &str, status: Status) -> Result<Status, ControlError> {
        for _ in 0..RETRIES {
            let mut exe = self.load(execution_id).await?;
            if is_terminal(exe.status) {
                return Ok(exe.status);
            }
            let before = exe.status;
            let mut commit = Commit {
                timers: self.timers_moving(execution_id, before, status).await?,
                ..Commit::default()
            };
            exe.status = status;
            let now = self.driver.clock.now();
            exe.stamp(now);
            // the operator does not know the deployment's level: it writes a notice for
            // every change, and the relay (whose bus has the level) sends or drops it
            let level = crate::status::StatusEvents::All;
            if let Some(notice) = crate::status::notice(level, before, &exe, now) {
                commit.emits.push((None, notice));
            }
            if status == Status::Running && exe.has_parked() {
                commit.timers.push(stm_store::TimerOp::Schedule {
                    path: crate::driver::PARKED_PATH.into(),
                    fire_at: now,
                });
            }
            if !commit.emits.is_empty() {
                self.deliver_last_block(execution_id, Before::RowsCommit).await?;
            }
            match self.driver.store.commit(&mut exe, commit).await {
                Ok(_) => return Ok(status),
                Err(e) if e.is_conflict() => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ControlError::Store(stm_store::StoreError::retryable(format!(
            "{execution_id}: status change still conflicting after {RETRIES} attempts"
        ))))
    }

    /// The timers a change from `before` to `status` moves, read with the load it commits
    /// on: a suspended execution's timers are held out of the due index (a sweep would
    /// read each at every run and fire none: 10^5 of them kept every sweep from reaching
    /// the timers of running executions), and listed again when it leaves SUSPENDED. The
    /// CAS keeps them as read: only a commit of this execution arms or cancels one. A
    /// sweep that fired one of them just before (its execution read RUNNING) may delete it
    /// between this read and the commit, which then arms it again: it fires a second
    /// `Timeout` with the same ids, which the worker drops, as after a sweeper's crash
    /// between its publish and its delete.
    async fn timers_moving(
        &self,
        execution_id: &str,
        before: Status,
        status: Status,
    ) -> Result<Vec<stm_store::TimerOp>, ControlError> {
        let holding = status == Status::Suspended && before != Status::Suspended;
        let releasing = before == Status::Suspended && status != Status::Suspended;
        if !holding && !releasing {
            return Ok(Vec::new());
        }
        let armed = self.driver.store.timers_of(execution_id).await?;
        Ok(armed
            .into_iter()
            .filter(|t| t.held == releasing)
            .map(|t| match holding {
                true => stm_store::TimerOp::Hold {
                    path: t.path,
                    fire_at: t.fire_at,
                },
                false => stm_store::TimerOp::Schedule {
                    path: t.path,
                    fire_at: t.fire_at,
                },
            })
            .collect())
    }

    /// Apply `status` to every descendant (regions and invokes, recursively).
    async fn propagate(&self, parent_id: &str, status: Status) -> Result<(), ControlError> {
        let mut frontier = vec![parent_id.to_string()];
        while let Some(id) = frontier.pop() {
            let Some(parent) = self.driver.store.load(&id).await? else {
                continue;
            };
            for child_id in parent.child_ids() {
                match self.commit_status(&child_id, status).await {
                    Ok(_) => frontier.push(child_id),
                    // a child whose spawn intent is still on its way has no record yet
                    Err(ControlError::UnknownExecution(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// Publish the rows of `execution_id`'s last commit that wrote any, those still
    /// pending (read by key: the execution item records their block), and fail if some
    /// cannot be published. Two callers need them out first:
    ///
    /// - an event for a `PENDING` execution ([`Before::EventToPending`]): `create` leaves
    ///   the `Start` to the relay when the queue refuses its publish, and an event
    ///   published before it would reach the group first, where the worker drops every
    ///   event for a `PENDING` execution (lost although `send` succeeded);
    /// - a command whose commit writes rows ([`Before::RowsCommit`]: a status event, a
    ///   cooperative cancel's `Cancel`): that commit repoints the item's record of its last
    ///   block, so a redelivery of the worker record whose publish failed would republish
    ///   the command's rows instead, leaving the earlier ones to the scheduled relay,
    ///   behind the group's later events.
    ///
    /// A row queued already is published again under the same deduplication id (SQS drops
    /// it within 5 minutes, the worker's processed mark after). Status events stay pending
    /// for the scheduled relay (the operator has no bus): they belong to no message group.
    async fn deliver_last_block(&self, execution_id: &str, before: Before) -> Result<(), ControlError> {
        let summary = relay::deliver_last_block(
            self.driver.store.as_ref(),
            self.queue.as_ref(),
            None,
            execution_id,
        )
        .await?;
        if summary.failed == 0 {
            return Ok(());
        }
        let (execution_id, failed) = (execution_id.to_string(), summary.failed);
        Err(match before {
            Before::EventToPending => ControlError::StartUnpublished { execution_id, failed },
            Before::RowsCommit => ControlError::RowsUnpublished { execution_id, failed },
        })
    }

    /// Publish what a control commit emitted; a failure leaves it to the relay.
    async fn flush(&self, outbox: &[OutboxEntry]) {
        let summary =
            relay::deliver(self.driver.store.as_ref(), self.queue.as_ref(), None, &[], outbox).await;
        if summary.failed > 0 {
            tracing::warn!(
                failed = summary.failed,
                "could not publish now; the relay will deliver it"
            );
        }
    }
}
