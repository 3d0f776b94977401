//! The deployment by state: `stm list --in STATE` (which executions are in a state, and
//! for how long) and `stm states MACHINE` (each state's count and time spent in it). Both
//! read the store's state index, so they cost what they find, not what the table holds.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use stm_core::{Definition, Execution, Status};
use stm_store::{ExecutionStore, InState};

use super::{opt, Tables};
use crate::errors::usage;

/// How many executions a listing re-reads at once.
const REREAD_CONCURRENCY: usize = 16;

/// Each state of a machine: the executions in it now and the time they have spent in it.
#[derive(Args)]
pub struct StatesArgs {
    /// The machine.
    machine: String,
    /// The folder of .stm files that declares it.
    #[arg(long, env = stm_env::DEFINITIONS_DIR, value_name = "DIR")]
    definitions: Option<PathBuf>,
    #[command(flatten)]
    tables: Tables,
}

/// What `stm list --in` selects.
pub struct InStateQuery<'a> {
    pub tables: &'a Tables,
    pub definitions: Option<&'a Path>,
    pub machine: Option<&'a str>,
    pub state: &'a str,
    pub older_than: Option<f64>,
    pub status: Option<Status>,
    pub roots_only: bool,
}

/// The machine `name` from the definitions folder, or a usage error saying what to pass.
pub fn machine(definitions: Option<&Path>, name: Option<&str>, flag: &str) -> Result<Arc<Definition>> {
    let Some(name) = name else {
        return Err(usage(format!("{flag} needs the machine: pass --definition NAME")));
    };
    let Some(dir) = definitions else {
        return Err(usage(format!(
            "{flag} needs machine {name}'s states: pass --definitions DIR (the folder of its .stm files)"
        )));
    };
    let loaded = stm_runtime::config::load_definitions_dir(dir)?;
    loaded.get(name).cloned().ok_or_else(|| {
        let known: Vec<&str> = loaded.iter().map(|d| d.id.as_str()).collect();
        usage(format!(
            "no machine {name:?} in {} (the machines there: {})",
            dir.display(),
            known.join(", ")
        ))
    })
}

/// The executions of `definition_id` in `paths` from the state index, saying on stderr
/// what is being read when the answer takes over a second (a deployment's index past a
/// small one is read by shards: 512 queries per state).
pub(crate) async fn looked_up(
    store: &dyn stm_store::ExecutionStore,
    definition_id: &str,
    paths: &[String],
    entered_by: Option<f64>,
) -> Result<Vec<stm_store::InState>> {
    let look = store.in_states(definition_id, paths, entered_by);
    tokio::pin!(look);
    let started = std::time::Instant::now();
    let found = tokio::select! {
        found = &mut look => found,
        () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {
            eprintln!(
                "reading the state index for {} state{} of {definition_id}…",
                paths.len(),
                if paths.len() == 1 { "" } else { "s" }
            );
            let found = look.await;
            eprintln!("read in {:.1} s", started.elapsed().as_secs_f64());
            found
        }
    };
    Ok(found?)
}

/// The wall clock, in epoch seconds (the index's times are the commits').
pub(crate) fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// `stm list --in STATE`: the executions in the state or under it, oldest in it first,
/// each re-read (the index is eventually consistent) and kept only if it is still there.
pub async fn list_in_state(query: InStateQuery<'_>) -> Result<ExitCode> {
    let defn = machine(query.definitions, query.machine, "--in")?;
    let paths = defn.paths_under(query.state).map_err(|e| usage(e.to_string()))?;
    let now = now();
    let store = query.tables.store(false).await?;
    let entered_by = query.older_than.map(|age| now - age);
    let found = looked_up(store.as_ref(), &defn.id, &paths, entered_by).await?;
    let selected = reread_still_in(store.as_ref(), found, query.status, query.roots_only).await?;
    if selected.is_empty() {
        let age = query
            .older_than
            .map(|a| format!(" for longer than {}", duration_text(a)))
            .unwrap_or_default();
        let status = query.status.map(|s| format!(" {s}")).unwrap_or_default();
        eprintln!("no{status} execution of {} is in {}{age}", defn.id, query.state);
        return Ok(ExitCode::from(1));
    }
    println!(
        "{:<44} {:<10} {:<32} {:>10}  OUTCOME",
        "ID", "STATUS", "STATE", "IN STATE"
    );
    for (entry, exe) in &selected {
        println!(
            "{:<44} {:<10} {:<32} {:>10}  {}",
            exe.id,
            exe.status.as_str(),
            entry.path,
            duration_text(now - entry.since),
            opt(&exe.outcome)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A time in a state, short: `45s`, `12m 5s`, `3h 20m`, `2d 4h`.
pub fn duration_text(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    let (d, h, m, sec) = (s / 86_400, s % 86_400 / 3_600, s % 3_600 / 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{sec}s"),
        (0, 0, _) => format!("{m}m {sec}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// Each execution the index listed in `found`, re-read (a few at a time, in order) and
/// kept only if it is still where the index said and matches the filters: the index lags
/// the table.
pub(crate) async fn reread_still_in(
    store: &dyn ExecutionStore,
    found: Vec<InState>,
    status: Option<Status>,
    roots_only: bool,
) -> Result<Vec<(InState, Execution)>> {
    use futures_util::stream::{self, StreamExt as _, TryStreamExt as _};
    let reread: Vec<(InState, Option<Execution>)> = stream::iter(found)
        .map(|entry| async move { Ok::<_, anyhow::Error>((entry.clone(), store.load(&entry.id).await?)) })
        .buffered(REREAD_CONCURRENCY)
        .try_collect()
        .await?;
    Ok(reread
        .into_iter()
        .filter_map(|(entry, exe)| exe.map(|exe| (entry, exe)))
        .filter(|(entry, exe)| still_in(exe, entry, status, roots_only))
        .collect())
}

/// Whether `exe`, read after the index listed it, is still where the index said and
/// matches the filters.
pub(crate) fn still_in(exe: &Execution, entry: &InState, status: Option<Status>, roots_only: bool) -> bool {
    exe.active_path.as_deref() == Some(entry.path.as_str())
        && !exe.status.is_finished()
        && status.is_none_or(|s| exe.status == s)
        && (!roots_only || exe.parent_id.is_none())
}

/// `stm states MACHINE`.
pub fn states(args: StatesArgs) -> Result<ExitCode> {
    crate::role::operate(async move { print_states(&args).await })
}

async fn print_states(args: &StatesArgs) -> Result<()> {
    let defn = machine(args.definitions.as_deref(), Some(&args.machine), "stm states")?;
    let paths: Vec<String> = defn.state_paths().map(str::to_string).collect();
    let store = args.tables.store(false).await?;
    let found = looked_up(store.as_ref(), &defn.id, &paths, None).await?;
    let now = now();
    let rows = state_rows(&paths, &found, now);
    println!(
        "{:<36} {:>8} {:>10} {:>10} {:>10}",
        "STATE", "IN IT", "P50", "P95", "OLDEST"
    );
    for row in rows {
        let time = |t: Option<f64>| t.map_or_else(|| "-".to_string(), duration_text);
        println!(
            "{:<36} {:>8} {:>10} {:>10} {:>10}",
            row.path,
            row.count,
            time(row.p50),
            time(row.p95),
            time(row.oldest)
        );
    }
    let total: usize = found.len();
    println!("{total} executions of {} in {} states", defn.id, paths.len());
    Ok(())
}

/// One line of `stm states`.
#[derive(Debug, PartialEq)]
pub struct StateRow {
    pub path: String,
    pub count: usize,
    /// Time in the state (seconds): the median, the 95th percentile, the longest.
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub oldest: Option<f64>,
}

/// Each of `paths` (in order) with its entries in `found`, timed at `now`.
pub fn state_rows(paths: &[String], found: &[InState], now: f64) -> Vec<StateRow> {
    paths
        .iter()
        .map(|path| {
            let mut times: Vec<f64> = found
                .iter()
                .filter(|e| &e.path == path)
                .map(|e| (now - e.since).max(0.0))
                .collect();
            times.sort_by(f64::total_cmp);
            StateRow {
                path: path.clone(),
                count: times.len(),
                p50: percentile(&times, 0.50),
                p95: percentile(&times, 0.95),
                oldest: times.last().copied(),
            }
        })
        .collect()
}

/// The nearest-rank percentile of sorted `values`.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, path: &str, since: f64) -> InState {
        InState {
            id: id.into(),
            path: path.into(),
            since,
        }
    }

    #[test]
    fn rows_count_and_time_each_state_in_order() {
        let paths = vec!["A".to_string(), "A.B".to_string(), "C".to_string()];
        let found: Vec<InState> = (0..20)
            .map(|i| entry(&format!("e{i}"), "A.B", 1_000.0 - f64::from(i) * 10.0))
            .chain([entry("x", "A", 990.0)])
            .collect();
        let rows = state_rows(&paths, &found, 1_000.0);
        assert_eq!(rows.len(), 3);
        assert_eq!(
            (rows[0].count, rows[0].p50, rows[0].oldest),
            (1, Some(10.0), Some(10.0))
        );
        // 0, 10, ..., 190 s in A.B: the median is the 10th (90 s), p95 the 19th (180 s)
        assert_eq!(
            (rows[1].count, rows[1].p50, rows[1].p95, rows[1].oldest),
            (20, Some(90.0), Some(180.0), Some(190.0))
        );
        assert_eq!(
            rows[2],
            StateRow {
                path: "C".into(),
                count: 0,
                p50: None,
                p95: None,
                oldest: None
            }
        );
    }

    #[test]
    fn durations_read_short() {
        assert_eq!(duration_text(45.4), "45s");
        assert_eq!(duration_text(725.0), "12m 5s");
        assert_eq!(duration_text(12_000.0), "3h 20m");
        assert_eq!(duration_text(187_200.0), "2d 4h");
        assert_eq!(duration_text(-3.0), "0s");
    }

    #[test]
    fn a_listed_execution_that_moved_on_is_left_out() {
        let mut exe = Execution::new("e", "M");
        exe.active_path = Some("A".into());
        exe.status = Status::Running;
        let listed = entry("e", "A", 1.0);
        assert!(still_in(&exe, &listed, None, false));
        assert!(!still_in(&exe, &listed, Some(Status::Failed), false));
        exe.active_path = Some("B".into());
        assert!(
            !still_in(&exe, &listed, None, false),
            "the index lagged: it is in B now"
        );
        exe.active_path = Some("A".into());
        exe.status = Status::Done;
        assert!(!still_in(&exe, &listed, None, false));
        exe.status = Status::Running;
        exe.parent_id = Some("p".into());
        assert!(!still_in(&exe, &listed, None, true), "not a root");
    }
}
