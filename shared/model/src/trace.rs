//! A path of the model as a trace a person can read: one line per step, saying who did
//! what and what changed in the store and the queue.

use std::fmt::Write as _;

use crate::model::Action;
use crate::state::{Msg, Operator, Relay, St, State, Worker, PARENT, TIMED};

/// The execution's name in a trace (the ids the replay gives them).
pub fn exe_name(exe: usize) -> &'static str {
    match exe {
        PARENT => "fan",
        TIMED => "timed",
        1 => "fan:0",
        _ => "fan:1",
    }
}

pub fn msg_name(msg: Msg) -> String {
    match msg {
        Msg::Start(e) => format!("Start→{}", exe_name(e)),
        Msg::Spawn(i) => format!("spawn fan:{i}"),
        Msg::Finished(i) => format!("Finished(fan:{i})→fan"),
        Msg::Leave => "Leave→timed".into(),
        Msg::Back => "Back→timed".into(),
        Msg::Timeout(f) => format!("Timeout@{f}→timed"),
        Msg::Recheck(f) => format!("Timeout(@parked)@{f}→timed"),
        Msg::Notice => "status event of timed".into(),
        Msg::Report(k) => format!("report {k} of timed→observer"),
    }
}

fn st_name(st: St) -> String {
    match st {
        St::Absent => "-".into(),
        St::Pending => "PENDING".into(),
        St::Notifying(seen) => format!("Notifying(seen {seen:02b})"),
        St::AllSent => "AllSent".into(),
        St::ChildDone => "Sent".into(),
        St::Waiting(f) => format!("Waiting(timer @{f})"),
        St::Away => "Away".into(),
        St::Expired => "Expired".into(),
    }
}

/// What an action is, in words, given the state it is taken in.
pub fn describe(state: &State, action: Action) -> String {
    match action {
        Action::Receive(w, i) => format!("worker {w} receives {}", msg_name(state.queue[i].msg)),
        Action::Work(w) => {
            let call = match state.workers[w] {
                Worker::Idle => "nothing",
                Worker::Received(_) => "loads its target",
                Worker::Claim(..) => "claims the timer",
                Worker::Flush(..) => "reads the last block's pending rows before the release",
                Worker::Park(_, _, false) => "parks the event on the suspended execution's item",
                Worker::Park(_, _, true) => "parks the event last among those it releases",
                Worker::Commit(..) => "commits",
                Worker::Mark(..) => "writes the processed mark",
                Worker::Pending(_) => "reads its target's pending rows",
                Worker::Publish(..) => "publishes rows",
                Worker::Ack(..) => "acks rows",
                Worker::Release(_) => "releases the record (visibility 0)",
                Worker::Done(_, true) => "returns; the event source deletes the message",
                Worker::Done(_, false) => "returns; the record was reported failed",
            };
            format!("worker {w} {call}")
        }
        Action::RefuseWorker(w, i) => format!("worker {w} publishes rows; SQS REFUSES entry {i}"),
        Action::RefuseRelay => match state.relay {
            Relay::Put(row, ..) => format!("relay: puts #{} on the status bus; the bus REFUSES it", row.seq),
            _ => "relay: publishes its row; SQS REFUSES it".into(),
        },
        Action::RefuseOperator(i) => format!("operator publishes the last block; SQS REFUSES entry {i}"),
        Action::Relay => match state.relay {
            Relay::Idle => "relay: reads the pending seqs".into(),
            Relay::Publish(row, ..) => format!("relay: publishes #{}", row.seq),
            Relay::Ack(row, ..) | Relay::Drop(row, ..) => format!("relay: acks #{}", row.seq),
            Relay::Put(row, ..) => format!("relay: puts #{} on the status bus", row.seq),
        },
        Action::Sweep => "sweeper: next call".into(),
        Action::Operate => match state.operator {
            Operator::Ready(command) => format!("operator: {command:?} loads timed"),
            Operator::Pending(command, ..) => {
                format!("operator: {command:?} reads the last block's pending rows")
            }
            Operator::Publish(command, ..) => format!("operator: {command:?} publishes the last block"),
            Operator::Ack(command, ..) => format!("operator: {command:?} acks the last block"),
            Operator::Commit(command, ..) => format!("operator: {command:?} commits the status"),
            Operator::Finished => "operator: nothing".into(),
        },
        Action::CrashOperator => "operator's command CRASHES (to be run again)".into(),
        Action::CrashWorker(w) => format!("worker {w} CRASHES"),
        Action::CrashRelay => "relay CRASHES".into(),
        Action::CrashSweeper => "sweeper CRASHES".into(),
        Action::Expire(i) => format!("visibility timeout of {} runs out", msg_name(state.queue[i].msg)),
        Action::IndexCatchUp => "the due index catches up".into(),
        Action::WindowPasses => "SQS's deduplication window passes".into(),
        Action::Tick => format!("clock → {}", state.now + 1),
    }
}

/// The parts of a state a trace shows after each step.
pub fn summary(state: &State) -> String {
    let mut out = String::new();
    let items: Vec<String> = state
        .items
        .iter()
        .enumerate()
        .filter(|(_, item)| item.st != St::Absent)
        .map(|(e, item)| {
            let mut text = format!("{} v{} {}", exe_name(e), item.version, st_name(item.st));
            if item.suspended {
                text.push_str(" SUSPENDED");
            }
            if item.cancelled {
                text.push_str(" CANCELLED");
            }
            if item.parked.len > 0 {
                let parked: Vec<String> = item.parked.as_slice().iter().map(|m| msg_name(*m)).collect();
                let _ = write!(text, " parked [{}]", parked.join(", "));
            }
            text
        })
        .collect();
    let _ = write!(out, "store: {}", items.join(", "));
    if !state.rows.is_empty() {
        let rows: Vec<String> = state
            .rows
            .iter()
            .map(|r| format!("#{} {}", r.seq, msg_name(r.msg)))
            .collect();
        let _ = write!(out, "; rows: {}", rows.join(", "));
    }
    let tick = |t: Option<u8>| t.map_or("-".to_string(), |f| format!("@{f}"));
    let _ = write!(
        out,
        "; timer: {}; index: {}",
        tick(state.timer),
        tick(state.index)
    );
    if state.recheck.is_some() || state.recheck_index.is_some() {
        let _ = write!(
            out,
            "; @parked: {}; index: {}",
            tick(state.recheck),
            tick(state.recheck_index)
        );
    }
    let queue: Vec<String> = state
        .queue
        .iter()
        .map(|q| {
            let flight = if q.in_flight { " (in flight)" } else { "" };
            format!("{}{flight}", msg_name(q.msg))
        })
        .collect();
    let _ = write!(out, "; queue: [{}]", queue.join(", "));
    if state.ghost.delivered != 0 {
        let _ = write!(out, "; observer got reports {:03b}", state.ghost.delivered);
    }
    out
}

/// A counterexample as numbered steps, each followed by the state it leaves.
pub fn render(path: &stateright::Path<State, Action>) -> String {
    let mut out = String::new();
    let steps = path.clone().into_vec();
    if let Some((first, _)) = steps.first() {
        let _ = writeln!(out, "    initial  {}", summary(first));
    }
    for (n, pair) in steps.windows(2).enumerate() {
        let (before, action) = &pair[0];
        let (after, _) = &pair[1];
        if let Some(action) = action {
            let _ = writeln!(out, "{:>3}. {}", n + 1, describe(before, *action));
            let _ = writeln!(out, "         {}", summary(after));
        }
    }
    out
}
