//! Fault handling of the DynamoDB commit, with faults injected by `stm_testkit::FaultProxy`
//! in front of moto: transient cancellations and throttling are retried, then reported as
//! `Retryable`; a validation error is refused at once (`TooLarge`); other failures are
//! `Backend` errors; an ambiguous failure (the response lost after the write applied) does
//! not turn into a false conflict. After each case the
//! execution, its outbox rows and its processed marks are read back: what a retried
//! commit leaves is the commit, once; a refused one leaves nothing.

use std::time::Duration;

use aws_sdk_dynamodb::config::retry::RetryConfig;
use serde_json::json;
use stm_core::{Event, Execution};
use stm_store::{
    Commit, CreateOptions, DynamoDbStore, ExecutionStore, Refusal, RetryPolicy, StoreError, Unstorable,
};
use stm_testkit::{Fault, FaultProxy};

const TWI: &str = "TransactWriteItems";

/// A store talking to moto through a fresh proxy. `sdk_attempts` is the SDK's own retry
/// budget per call (1: only the store retries, so counts are exact).
async fn store_behind_proxy(sdk_attempts: u32) -> (DynamoDbStore, FaultProxy) {
    let moto = stm_testkit::moto().await;
    let proxy = FaultProxy::start(moto.endpoint());
    let options = CreateOptions {
        prefix: stm_testkit::unique_prefix("faults"),
        connect_attempts: 5,
        sdk_retry: Some(
            RetryConfig::standard()
                .with_max_attempts(sdk_attempts)
                .with_initial_backoff(Duration::from_millis(5))
                .with_max_backoff(Duration::from_millis(20)),
        ),
        retry: RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(40),
        },
        ..CreateOptions::default()
    };
    let store = DynamoDbStore::create_with(Some(proxy.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("store behind the proxy");
    (store, proxy)
}

/// An execution stored at version 1.
async fn stored(store: &DynamoDbStore, id: &str) -> Execution {
    let mut e = Execution::new(id, "def");
    store.save(&mut e).await.expect("insert");
    e
}

/// One step of `e`: its data changes (`context.last`), it emits an event `id` and marks
/// `processed-{id}`, so a reload shows whether all of it, or none of it, was written.
fn step(e: &mut Execution, id: &str) -> Commit {
    e.context.insert("last".into(), json!(id));
    Commit {
        emits: vec![(Some("target".into()), Event::new("Ping").with_id(id))],
        processed_event_ids: vec![format!("processed-{id}")],
        ..Commit::default()
    }
}

/// Reads back what the store holds for `expected.id`: exactly `expected` (its version and
/// data, as the caller holds it after the commits), an outbox row for each of `committed`'s
/// steps once, in order, and nothing else (each test has its own tables), the processed
/// marks of `committed` and none of `refused`.
async fn assert_stored(store: &DynamoDbStore, expected: &Execution, committed: &[&str], refused: &[&str]) {
    let loaded = store.load(&expected.id).await.expect("reload").expect("stored");
    assert_eq!(loaded, *expected, "the stored execution");
    let outbox: Vec<(Option<String>, String)> = store
        .pending_outbox()
        .await
        .expect("outbox")
        .into_iter()
        .map(|o| (o.target_id, o.event.id))
        .collect();
    let want: Vec<(Option<String>, String)> = committed
        .iter()
        .map(|id| (Some("target".to_string()), id.to_string()))
        .collect();
    assert_eq!(outbox, want, "the outbox rows");
    for (ids, marked) in [(committed, true), (refused, false)] {
        for id in ids {
            let mark = format!("processed-{id}");
            assert_eq!(
                store
                    .is_processed(&expected.id, &mark)
                    .await
                    .expect("is_processed"),
                marked,
                "{mark}"
            );
        }
    }
}

#[tokio::test]
async fn transaction_conflict_is_retried_then_succeeds() {
    let (store, proxy) = store_behind_proxy(1).await;
    let mut e = stored(&store, "f-conflict").await;
    proxy.fail_next(TWI, 2, Fault::TransactionConflict);
    let c = step(&mut e, "ev-1");
    let seqs = store
        .commit(&mut e, c)
        .await
        .expect("commit after two TransactionConflicts");
    assert_eq!(e.version, 2);
    assert_eq!(proxy.injected(TWI), 2);
    assert_eq!(
        proxy.requests(TWI),
        3,
        "two cancelled attempts and the one that landed"
    );
    let outbox = store.pending_outbox().await.expect("outbox");
    assert_eq!(
        outbox.iter().map(|o| o.seq).collect::<Vec<_>>(),
        seqs.outbox,
        "the emit is there exactly once"
    );
    assert!(store
        .is_processed("f-conflict", "processed-ev-1")
        .await
        .expect("is_processed"));
    assert_eq!(e.context.get("last"), Some(&json!("ev-1")));
    assert_stored(&store, &e, &["ev-1"], &[]).await;
}

#[tokio::test]
async fn provisioned_throughput_exceeded_is_retried() {
    let (store, proxy) = store_behind_proxy(1).await;
    let mut e = stored(&store, "f-pte").await;
    proxy.fail_next(TWI, 3, Fault::ProvisionedThroughputExceeded);
    let c = step(&mut e, "ev-1");
    store
        .commit(&mut e, c)
        .await
        .expect("commit after three throttles");
    assert_eq!((e.version, proxy.injected(TWI), proxy.requests(TWI)), (2, 3, 4));
    assert_stored(&store, &e, &["ev-1"], &[]).await;
}

#[tokio::test]
async fn throttling_outliving_the_retries_is_retryable_and_writes_nothing() {
    let (store, proxy) = store_behind_proxy(1).await;
    let mut e = stored(&store, "f-throttle").await;
    let before = e.clone();
    proxy.fail_next(TWI, 100, Fault::Throttling);
    let c = step(&mut e, "ev-1");
    match store.commit(&mut e, c).await {
        Err(StoreError::Retryable { message: msg, .. }) => assert!(msg.contains("Throttling"), "{msg}"),
        other => panic!("expected Retryable, got {other:?}"),
    }
    assert_eq!(proxy.requests(TWI), 4, "the store's policy: 4 attempts");
    assert_eq!(e.version, 1, "the version is restored");
    proxy.clear();
    assert_stored(&store, &before, &[], &["ev-1"]).await;
    // and the same commit goes through once the throttling stops
    let c = step(&mut e, "ev-1");
    store.commit(&mut e, c).await.expect("commit");
    assert_eq!(e.version, 2);
    assert_stored(&store, &e, &["ev-1"], &[]).await;
}

#[tokio::test]
async fn sdk_and_store_retries_stack() {
    // the SDK retries throttling 3 times per call; the store retries the call
    let (store, proxy) = store_behind_proxy(3).await;
    let mut e = stored(&store, "f-layers").await;
    proxy.fail_next(TWI, 4, Fault::Throttling);
    let c = step(&mut e, "ev-1");
    store.commit(&mut e, c).await.expect("commit");
    assert_eq!((proxy.injected(TWI), proxy.requests(TWI)), (4, 5));
    assert_eq!(e.version, 2);
    assert_stored(&store, &e, &["ev-1"], &[]).await;
}

#[tokio::test]
async fn lost_response_after_the_write_is_not_a_conflict() {
    let (store, proxy) = store_behind_proxy(1).await;
    // a multi-item commit (TransactWriteItems)
    let mut e = stored(&store, "f-drop").await;
    proxy.fail_next(TWI, 1, Fault::DropResponse);
    let c = step(&mut e, "ev-1");
    let seqs = store
        .commit(&mut e, c)
        .await
        .expect("the retry recognises its own write");
    assert_eq!(e.version, 2);
    assert_eq!(proxy.requests(TWI), 2);
    assert_eq!(
        store
            .pending_outbox()
            .await
            .expect("outbox")
            .iter()
            .map(|o| o.seq)
            .collect::<Vec<_>>(),
        seqs.outbox
    );
    assert_stored(&store, &e, &["ev-1"], &[]).await;
    // a single-item commit (PutItem)
    e.context.insert("saved".into(), json!(true));
    proxy.fail_next("PutItem", 1, Fault::DropResponse);
    store
        .save(&mut e)
        .await
        .expect("the retried put recognises its own write");
    assert_eq!(e.version, 3);
    assert_eq!(
        proxy.requests("PutItem"),
        3,
        "the insert, the lost put and its retry"
    );
    assert_stored(&store, &e, &["ev-1"], &[]).await;
}

/// A `ValidationException`, or a `ValidationError` cancellation reason, is refused the same
/// way on every try: never retried, and a `TooLarge` (the caller fails the step at once)
/// carrying DynamoDB's code and message.
#[tokio::test]
async fn validation_errors_are_refused_at_once_without_retry() {
    let (store, proxy) = store_behind_proxy(1).await;
    let mut e = stored(&store, "f-invalid").await;
    let before = e.clone();
    proxy.fail_next(
        TWI,
        1,
        Fault::Error {
            status: 400,
            error_type: "ValidationException".into(),
            message: "One or more parameter values were invalid (injected)".into(),
        },
    );
    let c = step(&mut e, "ev-1");
    match store.commit(&mut e, c).await {
        Err(StoreError::TooLarge(why)) => {
            let msg = why.to_string();
            assert!(
                msg.starts_with("DynamoDB refused the commit as invalid")
                    && msg.contains(
                        "ValidationException: One or more parameter values were invalid (injected)"
                    ),
                "{msg}"
            );
            assert!(
                matches!(
                    &why,
                    Unstorable::Invalid {
                        refusal: Refusal::Call {
                            op: "TransactWriteItems",
                            ..
                        },
                        source: Some(_),
                    }
                ),
                "the refused call, with the SDK's error as the source: {why:?}"
            );
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(proxy.requests(TWI), 1, "not retried");
    assert_eq!(e.version, 1);

    proxy.fail_next(
        TWI,
        1,
        Fault::Cancelled(vec!["None".into(), "ValidationError".into()]),
    );
    let c = step(&mut e, "ev-2");
    match store.commit(&mut e, c).await {
        Err(StoreError::TooLarge(why)) => {
            let msg = why.to_string();
            assert!(
                msg.contains("TransactWriteItems cancelled [None, ValidationError")
                    && msg.contains("action 2 (Put on "),
                "{msg}"
            );
            let Unstorable::Invalid {
                refusal: Refusal::Cancelled { reasons },
                source: Some(_),
            } = &why
            else {
                panic!("the cancellation's reasons, with the SDK's error as the source: {why:?}");
            };
            assert_eq!(reasons[1].code.as_deref(), Some("ValidationError"));
        }
        other => panic!("expected TooLarge for a ValidationError reason, got {other:?}"),
    }
    assert_eq!(proxy.requests(TWI), 2, "not retried");
    assert_eq!(e.version, 1);
    assert_stored(&store, &before, &[], &["ev-1", "ev-2"]).await;
}

#[tokio::test]
async fn conflict_without_returned_item_falls_back_to_a_read() {
    let (store, proxy) = store_behind_proxy(1).await;
    let mut e = stored(&store, "f-cas").await;
    let mut other = store.load("f-cas").await.expect("load").expect("stored");
    store.save(&mut other).await.expect("advance to 2");
    // an emulator-like cancellation with no Item: the store reads the version back
    proxy.fail_next(TWI, 1, Fault::Cancelled(vec!["ConditionalCheckFailed".into()]));
    let reads_before = proxy.requests("GetItem");
    let c = step(&mut e, "ev-1");
    match store.commit(&mut e, c).await {
        Err(StoreError::Conflict { id, expected, found }) => {
            assert_eq!((id.as_str(), expected, found), ("f-cas", 1, Some(2)));
        }
        other => panic!("expected Conflict, got {other:?}"),
    }
    assert_eq!(proxy.requests(TWI), 1);
    assert_eq!(
        proxy.requests("GetItem") - reads_before,
        2,
        "one read of the rows block to carry over (this store knows the item only at version \
         2), one for the found version"
    );
    // the other writer's version stands, and nothing of the refused commit was written
    assert_stored(&store, &other, &[], &["ev-1"]).await;
}

#[tokio::test]
async fn unreachable_endpoint_fails_clearly_after_bounded_tries() {
    // a port nothing listens on
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let options = CreateOptions {
        prefix: stm_testkit::unique_prefix("down"),
        connect_attempts: 3,
        connect_delay: Duration::from_millis(10),
        sdk_retry: Some(RetryConfig::standard().with_max_attempts(1)),
        ..CreateOptions::default()
    };
    match DynamoDbStore::create_with(Some(&endpoint), stm_testkit::REGION, options).await {
        Err(StoreError::Backend { message: msg, .. }) => {
            assert!(
                msg.contains("not reachable after 3 attempts") && msg.contains(&endpoint),
                "{msg}"
            )
        }
        other => panic!("expected a Backend error, got {other:?}"),
    }
}

#[tokio::test]
async fn create_schema_false_only_checks_the_tables() {
    let moto = stm_testkit::moto().await;
    let prefix = stm_testkit::unique_prefix("noschema");
    let check = CreateOptions {
        prefix: prefix.clone(),
        create_schema: false,
        connect_attempts: 2,
        ..CreateOptions::default()
    };
    match DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, check.clone()).await {
        Err(StoreError::Backend { message: msg, .. }) => {
            assert!(msg.contains("does not exist") && msg.contains(&prefix), "{msg}")
        }
        other => panic!("expected a missing-table error, got {other:?}"),
    }
    let create = CreateOptions {
        prefix: prefix.clone(),
        connect_attempts: 2,
        ..CreateOptions::default()
    };
    let store = DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, create)
        .await
        .expect("create");
    store.ensure_tables().await.expect("ensure_tables is idempotent");
    let checked = DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, check)
        .await
        .expect("check");
    let mut e = Execution::new("f-schema", "def");
    e.context.insert("x".into(), json!(1));
    checked.save(&mut e).await.expect("the checked store works");
    assert_stored(&checked, &e, &[], &[]).await;
}

fn tokens(proxy: &FaultProxy) -> Vec<String> {
    proxy
        .bodies(TWI)
        .iter()
        .map(|b| b["ClientRequestToken"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn request_tokens_repeat_only_after_ambiguous_failures() {
    let (store, proxy) = store_behind_proxy(1).await;
    let mut e = stored(&store, "f-tokens").await;

    // refused for sure (a cancellation): the retry is a new request
    proxy.fail_next(TWI, 1, Fault::TransactionConflict);
    let c = step(&mut e, "ev-1");
    store.commit(&mut e, c).await.expect("commit");
    let t = tokens(&proxy);
    assert_eq!(t.len(), 2);
    assert!(t.iter().all(|t| !t.is_empty() && t.len() <= 36), "{t:?}");
    assert_ne!(t[0], t[1], "a cancelled transaction is retried under a new token");

    // may have landed (a 500, a lost response): the retry is the identical request
    proxy.fail_next(
        TWI,
        1,
        Fault::Error {
            status: 500,
            error_type: "InternalServerError".into(),
            message: "injected".into(),
        },
    );
    let c = step(&mut e, "ev-2");
    store.commit(&mut e, c).await.expect("commit after a 500");
    proxy.fail_next(TWI, 1, Fault::DropResponse);
    let c = step(&mut e, "ev-3");
    store
        .commit(&mut e, c)
        .await
        .expect("commit after a lost response");
    let t = tokens(&proxy);
    assert_eq!(t.len(), 6);
    assert_eq!(t[2], t[3], "retried after a 500 with the same token");
    assert_eq!(t[4], t[5], "retried after a lost response with the same token");
    assert_ne!(t[3], t[4], "another commit, another token");
    assert_eq!(e.version, 4);
    assert_eq!(
        store.pending_outbox().await.expect("outbox").len(),
        3,
        "each emit exactly once"
    );
    assert_stored(&store, &e, &["ev-1", "ev-2", "ev-3"], &[]).await;
}

/// A sweep reads the due index shard by shard; a throttled shard is retried with the
/// store's backoff, so one fault no longer fails the whole sweep (with one SDK attempt per
/// call, sustained throttling used to fail almost every sweep).
#[tokio::test]
async fn a_throttled_due_index_shard_is_retried_not_the_whole_sweep_failed() {
    let (store, proxy) = store_behind_proxy(1).await;
    proxy.fail_next("Query", 3, Fault::Throttling);
    let (timers, stats) = store
        .due_timers_indexed(1_700_000_000.0)
        .await
        .expect("the sweep survives throttled shards");
    assert!(timers.is_empty());
    assert_eq!(proxy.injected("Query"), 3);
    assert_eq!(
        stats.requests,
        stm_store::dynamodb::TIMER_SHARDS,
        "one answered query per shard"
    );
}

/// `DedupeMarks::OnItem`: a commit of marks only is the single `PutItem`; its response lost
/// after the write applied, the retry recognises its own write (the commit token on the
/// item), and the marks are there once, with the window intact.
#[tokio::test]
async fn on_item_lost_put_response_is_not_a_conflict_and_keeps_the_marks() {
    let (store, proxy) = store_behind_proxy(1).await;
    let store = store.with_dedupe_marks(stm_store::DedupeMarks::OnItem);
    let mut e = stored(&store, "f-item").await;
    let first = Commit {
        processed_event_ids: vec!["ev-1".into(), "ev-2".into()],
        ..Commit::default()
    };
    store.commit(&mut e, first).await.expect("commit");
    let puts = proxy.requests("PutItem");
    proxy.fail_next("PutItem", 1, Fault::DropResponse);
    e.context.insert("last".into(), json!("ev-3"));
    let second = Commit {
        processed_event_ids: vec!["ev-3".into()],
        ..Commit::default()
    };
    store
        .commit(&mut e, second)
        .await
        .expect("the retried put recognises its own write");
    assert_eq!(e.version, 3);
    assert_eq!(proxy.requests("PutItem"), puts + 2, "the lost put and its retry");
    assert_eq!(proxy.requests(TWI), 0, "no transaction on the item layout");
    let (loaded, marks) = store
        .load_for_events("f-item", &["ev-1", "ev-2", "ev-3", "ev-4"])
        .await
        .expect("load");
    assert_eq!(loaded.as_ref().map(|x| x.version), Some(3));
    assert_eq!(loaded.as_ref(), Some(&e), "the stored execution");
    assert_eq!(marks, vec![true, true, true, false]);
    assert!(store.pending_outbox().await.expect("outbox").is_empty());
}

/// Under an invocation's deadline a commit starts no retry that could outlast it: with
/// throttling on every attempt and less time left than one more attempt may take (a
/// back-off plus the SDK's operation timeout), the first failure is reported as retryable
/// at once, saying why, instead of after the policy's four attempts. Without a deadline
/// the policy runs in full (`throttling_outliving_the_retries_is_retryable_and_writes_nothing`).
#[tokio::test]
async fn no_retry_starts_past_the_invocations_deadline() {
    let (store, proxy) = store_behind_proxy(1).await;
    let mut e = stored(&store, "f-deadline").await;
    let before = e.clone();
    proxy.fail_next(TWI, 100, Fault::Throttling);
    let c = step(&mut e, "ev-1");
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let started = std::time::Instant::now();
    let result = stm_aws::within_deadline(Some(deadline), store.commit(&mut e, c)).await;
    match result {
        Err(StoreError::Retryable { message: msg, .. }) => assert!(
            msg.contains("Throttling")
                && msg.contains("no time for another before the invocation's deadline"),
            "{msg}"
        ),
        other => panic!("expected Retryable, got {other:?}"),
    }
    assert_eq!(
        proxy.requests(TWI),
        1,
        "one attempt: the next could outlast the deadline"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(e.version, 1, "the version is restored");
    proxy.clear();
    assert_stored(&store, &before, &[], &["ev-1"]).await;
}

/// Faults per entry (the strict layer's fault mode, issue 43): a `TransactWriteItems`
/// cancelled with a `ThrottlingError` reason is retried, then `Retryable` with nothing
/// written; a `BatchGetItem` answered with `UnprocessedKeys` and a `BatchWriteItem`
/// answered with `UnprocessedItems` (each 200, part of the batch done) are re-sent until
/// every key is read and every row deleted.
#[tokio::test]
async fn batches_answered_in_part_are_resent_and_a_throttled_transaction_retried() {
    use stm_testkit::strict::entry_faults::{TRANSACTION_THROTTLED, UNPROCESSED_ITEMS, UNPROCESSED_KEYS};
    let moto = stm_testkit::moto().await;
    let prefix = stm_testkit::unique_prefix("entries");
    let options = CreateOptions {
        prefix: prefix.clone(),
        sdk_retry: Some(RetryConfig::standard().with_max_attempts(1)),
        retry: RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(40),
        },
        ..CreateOptions::default()
    };
    let store = DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("store");
    let strict = moto.strict();
    let mut e = stored(&store, "f-entries").await;
    let before = e.clone();

    // every transaction on these tables cancelled for throttling
    strict.fault_entries(&prefix, 0.0, 43);
    strict.fault_entries_of(&prefix, TWI, 100.0);
    let c = step(&mut e, "ev-0");
    match store.commit(&mut e, c).await {
        Err(StoreError::Retryable { message, .. }) => {
            assert!(message.contains("ThrottlingError"), "{message}")
        }
        other => panic!("expected Retryable, got {other:?}"),
    }
    assert_eq!(e.version, 1, "the version is restored");
    assert_eq!(
        strict.entry_faults(&prefix).injected(TRANSACTION_THROTTLED),
        4,
        "4 attempts"
    );
    strict.fault_entries(&prefix, 0.0, 43);
    assert_stored(&store, &before, &[], &["ev-0"]).await;
    let mut seqs = Vec::new();
    for id in ["ev-1", "ev-2", "ev-3"] {
        let c = step(&mut e, id);
        seqs.extend(store.commit(&mut e, c).await.expect("commit").outbox);
    }

    // every batch read and delete on these tables done in part
    strict.fault_entries_of(&prefix, "BatchGetItem", 100.0);
    strict.fault_entries_of(&prefix, "BatchWriteItem", 100.0);
    let (loaded, processed) = store
        .load_for_event("f-entries", "processed-ev-2")
        .await
        .expect("load for an event");
    assert_eq!((loaded.as_ref(), processed), (Some(&e), true));
    let rows = store.pending_rows(&[], &seqs).await.expect("pending rows");
    let ids: Vec<String> = rows.outbox.iter().map(|o| o.event.id.clone()).collect();
    assert_eq!(ids, ["ev-1", "ev-2", "ev-3"], "every row read, once, in order");
    store.ack_rows(&[], &seqs).await.expect("ack");
    strict.fault_entries(&prefix, 0.0, 43);
    assert!(
        store.pending_outbox().await.expect("outbox").is_empty(),
        "every row deleted"
    );

    let counts = strict.entry_faults(&prefix);
    for kind in [TRANSACTION_THROTTLED, UNPROCESSED_KEYS, UNPROCESSED_ITEMS] {
        assert!(
            counts.injected(kind) > 0 && counts.recovered(kind) > 0,
            "{kind} injected and recovered from: {counts:?}"
        );
        assert_eq!(
            counts.outstanding.get(kind).copied().unwrap_or(0),
            0,
            "{counts:?}"
        );
    }
}
