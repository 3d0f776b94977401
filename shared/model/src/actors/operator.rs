//! The operator: `Control::suspend`, then `Control::resume`, then (with `Bounds::cancel`)
//! `Control::cancel`, forceful as `Timed` models no `on Cancel`, of the timed execution
//! (`shared/runtime/src/control.rs`). Each is its loads (the status check, then
//! `commit_status`'s load: one step, since only this operator changes the status), then,
//! if its commit writes a row (`suspend`'s and `cancel`'s status events), the rows of the
//! execution's last block published and acked (`deliver_last_block`: `pending_rows_of`,
//! `publish_batch`, `ack_rows`; the commit repoints the item's last-block record, and a
//! redelivery republishes only that), then `commit_status`'s commit (the status, and for
//! `SUSPENDED` a status event's row): CAS on the version loaded, the whole attempt run
//! again on a lost CAS up to `RETRIES` times, a finished execution left alone. A refused
//! entry fails the command before it commits. `resume`'s commit arms the `@parked`
//! recheck, due now, when events wait on the item. `commit_status` reads the execution's
//! timers with its load (`timers_of`, no step of its own): `suspend`'s commit holds them
//! out of the due index, and leaving SUSPENDED lists the held ones again, each as read.
//! A command that fails (a crash before
//! its commit, a refused entry, or the retries spent) is run again.

use super::{ack_rows, last_block, publish_rows};
use crate::machines;
use crate::model::{cas_holds, Protocol};
use crate::state::{Command, Msg, Operator, Row, St, State, TIMED};

/// `commit_status`'s attempts (`RETRIES` in control.rs).
const RETRIES: u8 = 5;

/// The command after `command`.
fn after(model: &Protocol, command: Command) -> Operator {
    match command {
        Command::Suspend => Operator::Ready(Command::Resume),
        Command::Resume if model.bounds.cancel => Operator::Ready(Command::Cancel),
        Command::Resume | Command::Cancel => Operator::Finished,
    }
}

/// `commit_status`'s load: the version to commit on, or the command is over. With it,
/// the timers its commit moves: `suspend` holds those listed, leaving SUSPENDED lists the
/// held ones again.
fn load(model: &Protocol, s: &mut State, command: Command, lost: u8) -> Operator {
    let item = s.items[TIMED];
    if item.st == St::Expired || item.cancelled {
        // a finished execution is left alone
        return after(model, command);
    }
    let holding = command == Command::Suspend && !item.suspended;
    let releasing = command != Command::Suspend && item.suspended;
    s.moving = if (holding && !s.held) || (releasing && s.held) {
        (s.timer, s.recheck)
    } else {
        (None, None)
    };
    // only a commit that writes rows repoints the last block: `resume` writes none (the
    // widest level announces no RUNNING), so it publishes nothing first
    if model.operator_flushes() && command != Command::Resume {
        Operator::Pending(command, item.version, lost)
    } else {
        Operator::Commit(command, item.version, lost)
    }
}

/// The operator's next call (`refused`: its publish has that entry refused).
pub(super) fn operate(model: &Protocol, s: &mut State, refused: Option<usize>) -> Operator {
    match s.operator {
        Operator::Finished => Operator::Finished,
        Operator::Ready(command) => {
            // the status check: `suspend` moves only a RUNNING execution, `resume` only a
            // SUSPENDED one (anything else is a no-op)
            let item = s.items[TIMED];
            let applies = match command {
                Command::Suspend => machines::running(&item),
                Command::Resume => item.suspended,
                // `cancel` leaves only a finished execution alone (`load` checks that)
                Command::Cancel => true,
            };
            if applies {
                load(model, s, command, 0)
            } else {
                after(model, command)
            }
        }
        Operator::Pending(command, expect, lost) => {
            let rows = last_block(s, TIMED);
            if rows.len == 0 {
                Operator::Commit(command, expect, lost)
            } else {
                Operator::Publish(command, rows, expect, lost)
            }
        }
        Operator::Publish(command, rows, expect, lost) => {
            let sent = publish_rows(s, &rows, refused);
            match (refused, sent.len) {
                // the command fails (to be run again); what was published is acked first
                (Some(_), 0) => Operator::Ready(command),
                (Some(_), _) => Operator::Ack(command, sent, expect, u8::MAX),
                (None, _) => Operator::Ack(command, sent, expect, lost),
            }
        }
        Operator::Ack(command, rows, expect, lost) => {
            ack_rows(s, &rows);
            if lost == u8::MAX {
                Operator::Ready(command)
            } else {
                Operator::Commit(command, expect, lost)
            }
        }
        Operator::Commit(command, expect, lost) => {
            let now = s.now;
            let item = &mut s.items[TIMED];
            if !cas_holds(model, item, expect) {
                return if lost + 1 < RETRIES {
                    load(model, s, command, lost + 1)
                } else {
                    // still conflicting: the command fails, and is run again
                    Operator::Ready(command)
                };
            }
            item.version += 1;
            let was_suspended = item.suspended;
            item.suspended = command == Command::Suspend;
            item.cancelled = command == Command::Cancel;
            // the timers read with the load, held or listed again as read (one the sweeper
            // deleted since is armed again: its second `Timeout` has the same ids)
            if item.suspended != was_suspended {
                let (timer, recheck) = std::mem::take(&mut s.moving);
                s.timer = timer.or(s.timer);
                s.recheck = recheck.or(s.recheck);
                s.held = command == Command::Suspend;
            }
            let item = &mut s.items[TIMED];
            match command {
                // its status event's row, for the relay (the operator writes one for each
                // status the widest level announces: SUSPENDED and CANCELLED, not RUNNING)
                Command::Suspend | Command::Cancel => {
                    item.last_rows = 1 << s.next_seq;
                    s.rows.push(Row {
                        seq: s.next_seq,
                        msg: Msg::Notice,
                    });
                    s.ghost.notices |= 1 << s.next_seq;
                    s.next_seq += 1;
                }
                Command::Resume if item.parked.len > 0 => s.recheck = Some(now),
                Command::Resume => {}
            }
            after(model, command)
        }
    }
}

/// What a crash leaves: the command, to be run again.
pub(super) fn crashed(operator: Operator) -> Operator {
    match operator {
        Operator::Pending(command, ..)
        | Operator::Publish(command, ..)
        | Operator::Ack(command, ..)
        | Operator::Commit(command, ..) => Operator::Ready(command),
        other => other,
    }
}
