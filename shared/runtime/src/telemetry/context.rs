//! The trace context one piece of work carries from function to function: W3C Trace
//! Context's `traceparent` (what OpenTelemetry propagates) and, on Lambda, X-Ray's
//! `AWSTraceHeader` (what SQS and Lambda propagate), the same ids in two spellings.
//!
//! A trace id is 16 bytes and a span id 8. X-Ray's trace id is `1-` + 8 hex digits of
//! the trace's start in Unix seconds + `-` + 24 random hex digits; a trace id made here
//! starts with that time too, so each id reads the same in both systems (X-Ray refuses a
//! trace id whose time is far from now).

use std::fmt;

/// The W3C `traceparent` version this reads and writes.
const VERSION: &str = "00";

/// The context of one span: its trace, its own id, and whether the trace is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceContext {
    /// The trace every span of one piece of work shares.
    pub trace_id: u128,
    /// This span's id (the parent of the spans it causes).
    pub span_id: u64,
    /// Whether the trace is recorded (W3C's `sampled` flag, X-Ray's `Sampled=1`).
    pub sampled: bool,
}

impl TraceContext {
    /// The root span of a new trace, starting at `now` (Unix seconds).
    pub fn new_trace(now: f64) -> Self {
        let random = u128::from_str_radix(&stm_core::execution::new_id(), 16).unwrap_or_default();
        // the first 32 bits are the start time, as X-Ray's ids have it
        let seconds = now.max(0.0) as u128 & 0xffff_ffff;
        TraceContext {
            trace_id: (seconds << 96) | (random & ((1u128 << 96) - 1)),
            span_id: new_span_id(),
            sampled: true,
        }
    }

    /// A new span in the same trace, caused by this one.
    pub fn child(&self) -> Self {
        TraceContext {
            span_id: new_span_id(),
            ..*self
        }
    }

    /// The W3C `traceparent`: `00-{trace id}-{span id}-{flags}`.
    pub fn traceparent(&self) -> String {
        format!(
            "{VERSION}-{:032x}-{:016x}-{:02x}",
            self.trace_id,
            self.span_id,
            u8::from(self.sampled)
        )
    }

    /// A W3C `traceparent`, or `None` when it is not one (a malformed header is ignored,
    /// as the specification says: the work then starts a trace of its own).
    pub fn from_traceparent(text: &str) -> Option<Self> {
        let mut parts = text.trim().split('-');
        let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        // a later version may append fields; version 00 has exactly four
        if version.len() != 2 || version == "ff" || (version == VERSION && parts.next().is_some()) {
            return None;
        }
        let trace_id = hex_u128(trace, 32)?;
        let span_id = hex_u64(span, 16)?;
        let flags = u8::from_str_radix(flags, 16).ok().filter(|_| flags.len() == 2)?;
        // all-zero ids are invalid
        (trace_id != 0 && span_id != 0).then_some(TraceContext {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// X-Ray's tracing header: `Root=1-{8 hex}-{24 hex};Parent={16 hex};Sampled={0|1}`.
    pub fn aws_trace_header(&self) -> String {
        format!(
            "Root={};Parent={:016x};Sampled={}",
            self.xray_trace_id(),
            self.span_id,
            u8::from(self.sampled)
        )
    }

    /// X-Ray's trace id of this trace: `1-{8 hex}-{24 hex}`.
    pub fn xray_trace_id(&self) -> String {
        let hex = format!("{:032x}", self.trace_id);
        format!("1-{}-{}", &hex[..8], &hex[8..])
    }

    /// An X-Ray tracing header with a `Root` and a `Parent` (`None` otherwise: a header
    /// without a parent names no span to follow). A missing `Sampled` counts as sampled.
    pub fn from_aws_trace_header(text: &str) -> Option<Self> {
        let (mut root, mut parent, mut sampled) = (None, None, true);
        for field in text.split(';') {
            match field.trim().split_once('=') {
                Some(("Root", value)) => root = Some(value),
                Some(("Parent", value)) => parent = Some(value),
                Some(("Sampled", value)) => sampled = value != "0",
                _ => {}
            }
        }
        let mut root = root?.split('-');
        let (version, time, random) = (root.next()?, root.next()?, root.next()?);
        if version != "1" || time.len() != 8 || random.len() != 24 || root.next().is_some() {
            return None;
        }
        let trace_id = hex_u128(&format!("{time}{random}"), 32)?;
        let span_id = hex_u64(parent?, 16)?;
        (trace_id != 0 && span_id != 0).then_some(TraceContext {
            trace_id,
            span_id,
            sampled,
        })
    }
}

impl fmt::Display for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.traceparent())
    }
}

/// A new span id: never zero (W3C's invalid id).
pub(crate) fn new_span_id() -> u64 {
    let id = stm_core::execution::new_id();
    u64::from_str_radix(&id[..16], 16)
        .ok()
        .filter(|&n| n != 0)
        .unwrap_or(1)
}

/// Exactly `digits` lowercase or uppercase hex digits.
fn hex_u128(text: &str, digits: usize) -> Option<u128> {
    (text.len() == digits && text.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u128::from_str_radix(text, 16).ok())
        .flatten()
}

fn hex_u64(text: &str, digits: usize) -> Option<u64> {
    hex_u128(text, digits).and_then(|n| u64::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::TraceContext;

    #[test]
    fn the_w3c_examples_read_and_write_back() {
        // the specification's own example
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let ctx = TraceContext::from_traceparent(text).expect("valid");
        assert_eq!(ctx.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(ctx.span_id, 0x00f067aa0ba902b7);
        assert!(ctx.sampled);
        assert_eq!(ctx.traceparent(), text);
        let unsampled =
            TraceContext::from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        assert!(!unsampled.expect("valid").sampled);
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        for text in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::from_traceparent(text), None, "{text:?}");
        }
    }

    #[test]
    fn the_xray_header_is_the_same_ids() {
        // X-Ray's documented example
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        let ctx = TraceContext::from_aws_trace_header(header).expect("valid");
        assert_eq!(ctx.trace_id, 0x5759e988bd862e3fe1be46a994272793);
        assert_eq!(ctx.span_id, 0x53995c3f42cd8ad8);
        assert_eq!(ctx.aws_trace_header(), header);
        assert_eq!(
            ctx.traceparent(),
            "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
        );
        assert!(
            !TraceContext::from_aws_trace_header(&header.replace("Sampled=1", "Sampled=0"))
                .expect("valid")
                .sampled
        );
        // a root alone names no parent span
        assert_eq!(
            TraceContext::from_aws_trace_header("Root=1-5759e988-bd862e3fe1be46a994272793"),
            None
        );
        assert_eq!(
            TraceContext::from_aws_trace_header(
                "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8"
            ),
            None
        );
    }

    #[test]
    fn a_new_trace_starts_with_its_time_and_its_spans_differ() {
        let now = 1_765_000_000.5;
        let ctx = TraceContext::new_trace(now);
        assert_eq!(ctx.xray_trace_id()[2..10], format!("{:08x}", now as u64));
        let child = ctx.child();
        assert_eq!(child.trace_id, ctx.trace_id);
        assert_ne!(child.span_id, ctx.span_id);
        assert_ne!(TraceContext::new_trace(now).trace_id, ctx.trace_id);
        // round trips through both spellings
        assert_eq!(TraceContext::from_traceparent(&ctx.traceparent()), Some(ctx));
        assert_eq!(
            TraceContext::from_aws_trace_header(&ctx.aws_trace_header()),
            Some(ctx)
        );
    }
}
