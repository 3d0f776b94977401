//! No partition key takes writes from every execution: the commits of many executions,
//! emitting and spawning, metered per key by the strict layer over moto
//! (`stm_testkit::meter`). harel's seq allocator wrote one `counters` item per emitting
//! commit, which capped a whole deployment at DynamoDB's 1,000 write units per second per
//! key; each key here is written by one execution's commits only.

use stm_core::{Event, Execution, Map};
use stm_store::{Commit, CreateOptions, DynamoDbStore, ExecutionStore, SpawnIntent};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emitting_commits_of_many_executions_share_no_key() {
    let moto = stm_testkit::moto().await;
    let prefix = stm_testkit::unique_prefix("partitions");
    let options = CreateOptions {
        prefix: prefix.clone(),
        connect_attempts: 5,
        ..CreateOptions::default()
    };
    let store = DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("store");
    let executions = 12;
    let commits = 5;
    let meter = moto.meter();
    let start = meter.report_where(|t| t.starts_with(&prefix));
    assert_eq!(
        start.total_units().1,
        0.0,
        "nothing written under a fresh prefix yet"
    );
    for e in 0..executions {
        let id = format!("part-{e}");
        let mut exe = Execution::new(&id, "def");
        store.save(&mut exe).await.expect("create");
        for c in 0..commits {
            let commit = Commit {
                emits: vec![
                    (
                        Some("elsewhere".into()),
                        Event::new("Ping").with_id(format!("{id}-{c}-a")),
                    ),
                    (
                        Some("elsewhere".into()),
                        Event::new("Ping").with_id(format!("{id}-{c}-b")),
                    ),
                ],
                spawns: vec![SpawnIntent {
                    child_id: format!("{id}:{c}"),
                    root_path: "root.r".into(),
                    context: Map::new(),
                }],
                processed_event_ids: vec![format!("{id}-in-{c}")],
                ..Commit::default()
            };
            store.commit(&mut exe, commit).await.expect("commit");
        }
    }
    let report = meter.report_where(|t| t.starts_with(&prefix));
    let tables: Vec<&str> = report
        .units_per_table
        .iter()
        .map(|(t, _, _)| t.as_str())
        .collect();
    assert!(
        !tables.iter().any(|t| t.ends_with("_counters")),
        "no counter item is written: {tables:?}"
    );
    assert!(
        tables.iter().any(|t| t.ends_with("_outbox")) && tables.iter().any(|t| t.ends_with("_spawns")),
        "the rows were metered: {tables:?}"
    );
    // the busiest second of each table's hottest key: an execution item takes its own
    // create and commits (a transactional put of under 1 KB: 2 units each), a row or a
    // mark one transactional put, nothing more: no key is written by two executions' commits
    let own_commits = 1.0 + 2.0 * commits as f64;
    assert_eq!(report.hottest_per_table.len(), tables.len());
    for hot in &report.hottest_per_table {
        assert!(
            hot.write_units_per_second <= own_commits,
            "{}: key {} took {} write units in a second, more than one execution's own {own_commits}",
            hot.table,
            hot.key,
            hot.write_units_per_second
        );
    }
    assert_eq!(
        report.requests.get("UpdateItem"),
        None,
        "no UpdateItem (the seed's counter ADD) on the commit path: {:?}",
        report.requests
    );
    assert_eq!(
        report.requests.get("TransactWriteItems").copied(),
        Some((executions * commits) as u64),
        "one request per commit: {:?}",
        report.requests
    );
}
