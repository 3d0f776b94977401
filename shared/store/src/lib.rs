//! ExecutionStore
