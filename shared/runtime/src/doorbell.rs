//! Precise timers: a doorbell per near timer, so a `timeout 5` fires ~5 s after its
//! state was entered rather than at the next scheduled sweep (EventBridge's finest period
//! is one minute, so a schedule-only sweeper is up to a minute late).
//!
//! When a commit arms a timer due within [`HORIZON_SECONDS`] (SQS's longest message
//! delay, 15 minutes), the worker sends a *doorbell*, `{"execution_id", "path",
//! "fire_at"}`, to a standard SQS queue with `DelaySeconds = floor(fire_at - now)`: SQS
//! delays are whole seconds, and rounding down makes the doorbell arrive up to a second
//! *early* rather than up to a second late. That queue triggers the sweeper, which for
//! each doorbell (a batch's in `fire_at` order, each on its own):
//!
//! 1. waits out the sub-second remainder, until `fire_at` (never fires before it);
//! 2. reads the armed timer (one consistent `GetItem`, together with the execution's),
//!    after the wait so that a timer cancelled during it is seen: gone or re-armed to
//!    another `fire_at` means the doorbell is stale (the state was left, or re-entered),
//!    and it is dropped: firing it would time out the new visit early;
//! 3. fires it exactly as a sweep does: the `Timeout` event (same event id and
//!    deduplication id as the sweep would use, so a sweep racing it is deduplicated) and
//!    the `fire_at`-guarded delete.
//!
//! Doorbells are best effort: one that is lost, late or fails is covered by the scheduled
//! sweep, which still runs. Far timers (past the horizon) get no doorbell and stay with the
//! sweep, whose cost grows with what is due, not with what exists (the timers' due index).
//!
//! The rules here and [`MemoryDoorbell`] are plain Rust; the SQS doorbell queue
//! (`SqsDoorbell`) and the sweeper's handler of an SQS batch of doorbells
//! (`handle_doorbells`) are in `doorbell/sqs.rs`, feature `aws`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use stm_store::{DueTimer, ExecutionStore, StoreError};

use crate::queue::Queue;
use crate::sweeper::{fire_loaded, SweepSummary};

// the SQS side (feature `aws`): the doorbell queue and the sweeper's SQS-trigger handler
mod batch;
#[cfg(feature = "aws")]
mod sqs;
pub use batch::handle_doorbells;
#[cfg(feature = "aws")]
pub use sqs::SqsDoorbell;

/// SQS's longest per-message delay: timers due later than this are left to the sweep.
pub const HORIZON_SECONDS: f64 = 900.0;

/// The longest a doorbell handler waits for a timer that is not quite due yet: the
/// sub-second remainder of a delay rounded down to whole seconds, plus some slack for a
/// clock a little behind; further off, the doorbell is retried (or left to the sweep).
pub const MAX_EARLY_WAIT: Duration = Duration::from_secs(2);

/// Where doorbells are sent.
#[async_trait]
pub trait Doorbell: Send + Sync {
    /// Send one doorbell per timer, each delayed until its `fire_at` (seen from `now`).
    /// Returns how many could not be sent (they are left to the sweep).
    async fn ring(&self, timers: &[DueTimer], now: f64) -> usize;
}

/// The body of a doorbell.
pub fn doorbell_body(timer: &DueTimer) -> String {
    json!({"execution_id": timer.execution_id, "path": timer.path, "fire_at": timer.fire_at}).to_string()
}

/// What can go wrong with a doorbell: a body that is not one (dropped: the sweep fires
/// its timer), or a store that cannot say whether its timer is still armed (the doorbell
/// is retried).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DoorbellError {
    /// The body is not JSON.
    #[error("a doorbell body is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// `execution_id` or `path` is missing, empty or not a string.
    #[error("a doorbell needs a non-empty string `{0}`")]
    MissingText(&'static str),
    /// `fire_at` is missing or not a finite number.
    #[error("a doorbell needs a number `fire_at`")]
    MissingFireAt,
    /// The armed timer could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Parse a doorbell body; the error says what is wrong with it.
pub fn parse_doorbell(body: &str) -> Result<DueTimer, DoorbellError> {
    let value: serde_json::Value = serde_json::from_str(body).map_err(DoorbellError::NotJson)?;
    let text = |name: &'static str| {
        value
            .get(name)
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or(DoorbellError::MissingText(name))
    };
    let fire_at = value
        .get("fire_at")
        .and_then(serde_json::Value::as_f64)
        .filter(|f| f.is_finite())
        .ok_or(DoorbellError::MissingFireAt)?;
    Ok(DueTimer {
        execution_id: text("execution_id")?,
        path: text("path")?,
        fire_at,
    })
}

/// The whole seconds to delay a doorbell for a timer due at `fire_at`, seen from `now`:
/// rounded down, within SQS's 0..=900. Rounding down means the doorbell is never late by
/// the rounding; the handler waits the remainder (`early_wait`).
pub fn delay_seconds(fire_at: f64, now: f64) -> i32 {
    let wait = (fire_at - now).floor();
    if wait.is_nan() || wait <= 0.0 {
        0
    } else {
        wait.min(HORIZON_SECONDS) as i32
    }
}

/// How long a doorbell handler answering at `now` waits before firing a timer due at
/// `fire_at`: nothing if it is due, the time left if that is within [`MAX_EARLY_WAIT`],
/// `None` (not due: retry later) if further off.
pub(crate) fn early_wait(fire_at: f64, now: f64) -> Option<Duration> {
    let early = fire_at - now;
    if early.is_nan() || early <= 0.0 {
        Some(Duration::ZERO)
    } else if early > MAX_EARLY_WAIT.as_secs_f64() {
        None
    } else {
        // rounded up to the microsecond (and tokio's timer rounds up to its millisecond
        // tick), so the wait never ends before `fire_at`
        Some(Duration::from_micros((early * 1e6).ceil() as u64))
    }
}

/// The timers of a commit that get a doorbell: those due within the horizon.
pub(crate) fn near_timers(execution_id: &str, armed: &[(String, f64)], now: f64) -> Vec<DueTimer> {
    armed
        .iter()
        .filter(|(_, fire_at)| *fire_at - now <= HORIZON_SECONDS)
        .map(|(path, fire_at)| DueTimer {
            execution_id: execution_id.to_string(),
            path: path.clone(),
            fire_at: *fire_at,
        })
        .collect()
}

/// Doorbells kept in memory, for tests: what was rung, with the time it becomes visible.
#[derive(Default, Debug)]
pub struct MemoryDoorbell {
    rung: Mutex<Vec<(DueTimer, f64)>>,
}

impl MemoryDoorbell {
    pub fn new() -> Arc<Self> {
        Arc::new(MemoryDoorbell::default())
    }

    /// Take the doorbells visible at `now` (delay elapsed), earliest first.
    pub fn take_visible(&self, now: f64) -> Vec<DueTimer> {
        let mut rung = self.rung.lock().unwrap_or_else(|e| e.into_inner());
        let (visible, later): (Vec<_>, Vec<_>) = rung.drain(..).partition(|(_, at)| *at <= now);
        *rung = later;
        let mut out: Vec<DueTimer> = visible.into_iter().map(|(t, _)| t).collect();
        out.sort_by(|a, b| a.fire_at.total_cmp(&b.fire_at));
        out
    }

    pub fn len(&self) -> usize {
        self.rung.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl Doorbell for MemoryDoorbell {
    async fn ring(&self, timers: &[DueTimer], now: f64) -> usize {
        let mut rung = self.rung.lock().unwrap_or_else(|e| e.into_inner());
        for t in timers {
            rung.push((t.clone(), now + f64::from(delay_seconds(t.fire_at, now))));
        }
        0
    }
}

/// What one doorbell came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// The timer fired (`Timeout` published, timer deleted), or was handled as the sweep
    /// would (kept for a suspended execution, dropped for a gone one).
    Handled,
    /// The timer was cancelled or re-armed since: nothing to do.
    Stale,
    /// Not due within [`MAX_EARLY_WAIT`]: left to a redelivery or the sweep.
    NotDue,
}

/// Answer one doorbell: wait until its `fire_at`, check the armed timer, fire it as a sweep
/// would.
pub async fn answer(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    timer: &DueTimer,
    now: &(dyn Fn() -> f64 + Send + Sync),
    summary: &mut SweepSummary,
) -> Result<Answered, DoorbellError> {
    stm_aws::as_function("sweeper", async {
        let Some(wait) = early_wait(timer.fire_at, now()) else {
            return Ok(Answered::NotDue);
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        // the armed timer and its execution, read together: one round trip after
        // `fire_at`, not two (the execution is only used if the timer is still armed)
        let (armed, loaded) = tokio::join!(
            store.armed_timer_in_trace(&timer.execution_id, &timer.path),
            store.load(&timer.execution_id)
        );
        let trace = match armed? {
            Some((fire_at, trace)) if fire_at == timer.fire_at => trace,
            _ => return Ok(Answered::Stale),
        };
        summary.due += 1;
        fire_loaded(store, queue, timer, loaded, trace.as_deref(), summary).await;
        Ok(Answered::Handled)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_round_down_within_sqs_limits() {
        assert_eq!(delay_seconds(100.2, 95.0), 5, "never late by the rounding");
        assert_eq!(delay_seconds(100.0, 95.0), 5);
        assert_eq!(
            delay_seconds(95.9, 95.0),
            0,
            "under a second: at once, then the wait"
        );
        assert_eq!(delay_seconds(90.0, 95.0), 0, "overdue: at once");
        assert_eq!(delay_seconds(5000.0, 0.0), 900);
        assert_eq!(delay_seconds(f64::NAN, 0.0), 0);
    }

    #[test]
    fn a_doorbell_4_3_s_out_is_delayed_4_s_and_the_handler_waits_the_remainder() {
        let (now, fire_at) = (1_700_000_000.0, 1_700_000_004.3);
        let delay = delay_seconds(fire_at, now);
        assert_eq!(delay, 4);
        // SQS shows it 4 s later: the handler waits the 0.3 s left
        let wait = early_wait(fire_at, now + f64::from(delay)).expect("within the early wait");
        assert!((wait.as_secs_f64() - 0.3).abs() < 2e-6, "{wait:?}");
        // shown a little late (a slow poll): no wait at all
        assert_eq!(early_wait(fire_at, fire_at + 0.05), Some(Duration::ZERO));
        // far too early (a clock well behind): not due, retried
        assert_eq!(early_wait(fire_at, now), None);
        assert_eq!(early_wait(f64::NAN, now), Some(Duration::ZERO));
    }

    #[test]
    fn an_early_wait_never_ends_before_fire_at() {
        // whatever the fraction, the wait covers all of `fire_at - now` (rounded up)
        let now = 1_700_000_000.0_f64;
        for tenth_ms in 0..20_000 {
            let fire_at = now + f64::from(tenth_ms) * 1e-4 + 3.7e-7;
            let wait = early_wait(fire_at, now).expect("within the early wait");
            assert!(
                wait.as_secs_f64() + 1e-9 >= fire_at - now,
                "{fire_at}: a wait of {wait:?} ends early"
            );
        }
    }

    #[test]
    fn only_near_timers_ring() {
        let armed = vec![("a".to_string(), 110.0), ("b".to_string(), 100.0 + 901.0)];
        let near = near_timers("e", &armed, 100.0);
        assert_eq!(near.len(), 1);
        assert_eq!(near[0].path, "a");
    }

    #[test]
    fn doorbell_bodies_round_trip_and_bad_ones_say_why() {
        let t = DueTimer {
            execution_id: "e1".into(),
            path: "Payment".into(),
            fire_at: 1_700_000_000.123_456,
        };
        assert_eq!(parse_doorbell(&doorbell_body(&t)).ok(), Some(t));
        for (body, needle) in [
            ("nope", "not JSON"),
            (r#"{"path": "p", "fire_at": 1}"#, "execution_id"),
            (r#"{"execution_id": "e", "path": "", "fire_at": 1}"#, "path"),
            (
                r#"{"execution_id": "e", "path": "p", "fire_at": "soon"}"#,
                "fire_at",
            ),
        ] {
            let err = parse_doorbell(body).expect_err(body).to_string();
            assert!(err.contains(needle), "{body}: {err}");
        }
    }
}
