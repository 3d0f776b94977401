//! The store contract against [`DynamoDbStore`] over moto (real HTTP, the real SDK), in
//! both dedupe layouts. Each test gets its own tables (a unique prefix) on the one moto
//! server of this process.

use stm_store::dynamodb::DedupeMarks;
use stm_store::{CreateOptions, DynamoDbStore};

async fn make_with(trace_max: usize, dedupe_marks: DedupeMarks) -> DynamoDbStore {
    let moto = stm_testkit::moto().await;
    let options = CreateOptions {
        prefix: stm_testkit::unique_prefix("contract"),
        trace_max,
        connect_attempts: 5,
        dedupe_marks,
        ..CreateOptions::default()
    };
    DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("store over moto")
}

/// harel's layout (the default): marks in the `processed` table, every one remembered.
async fn make(trace_max: usize) -> DynamoDbStore {
    make_with(trace_max, DedupeMarks::Table).await
}

stm_store::store_contract_tests!(make);
stm_store::store_limit_tests!(make);
stm_store::store_dedupe_tests!(make, None);

/// The whole suite again with the marks on the execution item.
mod on_item {
    use super::*;

    async fn make(trace_max: usize) -> DynamoDbStore {
        let store = make_with(trace_max, DedupeMarks::OnItem).await;
        assert_eq!(store.dedupe_window(), Some(stm_store::dynamodb::RECENT_MARKS));
        store
    }

    stm_store::store_contract_tests!(make);
    stm_store::store_limit_tests!(make);
    stm_store::store_dedupe_tests!(make, Some(stm_store::dynamodb::RECENT_MARKS));
}
