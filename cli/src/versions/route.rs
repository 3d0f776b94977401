//! `stm versions route MACHINE --to VERSION --weight N`: route a share of a machine's new
//! executions to a deployed version (a canary), promote it (`--weight 100`) or stop it
//! (`--weight 0`); without `--to`, show the route. A canary or a promotion is gated first:
//! the static check from the version it shares with or replaces, and the replay of the
//! recorded executions on it; either refuses unless `--accept-risk`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;
use stm_core::version::{diff::diff, Version};
use stm_runtime::Definitions;
use stm_store::route::{Canary, Route, ALIAS};
use stm_store::ExecutionStore;

use crate::errors::usage;

/// The most recorded executions the gate replays.
const GATE_REPLAYS: usize = 1_000;

/// Route the new executions of MACHINE (its alias `live`) between two deployed versions:
/// WEIGHT percent to --to, the rest to the version it serves now. `--weight 100`
/// promotes --to, `--weight 0` stops the canary. Without --to, show the route.
#[derive(Args)]
pub struct RouteArgs {
    /// The machine.
    machine: String,
    /// The version to route to: its 16 hex digits or its frozen label.
    #[arg(long, value_name = "VERSION|LABEL", requires = "weight")]
    to: Option<String>,
    /// Percent of new executions --to takes, 0 to 100.
    #[arg(long, value_name = "0-100", value_parser = clap::value_parser!(u8).range(0..=100), requires = "to")]
    weight: Option<u8>,
    /// The version the rest go to (default: the one the alias serves now, else the
    /// current version).
    #[arg(long, value_name = "VERSION|LABEL")]
    from: Option<String>,
    /// Route even when the static check puts states at risk or a recorded execution
    /// would go otherwise on --to.
    #[arg(long)]
    accept_risk: bool,
    /// The folder of .stm files the deployment runs, with its versions/.
    #[arg(long, env = stm_env::DEFINITIONS_DIR, value_name = "DIR")]
    definitions: PathBuf,
    #[command(flatten)]
    tables: crate::ops::Tables,
}

/// `stm versions route`.
pub fn run(args: RouteArgs) -> Result<ExitCode> {
    let definitions = stm_runtime::config::load_definitions_dir(&args.definitions)?;
    let Some(current) = definitions.get(&args.machine).map(|d| d.version) else {
        bail!(usage(format!(
            "no machine named {:?} in {}",
            args.machine,
            args.definitions.display()
        )));
    };
    let current = current.ok_or_else(|| anyhow::anyhow!("{} has no version", args.machine))?;
    crate::role::operate(async move { route(&args, &definitions, current).await })
}

async fn route(args: &RouteArgs, definitions: &Definitions, current: Version) -> Result<()> {
    let store = args.tables.open(false).await?;
    let routes = store.routes().await?;
    let serving = routes.get(&args.machine).map_or(current, |r| r.primary);
    let (Some(to), Some(weight)) = (&args.to, args.weight) else {
        println!(
            "{}",
            crate::routing::shown(&args.machine, routes.get(&args.machine), current, definitions)
        );
        return Ok(());
    };
    let to = version_named(definitions, &args.machine, to)?;
    let primary = match &args.from {
        Some(from) => version_named(definitions, &args.machine, from)?,
        None => serving,
    };
    let now = stm_runtime::Clock::now(&stm_runtime::SystemClock);
    let route = match weight {
        0 => Route::to(primary),
        // a promotion is gated as a canary is: it may not have been one
        100 if to != primary => {
            gate(args, definitions, primary, to).await?;
            Route::to(to)
        }
        100 => Route::to(to),
        _ if to == primary => bail!(usage(format!(
            "{to} is already what {ALIAS} serves for {}: a canary needs another version (--from \
             names the one the rest go to)",
            args.machine
        ))),
        _ => {
            gate(args, definitions, primary, to).await?;
            Route {
                primary,
                canary: Some(Canary {
                    version: to,
                    weight,
                    since: now,
                    window_seconds: None,
                }),
                rolled_back: None,
            }
        }
    };
    let mut next = routes.clone();
    next.machines.insert(args.machine.clone(), route);
    if !store.put_routes(&next, routes.generation).await? {
        bail!(
            "the routes changed while this command ran (another operator, or a rollback): \
             nothing was written; run it again"
        );
    }
    println!(
        "{}",
        crate::routing::shown(&args.machine, next.get(&args.machine), current, definitions)
    );
    Ok(())
}

/// Refuse `to` beside `primary` when the static check puts states at risk, or a recorded
/// execution would go otherwise on `to`, unless `--accept-risk`.
async fn gate(args: &RouteArgs, definitions: &Definitions, primary: Version, to: Version) -> Result<()> {
    let machine = &args.machine;
    let (Some(old), Some(new)) = (
        definitions.get_version(machine, primary),
        definitions.get_version(machine, to),
    ) else {
        bail!("{machine}: {primary} or {to} is not deployed");
    };
    let report = diff(old, new);
    let mut refusals = Vec::new();
    if report.at_risk() {
        print!("{report}");
        refusals.push(format!(
            "the static check from {primary} puts states at risk (above)"
        ));
    }
    let (read, replayed, differ) =
        super::replay::replay_machine(&args.tables, (**new).clone(), GATE_REPLAYS).await?;
    if differ > 0 {
        refusals.push(format!(
            "{} of {replayed} recorded executions of {machine} would go otherwise on {to} (above)",
            differ
        ));
    } else if replayed == 0 {
        println!(
            "no recorded execution of {machine} to replay on {to} ({read} read): only the static \
             check gated it"
        );
    } else {
        println!("{replayed} recorded executions of {machine} replay the same on {to}");
    }
    if refusals.is_empty() || args.accept_risk {
        if !refusals.is_empty() {
            println!("routing anyway (--accept-risk): {}", refusals.join("; "));
        }
        return Ok(());
    }
    bail!(usage(format!(
        "not routed: {}. Route it anyway with --accept-risk",
        refusals.join("; ")
    )))
}

/// A version of `machine` these definitions hold, by its hex digits or its label.
fn version_named(definitions: &Definitions, machine: &str, text: &str) -> Result<Version> {
    let held: Vec<Version> = definitions
        .versions_of(machine)
        .filter_map(|d| d.version)
        .collect();
    let found = match text.parse::<Version>() {
        Ok(v) => held.iter().copied().find(|h| *h == v),
        Err(_) => held.iter().copied().find(|h| definitions.label(*h) == Some(text)),
    };
    found.ok_or_else(|| {
        let mut known: Vec<String> = held
            .iter()
            .map(|v| match definitions.label(*v) {
                Some(label) => format!("{v} ({label})"),
                None => v.to_string(),
            })
            .collect();
        known.sort();
        usage(format!(
            "{text:?} is not a deployed version of {machine}: the definitions hold {} (`stm \
             versions freeze DIR --label NAME` keeps the current one)",
            known.join(", ")
        ))
    })
}
