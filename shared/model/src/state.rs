//! The model's state: the store (executions, rows, timers and the lagging due index), the
//! FIFO queue, each actor's local state, the budgets of faults left and the ghost
//! variables the properties read. Everything is small integers and short vectors, so a
//! state hashes fast and millions fit in memory.

/// The executions of the model. `PARENT` fans out over `CHILDREN`; `TIMED` waits on a
/// timer and is left and re-entered by client events.
pub type Exe = usize;
pub const PARENT: Exe = 0;
pub const CHILD: [Exe; 2] = [1, 2];
pub const TIMED: Exe = 3;
pub const EXECUTIONS: usize = 4;
/// The group the timed execution's reports go to (with `Bounds::emits`): an execution
/// outside the model, whose consumer takes them in queue order. It has no item here, so
/// its messages are recorded as delivered when they enter the queue (FIFO: the order
/// they enter is the order it receives them).
pub const OBSERVER: Exe = 4;

/// A message body, by what it means (the real message's group is its target).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Msg {
    /// The `Start` an operator's `create` published.
    Start(Exe),
    /// A spawn intent for fan-out child `i`.
    Spawn(u8),
    /// Child `i`'s `Finished` report to the parent.
    Finished(u8),
    /// Client events for `TIMED`, sent in this order.
    Leave,
    Back,
    /// The `Timeout` of `TIMED`'s timer armed for this tick.
    Timeout(u8),
    /// The `Timeout` of `TIMED`'s `@parked` recheck timer armed for this tick: never a
    /// step of the machine, it releases what waits on the item.
    Recheck(u8),
    /// A status event's row (no target): the operator's commits write one for every status
    /// they set; the scheduled relay without a status bus deletes it unsent, the inline
    /// flush leaves it. Never a message.
    Notice,
    /// The row the timed execution's step writes for the observer (with `Bounds::emits`):
    /// 0 for its `Leave`, 1 for its `Back`, so a released parked event writes rows too.
    Report(u8),
}

impl Msg {
    /// The execution whose FIFO group carries it.
    pub fn group(self) -> Exe {
        match self {
            Msg::Start(e) => e,
            Msg::Spawn(i) => CHILD[i as usize],
            Msg::Finished(_) => PARENT,
            // a notice's row is the timed execution's (it has no group: never published)
            Msg::Leave | Msg::Back | Msg::Timeout(_) | Msg::Recheck(_) | Msg::Notice => TIMED,
            Msg::Report(_) => OBSERVER,
        }
    }

    /// The execution whose commit writes it as a row (`None`: the operator's sends):
    /// rows keep their order per source and target.
    pub fn source(self) -> Option<Exe> {
        match self {
            Msg::Spawn(_) => Some(PARENT),
            Msg::Finished(i) => Some(CHILD[i as usize]),
            Msg::Report(_) | Msg::Notice => Some(TIMED),
            _ => None,
        }
    }

    /// The bit of its event id among its target's processed marks (spawn intents have none:
    /// the child's existence is their mark; nor has a recheck: it never commits a step).
    pub fn mark(self) -> u16 {
        match self {
            Msg::Start(_) => 1,
            Msg::Spawn(_) => 0,
            Msg::Finished(i) => 1 << (1 + i),
            Msg::Leave => 1 << 3,
            Msg::Back => 1 << 4,
            Msg::Timeout(f) => 1 << (5 + f),
            Msg::Recheck(_) | Msg::Notice | Msg::Report(_) => 0,
        }
    }

    /// Its deduplication id when it was not published from a row: derived from the event
    /// (a client's event id, a timer's identity), so a re-send is the same message.
    pub fn natural_dedup(self) -> u8 {
        match self {
            Msg::Start(e) => e as u8,
            Msg::Spawn(i) => 4 + i,
            Msg::Finished(i) => 6 + i,
            Msg::Leave => 8,
            Msg::Back => 9,
            Msg::Timeout(f) => 10 + f,
            Msg::Recheck(f) => 20 + f,
            Msg::Notice => 31,
            Msg::Report(k) => 24 + k,
        }
    }
}

/// A row's deduplication id: from its seq (real: `outbox|seq|event id`, `spawn|seq|child`).
pub fn row_dedup(seq: u8) -> u8 {
    32 + seq
}

/// An execution's state, as far as the protocol cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum St {
    /// No item.
    Absent,
    /// Created, its `Start` not run yet.
    Pending,
    /// The parent waits in its fan-out; bit `i`: child `i`'s `Finished` seen.
    Notifying(u8),
    /// The parent's join fired.
    AllSent,
    /// A child: created, started and finished in one step.
    ChildDone,
    /// `TIMED` in its timed state, its timer armed for this tick.
    Waiting(u8),
    /// `TIMED` left its timed state.
    Away,
    /// `TIMED` timed out (final).
    Expired,
}

/// One execution item (with its processed marks, which share its partition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Item {
    pub version: u8,
    pub st: St,
    /// Bits of [`Msg::mark`].
    pub processed: u16,
    /// The seqs (bits) of its last commit that wrote rows: what a duplicate re-publishes.
    pub last_rows: u16,
    /// Its status is `SUSPENDED` (its state, `st`, is where it was suspended).
    pub suspended: bool,
    /// Its status is `CANCELLED` (the operator's forceful cancel): it takes no more events.
    pub cancelled: bool,
    /// The events kept on the item while it is suspended (`parked_events`), oldest first.
    pub parked: Parked,
}

impl Item {
    pub const ABSENT: Item = Item {
        version: 0,
        st: St::Absent,
        processed: 0,
        last_rows: 0,
        suspended: false,
        cancelled: false,
        parked: Parked::EMPTY,
    };
}

/// An item's parked events, oldest first: up to six (the timed execution's `Leave`,
/// `Back` and its `Timeout`s, one per tick).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Parked {
    pub len: u8,
    pub msgs: [Msg; 6],
}

impl Parked {
    pub const EMPTY: Parked = Parked {
        len: 0,
        msgs: [Msg::Leave; 6],
    };

    pub fn as_slice(&self) -> &[Msg] {
        &self.msgs[..self.len as usize]
    }

    pub fn first(&self) -> Option<Msg> {
        self.as_slice().first().copied()
    }

    pub fn contains(&self, msg: Msg) -> bool {
        self.as_slice().contains(&msg)
    }

    /// Append `msg` (`false`: no room, which the bounds never reach).
    pub fn push(&mut self, msg: Msg) -> bool {
        if self.len as usize == self.msgs.len() {
            return false;
        }
        self.msgs[self.len as usize] = msg;
        self.len += 1;
        true
    }

    /// Take the oldest off (what a release's commit writes).
    pub fn pop_front(&mut self) {
        if self.len > 0 {
            self.msgs.copy_within(1.., 0);
            self.len -= 1;
            self.msgs[self.len as usize] = Msg::Leave;
        }
    }
}

/// A pending outbox row or spawn intent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Row {
    pub seq: u8,
    pub msg: Msg,
}

/// A message in the FIFO queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Queued {
    pub msg: Msg,
    pub dedup: u8,
    /// Counts receives: a receipt handle is good only while it is the latest.
    pub receipt: u8,
    pub in_flight: bool,
}

/// A received record, as a worker holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rec {
    pub msg: Msg,
    pub dedup: u8,
    pub receipt: u8,
}

/// A step prepared from a load (and a timer claim), waiting for its commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prepared {
    /// The version loaded: the commit's condition (0: the item must not exist).
    pub expect: u8,
    pub st: St,
    /// What the commit writes: `Finished(i)` to the parent, or spawn intents (bits).
    pub emit: Option<Msg>,
    pub spawns: u8,
    pub timer: TimerOp,
    /// The step takes the timed state's `Timeout` transition.
    pub times_out: bool,
    /// The step fires the parent's join.
    pub joins: bool,
    /// The event the step applies: the record's, or the oldest parked one it releases.
    pub applies: Msg,
    /// The step releases the item's oldest parked event (its commit takes it off).
    pub releases: bool,
    /// Mutant `release-last-block-only`: the seqs (bits) the record's earlier release
    /// commits wrote, held in memory to publish at the end (always 0 otherwise).
    pub held: u16,
}

/// A `Timeout` about to be claimed (`claim_timer`) on the execution loaded at `version`
/// in `st`: the record's own, or a parked one being released.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Claiming {
    pub version: u8,
    pub st: St,
    pub applies: Msg,
    pub releases: bool,
    pub held: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimerOp {
    Keep,
    Arm(u8),
    Cancel,
}

/// Where a worker is in one record (a batch of one), between two store or queue calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Worker {
    Idle,
    /// Received; next: load the target (`load_for_event`, or the child's `load`).
    Received(Rec),
    /// A `Timeout` for a running execution (the record's or a parked one); next:
    /// `claim_timer`.
    Claim(Rec, Claiming),
    /// The release of parked events (or the recheck) on this loaded item; next:
    /// `pending_rows_of`, to publish the rows of its last block before anything commits.
    Flush(Rec, Item),
    /// Next: the commit (CAS on this version) that keeps the event on its item: the
    /// execution is suspended (`false`), or it is running and the event goes last among
    /// the parked ones it releases (`true`).
    Park(Rec, u8, bool),
    /// Next: the commit.
    Commit(Rec, Prepared),
    /// Mutant `mark-outside-commit` only: committed without its mark; next, the mark on
    /// its own, then the flush of these rows.
    Mark(Rec, RowSet),
    /// A duplicate (or a child that exists); next: `pending_rows_of`.
    Pending(Rec),
    /// Next: publish these rows (seq bits; their messages are in `rows` or were read),
    /// then ack them, then what `Then` says.
    Publish(Rec, RowSet, Then),
    /// Next: ack (delete) these rows.
    Ack(Rec, RowSet, Then),
    /// A lost CAS; next: release the record (visibility 0).
    Release(Rec),
    /// The batch is answered; next: the event source deletes it (if `ok`).
    Done(Rec, bool),
}

/// What a worker does once the rows it publishes are acked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Then {
    /// The record is handled.
    Done,
    /// An entry was refused: the record is reported failed (released, redelivered).
    Fail,
    /// Go on releasing the parked events of this item (as the worker holds it).
    Release(Item),
}

/// Rows an actor holds in memory between its read and its publish: up to six (two spawn
/// intents, two `Finished`, two notices).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowSet {
    pub len: u8,
    pub rows: [Row; 6],
}

impl RowSet {
    pub fn new(rows: &[Row]) -> RowSet {
        let mut set = RowSet {
            len: 0,
            rows: [Row {
                seq: 0,
                msg: Msg::Leave,
            }; 6],
        };
        for row in rows.iter().take(6) {
            set.rows[set.len as usize] = *row;
            set.len += 1;
        }
        set
    }

    pub fn as_slice(&self) -> &[Row] {
        &self.rows[..self.len as usize]
    }

    /// These rows but the notices (or only the notices).
    pub fn notices(&self, notices: bool) -> RowSet {
        let rows: Vec<Row> = self
            .as_slice()
            .iter()
            .filter(|r| (r.msg == Msg::Notice) == notices)
            .copied()
            .collect();
        RowSet::new(&rows)
    }
}

/// The scheduled relay's pass, one row per read (`RelayBounds::read_rows` 1, so each
/// row is its own `publish_batch` and a refused one holds back its group's later rows):
/// the row it read, the seqs (bits) of the pass still to read, the groups held back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Relay {
    Idle,
    /// Next: publish this row (mutant `relay-ack-before-send`: after its ack).
    Publish(Row, u32, u8),
    /// Next: ack it.
    Ack(Row, u32, u8),
    /// A status event's row; next: put it on the status bus.
    Put(Row, u32, u8),
    /// A status event's row; next: ack it, unsent (no status bus) or put on the bus.
    Drop(Row, u32, u8),
}

/// `TIMED`'s timer paths, in the order the due index lists timers of one `fire_at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimerPath {
    /// `@parked`: the recheck `resume` arms.
    Parked,
    /// `Waiting`: the timed state's timeout.
    Waiting,
}

/// A timer as the due index lists it (ordered by `fire_at`, then path).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Due {
    pub fire: u8,
    pub path: TimerPath,
}

impl Due {
    /// The `Timeout` its firing publishes.
    pub fn msg(self) -> Msg {
        match self.path {
            TimerPath::Parked => Msg::Recheck(self.fire),
            TimerPath::Waiting => Msg::Timeout(self.fire),
        }
    }
}

/// The sweeper, one due timer at a time (`fire_in_order`), the next listed one held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sweeper {
    Idle,
    /// The due index listed this timer; next: the consistent re-read of the timer. The
    /// execution's load, sent with it (`tokio::join!`), may be answered first: it is read
    /// as the sweeper gets there, and `true` says it found the execution suspended or gone.
    Listed(Due, Option<Due>, bool),
    /// Confirmed armed, its execution not suspended; next: publish its `Timeout`.
    Confirmed(Due, Option<Due>),
    /// Published; next: the guarded delete.
    Delete(Due, Option<Due>),
}

/// An operator's command on `TIMED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Command {
    Suspend,
    Resume,
    /// `Control::cancel`: forceful, as `Timed` models no `on Cancel` (`terminate`).
    Cancel,
}

/// The operator: `Control::suspend`, later `Control::resume`, each re-run if it fails.
/// Each attempt of `commit_status` loads the execution at a version, publishes the rows
/// of its last block, then commits on that version (after this many lost CASes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    /// Next: the command's loads (a no-op unless the status is the one it changes).
    Ready(Command),
    /// Loaded; next: `pending_rows_of`, the rows of the execution's last block.
    Pending(Command, u8, u8),
    /// Next: publish them (`publish_batch`), then ack them (what was published: after a
    /// refused entry, with `u8::MAX` lost CASes, the command then fails).
    Publish(Command, RowSet, u8, u8),
    Ack(Command, RowSet, u8, u8),
    /// Next: `commit_status`'s commit.
    Commit(Command, u8, u8),
    Finished,
}

/// Faults still allowed on this path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Budget {
    pub crashes: u8,
    /// Visibility timeouts running out under a live worker (a lease lost to a slow step).
    pub leases: u8,
    /// SQS's 5-minute deduplication window passing.
    pub windows: u8,
    /// Entries refused within a batch publish (`SendMessageBatch`, the bus's
    /// `PutEvents`): the rest of the batch goes through.
    pub refusals: u8,
}

/// Ghost variables: history the properties read, never the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Ghost {
    /// Per execution: the marks of the events committed (applied) so far.
    pub applied: [u16; EXECUTIONS],
    /// An event committed a second time.
    pub applied_twice: bool,
    /// An event committed before one its producer sent earlier.
    pub out_of_order: bool,
    /// Messages committed as rows (bits of [`Msg::mark`] per target, spawns below).
    pub emitted: [u16; EXECUTIONS],
    pub spawned: u8,
    /// How many times each child was created.
    pub created: [u8; 2],
    pub joins: u8,
    /// A `Timeout` took its transition before its visit's timer was due.
    pub early_timeout: bool,
    /// The sweeper decided to fire on a read that did not match the table.
    pub unconfirmed_fire: bool,
    /// `TIMED`'s events sent so far (bits of [`Msg::mark`]): the client's, the `Timeout`s
    /// the sweeper published.
    pub sent_timed: u16,
    /// A step was committed on a suspended execution.
    pub applied_while_suspended: bool,
    /// A parked event was released (a reachability check's witness).
    pub released: bool,
    /// Rows (seq bits) published since their commit and not acked yet.
    pub published: u32,
    /// A row entered the queue while an earlier row of the same execution to the same
    /// target was still pending unpublished: its target receives them out of commit order.
    pub rows_reordered: bool,
    /// Reports committed, and those delivered to the observer (bits of `Report(k)`).
    pub reports: u8,
    pub delivered: u8,
    /// A report reached the observer twice.
    pub delivered_twice: bool,
    /// Status events committed, and those the bus took (seq bits).
    pub notices: u32,
    pub announced: u32,
    /// A status event reached the bus twice.
    pub announced_twice: bool,
    /// A released parked event's rows reached their target (a reachability witness).
    pub released_rows: bool,
}

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub now: u8,
    pub items: [Item; EXECUTIONS],
    /// Pending outbox rows and spawn intents, by seq.
    pub rows: Vec<Row>,
    pub next_seq: u8,
    /// `TIMED`'s timer (its timed state's path): the tick it is armed for.
    pub timer: Option<u8>,
    /// The due index's (lagging) view of it.
    pub index: Option<u8>,
    /// `TIMED`'s `@parked` recheck timer, and the index's view of it.
    pub recheck: Option<u8>,
    pub recheck_index: Option<u8>,
    /// `TIMED`'s timers are held out of the due index (`suspend` held them; leaving
    /// SUSPENDED lists them again).
    pub held: bool,
    /// The timers (`timer`, `recheck`) the operator's last load read to hold or list again
    /// (`commit_status`'s `timers_moving`): its commit writes them as read.
    pub moving: (Option<u8>, Option<u8>),
    pub queue: Vec<Queued>,
    /// Deduplication ids sent within the window (bits).
    pub recent: u64,
    pub workers: Vec<Worker>,
    pub relay: Relay,
    pub sweeper: Sweeper,
    pub operator: Operator,
    pub budget: Budget,
    pub ghost: Ghost,
}

impl State {
    /// Nothing left to do up to the model's time horizon: no message, no pending row, no
    /// parked event, the operator done, every actor idle, and no timer that could fall due.
    pub fn quiescent(&self, horizon: u8) -> bool {
        self.queue.is_empty()
            && self.rows.is_empty()
            // a cancelled execution's parked events are never applied
            && self.items.iter().all(|i| (i.parked.len == 0 || i.cancelled) && !i.suspended)
            && self.workers.iter().all(|w| *w == Worker::Idle)
            && self.relay == Relay::Idle
            && self.sweeper == Sweeper::Idle
            && self.operator == Operator::Finished
            && self.timer.is_none_or(|f| f > horizon)
            && self.recheck.is_none_or(|f| f > horizon)
    }

    /// The timer armed on `path`.
    pub fn armed(&self, path: TimerPath) -> Option<u8> {
        match path {
            TimerPath::Parked => self.recheck,
            TimerPath::Waiting => self.timer,
        }
    }

    /// What the due index lists once it has caught up: the timers, unless held.
    pub fn indexed(&self) -> (Option<u8>, Option<u8>) {
        if self.held {
            (None, None)
        } else {
            (self.timer, self.recheck)
        }
    }

    pub fn armed_mut(&mut self, path: TimerPath) -> &mut Option<u8> {
        match path {
            TimerPath::Parked => &mut self.recheck,
            TimerPath::Waiting => &mut self.timer,
        }
    }
}
