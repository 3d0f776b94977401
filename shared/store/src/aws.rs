//! AWS SDK plumbing shared by the DynamoDB store (and reusable by the other AWS clients):
//! the HTTP client, the SDK config for real AWS or an emulator endpoint, and the
//! [`CallCounter`] interceptor.
//!
//! The SDK crates are built without their default features, which would compile aws-lc-sys
//! (a long C build); the HTTPS client is hyper 1 + rustls over the `ring` crypto provider,
//! built here once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, SdkConfig};
use aws_sdk_dynamodb::config::{Credentials, Region};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeTransmitInterceptorContextMut, BeforeTransmitInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::shared::IntoShared;
use aws_smithy_types::config_bag::ConfigBag;

/// The HTTP(S) client every SDK client of ours uses: hyper 1 + rustls (ring), native roots.
pub fn https_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

/// The variable that says the clients talk to an emulator (moto, LocalStack, DynamoDB
/// Local): `STM_EMULATOR=1`. `stm local` sets it for its functions; the test kit sets it in
/// every test process that starts moto.
pub const EMULATOR_VARIABLE: &str = "STM_EMULATOR";

/// Whether [`EMULATOR_VARIABLE`] is on (`1`, `true`, `yes`, `on`).
pub fn emulator_mode() -> bool {
    std::env::var(EMULATOR_VARIABLE).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// How long a TCP connection may take to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one HTTP attempt may take, from sending the request to the whole answer. A
/// DynamoDB call answers in milliseconds; an SQS long poll is the exception, and asks for
/// its own bound ([`long_poll_timeout`]).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one operation may take, all its retries included. With the worker's function
/// timeout of 30 s, this plus the per-record reserve keeps one stalled call from timing
/// out the whole batch (`shared/deploytest/tests/template.rs` checks the sums).
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(12);

/// The SDK's timeouts for our clients: bounded connect, attempt and operation, so a stalled
/// connection fails one call instead of hanging the invocation until Lambda kills it.
pub fn timeout_config() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .operation_attempt_timeout(ATTEMPT_TIMEOUT)
        .operation_timeout(OPERATION_TIMEOUT)
        .build()
}

/// The timeouts for a long poll that waits up to `wait`: the wait plus the attempt bound.
pub fn long_poll_timeout(wait: Duration) -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .operation_attempt_timeout(wait + ATTEMPT_TIMEOUT)
        .operation_timeout(wait + OPERATION_TIMEOUT)
        .build()
}

/// The SDK config for `region`, with an optional endpoint override (moto, LocalStack,
/// DynamoDB Local, a VPC endpoint) and the bounded [`timeout_config`].
///
/// Credentials come from the default chain (environment, profile, web identity, ECS/IMDS,
/// as on Lambda) unless [`emulator_mode`] is on: then static dummy credentials, which an
/// emulator takes and AWS refuses. An endpoint alone never swaps them in: real endpoints
/// (VPC endpoints through `AWS_ENDPOINT_URL`) need real credentials.
pub async fn sdk_config(endpoint_url: Option<&str>, region: &str) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region.to_string()))
        .http_client(https_client())
        .timeout_config(timeout_config());
    if let Some(url) = endpoint_url {
        loader = loader.endpoint_url(url);
    }
    if emulator_mode() {
        loader = loader.credentials_provider(Credentials::new("test", "test", None, None, "stm-emulator"));
    }
    loader.load().await
}

/// The header that names the function whose code sent a request, under an emulator only
/// ([`as_function`]).
pub const FUNCTION_HEADER: &str = "x-stm-function";

tokio::task_local! {
    static FUNCTION: &'static str;
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

/// Adds [`FUNCTION_HEADER`] inside an [`as_function`] scope.
#[derive(Debug, Clone, Copy)]
struct FunctionTag;

impl Intercept for FunctionTag {
    fn name(&self) -> &'static str {
        "stm-function-tag"
    }

    fn modify_before_transmit(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Ok(function) = FUNCTION.try_with(|f| *f) {
            context
                .request_mut()
                .headers_mut()
                .insert(FUNCTION_HEADER, function);
        }
        Ok(())
    }
}

/// The function-tag interceptor for a client's config builder: `Some` under an emulator.
pub fn function_tag() -> Option<aws_smithy_runtime_api::client::interceptors::SharedInterceptor> {
    emulator_mode().then(|| FunctionTag.into_shared())
}

/// An SDK error as one readable line: `Code: message` for an error AWS answered with (an
/// `AccessDeniedException`, a `ValidationException`, ...), else the chain of causes (`dispatch
/// failure: io: Connection refused`). Never the `Debug` dump, which is kilobytes of nested
/// structs and says the same less clearly.
pub struct Readable<'a, T: ?Sized>(pub &'a T);

impl<T> std::fmt::Display for Readable<'_, T>
where
    T: aws_smithy_types::error::metadata::ProvideErrorMetadata + std::error::Error,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(code) = self.0.code() {
            return match self.0.message() {
                Some(message) => write!(f, "{code}: {message}"),
                None => write!(f, "{code}"),
            };
        }
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

/// Counts the requests an SDK client sends, per operation name (`GetItem`,
/// `TransactWriteItems`, ...). Each HTTP attempt counts, retries included: that is what
/// DynamoDB bills. Cloning shares the counts.
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

    /// This counter as an SDK interceptor (for any client's config builder).
    pub fn interceptor(&self) -> aws_smithy_runtime_api::client::interceptors::SharedInterceptor {
        self.clone().into_shared()
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "stm-call-counter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let name = cfg
            .load::<Metadata>()
            .map(|m| m.name().to_string())
            .unwrap_or_else(|| "unknown".into());
        *self.lock().entry(name).or_default() += 1;
        Ok(())
    }
}
