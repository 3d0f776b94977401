//! What both exporters share ([`super::otlp`], [`super::xray`]): the `tracing_subscriber`
//! layer that turns our spans into closed spans with their place in a trace, and the
//! thread that sends them in batches to a sink (the exporter's transport).
//!
//! A span with `trace_id` and `span_id` fields ([`super::trace_id_field`]) starts its
//! place in a trace (its parent, when it has one, is in another process: the sender of
//! the message it handles), and a span opened inside one (the worker's load, step,
//! commit and publish) takes the same trace and a new span id. Spans outside any trace
//! are not exported, nor those of other crates (the AWS SDK's). A closed span goes to a
//! bounded queue ([`QUEUE_SPANS`]) that a thread of its own drains in batches, so the work
//! never waits on the collector: when the queue is full, spans are dropped and counted
//! ([`ExportHandle::dropped`]), never held without bound.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use super::context::new_span_id;

/// Closed spans waiting for the exporter thread, at most.
pub const QUEUE_SPANS: usize = 4096;

/// Spans in one batch, at most.
const BATCH_SPANS: usize = 512;

/// How long a closed span waits for more to fill its batch.
const BATCH_WAIT: Duration = Duration::from_millis(200);

/// One closed span, as a sink sends it.
#[derive(Debug, Clone)]
pub(crate) struct Finished {
    pub(crate) name: &'static str,
    pub(crate) trace_id: u128,
    pub(crate) span_id: u64,
    pub(crate) parent: Option<u64>,
    /// The parent is a span of this process (X-Ray's subsegment), not the sender of a
    /// message in another one.
    pub(crate) local_parent: bool,
    pub(crate) start_nanos: u128,
    pub(crate) end_nanos: u128,
    pub(crate) attributes: Vec<(&'static str, String)>,
}

/// Where the exporter thread sends its batches.
pub(crate) trait Sink: Send + 'static {
    /// Send `batch`; `Err` when the receiver did not take it (counted, never retried:
    /// spans are best effort).
    fn send(&self, batch: &[Finished]) -> std::io::Result<()>;
}

/// Which traces a layer exports: every one, or those whose id falls in a share (decided
/// from the id's random low 64 bits alone, so every function keeps or drops the same
/// traces, whole).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Keep {
    All,
    Share(f64),
}

impl Keep {
    pub(crate) fn keeps(self, trace_id: u128) -> bool {
        match self {
            Keep::All => true,
            Keep::Share(ratio) if ratio >= 1.0 => true,
            Keep::Share(ratio) if ratio.is_nan() || ratio <= 0.0 => false,
            // the low 64 bits are random in our ids and in X-Ray's alike
            Keep::Share(ratio) => ((trace_id as u64) as f64) < ratio * (u64::MAX as f64),
        }
    }
}

/// What the exporter thread is asked to do.
#[derive(Debug)]
enum Job {
    Span(Box<Finished>),
    /// Send everything queued so far, then answer.
    Flush(SyncSender<()>),
}

/// The layer: install it beside the log lines (`tracing_subscriber::registry().with(…)`).
/// One layer for every exporter ([`SpanLayer::and`]): a span's place in its trace is
/// kept once, in the registry's extensions, and each exporter gets the spans it keeps.
#[derive(Debug)]
pub struct SpanLayer {
    destinations: Vec<Destination>,
}

/// One exporter's queue, and which traces it takes.
#[derive(Debug)]
struct Destination {
    jobs: SyncSender<Job>,
    dropped: Arc<AtomicU64>,
    keep: Keep,
}

impl Destination {
    fn take(&self, span: Box<Finished>) {
        if let Err(TrySendError::Full(_)) = self.jobs.try_send(Job::Span(span)) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl SpanLayer {
    /// This layer's exporters and `other`'s, in one layer (two layers of this kind in one
    /// subscriber would each claim the same spans).
    pub fn and(mut self, other: SpanLayer) -> SpanLayer {
        self.destinations.extend(other.destinations);
        self
    }
}

/// What the installer keeps: a flush for a function about to be frozen, and the count of
/// spans dropped.
#[derive(Clone, Debug)]
pub struct ExportHandle {
    jobs: SyncSender<Job>,
    dropped: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
}

impl ExportHandle {
    /// Send every span closed so far, waiting at most `timeout` (Lambda freezes the
    /// process between invocations: a batch not sent by then would wait for the next).
    pub fn flush(&self, timeout: Duration) {
        flush_all(std::slice::from_ref(self), timeout);
    }

    /// Ask the exporter thread to send what it holds; the answer comes when it has.
    fn request_flush(&self) -> Option<Receiver<()>> {
        let (done, wait) = sync_channel(1);
        self.jobs.send(Job::Flush(done)).ok().map(|()| wait)
    }

    /// Spans dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Batches the receiver did not take (refused, unreachable or timed out).
    pub fn failed_requests(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// [`ExportHandle::flush`] for every exporter at once: each is asked first, then waited
/// for, so the wait is the slowest one's, at most `timeout` in all.
pub fn flush_all(handles: &[ExportHandle], timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let waits: Vec<Receiver<()>> = handles.iter().filter_map(ExportHandle::request_flush).collect();
    for wait in waits {
        let _ = wait.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }
}

/// A layer sending the traces `keep` picks to `sink`, and its handle. Starts the exporter
/// thread, named `thread`.
pub(crate) fn start(sink: Box<dyn Sink>, keep: Keep, thread: &str) -> (SpanLayer, ExportHandle) {
    let (jobs, queue) = sync_channel(QUEUE_SPANS);
    let dropped = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let exporter = Exporter {
        sink,
        failed: failed.clone(),
    };
    if let Err(err) = std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || exporter.run(queue))
    {
        // the layer then drops every span, counted: the work goes on untraced
        tracing::warn!(error = %err, exporter = thread, "could not start a span exporter thread; spans are dropped");
    }
    let handle = ExportHandle {
        jobs: jobs.clone(),
        dropped: dropped.clone(),
        failed,
    };
    let destination = Destination { jobs, dropped, keep };
    (
        SpanLayer {
            destinations: vec![destination],
        },
        handle,
    )
}

/// A span's place in its trace, kept in the registry's extensions until it closes.
struct Open {
    trace_id: u128,
    span_id: u64,
    parent: Option<u64>,
    local_parent: bool,
    start_nanos: u128,
    attributes: Vec<(&'static str, String)>,
}

/// A span's fields as text; the three trace fields apart.
#[derive(Default)]
struct Fields {
    trace_id: Option<u128>,
    span_id: Option<u64>,
    parent: Option<u64>,
    attributes: Vec<(&'static str, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "trace_id" => self.trace_id = u128::from_str_radix(value, 16).ok(),
            "span_id" => self.span_id = u64::from_str_radix(value, 16).ok(),
            "parent_span_id" => self.parent = u64::from_str_radix(value, 16).ok(),
            name => self.attributes.push((name, value.to_string())),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%value` fields arrive here, as their Display
        self.record_str(field, &format!("{value:?}"));
    }
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

impl<S> Layer<S> for SpanLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        // ours only: the AWS SDK's own spans (each request's attempts) stay out
        if !attrs.metadata().target().starts_with("stm") {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let place = match (fields.trace_id, fields.span_id) {
            (Some(trace_id), Some(span_id)) => Some((trace_id, span_id, fields.parent, false)),
            // inside a traced span: the same trace, a span of its own
            _ => span.parent().and_then(|parent| {
                parent
                    .extensions()
                    .get::<Open>()
                    .map(|open| (open.trace_id, new_span_id(), Some(open.span_id), true))
            }),
        };
        if let Some((trace_id, span_id, parent, local_parent)) = place {
            if !self.destinations.iter().any(|d| d.keep.keeps(trace_id)) {
                return;
            }
            span.extensions_mut().insert(Open {
                trace_id,
                span_id,
                parent,
                local_parent,
                start_nanos: now_nanos(),
                attributes: fields.attributes,
            });
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        if let Some(open) = extensions.get_mut::<Open>() {
            let mut fields = Fields::default();
            values.record(&mut fields);
            for (name, value) in fields.attributes {
                open.attributes.retain(|(n, _)| *n != name);
                open.attributes.push((name, value));
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(open) = span.extensions_mut().remove::<Open>() else {
            return;
        };
        let finished = Finished {
            name: span.name(),
            trace_id: open.trace_id,
            span_id: open.span_id,
            parent: open.parent,
            local_parent: open.local_parent,
            start_nanos: open.start_nanos,
            end_nanos: now_nanos(),
            attributes: open.attributes,
        };
        let takers: Vec<&Destination> = self
            .destinations
            .iter()
            .filter(|d| d.keep.keeps(finished.trace_id))
            .collect();
        let Some((last, others)) = takers.split_last() else {
            return;
        };
        for destination in others {
            destination.take(Box::new(finished.clone()));
        }
        last.take(Box::new(finished));
    }
}

/// The thread that sends batches.
struct Exporter {
    sink: Box<dyn Sink>,
    failed: Arc<AtomicU64>,
}

impl Exporter {
    fn run(self, queue: Receiver<Job>) {
        let mut batch: Vec<Finished> = Vec::new();
        loop {
            let job = if batch.is_empty() {
                queue.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                queue.recv_timeout(BATCH_WAIT)
            };
            match job {
                Ok(Job::Span(span)) => {
                    batch.push(*span);
                    if batch.len() >= BATCH_SPANS {
                        self.send(&mut batch);
                    }
                }
                Ok(Job::Flush(done)) => {
                    self.send(&mut batch);
                    let _ = done.send(());
                }
                Err(RecvTimeoutError::Timeout) => self.send(&mut batch),
                Err(RecvTimeoutError::Disconnected) => {
                    self.send(&mut batch);
                    return;
                }
            }
        }
    }

    fn send(&self, batch: &mut Vec<Finished>) {
        if batch.is_empty() {
            return;
        }
        if self.sink.send(batch).is_err() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tracing_subscriber::layer::SubscriberExt;

    /// Keeps what it is sent.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<Vec<Finished>>>);

    impl Sink for Kept {
        fn send(&self, batch: &[Finished]) -> std::io::Result<()> {
            self.0.lock().expect("kept").extend_from_slice(batch);
            Ok(())
        }
    }

    #[test]
    fn one_layer_feeds_each_exporter_the_traces_it_keeps() {
        let (every, none) = (Kept::default(), Kept::default());
        let (layer, every_handle) = start(Box::new(every.clone()), Keep::All, "test-all");
        let (other, none_handle) = start(Box::new(none.clone()), Keep::Share(0.0), "test-none");
        let subscriber = tracing_subscriber::registry().with(layer.and(other));
        tracing::subscriber::with_default(subscriber, || {
            let record = tracing::info_span!(
                target: "stm_runtime::worker",
                "record",
                trace_id = "4bf92f3577b34da6a3ce929d0e0e4736",
                span_id = "00f067aa0ba902b7",
                execution_id = "e-1",
            );
            record.in_scope(|| {
                tracing::info_span!(target: "stm_runtime::driver", "step").in_scope(|| {});
            });
            // not ours: the SDK's spans stay out
            tracing::info_span!(target: "aws_smithy_runtime", "send", trace_id = "1", span_id = "2")
                .in_scope(|| {});
        });
        every_handle.flush(Duration::from_secs(5));
        none_handle.flush(Duration::from_secs(5));
        let kept = every.0.lock().expect("kept").clone();
        let names: Vec<&str> = kept.iter().map(|s| s.name).collect();
        assert_eq!(names, ["step", "record"]);
        let (step, record) = (&kept[0], &kept[1]);
        assert_eq!(record.span_id, 0x00f067aa0ba902b7);
        assert_eq!((record.parent, record.local_parent), (None, false));
        assert_eq!((step.parent, step.local_parent), (Some(record.span_id), true));
        assert_eq!(step.trace_id, record.trace_id);
        assert_eq!(record.attributes, [("execution_id", "e-1".to_string())]);
        assert!(none.0.lock().expect("kept").is_empty());
    }

    #[test]
    fn a_share_keeps_a_trace_by_its_id_alone() {
        let ids: Vec<u128> = (0..4000u128)
            .map(|i| (0x5f00_0000u128 << 96) | (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & u64::MAX as u128))
            .collect();
        let kept = |keep: Keep| ids.iter().filter(|id| keep.keeps(**id)).count();
        assert_eq!(kept(Keep::All), 4000);
        assert_eq!(kept(Keep::Share(1.0)), 4000);
        assert_eq!(kept(Keep::Share(0.0)), 0);
        assert_eq!(kept(Keep::Share(f64::NAN)), 0);
        let tenth = kept(Keep::Share(0.1));
        assert!((300..500).contains(&tenth), "{tenth} of 4000 kept at 0.1");
        // the same id, the same answer, whatever the time bits say
        let id = ids[7];
        let later = (id & u64::MAX as u128) | (0x6000_0000u128 << 96);
        assert_eq!(Keep::Share(0.5).keeps(id), Keep::Share(0.5).keeps(later));
    }
}
