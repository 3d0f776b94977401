//! The remote-action client (feature `aws`): [`RemoteActions`] owns one I/O thread with
//! its own tokio runtime, a Lambda SDK client (built only when a binding needs it) and a
//! hyper 1 + rustls (ring) HTTPS client.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use stm_core::engine::ActionError;

use super::{apply_response, request_payload, RemoteError, RemoteSettings, RemoteTarget};
use crate::actions::{ActionInput, ActionRegistry};

type Reply = std::sync::mpsc::SyncSender<Result<Value, ActionError>>;

struct Job {
    target: RemoteTarget,
    body: Vec<u8>,
    reply: Reply,
}

/// The client side of remote actions: owns the I/O thread and its clients.
#[derive(Clone)]
pub struct RemoteActions {
    bindings: BTreeMap<String, RemoteTarget>,
    settings: RemoteSettings,
    jobs: tokio::sync::mpsc::UnboundedSender<Job>,
}

impl std::fmt::Debug for RemoteActions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteActions")
            .field("bindings", &self.bindings)
            .field("settings", &self.settings)
            .finish()
    }
}

impl RemoteActions {
    /// Start the I/O thread. The clients are built on it once, the Lambda client only
    /// when a binding needs it.
    pub fn start(
        bindings: BTreeMap<String, RemoteTarget>,
        settings: RemoteSettings,
    ) -> Result<Self, RemoteError> {
        let (jobs, mut queue) = tokio::sync::mpsc::unbounded_channel::<Job>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| RemoteError::Startup {
                what: "the remote-action runtime",
                source,
            })?;
        let needs_lambda = bindings.values().any(|t| matches!(t, RemoteTarget::Lambda(_)));
        let io_settings = settings.clone();
        std::thread::Builder::new()
            .name("stm-remote-actions".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let clients = Arc::new(Clients::new(&io_settings, needs_lambda).await);
                    while let Some(job) = queue.recv().await {
                        let clients = clients.clone();
                        let settings = io_settings.clone();
                        tokio::spawn(async move {
                            let outcome = tokio::time::timeout(
                                settings.timeout,
                                clients.call(&job.target, job.body, settings.max_response_bytes),
                            )
                            .await
                            .unwrap_or_else(|_| {
                                Err(ActionError::new(
                                    "TimeoutError",
                                    format!("{} did not answer within {:?}", job.target, settings.timeout),
                                ))
                            });
                            // the caller may have given up already: nothing to do then
                            let _ = job.reply.send(outcome);
                        });
                    }
                });
            })
            .map_err(|source| RemoteError::Startup {
                what: "the remote-action thread",
                source,
            })?;
        Ok(RemoteActions {
            bindings,
            settings,
            jobs,
        })
    }

    pub fn bindings(&self) -> &BTreeMap<String, RemoteTarget> {
        &self.bindings
    }

    /// Register every binding into `registry` (a remote binding replaces a Rust function
    /// of the same name: configuration wins over code, so an operator can re-point one).
    pub fn register_into(&self, registry: &mut ActionRegistry) {
        for (name, target) in &self.bindings {
            let this = self.clone();
            let target = target.clone();
            registry.register(name.clone(), move |input: ActionInput<'_>| {
                this.call(&target, input)
            });
        }
    }

    /// One call: build the payload, send it, wait (bounded), apply the response.
    pub fn call(&self, target: &RemoteTarget, input: ActionInput<'_>) -> Result<Value, ActionError> {
        // harel's `json.dumps(payload)`: Infinity, NaN and big ints as Python writes them
        let body = stm_core::pyjson::dumps(&request_payload(&input)).into_bytes();
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        self.jobs
            .send(Job {
                target: target.clone(),
                body,
                reply,
            })
            .map_err(|_| ActionError::new("RemoteActionError", "the remote-action thread has stopped"))?;
        // the I/O side enforces the timeout; the margin covers only its scheduling
        let response = answer
            .recv_timeout(self.settings.timeout + Duration::from_secs(5))
            .map_err(|_| {
                ActionError::new(
                    "TimeoutError",
                    format!("{target} did not answer within {:?}", self.settings.timeout),
                )
            })??;
        apply_response(input.context, response, target)
    }
}

type HttpClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    http_body_util::Full<bytes::Bytes>,
>;

struct Clients {
    http: HttpClient,
    lambda: Option<aws_sdk_lambda::Client>,
}

impl Clients {
    async fn new(settings: &RemoteSettings, needs_lambda: bool) -> Self {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(Arc::new(rustls::crypto::ring::default_provider()))
            .map(|b| b.https_or_http().enable_http1().build())
            // no usable root store: https calls will fail with a clear TLS error, but
            // loopback http still works (and the worker still starts)
            .unwrap_or_else(|_| {
                hyper_rustls::HttpsConnectorBuilder::new()
                    .with_tls_config(
                        rustls::ClientConfig::builder_with_provider(Arc::new(
                            rustls::crypto::ring::default_provider(),
                        ))
                        .with_safe_default_protocol_versions()
                        .map(|b| {
                            b.with_root_certificates(rustls::RootCertStore::empty())
                                .with_no_client_auth()
                        })
                        .unwrap_or_else(|_| {
                            rustls::ClientConfig::builder()
                                .with_root_certificates(rustls::RootCertStore::empty())
                                .with_no_client_auth()
                        }),
                    )
                    .https_or_http()
                    .enable_http1()
                    .build()
            });
        let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(connector);
        let lambda = if needs_lambda {
            let config = stm_aws::sdk_config(settings.lambda_endpoint_url.as_deref(), &settings.region).await;
            Some(aws_sdk_lambda::Client::new(&config))
        } else {
            None
        };
        Clients { http, lambda }
    }

    async fn call(
        &self,
        target: &RemoteTarget,
        body: Vec<u8>,
        max_bytes: usize,
    ) -> Result<Value, ActionError> {
        let bytes = match target {
            RemoteTarget::Lambda(function) => self.invoke_lambda(function, body, max_bytes).await?,
            RemoteTarget::Http(url) => self.post(url, body, max_bytes).await?,
        };
        let text = std::str::from_utf8(&bytes).map_err(|_| {
            ActionError::new(
                "RemoteActionError",
                format!("{target} answered text that is not UTF-8"),
            )
        })?;
        stm_core::pyjson::loads(text).map_err(|e| {
            ActionError::new(
                "RemoteActionError",
                format!("{target} answered invalid JSON: {e}"),
            )
        })
    }

    async fn invoke_lambda(
        &self,
        function: &str,
        body: Vec<u8>,
        max_bytes: usize,
    ) -> Result<Vec<u8>, ActionError> {
        let target = || format!("lambda:{function}");
        let client = self
            .lambda
            .as_ref()
            .ok_or_else(|| ActionError::new("RemoteActionError", "no Lambda client was configured"))?;
        let out = client
            .invoke()
            .function_name(function)
            .invocation_type(aws_sdk_lambda::types::InvocationType::RequestResponse)
            .payload(aws_smithy_types::Blob::new(body))
            .send()
            .await
            .map_err(|e| {
                ActionError::new(
                    "RemoteActionError",
                    format!("{} could not be invoked: {}", target(), stm_aws::Readable(&e)),
                )
            })?;
        let payload = out
            .payload
            .map(aws_smithy_types::Blob::into_inner)
            .unwrap_or_default();
        if let Some(kind) = out.function_error {
            // the function raised: its error document ({"errorType", "errorMessage"}) is
            // the most useful thing to record, as harel does
            let text = String::from_utf8_lossy(&payload[..payload.len().min(2048)]).into_owned();
            return Err(ActionError::new(
                "RemoteActionError",
                format!("{} failed ({kind}): {text}", target()),
            ));
        }
        if payload.len() > max_bytes {
            return Err(too_large(&target(), max_bytes));
        }
        Ok(payload)
    }

    async fn post(&self, url: &str, body: Vec<u8>, max_bytes: usize) -> Result<Vec<u8>, ActionError> {
        use http_body_util::BodyExt;
        let request = http::Request::post(url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .map_err(|e| ActionError::new("RemoteActionError", format!("{url}: bad request: {e}")))?;
        let response =
            self.http.request(request).await.map_err(|e| {
                ActionError::new("RemoteActionError", format!("{url} could not be reached: {e}"))
            })?;
        let status = response.status();
        let collected = http_body_util::Limited::new(response.into_body(), max_bytes)
            .collect()
            .await
            .map_err(|e| {
                if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
                    too_large(url, max_bytes)
                } else {
                    ActionError::new(
                        "RemoteActionError",
                        format!("{url}: reading the response failed: {e}"),
                    )
                }
            })?
            .to_bytes();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&collected[..collected.len().min(2048)]).into_owned();
            return Err(ActionError::new(
                "RemoteActionError",
                format!("{url} answered HTTP {status}: {text}"),
            ));
        }
        Ok(collected.to_vec())
    }
}

fn too_large(target: &str, max_bytes: usize) -> ActionError {
    ActionError::new(
        "RemoteActionError",
        format!("{target} answered more than {max_bytes} bytes (the response-size cap)"),
    )
}
