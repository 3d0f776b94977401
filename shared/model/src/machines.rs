//! The statecharts of the model, abstracted: what one step of each does to its execution
//! and what it asks the commit to write. They mirror `machines/model.stm`, which the
//! replay runs through the real engine: a fan-out parent (`Fan`), its children (`Leaf`),
//! and a timed execution (`Timed`) left and re-entered by client events.

use crate::state::{Item, Msg, Prepared, St, TimerOp, PARENT, TIMED};

/// What `claim_timer` answered for a `Timeout` (the real `TimerClaim`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// No claim was made (not a `Timeout`, or its execution is not running).
    None,
    Claimed,
    Rearmed,
    Absent,
}

/// The step of `msg` on `item` (loaded at `item.version`), at tick `now`, for a parent of
/// `children` children; with `emits`, the timed execution's `Leave` and `Back` each write a
/// report for the observer. A step the machine takes nothing from still commits (the
/// event's mark): its state stays.
pub fn prepare(item: Item, msg: Msg, now: u8, children: u8, emits: bool, claim: Claim) -> Prepared {
    let mut step = Prepared {
        expect: item.version,
        st: item.st,
        emit: None,
        spawns: 0,
        timer: TimerOp::Keep,
        times_out: false,
        joins: false,
        applies: msg,
        releases: false,
        held: 0,
    };
    match (msg, item.st) {
        (Msg::Spawn(i), _) => {
            // a child's creation: started, it chooses its final state at once and reports
            step.expect = 0;
            step.st = St::ChildDone;
            step.emit = Some(Msg::Finished(i));
        }
        (Msg::Start(e), St::Pending) if e == PARENT => {
            step.st = St::Notifying(0);
            step.spawns = (1u8 << children) - 1;
        }
        (Msg::Start(e), St::Pending) if e == TIMED => {
            step.st = St::Waiting(now + 1);
            step.timer = TimerOp::Arm(now + 1);
        }
        (Msg::Finished(i), St::Notifying(seen)) => {
            let seen = seen | (1 << i);
            if seen == (1u8 << children) - 1 {
                step.st = St::AllSent;
                step.joins = true;
            } else {
                step.st = St::Notifying(seen);
            }
        }
        (Msg::Leave, St::Waiting(_)) => {
            step.st = St::Away;
            step.timer = TimerOp::Cancel;
            step.emit = emits.then_some(Msg::Report(0));
        }
        (Msg::Back, St::Away) => {
            step.st = St::Waiting(now + 1);
            step.timer = TimerOp::Arm(now + 1);
            step.emit = emits.then_some(Msg::Report(1));
        }
        // a stale Timeout (its state left and re-entered since): ignored, only marked
        (Msg::Timeout(_), St::Waiting(_)) if claim == Claim::Rearmed => {}
        (Msg::Timeout(_), St::Waiting(_)) => {
            step.st = St::Expired;
            step.timer = TimerOp::Cancel;
            step.times_out = true;
        }
        _ => {}
    }
    step
}

/// Whether the execution is `RUNNING` (the worker claims a `Timeout`'s timer only then,
/// and the operator suspends only then).
pub fn running(item: &Item) -> bool {
    !item.suspended && !item.cancelled && matches!(item.st, St::Notifying(_) | St::Waiting(_) | St::Away)
}

/// The event its producer sent just before `msg` to the same execution, which must be
/// applied first (`None`: nothing is ordered before it but the `Start`).
pub fn predecessor(msg: Msg) -> Option<Msg> {
    match msg {
        Msg::Start(_) | Msg::Spawn(_) | Msg::Notice | Msg::Report(_) => None,
        Msg::Finished(_) => Some(Msg::Start(PARENT)),
        Msg::Leave | Msg::Timeout(_) | Msg::Recheck(_) => Some(Msg::Start(TIMED)),
        Msg::Back => Some(Msg::Leave),
    }
}
