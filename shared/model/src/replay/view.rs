//! The real system seen as the model sees it: each execution's version, state and
//! processed marks, the pending rows, the timer and the queue, in the model's terms, so
//! the two can be compared after every step.

use stm_core::{Execution, Status, Value};
use stm_runtime::{MemoryQueue, OutgoingMessage};
use stm_store::{ExecutionStore, MemoryStore};

use crate::state::{Msg, St, State, TimerPath, CHILD, EXECUTIONS, PARENT, TIMED};

/// The clock the replay starts at, and one model tick in seconds (the `Timed` machine's
/// timeout is one tick).
pub const START: f64 = 1_000.0;
pub const TICK: f64 = 10.0;
/// The timed execution's timer path.
pub const TIMER_PATH: &str = "Waiting";
/// The path of the recheck timer `resume` arms (the driver's `PARKED_PATH`).
pub const PARKED_PATH: &str = "@parked";

/// The real path of a model timer.
pub fn timer_path(path: TimerPath) -> &'static str {
    match path {
        TimerPath::Parked => PARKED_PATH,
        TimerPath::Waiting => TIMER_PATH,
    }
}

/// The real id of each model execution.
pub fn real_id(exe: usize) -> &'static str {
    match exe {
        PARENT => "fan",
        TIMED => "timed",
        1 => "fan:Notifying:0:0",
        _ => "fan:Notifying:0:1",
    }
}

/// The model tick of an epoch time.
pub fn tick(at: f64) -> u8 {
    ((at - START) / TICK).round().clamp(0.0, 255.0) as u8
}

fn child_index(id: &str) -> Option<u8> {
    CHILD.iter().position(|c| real_id(*c) == id).map(|i| i as u8)
}

/// An event (by kind and data) addressed to `target`, as a model message.
fn event_msg(target: &str, kind: &str, data: &stm_core::Map) -> Option<Msg> {
    match kind {
        "Start" if target == real_id(PARENT) => Some(Msg::Start(PARENT)),
        "Start" if target == real_id(TIMED) => Some(Msg::Start(TIMED)),
        "Finished" => child_index(data.get("child_id")?.as_str()?).map(Msg::Finished),
        "Leave" => Some(Msg::Leave),
        "Back" => Some(Msg::Back),
        "Timeout" => {
            let fire = tick(data.get("fire_at")?.as_f64()?);
            match data.get("path")?.as_str()? {
                PARKED_PATH => Some(Msg::Recheck(fire)),
                _ => Some(Msg::Timeout(fire)),
            }
        }
        _ => None,
    }
}

/// A queued message as a model message.
pub fn queued_msg(message: &OutgoingMessage) -> Option<Msg> {
    let body: Value = serde_json::from_str(&message.body).ok()?;
    if message.spawn {
        return child_index(body.get("child_id")?.as_str()?).map(Msg::Spawn);
    }
    let data = body.get("data")?.as_object()?;
    event_msg(&message.group_id, body.get("kind")?.as_str()?, data)
}

/// What a message, row or parked event the model has no name for shows as: a `Timeout`
/// of tick 255, which no model state holds, so it always differs.
const UNKNOWN: Msg = Msg::Timeout(255);

/// An execution as the model keeps it.
#[derive(Debug, PartialEq, Eq)]
pub struct ItemView {
    pub version: u8,
    pub st: St,
    /// The processed marks.
    pub marks: u16,
    pub suspended: bool,
    pub cancelled: bool,
    pub parked: Vec<Msg>,
}

/// What the model keeps of the real system.
#[derive(Debug, PartialEq, Eq)]
pub struct View {
    pub items: Vec<ItemView>,
    pub rows: Vec<Msg>,
    pub timer: Option<u8>,
    pub recheck: Option<u8>,
    /// Some timer is held out of the due index.
    pub held: bool,
    pub queue: Vec<Msg>,
}

impl View {
    /// The model state's view.
    pub fn of_model(state: &State) -> View {
        View {
            items: state
                .items
                .iter()
                .map(|item| ItemView {
                    version: item.version,
                    st: item.st,
                    marks: item.processed,
                    suspended: item.suspended,
                    cancelled: item.cancelled,
                    parked: item.parked.as_slice().to_vec(),
                })
                .collect(),
            rows: state.rows.iter().map(|r| r.msg).collect(),
            timer: state.timer,
            recheck: state.recheck,
            held: state.held && (state.timer.is_some() || state.recheck.is_some()),
            queue: state.queue.iter().map(|q| q.msg).collect(),
        }
    }

    /// The real system's view (what the model has no name for shows as `UNKNOWN`).
    pub async fn of_real(store: &MemoryStore, queue: &MemoryQueue) -> View {
        let mut items = Vec::with_capacity(EXECUTIONS);
        for exe in 0..EXECUTIONS {
            let id = real_id(exe);
            let loaded = store.load(id).await.ok().flatten();
            let trace = store.read_trace(id).await.unwrap_or_default();
            let parked = match &loaded {
                Some(loaded) => stm_store::waiting_on(store, loaded, usize::MAX)
                    .await
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            items.push(item_view(exe, loaded.as_ref(), &trace, &parked));
        }
        let mut rows: Vec<(i64, Msg)> = Vec::new();
        for spawn in store.pending_spawns().await.unwrap_or_default() {
            rows.push((
                spawn.seq,
                child_index(&spawn.child_id).map_or(UNKNOWN, Msg::Spawn),
            ));
        }
        for entry in store.pending_outbox().await.unwrap_or_default() {
            let target = entry.target_id.as_deref().unwrap_or("");
            // a status event's row, as the relay tells it (`status::is_notice`)
            let msg = if entry.target_id.is_none() && entry.event.kind == stm_runtime::status::NOTICE_KIND {
                Msg::Notice
            } else {
                event_msg(target, &entry.event.kind, &entry.event.data).unwrap_or(UNKNOWN)
            };
            rows.push((entry.seq, msg));
        }
        rows.sort_by_key(|(seq, _)| *seq);
        let mut armed = [None, None];
        for (at, path) in armed.iter_mut().zip([TIMER_PATH, PARKED_PATH]) {
            *at = store
                .armed_timer(real_id(TIMED), path)
                .await
                .ok()
                .flatten()
                .map(tick);
        }
        let held = store
            .timers_of(real_id(TIMED))
            .await
            .unwrap_or_default()
            .iter()
            .any(|t| t.held);
        View {
            items,
            rows: rows.into_iter().map(|(_, m)| m).collect(),
            timer: armed[0],
            recheck: armed[1],
            held,
            queue: queue
                .snapshot()
                .iter()
                .map(|m| queued_msg(m).unwrap_or(UNKNOWN))
                .collect(),
        }
    }
}

/// An execution as the model keeps it: the marks from its trace (one step per committed
/// event), the state from its status and active state, its parked events.
fn item_view(
    exe: usize,
    loaded: Option<&Execution>,
    trace: &[stm_core::Map],
    parked: &[stm_core::Event],
) -> ItemView {
    let Some(loaded) = loaded else {
        return ItemView {
            version: 0,
            st: St::Absent,
            marks: 0,
            suspended: false,
            cancelled: false,
            parked: Vec::new(),
        };
    };
    let id = real_id(exe);
    let mut marks = 0u16;
    let mut entered_waiting = None;
    for step in trace {
        let kind = step.get("event_kind").and_then(Value::as_str).unwrap_or("");
        let empty = stm_core::Map::new();
        let data = step
            .get("event_data")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        // a child's creation is its Start step, and marks nothing
        if !(kind == "Start" && CHILD.contains(&exe)) {
            if let Some(msg) = event_msg(id, kind, data) {
                marks |= msg.mark();
            }
        }
        if step.get("to_path").and_then(Value::as_str) == Some(TIMER_PATH) {
            entered_waiting = step.get("timestamp").and_then(Value::as_f64);
        }
    }
    let path = loaded.active_path.as_deref().unwrap_or("");
    let st = match (loaded.status, exe) {
        (Status::Pending, _) => St::Pending,
        (Status::Running, PARENT) => {
            let seen = (0..2u8)
                .filter(|i| marks & Msg::Finished(*i).mark() != 0)
                .fold(0u8, |bits, i| bits | (1 << i));
            St::Notifying(seen)
        }
        (Status::Done, PARENT) => St::AllSent,
        (Status::Done, TIMED) => St::Expired,
        (Status::Done, _) => St::ChildDone,
        (Status::Running | Status::Suspended | Status::Cancelled, TIMED) if path == TIMER_PATH => {
            St::Waiting(entered_waiting.map_or(255, tick) + 1)
        }
        (Status::Running | Status::Suspended | Status::Cancelled, TIMED) if path == "Away" => St::Away,
        // cancelled before its Start ran: no state entered
        (Status::Cancelled, TIMED) if path.is_empty() => St::Pending,
        _ => St::Absent,
    };
    ItemView {
        version: loaded.version.clamp(0, 255) as u8,
        st,
        marks,
        suspended: loaded.status == Status::Suspended,
        cancelled: loaded.status == Status::Cancelled,
        parked: parked
            .iter()
            .map(|e| event_msg(id, &e.kind, &e.data).unwrap_or(UNKNOWN))
            .collect(),
    }
}
