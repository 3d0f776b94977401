//! Safe rollouts: the alias's routing read when an execution is created, the canary's
//! finished executions counted, and the rollback that returns a failing canary's weight to
//! 0 by itself (the routes and tallies themselves are `stm_store::route`'s).
//!
//! - **Routing.** [`RouteCache`] keeps the routes a second: a process that creates
//!   executions reads the routes item at most once a second, whatever its rate (the item
//!   is one key, which DynamoDB serves 3,000 strong reads a second).
//! - **Counting.** When a finished execution's status event is delivered (the relay or
//!   the inline flush), and its version is its machine's canary, it is added to the
//!   current window's tally ([`Tallies`]). So the rate needs status events `all`
//!   (DONE and CANCELLED are the finished executions that did not fail):
//!   [`RolloutPolicy::from_lookup`] refuses a threshold without them.
//! - **Rollback.** The sweeper's scheduled run ([`evaluate`]) reads each canary's tally
//!   over the current and the previous window; at or past the threshold, over at least the
//!   minimum of finished executions, the canary's weight goes to 0 (a write guarded by
//!   the routes' generation), and then its status event goes on the bus, once: the route
//!   remembers whether it was announced, so a crash between the two announces it on the
//!   next run. Each rollback also counts [`ROLLBACKS`], which the template's alarm
//!   watches.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use stm_core::version::Version;
use stm_core::Status;
use stm_store::route::{self, RollBack, Routes, Tally};
use stm_store::{ExecutionStore, OutboxEntry, StoreError};

use crate::status::{notice_status, BusEvent, StatusBus, SOURCE};

/// The detail type of a rollback's event on the status bus.
pub const ROLLBACK_DETAIL_TYPE: &str = "Statechart Rollout Rolled Back";
/// Sweeper metric: canaries whose weight went back to 0 (the template's alarm is on it).
pub const ROLLBACKS: &str = "RolloutsRolledBack";
/// How long a process keeps the routes it read.
pub const ROUTES_TTL: Duration = Duration::from_secs(1);

/// The routes, read at most once per [`ROUTES_TTL`].
#[derive(Debug)]
pub struct RouteCache {
    ttl: Duration,
    read: Mutex<Option<(Instant, Arc<Routes>)>>,
}

impl Default for RouteCache {
    fn default() -> Self {
        RouteCache::new(ROUTES_TTL)
    }
}

impl RouteCache {
    pub fn new(ttl: Duration) -> Self {
        RouteCache {
            ttl,
            read: Mutex::new(None),
        }
    }

    /// The routes: the last read if it is younger than the cache's ttl, else a new one.
    pub async fn routes(&self, store: &dyn ExecutionStore) -> Result<Arc<Routes>, StoreError> {
        if let Some((at, routes)) = self.lock().as_ref() {
            if at.elapsed() < self.ttl {
                return Ok(routes.clone());
            }
        }
        let routes = Arc::new(store.routes().await?);
        *self.lock() = Some((Instant::now(), routes.clone()));
        Ok(routes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Instant, Arc<Routes>)>> {
        self.read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// When a canary is rolled back: `STM_ROLLBACK_FAILURE_RATE` (0, the default, turns it
/// off), `STM_ROLLBACK_MIN_FINISHED` and `STM_ROLLBACK_WINDOW_SECONDS`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RolloutPolicy {
    /// FAILED among finished at which the canary goes back to 0, in (0, 1]; 0: never.
    pub failure_rate: f64,
    /// The fewest finished executions the rate is taken over.
    pub min_finished: u64,
    /// The tally windows' length: the rate is over the current and the previous one.
    pub window_seconds: u64,
}

impl Default for RolloutPolicy {
    fn default() -> Self {
        RolloutPolicy {
            failure_rate: 0.0,
            min_finished: 20,
            window_seconds: 300,
        }
    }
}

/// A rollout setting that cannot be used, and why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    #[error("{name}={value:?}: {expected}")]
    Invalid {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error(
        "{rate_var} is set, but status events are {level}: the failure rate counts finished \
         executions from their status events, so set {events_var}=all (the template's \
         StatusEvents=all) or {rate_var}=0"
    )]
    NeedsStatusEvents {
        rate_var: &'static str,
        events_var: &'static str,
        level: crate::status::StatusEvents,
    },
}

impl RolloutPolicy {
    /// The policy from the environment (`get` looks a variable up), checked against the
    /// status events' `level`.
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
        level: crate::status::StatusEvents,
    ) -> Result<Self, PolicyError> {
        let mut policy = RolloutPolicy::default();
        if let Some(rate) = setting(
            &get,
            stm_env::ROLLBACK_FAILURE_RATE,
            |r: &f64| (0.0..=1.0).contains(r),
            "expected a number from 0 (off) to 1, such as 0.05 for 5%",
        )? {
            policy.failure_rate = rate;
        }
        if let Some(min) = setting(
            &get,
            stm_env::ROLLBACK_MIN_FINISHED,
            |n: &u64| *n >= 1,
            "expected a whole number of at least 1",
        )? {
            policy.min_finished = min;
        }
        if let Some(seconds) = setting(
            &get,
            stm_env::ROLLBACK_WINDOW_SECONDS,
            |n: &u64| (1..=86_400).contains(n),
            "expected whole seconds from 1 to 86400",
        )? {
            policy.window_seconds = seconds;
        }
        if policy.enabled() && level != crate::status::StatusEvents::All {
            return Err(PolicyError::NeedsStatusEvents {
                rate_var: stm_env::ROLLBACK_FAILURE_RATE,
                events_var: stm_env::STATUS_EVENTS,
                level,
            });
        }
        Ok(policy)
    }

    pub fn enabled(&self) -> bool {
        self.failure_rate > 0.0
    }

    /// The windows the rate is over at `now`: the previous and the current.
    pub fn windows(&self, now: f64) -> [i64; 2] {
        let current = route::window_of(now, self.window_seconds);
        [current - 1, current]
    }

    /// When a tally item written at `now` may go: after both windows that read it.
    fn expires(&self, now: f64) -> i64 {
        now as i64 + 3 * self.window_seconds as i64
    }
}

/// Variable `name` read with `get` and parsed: `None` when unset or blank, an error saying
/// what was `expected` when it does not parse or is not `valid`.
fn setting<T: std::str::FromStr>(
    get: &impl Fn(&str) -> Option<String>,
    name: &'static str,
    valid: impl Fn(&T) -> bool,
    expected: &'static str,
) -> Result<Option<T>, PolicyError> {
    let Some(value) = get(name).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    match value.trim().parse::<T>() {
        Ok(parsed) if valid(&parsed) => Ok(Some(parsed)),
        _ => Err(PolicyError::Invalid {
            name,
            value,
            expected,
        }),
    }
}

/// What a status bus adds its finished executions to: the policy's windows, and the
/// routes that say which versions are canaries.
#[derive(Debug)]
pub struct Tallies {
    policy: RolloutPolicy,
    routes: RouteCache,
}

impl Tallies {
    pub fn new(policy: RolloutPolicy) -> Self {
        Tallies {
            policy,
            routes: RouteCache::default(),
        }
    }

    /// The policy its counts are kept by, which the sweeper's [`evaluate`] applies.
    pub fn policy(&self) -> &RolloutPolicy {
        &self.policy
    }

    /// Count these delivered status events: each finished execution of a canary, added
    /// to its window's tally.
    pub(crate) async fn count(&self, store: &dyn ExecutionStore, delivered: &[&OutboxEntry]) {
        let now = crate::Clock::now(&crate::SystemClock);
        count_finished(store, &self.routes, &self.policy, delivered, now).await;
    }
}

/// The finished executions among these delivered status events whose version is their
/// machine's canary, added to the current window's tally (one `ADD` per shard touched).
/// A failure is logged and the counts are lost: that only delays a rollback, and must not
/// hold the events' delivery back.
pub(crate) async fn count_finished(
    store: &dyn ExecutionStore,
    cache: &RouteCache,
    policy: &RolloutPolicy,
    delivered: &[&OutboxEntry],
    now: f64,
) {
    if !policy.enabled() {
        return;
    }
    let finished: Vec<(&str, Version, &str, bool)> = delivered
        .iter()
        .filter_map(|n| {
            let status = notice_status(&n.event)?;
            if !matches!(status, Status::Done | Status::Failed | Status::Cancelled) {
                return None;
            }
            let data = &n.event.data;
            let machine = data.get("definitionId")?.as_str()?;
            let version: Version = data.get("definitionVersion")?.as_str()?.parse().ok()?;
            let id = data.get("executionId")?.as_str()?;
            Some((machine, version, id, status == Status::Failed))
        })
        .collect();
    if finished.is_empty() {
        return;
    }
    let routes = match cache.routes(store).await {
        Ok(routes) => routes,
        Err(err) => {
            tracing::warn!(error = %err, "could not read the routes; these finished executions are not counted");
            return;
        }
    };
    let window = route::window_of(now, policy.window_seconds);
    let mut adds: Vec<(String, Tally)> = Vec::new();
    for (machine, version, id, failed) in finished {
        if !routes.is_canary(machine, version) {
            continue;
        }
        let key = route::tally_key(
            machine,
            version,
            policy.window_seconds,
            window,
            route::shard_of(id),
        );
        let tally = Tally {
            finished: 1,
            failed: u64::from(failed),
        };
        match adds.iter_mut().find(|(k, _)| *k == key) {
            Some((_, sum)) => sum.add(tally),
            None => adds.push((key, tally)),
        }
    }
    if adds.is_empty() {
        return;
    }
    if let Err(err) = store.add_tallies(&adds, policy.expires(now)).await {
        tracing::warn!(error = %err, "could not add to the canary's tally; a rollback may come later");
    }
}

/// What one evaluation did.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct Evaluation {
    /// Canaries looked at (a weight over 0).
    pub canaries: usize,
    /// The machines whose canary went back to 0 now.
    pub rolled_back: Vec<String>,
    /// Rollback events put on the bus now (this run's and earlier ones' not yet sent).
    pub announced: usize,
}

/// [`evaluate`] by the policy of `bus`'s tallies: nothing when there is no bus, or its
/// tallies are off (the sweeper's schedule calls this after each sweep).
pub async fn evaluate_on(
    store: &dyn ExecutionStore,
    bus: Option<&dyn StatusBus>,
    now: f64,
) -> Result<Evaluation, StoreError> {
    match bus.and_then(|b| b.tallies().map(|t| (b, *t.policy()))) {
        Some((bus, policy)) => evaluate(store, Some(bus), &policy, now).await,
        None => Ok(Evaluation::default()),
    }
}

/// Roll back every canary whose failure rate is at or past the policy's, and announce
/// every rollback not yet announced. Without a bus a rollback is still made (and
/// counted), and stays to be announced.
pub async fn evaluate(
    store: &dyn ExecutionStore,
    bus: Option<&dyn StatusBus>,
    policy: &RolloutPolicy,
    now: f64,
) -> Result<Evaluation, StoreError> {
    let mut evaluation = Evaluation::default();
    if !policy.enabled() {
        return Ok(evaluation);
    }
    let mut routes = store.routes().await?;
    let mut changed = false;
    let windows = policy.windows(now);
    for (machine, route) in routes.machines.iter_mut() {
        let Some(canary) = route.canary.as_mut().filter(|c| c.weight > 0) else {
            continue;
        };
        evaluation.canaries += 1;
        // the windows it is counted in, for the operator's views to read its tally by
        if canary.window_seconds != Some(policy.window_seconds) {
            canary.window_seconds = Some(policy.window_seconds);
            changed = true;
        }
        // windows before the weight was set are not this canary's
        let since = route::window_of(canary.since, policy.window_seconds);
        let counted: Vec<i64> = windows.iter().copied().filter(|w| *w >= since).collect();
        let keys = route::tally_keys(machine, canary.version, policy.window_seconds, &counted);
        let tally = store.tally(&keys).await?;
        if tally.finished < policy.min_finished || tally.failure_rate() < policy.failure_rate {
            continue;
        }
        tracing::warn!(
            machine = %machine, version = %canary.version, failed = tally.failed,
            finished = tally.finished, "the canary's failure rate passed the threshold: its weight goes to 0"
        );
        route.rolled_back = Some(RollBack {
            version: canary.version,
            weight: canary.weight,
            at: now,
            finished: tally.finished,
            failed: tally.failed,
            announced: false,
        });
        canary.weight = 0;
        evaluation.rolled_back.push(machine.clone());
        changed = true;
    }
    if changed {
        if !store.put_routes(&routes, routes.generation).await? {
            // an operator changed the routes since they were read: the next run decides
            // again on what they are now
            return Ok(Evaluation::default());
        }
        routes.generation += 1;
        if !evaluation.rolled_back.is_empty() {
            emit_rollbacks(evaluation.rolled_back.len());
        }
    }
    let Some(bus) = bus else {
        return Ok(evaluation);
    };
    let unannounced: Vec<(String, BusEvent)> = routes
        .machines
        .iter()
        .filter_map(|(machine, route)| {
            let rb = route.rolled_back.as_ref().filter(|rb| !rb.announced)?;
            Some((
                machine.clone(),
                rollback_event(machine, route.primary, rb, policy),
            ))
        })
        .collect();
    if unannounced.is_empty() {
        return Ok(evaluation);
    }
    let events: Vec<BusEvent> = unannounced.iter().map(|(_, e)| e.clone()).collect();
    let failures = bus.put(&events).await;
    for failure in &failures {
        tracing::warn!(code = %failure.code, error = %failure.message, "a rollback's event was refused; the next run sends it");
    }
    let mut marked = routes.clone();
    for (index, (machine, _)) in unannounced.iter().enumerate() {
        if failures.iter().any(|f| f.index == index) {
            continue;
        }
        if let Some(rb) = marked
            .machines
            .get_mut(machine)
            .and_then(|r| r.rolled_back.as_mut())
        {
            rb.announced = true;
            evaluation.announced += 1;
        }
    }
    // lost to an operator's write: the event went out and goes out once more (with the
    // same notificationId) on the next run
    store.put_routes(&marked, routes.generation).await?;
    Ok(evaluation)
}

fn emit_rollbacks(n: usize) {
    let mut metrics = crate::metrics::MetricSet::for_function("sweeper");
    metrics.count(ROLLBACKS, n as f64);
    metrics.emit();
}

/// A rollback's event: its `notificationId` is the same for every copy of it.
pub fn rollback_event(machine: &str, primary: Version, rb: &RollBack, policy: &RolloutPolicy) -> BusEvent {
    let millis = (rb.at * 1000.0).round() as i64;
    let detail = json!({
        "notificationId": format!("rollback:{machine}:{}:{millis}", rb.version),
        "definitionId": machine,
        "alias": route::ALIAS,
        "rolledBackVersion": rb.version.to_string(),
        "weight": rb.weight,
        "primaryVersion": primary.to_string(),
        "finished": rb.finished,
        "failed": rb.failed,
        "failureRate": Tally { finished: rb.finished, failed: rb.failed }.failure_rate(),
        "threshold": policy.failure_rate,
        "windowSeconds": policy.window_seconds,
        "time": millis,
    });
    BusEvent {
        source: SOURCE.to_string(),
        detail_type: ROLLBACK_DETAIL_TYPE.to_string(),
        detail: stm_core::pyjson::dumps(&detail),
    }
}
