//! `stm versions replay NEW --from-traces store|FILE`: the recorded traces of live and
//! finished executions replayed on a new version, each execution on its own with its own
//! recorded events; every one whose path, actions, context or outcome would differ is
//! named with its first differing step and both sides. `stm versions check` reads the
//! definitions; this reads the traffic.

mod compare;
mod traces;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;

use crate::errors::usage;
use crate::plural::count;
use compare::{Replayer, Verdict};
use traces::{Recorded, Selection};

/// The `--from-traces` value that names the deployment's trace table.
const STORE: &str = "store";

/// Replay recorded executions on NEW: each one's events, at their recorded times,
/// through NEW's machine, compared step by step with what was recorded. Names every
/// execution that would go otherwise, at its first differing step. Exit 1 when any
/// would, 2 when nothing could be replayed.
#[derive(Args)]
pub struct ReplayArgs {
    /// The new version: a .stm file, a definitions folder or a frozen .json version.
    new: PathBuf,
    /// Where the traces are: `store` (the deployment's tables: --endpoint, --prefix, ...)
    /// or a JSONL file `stm purge --archive` wrote (a file named `store`: `./store`).
    #[arg(long, value_name = "store|FILE")]
    from_traces: String,
    /// Only executions of this machine.
    #[arg(long, value_name = "NAME")]
    definition: Option<String>,
    /// Read at most N executions.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    limit: Option<u64>,
    #[cfg(feature = "aws")]
    #[command(flatten)]
    tables: crate::ops::Tables,
}

/// `stm versions replay`.
pub fn run(args: ReplayArgs) -> Result<ExitCode> {
    let machines = super::side(&args.new)?;
    let names: Vec<String> = machines.iter().map(|d| d.id.clone()).collect();
    let replayer = Replayer::new(machines);
    if let Some(name) = &args.definition {
        if !replayer.has_machine(name) {
            bail!(usage(format!(
                "--definition {name}: no machine named {name:?} in {}",
                args.new.display()
            )));
        }
    }
    let wanted = |id: &str| match &args.definition {
        Some(name) => id == name,
        None => replayer.has_machine(id),
    };
    let selection = Selection {
        wanted: &wanted,
        limit: args.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // the deployment is read as the operator reads it (the template's OperatorPolicy)
    let (recorded, source) = runtime.block_on(stm_aws::as_function("operator", read(&args, &selection)))?;
    let report = runtime.block_on(replay_all(&replayer, &recorded));
    report.conclude(&Scope {
        new: &args.new,
        machines: match &args.definition {
            Some(name) => std::slice::from_ref(name),
            None => &names,
        },
        source: &source,
    })
}

/// The recorded executions `selection` wants, and the name of where they were read.
async fn read(args: &ReplayArgs, selection: &Selection<'_>) -> Result<(Vec<Recorded>, String)> {
    if args.from_traces != STORE {
        let file = Path::new(&args.from_traces);
        return Ok((traces::from_archive(file, selection)?, file.display().to_string()));
    }
    #[cfg(feature = "aws")]
    {
        let recorded = traces::from_store(&args.tables, args.definition.as_deref(), selection).await?;
        Ok((recorded, format!("the tables {}_*", args.tables.prefix)))
    }
    #[cfg(not(feature = "aws"))]
    bail!(usage(
        "--from-traces store reads a deployment, which this stm (built without the `aws` \
         feature) cannot: replay a purge archive (--from-traces FILE), or build it with \
         default features"
    ))
}

/// What replaying a deployment's recorded executions of one machine on `new` found:
/// (read, replayed, differ). Each execution that differs is printed, as `replay` prints
/// it. The gate of `stm versions route`.
#[cfg(feature = "aws")]
pub(super) async fn replay_machine(
    tables: &crate::ops::Tables,
    new: stm_core::Definition,
    limit: usize,
) -> Result<(usize, usize, usize)> {
    let machine = new.id.clone();
    let replayer = Replayer::new(vec![new]);
    let wanted = |id: &str| id == machine;
    let selection = Selection {
        wanted: &wanted,
        limit: Some(limit),
    };
    let recorded = traces::from_store(tables, Some(&machine), &selection).await?;
    let report = replay_all(&replayer, &recorded).await;
    Ok((report.read, report.same + report.differ, report.differ))
}

/// What the replay covered, for its summary and errors.
struct Scope<'a> {
    new: &'a Path,
    /// The machines replayed: --definition's, else NEW's.
    machines: &'a [String],
    source: &'a str,
}

impl Scope<'_> {
    /// `of Order in FILE`, `of Order, Signup in the tables stm_*`.
    fn selected(&self) -> String {
        format!("of {} in {}", self.machines.join(", "), self.source)
    }
}

/// What the replays found.
#[derive(Default)]
struct Report {
    read: usize,
    untraced: usize,
    same: usize,
    differ: usize,
    /// The reason of each execution that could not be replayed, by id.
    cannot: Vec<(String, String)>,
}

/// Replay each recorded execution, printing each one that differs, could not be replayed
/// or was replayed only in part, as it is found.
async fn replay_all(replayer: &Replayer, recorded: &[Recorded]) -> Report {
    let mut report = Report {
        read: recorded.len(),
        ..Report::default()
    };
    for one in recorded {
        if one.steps.is_empty() {
            report.untraced += 1;
            continue;
        }
        let exe = &one.execution;
        let who = format!("{} ({})", exe.id, exe.definition_id);
        match replayer.replay(one).await {
            Verdict::Same { note } => {
                report.same += 1;
                if let Some(note) = note {
                    println!("{who} the same: {note}");
                }
            }
            Verdict::Differs(d) => {
                report.differ += 1;
                println!("{who} differs at step {}, {}:", d.step, d.event);
                for (what, recorded, new) in &d.aspects {
                    println!("  {what}: recorded {recorded}, new {new}");
                }
            }
            Verdict::CannotReplay(why) => {
                println!("{who} not replayed: {why}");
                report.cannot.push((exe.id.clone(), why));
            }
        }
    }
    report
}

impl Report {
    /// The summary line, or the error that ends the command: exit 0 when nothing differs,
    /// 1 when an execution would, 2 when nothing was replayed (a selection that matched
    /// nothing, no trace, or none replayable).
    fn conclude(&self, scope: &Scope<'_>) -> Result<ExitCode> {
        let new = scope.new.display();
        let replayed = self.same + self.differ;
        if self.read == 0 {
            bail!(usage(format!(
                "nothing to replay: no execution {}",
                scope.selected()
            )));
        }
        if replayed == 0 {
            let read = format!("{} {}", count(self.read, "execution"), scope.selected());
            let why = match self.cannot.first() {
                Some((id, why)) if self.untraced == 0 => format!("{read}, none replayable ({id}: {why})"),
                _ => format!(
                    "{read}, none with a trace from its Start (the worker records traces with \
                     STM_TRACE=true; `stm local` does by default)"
                ),
            };
            bail!(usage(format!("nothing to replay: {why}")));
        }
        let mut also = Vec::new();
        if !self.cannot.is_empty() {
            also.push(format!("{} not replayed", count(self.cannot.len(), "execution")));
        }
        if self.untraced > 0 {
            also.push(format!("{} without a trace", count(self.untraced, "execution")));
        }
        let also = if also.is_empty() {
            String::new()
        } else {
            format!(" ({})", also.join(", "))
        };
        if self.differ > 0 {
            bail!(
                "{} of {} replayed would differ on {new}{also}",
                self.differ,
                count(replayed, "execution")
            );
        }
        println!(
            "replayed {} on {new}: no difference{also}",
            count(replayed, "execution")
        );
        Ok(ExitCode::SUCCESS)
    }
}
