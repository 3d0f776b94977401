//! What each actor does at its next call: the worker, the relay, the sweeper, and the
//! environment (crashes, visibility timeouts, the index, the deduplication window, time).
//! Each function is one store or queue call of the real code, named in its comment.

mod operator;

use crate::machines::{self, Claim};
use crate::model::{cas_holds, receivable, Action, Mutant, Protocol};
use crate::state::{
    row_dedup, Claiming, Due, Item, Msg, Operator, Prepared, Queued, Rec, Relay, Row, RowSet, St, State,
    Sweeper, TimerOp, TimerPath, Worker, TIMED,
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
        Sweeper::Idle if listed(state).is_none() => {}
        Sweeper::Idle => actions.push(Action::Sweep),
        _ => {
            actions.push(Action::Sweep);
            if state.budget.crashes > 0 {
                actions.push(Action::CrashSweeper);
            }
        }
    }
    match state.operator {
        Operator::Finished => {}
        Operator::Ready(_) => actions.push(Action::Operate),
        Operator::Commit(..) => {
            actions.push(Action::Operate);
            if state.budget.crashes > 0 {
                actions.push(Action::CrashOperator);
            }
        }
    }
    for (index, m) in state.queue.iter().enumerate() {
        if m.in_flight && (!held(state, m) || state.budget.leases > 0) {
            actions.push(Action::Expire(index));
        }
    }
    if state.index != state.timer || state.recheck_index != state.recheck {
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
        | Worker::Claim(r, _)
        | Worker::Park(r, _)
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
        Action::Operate => s.operator = operator::operate(model, s),
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
        Action::CrashOperator => {
            s.operator = operator::crashed(s.operator);
            s.budget.crashes -= 1;
        }
        Action::Expire(index) => {
            if held(s, &s.queue[index]) {
                s.budget.leases -= 1;
            }
            s.queue[index].in_flight = false;
        }
        Action::IndexCatchUp => {
            s.index = s.timer;
            s.recheck_index = s.recheck;
        }
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
        Worker::Claim(rec, claiming) => {
            let Msg::Timeout(f) = claiming.applies else {
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
                version: claiming.version,
                st: claiming.st,
                ..s.items[TIMED]
            };
            let step = machines::prepare(item, claiming.applies, s.now, model.bounds.children, claim);
            Worker::Commit(
                rec,
                Prepared {
                    releases: claiming.releases,
                    ..step
                },
            )
        }
        // the commit (CAS) that keeps the event on the suspended item, its mark left for
        // when it steps
        Worker::Park(rec, expect) => {
            let item = &mut s.items[rec.msg.group()];
            if !cas_holds(model, item, expect) {
                return Worker::Release(rec);
            }
            item.parked.push(rec.msg);
            item.version += 1;
            Worker::Done(rec, true)
        }
        Worker::Commit(rec, step) => commit(model, s, rec, step),
        Worker::Mark(rec, rows) => {
            let target = rec.msg.group();
            s.items[target].processed |= rec.msg.mark();
            flush_or_done(rec, rows)
        }
        // `pending_rows_of`: the rows of the target's last commit still pending (a notice
        // among them is left for the relay: the worker has no status bus)
        Worker::Pending(rec) => {
            let rows = pending_of(s, s.items[rec.msg.group()].last_rows);
            flush_or_done(rec, rows.notices(false))
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
    if item.suspended && model.mutant != Some(Mutant::ApplyWhileSuspended) {
        // the lifecycle gate: kept on the item until `resume` (a recheck, or an event kept
        // already, changes nothing)
        let keep = !matches!(rec.msg, Msg::Recheck(_))
            && !item.parked.contains(rec.msg)
            && model.mutant != Some(Mutant::DrainWhileSuspended);
        return if keep {
            Worker::Park(rec, item.version)
        } else {
            Worker::Done(rec, true)
        };
    }
    if item.st == St::Pending && !matches!(rec.msg, Msg::Start(_)) {
        // the lifecycle gate drains it (a PENDING execution takes only its Start)
        return Worker::Done(rec, true);
    }
    next_step(model, s, rec, item)
}

/// The driver's parking gate, then the step: the item's parked events first, oldest
/// first, each claimed (a `Timeout` of a running execution) and committed on its own;
/// then the record's event, unless it is the recheck or was among those released.
/// `item` is the execution as the worker holds it (loaded, or as its last commit wrote it).
fn next_step(model: &Protocol, s: &State, rec: Rec, item: Item) -> Worker {
    let (applies, releases) = match item.parked.first() {
        Some(oldest) => (oldest, true),
        None if matches!(rec.msg, Msg::Recheck(_)) || item.processed & rec.msg.mark() != 0 => {
            return Worker::Done(rec, true);
        }
        None => (rec.msg, false),
    };
    if matches!(applies, Msg::Timeout(_)) && machines::running(&item) {
        return Worker::Claim(
            rec,
            Claiming {
                version: item.version,
                st: item.st,
                applies,
                releases,
            },
        );
    }
    let step = machines::prepare(item, applies, s.now, model.bounds.children, Claim::None);
    Worker::Commit(rec, Prepared { releases, ..step })
}

/// The commit: the item (CAS on the version loaded), its rows, its mark, its timer op,
/// in one transaction.
fn commit(model: &Protocol, s: &mut State, rec: Rec, step: Prepared) -> Worker {
    let target = rec.msg.group();
    let item = s.items[target];
    let creating = matches!(rec.msg, Msg::Spawn(_));
    let holds = if creating {
        item.st == St::Absent || model.mutant == Some(Mutant::NoVersionCheck)
    } else {
        cas_holds(model, &item, step.expect)
    };
    if !holds {
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
    let before = item;
    let marked = model.mutant != Some(Mutant::MarkOutsideCommit) || step.releases;
    let item = &mut s.items[target];
    item.version = if creating { 1 } else { item.version + 1 };
    item.st = step.st;
    if marked {
        item.processed |= step.applies.mark();
    }
    if step.releases {
        item.parked.pop_front();
    }
    if seqs != 0 {
        item.last_rows = seqs;
    }
    match step.timer {
        TimerOp::Keep => {}
        TimerOp::Arm(f) => s.timer = Some(f),
        TimerOp::Cancel => s.timer = None,
    }
    observe(s, &step, before);
    if step.releases {
        // the parking gate goes on with what is left (the timed execution emits nothing,
        // so a release has no rows to flush)
        return next_step(model, s, rec, s.items[target]);
    }
    let rows = RowSet::new(&rows);
    if !marked {
        return Worker::Mark(rec, rows);
    }
    flush_or_done(rec, rows)
}

/// The ghosts' view of a commit on `before`: what was applied, in which order, how often.
fn observe(s: &mut State, step: &Prepared, before: Item) {
    let msg = step.applies;
    let g = &mut s.ghost;
    if before.suspended {
        g.applied_while_suspended = true;
    }
    g.released |= step.releases;
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
    if let (true, St::Waiting(due)) = (step.times_out, before.st) {
        if due > s.now {
            g.early_timeout = true;
        }
    }
}

/// The relay's next call: read the pending rows (`oldest_pending_seqs`, `pending_rows`),
/// publish those with a target, ack them, then ack the notices unsent (the relay has no
/// status bus). The mutant acks before it publishes.
fn relay(model: &Protocol, s: &mut State) -> Relay {
    let ack_first = model.mutant == Some(Mutant::RelayAckBeforeSend);
    // the notices' ack, if any, ends the pass
    let drop = |rows: RowSet| {
        let notices = rows.notices(true);
        if notices.len == 0 {
            Relay::Idle
        } else {
            Relay::Drop(notices)
        }
    };
    match s.relay {
        Relay::Idle => {
            let rows = RowSet::new(&s.rows);
            if rows.notices(false).len == 0 {
                drop(rows)
            } else if ack_first {
                Relay::Ack(rows)
            } else {
                Relay::Publish(rows)
            }
        }
        Relay::Publish(rows) => {
            publish_rows(s, &rows.notices(false));
            if ack_first {
                drop(rows)
            } else {
                Relay::Ack(rows)
            }
        }
        Relay::Ack(rows) => {
            ack_rows(s, &rows.notices(false));
            if ack_first {
                Relay::Publish(rows)
            } else {
                drop(rows)
            }
        }
        Relay::Drop(notices) => {
            ack_rows(s, &notices);
            Relay::Idle
        }
    }
}

/// What the due index lists as due now, in its order (`fire_at`, then path).
fn listed(s: &State) -> Option<(Due, Option<Due>)> {
    let mut due: Vec<Due> = [
        (s.recheck_index, TimerPath::Parked),
        (s.index, TimerPath::Waiting),
    ]
    .into_iter()
    .filter_map(|(fire, path)| fire.filter(|f| *f <= s.now).map(|fire| Due { fire, path }))
    .collect();
    due.sort();
    let first = *due.first()?;
    Some((first, due.get(1).copied()))
}

/// The sweeper's next call: `due_timers` (the lagging index), then for each timer listed,
/// in order: `armed_timer` (the consistent re-read; the execution's load beside it is
/// answered as the sweeper reaches the timer, and a suspended execution's timer is kept
/// armed), `publish_batch`, `delete_timer` (guarded by `fire_at`).
fn sweep(model: &Protocol, s: &mut State) -> Sweeper {
    let unchecked = model.mutant == Some(Mutant::StaleIndexUnchecked);
    // the next listed timer, re-read (or, the mutant, taken as listed)
    let take = |s: &mut State, due: Due, rest: Option<Due>| {
        if unchecked {
            if s.armed(due.path) != Some(due.fire) {
                s.ghost.unconfirmed_fire = true;
            }
            Sweeper::Confirmed(due, rest)
        } else {
            let item = s.items[TIMED];
            Sweeper::Listed(due, rest, item.st == St::Absent || item.suspended)
        }
    };
    let then = |s: &mut State, rest: Option<Due>| match rest {
        Some(due) => take(s, due, None),
        None => Sweeper::Idle,
    };
    match s.sweeper {
        Sweeper::Idle => match listed(s) {
            Some((due, rest)) => take(s, due, rest),
            None => Sweeper::Idle,
        },
        Sweeper::Listed(due, rest, kept) => {
            if s.armed(due.path) == Some(due.fire) && !kept {
                Sweeper::Confirmed(due, rest)
            } else {
                // stale, orphaned (no such item here), or `TimerFate::KeepArmed`
                then(s, rest)
            }
        }
        Sweeper::Confirmed(due, rest) => {
            let m = due.msg();
            publish(s, m, m.natural_dedup());
            s.ghost.sent_timed |= m.mark();
            Sweeper::Delete(due, rest)
        }
        Sweeper::Delete(due, rest) => {
            let armed = s.armed_mut(due.path);
            if *armed == Some(due.fire) || model.mutant == Some(Mutant::SweeperNoFireAtGuard) {
                *armed = None;
            }
            then(s, rest)
        }
    }
}
