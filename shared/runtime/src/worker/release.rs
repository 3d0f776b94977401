//! How long a reported record stays hidden before SQS hands it out again, by why it failed
//! and how often it was received (the module docs of `worker` give the policy).

use super::{Failed, WorkerSettings};

/// A lost CAS is retried at once on this many receives before it backs off like a
/// throttle: the execution moved under us and the next attempt, on the new version,
/// usually wins; only a lasting contention needs the back-off.
pub(crate) const QUICK_CONFLICT_RECEIVES: u32 = 3;

/// How long a message parked on its `receive_count`-th receive stays hidden.
pub(crate) fn park_seconds(settings: &WorkerSettings, receive_count: u32) -> i32 {
    backoff_seconds(
        settings.suspend_recheck_seconds,
        settings.suspend_recheck_max_seconds,
        receive_count,
    )
}

/// How long a transient failure (or an error) on its `receive_count`-th receive is hidden.
pub fn retry_seconds(settings: &WorkerSettings, receive_count: u32) -> i32 {
    backoff_seconds(settings.retry_seconds, settings.retry_max_seconds, receive_count)
}

/// How long a record that failed with `why` on its `receive_count`-th receive stays hidden.
///
/// Every receive counts toward the queue's `maxReceiveCount` (template default 100), so a
/// delay that does not grow turns a lasting condition into a dead letter within minutes:
/// - a parked message (`SUSPENDED`) backs off from 5 s doubling to 15 min: ~100 receives
///   a day;
/// - a throttle, a transient store fault or an error backs off from `retry_seconds` (1 s)
///   doubling to `retry_max_seconds` (5 min): soon for a passing fault, ~7.7 h for 100
///   receives of a lasting one (a sustained throttle is ridden out);
/// - a lost CAS is retried at once on its first [`QUICK_CONFLICT_RECEIVES`] receives,
///   then backs off the same way;
/// - a poison message can never succeed: it comes back every 10 s, so it reaches the
///   dead-letter queue in ~17 min at 100 receives, without spinning the function;
/// - a record not started for lack of time comes back at once.
///
/// A skipped record is not decided here: it takes the delay of the failed record of its
/// group (it cannot be received before that one); on its own it would get 0.
pub(crate) fn release_seconds(settings: &WorkerSettings, why: &Failed, receive_count: u32) -> i32 {
    match why {
        Failed::Parked => park_seconds(settings, receive_count),
        Failed::Retryable(_) | Failed::Error(_) => retry_seconds(settings, receive_count),
        Failed::Conflict(_) if receive_count <= QUICK_CONFLICT_RECEIVES => 0,
        Failed::Conflict(_) => retry_seconds(settings, receive_count - QUICK_CONFLICT_RECEIVES),
        Failed::Poison(_) => settings.poison_retry_seconds,
        Failed::Skipped | Failed::OutOfTime => 0,
    }
}

/// `base * 2^(receive_count - 1)`, at most `cap` (and never past SQS's 12 hours).
fn backoff_seconds(base: i32, cap: i32, receive_count: u32) -> i32 {
    let base = i64::from(base.max(0));
    let cap = i64::from(cap.clamp(0, 43_200));
    let doublings = receive_count.saturating_sub(1).min(20);
    // both bounds fit i32: cap <= 43_200
    i32::try_from((base << doublings).min(cap)).unwrap_or(43_200)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cause() -> super::super::Cause {
        super::super::Cause::new(super::super::RecordError::NotHandled)
    }

    #[test]
    fn parked_messages_back_off_to_fifteen_minutes() {
        let s = WorkerSettings::default();
        let waits: Vec<i32> = (1..=10).map(|n| park_seconds(&s, n)).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 320, 640, 900, 900]);
        // the horizon the template's default maxReceiveCount (100) gives a suspension
        let horizon: i64 = (1..100).map(|n| i64::from(park_seconds(&s, n))).sum();
        assert!(horizon > 23 * 3600, "{horizon}");
        assert_eq!(backoff_seconds(1, 60, 1), 1);
        assert_eq!(backoff_seconds(1, 60, 7), 60);
        assert_eq!(backoff_seconds(1, 60, u32::MAX), 60);
    }

    /// Bug 6: a throttled (or erroring) record was released at once, so a sustained
    /// throttle spent the template's `maxReceiveCount` (100) within minutes and
    /// dead-lettered it. 1 s doubling to 5 min makes 100 receives last ~7.7 h.
    #[test]
    fn transient_failures_back_off_to_five_minutes() {
        let s = WorkerSettings::default();
        let throttled = Failed::Retryable(cause());
        let waits: Vec<i32> = (1..=12).map(|n| release_seconds(&s, &throttled, n)).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        let error = Failed::Error(cause());
        assert_eq!(release_seconds(&s, &error, 1), 1);
        assert_eq!(release_seconds(&s, &error, 50), 300);
        assert_eq!(release_seconds(&s, &throttled, u32::MAX), 300);
        // the horizon of 100 receives: 1 + 2 + ... + 256 (511 s), then 91 x 300 s
        let horizon =
            |why: &Failed| -> i64 { (1..=100).map(|n| i64::from(release_seconds(&s, why, n))).sum() };
        assert_eq!(horizon(&throttled), 27_811, "~7.7 h");
        assert!(horizon(&error) > 7 * 3600);

        // a lost CAS: at once on its first receives, then the same back-off
        let conflict = Failed::Conflict(cause());
        let waits: Vec<i32> = (1..=6).map(|n| release_seconds(&s, &conflict, n)).collect();
        assert_eq!(waits, [0, 0, 0, 1, 2, 4]);
        assert_eq!(horizon(&conflict), 26_911, "~7.5 h");

        // the others keep their own delays; a skipped record takes its group's (the
        // caller's), a record not started for lack of time comes back at once
        assert_eq!(release_seconds(&s, &Failed::Poison(cause()), 7), 10);
        assert_eq!(release_seconds(&s, &Failed::Parked, 3), park_seconds(&s, 3));
        assert_eq!(release_seconds(&s, &Failed::Skipped, 9), 0);
        assert_eq!(release_seconds(&s, &Failed::OutOfTime, 9), 0);

        // 0 retries at once (what the fast test stacks use)
        let quick = WorkerSettings {
            retry_seconds: 0,
            retry_max_seconds: 0,
            ..WorkerSettings::default()
        };
        assert_eq!(release_seconds(&quick, &throttled, 40), 0);
        assert_eq!(release_seconds(&quick, &conflict, 40), 0);
    }
}
