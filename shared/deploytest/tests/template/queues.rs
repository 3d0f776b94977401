//! The event queue (FIFO, encrypted, with its dead-letter queue), the worker's FIFO
//! batches with partial failures, and queue names that fit SQS whatever the stack name.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use stm_deploytest::iam;
use stm_deploytest::template::{referenced, Resolver, Template};

use crate::support::prop;

#[test]
fn the_event_queue_is_fifo_encrypted_and_dead_letters() {
    let t = Template::repo();
    let events = prop(&t, "Worker", "Events").as_object().expect("Worker.Events");
    let sqs = events
        .values()
        .find(|e| e["Type"] == "SQS")
        .expect("the worker's SQS event");
    let queue =
        referenced(&sqs["Properties"]["Queue"]).expect("the worker's SQS event names a template queue");
    assert_eq!(queue, "EventQueue", "the queue STM_QUEUE_URL names");
    assert_eq!(
        prop(&t, "Worker", "Environment")["Variables"]["STM_QUEUE_URL"],
        json!({"Ref": "EventQueue"})
    );
    let q = t.properties(&queue).expect("queue");
    assert_eq!(q["FifoQueue"], true);
    assert_eq!(
        q["ContentBasedDeduplication"], false,
        "deduplication ids are explicit"
    );
    assert_eq!(q["SqsManagedSseEnabled"], true);
    let dlq =
        referenced(&q["RedrivePolicy"]["deadLetterTargetArn"]).expect("a redrive policy to a template queue");
    let d = t.properties(&dlq).expect("dlq");
    assert_eq!(d["FifoQueue"], true, "a FIFO queue's dead-letter queue is FIFO");
    assert_eq!(d["SqsManagedSseEnabled"], true);
    assert_eq!(
        q["RedrivePolicy"]["maxReceiveCount"],
        json!({"Ref": "MaxReceiveCount"})
    );
    // AWS: the visibility timeout at least 6 x the function timeout
    let timeout = t
        .function_property("Worker", "Timeout")
        .expect("timeout")
        .as_i64()
        .expect("a fixed Timeout");
    let visibility = q["VisibilityTimeout"]
        .as_i64()
        .expect("a fixed VisibilityTimeout");
    assert!(
        visibility >= 6 * timeout,
        "VisibilityTimeout {visibility} < 6 x the worker's Timeout {timeout}"
    );
    // the dead-letter queue keeps messages at least as long as the queue
    let keep = |p: &Value| p["MessageRetentionPeriod"].as_i64().unwrap_or(345_600);
    assert!(keep(d) >= keep(q));
    // SQS deletes a message at the end of its retention, dead-letter queue or not: every
    // retry schedule the template allows must end before it. The most receives
    // MaxReceiveCount takes, each hidden for the longest the worker hides a message (its
    // back-off caps) or the visibility timeout (a worker that dies holding it)
    let most_receives: i64 = t.doc["Parameters"]["MaxReceiveCount"]["MaxValue"]
        .as_i64()
        .expect("MaxReceiveCount has a MaxValue");
    let s = stm_runtime::worker::WorkerSettings::default();
    let longest_hidden = [
        visibility,
        i64::from(s.retry_max_seconds),
        i64::from(s.poison_retry_seconds),
        i64::from(s.suspend_recheck_max_seconds),
    ]
    .into_iter()
    .max()
    .unwrap_or(visibility);
    assert!(
        most_receives * longest_hidden < keep(q),
        "{most_receives} receives of up to {longest_hidden} s outlast the queue's retention of {} s",
        keep(q)
    );
    assert_eq!(keep(q), 1_209_600, "SQS's longest retention, 14 days");
    // SQS's largest message (1 MiB), explicit on both: the runtime refuses a bigger one at
    // commit (stm-runtime's MAX_MESSAGE_BYTES) and relies on the queues taking up to it,
    // and a redriven message must fit the dead-letter queue too
    for (name, props) in [("EventQueue", q), ("DeadLetterQueue", d)] {
        assert_eq!(
            props["MaximumMessageSize"],
            json!(stm_runtime::queue::MAX_MESSAGE_BYTES),
            "{name}.MaximumMessageSize must be 1048576"
        );
    }
}

#[test]
fn the_worker_takes_fifo_batches_and_reports_partial_failures() {
    let t = Template::repo();
    let r = Resolver::new(&t, &[]);
    let events = prop(&t, "Worker", "Events").as_object().expect("Worker.Events");
    let sqs: Vec<&Value> = events.values().filter(|e| e["Type"] == "SQS").collect();
    assert_eq!(sqs.len(), 1, "one SQS event source");
    let p = &sqs[0]["Properties"];
    assert!(
        p["FunctionResponseTypes"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("ReportBatchItemFailures"))),
        "ReportBatchItemFailures is on"
    );
    let batch: i64 = r
        .string(&p["BatchSize"])
        .expect("BatchSize")
        .parse()
        .expect("a number");
    assert!(
        (1..=10).contains(&batch),
        "BatchSize {batch}: a FIFO queue allows 1..=10"
    );
    if let Some(param) = referenced(&p["BatchSize"]) {
        let max = &t.doc["Parameters"][&param]["MaxValue"];
        assert!(
            max.as_i64().is_some_and(|m| m <= 10),
            "{param}.MaxValue must keep BatchSize <= 10"
        );
    }
    // capped by default; `WorkerScaling=groups` takes the cap off (the source then scales to
    // the queue's active message groups, bounded by the account's concurrency)
    let scaling = r.eval(&p["ScalingConfig"]).expect("ScalingConfig evaluates");
    let cap = scaling.as_ref().map(|s| r.string(&s["MaximumConcurrency"]));
    assert!(
        matches!(&cap, Some(Ok(n)) if n.parse::<u32>().is_ok_and(|n| (2..=1_000).contains(&n))),
        "the worker's concurrency is bounded by default, within ScalingConfig's 2..=1000: {scaling:?}"
    );
    let uncapped = Resolver::new(&t, &[("WorkerScaling", "groups")]);
    assert_eq!(
        uncapped
            .eval(&p["ScalingConfig"])
            .expect("ScalingConfig evaluates"),
        None,
        "WorkerScaling=groups leaves ScalingConfig out"
    );
    for (name, event) in events {
        assert_eq!(event["Type"], "SQS", "the worker has no other trigger ({name})");
    }
}

/// SQS allows a queue name of at most 80 characters (alphanumerics, `-`, `_`; a FIFO
/// queue's ends in `.fifo`), and CloudFormation a stack name of 128: the queue names must
/// fit whatever the stack is called, differ between two stacks with one `Prefix`, and
/// still be the names the strict layer maps to the template's queues.
#[test]
fn queue_names_fit_sqs_whatever_the_stack_name() {
    let t = Template::repo();
    let prefix = "p".repeat(30); // the longest Prefix allows
    let long = Resolver {
        stack_name: format!("s{}", "-x".repeat(63) + "y"), // 128 characters
        ..Resolver::new(&t, &[("Prefix", &prefix)])
    };
    assert_eq!(long.stack_name.len(), 128);
    let other = Resolver {
        stack_uuid: "0b5e5a70-1f0d-11ef-9d2b-0a58a9feac02".into(),
        ..long.clone()
    };
    // the status events' example queue has no name of its own (CloudFormation makes one)
    let queues: Vec<String> = t
        .of_type("AWS::SQS::Queue")
        .into_iter()
        .filter(|id| !t.properties(id).expect("queue")["QueueName"].is_null())
        .collect();
    assert_eq!(queues.len(), 3);
    let physical = iam::Physical::from_template(&t);
    for id in &queues {
        let p = t.properties(id).expect("queue");
        let name = long
            .string(&p["QueueName"])
            .unwrap_or_else(|e| panic!("{id}.QueueName: {e:#}"));
        assert!(
            name.len() <= 80,
            "{id}: {name:?} has {} characters, SQS allows 80",
            name.len()
        );
        let base = name.strip_suffix(".fifo").unwrap_or(&name);
        assert!(
            base.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "{id}: {name:?}"
        );
        assert_eq!(p["FifoQueue"] == true, name.ends_with(".fifo"), "{id}: {name:?}");
        assert!(
            name.starts_with(&format!("{prefix}-")),
            "{id}: {name:?} starts with the Prefix"
        );
        let second = other.string(&p["QueueName"]).expect("QueueName");
        assert_ne!(
            name, second,
            "{id}: two stacks with one Prefix must not share a queue"
        );
        // the strict layer's roles know it for this queue, as they know a test's own
        // `{prefix}-events.fifo`, `{prefix}-events-dlq.fifo`, `{prefix}-timers`
        let local = match id.as_str() {
            "EventQueue" => "t7_x-events.fifo",
            "DeadLetterQueue" => "t7_x-events-dlq.fifo",
            _ => "t7_x-timers",
        };
        for queue in [name.as_str(), local] {
            let url = format!("https://sqs.us-east-1.amazonaws.com/123456789012/{queue}");
            let grants = iam::required_by("AmazonSQS", "SendMessage", &json!({"QueueUrl": url}), &physical)
                .unwrap_or_else(|e| panic!("{queue}: {e:#}"));
            assert_eq!(
                grants,
                BTreeSet::from([("sqs:SendMessage".to_string(), id.clone())]),
                "{queue}"
            );
        }
    }
}
