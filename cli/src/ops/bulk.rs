//! A control command over a selection instead of one id: `stm cancel|suspend|resume|
//! terminate|redrive --definition M [--in STATE] [--status S] [--older-than AGE]`.
//!
//! The selection comes from the state index and each execution is re-read before it is
//! acted on, through the same [`apply_control`] as one id: the control plane's
//! version-checked status change. That makes a run resumable: after a kill or Ctrl-C, the
//! same command again selects what is left, and an execution the first run already changed
//! is either no longer selected or skipped with the reason (`already SUSPENDED`), never
//! changed twice.

use std::collections::BTreeMap;
use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use stm_store::ExecutionStore;

use super::apply::{apply_control, ControlCommand, NothingToDo};
use super::states::{machine, still_in};
use super::Deployment;
use crate::errors::usage;

/// How many ids `--dry-run` prints.
const DRY_RUN_IDS: usize = 10;

/// The executions a control command acts on, instead of one ID: those of a machine in a
/// state (from the state index), each re-read and acted on at a steady pace.
#[derive(Args, Debug, Clone, Default)]
pub struct Selection {
    /// Act on the executions of this machine (with --definitions, or STM_DEFINITIONS_DIR,
    /// to know its states) instead of one ID.
    #[arg(long, value_name = "NAME")]
    pub definition: Option<String>,
    /// Only those in this state or under it (`Payment`); default: every state.
    #[arg(long = "in", value_name = "STATE", requires = "definition")]
    pub in_state: Option<String>,
    /// Only those with this status.
    #[arg(long, value_name = "STATUS", requires = "definition")]
    pub status: Option<String>,
    /// Only those that have been in their state for longer than AGE (30d, 12h, 90m, 45s).
    #[arg(long, value_name = "AGE", value_parser = crate::purge::parse_age, requires = "definition")]
    pub older_than: Option<f64>,
    /// Print how many would be acted on and the first ids, and change nothing.
    #[arg(long, requires = "definition")]
    pub dry_run: bool,
    /// Act without asking (required when stdin is not a terminal).
    #[arg(long, requires = "definition")]
    pub yes: bool,
    /// At most this many executions a second.
    #[arg(
        long,
        value_name = "PER_SECOND",
        default_value_t = 20.0,
        requires = "definition"
    )]
    pub rate: f64,
}

impl Selection {
    /// Whether the command was given a selection rather than an id.
    pub fn is_given(&self) -> bool {
        self.definition.is_some()
    }
}

/// What a bulk run did, for its summary.
#[derive(Debug, Default)]
struct Tally {
    done: usize,
    /// reason -> how many
    skipped: BTreeMap<String, usize>,
    failed: usize,
}

/// Run `command` on every execution `selection` picks from `dep`.
pub async fn run_bulk(dep: &Deployment, selection: &Selection, command: ControlCommand) -> Result<ExitCode> {
    if !(selection.rate.is_finite() && selection.rate > 0.0) {
        return Err(usage(format!(
            "--rate {}: expected executions a second, above 0",
            selection.rate
        )));
    }
    let defn = machine(
        dep.definitions.as_deref(),
        selection.definition.as_deref(),
        "a selection",
    )?;
    let state = selection.in_state.clone();
    let paths = match &state {
        Some(state) => defn.paths_under(state).map_err(|e| usage(e.to_string()))?,
        None => defn.state_paths().map(str::to_string).collect(),
    };
    if let ControlCommand::Redrive(at) = &command {
        // the target must be a state of the machine; the control plane checks the rest
        // (a leaf of each execution's own branch) one by one
        defn.paths_under(at).map_err(|e| usage(format!("--at: {e}")))?;
    }
    let status = selection.status.as_deref().map(super::status_of).transpose()?;
    let connected = dep.connect(None).await?;
    let store = connected.store.as_ref();
    let now = super::states::now();
    let entered_by = selection.older_than.map(|age| now - age);
    let listed = super::states::looked_up(store, &defn.id, &paths, entered_by).await?;
    let place = state
        .as_deref()
        .map_or_else(|| "any state".to_string(), str::to_string);

    // re-read each: the index may trail the table, and the command may have nothing to do
    let mut tally = Tally::default();
    let mut selected = Vec::new();
    for entry in &listed {
        let Some(exe) = store.load(&entry.id).await? else {
            *tally.skipped.entry("gone".into()).or_default() += 1;
            continue;
        };
        if !still_in(&exe, entry, status, false) {
            if status.is_none_or(|s| s == exe.status) {
                *tally
                    .skipped
                    .entry(format!("moved on from {}", entry.path))
                    .or_default() += 1;
            }
            continue;
        }
        match command.no_op(exe.status) {
            Some(why) => *tally.skipped.entry(why).or_default() += 1,
            None => selected.push(exe.id),
        }
    }
    let what = format!(
        "{} execution{} of {} in {place}",
        selected.len(),
        if selected.len() == 1 { "" } else { "s" },
        defn.id
    );
    if selected.is_empty() {
        eprintln!(
            "nothing to {}: no execution of {} in {place}{}",
            command.verb(),
            defn.id,
            skipped_text(&tally, true)
        );
        return Ok(ExitCode::from(1));
    }
    if selection.dry_run {
        println!("would {} {what}{}", command.verb(), skipped_text(&tally, false));
        for id in selected.iter().take(DRY_RUN_IDS) {
            println!("  {id}");
        }
        if selected.len() > DRY_RUN_IDS {
            println!("  ... and {} more", selected.len() - DRY_RUN_IDS);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !selection.yes && !confirmed(&format!("{} {what}?", command.verb()))? {
        eprintln!("nothing done");
        return Ok(ExitCode::from(1));
    }
    let mut pace = tokio::time::interval(Duration::from_secs_f64(1.0 / selection.rate));
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for id in &selected {
        pace.tick().await;
        match apply_control(&connected, id, command.clone()).await {
            Ok(outcome) => {
                tally.done += 1;
                println!("{id}: {outcome}");
            }
            Err(err) => match err.downcast_ref::<NothingToDo>() {
                // changed since it was read (another operator, the worker): skipped
                Some(nothing) => *tally.skipped.entry(nothing.why.clone()).or_default() += 1,
                None => {
                    tally.failed += 1;
                    println!("{id}: failed: {err:#}");
                }
            },
        }
    }
    println!(
        "{}: {} of {} execution{} of {} in {place}{}{}",
        command.past(),
        tally.done,
        selected.len(),
        if selected.len() == 1 { "" } else { "s" },
        defn.id,
        if tally.failed > 0 {
            format!(", {} failed", tally.failed)
        } else {
            String::new()
        },
        skipped_text(&tally, false)
    );
    Ok(if tally.failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `; skipped 2 (1 already SUSPENDED, 1 moved on from A)`, or nothing.
fn skipped_text(tally: &Tally, alone: bool) -> String {
    let total: usize = tally.skipped.values().sum();
    if total == 0 {
        return String::new();
    }
    let reasons: Vec<String> = tally
        .skipped
        .iter()
        .map(|(why, n)| format!("{n} {why}"))
        .collect();
    if alone {
        format!(" needs it ({total} skipped: {})", reasons.join(", "))
    } else {
        format!("; skipped {total} ({})", reasons.join(", "))
    }
}

/// Ask on the terminal; a non-interactive stdin needs `--yes`.
fn confirmed(question: &str) -> Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Err(usage(format!(
            "{question} stdin is not a terminal to confirm on: pass --yes (or --dry-run to see them)"
        )));
    }
    eprint!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}
