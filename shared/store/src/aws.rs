//! AWS SDK plumbing shared by the DynamoDB store (and reusable by the other AWS clients):
//! the HTTP client, the SDK config for real AWS or an emulator endpoint, and the
//! [`CallCounter`] interceptor.
//!
//! The SDK crates are built without their default features, which would compile aws-lc-sys
//! (a long C build); the HTTPS client is hyper 1 + rustls over the `ring` crypto provider,
//! built here once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_config::{BehaviorVersion, SdkConfig};
use aws_sdk_dynamodb::config::{Credentials, Region};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
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

/// The SDK config for `region`: with an `endpoint_url` (moto, LocalStack, DynamoDB Local)
/// dummy static credentials and that endpoint; without one the default credential chain
/// (environment, profile, web identity, ECS/IMDS), as on Lambda.
pub async fn sdk_config(endpoint_url: Option<&str>, region: &str) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region.to_string()))
        .http_client(https_client());
    if let Some(url) = endpoint_url {
        loader = loader.endpoint_url(url).credentials_provider(Credentials::new(
            "test",
            "test",
            None,
            None,
            "stm-static",
        ));
    }
    loader.load().await
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
