//! A refused entry holds back its group, over moto: the relay (under its role) sends one
//! commit's 16 events to two groups, 10 then 6 per `SendMessageBatch`, while the strict
//! layer's fault mode fails entries of every batch on the queue (a drawn entry and the
//! rest of its group in that request, `SenderFault` false). Whatever was drawn, each
//! group's messages must come off the FIFO queue in commit order, each once: a group's
//! entries in a later batch wait behind its refused one. The same rule in memory:
//! `refused_entries.rs`.

use std::collections::BTreeMap;

use stm_core::{Event, Execution};
use stm_runtime::relay::{self, RelayBounds};
use stm_runtime::SqsQueue;
use stm_store::{Commit, CreateOptions, DynamoDbStore, ExecutionStore};
use stm_testkit::strict::entry_faults::SQS_FAILED_ENTRY;

use crate::common::queue_view::{consume_by_group, event_id};
use crate::common::scenarios::env_u64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_entry_holds_back_its_group_over_sqs() {
    let seed = env_u64("STM_FAULT_SEED", 0xFA01_7ED5_EED5);
    let moto = stm_testkit::moto().await;
    let prefix = stm_testkit::unique_prefix("refused");
    let store = DynamoDbStore::create_with(
        Some(moto.endpoint()),
        stm_testkit::REGION,
        CreateOptions {
            prefix: prefix.clone(),
            ..CreateOptions::default()
        },
    )
    .await
    .expect("tables");
    let client = SqsQueue::client(Some(moto.endpoint()), stm_testkit::REGION).await;
    let urls = SqsQueue::ensure(&client, &format!("{prefix}-events"), 30, 50)
        .await
        .expect("queue");
    let queue = SqsQueue::new(client, urls.queue_url.clone());

    // one commit's 16 events in seq order: every fourth to `h`, the others to `g`
    let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut emits = Vec::new();
    for i in 0..16 {
        let group = if i % 4 == 3 { "h" } else { "g" };
        let ids = expected.entry(group.to_string()).or_default();
        let mut event = Event::new("Ping");
        event.id = format!("{group}{}", ids.len());
        ids.push(event.id.clone());
        emits.push((Some(group.to_string()), event));
    }
    let mut source = Execution::new("source", "Flat");
    store
        .commit(
            &mut source,
            Commit {
                emits,
                ..Commit::default()
            },
        )
        .await
        .expect("commit");

    // every batch on this queue has refused entries for three relay runs: both groups
    // have entries in each batch, so whichever entry is drawn, a later entry of its group
    // waits in a later batch
    let strict = moto.strict();
    let queues = format!("{prefix}-events");
    strict.fault_entries(&queues, 100.0, seed);
    let relay =
        || relay::relay_pending_until(&store, &queue, None, None, f64::INFINITY, RelayBounds::default());
    for _ in 0..3 {
        relay().await.expect("relay");
    }
    strict.fault_entries(&queues, 0.0, seed);
    for _ in 0..3 {
        if store.pending_outbox().await.expect("outbox").is_empty() {
            break;
        }
        relay().await.expect("relay");
    }
    assert!(
        store.pending_outbox().await.expect("outbox").is_empty(),
        "entries left pending once the queue took everything"
    );
    let counts = strict.entry_faults(&queues);
    assert!(
        counts.injected(SQS_FAILED_ENTRY) > 0,
        "no entry was refused: {counts:?}"
    );
    assert_eq!(
        counts.outstanding.get(SQS_FAILED_ENTRY).copied().unwrap_or(0),
        0,
        "a refused entry never went out: {counts:?}"
    );

    // what a consumer receives, group by group
    let got: BTreeMap<String, Vec<String>> = consume_by_group(&queue)
        .await
        .into_iter()
        .map(|(group, bodies)| (group, bodies.iter().map(event_id).collect()))
        .collect();
    assert_eq!(
        got, expected,
        "each group in commit order, each message once (entries refused: {counts:?})"
    );
    stm_testkit::assert_no_access_denied();
}
