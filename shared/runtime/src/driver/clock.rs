//! The driver's clock: seconds since the epoch, the wall clock or one a test moves.

use std::sync::Mutex;

/// Seconds since the epoch, as harel's `time.time`.
pub trait Clock: Send + Sync {
    fn now(&self) -> f64;
}

/// The wall clock.
#[derive(Debug)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> f64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    }
}

/// A clock that only moves when told (tests, conformance, `stm run`'s replay).
#[derive(Debug, Default)]
pub struct ManualClock(Mutex<f64>);

impl ManualClock {
    pub fn new(start: f64) -> Self {
        ManualClock(Mutex::new(start))
    }
    pub fn advance(&self, seconds: f64) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) += seconds;
    }
    pub fn set(&self, now: f64) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = now;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> f64 {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
