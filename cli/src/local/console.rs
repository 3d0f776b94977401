//! The console log of `stm local`: human lines on stderr, not the functions' JSON.
//!
//! The worker's `event processed` line becomes one line per event:
//!
//! ```text
//! 12:00:01  co-1  Checkout  Idle -> Paid  RUNNING  v3  (4.1 ms)
//! ```
//!
//! (time of day in UTC, execution, event kind, the active state before and after, the
//! status and outcome, the version committed, how long the step took). Every other event
//! is one compact line: the time, the level unless it is `INFO`, the message, and the
//! fields the message does not already say (`reason`, `kind`, ...) as `key=value`.
//!
//! The level is `info` for the stack's own crates and `warn` for the rest (the AWS SDK);
//! `RUST_LOG` replaces that filter.

use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use stm_runtime::telemetry::export::ExportHandle;
use stm_runtime::telemetry::otlp::{self, Endpoint};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The filter without `RUST_LOG`.
const DEFAULT_FILTER: &str = "warn,stm=info,stm_runtime=info,stm_store=info,stm_core=info";

/// Install the console subscriber (once; a second call changes nothing), and with
/// `otel` the spans' exporter to that collector (`stm local --otel URL`), whose handle
/// flushes them at the end.
pub fn init(otel: Option<Endpoint>) -> Option<ExportHandle> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let (spans, handle) = otel.map(|endpoint| otlp::layer(endpoint, "stm-local")).unzip();
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .event_format(Console)
        .with_filter(filter);
    let _ = tracing_subscriber::registry().with(lines).with(spans).try_init();
    handle
}

/// The line format.
pub struct Console;

/// An event's fields, in order, as text (the message apart).
#[derive(Default)]
struct Fields {
    message: String,
    fields: Vec<(&'static str, String)>,
}

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.fields.push((field.name(), value.to_string()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.fields.push((field.name(), format!("{value:?}")));
        }
    }
}

impl<S, N> FormatEvent<S, N> for Console
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let line = format_line(&clock(SystemTime::now()), *event.metadata().level(), &fields);
        writeln!(writer, "{line}")
    }
}

/// `HH:MM:SS` (UTC) of `at`.
fn clock(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

fn format_line(time: &str, level: Level, fields: &Fields) -> String {
    if fields.message == "event processed" {
        if let Some(line) = processed_line(time, fields) {
            return line;
        }
    }
    let mut line = format!("{time}  ");
    if level != Level::INFO {
        let _ = write!(line, "{:<5}  ", level.to_string());
    }
    line.push_str(&fields.message);
    let mut first = true;
    for (name, value) in &fields.fields {
        // what the message already says once is not repeated (`execution co-1 is DONE`)
        if value.chars().count() > 1 && fields.message.contains(value.as_str()) && *name != "reason" {
            continue;
        }
        line.push_str(if first { "  " } else { " " });
        first = false;
        let _ = write!(line, "{name}={}", quoted(value));
    }
    line
}

/// `12:00:01  co-1  Checkout  Idle -> Paid  RUNNING  v3  (4.1 ms)`.
fn processed_line(time: &str, fields: &Fields) -> Option<String> {
    let id = fields.get("execution_id")?;
    let kind = fields.get("kind")?;
    let from = fields.get("from").unwrap_or("-");
    let to = fields.get("to").unwrap_or("-");
    let status = fields.get("status").unwrap_or("-");
    let mut line = format!("{time}  {id}  {kind}  {from} -> {to}  {status}");
    if let Some(outcome) = fields.get("outcome").filter(|o| *o != "-") {
        let _ = write!(line, " {outcome}");
    }
    if let Some(version) = fields.get("version") {
        let _ = write!(line, "  v{version}");
    }
    if let Some(regions) = fields
        .get("broadcast_to")
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        let _ = write!(line, "  broadcast to {}", crate::plural::count(regions, "region"));
    }
    if let Some(ms) = fields.get("duration_ms").and_then(|ms| ms.parse::<f64>().ok()) {
        let _ = write!(line, "  ({ms:.1} ms)");
    }
    Some(line)
}

/// A value as `key=value` shows it: quoted when it holds a space, a quote or nothing.
fn quoted(value: &str) -> String {
    if value.is_empty() || value.contains([' ', '"', '=']) {
        format!("{value:?}")
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(message: &str, pairs: &[(&'static str, &str)]) -> Fields {
        Fields {
            message: message.to_string(),
            fields: pairs.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        }
    }

    #[test]
    fn a_processed_event_is_one_line() {
        let f = fields(
            "event processed",
            &[
                ("execution_id", "co-1"),
                ("event_id", "e-1"),
                ("kind", "Checkout"),
                ("from", "Idle"),
                ("to", "Paid"),
                ("status", "RUNNING"),
                ("outcome", "-"),
                ("version", "3"),
                ("broadcast_to", "0"),
                ("duration_ms", "4.0625"),
            ],
        );
        assert_eq!(
            format_line("12:00:01", Level::INFO, &f),
            "12:00:01  co-1  Checkout  Idle -> Paid  RUNNING  v3  (4.1 ms)"
        );
        let done = fields(
            "event processed",
            &[
                ("execution_id", "o-1"),
                ("kind", "Shipped"),
                ("from", "Shipping"),
                ("to", "Delivered"),
                ("status", "DONE"),
                ("outcome", "success"),
                ("version", "7"),
                ("duration_ms", "0.5"),
            ],
        );
        assert_eq!(
            format_line("08:09:10", Level::INFO, &done),
            "08:09:10  o-1  Shipped  Shipping -> Delivered  DONE success  v7  (0.5 ms)"
        );
    }

    #[test]
    fn a_broadcast_counts_its_regions_in_the_right_number() {
        let line = |n: &str| {
            let f = fields(
                "event processed",
                &[
                    ("execution_id", "co-1"),
                    ("kind", "Reserved"),
                    ("from", "Fulfil"),
                    ("to", "Fulfil"),
                    ("status", "RUNNING"),
                    ("version", "6"),
                    ("broadcast_to", n),
                    ("duration_ms", "4.3"),
                ],
            );
            format_line("12:09:03", Level::INFO, &f)
        };
        assert_eq!(
            line("1"),
            "12:09:03  co-1  Reserved  Fulfil -> Fulfil  RUNNING  v6  broadcast to 1 region  (4.3 ms)"
        );
        assert!(line("2").contains("  broadcast to 2 regions  "), "{}", line("2"));
        assert!(!line("0").contains("broadcast"), "{}", line("0"));
    }

    #[test]
    fn other_events_say_their_fields_once() {
        let f = fields(
            "event dropped: execution co-1 is DONE",
            &[
                ("execution_id", "co-1"),
                ("event_id", "e-9"),
                ("kind", "Go"),
                (
                    "reason",
                    "a DONE execution takes no more events (Reset restarts it)",
                ),
            ],
        );
        assert_eq!(
            format_line("12:00:01", Level::INFO, &f),
            "12:00:01  event dropped: execution co-1 is DONE  event_id=e-9 kind=Go \
             reason=\"a DONE execution takes no more events (Reset restarts it)\""
        );
        let w = fields("lost the CAS; redelivered", &[("group_id", "g")]);
        assert_eq!(
            format_line("00:00:00", Level::WARN, &w),
            "00:00:00  WARN   lost the CAS; redelivered  group_id=g"
        );
    }

    #[test]
    fn the_clock_is_utc_time_of_day() {
        let at = UNIX_EPOCH + std::time::Duration::from_secs(86_400 * 3 + 12 * 3600 + 61);
        assert_eq!(clock(at), "12:01:01");
    }
}
