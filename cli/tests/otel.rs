//! `stm local --otel URL` (here through `OTEL_EXPORTER_OTLP_ENDPOINT`, the flag's
//! variable): the functions' spans reach an OpenTelemetry collector, one trace per send,
//! each record's span under the span of the `stm` command that sent its message, with
//! its load, step and commit under it; and `stm trace ID --spans`, drawn from the recorded
//! steps alone, shows the same records with the same senders. An endpoint it cannot export
//! to is refused before anything starts.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{stderr, Local};
use serde_json::Value;
use stm_testkit::otlp::{attribute, Collector};

#[test]
fn the_local_stack_exports_one_trace_per_send() {
    let collector = Collector::start();
    let otel = [("OTEL_EXPORTER_OTLP_ENDPOINT".to_string(), collector.url.clone())];
    let local = Local::start_with("otel_local", &common::repo().join("examples"), &otel);
    // the commands export their own `send` span, the root of each trace
    local.ok_with(
        &otel,
        &["create", "examples/order.stm", "Order", "--id", "traced-1"],
    );
    local.wait_show("traced-1", &["RUNNING"]);
    local.ok_with(&otel, &["send", "traced-1", r#"Submit:{"amount": 5.0}"#]);
    local.wait_show("traced-1", &["Payment"]);

    let records_of = |spans: &std::collections::BTreeMap<String, Value>| -> Vec<Value> {
        spans
            .values()
            .filter(|s| s["name"] == "record" && attribute(s, "execution_id") == Some("traced-1"))
            .cloned()
            .collect()
    };
    let spans = collector.spans_when(Duration::from_secs(30), |spans| records_of(spans).len() >= 2);
    assert_eq!(collector.refused(), Vec::<String>::new());
    let records = records_of(&spans);
    assert_eq!(
        records.len(),
        2,
        "the Start and Submit: {records:#?}\n{}",
        local.console()
    );
    // two sends, two traces; each record under its sender's span (the `stm` command's,
    // which the command exported: a root)
    let traces: BTreeSet<&str> = records.iter().filter_map(|r| r["traceId"].as_str()).collect();
    assert_eq!(traces.len(), 2, "{records:#?}");
    for record in &records {
        let sender = spans
            .get(record["parentSpanId"].as_str().expect("a sender"))
            .unwrap_or_else(|| panic!("the sender of {record} is not in the collector"));
        assert_eq!(
            (&sender["name"], &sender["traceId"]),
            (&Value::from("send"), &record["traceId"])
        );
        assert!(
            sender.get("parentSpanId").is_none(),
            "the send is the root: {sender}"
        );
        let inner: BTreeSet<&str> = spans
            .values()
            .filter(|s| s["parentSpanId"] == record["spanId"])
            .map(|s| {
                assert_eq!(s["traceId"], record["traceId"], "{s}");
                s["name"].as_str().unwrap_or_default()
            })
            .collect();
        assert!(
            ["load", "step", "commit"].iter().all(|n| inner.contains(n)),
            "{inner:?}"
        );
    }

    // the span tree from the steps: each record's span, one level under its sender's,
    // in its trace; nothing else
    let tree = local.ok(&["trace", "traced-1", "--spans"]);
    let lines: Vec<&str> = tree.lines().collect();
    let depth = |line: &str| line.len() - line.trim_start().len();
    let mut drawn = 0;
    for record in &records {
        let (trace, span, sender) = (
            record["traceId"].as_str().expect("traceId"),
            record["spanId"].as_str().expect("spanId"),
            record["parentSpanId"].as_str().expect("parentSpanId"),
        );
        let at = lines
            .iter()
            .position(|l| l.trim_start().starts_with(span))
            .unwrap_or_else(|| panic!("{span} is not in the tree:\n{tree}"));
        let above = lines[..at]
            .iter()
            .rev()
            .find(|l| depth(l) < depth(lines[at]))
            .expect("a line above it");
        assert!(
            above.trim_start().starts_with(sender),
            "{span}'s sender is {sender}:\n{tree}"
        );
        assert_eq!(depth(above) + 2, depth(lines[at]), "{tree}");
        let heading = lines[..at]
            .iter()
            .rev()
            .find(|l| l.starts_with("trace "))
            .expect("its trace");
        assert_eq!(*heading, format!("trace {trace}"), "{tree}");
        assert!(lines[at].contains("  traced-1  "), "{}", lines[at]);
        drawn += 1;
    }
    let steps = lines.iter().filter(|l| depth(l) >= 4).count();
    assert_eq!((drawn, steps), (2, 2), "{tree}");
}

#[test]
fn an_endpoint_it_cannot_export_to_is_refused_before_anything_starts() {
    for (url, words) in [
        ("https://collector.example:4318", "is https://"),
        ("localhost:4318", "is not an http:// URL"),
    ] {
        let out = common::stm_with(&[], &["local", "--otel", url, "--definitions", "examples"]);
        assert_eq!(out.status.code(), Some(2), "{url}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(said.contains("--otel") && said.contains(words), "{url}: {said}");
        // a command's variable the same, before anything is sent
        let env = [("OTEL_EXPORTER_OTLP_ENDPOINT".to_string(), url.to_string())];
        let out = common::stm_with(&env, &["send", "nobody", "Go"]);
        assert_eq!(out.status.code(), Some(2), "{url}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(
            said.contains("OTEL_EXPORTER_OTLP_ENDPOINT") && said.contains(words),
            "{url}: {said}"
        );
    }
}
