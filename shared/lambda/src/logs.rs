//! What a function writes besides its answers: JSON log lines for CloudWatch, the
//! Embedded Metric Format lines the runtime writes on Lambda, and its spans: to the
//! collector OpenTelemetry's endpoint variables name (`stm_runtime::telemetry::otlp`), and
//! to X-Ray when the function's tracing is Active (`stm_runtime::telemetry::xray`).

use std::sync::OnceLock;
use std::time::Duration;

use stm_runtime::telemetry::export::{self, ExportHandle, SpanLayer};
use stm_runtime::telemetry::otlp::{self, Endpoint};
use stm_runtime::telemetry::xray::{self, Daemon};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

use crate::context::InitError;

/// The exporters of this process's spans (none, OTLP's, X-Ray's or both).
static SPANS: OnceLock<Vec<ExportHandle>> = OnceLock::new();

/// The longest an invocation waits, at its end, for its spans to reach the collector.
const FLUSH_WAIT: Duration = Duration::from_millis(500);

/// JSON log lines on stdout (CloudWatch), level from `RUST_LOG` (default `info`), the
/// metric lines on unless `STM_METRICS` says otherwise, and the spans exported as
/// `stm-{function}`: over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`)
/// is set, and to X-Ray's daemon when `STM_XRAY_SAMPLE_RATIO` is above 0 and Lambda names
/// the daemon (`AWS_XRAY_DAEMON_ADDRESS`, set when the function's tracing is Active). A
/// setting that is there but unusable fails the cold start with the reason.
pub(crate) fn init(function: &str) -> Result<(), InitError> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let service = format!("stm-{function}");
    let lookup = |name: &str| std::env::var(name).ok();
    let endpoint = Endpoint::from_lookup(lookup);
    let daemon = Daemon::from_lookup(lookup);
    let mut handles = Vec::new();
    let otlp_spans = match &endpoint {
        Ok(Some(endpoint)) => {
            let (layer, handle) = otlp::layer(endpoint.clone(), &service);
            handles.push(handle);
            Some(layer)
        }
        _ => None,
    };
    let mut socket_error = None;
    let xray_spans = match &daemon {
        Ok(Some(daemon)) => match xray::layer(daemon, &service) {
            Ok((layer, handle)) => {
                handles.push(handle);
                Some(layer)
            }
            Err(err) => {
                socket_error = Some(err);
                None
            }
        },
        _ => None,
    };
    let _ = SPANS.set(handles);
    let spans = otlp_spans.into_iter().chain(xray_spans).reduce(SpanLayer::and);
    let subscriber = tracing_subscriber::registry()
        .with(json_layer(std::io::stdout).with_filter(filter))
        .with(spans);
    let _ = tracing::subscriber::set_global_default(subscriber);
    stm_runtime::metrics::emit_by_default();
    if let Some(err) = socket_error {
        // the work goes on untraced: a socket is the process's, not the configuration's
        tracing::warn!(error = %err, "could not open a UDP socket for X-Ray; no segments are sent");
    }
    endpoint?;
    daemon?;
    Ok(())
}

/// Send the spans of the invocation ending now: Lambda freezes the process until the next
/// one, and a batch left waiting would reach the collector only then.
pub(crate) async fn flush_spans() {
    if let Some(handles) = SPANS.get().filter(|handles| !handles.is_empty()) {
        // side by side: the wait is the slower exporter's, not their sum
        let _ = tokio::task::spawn_blocking(move || export::flush_all(handles, FLUSH_WAIT)).await;
    }
}

/// One JSON object a line. A line written while the worker handles a record carries the
/// record's span, so that a CloudWatch Logs Insights query finds every line of one message
/// or execution by a field (`span.message_id`, `span.group_id`, `span.execution_id`, and
/// `span.trace_id`, the trace a collector shows) instead of each call repeating them:
///
/// ```text
/// {"timestamp":"…","level":"WARN","fields":{"message":"lost the CAS; redelivered","reason":"…"},
///  "span":{"message_id":"…","group_id":"o-1","execution_id":"o-1","trace_id":"…","name":"record"}}
/// ```
fn json_layer<S, W>(writer: W) -> impl Layer<S> + Send + Sync
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt::layer()
        .json()
        .with_target(false)
        .with_current_span(true)
        .with_span_list(false)
        .with_writer(writer)
}

/// [`json_layer`] alone, filtered: the lines as a function writes them.
#[cfg(test)]
fn json_lines<W>(filter: EnvFilter, writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::registry().with(json_layer(writer).with_filter(filter))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    use stm_runtime::{ActionRegistry, Definitions, Driver, MemoryQueue, Worker, WorkerSettings};

    /// The lines written, shared with the test.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Captured {
        type Writer = Captured;
        fn make_writer(&'w self) -> Captured {
            self.clone()
        }
    }

    /// The worker's lines for the repository's two sample records, a poison message and
    /// an event for an execution the store does not hold, as the function writes them.
    fn lines_for(samples: &[&str]) -> Vec<serde_json::Value> {
        let captured = Captured::default();
        let subscriber = json_lines(EnvFilter::new("info"), captured.clone());
        tracing::subscriber::with_default(subscriber, || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            let store = Arc::new(stm_store::MemoryStore::new());
            let driver = Driver::new(store, Definitions::new(), ActionRegistry::new());
            let worker = Worker::new(driver, Arc::new(MemoryQueue::new(3)), WorkerSettings::default());
            for sample in samples {
                let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../events")
                    .join(sample);
                let text = std::fs::read_to_string(&path).expect("the sample is in events/");
                let event: crate::events::SqsEvent = serde_json::from_str(&text).expect("a Lambda SQS event");
                runtime.block_on(crate::handle_sqs_event(&worker, event, None));
            }
        });
        let text = String::from_utf8(captured.0.lock().expect("lines").clone()).expect("UTF-8");
        text.lines()
            .map(|line| serde_json::from_str(line).expect("each line is one JSON object"))
            .collect()
    }

    #[test]
    fn a_records_lines_carry_its_message_group_and_execution_ids() {
        let lines = lines_for(&["worker-poison.json", "worker-domain-event.json"]);
        let line = |words: &str| {
            lines
                .iter()
                .find(|l| l["fields"]["message"].as_str().is_some_and(|m| m.contains(words)))
                .unwrap_or_else(|| panic!("no line says {words:?}: {lines:#?}"))
        };
        // the poison message's body names no execution: its line has the ids SQS gave
        let poison = line("poison message");
        assert_eq!(poison["level"], "ERROR");
        assert_eq!(poison["span"]["name"], "record");
        assert_eq!(
            poison["span"]["message_id"],
            "0e8f1a52-0000-4000-8000-000000000003"
        );
        assert_eq!(poison["span"]["group_id"], "order-1");
        assert!(poison["span"].get("execution_id").is_none(), "{poison}");
        assert!(
            poison["fields"].get("message_id").is_none(),
            "said once: {poison}"
        );
        // the event's line gains its execution's id once the body is read
        let unknown = line("no such execution");
        assert_eq!(
            unknown["span"]["message_id"],
            "0e8f1a52-0000-4000-8000-000000000001"
        );
        assert_eq!(unknown["span"]["execution_id"], "order-1");
    }
}
