//! Precise timers: a doorbell per near timer, so a `timeout 5` fires ~5 s after its
//! state was entered rather than at the next scheduled sweep (EventBridge's finest period
//! is one minute, so a schedule-only sweeper is up to a minute late).
//!
//! When a commit arms a timer due within [`HORIZON_SECONDS`] (SQS's longest message
//! delay, 15 minutes), the worker sends a *doorbell*, `{"execution_id", "path",
//! "fire_at"}`, to a standard SQS queue with `DelaySeconds = ceil(fire_at - now)`. That
//! queue triggers the sweeper, which for each doorbell:
//!
//! 1. reads the armed timer (one consistent `GetItem`): gone or re-armed to another
//!    `fire_at` means the doorbell is stale (the state was left, or re-entered), and it is
//!    dropped: firing it would time out the new visit early;
//! 2. waits out any sub-second rounding, then fires it exactly as a sweep does: the
//!    `Timeout` event (same event id and deduplication id as the sweep would use, so a
//!    sweep racing it is deduplicated) and the `fire_at`-guarded delete.
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
use stm_store::{DueTimer, ExecutionStore};

use crate::driver::DriverError;
use crate::queue::Queue;
use crate::sweeper::{fire_one, SweepSummary};

// the SQS side (feature `aws`): the doorbell queue and the sweeper's SQS-trigger handler
#[cfg(feature = "aws")]
mod sqs;
#[cfg(feature = "aws")]
pub use sqs::{handle_doorbells, SqsDoorbell};

/// SQS's longest per-message delay: timers due later than this are left to the sweep.
pub const HORIZON_SECONDS: f64 = 900.0;

/// The longest a doorbell handler waits for a timer that is not quite due yet (a delay
/// rounded to whole seconds, or a clock a little behind); further off, it is left to the
/// sweep.
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

/// Parse a doorbell body; the error says what is wrong with it.
pub fn parse_doorbell(body: &str) -> Result<DueTimer, String> {
    let value: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("a doorbell body is not JSON: {e}"))?;
    let text = |name: &str| {
        value
            .get(name)
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| format!("a doorbell needs a non-empty string `{name}`"))
    };
    let fire_at = value
        .get("fire_at")
        .and_then(serde_json::Value::as_f64)
        .filter(|f| f.is_finite())
        .ok_or_else(|| "a doorbell needs a number `fire_at`".to_string())?;
    Ok(DueTimer {
        execution_id: text("execution_id")?,
        path: text("path")?,
        fire_at,
    })
}

/// The whole seconds to delay a doorbell for a timer due at `fire_at`, seen from `now`:
/// rounded up (never early), within SQS's 0..=900.
pub fn delay_seconds(fire_at: f64, now: f64) -> i32 {
    let wait = (fire_at - now).ceil();
    if wait.is_nan() || wait <= 0.0 {
        0
    } else {
        wait.min(HORIZON_SECONDS) as i32
    }
}

/// The timers of a commit that get a doorbell: those due within the horizon.
pub fn near_timers(execution_id: &str, armed: &[(String, f64)], now: f64) -> Vec<DueTimer> {
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

/// Answer one doorbell: check the armed timer, wait out rounding, fire it as a sweep would.
pub async fn answer(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    timer: &DueTimer,
    now: &(dyn Fn() -> f64 + Send + Sync),
    summary: &mut SweepSummary,
) -> Result<Answered, DriverError> {
    stm_store::aws::as_function("sweeper", async {
        match store.armed_timer(&timer.execution_id, &timer.path).await? {
            Some(fire_at) if fire_at == timer.fire_at => {}
            _ => return Ok(Answered::Stale),
        }
        let early = timer.fire_at - now();
        if early > MAX_EARLY_WAIT.as_secs_f64() {
            return Ok(Answered::NotDue);
        }
        if early > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(early)).await;
        }
        summary.due += 1;
        fire_one(store, queue, timer, summary).await;
        Ok(Answered::Handled)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_round_up_within_sqs_limits() {
        assert_eq!(delay_seconds(100.2, 95.0), 6);
        assert_eq!(delay_seconds(100.0, 95.0), 5);
        assert_eq!(delay_seconds(90.0, 95.0), 0, "overdue: at once");
        assert_eq!(delay_seconds(5000.0, 0.0), 900);
        assert_eq!(delay_seconds(f64::NAN, 0.0), 0);
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
        assert_eq!(parse_doorbell(&doorbell_body(&t)), Ok(t));
        for (body, needle) in [
            ("nope", "not JSON"),
            (r#"{"path": "p", "fire_at": 1}"#, "execution_id"),
            (r#"{"execution_id": "e", "path": "", "fire_at": 1}"#, "path"),
            (
                r#"{"execution_id": "e", "path": "p", "fire_at": "soon"}"#,
                "fire_at",
            ),
        ] {
            let err = parse_doorbell(body).expect_err(body);
            assert!(err.contains(needle), "{body}: {err}");
        }
    }
}
