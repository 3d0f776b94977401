//! The runtime a deployment command runs on, and the role it takes there.
//!
//! Every call a deployment command makes is the code of one of the template's functions,
//! under that function's policy (`operator`: OperatorPolicy, `purger`: PurgePolicy); the
//! test kit's strict layer checks it under an emulator. `stm ui` and `stm local` serve
//! many tasks and build multi-threaded runtimes of their own.

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use stm_runtime::telemetry::export::ExportHandle;
use stm_runtime::telemetry::otlp::{self, Endpoint};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::errors::usage;

/// Run one operator command to completion: exit 0 when it succeeds. With OpenTelemetry's
/// endpoint variable set, the command's own spans (a `stm create`'s or `stm send`'s
/// `send`, the root of the trace its message starts) go to that collector, sent before
/// the command exits.
pub fn operate(command: impl Future<Output = Result<()>>) -> Result<ExitCode> {
    let spans = command_spans()?;
    let result = run_as(
        "operator",
        async move { command.await.map(|()| ExitCode::SUCCESS) },
    );
    if let Some(spans) = spans {
        spans.flush(SPANS_FLUSH_WAIT);
    }
    result
}

/// The longest a command waits, before it exits, for its spans to reach the collector.
const SPANS_FLUSH_WAIT: Duration = Duration::from_secs(2);

/// The exporter of the command's spans, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
/// `…_TRACES_ENDPOINT`) names a collector; a value that names none is a usage error,
/// before anything is sent.
fn command_spans() -> Result<Option<ExportHandle>> {
    let endpoint = Endpoint::from_lookup(|name| std::env::var(name).ok()).map_err(|err| {
        usage(format!(
            "{} (or {}): {err}",
            stm_env::OTEL_ENDPOINT,
            stm_env::OTEL_TRACES_ENDPOINT
        ))
    })?;
    let Some(endpoint) = endpoint else {
        return Ok(None);
    };
    let (layer, handle) = otlp::layer(endpoint, "stm-cli");
    let _ = tracing_subscriber::registry().with(layer).try_init();
    Ok(Some(handle))
}

/// Run `command` to completion as the code of `function`, on a runtime of its own.
pub fn run_as(function: &'static str, command: impl Future<Output = Result<ExitCode>>) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(stm_aws::as_function(function, command))
}
