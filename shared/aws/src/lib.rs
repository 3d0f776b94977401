//! AWS client plumbing shared by the DynamoDB store, the SQS queue and every other AWS
//! client of ours: the emulator switch, the timeouts, the function scope ([`as_function`])
//! and the [`CallCounter`].
//!
//! The items here are plain Rust and build without the `sdk` feature: the embedded runner
//! (`MemoryStore` + the driver, no SDK, so it builds in about a minute) runs the same code,
//! function scopes and timeouts included. The SDK side (`https_client`, `sdk_config`, the
//! interceptors, `Readable`) is the `sdk` module, compiled only with the `sdk` feature
//! and re-exported here: its paths are `stm_aws::...` as well.
//!
//! The SDK crates are built without their default features, which would compile aws-lc-sys
//! (a long C build); the HTTPS client is hyper 1 + rustls over the `ring` crypto provider,
//! built once in `https_client`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[cfg(feature = "sdk")]
mod sdk;
#[cfg(feature = "sdk")]
pub use sdk::{
    configured_region, function_tag, https_client, long_poll_timeout, sdk_config, sdk_config_with_profile,
    timeout_config, Readable,
};

/// Whether the clients talk to an emulator (moto, LocalStack, DynamoDB Local):
/// [`stm_env::EMULATOR`] is set and on (`1`, `true`, `yes`, `on`). `stm local` sets it for
/// its functions; the test kit sets it in every test process that starts moto.
pub fn emulator_mode() -> bool {
    stm_env::is_on(stm_env::EMULATOR)
}

/// How long a TCP connection may take to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one HTTP attempt may take, from sending the request to the whole answer. A
/// DynamoDB call answers in milliseconds; an SQS long poll is the exception, and asks for
/// its own bound (`long_poll_timeout`).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one operation may take, all its SDK retries included: one stalled call costs
/// at most this, and the worker keeps a record's reserve of it before starting a record
/// (`shared/deploytest/tests/template/functions.rs` checks the reserve against the functions'
/// timeouts). The store's own retries of a commit are bounded by the invocation's
/// deadline besides ([`within_deadline`]).
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(12);

/// The header that names the function whose code sent a request, under an emulator only
/// ([`as_function`]).
pub const FUNCTION_HEADER: &str = "x-stm-function";

tokio::task_local! {
    static FUNCTION: &'static str;
    static DEADLINE: std::time::Instant;
}

/// Run `f` under the invocation's `deadline` (Lambda's, taken from its context; `None`:
/// none known, as in `stm run`): the store starts no retry that could run past it
/// ([`time_for`]), and reports the failure as retryable instead, so the invocation ends
/// with its answer rather than being killed mid-call. An inner scope keeps the earlier
/// deadline of the two.
pub async fn within_deadline<F: std::future::Future>(
    deadline: Option<std::time::Instant>,
    f: F,
) -> F::Output {
    let outer = DEADLINE.try_with(|d| *d).ok();
    match (deadline, outer) {
        (Some(d), Some(o)) if o <= d => f.await,
        (Some(d), _) => DEADLINE.scope(d, f).await,
        (None, _) => f.await,
    }
}

/// Whether `needed` more time fits before the deadline of [`within_deadline`] (always,
/// outside one).
pub fn time_for(needed: Duration) -> bool {
    DEADLINE
        .try_with(|d| d.saturating_duration_since(std::time::Instant::now()) >= needed)
        .unwrap_or(true)
}

/// Run `f` as the code of `function` (`worker`, `relay`, `sweeper`, `operator`). Under an
/// emulator ([`emulator_mode`]) every request the SDK clients send meanwhile carries
/// [`FUNCTION_HEADER`], and the test kit's strict layer checks it against that function's
/// IAM role in `template.yaml`: the code itself says which role it needs, so every path
/// any test walks is checked, even where one client serves several functions. A scope
/// inside another keeps the outer one: the worker's inline flush runs the relay's code
/// under the worker's role, as on Lambda. Against AWS nothing is added.
pub async fn as_function<F: std::future::Future>(function: &'static str, f: F) -> F::Output {
    if FUNCTION.try_with(|_| ()).is_ok() {
        f.await
    } else {
        FUNCTION.scope(function, f).await
    }
}

/// Counts the requests an SDK client sends, per operation name (`GetItem`,
/// `TransactWriteItems`, ...). Each HTTP attempt counts, retries included: that is what
/// DynamoDB bills. Cloning shares the counts. Counting needs the `sdk` feature (the
/// counter is an SDK interceptor, `CallCounter::interceptor`); the type exists without it.
#[derive(Debug, Clone, Default)]
pub struct CallCounter {
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl CallCounter {
    pub fn new() -> Self {
        CallCounter::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, u64>> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Requests sent for `operation` so far.
    pub fn get(&self, operation: &str) -> u64 {
        self.lock().get(operation).copied().unwrap_or(0)
    }

    /// All requests sent so far.
    pub fn total(&self) -> u64 {
        self.lock().values().sum()
    }

    /// Every operation's count.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.lock().clone()
    }

    /// Forget the counts.
    pub fn reset(&self) {
        self.lock().clear();
    }

    /// The counts accumulated while `f` ran (the counter is shared: run one thing at a time).
    pub async fn measure<T>(&self, f: impl std::future::Future<Output = T>) -> (T, BTreeMap<String, u64>) {
        let before = self.snapshot();
        let out = f.await;
        let mut delta = self.snapshot();
        for (op, n) in delta.iter_mut() {
            *n -= before.get(op).copied().unwrap_or(0);
        }
        delta.retain(|_, n| *n > 0);
        (out, delta)
    }
}
