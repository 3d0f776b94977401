//! `SqsQueue::ensure` and `SqsQueue::join` on moto: a queue that exists already (harel's,
//! made with `FifoQueue` alone; someone's with other settings; an earlier run's) is used
//! as it is, with what differs from ours described in `notes`; a queue we cannot use is
//! refused with one message naming it and what is wrong. Before, `ensure` asked
//! `CreateQueue` for our attributes and got `QueueAlreadyExists` for any existing queue
//! whose attributes differed.

use std::collections::HashMap;

use aws_sdk_sqs::types::QueueAttributeName;
use stm_runtime::queue::{QueueError, SqsQueue, MAX_MESSAGE_BYTES};

async fn client() -> aws_sdk_sqs::Client {
    let moto = stm_testkit::moto().await;
    SqsQueue::client(Some(moto.endpoint()), stm_testkit::REGION).await
}

async fn create(
    client: &aws_sdk_sqs::Client,
    name: &str,
    attributes: &[(QueueAttributeName, &str)],
) -> String {
    let mut req = client.create_queue().queue_name(name);
    for (k, v) in attributes {
        req = req.attributes(k.clone(), *v);
    }
    req.send()
        .await
        .expect("CreateQueue")
        .queue_url()
        .expect("a queue URL")
        .to_string()
}

async fn attributes(client: &aws_sdk_sqs::Client, url: &str) -> HashMap<QueueAttributeName, String> {
    client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .expect("GetQueueAttributes")
        .attributes()
        .cloned()
        .unwrap_or_default()
}

async fn arn(client: &aws_sdk_sqs::Client, url: &str) -> String {
    attributes(client, url)
        .await
        .remove(&QueueAttributeName::QueueArn)
        .expect("QueueArn")
}

#[tokio::test]
async fn a_harel_made_queue_is_joined_as_it_is() {
    let client = client().await;
    let base = stm_testkit::unique_prefix("join_harel");
    // harel's SqsTransport.create: CreateQueue(QueueName, Attributes={"FifoQueue": "true"})
    let url = create(
        &client,
        &format!("{base}.fifo"),
        &[(QueueAttributeName::FifoQueue, "true")],
    )
    .await;
    let before = attributes(&client, &url).await;

    let urls = SqsQueue::ensure(&client, &base, 5, 7)
        .await
        .expect("ensure joins harel's queue");
    assert_eq!(urls.queue_url, url);
    assert!(urls.joined);
    assert_eq!(urls.dead_letter_url, "", "harel's queue redrives nowhere");
    let notes = urls.notes.join("\n");
    assert!(
        notes.contains(&format!(
            "queue {base}.fifo has VisibilityTimeout=30 s, not 5 s: kept"
        )),
        "{notes}"
    );
    assert!(
        notes.contains(&format!(
            "queue {base}.fifo has no redrive policy (no dead-letter queue): kept"
        )),
        "{notes}"
    );
    // nothing was changed on it, and no dead-letter queue was made for nothing
    assert_eq!(attributes(&client, &url).await, before);
    let dlq = client
        .get_queue_url()
        .queue_name(format!("{base}-dlq.fifo"))
        .send()
        .await;
    assert!(dlq.is_err(), "no stray dead-letter queue: {dlq:?}");
}

#[tokio::test]
async fn a_queue_with_other_settings_is_joined_and_the_differences_noted() {
    let client = client().await;
    let base = stm_testkit::unique_prefix("join_other");
    let their_dlq = create(
        &client,
        &format!("{base}-theirs-dlq.fifo"),
        &[(QueueAttributeName::FifoQueue, "true")],
    )
    .await;
    let redrive = format!(
        r#"{{"deadLetterTargetArn": "{}", "maxReceiveCount": 3}}"#,
        arn(&client, &their_dlq).await
    );
    let url = create(
        &client,
        &format!("{base}.fifo"),
        &[
            (QueueAttributeName::FifoQueue, "true"),
            (QueueAttributeName::ContentBasedDeduplication, "true"),
            (QueueAttributeName::VisibilityTimeout, "60"),
            (QueueAttributeName::MaximumMessageSize, "262144"),
            (QueueAttributeName::RedrivePolicy, &redrive),
        ],
    )
    .await;

    let urls = SqsQueue::ensure(&client, &format!("{base}.fifo"), 60, 5)
        .await
        .expect("ensure joins it");
    assert_eq!(urls.queue_url, url);
    assert!(urls.joined);
    assert_eq!(
        urls.dead_letter_url, their_dlq,
        "the DLQ its redrive policy names"
    );
    assert_eq!(
        urls.notes,
        vec![
            format!(
                "queue {base}.fifo has MaximumMessageSize=262144: kept; a message over 262144 bytes \
                 (a large event or spawn context) is refused by SQS and reported as a publish failure"
            ),
            format!("queue {base}.fifo dead-letters a message after 3 receives, not 5: kept"),
        ],
        "the visibility timeout matches; ContentBasedDeduplication is no concern"
    );
}

#[tokio::test]
async fn a_missing_queue_is_created_with_ours_and_joined_next_time() {
    let client = client().await;
    let base = stm_testkit::unique_prefix("join_fresh");
    let urls = SqsQueue::ensure(&client, &base, 30, 4).await.expect("create");
    assert!(!urls.joined);
    assert!(urls.notes.is_empty(), "{:?}", urls.notes);
    let main = attributes(&client, &urls.queue_url).await;
    assert_eq!(main[&QueueAttributeName::FifoQueue], "true");
    assert_eq!(
        main[&QueueAttributeName::MaximumMessageSize],
        MAX_MESSAGE_BYTES.to_string()
    );
    assert_eq!(main[&QueueAttributeName::VisibilityTimeout], "30");
    let redrive: serde_json::Value =
        serde_json::from_str(&main[&QueueAttributeName::RedrivePolicy]).expect("redrive JSON");
    assert_eq!(redrive["maxReceiveCount"], 4);
    assert_eq!(
        redrive["deadLetterTargetArn"].as_str(),
        Some(arn(&client, &urls.dead_letter_url).await.as_str())
    );
    let dlq = attributes(&client, &urls.dead_letter_url).await;
    assert_eq!(dlq[&QueueAttributeName::FifoQueue], "true");
    assert_eq!(
        dlq[&QueueAttributeName::MaximumMessageSize],
        MAX_MESSAGE_BYTES.to_string()
    );

    // another visibility timeout next time (`stm local --visibility 5`): joined, not refused
    let again = SqsQueue::ensure(&client, &format!("{base}.fifo"), 5, 4)
        .await
        .expect("ensure again");
    assert!(again.joined);
    assert_eq!(again.queue_url, urls.queue_url);
    assert_eq!(again.dead_letter_url, urls.dead_letter_url);
    assert_eq!(
        again.notes,
        vec![format!(
            "queue {base}.fifo has VisibilityTimeout=30 s, not 5 s: kept (our receives set their own \
             visibility timeout)"
        )]
    );
}

#[tokio::test]
async fn an_existing_dead_letter_queue_with_other_settings_is_used() {
    let client = client().await;
    let base = stm_testkit::unique_prefix("join_dlq");
    let dlq = create(
        &client,
        &format!("{base}-dlq.fifo"),
        &[
            (QueueAttributeName::FifoQueue, "true"),
            (QueueAttributeName::MessageRetentionPeriod, "1209600"),
        ],
    )
    .await;
    let urls = SqsQueue::ensure(&client, &base, 30, 5).await.expect("create");
    assert!(!urls.joined);
    assert_eq!(urls.dead_letter_url, dlq);
    let main = attributes(&client, &urls.queue_url).await;
    assert!(
        main[&QueueAttributeName::RedrivePolicy].contains(&arn(&client, &dlq).await),
        "{main:?}"
    );
}

#[tokio::test]
async fn a_standard_queue_is_refused_by_name() {
    let client = client().await;
    let name = stm_testkit::unique_prefix("join_std");
    // a standard queue cannot have a .fifo name: it can only come in as a URL
    let url = create(&client, &name, &[]).await;
    // the deployment's fault: `stm local` words it `configuration error: ...`
    let expected = format!(
        "queue {name} exists but is not a FIFO queue (FifoQueue=false): delete it or pass another --queue"
    );
    match SqsQueue::join(&client, &url, 30, 5).await {
        Err(err @ QueueError::NotFifo { .. }) => {
            assert!(err.is_deployment());
            assert_eq!(err.to_string(), expected);
        }
        other => panic!("expected the FIFO refusal, got {other:?}"),
    }
    match SqsQueue::check_event_queue(&client, &url).await {
        Err(err) => assert_eq!((err.is_deployment(), err.to_string()), (true, expected)),
        Ok(()) => panic!("check_event_queue accepted a standard queue"),
    }
    let gone = format!("{url}-nope");
    match SqsQueue::join(&client, &gone, 30, 5).await {
        Err(err) => assert_eq!(
            (err.is_deployment(), err.to_string()),
            (
                true,
                format!(
                    "queue {gone} does not exist: create it, or pass a queue name (created if \
                     missing) or another URL as --queue"
                )
            )
        ),
        Ok(urls) => panic!("joined a missing queue: {urls:?}"),
    }
}
