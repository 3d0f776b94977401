//! SQS's queue lifecycle beyond one request: retention on a moved clock, and the redrive
//! of a message received `maxReceiveCount` times to its dead-letter queue.

use serde_json::json;

use crate::support::{fifo_message, ok, sqs};

fn receive_ids(admin: &str, url: &str) -> Vec<String> {
    let got = sqs(
        admin,
        "ReceiveMessage",
        json!({"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 0}),
    );
    ok(&got, "ReceiveMessage");
    got.body["Messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| m["Body"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// SQS deletes a message at the end of its queue's retention whether or not anyone
/// received it; on a queue whose clock the test moved, so does the layer, and only there.
#[test]
fn a_message_as_old_as_its_queues_retention_is_gone_on_the_moved_clock() {
    let moto = stm_testkit::moto_blocking();
    let admin = moto.endpoint().to_string();
    let prefix = stm_testkit::unique_prefix("retention");
    let create = |name: String| {
        let created = sqs(
            &admin,
            "CreateQueue",
            json!({"QueueName": name, "Attributes": {"FifoQueue": "true", "MessageRetentionPeriod": "1209600"}}),
        );
        ok(&created, "CreateQueue");
        created.body["QueueUrl"].as_str().unwrap_or_default().to_string()
    };
    let moved = create(format!("{prefix}-moved.fifo"));
    let still = create(format!("{prefix}_still.fifo"));
    for (url, body) in [(&moved, "first"), (&still, "first")] {
        ok(
            &sqs(&admin, "SendMessage", fifo_message(url, body, body, body)),
            "send",
        );
    }
    let day = std::time::Duration::from_secs(86_400);
    moto.strict().advance_queues(&format!("{prefix}-moved"), day * 10);
    ok(
        &sqs(
            &admin,
            "SendMessage",
            fifo_message(&moved, "second", "second", "second"),
        ),
        "send",
    );
    let mut both = receive_ids(&admin, &moved);
    both.sort();
    assert_eq!(both, ["first", "second"], "10 days: both within 14 days");
    moto.strict().advance_queues(&format!("{prefix}-moved"), day * 5);
    assert_eq!(
        receive_ids(&admin, &moved),
        ["second"],
        "15 days after the first send, 5 after the second: the first is gone"
    );
    assert_eq!(receive_ids(&admin, &moved), ["second"], "and stays gone");
    assert_eq!(
        moto.strict()
            .expired_messages()
            .get(&format!("{prefix}-moved.fifo")),
        Some(&1)
    );
    assert_eq!(
        receive_ids(&admin, &still),
        ["first"],
        "a queue whose clock did not move"
    );
}

/// A message received `maxReceiveCount` times moves to the dead-letter queue on the next
/// receive (moto does this as SQS does; pinned here, the runtime's poison path relies on it).
#[test]
fn a_message_received_max_receive_count_times_moves_to_the_dead_letter_queue() {
    let admin = stm_testkit::moto_blocking().endpoint().to_string();
    let prefix = stm_testkit::unique_prefix("redrive");
    let dlq = sqs(
        &admin,
        "CreateQueue",
        json!({"QueueName": format!("{prefix}-dlq.fifo"), "Attributes": {"FifoQueue": "true"}}),
    );
    ok(&dlq, "CreateQueue dlq");
    let dlq_url = dlq.body["QueueUrl"].as_str().unwrap_or_default().to_string();
    let dlq_arn = sqs(
        &admin,
        "GetQueueAttributes",
        json!({"QueueUrl": dlq_url, "AttributeNames": ["QueueArn"]}),
    )
    .body["Attributes"]["QueueArn"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let source = sqs(
        &admin,
        "CreateQueue",
        json!({"QueueName": format!("{prefix}-events.fifo"), "Attributes": {
            "FifoQueue": "true",
            "RedrivePolicy": json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}).to_string(),
        }}),
    );
    ok(&source, "CreateQueue source");
    let url = source.body["QueueUrl"].as_str().unwrap_or_default().to_string();
    ok(
        &sqs(&admin, "SendMessage", fifo_message(&url, "g", "d", "poison")),
        "send",
    );
    for n in 1..=3 {
        assert_eq!(receive_ids(&admin, &url), ["poison"], "receive {n} of 3");
    }
    assert!(
        receive_ids(&admin, &url).is_empty(),
        "the fourth receive redrives it"
    );
    assert_eq!(receive_ids(&admin, &dlq_url), ["poison"]);
}
