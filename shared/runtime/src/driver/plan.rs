//! What to do with one event for one execution, decided in one place for every runner.
//!
//! The decision is pure: from the loaded execution, whether the event was applied
//! already, whether the execution's version is deployed, and how the event reached the
//! runner, [`plan`] returns a [`Plan`]; the runners carry it out and differ only in
//! delivery. The worker (`Worker::handle_event` and its bursts) publishes what a commit
//! enqueued to the event queue; the embedded runner (`Driver::process`, what `stm run`
//! drives) steps it inline to quiescence.
//!
//! Where the two runners' rows differ, they follow harel 0.9.0's two runners, each of
//! which is a drop-in target (the same machine and events must give what harel gives on
//! the same runner):
//!
//! | the execution, the event                     | by queue ([`Arrival::Queue`])    | inline ([`Arrival::Caller`], [`Arrival::Delivered`]) |
//! |----------------------------------------------|-----------------------------------|------------------------------------------------------|
//! | none                                         | `Unknown` (acknowledged)          | `Unknown` (an error for a caller, skipped when delivered) |
//! | applied already                              | `Duplicate` (its last block published again) | `Duplicate`                             |
//! | `SUSPENDED`                                  | `ParkWhileSuspended`              | `Step` (the engine drops it, as `DurableRunner` does) |
//! | `CANCELLED`; `CANCELLING` but for `Cancel`; `PENDING` but for `Start` | `Drain` (no commit) | `Step` (the engine ignores it, as harel does) |
//! | pinned to a version not deployed             | `ParkForVersion`                  | `ParkForVersion`                                     |
//! | events parked on it                          | `Release`, then plan again        | `Release`, then plan again                           |
//! | the `@parked` recheck, nothing parked        | `Recheck`                         | `Recheck`                                            |
//! | a domain event, live regions                 | `Broadcast`                       | `Broadcast` for a caller's event; `Step` for an emit or a timer delivered inline (harel's inline flush runs the target's engine) |
//! | anything else                                | `Step`                            | `Step`                                               |
//!
//! The queue's lifecycle rows keep a message from holding its FIFO group (a `SUSPENDED`
//! execution's events wait on its item, never in SQS, whose retention would delete
//! them), and drop without a write what the engine would only ignore.

use stm_core::definition::CONTROL_EVENTS;
use stm_core::{Event, Execution, Status};

/// The timer path of a parked execution's recheck (`parking.rs` arms it).
pub(crate) const PARKED_PATH: &str = "@parked";

/// The sweeper's `Timeout` for the `@parked` timer: never a step of the machine.
pub(crate) fn is_recheck(event: &Event) -> bool {
    event.kind == "Timeout" && event.data.get("path").and_then(|p| p.as_str()) == Some(PARKED_PATH)
}

/// How an event reached the runner that plans it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Arrival {
    /// A record of the event queue (the worker, `stm local`): harel's worker.
    Queue,
    /// A caller's event on the embedded runner ([`Driver::process`](crate::Driver::process)):
    /// harel's `DurableRunner.process`.
    Caller,
    /// An emit, a broadcast's copy or a fired timer that the embedded runner delivers
    /// inline: harel's inline flush, which runs the target's engine.
    Delivered,
}

/// What a runner does with one event for one execution ([`plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Plan {
    /// There is no such execution.
    Unknown,
    /// The execution applied this event already (its processed mark): nothing steps.
    Duplicate,
    /// The execution takes no such event in its status: dropped without a commit.
    Drain {
        /// Why, for the log line.
        reason: &'static str,
    },
    /// A `SUSPENDED` execution's event: kept on its item until `resume`.
    ParkWhileSuspended,
    /// The execution is pinned to a version this deploy does not have: the event is kept
    /// on its item, with a recheck timer, until the version is back.
    ParkForVersion,
    /// Events are parked on the execution and its version is deployed: they step first,
    /// oldest first, each in its own commit; then the event is planned again.
    Release,
    /// The parked recheck with nothing left to release: no step (a missing `ttl` is armed).
    Recheck,
    /// A domain event for a parent with live regions: it goes to each of them, and the
    /// parent's `ttl`, if any, restarts.
    Broadcast {
        /// The regions' execution ids (unfinished, not submachines), in the parent's order.
        regions: Vec<String>,
    },
    /// One engine step of the execution.
    Step,
}

/// The plan for `event`, arrived by `arrival`, on `exe` (`None`: no such execution), which
/// applied it already if `processed`, and whose version this deploy has if `deployed`.
///
/// ```
/// use stm_core::{Event, Execution, Status};
/// use stm_runtime::driver::{plan, Arrival, Plan};
///
/// let mut exe = Execution::new("order-1", "Order");
/// exe.status = Status::Suspended;
/// let event = Event::new("Pay");
/// // the worker keeps it on the item; `stm run` steps it, and the engine drops it
/// assert_eq!(plan(Arrival::Queue, Some(&exe), &event, false, true), Plan::ParkWhileSuspended);
/// assert_eq!(plan(Arrival::Caller, Some(&exe), &event, false, true), Plan::Step);
/// assert_eq!(plan(Arrival::Queue, None, &event, false, true), Plan::Unknown);
/// ```
pub fn plan(
    arrival: Arrival,
    exe: Option<&Execution>,
    event: &Event,
    processed: bool,
    deployed: bool,
) -> Plan {
    let Some(exe) = exe else {
        return Plan::Unknown;
    };
    if processed {
        return Plan::Duplicate;
    }
    if arrival == Arrival::Queue {
        if let Some(plan) = lifecycle(exe, event) {
            return plan;
        }
    }
    if !deployed {
        return Plan::ParkForVersion;
    }
    if exe.has_parked() {
        return Plan::Release;
    }
    if is_recheck(event) {
        return Plan::Recheck;
    }
    route(arrival, exe, event)
}

/// The last of [`plan`]'s rules, for an event that steps now: [`Plan::Broadcast`] to the
/// live regions, or [`Plan::Step`]. An event released from the parked list is routed by
/// it too.
pub fn route(arrival: Arrival, exe: &Execution, event: &Event) -> Plan {
    if arrival != Arrival::Delivered && !CONTROL_EVENTS.contains(&event.kind.as_str()) {
        let regions = region_ids(exe);
        if !regions.is_empty() {
            return Plan::Broadcast { regions };
        }
    }
    Plan::Step
}

/// The queue's lifecycle rules; `None`: the status takes the event.
fn lifecycle(exe: &Execution, event: &Event) -> Option<Plan> {
    let reason = match exe.status {
        Status::Suspended => return Some(Plan::ParkWhileSuspended),
        Status::Cancelled => "a CANCELLED execution takes no more events",
        Status::Cancelling if event.kind != "Cancel" => "a CANCELLING execution takes only its Cancel",
        // parking it instead would hold the group's lock and block the Start
        Status::Pending if event.kind != "Start" => {
            "not started yet: a PENDING execution takes only its Start"
        }
        _ => return None,
    };
    Some(Plan::Drain { reason })
}

/// The regions a domain event for `exe` goes to: every unfinished, non-submachine child,
/// whether or not its record exists yet. (A child whose spawn intent is still on its way
/// is created first: the intent was published to the child's FIFO group before anything
/// the parent sends it later; inline, a region without a record is skipped.)
pub fn region_ids(exe: &Execution) -> Vec<String> {
    exe.children
        .iter()
        .filter(|(_, cs)| !cs.finished && !cs.submachine)
        .map(|(id, _)| id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use stm_core::execution::ChildState;
    use stm_core::{Map, Value};

    use super::*;

    const ARRIVALS: [Arrival; 3] = [Arrival::Queue, Arrival::Caller, Arrival::Delivered];
    const STATUSES: [Status; 7] = [
        Status::Pending,
        Status::Running,
        Status::Suspended,
        Status::Cancelling,
        Status::Cancelled,
        Status::Done,
        Status::Failed,
    ];

    fn recheck() -> Event {
        let mut data = Map::new();
        data.insert("path".into(), Value::from(PARKED_PATH));
        Event::with_data("Timeout", data)
    }

    fn with_region(mut exe: Execution, id: &str, finished: bool, submachine: bool) -> Execution {
        let child = ChildState {
            root_path: "R".into(),
            finished,
            outcome: None,
            result: Map::new(),
            submachine,
            key: String::new(),
            extra: Map::new(),
        };
        exe.children.insert(id.into(), child);
        exe
    }

    fn running() -> Execution {
        let mut exe = Execution::new("p", "M");
        exe.status = Status::Running;
        exe
    }

    #[test]
    fn no_execution_and_a_processed_mark_come_first_on_every_path() {
        for arrival in ARRIVALS {
            assert_eq!(plan(arrival, None, &Event::new("Go"), true, false), Plan::Unknown);
            for status in STATUSES {
                let mut exe = running();
                exe.status = status;
                exe.parked_events.push(Event::new("Early"));
                assert_eq!(
                    plan(arrival, Some(&exe), &Event::new("Go"), true, false),
                    Plan::Duplicate,
                    "{arrival:?} {status:?}"
                );
            }
        }
    }

    #[test]
    fn the_lifecycle_rules_are_the_queues_alone() {
        let cases = [
            (Status::Suspended, "Go", Some(Plan::ParkWhileSuspended)),
            (Status::Suspended, "Cancel", Some(Plan::ParkWhileSuspended)),
            (
                Status::Cancelled,
                "Cancel",
                Some(Plan::Drain {
                    reason: "a CANCELLED execution takes no more events",
                }),
            ),
            (
                Status::Cancelling,
                "Go",
                Some(Plan::Drain {
                    reason: "a CANCELLING execution takes only its Cancel",
                }),
            ),
            (Status::Cancelling, "Cancel", None),
            (
                Status::Pending,
                "Go",
                Some(Plan::Drain {
                    reason: "not started yet: a PENDING execution takes only its Start",
                }),
            ),
            (Status::Pending, "Start", None),
            (Status::Running, "Go", None),
            (Status::Done, "Go", None),
            (Status::Failed, "Go", None),
        ];
        for (status, kind, queued) in cases {
            let mut exe = running();
            exe.status = status;
            let event = Event::new(kind);
            assert_eq!(
                plan(Arrival::Queue, Some(&exe), &event, false, true),
                queued.clone().unwrap_or(Plan::Step),
                "{status:?} {kind}"
            );
            for inline in [Arrival::Caller, Arrival::Delivered] {
                assert_eq!(
                    plan(inline, Some(&exe), &event, false, true),
                    Plan::Step,
                    "{inline:?} {status:?} {kind}"
                );
            }
            // a version not deployed parks what the lifecycle lets through, on every path
            for arrival in ARRIVALS {
                let expected = match (arrival, &queued) {
                    (Arrival::Queue, Some(plan)) => plan.clone(),
                    _ => Plan::ParkForVersion,
                };
                assert_eq!(
                    plan(arrival, Some(&exe), &event, false, false),
                    expected,
                    "{arrival:?} {status:?} {kind}"
                );
            }
        }
    }

    #[test]
    fn parked_events_are_released_before_anything_steps_even_the_recheck() {
        let mut exe = with_region(running(), "p:R:0", false, false);
        exe.parked_events.push(Event::new("Early"));
        for arrival in ARRIVALS {
            for event in [Event::new("Go"), Event::new("Cancel"), recheck()] {
                assert_eq!(
                    plan(arrival, Some(&exe), &event, false, true),
                    Plan::Release,
                    "{arrival:?} {}",
                    event.kind
                );
            }
        }
        let exe = running();
        for arrival in ARRIVALS {
            assert_eq!(
                plan(arrival, Some(&exe), &recheck(), false, true),
                Plan::Recheck,
                "{arrival:?}"
            );
        }
    }

    #[test]
    fn a_domain_event_goes_to_the_live_regions_unless_delivered_inline() {
        let exe = with_region(
            with_region(
                with_region(running(), "p:A:0", false, false),
                "p:B:0",
                true,
                false,
            ),
            "p:Sub",
            false,
            true,
        );
        let regions = Plan::Broadcast {
            regions: vec!["p:A:0".to_string()],
        };
        assert_eq!(
            plan(Arrival::Queue, Some(&exe), &Event::new("Go"), false, true),
            regions
        );
        assert_eq!(
            plan(Arrival::Caller, Some(&exe), &Event::new("Go"), false, true),
            regions
        );
        assert_eq!(
            plan(Arrival::Delivered, Some(&exe), &Event::new("Go"), false, true),
            Plan::Step
        );
        for control in CONTROL_EVENTS {
            for arrival in ARRIVALS {
                assert_eq!(
                    plan(arrival, Some(&exe), &Event::new(control), false, true),
                    Plan::Step,
                    "{control}"
                );
            }
        }
        // only finished regions and submachines: the parent steps
        let quiet = with_region(with_region(running(), "p:B:0", true, false), "p:Sub", false, true);
        assert_eq!(
            plan(Arrival::Queue, Some(&quiet), &Event::new("Go"), false, true),
            Plan::Step
        );
    }
}
