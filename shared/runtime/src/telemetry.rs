//! Tracing across functions: one piece of work followed from the client's send through
//! the worker, its flush and the children it spawned, as one trace.
//!
//! The context travels with the data, not beside it: every message sent to the queue
//! carries a W3C `traceparent` message attribute ([`TRACEPARENT_ATTRIBUTE`]) naming the
//! trace and the span that sent it, so a redelivered message joins the same trace as its
//! first delivery. On Lambda, a message that lacks it but carries X-Ray's `AWSTraceHeader`
//! system attribute (set by a traced sender) is read from that.
//!
//! While a record is handled its context is the *current* one ([`in_context`],
//! [`current`]): every message built meanwhile ([`OutgoingMessage`]'s constructors)
//! names the record's span as its parent. A row or timer carries its commit's context to
//! whoever sends its message later. A message built outside any context (a row harel
//! wrote, say) carries none, and its handler starts a trace.
//!
//! The attribute is best effort: a message whose body leaves no room for it under SQS's
//! size limit is sent without it, so tracing never changes what is sent or refused
//! (harel's messages carry no attributes, and its limits stay ours).
//!
//! [`OutgoingMessage`]: crate::queue::OutgoingMessage

/// `$work.await` inside `$span` when a subscriber records the span, else `$work.await`
/// alone: wrapping a future moves it into the wrapper, which the embedded runner's steps
/// pay for on every event even with nothing listening. A macro, so that the future is
/// built in the branch that awaits it and never moved.
macro_rules! in_span {
    ($span:expr, $work:expr) => {{
        let span: tracing::Span = $span;
        if span.is_disabled() {
            $work.await
        } else {
            tracing::Instrument::instrument($work, span).await
        }
    }};
}
pub(crate) use in_span;

use std::collections::BTreeMap;
use std::future::Future;

mod context;
#[cfg(feature = "aws")]
pub mod export;
#[cfg(feature = "aws")]
pub mod otlp;
#[cfg(feature = "aws")]
pub mod xray;
pub use context::TraceContext;

/// The message attribute that carries the W3C trace context.
pub const TRACEPARENT_ATTRIBUTE: &str = "traceparent";

/// SQS's system attribute for X-Ray's tracing header (`MessageSystemAttributes` on send,
/// `Attributes` on receive and in Lambda's SQS event).
pub const AWS_TRACE_HEADER: &str = "AWSTraceHeader";

/// The length of a `traceparent` value (version 00).
const TRACEPARENT_LEN: usize = 55;

/// What the `traceparent` attribute adds to a message's size as SQS counts it: its name,
/// its data type and its value.
pub const TRACEPARENT_ATTRIBUTE_BYTES: usize = TRACEPARENT_ATTRIBUTE.len() + "String".len() + TRACEPARENT_LEN;

tokio::task_local! {
    static CURRENT: Current;
}

/// The current context, and the one it was caused by when that came from elsewhere (the
/// sender of the message being handled).
#[derive(Clone, Copy)]
struct Current {
    ctx: TraceContext,
    parent: Option<TraceContext>,
}

/// Run `work` with `ctx` as the current context.
pub async fn in_context<F: Future>(ctx: TraceContext, work: F) -> F::Output {
    in_context_under(ctx, None, work).await
}

/// Run `work` with `ctx` as the current context, caused by `parent` (the context a
/// received message carried): what a trace step records of its place
/// ([`current_parent`]).
pub async fn in_context_under<F: Future>(
    ctx: TraceContext,
    parent: Option<TraceContext>,
    work: F,
) -> F::Output {
    CURRENT.scope(Current { ctx, parent }, work).await
}

/// The current context, if the caller runs inside [`in_context`].
pub fn current() -> Option<TraceContext> {
    CURRENT.try_with(|c| c.ctx).ok()
}

/// The context the current one was caused by, when [`in_context_under`] named one.
pub fn current_parent() -> Option<TraceContext> {
    CURRENT.try_with(|c| c.parent).ok().flatten()
}

/// The context of handling a received message: a new span in the trace its sender
/// named, else the root span of a new trace.
pub fn handling(carried: Option<TraceContext>) -> TraceContext {
    carried.map_or_else(
        || TraceContext::new_trace(crate::driver::Clock::now(&crate::driver::SystemClock)),
        |parent| parent.child(),
    )
}

/// The span fields that give a `tracing` span its place in a trace (what the exporter
/// reads, [`otlp`]): `trace_id` (32 hex digits), `span_id` (16) and, when it has one,
/// `parent_span_id` (16).
pub fn trace_id_field(ctx: &TraceContext) -> String {
    format!("{:032x}", ctx.trace_id)
}

/// See [`trace_id_field`].
pub fn span_id_field(ctx: &TraceContext) -> String {
    format!("{:016x}", ctx.span_id)
}

/// See [`trace_id_field`]: the parent's span id, when the work has a parent.
pub fn parent_field(parent: Option<TraceContext>) -> Option<String> {
    parent.map(|p| span_id_field(&p))
}

/// The context a received message carries: its `traceparent` message attribute, else its
/// `AWSTraceHeader` system attribute; `None` when neither is there or readable.
pub fn carried(
    message_attributes: &BTreeMap<String, String>,
    system_attributes: &BTreeMap<String, String>,
) -> Option<TraceContext> {
    message_attributes
        .get(TRACEPARENT_ATTRIBUTE)
        .and_then(|v| TraceContext::from_traceparent(v))
        .or_else(|| {
            system_attributes
                .get(AWS_TRACE_HEADER)
                .and_then(|v| TraceContext::from_aws_trace_header(v))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attribute_size_is_what_a_traceparent_takes() {
        let ctx = TraceContext::new_trace(1.0);
        assert_eq!(ctx.traceparent().len(), TRACEPARENT_LEN);
        assert_eq!(
            TRACEPARENT_ATTRIBUTE_BYTES,
            "traceparent".len() + "String".len() + 55
        );
    }

    #[test]
    fn the_message_attribute_wins_over_the_xray_header() {
        let w3c = TraceContext::new_trace(1.0);
        let xray = TraceContext::new_trace(2.0);
        let attrs = BTreeMap::from([(TRACEPARENT_ATTRIBUTE.to_string(), w3c.traceparent())]);
        let system = BTreeMap::from([(AWS_TRACE_HEADER.to_string(), xray.aws_trace_header())]);
        assert_eq!(carried(&attrs, &system), Some(w3c));
        assert_eq!(carried(&BTreeMap::new(), &system), Some(xray));
        let broken = BTreeMap::from([(TRACEPARENT_ATTRIBUTE.to_string(), "nonsense".to_string())]);
        assert_eq!(carried(&broken, &system), Some(xray));
        assert_eq!(carried(&broken, &BTreeMap::new()), None);
    }

    #[tokio::test]
    async fn the_current_context_is_the_scope_s() {
        assert_eq!(current(), None);
        let ctx = TraceContext::new_trace(1.0);
        assert_eq!(in_context(ctx, async { current() }).await, Some(ctx));
        assert_eq!(current(), None);
    }
}
