//! Work under the invocation's deadline against a slow AWS: the strict layer holds every
//! request on the test's tables and queue (`StrictLayer::slow_requests`), as a throttled
//! partition or a far Region would. A Lambda invocation past its deadline is killed
//! mid-work, so the relay must not start a page of the outbox it cannot finish in time.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use stm_core::{Event, Execution};
use stm_runtime::queue::SqsQueue;
use stm_runtime::relay::{self, RelayBounds};
use stm_store::{Commit, DynamoDbStore, ExecutionStore};

/// Each request on the slowed tables and queue waits this long.
const SLOW: Duration = Duration::from_millis(400);
/// Outbox rows per backlog, and per page of the relay.
const ROWS: usize = 40;
const PAGE: usize = 10;

async fn stack(tag: &str) -> (Arc<DynamoDbStore>, SqsQueue, String) {
    let parts = common::moto_parts(tag, 30, 5).await;
    (
        parts.store,
        SqsQueue::new(parts.client, parts.urls.queue_url),
        parts.prefix,
    )
}

/// `ROWS` outbox rows, from commits of four executions.
async fn backlog(store: &DynamoDbStore, tag: &str) {
    for e in 0..4 {
        let mut exe = Execution::new(format!("{tag}-{e}"), "def");
        store.save(&mut exe).await.expect("insert");
        let commit = Commit {
            emits: (0..ROWS / 4)
                .map(|n| {
                    let event = Event::new("Ping").with_id(format!("{tag}-{e}-{n}"));
                    (Some(format!("{tag}-target-{e}")), event)
                })
                .collect(),
            ..Commit::default()
        };
        exe.context.insert("filled".into(), json!(true));
        store.commit(&mut exe, commit).await.expect("commit");
    }
}

fn bounds() -> RelayBounds {
    RelayBounds {
        pass_rows: ROWS,
        read_rows: PAGE,
        ..RelayBounds::DEFAULT
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_starts_no_page_it_cannot_finish_before_the_deadline() {
    let (store, queue, prefix) = stack("slow_relay").await;
    let strict = stm_testkit::moto().await.strict();
    strict.slow_requests(&prefix, SLOW);

    // how long a page takes here: a whole backlog, no deadline
    backlog(&store, "calibrate").await;
    let started = Instant::now();
    let all = relay::relay_pending_until(store.as_ref(), &queue, None, None, f64::INFINITY, bounds())
        .await
        .expect("relay");
    let page = started.elapsed() / (ROWS / PAGE) as u32;
    assert_eq!(all.forwarded, ROWS, "{all:?}");

    // a deadline one and a half pages away: the first page fits, a second would not
    backlog(&store, "timed").await;
    let started = Instant::now();
    let deadline = started + page * 3 / 2;
    let first = relay::relay_pending_until(
        store.as_ref(),
        &queue,
        None,
        Some(deadline),
        f64::INFINITY,
        bounds(),
    )
    .await
    .expect("relay");
    let ended = Instant::now();
    assert!(
        ended <= deadline,
        "the relay ran {:?} past its deadline (a page takes about {page:?}): {first:?}",
        ended - deadline
    );
    assert!(
        (PAGE..ROWS).contains(&first.forwarded),
        "some pages, not all: {first:?} (a page takes about {page:?})"
    );

    // the next run forwards the rest, once each
    strict.normal_speed(&prefix);
    let rest = relay::relay_pending_until(store.as_ref(), &queue, None, None, f64::INFINITY, bounds())
        .await
        .expect("relay");
    assert_eq!(first.forwarded + rest.forwarded, ROWS, "{first:?} then {rest:?}");
    assert_eq!(rest.remaining, 0, "{rest:?}");
}
