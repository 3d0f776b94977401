//! The SDK side of this crate (feature `sdk`): the HTTPS client, the SDK config, the
//! timeouts as the SDK takes them, the function-tag and call-counting interceptors, and
//! [`Readable`] SDK errors.

use std::time::Duration;

use aws_config::timeout::TimeoutConfig;
use aws_config::Region;
use aws_config::{BehaviorVersion, SdkConfig};
use aws_credential_types::Credentials;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeTransmitInterceptorContextMut, BeforeTransmitInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::shared::IntoShared;
use aws_smithy_types::config_bag::ConfigBag;

use super::{
    emulator_mode, CallCounter, ATTEMPT_TIMEOUT, CONNECT_TIMEOUT, FUNCTION, FUNCTION_HEADER,
    OPERATION_TIMEOUT,
};

/// The HTTP(S) client every SDK client of ours uses: hyper 1 + rustls (ring), native roots.
pub fn https_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

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
    sdk_config_with_profile(endpoint_url, region, None).await
}

/// [`sdk_config`] with the credentials of the named profile of the shared config files
/// (`~/.aws/config` and `~/.aws/credentials`, or `AWS_CONFIG_FILE` and
/// `AWS_SHARED_CREDENTIALS_FILE`) instead of `AWS_PROFILE`'s or `default`: the operator
/// CLI's `--profile`.
pub async fn sdk_config_with_profile(
    endpoint_url: Option<&str>,
    region: &str,
    profile: Option<&str>,
) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region.to_string()))
        .http_client(https_client())
        .timeout_config(timeout_config());
    if let Some(profile) = profile {
        loader = loader.profile_name(profile);
    }
    if let Some(url) = endpoint_url {
        loader = loader.endpoint_url(url);
    }
    if emulator_mode() {
        loader = loader.credentials_provider(Credentials::new("test", "test", None, None, "stm-emulator"));
    }
    loader.load().await
}

/// The Region the AWS CLI and SDKs would use, from the environment (`AWS_REGION`, then
/// `AWS_DEFAULT_REGION`) or else the `region` of `profile` (or of `AWS_PROFILE`'s, or
/// `default`) in the shared config file; `None` when neither says one. The instance
/// metadata service, the default chain's last resort, is not asked: an operator's machine
/// has none, and asking it costs a timeout.
pub async fn configured_region(profile: Option<&str>) -> Option<String> {
    use aws_config::environment::region::EnvironmentVariableRegionProvider;
    use aws_config::meta::region::ProvideRegion;
    use aws_config::profile::region::ProfileFileRegionProvider;
    if let Some(region) = EnvironmentVariableRegionProvider::new().region().await {
        return Some(region.to_string());
    }
    let mut from_file = ProfileFileRegionProvider::builder();
    if let Some(profile) = profile {
        from_file = from_file.profile_name(profile);
    }
    from_file.build().region().await.map(|r| r.to_string())
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
#[derive(Debug)]
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

impl CallCounter {
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
