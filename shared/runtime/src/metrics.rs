//! CloudWatch metrics through the Embedded Metric Format (EMF): a metric set is one JSON
//! line on stdout, which CloudWatch Logs turns into metrics. No `PutMetricData` call, so
//! no IAM permission, no network latency and nothing to fail in the handler.
//!
//! One [`MetricSet`] per invocation (not per record) keeps the log volume and cost low;
//! CloudWatch sums the counts. The names the functions use are the constants below, in
//! namespace [`NAMESPACE`] with one dimension, `Function` (`worker`, `relay`, `sweeper`).
//!
//! ```
//! use stm_runtime::metrics::{MetricSet, Unit, EVENTS_PROCESSED, NAMESPACE};
//! let mut m = MetricSet::new(NAMESPACE).dimension("Function", "worker");
//! m.count(EVENTS_PROCESSED, 3.0);
//! m.put(stm_runtime::metrics::STEP_DURATION, 12.5, Unit::Milliseconds);
//! let line = m.to_line(1_700_000_000_000);
//! assert!(line.starts_with("{\"_aws\":"));
//! ```
//!
//! The format: <https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html>.

use serde_json::{json, Map, Value};

/// The CloudWatch namespace of the functions' metrics.
pub const NAMESPACE: &str = "stm";
/// The one dimension: which function emitted the set.
pub(crate) const FUNCTION_DIMENSION: &str = "Function";

/// Worker: records whose step committed (or broadcast, or spawned a child).
pub const EVENTS_PROCESSED: &str = "EventsProcessed";
/// Worker: records acknowledged without a step (duplicate, unknown execution, drained).
pub(crate) const EVENTS_SKIPPED: &str = "EventsSkipped";
/// Worker: events kept on an execution pinned to a version the deploy does not have
/// (released when it is back; an alarm on it catches a deploy that dropped a version
/// still in use).
pub(crate) const EVENTS_PARKED: &str = "EventsParked";
/// Worker: lost CAS (`StoreConflict`), redelivered.
pub(crate) const CONFLICTS: &str = "Conflicts";
/// Worker: records reported failed for any other reason (poison, store error, ...).
pub(crate) const FAILURES: &str = "Failures";
/// Worker: wall time of one record's step, load to commit (one value per record).
pub const STEP_DURATION: &str = "StepDuration";
/// Worker: DynamoDB requests per processed record (one value per record).
pub const DYNAMODB_CALLS: &str = "DynamoDbCalls";
/// Relay (and the worker's inline flush): entries published and acked.
pub(crate) const RELAY_FORWARDED: &str = "RelayForwarded";
/// Relay: entries still pending after the run.
pub const RELAY_REMAINING: &str = "RelayRemaining";
/// Sweeper: `Timeout` events published.
pub const TIMERS_FIRED: &str = "TimersFired";
/// Sweeper: how late each fired timer was (now - fire_at), seconds (one value per timer).
pub const TIMER_LATENESS: &str = "TimerLateness";

/// EMF allows at most 100 metrics per set and 100 values per metric.
pub const MAX_METRICS: usize = 100;
pub const MAX_VALUES: usize = 100;

/// A CloudWatch unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
    Seconds,
    Bytes,
    None,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
            Unit::Seconds => "Seconds",
            Unit::Bytes => "Bytes",
            Unit::None => "None",
        }
    }
}

/// One EMF document: a namespace, one dimension set, metrics (each one value or up to
/// [`MAX_VALUES`] values), and properties (searchable in Logs Insights, not metrics).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSet {
    namespace: String,
    dimensions: Vec<(String, String)>,
    metrics: Vec<(String, Unit, Vec<f64>)>,
    properties: Map<String, Value>,
}

impl MetricSet {
    pub fn new(namespace: impl Into<String>) -> Self {
        MetricSet {
            namespace: namespace.into(),
            dimensions: Vec::new(),
            metrics: Vec::new(),
            properties: Map::new(),
        }
    }

    /// The set for one of the functions: namespace [`NAMESPACE`], `Function = function`.
    pub(crate) fn for_function(function: &str) -> Self {
        MetricSet::new(NAMESPACE).dimension(FUNCTION_DIMENSION, function)
    }

    /// Add a dimension (at most 30; a set with none aggregates everything).
    pub fn dimension(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.dimensions.push((name.into(), value.into()));
        self
    }

    /// Record `value` for `name` (values of one name accumulate, up to [`MAX_VALUES`]; later
    /// ones are dropped, as are metrics past [`MAX_METRICS`]). Non-finite values are ignored.
    pub fn put(&mut self, name: &str, value: f64, unit: Unit) {
        if !value.is_finite() {
            return;
        }
        if let Some((_, _, values)) = self.metrics.iter_mut().find(|(n, _, _)| n == name) {
            if values.len() < MAX_VALUES {
                values.push(value);
            }
            return;
        }
        if self.metrics.len() < MAX_METRICS {
            self.metrics.push((name.to_string(), unit, vec![value]));
        }
    }

    /// Add `n` to counter `name` (one summed value). A zero is not sent at all: CloudWatch
    /// bills a custom metric for each hour in which it receives data, and a zero adds
    /// nothing to a `Sum`, so the counts that are zero nearly always (conflicts, failures,
    /// parked events) cost nothing in a month without any, and a run with nothing to count
    /// writes no line. (Graphs show such hours as missing data; alarms on these metrics
    /// should treat missing data as not breaching.)
    pub fn count(&mut self, name: &str, n: f64) {
        if !n.is_finite() || n == 0.0 {
            return;
        }
        match self.metrics.iter_mut().find(|(m, _, _)| m == name) {
            Some((_, _, values)) => match values.first_mut() {
                Some(v) => *v += n,
                None => values.push(n),
            },
            None => self.put(name, n, Unit::Count),
        }
    }

    /// A property: a field of the log line that is not a metric (an id, a version).
    pub fn property(&mut self, name: &str, value: impl Into<Value>) {
        self.properties.insert(name.to_string(), value.into());
    }

    pub fn is_empty(&self) -> bool {
        self.metrics.is_empty()
    }

    /// The EMF document, stamped `timestamp_ms` (epoch milliseconds).
    pub fn to_json(&self, timestamp_ms: u64) -> Value {
        let mut doc = Map::new();
        // properties first, so a metric or dimension of the same name wins
        for (k, v) in &self.properties {
            doc.insert(k.clone(), v.clone());
        }
        for (k, v) in &self.dimensions {
            doc.insert(k.clone(), Value::from(v.clone()));
        }
        let mut definitions = Vec::with_capacity(self.metrics.len());
        for (name, unit, values) in &self.metrics {
            definitions.push(json!({"Name": name, "Unit": unit.as_str()}));
            let value = match values.as_slice() {
                [one] => json!(one),
                many => json!(many),
            };
            doc.insert(name.clone(), value);
        }
        let names: Vec<&str> = self.dimensions.iter().map(|(k, _)| k.as_str()).collect();
        doc.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": [names],
                    "Metrics": definitions,
                }],
            }),
        );
        // `_aws` first on the line (not required by EMF; easier to spot in the logs)
        let mut ordered = Map::new();
        if let Some(aws) = doc.remove("_aws") {
            ordered.insert("_aws".into(), aws);
        }
        ordered.extend(doc);
        Value::Object(ordered)
    }

    /// The document as one line.
    pub fn to_line(&self, timestamp_ms: u64) -> String {
        self.to_json(timestamp_ms).to_string()
    }

    /// Print the set on stdout (where Lambda's log capture reads it) stamped now; nothing
    /// when it has no metric, or when [`enabled`] says no.
    pub fn emit(&self) {
        if self.is_empty() || !enabled() {
            return;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let line = self.to_line(now);
        // one write of the whole line: it never interleaves with a log line
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

/// Whether metric lines are written: `STM_METRICS=1` or `0` decides; unset, only where the
/// process said it runs as a Lambda function ([`emit_by_default`]), so tests and local runs
/// print none (their output stays readable: a test log was mostly metric JSON).
pub fn enabled() -> bool {
    static SETTING: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let setting = *SETTING.get_or_init(|| {
        std::env::var(stm_env::METRICS)
            .ok()
            .map(|v| stm_env::switch(&v) == Some(true))
    });
    setting.unwrap_or_else(|| ON_LAMBDA.load(std::sync::atomic::Ordering::Relaxed))
}

/// Set by a Lambda function at its init (stm-lambda does): CloudWatch turns these lines
/// into metrics there, and nowhere else reads them.
static ON_LAMBDA: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Write metric lines unless `STM_METRICS` says otherwise: what a Lambda function's init
/// calls.
pub fn emit_by_default() {
    ON_LAMBDA.store(true, std::sync::atomic::Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_count_is_not_sent_and_a_set_of_zeros_is_empty() {
        let mut m = MetricSet::for_function("relay");
        m.count("RelayForwarded", 0.0);
        m.count("RelayRemaining", 0.0);
        assert!(m.is_empty(), "nothing to send: no line");
        m.count("RelayForwarded", 3.0);
        m.count("RelayForwarded", 0.0);
        let doc = m.to_json(0);
        assert_eq!(doc["RelayForwarded"], json!(3.0));
        assert!(doc.get("RelayRemaining").is_none(), "{doc}");
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Metrics"],
            json!([{"Name": "RelayForwarded", "Unit": "Count"}])
        );
    }

    #[test]
    fn a_set_is_a_valid_emf_document() {
        let mut m = MetricSet::for_function("worker");
        m.count(EVENTS_PROCESSED, 2.0);
        m.count(EVENTS_PROCESSED, 1.0);
        m.count(CONFLICTS, 1.0);
        m.put(STEP_DURATION, 12.5, Unit::Milliseconds);
        m.put(STEP_DURATION, 7.0, Unit::Milliseconds);
        m.property("requestId", "r-1");
        let doc = m.to_json(1_700_000_000_123);
        let aws = &doc["_aws"];
        assert_eq!(aws["Timestamp"], 1_700_000_000_123u64);
        let directive = &aws["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "stm");
        assert_eq!(directive["Dimensions"], json!([["Function"]]));
        assert_eq!(
            directive["Metrics"],
            json!([
                {"Name": "EventsProcessed", "Unit": "Count"},
                {"Name": "Conflicts", "Unit": "Count"},
                {"Name": "StepDuration", "Unit": "Milliseconds"},
            ])
        );
        // every dimension and metric is a top-level member
        assert_eq!(doc["Function"], "worker");
        assert_eq!(doc["EventsProcessed"], json!(3.0));
        assert_eq!(doc["Conflicts"], json!(1.0));
        assert_eq!(doc["StepDuration"], json!([12.5, 7.0]));
        assert_eq!(doc["requestId"], "r-1");
        let line = m.to_line(1);
        assert!(!line.contains('\n'));
        assert!(line.starts_with("{\"_aws\":"), "{line}");
    }

    #[test]
    fn limits_and_bad_values_are_respected() {
        let mut m = MetricSet::for_function("sweeper");
        for i in 0..150 {
            m.put(TIMER_LATENESS, f64::from(i), Unit::Seconds);
        }
        m.put(TIMER_LATENESS, f64::NAN, Unit::Seconds);
        m.count(TIMERS_FIRED, f64::INFINITY);
        let doc = m.to_json(0);
        assert_eq!(doc[TIMER_LATENESS].as_array().map(Vec::len), Some(MAX_VALUES));
        assert!(doc.get(TIMERS_FIRED).is_none());
        let mut many = MetricSet::new("ns");
        for i in 0..(MAX_METRICS + 5) {
            many.count(&format!("m{i}"), 1.0);
        }
        assert_eq!(
            many.to_json(0)["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                .as_array()
                .map(Vec::len),
            Some(MAX_METRICS)
        );
    }

    #[test]
    fn an_empty_set_has_no_metrics_and_a_dimensionless_set_aggregates() {
        let m = MetricSet::new("ns");
        assert!(m.is_empty());
        let mut m = MetricSet::new("ns");
        m.count("X", 1.0);
        assert_eq!(
            m.to_json(0)["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([[]])
        );
    }
}
