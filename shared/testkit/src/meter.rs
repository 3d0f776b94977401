//! The partition meter: DynamoDB's read and write units per partition key, per table, per
//! second, by DynamoDB's accounting, so a test or a simulation can show that no key runs
//! hot (DynamoDB serves at most 1,000 write units and 3,000 read units per second per
//! partition, and a single item is always in one partition).
//!
//! The accounting (AWS's "Read/write capacity mode" page):
//! - a write unit is one write of up to 1 KB; a larger item takes one per KB started;
//! - a read unit is one strongly consistent read of up to 4 KB (one per 4 KB started); an
//!   eventually consistent read costs half;
//! - a transactional read or write costs twice;
//! - a write to a table with a global secondary index also writes each index whose key the
//!   item carries, charged to the index's own partition key;
//! - a delete costs what the deleted item's size costs (at least one unit).
//!
//! Time is the caller's, in seconds: the wall clock for the strict layer, simulated time
//! for a simulation. Units are kept per whole second.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// DynamoDB's write units per second on one partition.
pub const PARTITION_WRITE_UNITS: f64 = 1_000.0;
/// DynamoDB's read units per second on one partition.
pub const PARTITION_READ_UNITS: f64 = 3_000.0;

/// The write units of writing (or deleting) an item of `bytes`.
pub fn write_units(bytes: usize, transactional: bool) -> f64 {
    let units = bytes.div_ceil(1024).max(1) as f64;
    if transactional {
        2.0 * units
    } else {
        units
    }
}

/// The read units of reading an item of `bytes` (a missing item costs as one of 0 bytes).
pub fn read_units(bytes: usize, consistent: bool, transactional: bool) -> f64 {
    let units = bytes.div_ceil(4096).max(1) as f64;
    if transactional {
        2.0 * units
    } else if consistent {
        units
    } else {
        units / 2.0
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Units {
    read: f64,
    write: f64,
}

#[derive(Debug, Default)]
struct Inner {
    /// (table, key) -> second -> units.
    per_key: HashMap<(String, String), BTreeMap<i64, Units>>,
    /// table -> units in all.
    per_table: BTreeMap<String, Units>,
    /// table -> second -> units: the table-level throughput (a table's quota is per
    /// second over all its partitions; a global secondary index is metered as its own
    /// table, `<table>.<index>`).
    per_table_second: BTreeMap<String, BTreeMap<i64, Units>>,
    /// operation -> requests.
    requests: BTreeMap<String, u64>,
    /// (operation, the tables the request named) -> requests: what a report on some
    /// tables counts ([`PartitionMeter::report_where`]).
    requests_on: BTreeMap<(String, Vec<String>), u64>,
}

/// Units per partition key per second (cheap to clone: clones share the counts).
#[derive(Debug, Clone, Default)]
pub struct PartitionMeter {
    inner: Arc<Mutex<Inner>>,
}

/// The busiest second of one key.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyLoad {
    pub table: String,
    pub key: String,
    /// The most read units the key took in one second.
    pub read_units_per_second: f64,
    /// The most write units the key took in one second.
    pub write_units_per_second: f64,
}

impl KeyLoad {
    /// The larger of its read and write peaks against the partition's limits (1.0 = at
    /// the limit).
    pub fn share_of_limit(&self) -> f64 {
        (self.read_units_per_second / PARTITION_READ_UNITS)
            .max(self.write_units_per_second / PARTITION_WRITE_UNITS)
    }
}

/// What a meter saw.
#[derive(Debug, Clone, PartialEq)]
pub struct MeterReport {
    /// The hottest key of each table (by [`KeyLoad::share_of_limit`]), hottest table first.
    pub hottest_per_table: Vec<KeyLoad>,
    /// Read and write units per table in all: `(table, read, write)`.
    pub units_per_table: Vec<(String, f64, f64)>,
    /// Each table's busiest second, reads and writes apart: `(table, read units/s, write
    /// units/s)`, what a table-level throughput quota is compared with.
    pub table_peaks: Vec<(String, f64, f64)>,
    /// Requests per operation (`GetItem`, `TransactWriteItems`, ...; a simulation may name
    /// its store calls).
    pub requests: BTreeMap<String, u64>,
    /// The seconds between the first and the last charge, at least 1.
    pub seconds: f64,
}

impl MeterReport {
    /// The hottest key of all, if any was charged.
    pub fn hottest(&self) -> Option<&KeyLoad> {
        self.hottest_per_table.first()
    }

    /// Read and write units in all.
    pub fn total_units(&self) -> (f64, f64) {
        self.units_per_table
            .iter()
            .fold((0.0, 0.0), |(r, w), (_, tr, tw)| (r + tr, w + tw))
    }

    /// Requests in all.
    pub fn total_requests(&self) -> u64 {
        self.requests.values().sum()
    }
}

impl PartitionMeter {
    pub fn new() -> Self {
        PartitionMeter::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn charge(&self, table: &str, key: &str, at: f64, units: Units) {
        let second = at.floor() as i64;
        let mut inner = self.lock();
        let slot = inner
            .per_key
            .entry((table.to_string(), key.to_string()))
            .or_default()
            .entry(second)
            .or_default();
        slot.read += units.read;
        slot.write += units.write;
        let total = inner.per_table.entry(table.to_string()).or_default();
        total.read += units.read;
        total.write += units.write;
        let second = inner
            .per_table_second
            .entry(table.to_string())
            .or_default()
            .entry(second)
            .or_default();
        second.read += units.read;
        second.write += units.write;
    }

    /// Charge a read of `key`'s item of `bytes` in `table` at time `at` (seconds).
    pub fn read(&self, table: &str, key: &str, bytes: usize, consistent: bool, transactional: bool, at: f64) {
        let read = read_units(bytes, consistent, transactional);
        self.charge(table, key, at, Units { read, write: 0.0 });
    }

    /// Charge a read of `units` read units in all to `key` (a `Query` or a `Scan` page is
    /// billed on the bytes it reads together, not item by item).
    pub fn read_units(&self, table: &str, key: &str, units: f64, at: f64) {
        self.charge(
            table,
            key,
            at,
            Units {
                read: units,
                write: 0.0,
            },
        );
    }

    /// Charge a write (put, update or delete) of `key`'s item of `bytes` in `table`.
    pub fn write(&self, table: &str, key: &str, bytes: usize, transactional: bool, at: f64) {
        let write = write_units(bytes, transactional);
        self.charge(table, key, at, Units { read: 0.0, write });
    }

    /// Count one request of `operation`.
    pub fn request(&self, operation: &str) {
        self.request_on::<&str>(operation, &[]);
    }

    /// Count one request of `operation` that named `tables`: [`report`](Self::report)
    /// counts it like [`request`](Self::request), and a report on some tables
    /// ([`report_where`](Self::report_where)) counts it when it named one of them.
    pub fn request_on<T: AsRef<str>>(&self, operation: &str, tables: &[T]) {
        let mut named: Vec<String> = tables.iter().map(|t| t.as_ref().to_string()).collect();
        named.sort();
        named.dedup();
        let mut inner = self.lock();
        *inner.requests.entry(operation.to_string()).or_default() += 1;
        *inner
            .requests_on
            .entry((operation.to_string(), named))
            .or_default() += 1;
    }

    /// The read and write units charged to one key in all (`(0.0, 0.0)` for a key never
    /// charged).
    pub fn key_units(&self, table: &str, key: &str) -> (f64, f64) {
        self.lock()
            .per_key
            .get(&(table.to_string(), key.to_string()))
            .map_or((0.0, 0.0), |seconds| {
                seconds
                    .values()
                    .fold((0.0, 0.0), |(r, w), u| (r + u.read, w + u.write))
            })
    }

    /// Forget everything charged so far.
    pub fn reset(&self) {
        *self.lock() = Inner::default();
    }

    /// The peaks and totals so far.
    pub fn report(&self) -> MeterReport {
        let inner = self.lock();
        let mut report = summarize(&inner, |_| true);
        report.requests = inner.requests.clone();
        report
    }

    /// The peaks and totals of the tables `keep` accepts (a table's global secondary
    /// indexes are metered as `<table>/<index>`), and the requests that named one of them:
    /// what one test saw when other tests of its process share the meter.
    pub fn report_where(&self, keep: impl Fn(&str) -> bool) -> MeterReport {
        let inner = self.lock();
        let mut report = summarize(&inner, &keep);
        for ((operation, tables), n) in &inner.requests_on {
            if tables.iter().any(|t| keep(t)) {
                *report.requests.entry(operation.clone()).or_default() += n;
            }
        }
        report
    }
}

/// The report on the tables `keep` accepts, without its request counts.
fn summarize(inner: &Inner, keep: impl Fn(&str) -> bool) -> MeterReport {
    let mut hottest: BTreeMap<&str, KeyLoad> = BTreeMap::new();
    let mut first_second: Option<i64> = None;
    let mut last_second: Option<i64> = None;
    for ((table, key), seconds) in &inner.per_key {
        if !keep(table) {
            continue;
        }
        if let (Some((&first, _)), Some((&last, _))) = (seconds.first_key_value(), seconds.last_key_value()) {
            first_second = Some(first_second.map_or(first, |s| s.min(first)));
            last_second = Some(last_second.map_or(last, |s| s.max(last)));
        }
        let load = KeyLoad {
            table: table.clone(),
            key: key.clone(),
            read_units_per_second: seconds.values().map(|u| u.read).fold(0.0, f64::max),
            write_units_per_second: seconds.values().map(|u| u.write).fold(0.0, f64::max),
        };
        match hottest.get(table.as_str()) {
            Some(held) if held.share_of_limit() >= load.share_of_limit() => {}
            _ => {
                hottest.insert(table.as_str(), load);
            }
        }
    }
    let mut hottest_per_table: Vec<KeyLoad> = hottest.into_values().collect();
    hottest_per_table.sort_by(|a, b| b.share_of_limit().total_cmp(&a.share_of_limit()));
    let seconds = match (first_second, last_second) {
        (Some(first), Some(last)) => ((last - first + 1) as f64).max(1.0),
        _ => 1.0,
    };
    MeterReport {
        hottest_per_table,
        units_per_table: inner
            .per_table
            .iter()
            .filter(|(table, _)| keep(table))
            .map(|(table, u)| (table.clone(), u.read, u.write))
            .collect(),
        table_peaks: inner
            .per_table_second
            .iter()
            .filter(|(table, _)| keep(table))
            .map(|(table, seconds)| {
                let peak = |f: fn(&Units) -> f64| seconds.values().map(f).fold(0.0, f64::max);
                (table.clone(), peak(|u| u.read), peak(|u| u.write))
            })
            .collect(),
        requests: BTreeMap::new(),
        seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_follow_dynamodbs_accounting() {
        assert_eq!(write_units(0, false), 1.0);
        assert_eq!(write_units(1024, false), 1.0);
        assert_eq!(write_units(1025, false), 2.0);
        assert_eq!(write_units(925, true), 2.0, "a transaction writes twice");
        assert_eq!(read_units(4096, true, false), 1.0);
        assert_eq!(read_units(4097, true, false), 2.0);
        assert_eq!(read_units(925, false, false), 0.5, "eventually consistent: half");
        assert_eq!(read_units(925, true, true), 2.0, "transactional: twice");
    }

    #[test]
    fn the_hottest_key_is_its_busiest_second_against_the_limit() {
        let meter = PartitionMeter::new();
        // 600 transactional writes of a 900-byte item in one second: 1,200 WCU, over 1,000
        for i in 0..600 {
            meter.write("executions", "hot", 900, true, 10.0 + i as f64 / 1000.0);
        }
        // spread over two seconds elsewhere
        for i in 0..100 {
            meter.write("executions", "cool", 900, false, 10.0 + i as f64 / 50.0);
            meter.read("processed", "cool#e", 66, true, false, 10.5);
        }
        let report = meter.report();
        let hot = report.hottest().expect("charged");
        assert_eq!((hot.table.as_str(), hot.key.as_str()), ("executions", "hot"));
        assert_eq!(hot.write_units_per_second, 1200.0);
        assert!((hot.share_of_limit() - 1.2).abs() < 1e-9);
        assert_eq!(report.hottest_per_table.len(), 2);
        assert_eq!(report.hottest_per_table[1].read_units_per_second, 100.0);
        assert_eq!(report.total_units(), (100.0, 1300.0));
        assert_eq!(report.seconds, 2.0);
        // the table's busiest second sums its keys: 1,200 (hot) + 50 (cool) in second 10
        let executions = report
            .table_peaks
            .iter()
            .find(|(table, _, _)| table == "executions")
            .expect("the table's peak");
        assert_eq!((executions.1, executions.2), (0.0, 1250.0));
    }

    #[test]
    fn a_report_on_some_tables_leaves_the_others_out() {
        let meter = PartitionMeter::new();
        meter.write("a_executions", "hot", 900, true, 3.2);
        meter.write("a_executions", "hot", 900, true, 3.7);
        meter.write("a_timers/due_index", "due_shard=1", 100, false, 5.1);
        meter.write("b_executions", "hotter", 5000, true, 9.0);
        meter.read("b_executions", "hotter", 100, true, false, 9.5);
        meter.request_on("TransactWriteItems", &["a_executions"]);
        meter.request_on("TransactWriteItems", &["b_executions", "a_timers"]);
        meter.request_on("GetItem", &["b_executions"]);
        meter.request("ListTables");

        let mine = meter.report_where(|t| t.starts_with("a_"));
        let hot = mine.hottest().expect("charged");
        assert_eq!((hot.table.as_str(), hot.key.as_str()), ("a_executions", "hot"));
        assert_eq!(hot.write_units_per_second, 4.0);
        assert_eq!(mine.total_units(), (0.0, 5.0));
        assert_eq!(mine.seconds, 3.0, "seconds 3 to 5");
        assert_eq!(mine.requests.get("TransactWriteItems"), Some(&2));
        assert_eq!(mine.requests.get("GetItem"), None);
        assert_eq!(mine.total_requests(), 2);

        let all = meter.report();
        assert_eq!(all.hottest().map(|k| k.key.as_str()), Some("hotter"));
        assert_eq!(all.total_requests(), 4);
        assert_eq!(all.seconds, 7.0);
        assert_eq!(meter.key_units("b_executions", "hotter"), (1.0, 10.0));
        assert_eq!(meter.key_units("b_executions", "never"), (0.0, 0.0));
    }
}
