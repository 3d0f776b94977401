//! What each actor does at its next call: the worker, the relay, the sweeper, and the
//! environment (crashes, visibility timeouts, the index, the deduplication window, time).
//! Each function is one store or queue call of the real code, named in its comment.

use crate::machines::{self, Claim};
use crate::model::{receivable, Action, Mutant, Protocol};
use crate::state::{
    row_dedup, Item, Msg, Prepared, Queued, Rec, Relay, Row, RowSet, St, State, Sweeper, TimerOp, Worker,
    TIMED,
};

/// The actions enabled in `state`, in a fixed order.
pub fn enabled(model: &Protocol, state: &State, actions: &mut Vec<Action>) {
    // a receive takes the first receivable message, as `MemoryQueue` hands them out (the
    // other groups' messages wait for the other worker or the next receive)
    if let Some(w) = state.workers.iter().position(|w| *w == Worker::Idle) {
        if let Some(index) = (0..state.queue.len()).find(|i| receivable(state, *i)) {
            actions.push(Action::Receive(w, index));
        }
    }
    for (w, worker) in state.workers.iter().enumerate() {
        if *worker != Worker::Idle {
            actions.push(Action::Work(w));
            if state.budget.crashes > 0 {
                actions.push(Action::CrashWorker(w));
            }
        }
    }
    match state.relay {
        // a pass that reads nothing changes nothing
        Relay::Idle if state.rows.is_empty() => {}
        Relay::Idle => actions.push(Action::Relay),
        _ => {
            actions.push(Action::Relay);
            if state.budget.crashes > 0 {
                actions.push(Action::CrashRelay);
            }
        }
    }
    match state.sweeper {
        Sweeper::Idle if state.index.is_none_or(|f| f > state.now) => {}
        Sweeper::Idle => actions.push(Action::Sweep),
        _ => {
            actions.push(Action::Sweep);
            if state.budget.crashes > 0 {
                actions.push(Action::CrashSweeper);
            }
        }
    }
    for (index, m) in state.queue.iter().enumerate() {
        if m.in_flight && (!held(state, m) || state.budget.leases > 0) {
            actions.push(Action::Expire(index));
        }
    }
    if state.index != state.timer {
        actions.push(Action::IndexCatchUp);
    }
    if state.budget.windows > 0 && state.recent != 0 {
        actions.push(Action::WindowPasses);
    }
    if state.now < model.bounds.horizon {
        actions.push(Action::Tick);
    }
}

/// A live worker holds this message under its current receipt.
fn held(state: &State, m: &Queued) -> bool {
    state
        .workers
        .iter()
        .filter_map(record_of)
        .any(|r| r.msg == m.msg && r.dedup == m.dedup && r.receipt == m.receipt)
}

fn record_of(worker: &Worker) -> Option<Rec> {
    match *worker {
        Worker::Idle => None,
        Worker::Received(r)
        | Worker::Claim(r, ..)
        | Worker::Commit(r, _)
        | Worker::Mark(r, _)
        | Worker::Pending(r)
        | Worker::Publish(r, _)
        | Worker::Ack(r, _)
        | Worker::Release(r)
        | Worker::Done(r, _) => Some(r),
    }
}

/// Apply `action`; `false` if it changed nothing.
pub fn apply(model: &Protocol, s: &mut State, action: Action) -> bool {
    match action {
        Action::Receive(w, index) => {
            let m = &mut s.queue[index];
            m.receipt += 1;
            m.in_flight = true;
            s.workers[w] = Worker::Received(Rec {
                msg: m.msg,
                dedup: m.dedup,
                receipt: m.receipt,
            });
        }
        Action::Work(w) => s.workers[w] = work(model, s, s.workers[w]),
        Action::Relay => s.relay = relay(model, s),
        Action::Sweep => s.sweeper = sweep(model, s),
        Action::CrashWorker(w) => {
            s.workers[w] = Worker::Idle;
            s.budget.crashes -= 1;
        }
        Action::CrashRelay => {
            s.relay = Relay::Idle;
            s.budget.crashes -= 1;
        }
        Action::CrashSweeper => {
            s.sweeper = Sweeper::Idle;
            s.budget.crashes -= 1;
        }
        Action::Expire(index) => {
            if held(s, &s.queue[index]) {
                s.budget.leases -= 1;
            }
            s.queue[index].in_flight = false;
        }
        Action::IndexCatchUp => s.index = s.timer,
        Action::WindowPasses => {
            s.recent = 0;
            s.budget.windows -= 1;
        }
        Action::Tick => s.now += 1,
    }
    true
}

/// SQS `SendMessage(Batch)`: a deduplication id seen within the window is dropped.
fn publish(s: &mut State, msg: Msg, dedup: u8) {
    if s.recent & (1 << dedup) != 0 {
        return;
    }
    s.recent |= 1 << dedup;
    s.queue.push(Queued {
        msg,
        dedup,
        receipt: 0,
        in_flight: false,
    });
}

fn publish_rows(s: &mut State, rows: &RowSet) {
    for row in rows.as_slice() {
        publish(s, row.msg, row_dedup(row.seq));
    }
}

/// `ack_rows`: delete these rows (acking one again is harmless).
fn ack_rows(s: &mut State, rows: &RowSet) {
    s.rows.retain(|r| !rows.as_slice().iter().any(|a| a.seq == r.seq));
}

/// The rows of these seqs (bits) still pending, in seq order.
fn pending_of(s: &State, seqs: u16) -> RowSet {
    let rows: Vec<Row> = s
        .rows
        .iter()
        .filter(|r| seqs & (1 << r.seq) != 0)
        .copied()
        .collect();
    RowSet::new(&rows)
}

/// The worker's next call.
fn work(model: &Protocol, s: &mut State, worker: Worker) -> Worker {
    match worker {
        Worker::Idle => Worker::Idle,
        Worker::Received(rec) => load(model, s, rec),
        // `claim_timer`: delete it if armed with this fire_at, else say what is armed
        Worker::Claim(rec, version, st) => {
            let Msg::Timeout(f) = rec.msg else {
                return Worker::Done(rec, true);
            };
            let claim = match s.timer {
                Some(armed) if armed == f => {
                    s.timer = None;
                    Claim::Claimed
                }
                Some(_) => Claim::Rearmed,
                None => Claim::Absent,
            };
            let item = Item {
                version,
                st,
                ..s.items[TIMED]
            };
            Worker::Commit(
                rec,
                machines::prepare(item, rec.msg, s.now, model.bounds.children, claim),
            )
        }
        Worker::Commit(rec, step) => commit(model, s, rec, step),
        Worker::Mark(rec, rows) => {
            let target = rec.msg.group();
            s.items[target].processed |= rec.msg.mark();
            flush_or_done(rec, rows)
        }
        // `pending_rows_of`: the rows of the target's last commit still pending
        Worker::Pending(rec) => {
            let rows = pending_of(s, s.items[rec.msg.group()].last_rows);
            flush_or_done(rec, rows)
        }
        Worker::Publish(rec, rows) => {
            publish_rows(s, &rows);
            Worker::Ack(rec, rows)
        }
        Worker::Ack(rec, rows) => {
            ack_rows(s, &rows);
            Worker::Done(rec, true)
        }
        // `change_visibility(receipt, 0)`: a stale receipt changes nothing
        Worker::Release(rec) => {
            if let Some(m) = find(s, rec) {
                m.in_flight = false;
            }
            Worker::Done(rec, false)
        }
        // the event source's `DeleteMessage` of a record not reported failed
        Worker::Done(rec, ok) => {
            if ok {
                if let Some(index) = s
                    .queue
                    .iter()
                    .position(|m| m.msg == rec.msg && m.dedup == rec.dedup && m.receipt == rec.receipt)
                {
                    s.queue.remove(index);
                }
            }
            Worker::Idle
        }
    }
}

fn flush_or_done(rec: Rec, rows: RowSet) -> Worker {
    if rows.len == 0 {
        Worker::Done(rec, true)
    } else {
        Worker::Publish(rec, rows)
    }
}

/// The queued message this record's receipt still names.
fn find(s: &mut State, rec: Rec) -> Option<&mut Queued> {
    s.queue
        .iter_mut()
        .find(|m| m.msg == rec.msg && m.dedup == rec.dedup && m.receipt == rec.receipt)
}

/// `load_for_event` (an event) or the child's `load` (a spawn intent), and what the
/// worker decides from it: a no-op, a duplicate's flush, a claim, or a prepared step.
fn load(model: &Protocol, s: &State, rec: Rec) -> Worker {
    let target = rec.msg.group();
    let item = s.items[target];
    let children = model.bounds.children;
    if let Msg::Spawn(_) = rec.msg {
        if item.st != St::Absent {
            // applied already: publish what its creation left pending
            return Worker::Pending(rec);
        }
        return Worker::Commit(
            rec,
            machines::prepare(item, rec.msg, s.now, children, Claim::None),
        );
    }
    if item.st == St::Absent {
        return Worker::Done(rec, true);
    }
    if item.processed & rec.msg.mark() != 0 {
        return Worker::Pending(rec);
    }
    if item.st == St::Pending && !matches!(rec.msg, Msg::Start(_)) {
        // the lifecycle gate drains it (a PENDING execution takes only its Start)
        return Worker::Done(rec, true);
    }
    if matches!(rec.msg, Msg::Timeout(_)) && machines::running(item.st) {
        return Worker::Claim(rec, item.version, item.st);
    }
    Worker::Commit(
        rec,
        machines::prepare(item, rec.msg, s.now, children, Claim::None),
    )
}

/// The commit: the item (CAS on the version loaded), its rows, its mark, its timer op,
/// in one transaction.
fn commit(model: &Protocol, s: &mut State, rec: Rec, step: Prepared) -> Worker {
    let target = rec.msg.group();
    let item = s.items[target];
    let creating = matches!(rec.msg, Msg::Spawn(_));
    let holds = if creating {
        item.st == St::Absent
    } else {
        item.version == step.expect
    };
    if !holds && model.mutant != Some(Mutant::NoVersionCheck) {
        // a lost CAS: a child another worker created means done (its rows may be pending)
        return if creating {
            Worker::Pending(rec)
        } else {
            Worker::Release(rec)
        };
    }
    let mut written = Vec::new();
    for i in 0..model.bounds.children {
        if step.spawns & (1 << i) != 0 {
            written.push(Msg::Spawn(i));
        }
    }
    written.extend(step.emit);
    let mut rows = Vec::new();
    for msg in written {
        let row = Row { seq: s.next_seq, msg };
        s.next_seq += 1;
        s.rows.push(row);
        rows.push(row);
        match msg {
            Msg::Spawn(i) => s.ghost.spawned |= 1 << i,
            other => s.ghost.emitted[other.group()] |= other.mark(),
        }
    }
    let seqs = rows.iter().fold(0u16, |bits, r| bits | (1 << r.seq));
    let before = item.st;
    let marked = model.mutant != Some(Mutant::MarkOutsideCommit);
    let item = &mut s.items[target];
    item.version = if creating { 1 } else { item.version + 1 };
    item.st = step.st;
    if marked {
        item.processed |= rec.msg.mark();
    }
    if seqs != 0 {
        item.last_rows = seqs;
    }
    match step.timer {
        TimerOp::Keep => {}
        TimerOp::Arm(f) => s.timer = Some(f),
        TimerOp::Cancel => s.timer = None,
    }
    observe(s, rec.msg, &step, before);
    let rows = RowSet::new(&rows);
    if !marked {
        return Worker::Mark(rec, rows);
    }
    flush_or_done(rec, rows)
}

/// The ghosts' view of a commit: what was applied, in which order, how often.
fn observe(s: &mut State, msg: Msg, step: &Prepared, before: St) {
    let g = &mut s.ghost;
    match msg {
        Msg::Spawn(i) => g.created[i as usize] += 1,
        _ => {
            let target = msg.group();
            if g.applied[target] & msg.mark() != 0 {
                g.applied_twice = true;
            }
            if machines::predecessor(msg).is_some_and(|before| g.applied[target] & before.mark() == 0) {
                g.out_of_order = true;
            }
            g.applied[target] |= msg.mark();
        }
    }
    if step.joins {
        g.joins += 1;
    }
    // the visit a Timeout times out must be due: armed for this tick or an earlier one
    if let (true, St::Waiting(due)) = (step.times_out, before) {
        if due > s.now {
            g.early_timeout = true;
        }
    }
}

/// The relay's next call: read the pending rows (`oldest_pending_seqs`, `pending_rows`),
/// publish them, ack them. The mutant acks before it publishes.
fn relay(model: &Protocol, s: &mut State) -> Relay {
    let ack_first = model.mutant == Some(Mutant::RelayAckBeforeSend);
    match s.relay {
        Relay::Idle => {
            let rows = RowSet::new(&s.rows);
            if ack_first {
                Relay::Ack(rows)
            } else {
                Relay::Publish(rows)
            }
        }
        Relay::Publish(rows) => {
            publish_rows(s, &rows);
            if ack_first {
                Relay::Idle
            } else {
                Relay::Ack(rows)
            }
        }
        Relay::Ack(rows) => {
            ack_rows(s, &rows);
            if ack_first {
                Relay::Publish(rows)
            } else {
                Relay::Idle
            }
        }
    }
}

/// The sweeper's next call: `due_timers` (the lagging index), `armed_timer` (the
/// consistent re-read, with the execution's load), `publish_batch`, `delete_timer`
/// (guarded by `fire_at`).
fn sweep(model: &Protocol, s: &mut State) -> Sweeper {
    match s.sweeper {
        Sweeper::Idle => match s.index {
            Some(f) if f <= s.now => {
                if model.mutant == Some(Mutant::StaleIndexUnchecked) {
                    if s.timer != Some(f) {
                        s.ghost.unconfirmed_fire = true;
                    }
                    Sweeper::Confirmed(f)
                } else {
                    Sweeper::Listed(f)
                }
            }
            _ => Sweeper::Idle,
        },
        Sweeper::Listed(f) => {
            if s.timer == Some(f) && s.items[TIMED].st != St::Absent {
                Sweeper::Confirmed(f)
            } else {
                Sweeper::Idle
            }
        }
        Sweeper::Confirmed(f) => {
            let m = Msg::Timeout(f);
            publish(s, m, m.natural_dedup());
            Sweeper::Delete(f)
        }
        Sweeper::Delete(f) => {
            if s.timer == Some(f) || model.mutant == Some(Mutant::SweeperNoFireAtGuard) {
                s.timer = None;
            }
            Sweeper::Idle
        }
    }
}
