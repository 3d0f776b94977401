//! What each actor does at its next call: the worker, the relay, the sweeper, and the
//! environment (crashes, visibility timeouts, the index, the deduplication window, time).
//! Each function is one store or queue call of the real code, named in its comment.

mod operator;

use crate::machines::{self, Claim};
use crate::model::{cas_holds, receivable, Action, Mutant, Protocol};
use crate::state::{
    row_dedup, Claiming, Due, Item, Msg, Operator, Prepared, Queued, Rec, Relay, Row, RowSet, St, State,
    Sweeper, Then, TimerOp, TimerPath, Worker, OBSERVER, TIMED,
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
    let refusals = state.budget.refusals > 0;
    for (w, worker) in state.workers.iter().enumerate() {
        if *worker != Worker::Idle {
            actions.push(Action::Work(w));
            if state.budget.crashes > 0 {
                actions.push(Action::CrashWorker(w));
            }
        }
        if let (true, Worker::Publish(_, rows, _)) = (refusals, worker) {
            for i in (0..rows.len as usize).filter(|i| refusable(rows, *i)) {
                actions.push(Action::RefuseWorker(w, i));
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
            if refusals && matches!(state.relay, Relay::Publish(..) | Relay::Put(..)) {
                actions.push(Action::RefuseRelay);
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
        operator => {
            actions.push(Action::Operate);
            if state.budget.crashes > 0 {
                actions.push(Action::CrashOperator);
            }
            if let (true, Operator::Publish(_, rows, ..)) = (refusals, operator) {
                for i in (0..rows.len as usize).filter(|i| refusable(&rows, *i)) {
                    actions.push(Action::RefuseOperator(i));
                }
            }
        }
    }
    for (index, m) in state.queue.iter().enumerate() {
        if m.in_flight && (!held(state, m) || state.budget.leases > 0) {
            actions.push(Action::Expire(index));
        }
    }
    if (state.index, state.recheck_index) != state.indexed() {
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
        | Worker::Flush(r, _)
        | Worker::Park(r, ..)
        | Worker::Commit(r, _)
        | Worker::Mark(r, _)
        | Worker::Pending(r)
        | Worker::Publish(r, ..)
        | Worker::Ack(r, ..)
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
        Action::Work(w) => s.workers[w] = work(model, s, s.workers[w], None),
        Action::Relay => s.relay = relay(model, s, false),
        Action::Sweep => s.sweeper = sweep(model, s),
        Action::Operate => s.operator = operator::operate(model, s, None),
        Action::RefuseWorker(w, i) => {
            s.budget.refusals -= 1;
            s.workers[w] = work(model, s, s.workers[w], Some(i));
        }
        Action::RefuseRelay => {
            s.budget.refusals -= 1;
            s.relay = relay(model, s, true);
        }
        Action::RefuseOperator(i) => {
            s.budget.refusals -= 1;
            s.operator = operator::operate(model, s, Some(i));
        }
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
            (s.index, s.recheck_index) = s.indexed();
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

/// A row's entry of a batch publish: into the queue (a report: to the observer, which
/// takes its group in the order it enters), unless SQS saw its deduplication id. The
/// ghosts note it published, and whether a row its execution committed earlier to the
/// same target is still pending unpublished (then the target receives them out of
/// commit order).
fn publish_row(s: &mut State, row: Row) {
    let dedup = row_dedup(row.seq);
    if s.recent & (1 << dedup) != 0 {
        return;
    }
    let g = &mut s.ghost;
    if s.rows.iter().any(|q| {
        q.seq < row.seq
            && q.msg != Msg::Notice
            && q.msg.source() == row.msg.source()
            && q.msg.group() == row.msg.group()
            && g.published & (1 << q.seq) == 0
    }) {
        g.rows_reordered = true;
    }
    g.published |= 1 << row.seq;
    match row.msg {
        Msg::Report(k) => {
            s.recent |= 1 << dedup;
            if g.delivered & (1 << k) != 0 {
                g.delivered_twice = true;
            }
            g.delivered |= 1 << k;
        }
        msg => publish(s, msg, dedup),
    }
}

/// `publish_batch` of these rows, the entry at `refused` (if any) refused; the rows
/// published.
fn publish_rows(s: &mut State, rows: &RowSet, refused: Option<usize>) -> RowSet {
    let mut sent = Vec::new();
    for (i, row) in rows.as_slice().iter().enumerate() {
        if Some(i) != refused {
            publish_row(s, *row);
            sent.push(*row);
        }
    }
    RowSet::new(&sent)
}

/// The entry at `index` of a batch is one the model lets the queue refuse: no later entry
/// of the batch is of its group. (Whether SQS takes a group's later entry in the very
/// batch that refused an earlier one is left out: the code acks what SQS took.)
pub fn refusable(rows: &RowSet, index: usize) -> bool {
    let rows = rows.as_slice();
    rows.get(index)
        .is_some_and(|r| !rows[index + 1..].iter().any(|l| l.msg.group() == r.msg.group()))
}

/// `ack_rows`: delete these rows (acking one again is harmless).
fn ack_rows(s: &mut State, rows: &RowSet) {
    for row in rows.as_slice() {
        s.ghost.published &= !(1 << row.seq);
    }
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

/// `pending_rows_of`: the rows of the execution's last block still pending, but its
/// status events (the worker and the operator have no status bus: those wait for the
/// relay, and belong to no group).
pub(crate) fn last_block(s: &State, exe: usize) -> RowSet {
    pending_of(s, s.items[exe].last_rows).notices(false)
}

/// The worker's next call (`refused`: its publish has that entry refused).
fn work(model: &Protocol, s: &mut State, worker: Worker, refused: Option<usize>) -> Worker {
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
            let b = model.bounds;
            let step = machines::prepare(item, claiming.applies, s.now, b.children, b.emits, claim);
            Worker::Commit(
                rec,
                Prepared {
                    releases: claiming.releases,
                    held: claiming.held,
                    ..step
                },
            )
        }
        // before a release (or the recheck) commits anything: publish the rows of the
        // execution's last block, which a redelivery would otherwise be the only one to
        // republish (and a release's commit repoints it)
        Worker::Flush(rec, item) => {
            let rows = last_block(s, rec.msg.group());
            if rows.len == 0 {
                release(model, s, rec, item)
            } else {
                Worker::Publish(rec, rows, Then::Release(item))
            }
        }
        // the commit (CAS) that keeps the event on the item, its mark left for when it
        // steps: while suspended, or last among those a release steps
        Worker::Park(rec, expect, releasing) => {
            let item = &mut s.items[rec.msg.group()];
            if !cas_holds(model, item, expect) {
                return Worker::Release(rec);
            }
            // the first of a run commits the item (it sets `parked_after`); the others
            // write their row only, checking the version
            if item.parked.len == 0 {
                item.version += 1;
            }
            item.parked.push(rec.msg);
            if releasing {
                release(model, s, rec, s.items[rec.msg.group()])
            } else {
                Worker::Done(rec, true)
            }
        }
        Worker::Commit(rec, step) => commit(model, s, rec, step),
        Worker::Mark(rec, rows) => {
            let target = rec.msg.group();
            s.items[target].processed |= rec.msg.mark();
            flush_or_done(rec, rows)
        }
        // `pending_rows_of`: the rows of the target's last commit still pending
        Worker::Pending(rec) => {
            let rows = last_block(s, rec.msg.group());
            flush_or_done(rec, rows)
        }
        Worker::Publish(rec, rows, then) => {
            let sent = publish_rows(s, &rows, refused);
            let then = if refused.is_some() { Then::Fail } else { then };
            if sent.len == 0 {
                after_ack(model, s, rec, then)
            } else {
                Worker::Ack(rec, sent, then)
            }
        }
        Worker::Ack(rec, rows, then) => {
            ack_rows(s, &rows);
            after_ack(model, s, rec, then)
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

/// What the worker does once its published rows are acked.
fn after_ack(model: &Protocol, s: &State, rec: Rec, then: Then) -> Worker {
    match then {
        Then::Done => Worker::Done(rec, true),
        // a refused entry fails the record: it comes back, and its redelivery publishes
        // the last block before the group moves on
        Then::Fail => Worker::Release(rec),
        Then::Release(item) => release(model, s, rec, item),
    }
}

fn flush_or_done(rec: Rec, rows: RowSet) -> Worker {
    if rows.len == 0 {
        Worker::Done(rec, true)
    } else {
        Worker::Publish(rec, rows, Then::Done)
    }
}

/// The queued message this record's receipt still names.
fn find(s: &mut State, rec: Rec) -> Option<&mut Queued> {
    s.queue
        .iter_mut()
        .find(|m| m.msg == rec.msg && m.dedup == rec.dedup && m.receipt == rec.receipt)
}

/// `load_for_event` (an event) or the child's `load` (a spawn intent), and what the
/// worker decides from it: a no-op, a duplicate's flush, a park, a release, or a step.
fn load(model: &Protocol, s: &State, rec: Rec) -> Worker {
    let target = rec.msg.group();
    if target == OBSERVER {
        // never queued: the observer is outside the model
        return Worker::Done(rec, true);
    }
    let item = s.items[target];
    let b = model.bounds;
    if let Msg::Spawn(_) = rec.msg {
        if item.st != St::Absent {
            // applied already: publish what its creation left pending
            return Worker::Pending(rec);
        }
        return Worker::Commit(
            rec,
            machines::prepare(item, rec.msg, s.now, b.children, b.emits, Claim::None),
        );
    }
    if item.st == St::Absent {
        return Worker::Done(rec, true);
    }
    if item.processed & rec.msg.mark() != 0 {
        return Worker::Pending(rec);
    }
    if item.cancelled {
        // the lifecycle gate drains it (a CANCELLED execution takes no more events)
        return Worker::Done(rec, true);
    }
    if item.suspended && model.mutant != Some(Mutant::ApplyWhileSuspended) {
        // the lifecycle gate: kept on the item until `resume` (a recheck, or an event kept
        // already, changes nothing)
        let keep = !matches!(rec.msg, Msg::Recheck(_))
            && !item.parked.contains(rec.msg)
            && model.mutant != Some(Mutant::DrainWhileSuspended);
        return if keep {
            Worker::Park(rec, item.version, false)
        } else {
            Worker::Done(rec, true)
        };
    }
    if item.st == St::Pending && !matches!(rec.msg, Msg::Start(_)) {
        // the lifecycle gate drains it (a PENDING execution takes only its Start)
        return Worker::Done(rec, true);
    }
    if model.releases_at_end() {
        return release_at_end(model, s, rec, item, 0);
    }
    if item.parked.len > 0 || matches!(rec.msg, Msg::Recheck(_)) {
        // the parking gate: the last block first, then the event parked last, then each
        // parked event committed and published on its own
        return Worker::Flush(rec, item);
    }
    step(model, s, rec, item, rec.msg, false, 0)
}

/// The release, on `item` as the worker holds it (loaded, or as its last commit wrote
/// it): the record's event parked last (in a commit of its own, no rows) unless it is the
/// recheck or parked already; then the oldest parked event, claimed (a `Timeout` of a
/// running execution) and committed; done when none is left.
fn release(model: &Protocol, s: &State, rec: Rec, item: Item) -> Worker {
    let parks = !matches!(rec.msg, Msg::Recheck(_))
        && !item.parked.contains(rec.msg)
        && item.processed & rec.msg.mark() == 0;
    if parks {
        return Worker::Park(rec, item.version, true);
    }
    match item.parked.first() {
        Some(oldest) => step(model, s, rec, item, oldest, true, 0),
        None => Worker::Done(rec, true),
    }
}

/// The release as the old code did it (mutant `release-last-block-only`): the parked
/// events oldest first, each committed on its own, their rows `held` in memory; then the
/// record's event, unless it is the recheck or was among those released; everything held
/// published at the end.
fn release_at_end(model: &Protocol, s: &State, rec: Rec, item: Item, held: u16) -> Worker {
    match item.parked.first() {
        Some(oldest) => step(model, s, rec, item, oldest, true, held),
        None if matches!(rec.msg, Msg::Recheck(_)) || item.processed & rec.msg.mark() != 0 => {
            flush_or_done(rec, pending_of(s, held))
        }
        None => step(model, s, rec, item, rec.msg, false, held),
    }
}

/// The step of `applies` on `item`: its timer claimed first if it is a `Timeout` of a
/// running execution, then its commit.
fn step(
    model: &Protocol,
    s: &State,
    rec: Rec,
    item: Item,
    applies: Msg,
    releases: bool,
    held: u16,
) -> Worker {
    if matches!(applies, Msg::Timeout(_)) && machines::running(&item) {
        return Worker::Claim(
            rec,
            Claiming {
                version: item.version,
                st: item.st,
                applies,
                releases,
                held,
            },
        );
    }
    let b = model.bounds;
    let step = machines::prepare(item, applies, s.now, b.children, b.emits, Claim::None);
    Worker::Commit(
        rec,
        Prepared {
            releases,
            held,
            ..step
        },
    )
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
    if step.emit == Some(Msg::Report(1)) {
        // `Back` writes two rows to the observer in one block
        written.push(Msg::Report(2));
    }
    let mut rows = Vec::new();
    for msg in written {
        let row = Row { seq: s.next_seq, msg };
        s.next_seq += 1;
        s.rows.push(row);
        rows.push(row);
        match msg {
            Msg::Spawn(i) => s.ghost.spawned |= 1 << i,
            Msg::Report(k) => s.ghost.reports |= 1 << k,
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
    let committed = s.items[target];
    if step.releases {
        s.ghost.released_rows |= seqs != 0;
        if model.releases_at_end() {
            return release_at_end(model, s, rec, committed, step.held | seqs);
        }
        // its rows out before the next release commit repoints the last block
        let rows = RowSet::new(&rows);
        return if rows.len == 0 {
            release(model, s, rec, committed)
        } else {
            Worker::Publish(rec, rows, Then::Release(committed))
        };
    }
    let rows = pending_of(s, step.held | seqs);
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

/// The scheduled relay's next call (`refused`: its publish, or its bus put, is refused).
/// A pass reads the pending seqs (`oldest_pending_seqs`), then one row at a time (the
/// read is free): a row with a target is published and acked, unless an earlier row of
/// its group was refused in this pass (held back: it stays pending); a status event is
/// put on the bus and acked (refused: it stays pending, holding nothing back), or without
/// a bus acked unsent. The mutants ack before they publish, publish what they should hold
/// back, or ack a refused status event.
fn relay(model: &Protocol, s: &mut State, refused: bool) -> Relay {
    let ack_first = model.mutant == Some(Mutant::RelayAckBeforeSend);
    match s.relay {
        Relay::Idle => {
            let todo = s.rows.iter().fold(0u32, |bits, r| bits | (1 << r.seq));
            next_row(model, s, todo, 0)
        }
        Relay::Publish(row, todo, blocked) => {
            if refused {
                let blocked = if model.mutant == Some(Mutant::RelayNoGroupHoldback) {
                    blocked
                } else {
                    blocked | (1 << row.msg.group())
                };
                return next_row(model, s, todo, blocked);
            }
            publish_row(s, row);
            if ack_first {
                next_row(model, s, todo, blocked)
            } else {
                Relay::Ack(row, todo, blocked)
            }
        }
        Relay::Ack(row, todo, blocked) => {
            ack_rows(s, &RowSet::new(&[row]));
            if ack_first {
                Relay::Publish(row, todo, blocked)
            } else {
                next_row(model, s, todo, blocked)
            }
        }
        Relay::Put(row, todo, blocked) => {
            if refused && model.mutant != Some(Mutant::AckRefusedStatusEvent) {
                return next_row(model, s, todo, blocked);
            }
            if !refused {
                s.ghost.announced |= 1 << row.seq;
            }
            Relay::Drop(row, todo, blocked)
        }
        Relay::Drop(row, todo, blocked) => {
            ack_rows(s, &RowSet::new(&[row]));
            next_row(model, s, todo, blocked)
        }
    }
}

/// The relay's read of the next row of its pass still pending (`pending_rows`, free),
/// and the call it makes for it; `Idle` when the pass is over.
fn next_row(model: &Protocol, s: &State, mut todo: u32, blocked: u8) -> Relay {
    while todo != 0 {
        let seq = todo.trailing_zeros() as u8;
        todo &= !(1 << seq);
        let Some(row) = s.rows.iter().find(|r| r.seq == seq).copied() else {
            continue;
        };
        if row.msg == Msg::Notice {
            return if model.bounds.bus {
                Relay::Put(row, todo, blocked)
            } else {
                Relay::Drop(row, todo, blocked)
            };
        }
        if blocked & (1 << row.msg.group()) != 0 {
            continue;
        }
        return if model.mutant == Some(Mutant::RelayAckBeforeSend) {
            Relay::Ack(row, todo, blocked)
        } else {
            Relay::Publish(row, todo, blocked)
        };
    }
    Relay::Idle
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
