//! A store that forwards every call to an inner store through a hook: the seam of the
//! tests that make a store fail, die, stall or interleave at chosen calls, so that each
//! says only what it does differently and none forwards the whole trait by hand.
//!
//! [`HookedStore`] is the wrapper. A type that already has a shape of its own (fields a
//! test sets by name) gets the same forwarding with [`forward_through_hook!`] once it
//! implements [`Hooked`].

// each test binary reads only the calls, arguments and hooks it cares about
#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use stm_core::Execution;
use stm_store::{ExecutionStore, StoreError, Written};

/// A call a hooked store forwards, with the arguments the hooks so far look at (a new hook
/// adds the ones it needs). `check_commit` is not among them: it makes no call, so it is
/// forwarded unhooked.
#[derive(Debug, Clone, Copy)]
pub enum Call<'a> {
    Load {
        id: &'a str,
    },
    LoadForEvent {
        id: &'a str,
    },
    LoadForEvents {
        id: &'a str,
        event_ids: &'a [&'a str],
    },
    /// The execution as it is before the commit (after it, for [`StoreHook::after`]), and
    /// what the commit writes with it.
    Commit {
        exe: &'a Execution,
        commit: &'a stm_store::Commit,
    },
    IsProcessed,
    /// A counted join's report recorded in its rows.
    ReportToJoin,
    Routes,
    PutRoutes,
    AddTallies,
    Tally,
    /// A parked event's number taken (its counter's `ADD`).
    TakeParkNumber {
        id: &'a str,
    },
    LastParkNumber,
    /// A parked event's row written without the item (checked against its version).
    Park {
        id: &'a str,
    },
    ParkedEvents,
    ListExecutions,
    InStates,
    PendingOutbox,
    AckOutbox,
    PendingSpawns,
    AckSpawn,
    PendingRowsOf,
    OldestPendingSeqs,
    PendingRows,
    AckRows,
    DueTimers,
    DeleteTimer,
    ArmedTimer,
    TimersOf,
    ClaimTimer,
    ReadTrace,
    AppendTrace,
    Purge,
    IdsWithPrefix,
}

impl Call<'_> {
    /// One of the loads of an execution (`load`, `load_for_event`, `load_for_events`).
    pub fn is_load(&self) -> bool {
        matches!(
            self,
            Call::Load { .. } | Call::LoadForEvent { .. } | Call::LoadForEvents { .. }
        )
    }
}

/// What a hooked store asks around each call. Every method defaults to doing nothing.
#[async_trait]
pub trait StoreHook: Send + Sync {
    /// Before the call: an `Err` fails it without reaching the inner store.
    async fn before(&self, _call: &Call<'_>) -> Result<(), StoreError> {
        Ok(())
    }

    /// Once the inner store answered, whatever it answered (and after [`committed`]).
    ///
    /// [`committed`]: StoreHook::committed
    async fn after(&self, _call: &Call<'_>) {}

    /// After a commit the inner store made durable: an `Err` fails the call although the
    /// write stays (a process that dies before it can use the result).
    fn committed(&self, _written: &Written) -> Result<(), StoreError> {
        Ok(())
    }

    /// `true`: `oldest_pending_seqs` is answered from the store's own `pending_outbox`,
    /// then its `pending_spawns` (each through the hook), instead of the inner store's one
    /// read, so the hook can act between the two reads as between a relay's. Every row
    /// then counts as settled.
    fn reads_pending_apart(&self) -> bool {
        false
    }
}

/// A store under a hook: where its calls go, and what it asks around them.
pub trait Hooked: Send + Sync {
    type Hook: StoreHook;
    fn inner(&self) -> &dyn ExecutionStore;
    fn hook(&self) -> &Self::Hook;
}

/// `call` through `store`'s hook: `before` (which may fail it), the inner call, `after`.
pub async fn through<S, T, F>(store: &S, call: Call<'_>, run: impl FnOnce() -> F) -> Result<T, StoreError>
where
    S: Hooked + ?Sized,
    F: Future<Output = Result<T, StoreError>>,
{
    store.hook().before(&call).await?;
    let out = run().await;
    store.hook().after(&call).await;
    out
}

/// A commit through `store`'s hook: as [`through`], with [`StoreHook::committed`] asked
/// once the inner store made the write durable.
pub async fn commit_through<S: Hooked + ?Sized>(
    store: &S,
    exe: &mut Execution,
    commit: stm_store::Commit,
) -> Result<Written, StoreError> {
    let hook = store.hook();
    hook.before(&Call::Commit {
        exe: &*exe,
        commit: &commit,
    })
    .await?;
    // the inner store takes the commit; `after` is shown a copy
    let copy = commit.clone();
    let out = store.inner().commit(exe, commit).await;
    let out = out.and_then(|written| hook.committed(&written).map(|()| written));
    hook.after(&Call::Commit {
        exe: &*exe,
        commit: &copy,
    })
    .await;
    out
}

/// `oldest_pending_seqs` through `store`'s hook (see [`StoreHook::reads_pending_apart`]).
pub async fn oldest_pending_seqs_through<S: Hooked + ExecutionStore + ?Sized>(
    store: &S,
    limit: usize,
    settled_before: f64,
) -> Result<Vec<stm_store::PendingSeq>, StoreError> {
    through(store, Call::OldestPendingSeqs, || async move {
        if !store.hook().reads_pending_apart() {
            return store.inner().oldest_pending_seqs(limit, settled_before).await;
        }
        // the outbox first, as the stores read them (see `ExecutionStore::oldest_pending_seqs`)
        let outbox = store.pending_outbox().await?;
        let spawns = store.pending_spawns().await?;
        Ok(stm_store::PendingSeq::lowest(
            spawns.iter().map(|s| (s.seq, s.json_bytes())),
            outbox.iter().map(|o| (o.seq, o.json_bytes())),
            limit,
        ))
    })
    .await
}

/// `impl ExecutionStore` for a type that implements [`Hooked`]: every method through its
/// hook to its inner store, the trait's provided methods left as they are (they call the
/// forwarded ones). `forward_through_hook!(impl for T)`, or with one bounded type
/// parameter `forward_through_hook!(impl<H: Bound> for T<H>)`. Where it is used, it
/// expects [`Call`], [`Hooked`] and the three `*through` functions of this file in scope.
macro_rules! forward_through_hook {
    (impl $(<$param:ident: $bound:path>)? for $ty:ty) => {
        // a block of its own, for the imports
        const _: () = {
            use stm_core::{Execution, Map};
            use stm_store::{
                Commit, DueCursor, DueTimer, ExecutionPage, ExecutionStore, InState, JoinReport, JoinTally,
                ListQuery, OutboxEntry, PendingRows, PendingSeq, SpawnEntry, StoreError, TimerClaim, Written,
            };

            #[async_trait::async_trait]
            impl$(<$param: $bound>)? ExecutionStore for $ty {
                async fn load(&self, id: &str) -> Result<Option<Execution>, StoreError> {
                    through(self, Call::Load { id }, || self.inner().load(id)).await
                }
                async fn load_for_event(
                    &self,
                    id: &str,
                    event_id: &str,
                ) -> Result<(Option<Execution>, bool), StoreError> {
                    let call = Call::LoadForEvent { id };
                    through(self, call, || self.inner().load_for_event(id, event_id)).await
                }
                async fn load_for_events(
                    &self,
                    id: &str,
                    event_ids: &[&str],
                ) -> Result<(Option<Execution>, Vec<bool>), StoreError> {
                    let call = Call::LoadForEvents { id, event_ids };
                    through(self, call, || self.inner().load_for_events(id, event_ids)).await
                }
                fn check_commit(&self, exe: &Execution, commit: &Commit) -> Result<(), StoreError> {
                    self.inner().check_commit(exe, commit)
                }
                async fn commit(&self, exe: &mut Execution, commit: Commit) -> Result<Written, StoreError> {
                    commit_through(self, exe, commit).await
                }
                async fn is_processed(&self, id: &str, event_id: &str) -> Result<bool, StoreError> {
                    through(self, Call::IsProcessed, || self.inner().is_processed(id, event_id)).await
                }
                async fn report_to_join(&self, report: &JoinReport) -> Result<Option<JoinTally>, StoreError> {
                    through(self, Call::ReportToJoin, || self.inner().report_to_join(report)).await
                }
                async fn take_park_number(&self, id: &str) -> Result<u64, StoreError> {
                    through(self, Call::TakeParkNumber { id }, || self.inner().take_park_number(id)).await
                }
                async fn last_park_number(&self, id: &str) -> Result<u64, StoreError> {
                    through(self, Call::LastParkNumber, || self.inner().last_park_number(id)).await
                }
                async fn park(
                    &self,
                    id: &str,
                    version: i64,
                    parked: &stm_store::ParkedEvent,
                ) -> Result<stm_store::Parked, StoreError> {
                    through(self, Call::Park { id }, || self.inner().park(id, version, parked)).await
                }
                async fn parked_events(
                    &self,
                    id: &str,
                    after: u64,
                    through_number: u64,
                ) -> Result<Vec<stm_store::ParkedEvent>, StoreError> {
                    through(self, Call::ParkedEvents, || self.inner().parked_events(id, after, through_number)).await
                }
                async fn list_executions(&self, query: &ListQuery) -> Result<ExecutionPage, StoreError> {
                    through(self, Call::ListExecutions, || self.inner().list_executions(query)).await
                }
                async fn pending_outbox(&self) -> Result<Vec<OutboxEntry>, StoreError> {
                    through(self, Call::PendingOutbox, || self.inner().pending_outbox()).await
                }
                async fn ack_outbox(&self, seq: i64) -> Result<(), StoreError> {
                    through(self, Call::AckOutbox, || self.inner().ack_outbox(seq)).await
                }
                async fn pending_spawns(&self) -> Result<Vec<SpawnEntry>, StoreError> {
                    through(self, Call::PendingSpawns, || self.inner().pending_spawns()).await
                }
                async fn ack_spawn(&self, seq: i64) -> Result<(), StoreError> {
                    through(self, Call::AckSpawn, || self.inner().ack_spawn(seq)).await
                }
                async fn pending_rows_of(&self, id: &str) -> Result<PendingRows, StoreError> {
                    through(self, Call::PendingRowsOf, || self.inner().pending_rows_of(id)).await
                }
                async fn oldest_pending_seqs(
                    &self,
                    limit: usize,
                    settled_before: f64,
                ) -> Result<Vec<PendingSeq>, StoreError> {
                    oldest_pending_seqs_through(self, limit, settled_before).await
                }
                async fn pending_rows(
                    &self,
                    spawns: &[i64],
                    outbox: &[i64],
                ) -> Result<PendingRows, StoreError> {
                    through(self, Call::PendingRows, || self.inner().pending_rows(spawns, outbox)).await
                }
                async fn ack_rows(&self, spawns: &[i64], outbox: &[i64]) -> Result<(), StoreError> {
                    through(self, Call::AckRows, || self.inner().ack_rows(spawns, outbox)).await
                }
                async fn in_states(
                    &self,
                    definition_id: &str,
                    paths: &[String],
                    entered_by: Option<f64>,
                ) -> Result<Vec<InState>, StoreError> {
                    through(self, Call::InStates, || {
                        self.inner().in_states(definition_id, paths, entered_by)
                    })
                    .await
                }
                async fn due_timers(&self, now: f64) -> Result<Vec<DueTimer>, StoreError> {
                    through(self, Call::DueTimers, || self.inner().due_timers(now)).await
                }
                async fn due_page(&self, now: f64, cursor: &mut DueCursor, limit: usize) -> Result<Vec<DueTimer>, StoreError> {
                    through(self, Call::DueTimers, || self.inner().due_page(now, cursor, limit)).await
                }
                async fn delete_timer(&self, id: &str, path: &str, fire_at: f64) -> Result<(), StoreError> {
                    through(self, Call::DeleteTimer, || self.inner().delete_timer(id, path, fire_at)).await
                }
                async fn armed_timer(&self, id: &str, path: &str) -> Result<Option<f64>, StoreError> {
                    through(self, Call::ArmedTimer, || self.inner().armed_timer(id, path)).await
                }
                async fn armed_timer_in_trace(&self, id: &str, path: &str) -> Result<Option<(f64, Option<String>)>, StoreError> {
                    through(self, Call::ArmedTimer, || self.inner().armed_timer_in_trace(id, path)).await
                }
                async fn timers_of(&self, id: &str) -> Result<Vec<stm_store::ArmedTimer>, StoreError> {
                    through(self, Call::TimersOf, || self.inner().timers_of(id)).await
                }
                async fn claim_timer(
                    &self,
                    id: &str,
                    path: &str,
                    fire_at: f64,
                ) -> Result<TimerClaim, StoreError> {
                    through(self, Call::ClaimTimer, || self.inner().claim_timer(id, path, fire_at)).await
                }
                async fn read_trace(&self, id: &str) -> Result<Vec<Map>, StoreError> {
                    through(self, Call::ReadTrace, || self.inner().read_trace(id)).await
                }
                async fn append_trace(&self, id: &str, entry: Map) -> Result<(), StoreError> {
                    through(self, Call::AppendTrace, || self.inner().append_trace(id, entry)).await
                }
                async fn purge(&self, id: &str, expected_version: i64) -> Result<bool, StoreError> {
                    through(self, Call::Purge, || self.inner().purge(id, expected_version)).await
                }
                async fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
                    through(self, Call::IdsWithPrefix, || self.inner().ids_with_prefix(prefix)).await
                }
                async fn routes(&self) -> Result<stm_store::Routes, StoreError> {
                    through(self, Call::Routes, || self.inner().routes()).await
                }
                async fn put_routes(&self, routes: &stm_store::Routes, read: u64) -> Result<bool, StoreError> {
                    through(self, Call::PutRoutes, || self.inner().put_routes(routes, read)).await
                }
                async fn add_tallies(&self, adds: &[(String, stm_store::Tally)], expires: i64) -> Result<(), StoreError> {
                    through(self, Call::AddTallies, || self.inner().add_tallies(adds, expires)).await
                }
                async fn tally(&self, keys: &[String]) -> Result<stm_store::Tally, StoreError> {
                    through(self, Call::Tally, || self.inner().tally(keys)).await
                }
            }
        };
    };
}
// a path to the macro for the types outside this file; unused where a test binary
// includes this file alone
#[allow(unused_imports)]
pub(crate) use forward_through_hook;

/// `inner` with `hook` asked around every call.
pub struct HookedStore<H> {
    pub inner: Arc<dyn ExecutionStore>,
    pub hook: H,
}

impl<H> HookedStore<H> {
    pub fn new(inner: Arc<dyn ExecutionStore>, hook: H) -> Self {
        HookedStore { inner, hook }
    }
}

impl<H: StoreHook> Hooked for HookedStore<H> {
    type Hook = H;
    fn inner(&self) -> &dyn ExecutionStore {
        self.inner.as_ref()
    }
    fn hook(&self) -> &H {
        &self.hook
    }
}

forward_through_hook!(impl<H: StoreHook> for HookedStore<H>);
