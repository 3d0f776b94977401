//! The sweeper's answer to a batch of timer doorbells, whatever delivered it: Lambda's SQS
//! trigger (the Lambda crate turns its event into [`Record`]s) or the local stack's poller.

use stm_store::{DueTimer, ExecutionStore};

use super::{answer, parse_doorbell, Answered};
use crate::queue::Queue;
use crate::sweeper::SweepSummary;
use crate::worker::Record;

/// The sweeper's handler for a batch of doorbells (its SQS trigger). A record that could
/// not be handled (a store error, not due yet) is returned among the failed
/// message ids (the invocation's `batchItemFailures`) and retried; a malformed one is logged and dropped: the sweep fires every armed timer anyway.
///
/// A doorbell that arrived early (a clock behind, a delay cut to SQS's 15 minutes) is
/// re-delayed on `doorbells`, the queue it came from, until its `fire_at`
/// (`ChangeMessageVisibility`), instead of coming back only after the queue's visibility
/// timeout: Lambda returns a failed record to the queue as it is, visible again when its
/// visibility timeout ends. Without `doorbells` it waits that timeout out.
///
/// The records are answered at once, not one after another: each waits out its own
/// sub-second remainder, so one record's wait (up to a second) or calls never make a
/// record due earlier in the same batch late.
pub async fn handle_doorbells(
    store: &dyn ExecutionStore,
    queue: &dyn Queue,
    records: &[Record],
    now: &(dyn Fn() -> f64 + Send + Sync),
    doorbells: Option<&dyn Queue>,
) -> (Vec<String>, SweepSummary) {
    stm_aws::as_function("sweeper", async {
        let mut timers = Vec::new();
        for record in records {
            let id = (
                record.message_id.clone(),
                record.receipt_handle.clone().unwrap_or_default(),
            );
            match parse_doorbell(&record.body) {
                Ok(timer) => timers.push((id, timer)),
                Err(why) => {
                    tracing::error!(message_id = %id.0, reason = %why, "malformed timer doorbell dropped (the sweep fires armed timers)");
                }
            }
        }
        // earliest first: with the waits running together this only orders their calls
        // when several are due at the same moment
        timers.sort_by(|a, b| a.1.fire_at.total_cmp(&b.1.fire_at));
        let answers = futures_util::future::join_all(timers.iter().map(|((id, receipt), timer)| async move {
            let mut summary = SweepSummary::default();
            let answered = answer(store, queue, timer, now, &mut summary).await;
            if let (Ok(Answered::NotDue), Some(doorbells)) = (&answered, doorbells) {
                redelay(doorbells, id, receipt, timer, now()).await;
            }
            (id, answered, summary)
        }))
        .await;
        let mut failed_ids = Vec::new();
        let mut summary = SweepSummary::default();
        let mut stale = 0usize;
        for (id, answered, one) in answers {
            match answered {
                Ok(Answered::Handled) if one.failed == 0 => {}
                Ok(Answered::Stale) => stale += 1,
                Ok(_) | Err(_) => failed_ids.push(id.clone()),
            }
            summary.due += one.due;
            summary.fired += one.fired;
            summary.suspended += one.suspended;
            summary.orphaned += one.orphaned;
            summary.failed += one.failed;
        }
        tracing::info!(
            doorbells = records.len(),
            fired = summary.fired,
            stale,
            failed = failed_ids.len(),
            "timer doorbells"
        );
        (failed_ids, summary)
    })
    .await
}

/// Make an early doorbell visible again at its timer's `fire_at` (rounded up to SQS's whole
/// seconds, so never before it). A failure leaves it to the queue's visibility timeout.
async fn redelay(doorbells: &dyn Queue, message_id: &str, receipt_handle: &str, timer: &DueTimer, now: f64) {
    let seconds = (timer.fire_at - now).ceil().clamp(1.0, MAX_REDELAY_SECONDS) as i32;
    if let Err(err) = doorbells.change_visibility(receipt_handle, seconds).await {
        tracing::warn!(message_id = %message_id, error = %err, "an early timer doorbell could not be re-delayed; it comes back after the queue's visibility timeout");
    }
}

/// SQS's longest visibility timeout (12 hours); a doorbell is never more than its 15-minute
/// delay early unless a clock is far off.
const MAX_REDELAY_SECONDS: f64 = 43_200.0;
