//! DynamoDB-specific behaviour outside the shared contract: the schema as data, the
//! processed-mark TTL, the prefix rule, the raw execution item.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::AttributeValue;
use stm_core::Execution;
use stm_store::dynamodb::{table_specs, KeyType, COMMIT_TOKEN_ATTRIBUTE, TRACE_IDX_ATTRIBUTE, TTL_ATTRIBUTE};
use stm_store::{Commit, CreateOptions, DynamoDbStore, ExecutionStore};

async fn store(tag: &str) -> DynamoDbStore {
    let moto = stm_testkit::moto().await;
    let options = CreateOptions {
        prefix: stm_testkit::unique_prefix(tag),
        connect_attempts: 5,
        ..CreateOptions::default()
    };
    DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("store")
}

#[test]
fn table_specs_are_the_seeds() {
    let got: Vec<(&str, Vec<(&str, &str)>)> = table_specs()
        .iter()
        .map(|t| (t.name, t.keys().iter().map(|k| (k.name, k.ty.as_str())).collect()))
        .collect();
    // the seed's `specs` list, verbatim
    let want: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("executions", vec![("id", "S")]),
        ("outbox", vec![("seq", "N")]),
        ("spawns", vec![("seq", "N")]),
        ("timers", vec![("execution_id", "S"), ("path", "S")]),
        ("processed", vec![("execution_id", "S"), ("event_id", "S")]),
        ("counters", vec![("id", "S")]),
        ("trace", vec![("execution_id", "S"), ("idx", "N")]),
    ];
    assert_eq!(got, want);
    assert_eq!(table_specs()[6].range.map(|k| k.ty), Some(KeyType::Number));
    assert_eq!(table_specs()[0].table_name("harel"), "harel_executions");
}

#[tokio::test]
async fn prefixes_follow_harels_rule() {
    let moto = stm_testkit::moto().await;
    for bad in ["", "1abc", "has-dash", "a234567890123456789012345678901"] {
        let options = CreateOptions {
            prefix: bad.into(),
            connect_attempts: 1,
            ..CreateOptions::default()
        };
        let result = DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options).await;
        assert!(
            result.is_err_and(|e| e.to_string().contains("prefix must be an identifier")),
            "{bad:?}"
        );
    }
}

async fn raw_item(
    store: &DynamoDbStore,
    table: &str,
    key: &[(&str, &str)],
) -> std::collections::HashMap<String, AttributeValue> {
    let mut req = store
        .client()
        .get_item()
        .table_name(store.table_name(table))
        .consistent_read(true);
    for (k, v) in key {
        req = req.key(*k, AttributeValue::S((*v).to_string()));
    }
    req.send()
        .await
        .expect("get_item")
        .item()
        .cloned()
        .expect("item exists")
}

#[tokio::test]
async fn processed_marks_carry_a_ttl_when_configured() {
    let plain = store("ttl_off").await;
    let mut e = Execution::new("ttl-1", "def");
    plain
        .commit(
            &mut e,
            Commit {
                processed_event_ids: vec!["ev".into()],
                ..Commit::default()
            },
        )
        .await
        .expect("commit");
    let item = raw_item(
        &plain,
        "processed",
        &[("execution_id", "ttl-1"), ("event_id", "ev")],
    )
    .await;
    assert!(!item.contains_key(TTL_ATTRIBUTE), "no ttl by default");

    let retention = Duration::from_secs(7 * 24 * 3600);
    let with_ttl = store("ttl_on").await.with_processed_ttl(retention);
    let mut e = Execution::new("ttl-2", "def");
    with_ttl
        .commit(
            &mut e,
            Commit {
                processed_event_ids: vec!["ev".into()],
                ..Commit::default()
            },
        )
        .await
        .expect("commit");
    let item = raw_item(
        &with_ttl,
        "processed",
        &[("execution_id", "ttl-2"), ("event_id", "ev")],
    )
    .await;
    let Some(AttributeValue::N(ttl)) = item.get(TTL_ATTRIBUTE) else {
        panic!("a numeric ttl: {item:?}")
    };
    let ttl: u64 = ttl.parse().expect("epoch seconds");
    let expect = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + retention.as_secs();
    assert!(ttl.abs_diff(expect) < 60, "ttl {ttl} ≈ now + retention {expect}");
    assert!(with_ttl.is_processed("ttl-2", "ev").await.expect("is_processed"));
}

/// The finished-execution retention: a `ttl` on the item exactly when a commit leaves it
/// DONE or CANCELLED (`finished_at` + retention), on every trace row (write time +
/// retention), none on a FAILED one, and gone again when a commit revives it.
#[tokio::test]
async fn finished_executions_and_trace_rows_carry_a_ttl_when_configured() {
    let retention = Duration::from_secs(90 * 86_400);
    let store = store("finttl").await.with_finished_ttl(retention);
    let ttl_of = |item: &std::collections::HashMap<String, AttributeValue>| match item.get(TTL_ATTRIBUTE) {
        Some(AttributeValue::N(n)) => Some(n.parse::<f64>().expect("epoch seconds")),
        None => None,
        Some(other) => panic!("a numeric ttl: {other:?}"),
    };
    let traced = |kind: &str| {
        let mut step = stm_core::Map::new();
        step.insert("event_kind".into(), stm_core::Value::from(kind));
        Commit {
            traces: vec![step],
            ..Commit::default()
        }
    };
    let mut e = Execution::new("fin-1", "def");
    store.commit(&mut e, traced("Start")).await.expect("running");
    assert_eq!(
        ttl_of(&raw_item(&store, "executions", &[("id", "fin-1")]).await),
        None,
        "running: kept"
    );

    for (status, expires) in [
        (stm_core::Status::Failed, false),
        (stm_core::Status::Done, true),
        (stm_core::Status::Running, false),
        (stm_core::Status::Cancelled, true),
    ] {
        e.status = status;
        e.stamp(1_764_000_000.0);
        store
            .commit(&mut e, traced(status.as_str()))
            .await
            .expect("commit");
        let ttl = ttl_of(&raw_item(&store, "executions", &[("id", "fin-1")]).await);
        if expires {
            let finished = e.finished_at.expect("finished_at stamped");
            assert_eq!(
                ttl,
                Some((finished + retention.as_secs_f64()).floor()),
                "{status:?}"
            );
        } else {
            assert_eq!(ttl, None, "{status:?}: no ttl");
        }
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let rows = store
        .client()
        .query()
        .table_name(store.table_name("trace"))
        .key_condition_expression("execution_id = :e")
        .expression_attribute_values(":e", AttributeValue::S("fin-1".into()))
        .consistent_read(true)
        .send()
        .await
        .expect("query");
    assert_eq!(rows.items().len(), 5);
    for row in rows.items() {
        let ttl = ttl_of(row).expect("every trace row expires");
        assert!((ttl - (now + retention.as_secs_f64())).abs() < 60.0, "{ttl}");
    }
    // harel reads the item as its own: the attribute is outside `data`
    assert_eq!(
        store.load("fin-1").await.expect("load").expect("stored").status,
        stm_core::Status::Cancelled
    );
}

#[tokio::test]
async fn the_execution_item_is_harels_plus_two_attributes() {
    let store = store("rawitem").await;
    let mut e = Execution::new("raw-1", "order");
    store
        .commit(
            &mut e,
            Commit {
                traces: vec![stm_core::Map::new()],
                ..Commit::default()
            },
        )
        .await
        .expect("commit");
    let item = raw_item(&store, "executions", &[("id", "raw-1")]).await;
    let mut names: Vec<&str> = item.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            COMMIT_TOKEN_ATTRIBUTE,
            "data",
            "definition_id",
            "id",
            TRACE_IDX_ATTRIBUTE,
            "version"
        ]
    );
    assert_eq!(item.get("version"), Some(&AttributeValue::N("1".into())));
    assert_eq!(
        item.get(TRACE_IDX_ATTRIBUTE),
        Some(&AttributeValue::N("0".into()))
    );
    assert_eq!(item.get("data"), Some(&AttributeValue::S(e.to_json())));
    let Some(AttributeValue::S(token)) = item.get(COMMIT_TOKEN_ATTRIBUTE) else {
        panic!("token")
    };
    assert!(
        token.len() <= 36 && token.chars().all(|c| c.is_ascii_hexdigit()),
        "{token}"
    );
    // the size the store checks against the 400 KB limit is the item's
    assert!(store.execution_item_size(&e) > e.to_json().len());
}
