//! The protocol's parts: its bounds, the hazards that can be planted in it ([`Mutant`]),
//! its initial state and the actions (each one store or queue call of one actor, the
//! operator's included, a crash, a clock tick, a visibility timeout, the index catching
//! up). What each action does is `actors.rs`'s, what must hold `properties.rs`'s; the two
//! make [`Protocol`] a stateright `Model` in `check.rs`, so that neither imports this
//! file's importers back.
//!
//! Each actor's step is one call of the real code (`shared/runtime/src/{worker,relay,
//! sweeper}.rs`): a worker handles a batch of one record with the inline flush on and
//! coalescing off, so its calls are `load_for_event` (or the child's `load`),
//! `claim_timer`, `commit`, `pending_rows_of`, `publish_batch`, `ack_rows`,
//! `change_visibility`, then the event source's delete. Nothing else in the system can
//! interleave inside a call: DynamoDB and SQS apply each atomically.

use crate::state::{
    Budget, Command, Ghost, Item, Msg, Operator, Parked, Queued, Relay, St, State, Sweeper, Worker, CHILD,
    EXECUTIONS, PARENT, TIMED,
};

/// How big the explored system is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Children of the fan-out (0: no parent at all).
    pub children: u8,
    /// The timed execution is there.
    pub timed: bool,
    /// The client leaves and re-enters its timed state (`Leave`, `Back`).
    pub leave_back: bool,
    /// An operator suspends the timed execution, then resumes it, at any point.
    pub suspend: bool,
    /// Concurrent workers.
    pub workers: u8,
    /// Crashes, anywhere, of any actor.
    pub crashes: u8,
    /// Leases lost: a visibility timeout running out while its worker still works.
    pub leases: u8,
    /// Times SQS's deduplication window may pass.
    pub windows: u8,
    /// The last clock tick.
    pub horizon: u8,
    /// The timed execution's `Leave` and `Back` write rows (reports to an observer), so a
    /// parked event's release commits rows.
    pub emits: bool,
    /// The scheduled relay has a status bus: it puts the status events' rows on it
    /// (without one it deletes them unsent).
    pub bus: bool,
    /// After its resume, the operator cancels the timed execution (its status event's row
    /// committed after the last block is published, its later events drained).
    pub cancel: bool,
    /// Entries a batch publish may refuse (one entry of a `SendMessageBatch` or of the
    /// bus's `PutEvents`, the rest going through).
    pub refusals: u8,
}

impl Bounds {
    /// What the test suite checks (seconds in a debug build).
    pub const SMALL: Bounds = Bounds {
        children: 1,
        timed: true,
        leave_back: false,
        suspend: false,
        workers: 2,
        crashes: 1,
        leases: 0,
        windows: 0,
        horizon: 1,
        emits: false,
        bus: false,
        cancel: false,
        refusals: 0,
    };

    /// What `check` explores by default and `scripts/model-check.sh` checks: every path
    /// that commits rows at once. The timed execution left and re-entered, its `Leave` and
    /// `Back` writing rows (`Back` two to one target), suspended and resumed by the
    /// operator at any point (its status event's row put on the bus), a crash anywhere and
    /// an entry of any batch publish refused. The fan-out is left out (its groups and items
    /// are apart from the timed execution's, and [`Bounds::FANOUT`] checks it); so is a
    /// lost lease (with it the product passes a hundred million states).
    pub const FULL: Bounds = Bounds {
        children: 0,
        timed: true,
        leave_back: true,
        suspend: true,
        workers: 2,
        crashes: 1,
        leases: 0,
        windows: 0,
        horizon: 1,
        emits: true,
        bus: true,
        cancel: false,
        refusals: 1,
    };

    /// The fan-out with the timed execution (what the full bound was before the rows of
    /// releases and operator commands): every kind of step and fault of those at once (a
    /// crash and a lost lease, the timer left and re-entered), no suspension.
    pub const FANOUT: Bounds = Bounds {
        children: 1,
        timed: true,
        leave_back: true,
        suspend: false,
        workers: 2,
        crashes: 1,
        leases: 1,
        windows: 0,
        horizon: 1,
        emits: false,
        bus: false,
        cancel: false,
        refusals: 0,
    };

    /// Suspension, in the test suite: the timed execution alone (its events left,
    /// re-entered, timed out), suspended and resumed by the operator at any point, with a
    /// crash anywhere. The fan-out is left out: its groups and items are apart from the
    /// suspended execution's, and with it the product passes a hundred million states.
    pub const SMALL_SUSPENSION: Bounds = Bounds {
        children: 0,
        timed: true,
        leave_back: true,
        suspend: true,
        workers: 2,
        crashes: 1,
        leases: 0,
        windows: 0,
        horizon: 1,
        emits: false,
        bus: false,
        cancel: false,
        refusals: 0,
    };

    /// The rows of releases and operator commands, in the test suite: the full bound's
    /// timed execution (its `Leave` and `Back` writing rows, suspended and resumed, its
    /// status event put on the bus, an entry refused) with one worker and no crash (the
    /// refused entry is the failure between two release commits).
    pub const SMALL_ROWS: Bounds = Bounds {
        workers: 1,
        crashes: 0,
        ..Bounds::FULL
    };

    /// What `scripts/model-check.sh` checks of suspension: a lost lease more (a third
    /// tick passes 20 GB).
    pub const SUSPENSION: Bounds = Bounds {
        leases: 1,
        ..Bounds::SMALL_SUSPENSION
    };
}

/// A known hazard planted in the protocol; each must be caught with a counterexample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutant {
    /// The commit writes without its version condition.
    NoVersionCheck,
    /// The relay acks (deletes) its rows before it publishes them.
    RelayAckBeforeSend,
    /// The sweeper deletes the timer whatever its `fire_at`.
    SweeperNoFireAtGuard,
    /// The processed mark is written after the commit, not inside it.
    MarkOutsideCommit,
    /// The sweeper fires what the lagging due index lists, without the consistent re-read.
    StaleIndexUnchecked,
    /// The worker's lifecycle gate lets a suspended execution's event through: it steps.
    ApplyWhileSuspended,
    /// The worker's lifecycle gate drops a suspended execution's event, as a CANCELLED
    /// execution's.
    DrainWhileSuspended,
    /// The release of parked events commits once per released event but publishes at the
    /// end only (the triggering event stepped after them, not parked last), and no last
    /// block is published first: a redelivery republishes only the item's last block.
    ReleaseLastBlockOnly,
    /// The relay does not hold back a group's later rows after one of its rows was refused.
    RelayNoGroupHoldback,
    /// Status events the bus refused are acked as sent.
    AckRefusedStatusEvent,
    /// An operator command commits its status row (repointing the item's last-block record)
    /// without first publishing the rows of the execution's last block.
    OperatorRowsRepoint,
}

impl Mutant {
    pub const ALL: [Mutant; 11] = [
        Mutant::NoVersionCheck,
        Mutant::RelayAckBeforeSend,
        Mutant::SweeperNoFireAtGuard,
        Mutant::MarkOutsideCommit,
        Mutant::StaleIndexUnchecked,
        Mutant::ApplyWhileSuspended,
        Mutant::DrainWhileSuspended,
        Mutant::ReleaseLastBlockOnly,
        Mutant::RelayNoGroupHoldback,
        Mutant::AckRefusedStatusEvent,
        Mutant::OperatorRowsRepoint,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mutant::NoVersionCheck => "no-version-check",
            Mutant::RelayAckBeforeSend => "relay-ack-before-send",
            Mutant::SweeperNoFireAtGuard => "sweeper-no-fire-at-guard",
            Mutant::MarkOutsideCommit => "mark-outside-commit",
            Mutant::StaleIndexUnchecked => "stale-index-unchecked",
            Mutant::ApplyWhileSuspended => "apply-while-suspended",
            Mutant::DrainWhileSuspended => "drain-while-suspended",
            Mutant::ReleaseLastBlockOnly => "release-last-block-only",
            Mutant::RelayNoGroupHoldback => "relay-no-group-holdback",
            Mutant::AckRefusedStatusEvent => "ack-refused-status-event",
            Mutant::OperatorRowsRepoint => "operator-rows-repoint",
        }
    }

    pub fn by_name(name: &str) -> Option<Mutant> {
        Mutant::ALL.into_iter().find(|m| m.name() == name)
    }

    /// `bounds` with what the hazard needs to show: the operator, for the gate's mutants;
    /// rows a release commits, for the release's and the operator's; a refused entry and a
    /// block of two rows to one target, for the relay's; the bus, for the status events'.
    pub fn bounds(self, bounds: Bounds) -> Bounds {
        let suspended = Bounds {
            timed: true,
            suspend: true,
            ..bounds
        };
        match self {
            Mutant::ApplyWhileSuspended | Mutant::DrainWhileSuspended => suspended,
            Mutant::ReleaseLastBlockOnly | Mutant::OperatorRowsRepoint => Bounds {
                emits: true,
                ..suspended
            },
            Mutant::RelayNoGroupHoldback => Bounds {
                timed: true,
                emits: true,
                refusals: bounds.refusals.max(1),
                ..bounds
            },
            Mutant::AckRefusedStatusEvent => Bounds {
                bus: true,
                refusals: bounds.refusals.max(1),
                ..suspended
            },
            _ => bounds,
        }
    }
}

/// One step of the system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The first idle worker receives the queue's message at this index.
    Receive(usize, usize),
    /// Worker `w` makes its next call.
    Work(usize),
    /// Worker `w` publishes its rows, and the queue refuses the entry at this index.
    RefuseWorker(usize, usize),
    /// The relay publishes its row (or puts its status event), and it is refused.
    RefuseRelay,
    /// The operator publishes the last block's rows, and the entry at this index is refused.
    RefuseOperator(usize),
    /// The scheduled relay makes its next call (its read starts a pass).
    Relay,
    /// The scheduled sweeper makes its next call (its due-index query starts a sweep).
    Sweep,
    /// The operator makes its next call (its loads start a command).
    Operate,
    /// Worker `w`, the relay or the sweeper dies; what it held in memory is gone.
    CrashWorker(usize),
    CrashRelay,
    CrashSweeper,
    /// The operator's command dies before its commit; the operator runs it again.
    CrashOperator,
    /// The in-flight message at this index becomes visible again.
    Expire(usize),
    /// The due index catches up with the timers table.
    IndexCatchUp,
    /// SQS forgets the deduplication ids it saw.
    WindowPasses,
    /// The clock moves one tick.
    Tick,
}

/// The protocol, within `bounds`, with at most one planted hazard.
#[derive(Clone, Debug)]
pub struct Protocol {
    pub bounds: Bounds,
    pub mutant: Option<Mutant>,
    /// The release and the operator as the code had them before issue 43's fix (what
    /// `release-last-block-only` and `operator-rows-repoint` plant), for the replay of
    /// code that does not have the fix yet.
    pub legacy: bool,
}

impl Protocol {
    pub fn new(bounds: Bounds, mutant: Option<Mutant>) -> Self {
        Protocol {
            bounds,
            mutant,
            legacy: false,
        }
    }

    /// The protocol as the code had it before the fix of the release and the operator.
    pub fn legacy(bounds: Bounds) -> Self {
        Protocol {
            legacy: true,
            ..Protocol::new(bounds, None)
        }
    }

    /// The release publishes at its end only, with no last block first (the old code).
    pub fn releases_at_end(&self) -> bool {
        self.legacy || self.mutant == Some(Mutant::ReleaseLastBlockOnly)
    }

    /// The operator publishes the execution's last block before its status commit.
    pub fn operator_flushes(&self) -> bool {
        !self.legacy && self.mutant != Some(Mutant::OperatorRowsRepoint)
    }

    /// The system right after the operator's creates and sends: the `Start`s published
    /// (and their rows acked), then the client's events for the timed execution.
    pub fn initial(&self) -> State {
        let mut items = [Item::ABSENT; EXECUTIONS];
        let mut queue = Vec::new();
        let mut recent = 0u64;
        let mut send = |msg: Msg, queue: &mut Vec<Queued>| {
            recent |= 1 << msg.natural_dedup();
            queue.push(Queued {
                msg,
                dedup: msg.natural_dedup(),
                receipt: 0,
                in_flight: false,
            });
        };
        let created = Item {
            version: 1,
            st: St::Pending,
            processed: 0,
            last_rows: 0,
            suspended: false,
            cancelled: false,
            parked: Parked::EMPTY,
        };
        let mut sent_timed = 0;
        if self.bounds.children > 0 {
            items[PARENT] = created;
            send(Msg::Start(PARENT), &mut queue);
        }
        if self.bounds.timed {
            items[TIMED] = created;
            send(Msg::Start(TIMED), &mut queue);
            if self.bounds.leave_back {
                send(Msg::Leave, &mut queue);
                send(Msg::Back, &mut queue);
                sent_timed = Msg::Leave.mark() | Msg::Back.mark();
            }
        }
        let operator = if self.bounds.timed && self.bounds.suspend {
            Operator::Ready(Command::Suspend)
        } else {
            Operator::Finished
        };
        State {
            now: 0,
            items,
            rows: Vec::new(),
            next_seq: 0,
            timer: None,
            index: None,
            recheck: None,
            recheck_index: None,
            held: false,
            moving: (None, None),
            queue,
            recent,
            workers: vec![Worker::Idle; self.bounds.workers as usize],
            relay: Relay::Idle,
            sweeper: Sweeper::Idle,
            operator,
            budget: Budget {
                crashes: self.bounds.crashes,
                leases: self.bounds.leases,
                windows: self.bounds.windows,
                refusals: self.bounds.refusals,
            },
            ghost: Ghost {
                sent_timed,
                ..Ghost::default()
            },
        }
    }

    /// The child executions the bounds include.
    pub fn children(&self) -> impl Iterator<Item = (u8, usize)> {
        (0..self.bounds.children).map(|i| (i, CHILD[i as usize]))
    }
}

/// Workers are interchangeable: states that differ only in which worker holds what are
/// one state (a message's receipt, not the worker, says who may delete it).
pub fn representative(state: &State) -> State {
    let mut rep = state.clone();
    rep.workers.sort();
    rep
}

/// The message at `index` can be received: visible, first of its group, and its group has
/// nothing in flight (SQS FIFO hands a group out one message at a time, in order).
pub fn receivable(state: &State, index: usize) -> bool {
    let m = state.queue[index];
    if m.in_flight {
        return false;
    }
    let group = m.msg.group();
    !state.queue[..index].iter().any(|o| o.msg.group() == group)
        && !state.queue[index..]
            .iter()
            .any(|o| o.in_flight && o.msg.group() == group)
}

/// Whether a timed execution exists and is in a state a `Timeout` of `f` would time out.
pub fn waiting_for(state: &State, f: u8) -> bool {
    state.items[TIMED].st == St::Waiting(f)
}

/// A commit conditioned on `expect` (the version loaded) holds on `item`, or the mutant
/// that drops the condition is planted.
pub fn cas_holds(model: &Protocol, item: &Item, expect: u8) -> bool {
    item.version == expect || model.mutant == Some(Mutant::NoVersionCheck)
}
