//! AWS's quotas that bind before a partition key does, each with its source, and what a
//! run's load makes of them: the events/s each lets through, the increase a user must
//! request, and the warm-up or ramp a new deployment goes through.
//!
//! "Served" is the offered rate capped by every quota as the docs tell users to set them
//! before production traffic (docs/performance.md, "Service quotas to raise"): the
//! adjustable ones (DynamoDB's table-level throughput, Lambda's concurrent executions)
//! raised to what the run needs, the template's worker cap taken off past 1,000 instances
//! (`WorkerScaling=groups`), the fixed ones as they are (SQS FIFO's per-action rate in
//! high-throughput mode).

use stm_testkit::meter::MeterReport;

use crate::queue::ActionLoad;

/// DynamoDB, "Quotas" (Developer Guide): per table, 40,000 read request units and 40,000
/// write request units a second in on-demand mode (the same in capacity units when
/// provisioned); adjustable. A global secondary index is metered as its own table here.
pub(crate) const TABLE_UNITS: f64 = 40_000.0;
/// DynamoDB, "Pre-warming a table for on-demand capacity mode": a new on-demand table
/// sustains up to 4,000 writes and 12,000 reads a second; throughput past twice the
/// previous peak within 30 minutes may be throttled. `WarmThroughput` on the table
/// (CloudFormation `AWS::DynamoDB::Table`) raises the start.
pub(crate) const NEW_TABLE_WRITES: f64 = 4_000.0;
pub(crate) const NEW_TABLE_READS: f64 = 12_000.0;
/// SQS, "Amazon SQS message quotas": FIFO high-throughput mode, up to 70,000 transactions
/// a second per API action in US East (N. Virginia), US West (Oregon) and Europe
/// (Ireland), 19,000 in US East (Ohio) and Europe (Frankfurt). The us-east-1 figure; not
/// adjustable.
pub(crate) const SQS_ACTION_TPS: f64 = 70_000.0;
/// EventBridge, "Amazon EventBridge quotas": `PutEvents`, 10,000 requests a second per
/// account in us-east-1 (18,750 invocations of rules' targets); raised through Service
/// Quotas. The status events' bus is counted against it.
pub(crate) const PUT_EVENTS_TPS: f64 = 10_000.0;
/// Lambda, "Configuring scaling behavior for SQS event source mappings": the event source
/// adds up to 300 instances a minute after its first 5; a FIFO source scales to its active
/// message groups, or to `ScalingConfig` `MaximumConcurrency` (2 to 1,000) when set,
/// whichever is lower (the same page's note on FIFO queues, and the Knowledge Center's
/// "optimal concurrency" article: "If you use FIFO event source mapping, then functions can
/// scale in concurrency to the number of active message groups"). The template sets it
/// (`WorkerMaxConcurrency`) unless `WorkerScaling` is `groups`: the docs tell a deployment
/// that needs more than 1,000 instances to take the cap off, so a run binds on it only if
/// it needs fewer.
pub(crate) const EVENT_SOURCE_START: f64 = 5.0;
pub(crate) const EVENT_SOURCE_RAMP_PER_MINUTE: f64 = 300.0;
pub(crate) const EVENT_SOURCE_MAX: f64 = 1_000.0;
/// Lambda, "Lambda quotas": 1,000 concurrent executions per Region by default, adjustable
/// to tens of thousands.
pub(crate) const ACCOUNT_CONCURRENCY: f64 = 1_000.0;

/// The SQS API actions a quota counts together (a batch counts as one request of its
/// action).
fn sqs_action(request: &str) -> Option<&'static str> {
    match request {
        "SendMessage" | "SendMessageBatch" => Some("send"),
        "ReceiveMessage" => Some("receive"),
        "DeleteMessage" | "DeleteMessageBatch" => Some("delete"),
        "ChangeMessageVisibility" => Some("change visibility"),
        // the doorbells' standard queue (`doorbell.rs`): "a nearly unlimited number of API
        // calls per second, per API action" (*Getting started with Amazon SQS standard
        // queues*), no quota to count them against; and EventBridge's PutEvents: its own
        // quota, an increase to request (below)
        _ => None,
    }
}

/// What binds a run, quota by quota.
#[derive(Debug, Clone, Default)]
pub(crate) struct Binding {
    /// The events/s the run's load lets through each quota, the tightest first: (what,
    /// events/s).
    pub(crate) caps: Vec<(String, f64)>,
    /// The increases a user must request at this rate: (quota, to what).
    pub(crate) raise: Vec<(String, f64)>,
    /// The template's settings a user must change at this rate.
    pub(crate) settings: Vec<String>,
    /// The busiest SQS action's requests a second against its quota.
    pub(crate) sqs_share: f64,
    /// The busiest table's units a second against the table-level quota.
    pub(crate) table_share: f64,
    /// The busiest table's name and its units a second (reads or writes, the larger share).
    pub(crate) table: String,
    /// Minutes for the event source to reach the concurrency needed, from its start.
    pub(crate) ramp_minutes: f64,
    /// Minutes for a new on-demand table, not warmed, to reach the run's peak by doubling.
    pub(crate) warm_minutes: f64,
}

impl Binding {
    /// The tightest cap.
    pub(crate) fn served(&self, offered: f64) -> f64 {
        self.caps.iter().map(|(_, cap)| *cap).fold(offered, f64::min)
    }
}

/// The quotas against a run at `offered` events/s: its busiest second per table and per
/// SQS action scaled to the offered rate (the run's measured rate is `measured`), and the
/// concurrency it needs against the template's cap on the worker (`worker_cap`,
/// `WorkerMaxConcurrency`'s default).
///
/// The event source's receives and deletes are paced at the quota (`queue.rs`), so their
/// requests cannot tell how close it binds: they are counted by the messages they carry,
/// `batch_size` (`WorkerBatchSize`) to a request when the quota binds.
pub(crate) fn binding(
    report: &MeterReport,
    sqs: &[ActionLoad],
    measured: f64,
    offered: f64,
    concurrency: f64,
    worker_cap: f64,
    batch_size: f64,
) -> Binding {
    let mut b = Binding::default();
    let scale = if measured > 0.0 { offered / measured } else { 1.0 };
    // DynamoDB: each table's busiest second at the offered rate
    let mut peak_reads: f64 = 0.0;
    let mut peak_writes: f64 = 0.0;
    for (table, reads, writes) in &report.table_peaks {
        let (reads, writes) = (reads * scale, writes * scale);
        peak_reads = peak_reads.max(reads);
        peak_writes = peak_writes.max(writes);
        let share = (reads / TABLE_UNITS).max(writes / TABLE_UNITS);
        if share > b.table_share {
            b.table_share = share;
            b.table = table.clone();
        }
        if reads > TABLE_UNITS {
            b.raise
                .push((format!("DynamoDB {table} table-level reads"), reads));
        }
        if writes > TABLE_UNITS {
            b.raise
                .push((format!("DynamoDB {table} table-level writes"), writes));
        }
    }
    let doublings = (peak_writes / NEW_TABLE_WRITES)
        .max(peak_reads / NEW_TABLE_READS)
        .log2()
        .ceil()
        .max(0.0);
    b.warm_minutes = 30.0 * doublings;
    // SQS: each action's busiest second at the offered rate, against the fixed quota
    let mut per_action: std::collections::BTreeMap<&'static str, f64> = Default::default();
    for load in sqs {
        let paced = matches!(load.action, "ReceiveMessage" | "DeleteMessageBatch");
        let requests = if paced {
            load.peak_messages_per_second as f64 / batch_size.max(1.0)
        } else {
            load.peak_per_second as f64
        };
        if let Some(action) = sqs_action(load.action) {
            *per_action.entry(action).or_default() += requests * scale;
        }
        if load.action == "PutEvents" && load.peak_per_second as f64 * scale > PUT_EVENTS_TPS {
            b.raise.push((
                "EventBridge PutEvents requests a second".into(),
                load.peak_per_second as f64 * scale,
            ));
        }
    }
    for (action, tps) in per_action {
        b.sqs_share = b.sqs_share.max(tps / SQS_ACTION_TPS);
        if tps > 0.0 {
            b.caps.push((
                format!("SQS {action} {SQS_ACTION_TPS:.0}/s"),
                offered * SQS_ACTION_TPS / tps,
            ));
        }
    }
    // Lambda: the worker's event source scales to the groups' need (the simulation's
    // concurrency, at most one instance per active group); past `ScalingConfig`'s 1,000 the
    // template's cap comes off (`WorkerScaling=groups`), and the account's quota is raised to
    // twice the worker's (the template's default leaves half of it to the other functions
    // of the Region)
    if concurrency > 0.0 {
        if concurrency > EVENT_SOURCE_MAX {
            b.settings
                .push("WorkerScaling=groups (template parameter: no cap of 1,000 instances)".into());
        } else if concurrency > worker_cap {
            b.raise.push((
                "WorkerMaxConcurrency (template parameter)".into(),
                concurrency.ceil(),
            ));
        }
        if concurrency > ACCOUNT_CONCURRENCY / 2.0 {
            b.raise.push((
                "Lambda concurrent executions (twice the worker's)".into(),
                2.0 * concurrency,
            ));
        }
        b.ramp_minutes = ((concurrency - EVENT_SOURCE_START) / EVENT_SOURCE_RAMP_PER_MINUTE).max(0.0);
    }
    b.caps.sort_by(|a, b| a.1.total_cmp(&b.1));
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An action's load in a run: its requests, all in its busiest second, and the most
    /// messages they carried in one second.
    fn load(action: &'static str, requests: u64, messages: u64) -> ActionLoad {
        ActionLoad {
            action,
            requests,
            peak_per_second: requests,
            peak_messages_per_second: messages,
        }
    }

    /// A run whose tables bind nothing.
    fn quiet_report() -> MeterReport {
        MeterReport {
            hottest_per_table: Vec::new(),
            units_per_table: Vec::new(),
            table_peaks: Vec::new(),
            requests: Default::default(),
            seconds: 1.0,
        }
    }

    /// A run that needs more worker instances than `ScalingConfig` allows is told to take
    /// the template's cap off and to raise the account's quota, and its event source then
    /// caps nothing (a FIFO source scales to its active groups); one within the cap is not.
    #[test]
    fn past_a_thousand_instances_the_cap_comes_off_and_binds_nothing() {
        let report = quiet_report();
        let wide = binding(&report, &[], 100_000.0, 100_000.0, 2_800.0, 500.0, 10.0);
        assert!(
            wide.settings
                .iter()
                .any(|s| s.starts_with("WorkerScaling=groups")),
            "{wide:?}"
        );
        assert!(wide
            .raise
            .iter()
            .any(|(q, n)| q.starts_with("Lambda concurrent executions") && (*n - 5_600.0).abs() < 1e-9));
        assert!((wide.served(100_000.0) - 100_000.0).abs() < 1e-9, "{wide:?}");
        let narrow = binding(&report, &[], 10_000.0, 10_000.0, 280.0, 500.0, 10.0);
        assert!(
            narrow.settings.is_empty() && narrow.raise.is_empty(),
            "{narrow:?}"
        );
    }

    /// A run at half its offered rate scales its peaks up: the quota that binds at the
    /// offered rate is the one reported, with the increase it needs.
    #[test]
    fn the_tightest_quota_caps_what_is_served() {
        let report = MeterReport {
            table_peaks: vec![("executions".into(), 10_000.0, 30_000.0)],
            ..quiet_report()
        };
        let sqs = [load("SendMessageBatch", 50_000, 60_000)];
        let b = binding(&report, &sqs, 50_000.0, 100_000.0, 800.0, 500.0, 10.0);
        // sends: 100,000 requests/s at the offered rate, 70,000 allowed
        assert_eq!(b.caps[0].0, "SQS send 70000/s");
        assert!((b.served(100_000.0) - 70_000.0).abs() < 1e-6);
        assert!(b
            .raise
            .iter()
            .any(|(q, n)| q.contains("writes") && (*n - 60_000.0).abs() < 1e-6));
        assert!((b.table_share - 1.5).abs() < 1e-9);
        // 60,000 writes from 4,000: 4 doublings
        assert_eq!(b.warm_minutes, 120.0);
    }

    /// The event source's receives are paced at the quota, so they bind by the messages
    /// they carry, ten to a request: 100,000 receives a second of one message each need
    /// 10,000 full ones, and 800,000 messages a second are past what 70,000 can carry.
    #[test]
    fn receives_bind_by_the_messages_they_carry() {
        let report = quiet_report();
        let receives = |messages: u64| [load("ReceiveMessage", 70_000, messages)];
        let light = binding(
            &report,
            &receives(100_000),
            100_000.0,
            100_000.0,
            800.0,
            1_000.0,
            10.0,
        );
        assert!((light.served(100_000.0) - 100_000.0).abs() < 1e-6, "{light:?}");
        assert!((light.sqs_share - 1.0 / 7.0).abs() < 1e-9, "{light:?}");
        let heavy = binding(
            &report,
            &receives(800_000),
            100_000.0,
            100_000.0,
            800.0,
            1_000.0,
            10.0,
        );
        assert_eq!(heavy.caps[0].0, "SQS receive 70000/s");
        assert!((heavy.served(100_000.0) - 87_500.0).abs() < 1e-6, "{heavy:?}");
    }

    /// The doorbells' standard queue counts against no quota, however many requests it
    /// takes (SQS gives a standard queue a nearly unlimited rate per action), and its
    /// requests do not add to the FIFO event queue's.
    #[test]
    fn doorbell_queue_requests_cap_nothing() {
        use crate::doorbell::{CHANGE_VISIBILITY, DELETE, RECEIVE, SEND};
        let report = quiet_report();
        let doorbells = [
            load(SEND, 200_000, 2_000_000),
            load(RECEIVE, 200_000, 2_000_000),
            load(DELETE, 200_000, 2_000_000),
            load(CHANGE_VISIBILITY, 200_000, 200_000),
            load("SendMessageBatch", 35_000, 100_000),
        ];
        let b = binding(&report, &doorbells, 100_000.0, 100_000.0, 800.0, 1_000.0, 10.0);
        assert!((b.served(100_000.0) - 100_000.0).abs() < 1e-6, "{b:?}");
        assert!(
            (b.sqs_share - 0.5).abs() < 1e-9,
            "the event queue's sends alone: {b:?}"
        );
    }

    /// The status events' bus past EventBridge's 10,000 requests a second is an increase
    /// to request, not a cap.
    #[test]
    fn put_events_past_its_quota_is_an_increase() {
        let report = quiet_report();
        let puts = [load("PutEvents", 6_000, 30_000)];
        let b = binding(&report, &puts, 50_000.0, 100_000.0, 800.0, 1_000.0, 10.0);
        assert!(
            b.raise
                .iter()
                .any(|(q, n)| q.starts_with("EventBridge PutEvents") && (*n - 12_000.0).abs() < 1e-6),
            "{b:?}"
        );
        assert!((b.served(100_000.0) - 100_000.0).abs() < 1e-6, "{b:?}");
    }
}
