//! AWS's documented DynamoDB limits the rules check against: key and item sizes,
//! transaction and batch sizes, the client request token, the numbers DynamoDB can hold and
//! table names.

/// A partition key value: at most 2,048 bytes.
pub const MAX_PARTITION_KEY_BYTES: usize = 2048;
/// A sort key value: at most 1,024 bytes.
pub const MAX_SORT_KEY_BYTES: usize = 1024;
/// An item: at most 400 KB, attribute names included.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
/// A transaction: at most 100 actions...
pub const MAX_TRANSACTION_ACTIONS: usize = 100;
/// ... and 4 MB in all.
pub const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;
/// `BatchGetItem`: at most 100 keys.
pub const MAX_BATCH_GET_KEYS: usize = 100;
/// `BatchWriteItem`: at most 25 requests.
pub const MAX_BATCH_WRITE_REQUESTS: usize = 25;
/// `ClientRequestToken`: 1 to 36 characters.
pub const MAX_CLIENT_REQUEST_TOKEN_CHARS: usize = 36;

/// A number: at most 38 significant digits (leading and trailing zeros trimmed) ...
///
/// AWS, "Supported data types and naming rules in Amazon DynamoDB", Number
/// (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html#HowItWorks.DataTypes.Number>):
/// "Numbers can have up to 38 digits of precision. Exceeding this results in an
/// exception", positive range 1E-130 to 9.9999999999999999999999999999999999999E+125,
/// negative range the same, or zero.
pub const MAX_NUMBER_DIGITS: usize = 38;
/// ... whose first significant digit is at 10^-130 ...
pub const MIN_NUMBER_EXPONENT: i64 = -130;
/// ... to 10^125 (below 1E+126).
pub const MAX_NUMBER_EXPONENT: i64 = 125;

/// A table name: 3 to 255 characters, each a letter, a digit, `_`, `-` or `.`.
pub const TABLE_NAME_CHARS: std::ops::RangeInclusive<usize> = 3..=255;
