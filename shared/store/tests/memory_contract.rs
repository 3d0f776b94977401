//! The store contract against [`MemoryStore`].

use stm_store::MemoryStore;

async fn make(trace_max: usize) -> MemoryStore {
    MemoryStore::with_trace_max(trace_max)
}

stm_store::store_contract_tests!(make);
stm_store::store_dedupe_tests!(make, None);
