//! Where a store keeps its dedupe marks: [`DedupeMarks`], a choice of the DynamoDB store
//! that the functions' configuration (built without the AWS SDK) names too.

use crate::StoreError;

/// How many processed events an execution item remembers with [`DedupeMarks::OnItem`].
pub const RECENT_MARKS: usize = 10;

/// Where a store keeps the processed (dedupe) marks, the record that an execution already
/// processed an event, so that a redelivered event is not processed twice.
///
/// ```
/// use stm_store::DedupeMarks;
/// assert_eq!("item".parse::<DedupeMarks>().ok(), Some(DedupeMarks::OnItem));
/// assert_eq!(DedupeMarks::default(), DedupeMarks::Table);
/// assert!("processed".parse::<DedupeMarks>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DedupeMarks {
    /// harel's layout, the default: one item per processed event in the `processed` table,
    /// written in the commit's transaction and remembered until its `ttl` (if any). A
    /// commit holding only the execution and its mark is a two-item `TransactWriteItems`
    /// (two write units per item); a load for an event is a `BatchGetItem` of the
    /// execution and the mark. harel reads these marks: tables shared with harel need it.
    #[default]
    Table,
    /// The cheapest layout: the execution item itself remembers its last
    /// [`RECENT_MARKS`] processed events (8-byte prefixes of their ids' SHA-256, in its
    /// binary attribute `recent`), so a commit of the execution and its marks is one
    /// conditional `PutItem` (one write unit per KB, where a transaction bills two
    /// per KB per item) and a load for an event is one strongly consistent `GetItem` (one
    /// read unit per 4 KB)
    /// (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html>).
    ///
    /// **The guarantee is weaker**: an event is recognised as a duplicate only while it is
    /// among its execution's last 10 processed events (the `Table` layout remembers every
    /// event until its mark's TTL). That covers the duplicates SQS makes: the Lambda event
    /// source hands a FIFO queue's records in batches of at most 10
    /// (<https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-parameters.html>,
    /// `BatchSize`), one message group (one execution) at a time, so a redelivered record
    /// is at most 10 events behind; a re-send by a producer or by the relay carries the
    /// same `MessageDeduplicationId` and is dropped by SQS FIFO within its 5-minute
    /// deduplication interval
    /// (<https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/FIFO-key-terms.html>).
    /// A re-send later than that, of an event older than the last 10, is processed again;
    /// so is a message redriven from the dead-letter queue whose first commit had landed,
    /// once its execution has processed 10 more events (the `Table` layout recognises it
    /// while its mark lives, which is why `ProcessedRetentionDays` outlasts the dead-letter
    /// queue's retention). The window adds at most 87 bytes to the item, so a typical
    /// execution item stays under 1 KB (one write unit).
    ///
    /// Switching a deployment from `Table` to `OnItem` forgets nothing the table holds: an
    /// execution item without `recent` (written by the `Table` layout or by harel) is
    /// answered from the table, and so is one whose window has not yet filled
    /// with events processed since the switch. Switching back, an execution's last events
    /// are known only to its item until the next commit rewrites it: drain the queue
    /// first. harel neither reads nor keeps these marks: not for tables shared with harel.
    OnItem,
}

impl std::str::FromStr for DedupeMarks {
    type Err = StoreError;

    /// `table` or `item` (the template's `DedupeMarks` values).
    fn from_str(s: &str) -> Result<Self, StoreError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "table" => Ok(DedupeMarks::Table),
            "item" => Ok(DedupeMarks::OnItem),
            _ => Err(StoreError::backend(format!(
                "dedupe marks must be `table` or `item`, got {s:?}"
            ))),
        }
    }
}
