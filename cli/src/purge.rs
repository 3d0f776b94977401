//! `stm purge`: delete finished execution trees older than an age, optionally archived to a
//! JSONL file first (harel 0.9.0's `harel purge`, same flags, same report lines, same exit
//! codes). The deletion itself is `stm_runtime::purge`.

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, ValueEnum};
use stm_core::Status;
use stm_runtime::purge::{self, JsonlArchive, Progress, PurgeOptions};

use crate::errors::usage;
use crate::ops::Tables;

/// A status a purge may select.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PurgeStatus {
    Done,
    Cancelled,
}

/// Permanently delete finished execution trees (every member DONE or CANCELLED)
/// that finished more than an age ago, each archived first with --archive. Runs under
/// the template's PurgePolicy. `-v` lists the purged roots.
#[derive(Args, Debug, Clone)]
pub struct PurgeArgs {
    /// Finished at least this long ago: 30d, 12h, 90m, 45s, 2w (or plain seconds).
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub older_than: f64,
    /// Only roots in this status (repeatable; default: both).
    #[arg(long, value_enum)]
    pub status: Vec<PurgeStatus>,
    /// Append each tree to this JSONL file (fsynced) before deleting it.
    #[arg(long, value_name = "PATH")]
    pub archive: Option<PathBuf>,
    /// Report what would be purged, delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Purge at most N trees.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Also purge finished roots with no finished_at (written before it was recorded).
    #[arg(long)]
    pub include_undated: bool,
    #[command(flatten)]
    pub tables: Tables,
}

/// An age like `30d`, `12h`, `90m`, `45s`, `2w` or plain seconds, in seconds (harel's).
pub fn parse_age(text: &str) -> Result<f64, String> {
    let invalid = || format!("invalid age '{text}' (e.g. 30d, 12h, 90m, 45s)");
    let trimmed = text.trim();
    let (number, unit) = match trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&trimmed[..i], trimmed[i..].trim()),
        None => (trimmed, ""),
    };
    let well_formed = !number.is_empty()
        && !number.starts_with('.')
        && !number.ends_with('.')
        && number.matches('.').count() <= 1;
    let seconds_per = match unit {
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "w" => 604800.0,
        _ => return Err(invalid()),
    };
    match number.parse::<f64>() {
        Ok(n) if well_formed && n.is_finite() => Ok(n * seconds_per),
        _ => Err(invalid()),
    }
}

/// `stm purge`, as the template's purger function.
pub fn run(args: PurgeArgs, verbose: bool) -> Result<ExitCode> {
    crate::role::run_as("purger", purge_trees(args, verbose))
}

/// Run `stm purge`: exit 0, or 1 when any root was refused (each said on stderr).
/// `verbose` (the global `-v`, as harel's `purge -v`) also lists the purged root ids.
async fn purge_trees(args: PurgeArgs, verbose: bool) -> Result<ExitCode> {
    if args.limit == Some(0) {
        return Err(usage("--limit must be at least 1"));
    }
    let statuses = if args.status.is_empty() {
        purge::PURGEABLE.to_vec()
    } else {
        args.status
            .iter()
            .map(|s| match s {
                PurgeStatus::Done => Status::Done,
                PurgeStatus::Cancelled => Status::Cancelled,
            })
            .collect()
    };
    // the archive is opened before anything is read: an unwritable path deletes nothing
    let mut archive = args.archive.as_ref().map(JsonlArchive::open).transpose()?;
    let store = args.tables.store(false).await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let options = PurgeOptions {
        older_than: args.older_than,
        statuses,
        include_undated: args.include_undated,
        limit: args.limit,
        dry_run: args.dry_run,
        now,
    };
    let interactive = std::io::stderr().is_terminal();
    let mut ids = Vec::new();
    let verb = if args.dry_run { "would purge" } else { "purged" };
    let mut on_progress = |step: Progress<'_>| match step {
        Progress::Purged(id) if verbose => ids.push(id.to_string()),
        Progress::Page { examined, purged } if interactive => {
            eprint!("\r{verb} {purged} trees; {examined} finished roots examined");
            let _ = std::io::stderr().flush();
        }
        _ => {}
    };
    let result = purge::purge_finished(
        store.as_ref(),
        &options,
        archive.as_mut().map(|a| a as &mut dyn purge::Archive),
        &mut on_progress,
    )
    .await;
    if interactive {
        eprint!("\r\x1b[K");
    }
    let report = result?;
    println!("{verb}: {}", report.purged);
    for id in &ids {
        println!("  {id}");
    }
    if report.skipped_undated > 0 {
        println!(
            "skipped (no finished_at; see --include-undated): {}",
            report.skipped_undated
        );
    }
    for (root_id, reason) in &report.refused {
        eprintln!("refused {root_id}: {reason}");
    }
    Ok(if report.refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::parse_age;

    #[test]
    fn ages_read_as_harel_reads_them() {
        for (text, seconds) in [
            ("30d", 2_592_000.0),
            ("12h", 43_200.0),
            ("90m", 5_400.0),
            ("45s", 45.0),
            ("2w", 1_209_600.0),
            ("10", 10.0),
            (" 1.5 h ", 5_400.0),
            ("0", 0.0),
        ] {
            assert_eq!(parse_age(text), Ok(seconds), "{text}");
        }
        for bad in ["", "d", "30x", "-1d", "1.d", ".5h", "1..2s", "3dd", "1e3"] {
            let err = parse_age(bad).expect_err(bad);
            assert!(err.contains("invalid age") && err.contains("30d"), "{bad}: {err}");
        }
    }
}
