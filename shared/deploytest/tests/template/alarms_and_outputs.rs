//! The alarms (dead letters, errors, age, throttles) and the stack's outputs.

use std::collections::BTreeSet;

use serde_json::Value;
use stm_deploytest::template::{referenced, Resolver, Template};

use crate::support::FUNCTIONS;

#[test]
fn alarms_watch_the_dead_letters_errors_age_and_throttles() {
    let t = Template::repo();
    let queue = "EventQueue";
    let dlq = referenced(&t.properties(queue).expect("queue")["RedrivePolicy"]["deadLetterTargetArn"])
        .expect("dlq");
    // (namespace, metric, dimension resource) of every alarm, metric-math ones included
    let mut watched: BTreeSet<(String, String, String)> = BTreeSet::new();
    for alarm in t.of_type("AWS::CloudWatch::Alarm") {
        let p = t.properties(&alarm).expect("alarm");
        let mut add = |m: &Value| {
            for d in m["Dimensions"].as_array().into_iter().flatten() {
                if let Some(id) = referenced(&d["Value"]) {
                    watched.insert((
                        m["Namespace"].as_str().unwrap_or_default().into(),
                        m["MetricName"].as_str().unwrap_or_default().into(),
                        id,
                    ));
                }
            }
        };
        add(p);
        for m in p["Metrics"].as_array().into_iter().flatten() {
            add(&m["MetricStat"]["Metric"]);
        }
    }
    let want = [
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible", dlq.as_str()),
        ("AWS/SQS", "ApproximateAgeOfOldestMessage", queue),
        ("AWS/Lambda", "Errors", "Worker"),
        ("AWS/Lambda", "Throttles", "Worker"),
        ("AWS/Lambda", "Throttles", "Relay"),
        ("AWS/Lambda", "Throttles", "Sweeper"),
    ];
    for (ns, metric, id) in want {
        assert!(
            watched.contains(&(ns.to_string(), metric.to_string(), id.to_string())),
            "no alarm on {ns} {metric} of {id}; alarms watch {watched:?}"
        );
    }
}

#[test]
fn outputs_name_the_queues_tables_and_functions() {
    let t = Template::repo();
    let outputs = t.doc["Outputs"].as_object().expect("Outputs");
    let pointed: BTreeSet<String> = outputs.values().filter_map(|o| referenced(&o["Value"])).collect();
    let mut want: Vec<String> = vec!["EventQueue".into(), "DeadLetterQueue".into()];
    want.extend(FUNCTIONS.iter().map(|f| f.to_string()));
    for id in want {
        assert!(pointed.contains(&id), "no output for {id}");
    }
    // the tables by name (a Ref of a table would not hold with ExistingTables=true), under
    // any prefix
    let r = Resolver::new(&t, &[("Prefix", "shop_7")]).with_placeholders();
    let values: BTreeSet<String> = outputs
        .values()
        .filter_map(|o| r.string(&o["Value"]).ok())
        .collect();
    for name in r.table_names().expect("table names").keys() {
        assert!(name.starts_with("shop_7_"), "{name}");
        assert!(values.contains(name), "no output names table {name}: {values:?}");
    }
}
