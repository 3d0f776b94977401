//! The model checks the code: a trace of the model is replayed against the real worker,
//! relay, sweeper and operator (`Control::suspend`, `resume`) over `MemoryStore` and
//! `MemoryQueue`, one call at a time, and after
//! each step the real system, seen as the model sees it ([`view::View`]), must equal the
//! model's state. Each actor also has to stop before the very call the model says it
//! makes next, and a worker's batch has to end as the model says (deleted, or reported
//! failed). Any difference is a [`Divergence`].
//!
//! Each actor runs as a task on a single-threaded runtime, behind its own [`gate`]d view
//! of the store and the queue: it runs until it stops before its next call, and the
//! replay lets it make that call when the model takes that actor's step. A crash aborts
//! the task where it stopped. The event source (receive, delete) and the environment
//! (the clock, visibility timeouts, the due index) are the replay's own calls.

pub mod gate;
pub mod view;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use stm_runtime::worker::BatchOutcome;
use stm_runtime::{
    relay, sweeper, ActionRegistry, Control, Definitions, Driver, ManualClock, MemoryQueue, Queue, Record,
    Worker, WorkerSettings,
};
use stm_store::{ExecutionStore, MemoryStore};
use tokio::runtime::Runtime;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;

use crate::model::{Action, Protocol};
use crate::state::{Command, Operator, Relay, State, Sweeper, Worker as Phase, PARENT, TIMED};
use gate::{Gate, GatedQueue, GatedStore, IndexView, QueueGate};
use view::{real_id, View, START, TICK};

/// Where the real code departed from the model.
#[derive(Debug)]
pub struct Divergence {
    /// The step (1-based) and what it was.
    pub step: usize,
    pub action: String,
    pub what: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "step {} ({}): {}", self.step, self.action, self.what)
    }
}

/// A planted change to the code under replay, for the tests that show a replay fails when
/// the code stops doing what the model does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Plant {
    #[default]
    None,
    /// Commits write no processed marks.
    DropMarks,
}

/// What an actor's task did when it was last let run.
enum Status {
    /// Stopped before this call.
    Paused(&'static str),
    /// Returned.
    Finished,
}

/// A running actor.
struct Task<T> {
    handle: Option<JoinHandle<T>>,
    calls: UnboundedReceiver<&'static str>,
    gate: Arc<Gate>,
    result: Option<T>,
}

impl<T> Task<T> {
    /// The actor `handle` runs, paused at its gate, its result not in yet.
    fn new(handle: JoinHandle<T>, calls: UnboundedReceiver<&'static str>, gate: Arc<Gate>) -> Self {
        Task {
            handle: Some(handle),
            calls,
            gate,
            result: None,
        }
    }
}

/// The real system under replay.
pub struct Replay {
    rt: Runtime,
    store: Arc<MemoryStore>,
    queue: Arc<MemoryQueue>,
    clock: Arc<ManualClock>,
    definitions: Definitions,
    index: IndexView,
    plant: Plant,
    /// The receipt of each message's latest receive, by deduplication id.
    receipts: HashMap<String, String>,
    workers: Vec<Option<(Task<BatchOutcome>, String)>>,
    relay: Option<Task<()>>,
    sweeper: Option<Task<()>>,
    operator: Option<Task<()>>,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay")
            .field("plant", &self.plant)
            .finish_non_exhaustive()
    }
}

/// The machines the model abstracts.
pub fn definitions() -> anyhow::Result<Definitions> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("machines/model.stm");
    let mut definitions = Definitions::new();
    for definition in stm_core::dsl::load_all_file(&path)
        .map_err(|e| anyhow::anyhow!("cannot load {}: {e:?}", path.display()))?
    {
        definitions.register(definition);
    }
    Ok(definitions)
}

impl Replay {
    /// The real system in the model's initial state: the operator's creates and sends done.
    pub fn start(model: &Protocol, plant: Plant) -> anyhow::Result<Replay> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let store = Arc::new(MemoryStore::new());
        // never dead-letter: the model has no dead-letter queue
        let queue = Arc::new(MemoryQueue::new(10_000));
        let clock = Arc::new(ManualClock::new(START));
        let definitions = definitions()?;
        let driver = Driver::new(
            store.clone(),
            definitions.clone(),
            ActionRegistry::with_builtins(),
        )
        .with_clock(clock.clone())
        .with_trace(true);
        let control = Control::new(driver, queue.clone());
        rt.block_on(async {
            if model.bounds.children > 0 {
                let recipients: Vec<serde_json::Value> = (0..model.bounds.children)
                    .map(|i| serde_json::Value::from(format!("r{i}")))
                    .collect();
                let mut context = stm_core::Map::new();
                context.insert("recipients".into(), serde_json::Value::from(recipients));
                control
                    .create("Fan", Some(context), Some(real_id(PARENT)))
                    .await?;
            }
            if model.bounds.timed {
                control.create("Timed", None, Some(real_id(TIMED))).await?;
                if model.bounds.leave_back {
                    control
                        .send(real_id(TIMED), &stm_core::Event::new("Leave"))
                        .await?;
                    control
                        .send(real_id(TIMED), &stm_core::Event::new("Back"))
                        .await?;
                }
            }
            anyhow::Ok(())
        })?;
        Ok(Replay {
            rt,
            store,
            queue,
            clock,
            definitions,
            index: Arc::new(Mutex::new(Vec::new())),
            plant,
            receipts: HashMap::new(),
            workers: (0..model.bounds.workers).map(|_| None).collect(),
            relay: None,
            sweeper: None,
            operator: None,
        })
    }

    /// A store and queue for one actor, with its gate.
    fn views(
        &self,
        free_loads: Vec<String>,
    ) -> (
        Arc<GatedStore>,
        Arc<GatedQueue>,
        Arc<Gate>,
        UnboundedReceiver<&'static str>,
    ) {
        let (gate, calls) = Gate::new();
        let store = Arc::new(GatedStore {
            inner: self.store.clone(),
            gate: gate.clone(),
            index: self.index.clone(),
            free_loads,
            drop_marks: self.plant == Plant::DropMarks,
        });
        let queue = Arc::new(GatedQueue::new(self.queue.clone(), QueueGate(gate.clone())));
        (store, queue, gate, calls)
    }

    /// Let `task` run until it stops before a call or returns.
    fn run<T: Send + 'static>(rt: &Runtime, task: &mut Task<T>) -> anyhow::Result<Status> {
        let Some(handle) = task.handle.as_mut() else {
            return Ok(Status::Finished);
        };
        let status = rt.block_on(async {
            tokio::select! {
                Some(call) = task.calls.recv() => Ok(Status::Paused(call)),
                joined = handle => joined.map(|out| {
                    task.result = Some(out);
                    Status::Finished
                }),
            }
        })?;
        if matches!(status, Status::Finished) {
            task.handle = None;
        }
        Ok(status)
    }

    /// Open the gate of `task` and run it to its next stop.
    fn resume<T: Send + 'static>(rt: &Runtime, task: &mut Task<T>) -> anyhow::Result<Status> {
        task.gate.open();
        Replay::run(rt, task)
    }

    /// Take `action` on the real system (`before` is the model's state it is taken in,
    /// `after` the state it leads to), and compare.
    pub fn step(&mut self, before: &State, action: Action, after: &State) -> Result<(), String> {
        self.act(before, action, after).map_err(|e| format!("{e:#}"))?;
        let real = self.rt.block_on(View::of_real(&self.store, &self.queue));
        let expected = View::of_model(after);
        if real != expected {
            return Err(format!(
                "the real system differs from the model\n  model: {expected:?}\n  real:  {real:?}"
            ));
        }
        Ok(())
    }

    fn act(&mut self, before: &State, action: Action, after: &State) -> anyhow::Result<()> {
        match action {
            Action::Receive(w, index) => self.receive(w, index, after.workers[w]),
            Action::Work(w) => self.work(w, before.workers[w], after.workers[w]),
            Action::Relay => self.relay(after.relay),
            Action::Sweep => self.sweep(after.sweeper),
            Action::CrashWorker(w) => {
                if let Some((task, _)) = self.workers[w].take() {
                    self.abort(task);
                }
                Ok(())
            }
            Action::CrashRelay => {
                if let Some(task) = self.relay.take() {
                    self.abort(task);
                }
                Ok(())
            }
            Action::CrashSweeper => {
                if let Some(task) = self.sweeper.take() {
                    self.abort(task);
                }
                Ok(())
            }
            Action::Expire(index) => {
                let receipt = self.receipt_at(index)?;
                self.rt
                    .block_on(self.queue.change_visibility(&receipt, 0))
                    .map_err(|e| anyhow::anyhow!("visibility timeout: {e}"))
            }
            Action::IndexCatchUp => {
                // what the store lists as due, whenever due (a held timer is not listed)
                let mut listed = self.rt.block_on(self.store.due_timers(f64::INFINITY))?;
                listed.retain(|t| t.execution_id == real_id(TIMED));
                *self.index.lock().unwrap_or_else(|e| e.into_inner()) = listed;
                Ok(())
            }
            Action::Operate => self.operate(before.operator, after.operator),
            Action::CrashOperator => {
                if let Some(task) = self.operator.take() {
                    self.abort(task);
                }
                Ok(())
            }
            Action::WindowPasses => {
                anyhow::bail!("MemoryQueue's deduplication window runs on the wall clock: not replayable")
            }
            Action::RefuseWorker(..) | Action::RefuseRelay | Action::RefuseOperator(_) => {
                anyhow::bail!("a refused entry is not replayed: MemoryQueue takes every entry")
            }
            Action::Tick => {
                self.clock.advance(TICK);
                Ok(())
            }
        }
    }

    fn abort<T>(&self, mut task: Task<T>) {
        if let Some(handle) = task.handle.take() {
            handle.abort();
            let _ = self.rt.block_on(handle);
        }
    }

    /// The deduplication id of the queue's message at `index`.
    fn dedup_at(&self, index: usize) -> anyhow::Result<String> {
        self.queue
            .snapshot()
            .get(index)
            .map(|m| m.deduplication_id.clone())
            .ok_or_else(|| anyhow::anyhow!("no message at queue index {index}"))
    }

    fn receipt_at(&self, index: usize) -> anyhow::Result<String> {
        let dedup = self.dedup_at(index)?;
        self.receipts
            .get(&dedup)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("message {index} was never received"))
    }

    /// The event source hands worker `w` the message at `index`: SQS's next one.
    fn receive(&mut self, w: usize, index: usize, phase: Phase) -> anyhow::Result<()> {
        let dedup = self.dedup_at(index)?;
        let received = self
            .rt
            .block_on(self.queue.receive(1, 3_600, 0))
            .map_err(|e| anyhow::anyhow!("receive: {e}"))?;
        let Some(message) = received.into_iter().next() else {
            anyhow::bail!("SQS offered nothing; the model received {index}");
        };
        let id = message
            .attributes
            .get("MessageDeduplicationId")
            .cloned()
            .unwrap_or_default();
        self.receipts.insert(id.clone(), message.receipt_handle.clone());
        if id != dedup {
            anyhow::bail!("SQS offered another message than the model received ({index})");
        }
        let (store, queue, gate, calls) = self.views(vec![real_id(PARENT).to_string()]);
        // the model releases one parked event a commit; the worker's bursts write several
        // in one commit, whose block of rows holds them all (docs/reliability.md)
        let driver = Driver::new(store, self.definitions.clone(), ActionRegistry::with_builtins())
            .with_clock(self.clock.clone())
            .with_trace(true)
            .with_release_burst(1);
        let worker = Worker::new(
            driver,
            queue,
            WorkerSettings {
                coalesce: false,
                inline_flush: true,
                retry_seconds: 0,
                retry_max_seconds: 0,
                ..WorkerSettings::default()
            },
        );
        let record = Record::from_received(&message);
        let handle = self.rt.spawn(async move { worker.handle_batch(&[record]).await });
        let mut task = Task::new(handle, calls, gate);
        let status = Replay::run(&self.rt, &mut task)?;
        expect_worker(&status, phase)?;
        self.workers[w] = Some((task, message.receipt_handle));
        Ok(())
    }

    fn work(&mut self, w: usize, before: Phase, after: Phase) -> anyhow::Result<()> {
        let Some((mut task, receipt)) = self.workers[w].take() else {
            anyhow::bail!("worker {w} has no record in the real system");
        };
        if let Phase::Done(_, ok) = before {
            // the event source answers the batch: delete it unless reported failed
            let outcome = task
                .result
                .take()
                .ok_or_else(|| anyhow::anyhow!("worker {w} has not returned"))?;
            let real_ok = outcome.records.iter().all(|(_, r)| r.is_ok());
            if real_ok != ok {
                anyhow::bail!("the batch's outcome: model ok={ok}, real {:?}", outcome.records);
            }
            if ok {
                self.rt
                    .block_on(self.queue.delete(&receipt))
                    .map_err(|e| anyhow::anyhow!("delete: {e}"))?;
            }
            return Ok(());
        }
        let status = Replay::resume(&self.rt, &mut task)?;
        expect_worker(&status, after)?;
        self.workers[w] = Some((task, receipt));
        Ok(())
    }

    fn relay(&mut self, after: Relay) -> anyhow::Result<()> {
        let mut task = match self.relay.take() {
            Some(task) => task,
            None => {
                let (store, queue, gate, calls) = self.views(Vec::new());
                let handle = self.rt.spawn(async move {
                    let _ = relay::relay_pending_until(
                        store.as_ref(),
                        queue.as_ref(),
                        None,
                        None,
                        f64::INFINITY,
                        // one row per read, as the model's relay: each row its own batch
                        relay::RelayBounds {
                            read_rows: 1,
                            ..relay::RelayBounds::default()
                        },
                    )
                    .await;
                });
                let mut task = Task::new(handle, calls, gate);
                expect(&Replay::run(&self.rt, &mut task)?, Some("oldest_pending_seqs"))?;
                task
            }
        };
        let status = Replay::resume(&self.rt, &mut task)?;
        let next = match after {
            Relay::Idle => None,
            Relay::Publish(..) => Some("publish_batch"),
            Relay::Ack(..) | Relay::Drop(..) => Some("ack_rows"),
            Relay::Put(..) => anyhow::bail!("the replay's relay has no status bus"),
        };
        expect(&status, next)?;
        if next.is_some() {
            self.relay = Some(task);
        }
        Ok(())
    }

    fn sweep(&mut self, after: Sweeper) -> anyhow::Result<()> {
        let mut task = match self.sweeper.take() {
            Some(task) => task,
            None => {
                let (store, queue, gate, calls) = self.views(vec![real_id(TIMED).to_string()]);
                let now = self.clock_now();
                let handle = self.rt.spawn(async move {
                    let _ = sweeper::sweep(store.as_ref(), queue.as_ref(), now).await;
                });
                let mut task = Task::new(handle, calls, gate);
                expect(&Replay::run(&self.rt, &mut task)?, Some("due_timers"))?;
                task
            }
        };
        let status = Replay::resume(&self.rt, &mut task)?;
        let next = match after {
            Sweeper::Idle => None,
            Sweeper::Listed(..) => Some("armed_timer"),
            Sweeper::Confirmed(..) => Some("publish_batch"),
            Sweeper::Delete(..) => Some("delete_timer"),
        };
        expect(&status, next)?;
        if next.is_some() {
            self.sweeper = Some(task);
        }
        Ok(())
    }

    /// The operator's next call: a command starts (`Control::suspend` or `resume`, its
    /// loads free) and stops before its commit, or goes on from there.
    fn operate(&mut self, before: Operator, after: Operator) -> anyhow::Result<()> {
        let mut task = match (self.operator.take(), before) {
            (
                Some(task),
                Operator::Pending(..) | Operator::Publish(..) | Operator::Ack(..) | Operator::Commit(..),
            ) => task,
            (None, Operator::Ready(command)) => {
                let (store, queue, gate, calls) = self.views(vec![real_id(TIMED).to_string()]);
                let driver = Driver::new(store, self.definitions.clone(), ActionRegistry::with_builtins())
                    .with_clock(self.clock.clone())
                    .with_trace(true);
                let control = Control::new(driver, queue);
                let handle = self.rt.spawn(async move {
                    // a failed command (its retries spent) is the model's to run again
                    let _ = match command {
                        Command::Suspend => control.suspend(real_id(TIMED)).await,
                        Command::Resume => control.resume(real_id(TIMED)).await,
                        Command::Cancel => control.cancel(real_id(TIMED), None).await,
                    };
                });
                let mut task = Task::new(handle, calls, gate);
                let status = Replay::run(&self.rt, &mut task)?;
                return self.operator_stops(task, &status, after);
            }
            (task, _) => anyhow::bail!(
                "the operator is {before:?} in the model, {} in the real system",
                if task.is_some() { "running" } else { "idle" }
            ),
        };
        let status = Replay::resume(&self.rt, &mut task)?;
        self.operator_stops(task, &status, after)
    }

    /// The operator stopped where the model's `after` says: before its read of the last
    /// block, its publish, its ack or its commit, or done.
    fn operator_stops(&mut self, task: Task<()>, status: &Status, after: Operator) -> anyhow::Result<()> {
        let next = match after {
            Operator::Ready(_) | Operator::Finished => None,
            Operator::Pending(..) => Some("pending_rows_of"),
            Operator::Publish(..) => Some("publish_batch"),
            Operator::Ack(..) => Some("ack_rows"),
            Operator::Commit(..) => Some("commit"),
        };
        expect(status, next)?;
        if next.is_some() {
            self.operator = Some(task);
        }
        Ok(())
    }

    fn clock_now(&self) -> f64 {
        use stm_runtime::Clock as _;
        self.clock.now()
    }
}

/// The call a worker in `phase` makes next (`None`: it has returned).
fn next_call(phase: Phase) -> Option<&'static str> {
    match phase {
        Phase::Idle | Phase::Done(..) => None,
        Phase::Received(_) => Some("load"),
        Phase::Claim(..) => Some("claim_timer"),
        Phase::Flush(..) => Some("pending_rows_of"),
        Phase::Park(..) => Some("commit"),
        Phase::Commit(..) => Some("commit"),
        // no such call in the real code: a mutant's
        Phase::Mark(..) => Some("a separate mark"),
        Phase::Pending(_) => Some("pending_rows_of"),
        Phase::Publish(..) => Some("publish_batch"),
        Phase::Ack(..) => Some("ack_rows"),
        Phase::Release(_) => Some("change_visibility"),
    }
}

fn expect_worker(status: &Status, phase: Phase) -> anyhow::Result<()> {
    expect(status, next_call(phase))
}

fn expect(status: &Status, call: Option<&'static str>) -> anyhow::Result<()> {
    match (status, call) {
        (Status::Finished, None) => Ok(()),
        (Status::Paused(real), Some(model)) if *real == model => Ok(()),
        (Status::Paused(real), model) => {
            anyhow::bail!("the real actor stopped before {real}, the model's next call is {model:?}")
        }
        (Status::Finished, Some(model)) => {
            anyhow::bail!("the real actor returned, the model's next call is {model}")
        }
    }
}

/// Replay `actions` from the model's initial state; the first divergence, if any.
pub fn replay(model: &Protocol, actions: &[Action], plant: Plant) -> Result<(), Divergence> {
    use stateright::Model as _;
    let mut replay = Replay::start(model, plant).map_err(|e| Divergence {
        step: 0,
        action: "setup".into(),
        what: format!("{e:#}"),
    })?;
    let mut state = model.initial();
    for (n, action) in actions.iter().enumerate() {
        let describe = crate::trace::describe(&state, *action);
        let Some(next) = model.next_state(&state, *action) else {
            continue;
        };
        replay.step(&state, *action, &next).map_err(|what| Divergence {
            step: n + 1,
            action: describe,
            what,
        })?;
        state = next;
    }
    Ok(())
}

/// A random walk of up to `steps` steps through the model (never through a step the
/// replay cannot take), drawn by the tests' seeded generator from `seed`.
pub fn random_walk(model: &Protocol, seed: u64, steps: usize) -> Vec<Action> {
    use stateright::Model as _;
    // the walks' seeds are 0, 1, 2, ...: spread over the state's bits, each draws its own walk
    let mut rng = stm_testkit::Rng::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut state = model.initial();
    let mut walk = Vec::new();
    let mut enabled = Vec::new();
    for _ in 0..steps {
        enabled.clear();
        model.actions(&state, &mut enabled);
        enabled.retain(|a| {
            !matches!(
                a,
                Action::WindowPasses
                    | Action::RefuseWorker(..)
                    | Action::RefuseRelay
                    | Action::RefuseOperator(_)
            )
        });
        if enabled.is_empty() {
            break;
        }
        let action = *rng.pick(&enabled);
        if let Some(next) = model.next_state(&state, action) {
            state = next;
            walk.push(action);
        }
    }
    walk
}
