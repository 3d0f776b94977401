//! `stm versions`: freeze the machines a deploy retains, check what a new version puts at
//! risk, replay recorded traffic on it (`replay.rs`), and (against a deployment) list the
//! versions live executions are pinned to.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use stm_core::version::diff::{diff, Report};
use stm_core::version::{frozen_file_name, FrozenVersion, VERSIONS_DIR};
use stm_core::Definition;

use crate::errors::usage;
use crate::stm_files::{self, Depth};

mod replay;
#[cfg(feature = "aws")]
mod route;

/// Definition versions: freeze the ones a deploy retains, check what a new one puts
/// at risk, replay the recorded traffic on it, see which ones live executions are pinned to.
#[derive(Args)]
pub struct VersionsArgs {
    #[command(subcommand)]
    command: VersionsCommand,
}

#[derive(Subcommand)]
enum VersionsCommand {
    /// Keep the current version of every machine of DIR (its *.stm files) deployable:
    /// write each, compiled, to DIR/versions/MACHINE@VERSION.json. Executions pinned to
    /// a retained version go on stepping on it after the .stm files change.
    Freeze {
        /// The definitions folder (what the worker's STM_DEFINITIONS_DIR holds).
        dir: PathBuf,
        /// A name shown beside the versions frozen now (`v2`, a release tag).
        #[arg(long)]
        label: Option<String>,
    },
    /// What changes from OLD to NEW, per machine, each line safe or at risk for an
    /// execution that sits where it applies. Exit 1 when anything is at risk.
    Check {
        /// The old version: a .stm file, a definitions folder or a frozen .json version.
        old: PathBuf,
        /// The new version, as OLD.
        new: PathBuf,
        /// Only this machine.
        name: Option<String>,
    },
    Replay(replay::ReplayArgs),
    #[cfg(feature = "aws")]
    Route(route::RouteArgs),
    /// The versions executions are pinned to, with live counts by active state, which
    /// of them sit in states the current version puts at risk, the finished ones and how
    /// many FAILED; then where each routed machine's new executions go.
    #[cfg(feature = "aws")]
    InUse {
        /// The definitions folder the deployment runs (its .stm files and versions/).
        #[arg(long, env = stm_env::DEFINITIONS_DIR, value_name = "DIR")]
        definitions: PathBuf,
        #[command(flatten)]
        tables: crate::ops::Tables,
    },
}

pub fn run(args: VersionsArgs) -> Result<ExitCode> {
    match args.command {
        VersionsCommand::Freeze { dir, label } => freeze(&dir, label),
        VersionsCommand::Check { old, new, name } => check(&old, &new, name.as_deref()),
        VersionsCommand::Replay(args) => replay::run(args),
        #[cfg(feature = "aws")]
        VersionsCommand::Route(args) => route::run(args),
        #[cfg(feature = "aws")]
        VersionsCommand::InUse { definitions, tables } => {
            crate::role::operate(async move { in_use::report(&definitions, &tables).await })
        }
    }
}

/// `stm versions freeze DIR`.
fn freeze(dir: &Path, label: Option<String>) -> Result<ExitCode> {
    let files = stm_files_in(dir)?;
    let target = dir.join(VERSIONS_DIR);
    std::fs::create_dir_all(&target)
        .map_err(|e| usage(format!("cannot create {}: {e}", target.display())))?;
    for file in &files {
        for defn in stm_runtime::config::load_file(file)? {
            let mut frozen = FrozenVersion::new(&defn, label.clone());
            // the file's name, not this machine's path to it: the same version freezes
            // to the same bytes wherever it is frozen
            frozen.frozen_from = file.file_name().map(|n| n.to_string_lossy().into_owned());
            let name = frozen_file_name(&frozen.machine, frozen.version);
            let path = target.join(&name);
            if path.exists() {
                println!(
                    "{} {}: already in {VERSIONS_DIR}/",
                    frozen.machine, frozen.version
                );
                continue;
            }
            std::fs::write(&path, frozen.to_text())
                .map_err(|e| usage(format!("cannot write {}: {e}", path.display())))?;
            println!(
                "froze {} {}{} -> {VERSIONS_DIR}/{name}",
                frozen.machine,
                frozen.version,
                frozen
                    .label
                    .as_deref()
                    .map(|l| format!(" ({l})"))
                    .unwrap_or_default()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The `*.stm` files directly in `dir`, sorted (what the worker loads).
fn stm_files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let files = stm_files::in_dir(dir, Depth::Top)?;
    if files.is_empty() {
        bail!(usage(format!("no .stm file in {}", dir.display())));
    }
    Ok(files)
}

/// The machines one side of a check names: a `.stm` file's, a folder's `.stm` files'
/// (its current versions), or one frozen version.
fn side(path: &Path) -> Result<Vec<Definition>> {
    if path.is_dir() {
        let mut out = Vec::new();
        for file in stm_files_in(path)? {
            out.extend(load_all(&file)?);
        }
        return Ok(out);
    }
    if !path.exists() {
        bail!(usage(format!("no such file or directory: {}", path.display())));
    }
    if path.extension().is_some_and(|x| x == "json") {
        return Ok(vec![stm_runtime::config::load_frozen(path)?.definition]);
    }
    load_all(path)
}

fn load_all(file: &Path) -> Result<Vec<Definition>> {
    stm_core::dsl::load_all_file(file)
        .map_err(|e| anyhow::Error::new(e.with_file(file.display().to_string())))
}

/// `stm versions check OLD NEW [NAME]`.
fn check(old: &Path, new: &Path, name: Option<&str>) -> Result<ExitCode> {
    let (old, new) = (side(old)?, side(new)?);
    let by_name = |defns: Vec<Definition>| -> BTreeMap<String, Definition> {
        defns
            .into_iter()
            .filter(|d| name.is_none_or(|n| d.id == n))
            .map(|d| (d.id.clone(), d))
            .collect()
    };
    let (old, new) = (by_name(old), by_name(new));
    if old.is_empty() && new.is_empty() {
        bail!(usage(match name {
            Some(name) => format!("no machine named {name:?} on either side"),
            None => "no machine on either side".to_string(),
        }));
    }
    let mut at_risk = false;
    for (id, old_defn) in &old {
        match new.get(id) {
            Some(new_defn) => {
                let report: Report = diff(old_defn, new_defn);
                at_risk |= report.at_risk();
                print!("{report}");
            }
            None => {
                at_risk = true;
                println!("{id}: removed: its executions step on it only while a deploy retains it");
            }
        }
    }
    for id in new.keys().filter(|id| !old.contains_key(*id)) {
        println!("{id}: new machine");
    }
    Ok(if at_risk {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Move an execution, with its region children, to another deployed version of its
/// machine (`stm versions in-use` lists them). Refused, with the reason, when a state
/// it holds is not in that version and no --map covers it.
#[cfg(feature = "aws")]
#[derive(Args)]
pub struct MigrateArgs {
    /// The execution (or --all-at).
    #[arg(required_unless_present = "all_at")]
    id: Option<String>,
    /// The version to move to.
    #[arg(long, value_name = "VERSION")]
    to: stm_core::version::Version,
    /// A state renamed between the versions (repeatable); a composite's covers the
    /// states below it.
    #[arg(long = "map", value_name = "OLD.PATH=NEW.PATH")]
    map: Vec<String>,
    /// Check and print what would move; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Every root execution pinned to this version instead of one ID.
    #[arg(long, value_name = "VERSION", conflicts_with = "id")]
    all_at: Option<stm_core::version::Version>,
    #[command(flatten)]
    deployment: crate::ops::Deployment,
}

/// `stm migrate ID --to VERSION [--map OLD=NEW ...] [--dry-run]`, or `--all-at VERSION`
/// for every root execution pinned to VERSION, a page of 100 at a time.
#[cfg(feature = "aws")]
pub fn migrate(args: MigrateArgs) -> Result<ExitCode> {
    crate::role::operate(migrate_executions(args))
}

#[cfg(feature = "aws")]
async fn migrate_executions(args: MigrateArgs) -> Result<()> {
    use stm_runtime::control::PathMap;
    let deployment = &args.deployment;
    use stm_store::{ExecutionStore, ListQuery};
    if deployment.definitions.is_none() {
        bail!(usage(
            "--definitions DIR is required: the deployment's definitions folder, whose .stm files and \
             versions/ hold the version to migrate to"
        ));
    }
    let mut map = PathMap::new();
    for spec in &args.map {
        let (old, new) = PathMap::parse_entry(spec).map_err(usage)?;
        map = map.with(old, new);
    }
    let connected = deployment.connect(None).await?;
    let verb = if args.dry_run { "would migrate" } else { "migrated" };
    let one = |id: String| {
        let (control, map, to) = (&connected.control, &map, args.to);
        async move {
            let moved = control
                .migrate(&id, to, map, args.dry_run)
                .await
                .map_err(crate::errors::control)?;
            for m in &moved {
                let paths: Vec<String> = m.moved.iter().map(|(o, n)| format!("{o} -> {n}")).collect();
                println!(
                    "{verb} {}: {} -> {}{}",
                    m.execution_id,
                    m.from_version.map_or("unpinned".to_string(), |v| v.to_string()),
                    m.to_version,
                    if paths.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", paths.join(", "))
                    }
                );
            }
            anyhow::Ok(())
        }
    };
    let (Some(from), None) = (&args.all_at, &args.id) else {
        let Some(id) = args.id.clone() else {
            bail!(usage(
                "name the execution (ID), or every one pinned to a version (--all-at VERSION)"
            ));
        };
        return one(id).await;
    };
    let (mut done, mut failed) = (0usize, Vec::new());
    let mut query = ListQuery {
        roots_only: true,
        limit: 100,
        ..ListQuery::default()
    };
    loop {
        let page = connected.store.list_executions(&query).await?;
        let batch: Vec<String> = page
            .items
            .iter()
            .filter(|s| s.definition_version == Some(*from) && !s.status.is_finished())
            .map(|s| s.id.clone())
            .collect();
        for id in batch {
            match one(id.clone()).await {
                Ok(()) => done += 1,
                Err(err) => {
                    println!("not migrated {id}: {err}");
                    failed.push(id);
                }
            }
        }
        println!("progress: {done} {verb}, {} refused", failed.len());
        match page.next_cursor {
            Some(cursor) => query.cursor = Some(cursor),
            None => break,
        }
    }
    if !failed.is_empty() {
        bail!(
            "{} pinned to {from} {} not migrated: {}",
            crate::plural::count(failed.len(), "execution"),
            if failed.len() == 1 { "was" } else { "were" },
            failed.join(", ")
        );
    }
    Ok(())
}

#[cfg(feature = "aws")]
mod in_use {
    use std::collections::BTreeMap;
    use std::path::Path;

    use anyhow::Result;
    use stm_core::version::diff::diff;
    use stm_core::version::Version;
    use stm_core::Status;
    use stm_store::{ExecutionStore, ListQuery};

    use crate::ops::Tables;

    /// Live executions of one (machine, version): by active state, and how many have
    /// events parked.
    #[derive(Default)]
    struct Usage {
        by_state: BTreeMap<String, usize>,
        parked: usize,
        /// Finished executions (DONE, CANCELLED, FAILED) still stored, and how many FAILED.
        finished: usize,
        failed: usize,
    }

    /// `stm versions in-use`.
    pub async fn report(definitions_dir: &Path, tables: &Tables) -> Result<()> {
        let definitions = stm_runtime::config::load_definitions_dir(definitions_dir)?;
        let store = tables.store(false).await?;
        let mut usage: BTreeMap<(String, Option<Version>), Usage> = BTreeMap::new();
        let mut query = ListQuery {
            limit: 100,
            ..ListQuery::default()
        };
        loop {
            let page = store.list_executions(&query).await?;
            for s in &page.items {
                let u = usage
                    .entry((s.definition_id.clone(), s.definition_version))
                    .or_default();
                if s.status.is_finished() || s.status == Status::Failed {
                    u.finished += 1;
                    u.failed += usize::from(s.status == Status::Failed);
                    continue;
                }
                *u.by_state
                    .entry(s.active_path.clone().unwrap_or_else(|| "(not started)".into()))
                    .or_default() += 1;
                u.parked += usize::from(s.parked);
            }
            match page.next_cursor {
                Some(cursor) => query.cursor = Some(cursor),
                None => break,
            }
        }
        if usage.is_empty() {
            println!("no execution");
        }
        for ((machine, version), u) in &usage {
            let total: usize = u.by_state.values().sum();
            let current = definitions.get(machine);
            let pinned = version.and_then(|v| definitions.get_version(machine, v));
            let is_current = current.is_some_and(|c| c.version.is_some() && c.version == *version);
            let status = match (version, pinned) {
                (None, _) => "unpinned: steps on the current version".to_string(),
                (Some(_), _) if is_current => "current".to_string(),
                (Some(v), Some(_)) => match definitions.label(*v) {
                    Some(label) => format!("retained, {label}"),
                    None => "retained".to_string(),
                },
                (Some(_), None) => "NOT DEPLOYED: its events are parked".to_string(),
            };
            // where an execution would be at risk on the current version (a migration,
            // or an unpinned one stepping on it)
            let report = match (pinned.or(current), current) {
                (Some(from), Some(to)) if !is_current => Some(diff(from, to)),
                _ => None,
            };
            let risky: usize = u
                .by_state
                .iter()
                .filter(|(path, _)| report.as_ref().is_some_and(|r| r.is_at_risk_path(path)))
                .map(|(_, n)| n)
                .sum();
            println!(
                "{machine} {} ({status}): {}{}{}{}",
                version.map_or("-".to_string(), |v| v.to_string()),
                crate::plural::count(total, "live execution"),
                if risky > 0 {
                    format!(", {risky} in states the current version puts at risk")
                } else {
                    String::new()
                },
                if u.parked > 0 {
                    format!(
                        ", {} with parked events",
                        crate::plural::count(u.parked, "execution")
                    )
                } else {
                    String::new()
                },
                if u.finished > 0 {
                    format!(
                        "; {} finished, {} FAILED ({})",
                        u.finished,
                        u.failed,
                        crate::routing::percent(&stm_store::Tally {
                            finished: u.finished as u64,
                            failed: u.failed as u64,
                        })
                    )
                } else {
                    String::new()
                }
            );
            for (path, n) in &u.by_state {
                let mark = if report.as_ref().is_some_and(|r| r.is_at_risk_path(path)) {
                    "  at risk"
                } else {
                    ""
                };
                println!("  {n:>6}  {path}{mark}");
            }
        }
        // where new executions go: each routed machine's alias
        for line in crate::routing::lines(store.as_ref(), &definitions).await? {
            println!("{line}");
        }
        Ok(())
    }
}
