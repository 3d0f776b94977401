//! The safety properties (each an invariant over every reachable state) and the
//! reachability checks that keep them from passing vacuously. Liveness is in
//! [`crate::liveness`]: stateright's `eventually` misses a path that ends in a cycle,
//! and a livelock is exactly such a cycle.

use stateright::Property;

use crate::model::Protocol;
use crate::state::{Msg, St, State, PARENT, TIMED};

/// The names of the safety properties, in the order they are reported.
pub const SAFETY: [&str; 12] = [
    "each event is applied exactly once",
    "each execution applies its events in order",
    "every committed emit is pending, queued or applied",
    "no child is lost or created twice",
    "a join fires once",
    "no Timeout is applied unless its timer is armed and due",
    "an armed timer is kept until its Timeout is queued",
    "the sweeper fires only timers it read armed",
    "no event is applied while its execution is suspended",
    "every event sent to the suspended execution is applied, queued or parked",
    "every row reaches its target once, in its execution's commit order",
    "every status event reaches the bus or is pending",
];

pub fn all() -> Vec<Property<Protocol>> {
    vec![
        Property::always(SAFETY[0], |_, s: &State| !s.ghost.applied_twice),
        Property::always(SAFETY[1], |_, s: &State| !s.ghost.out_of_order),
        Property::always(SAFETY[2], emits_kept),
        Property::always(SAFETY[3], children_kept),
        Property::always(SAFETY[4], |_, s: &State| s.ghost.joins <= 1),
        Property::always(SAFETY[5], |_, s: &State| !s.ghost.early_timeout),
        Property::always(SAFETY[6], timer_kept),
        Property::always(SAFETY[7], |_, s: &State| !s.ghost.unconfirmed_fire),
        Property::always(SAFETY[8], |_, s: &State| !s.ghost.applied_while_suspended),
        Property::always(SAFETY[9], timed_events_kept),
        Property::always(SAFETY[10], rows_in_order),
        Property::always(SAFETY[11], notices_kept),
        // reachable, or the bounds are too small to say anything
        Property::sometimes("the parent's join fires", |m: &Protocol, s: &State| {
            m.bounds.children == 0 || s.items[PARENT].st == St::AllSent
        }),
        Property::sometimes("the timed execution times out", |m: &Protocol, s: &State| {
            !m.bounds.timed || s.items[TIMED].st == St::Expired
        }),
        Property::sometimes("everything quiesces", |m: &Protocol, s: &State| {
            s.quiescent(m.bounds.horizon)
        }),
        Property::sometimes(
            "a parked event is released after resume",
            |m: &Protocol, s: &State| !(m.bounds.timed && m.bounds.suspend) || s.ghost.released,
        ),
        Property::sometimes(
            "a released parked event's rows reach the observer",
            |m: &Protocol, s: &State| {
                !(m.bounds.timed && m.bounds.suspend && m.bounds.emits)
                    || (s.ghost.released_rows && s.ghost.delivered == s.ghost.reports && s.rows.is_empty())
            },
        ),
        Property::sometimes("a status event reaches the bus", |m: &Protocol, s: &State| {
            !(m.bounds.bus && m.bounds.suspend) || s.ghost.announced != 0
        }),
    ]
}

/// `msg` is in the outbox or the queue.
fn in_flight(s: &State, msg: Msg) -> bool {
    s.rows.iter().any(|r| r.msg == msg) || s.queue.iter().any(|q| q.msg == msg)
}

/// Every `Finished` a committed step emitted is still a pending row, a queued message, or
/// applied by its target.
fn emits_kept(model: &Protocol, s: &State) -> bool {
    model.children().all(|(i, _)| {
        let msg = Msg::Finished(i);
        s.ghost.emitted[PARENT] & msg.mark() == 0
            || s.ghost.applied[PARENT] & msg.mark() != 0
            || in_flight(s, msg)
    })
}

/// Each committed spawn intent is a pending row, a queued message, or its child; no child
/// was created twice.
fn children_kept(model: &Protocol, s: &State) -> bool {
    model.children().all(|(i, exe)| {
        s.ghost.created[i as usize] <= 1
            && (s.ghost.spawned & (1 << i) == 0
                || s.items[exe].st != St::Absent
                || in_flight(s, Msg::Spawn(i)))
    })
}

/// While the timed state waits, its timer is armed, or its `Timeout` is queued or parked.
fn timer_kept(_: &Protocol, s: &State) -> bool {
    match s.items[TIMED].st {
        // a cancelled execution's Timeout is drained, its timer left to fire
        St::Waiting(_) if s.items[TIMED].cancelled => true,
        St::Waiting(f) => {
            let timeout = Msg::Timeout(f);
            s.timer == Some(f) || in_flight(s, timeout) || s.items[TIMED].parked.contains(timeout)
        }
        _ => true,
    }
}

/// No row entered the queue while an earlier row of its execution to the same target was
/// pending unpublished; every report committed is pending or delivered, none twice (the
/// execution's own events and the children's reports to the parent are checked by the
/// order and exactly-once properties: their targets apply them).
fn rows_in_order(_: &Protocol, s: &State) -> bool {
    let pending = s.rows.iter().fold(0u8, |bits, r| match r.msg {
        Msg::Report(k) => bits | (1 << k),
        _ => bits,
    });
    let g = &s.ghost;
    !g.rows_reordered && !g.delivered_twice && g.reports & !(g.delivered | pending) == 0
}

/// With a status bus, every status event committed is pending or was put on the bus (a
/// relay that dies between the put and the ack puts it again: the bus has no
/// deduplication, its consumers dedupe by the event's id). Without one the relay deletes
/// them unsent.
fn notices_kept(m: &Protocol, s: &State) -> bool {
    let pending = s.rows.iter().fold(0u32, |bits, r| match r.msg {
        Msg::Notice => bits | (1 << r.seq),
        _ => bits,
    });
    !m.bounds.bus || s.ghost.notices & !(s.ghost.announced | pending) == 0
}

/// Each event sent to the timed execution (the client's, each `Timeout` published) is, at
/// every state, applied, pending in the outbox, queued (or in flight), or parked on its
/// item: none is lost, suspended or not.
fn timed_events_kept(_: &Protocol, s: &State) -> bool {
    let item = &s.items[TIMED];
    if item.cancelled {
        // cancelled: its events are drained, by design
        return true;
    }
    let mut kept = s.ghost.applied[TIMED] | item.parked.as_slice().iter().fold(0, |b, m| b | m.mark());
    for msg in s.rows.iter().map(|r| r.msg).chain(s.queue.iter().map(|q| q.msg)) {
        if msg.group() == TIMED {
            kept |= msg.mark();
        }
    }
    s.ghost.sent_timed & !kept == 0
}
