//! Status events: a notice on an EventBridge bus when an execution becomes FAILED,
//! SUSPENDED, DONE or CANCELLED, shaped like Step Functions' "Execution Status Change".
//!
//! A notice is never sent from the step that causes it. The step's commit writes it as an
//! outbox row, in the same transaction as the status change, and the inline flush or the
//! relay sends it to the bus and then deletes the row, as for any other outbox row. So a
//! crash before the commit sends nothing (the status did not change either), and a crash
//! after it leaves the row for the next flush or relay run: no notice is lost. The bus
//! cannot deduplicate, so a crash in the instant between `PutEvents` and the row's delete
//! sends that notice again; both copies carry the same `notificationId`.
//!
//! The row is an outbox row without a target, whose event kind is [`NOTICE_KIND`]. harel
//! 0.9.0's relay acks a row without a target without sending anything, so on tables shared
//! with harel a notice its relay picks up is dropped, never delivered to an execution.
//!
//! [`StatusEvents`] says which statuses are published (`STM_STATUS_EVENTS`: `none`, the
//! default, `failures` or `all`); [`StatusBus`] is where they go: [`MemoryBus`] here,
//! `EventBridgeBus` (feature `aws`) on AWS.

use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::json;
use stm_core::{Event, Execution, Map, Status, Value};
use stm_store::OutboxEntry;

use crate::queue::PublishFailure;

#[cfg(feature = "aws")]
mod eventbridge;
#[cfg(feature = "aws")]
pub use eventbridge::{route_to_queue, EventBridgeBus};

/// The events' `source`. EventBridge refuses a custom event whose source starts with
/// `aws.`, so Step Functions' `aws.states` cannot be borrowed.
pub const SOURCE: &str = "stm";
/// The events' `detail-type`, after Step Functions' "Step Functions Execution Status
/// Change".
pub const DETAIL_TYPE: &str = "Statechart Execution Status Change";
/// The kind of the outbox row's event that carries a notice. Not a name a `.stm` machine
/// can give an event (the colon), so no emit is ever taken for a notice.
pub const NOTICE_KIND: &str = "stm:StatusChange";
/// The most of an execution's `error` a notice carries: EventBridge takes entries up to
/// 256 KB, and a notice is to be read, not to archive the execution.
pub const MAX_ERROR_CHARS: usize = 8 * 1024;

/// Which status changes are published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StatusEvents {
    /// None (the default).
    #[default]
    None,
    /// FAILED only.
    Failures,
    /// FAILED, SUSPENDED, DONE and CANCELLED.
    All,
}

impl StatusEvents {
    /// Whether an execution that became `status` is announced.
    pub fn publishes(self, status: Status) -> bool {
        match self {
            StatusEvents::None => false,
            StatusEvents::Failures => status == Status::Failed,
            StatusEvents::All => matches!(
                status,
                Status::Failed | Status::Suspended | Status::Done | Status::Cancelled
            ),
        }
    }
}

impl std::str::FromStr for StatusEvents {
    type Err = ();

    /// `none`, `failures` or `all` (any case).
    fn from_str(text: &str) -> Result<Self, ()> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(StatusEvents::None),
            "failures" => Ok(StatusEvents::Failures),
            "all" => Ok(StatusEvents::All),
            _ => Err(()),
        }
    }
}

impl std::fmt::Display for StatusEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StatusEvents::None => "none",
            StatusEvents::Failures => "failures",
            StatusEvents::All => "all",
        })
    }
}

/// The notice of `exe` becoming its status, from `before`, as the outbox row's event when
/// `level` publishes it: `None` when the status did not change or is not published.
///
/// ```
/// use stm_core::{Execution, Status};
/// use stm_runtime::status::{notice, StatusEvents, NOTICE_KIND};
///
/// let mut exe = Execution::new("order-1", "Order");
/// exe.status = Status::Failed;
/// exe.error = Some("ValueError: no stock".into());
/// let event = notice(StatusEvents::Failures, Status::Running, &exe, 1_700_000_000.0).unwrap();
/// assert_eq!(event.kind, NOTICE_KIND);
/// assert_eq!(event.data["status"], "FAILED");
/// assert_eq!(event.data["previousStatus"], "RUNNING");
/// // nothing when the status stays, or when the level leaves it out
/// assert!(notice(StatusEvents::All, Status::Failed, &exe, 0.0).is_none());
/// assert!(notice(StatusEvents::None, Status::Running, &exe, 0.0).is_none());
/// ```
pub fn notice(level: StatusEvents, before: Status, exe: &Execution, now: f64) -> Option<Event> {
    if before == exe.status || !level.publishes(exe.status) {
        return None;
    }
    let millis = |seconds: f64| Value::from((seconds * 1000.0).round() as i64);
    let stopped = matches!(exe.status, Status::Failed | Status::Done | Status::Cancelled);
    let error = exe.error.as_deref().map(|e| {
        if e.chars().count() > MAX_ERROR_CHARS {
            let cut: String = e.chars().take(MAX_ERROR_CHARS).collect();
            format!("{cut}…")
        } else {
            e.to_string()
        }
    });
    // the version this commit writes and the status: one notice per change, whatever
    // retries its commit takes
    let notification_id = format!("{}:{}:{}", exe.id, exe.version + 1, status_name(exe.status));
    let detail = json!({
        "notificationId": notification_id,
        "executionId": exe.id,
        "definitionId": exe.definition_id,
        // the version it runs, which a rollout's failure rate is counted by
        "definitionVersion": exe.definition_version.map(|v| v.to_string()),
        "status": status_name(exe.status),
        "previousStatus": status_name(before),
        "activeState": exe.active_path,
        "parentId": exe.parent_id,
        "startDate": exe.created_at.map(millis),
        "stopDate": if stopped { Some(millis(exe.finished_at.unwrap_or(now))) } else { None },
        "error": error,
        "outcome": exe.outcome,
    });
    let data = match detail {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let mut event = Event::with_data(NOTICE_KIND, data);
    event.id = format!("status-{notification_id}");
    Some(event)
}

/// The status as harel writes it (`FAILED`, ...).
fn status_name(status: Status) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Whether an outbox row carries a notice (no target, the notice's kind).
pub(crate) fn is_notice(entry: &OutboxEntry) -> bool {
    entry.target_id.is_none() && entry.event.kind == NOTICE_KIND
}

/// The status a notice announces (`None`: not one it can read).
pub(crate) fn notice_status(event: &Event) -> Option<Status> {
    event
        .data
        .get("status")
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
}

/// One event for the bus: what `PutEvents` takes.
#[derive(Debug, Clone, PartialEq)]
pub struct BusEvent {
    pub source: String,
    pub detail_type: String,
    /// A JSON object.
    pub detail: String,
}

impl BusEvent {
    /// The bus event of a notice row's event.
    pub(crate) fn of_notice(event: &Event) -> BusEvent {
        BusEvent {
            source: SOURCE.to_string(),
            detail_type: DETAIL_TYPE.to_string(),
            detail: stm_core::pyjson::dumps(&Value::Object(event.data.clone())),
        }
    }

    /// Its size as EventBridge counts it for the 256 KB limit of a `PutEvents` request:
    /// the UTF-8 bytes of its source, detail type and detail.
    pub fn entry_bytes(&self) -> usize {
        self.source.len() + self.detail_type.len() + self.detail.len()
    }
}

/// Where status events go. Like [`crate::Queue::publish_batch`], a put never fails as a
/// whole: what was not accepted comes back as failures, by index, and stays pending.
#[async_trait]
pub trait StatusBus: Send + Sync + std::fmt::Debug {
    async fn put(&self, events: &[BusEvent]) -> Vec<PublishFailure>;

    /// Which notices go on this bus: the others are deleted unsent. The operator
    /// commands write a notice for every status they set (they do not know the
    /// deployment's level); the relay's bus, configured as the worker's, decides.
    fn level(&self) -> StatusEvents {
        StatusEvents::All
    }

    /// The canary tallies the finished executions this bus is given are added to
    /// ([`crate::rollout`]): `None`, the default, counts nothing.
    fn tallies(&self) -> Option<&crate::rollout::Tallies> {
        None
    }
}

/// A bus in memory, for `stm run` and the tests: it keeps what it was given, except the
/// entries a test told it to refuse ([`refuse_next`](MemoryBus::refuse_next)).
#[derive(Debug, Default)]
pub struct MemoryBus {
    events: Mutex<Vec<BusEvent>>,
    /// Entries still to refuse, and entries refused so far.
    refusing: Mutex<(usize, usize)>,
}

impl MemoryBus {
    pub fn new() -> Self {
        MemoryBus::default()
    }

    /// Every event put so far, in order.
    pub fn events(&self) -> Vec<BusEvent> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Refuse the next `n` entries put, whatever request they come in, each as
    /// EventBridge answers an entry it did not take: a failed result at its index
    /// (`ThrottlingException`), the request's other entries taken. For tests of what a
    /// refused status event leaves pending.
    pub fn refuse_next(&self, n: usize) {
        self.refusing.lock().unwrap_or_else(|e| e.into_inner()).0 = n;
    }

    /// How many entries were refused so far.
    pub fn refused(&self) -> usize {
        self.refusing.lock().unwrap_or_else(|e| e.into_inner()).1
    }
}

#[async_trait]
impl StatusBus for MemoryBus {
    async fn put(&self, events: &[BusEvent]) -> Vec<PublishFailure> {
        let mut failures = Vec::new();
        let mut taken = Vec::with_capacity(events.len());
        {
            let mut refusing = self.refusing.lock().unwrap_or_else(|e| e.into_inner());
            for (index, event) in events.iter().enumerate() {
                if refusing.0 > 0 {
                    refusing.0 -= 1;
                    refusing.1 += 1;
                    failures.push(PublishFailure {
                        index,
                        code: "ThrottlingException".into(),
                        message: "Rate exceeded. (refused by the memory bus)".into(),
                    });
                } else {
                    taken.push(event.clone());
                }
            }
        }
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(taken);
        failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed() -> Execution {
        let mut exe = Execution::new("e1", "Order");
        exe.version = 4;
        exe.created_at = Some(10.0);
        exe.status = Status::Failed;
        exe.error = Some("x".repeat(MAX_ERROR_CHARS + 5));
        exe
    }

    #[test]
    fn levels_publish_what_they_say() {
        for (level, published) in [
            (StatusEvents::None, vec![]),
            (StatusEvents::Failures, vec![Status::Failed]),
            (
                StatusEvents::All,
                vec![Status::Failed, Status::Suspended, Status::Done, Status::Cancelled],
            ),
        ] {
            for status in Status::ALL {
                assert_eq!(
                    level.publishes(status),
                    published.contains(&status),
                    "{level} {status:?}"
                );
            }
            assert_eq!(level.to_string().parse::<StatusEvents>(), Ok(level));
        }
        assert!("sometimes".parse::<StatusEvents>().is_err());
    }

    #[test]
    fn a_notice_names_the_change_with_a_stable_id_and_a_bounded_error() {
        let exe = failed();
        let event = notice(StatusEvents::All, Status::Running, &exe, 20.0).expect("a notice");
        let again = notice(StatusEvents::All, Status::Running, &exe, 99.0).expect("a notice");
        assert_eq!(event.id, "status-e1:5:FAILED");
        assert_eq!(event.id, again.id, "one id per execution and version");
        assert_eq!(event.data["definitionId"], "Order");
        assert_eq!(event.data["startDate"], 10_000);
        assert_eq!(event.data["stopDate"], 20_000);
        let error = event.data["error"].as_str().unwrap_or_default();
        assert_eq!(error.chars().count(), MAX_ERROR_CHARS + 1);
        let bus = BusEvent::of_notice(&event);
        assert_eq!(
            (bus.source.as_str(), bus.detail_type.as_str()),
            (SOURCE, DETAIL_TYPE)
        );
        let detail: serde_json::Value = serde_json::from_str(&bus.detail).expect("JSON");
        assert_eq!(detail["status"], "FAILED");
        assert!(is_notice(&OutboxEntry {
            seq: 1,
            target_id: None,
            event,
            trace_context: None,
        }));
    }

    #[test]
    fn a_suspension_has_no_stop_date() {
        let mut exe = failed();
        exe.status = Status::Suspended;
        let event = notice(StatusEvents::All, Status::Running, &exe, 20.0).expect("a notice");
        assert!(event.data["stopDate"].is_null());
    }
}
