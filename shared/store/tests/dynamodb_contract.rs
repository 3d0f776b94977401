//! The store contract against [`DynamoDbStore`] over moto (real HTTP, the real SDK). Each
//! test gets its own tables (a unique prefix) on the one moto server of this process.

use stm_store::{CreateOptions, DynamoDbStore};

async fn make(trace_max: usize) -> DynamoDbStore {
    let moto = stm_testkit::moto().await;
    let options = CreateOptions {
        prefix: stm_testkit::unique_prefix("contract"),
        trace_max,
        connect_attempts: 5,
        ..CreateOptions::default()
    };
    DynamoDbStore::create_with(Some(moto.endpoint()), stm_testkit::REGION, options)
        .await
        .expect("store over moto")
}

stm_store::store_contract_tests!(make);
stm_store::store_limit_tests!(make);
