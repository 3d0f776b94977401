//! The DynamoDB rules moto skips, checked on the JSON request bodies: key values, item
//! size, numbers, transaction shape, reserved words, consistent reads on a GSI, batch
//! sizes and the client request token. Table key schemas come from moto (`DescribeTable`), read by the
//! layer before the check.
//!
//! And the layer's [`PartitionMeter`] ([`Metering`]): every request moto answers with 200 is
//! charged by DynamoDB's accounting to the keys it read or wrote (see [`Metering::observe`]
//! for what is exact and what is an estimate).
//!
//! One file per concern:
//! - `limits.rs`: AWS's documented limits the rules check against;
//! - `schema.rs`: a table's keys and indexes, from `DescribeTable`;
//! - `sizes.rs`: the size DynamoDB counts for an attribute value and for an item;
//! - `numbers.rs`: the numbers DynamoDB can hold (range and precision);
//! - `expressions.rs`: reserved words used bare in an expression;
//! - `items.rs`: one item's key values and size, and its identity for the duplicate rules;
//! - `transaction.rs`: a transaction's shape (actions, bytes, one action per item, token);
//! - `check.rs`: the verdict on one request, operation by operation;
//! - `metering.rs`: the partition meter's state, and what it charges each operation;
//! - `charge_writes.rs` and `charge_reads.rs`: the units of writes and of reads;
//! - `stored.rs`: what the meter knows of an item, and what a write leaves of it;
//! - `key_labels.rs`: the meter's labels of keys, and the partition key a key condition pins.
//!
//! [`PartitionMeter`]: crate::meter::PartitionMeter

mod charge_reads;
mod charge_writes;
mod check;
mod expressions;
mod items;
mod key_labels;
mod limits;
mod metering;
mod numbers;
mod schema;
mod sizes;
mod stored;
mod transaction;

pub use self::check::{check, tables_named};
pub use self::expressions::reserved_word_count;
pub use self::key_labels::{key_label, partition_value_in};
pub use self::limits::{
    MAX_BATCH_GET_KEYS, MAX_BATCH_WRITE_REQUESTS, MAX_CLIENT_REQUEST_TOKEN_CHARS, MAX_ITEM_BYTES,
    MAX_NUMBER_DIGITS, MAX_NUMBER_EXPONENT, MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES,
    MAX_TRANSACTION_ACTIONS, MAX_TRANSACTION_BYTES, MIN_NUMBER_EXPONENT, TABLE_NAME_CHARS,
};
pub use self::metering::{Metering, SCAN_KEY, UNPARSED_QUERY_KEY};
pub use self::numbers::number_refusal;
pub use self::schema::{Projection, TableSchema};
pub use self::sizes::{item_size, value_size};
