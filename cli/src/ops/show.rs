//! What reads executions back: `stm show` (one, with its children as a tree), `stm list`
//! (the deployment's, filtered) and `stm trace` (one's timeline, its regions' steps
//! merged in).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;
use serde_json::Value;
use stm_core::{Execution, Status};
use stm_runtime::Definitions;
use stm_store::{ExecutionStore, ListQuery};

use super::{load, opt, Tables};
use crate::errors::usage;
use crate::inspect::TraceExplainer;
use crate::inspect::{MAX_PARKED_SHOWN, MAX_TREE_NODES};

/// An execution: status, active path, context, and its children as a tree.
#[derive(Args)]
pub struct ShowArgs {
    /// The execution.
    id: String,
    /// The stored JSON instead.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tables: Tables,
}

/// An execution's trace as a timeline (recorded when the worker runs with
/// STM_TRACE=true; `stm local` records it by default).
#[derive(Args)]
pub struct TraceArgs {
    /// The execution.
    id: String,
    /// Under each step, every transition its event's kind triggers, in the order the
    /// engine considers them, with its guard's value and why it was or was not taken
    /// (recomputed from the state the step started in; needs --definitions).
    #[arg(long)]
    explain: bool,
    /// The span tree instead: the steps of the execution, its regions and the children it
    /// spawned, each under the step that sent its message (the spans a collector would
    /// show, from the recorded steps alone).
    #[arg(long, conflicts_with = "explain")]
    spans: bool,
    /// The folder of .stm files the deployment runs (and their versions/), for --explain.
    #[arg(long, env = stm_env::DEFINITIONS_DIR, value_name = "DIR")]
    definitions: Option<PathBuf>,
    #[command(flatten)]
    tables: Tables,
}

pub fn show(args: ShowArgs) -> Result<ExitCode> {
    crate::role::operate(async move { show_execution(&args.tables, &args.id, args.json).await })
}

/// `stm list` without a file: the executions, filtered.
pub fn list(
    tables: &Tables,
    status: Option<&str>,
    definition: Option<&str>,
    roots_only: bool,
) -> Result<ExitCode> {
    crate::role::operate(list_executions(tables, status, definition, roots_only))
}

pub fn trace(args: TraceArgs) -> Result<ExitCode> {
    if args.spans {
        return crate::role::operate(async move { print_spans(&args.tables, &args.id).await });
    }
    // the machines first: a wrong folder is said before the deployment is reached
    let definitions = match (args.explain, &args.definitions) {
        (false, _) => None,
        (true, Some(dir)) => Some(stm_runtime::config::load_definitions_dir(dir)?),
        (true, None) => bail!(usage(
            "--explain needs the machines the execution ran: pass --definitions DIR (the folder \
             of .stm files the deployment runs) or set STM_DEFINITIONS_DIR"
        )),
    };
    crate::role::operate(async move { print_trace(&args.tables, &args.id, definitions.as_ref()).await })
}

async fn show_execution(dep: &Tables, id: &str, json: bool) -> Result<()> {
    let store = dep.store(false).await?;
    let exe = load(store.as_ref(), id).await?;
    if json {
        println!("{}", stm_core::pyjson::to_string_pretty(&exe));
        return Ok(());
    }
    let mut lines = Vec::new();
    describe(store.as_ref(), &exe, "", &mut lines).await?;
    if let Some(reason) = cancel_reason(store.as_ref(), &exe).await? {
        lines.insert(1, format!("  cancel reason: {reason}"));
    }
    for line in lines {
        println!("{line}");
    }
    Ok(())
}

/// The data of the `Cancel` a cooperative cancel delivered, from the trace (where the
/// worker records the step with its event data). A forceful cancel delivers no event and,
/// as in harel, keeps no reason: `stm cancel` says so when it happens.
async fn cancel_reason(store: &dyn ExecutionStore, exe: &Execution) -> Result<Option<Value>> {
    if !matches!(exe.status, Status::Cancelled | Status::Cancelling | Status::Done) {
        return Ok(None);
    }
    let steps = store.read_trace(&exe.id).await?;
    Ok(steps
        .iter()
        .rev()
        .find(|step| step.get("event_kind").and_then(Value::as_str) == Some("Cancel"))
        .and_then(|step| step.get("event_data").cloned())
        .filter(|data| data.as_object().is_some_and(|m| !m.is_empty())))
}

/// `exe` and its children as an indented tree.
async fn describe(
    store: &dyn ExecutionStore,
    exe: &Execution,
    indent: &str,
    out: &mut Vec<String>,
) -> Result<()> {
    let mut frontier = vec![(exe.clone(), indent.to_string())];
    while let Some((exe, indent)) = frontier.pop() {
        out.push(format!(
            "{indent}{}  [{}] {}  at {}  outcome {}  (v{})",
            exe.id,
            exe.definition_id,
            exe.status,
            opt(&exe.active_path),
            opt(&exe.outcome),
            exe.version
        ));
        if let Some(error) = &exe.error {
            out.push(format!("{indent}  error: {error}"));
        }
        if !exe.context.is_empty() {
            out.push(format!(
                "{indent}  context: {}",
                Value::Object(exe.context.clone())
            ));
        }
        if !exe.deferred.is_empty() {
            let kinds: Vec<&str> = exe.deferred.iter().map(|e| e.kind.as_str()).collect();
            out.push(format!("{indent}  deferred: {}", kinds.join(", ")));
        }
        if let Some(version) = exe.definition_version {
            out.push(format!("{indent}  machine version: {version}"));
        }
        let parked = stm_store::waiting_on(store, &exe, MAX_PARKED_SHOWN).await?;
        if !parked.is_empty() {
            let kinds: Vec<&str> = parked.iter().map(|e| e.kind.as_str()).collect();
            let why = if exe.status == Status::Suspended {
                "until it is resumed"
            } else {
                "its version is not deployed"
            };
            out.push(format!("{indent}  parked ({why}): {}", kinds.join(", ")));
        }
        let child_indent = format!("{indent}    ");
        let mut children = Vec::new();
        for (cid, cs) in &exe.children {
            match store.load(cid).await? {
                Some(child) => children.push((child, child_indent.clone())),
                None => out.push(format!(
                    "{child_indent}{cid}  (not created yet)  finished {}  outcome {}",
                    cs.finished,
                    opt(&cs.outcome)
                )),
            }
        }
        // pop order: keep the children in declaration order
        frontier.extend(children.into_iter().rev());
    }
    Ok(())
}

/// A `--status` value, or a usage error listing the statuses.
pub(crate) fn status_of(name: &str) -> Result<Status> {
    name.parse::<Status>().map_err(|_| {
        let all: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
        usage(format!(
            "--status {name:?} is not a status: use one of {}",
            all.join(", ")
        ))
    })
}

async fn list_executions(
    dep: &Tables,
    status: Option<&str>,
    definition: Option<&str>,
    roots_only: bool,
) -> Result<()> {
    let store = dep.store(false).await?;
    let status = status.map(status_of).transpose()?;
    let mut query = ListQuery {
        status: status.map(|s| vec![s]),
        definition_id: definition.map(str::to_string),
        roots_only,
        limit: 100,
        cursor: None,
    };
    println!(
        "{:<44} {:<16} {:<10} {:<28} OUTCOME",
        "ID", "DEFINITION", "STATUS", "ACTIVE"
    );
    loop {
        let page = store.list_executions(&query).await?;
        for s in &page.items {
            println!(
                "{:<44} {:<16} {:<10} {:<28} {}",
                s.id,
                s.definition_id,
                s.status.as_str(),
                opt(&s.active_path),
                opt(&s.outcome)
            );
        }
        match page.next_cursor {
            Some(cursor) => query.cursor = Some(cursor),
            None => return Ok(()),
        }
    }
}

/// `stm trace ID --spans`: the span trees of the execution and every execution under it
/// (regions and spawned children, at most [`MAX_TREE_NODES`] of them).
async fn print_spans(dep: &Tables, id: &str) -> Result<()> {
    let store = dep.store(false).await?;
    let root = load(store.as_ref(), id).await?;
    let mut steps: Vec<(String, stm_core::Map)> = Vec::new();
    let mut frontier = vec![root];
    let (mut read, mut left_out) = (0usize, 0usize);
    while let Some(exe) = frontier.pop() {
        for step in store.read_trace(&exe.id).await? {
            steps.push((exe.id.clone(), step));
        }
        for child_id in exe.children.keys() {
            if read == MAX_TREE_NODES {
                left_out += 1;
                continue;
            }
            read += 1;
            // a child whose spawn is still on its way, or that was purged, has no steps
            if let Some(child) = store.load(child_id).await? {
                frontier.push(child);
            }
        }
    }
    let (lines, unplaced) = crate::inspect::span_tree(&steps);
    if lines.is_empty() {
        bail!(
            "{id} has no trace steps with spans: the worker records them when it runs with \
             STM_TRACE=true (`stm local` does by default), and a step recorded before spans \
             were (or by harel) has none"
        );
    }
    for line in lines {
        println!("{line}");
    }
    if unplaced > 0 {
        eprintln!(
            "{} without a span not shown (recorded before spans were, or by harel): `stm trace {id}` lists them",
            crate::plural::count(unplaced, "step")
        );
    }
    if left_out > 0 {
        eprintln!(
            "{} under {id} not read ({MAX_TREE_NODES} were): `stm trace CHILD_ID --spans` prints one",
            crate::plural::count(left_out, "more execution")
        );
    }
    Ok(())
}

/// `stm trace ID`: the execution's timeline, its regions' steps merged in by time; with
/// `definitions` (`--explain`), each step's explanation under its line.
async fn print_trace(dep: &Tables, id: &str, definitions: Option<&Definitions>) -> Result<()> {
    let store = dep.store(false).await?;
    let exe = load(store.as_ref(), id).await?;
    let own = store.read_trace(id).await?;
    // the regions' steps too: a broadcast is recorded on their traces, not on this one
    // (harel's table layout; see `inspect::timeline`)
    let regions = crate::inspect::region_traces(store.as_ref(), &exe).await?;
    // each trace explained in its own order, as the merged timeline reaches its steps
    let mut explainers: HashMap<Option<String>, TraceExplainer<'_>> = HashMap::new();
    if let Some(definitions) = definitions {
        explainers.insert(None, TraceExplainer::new(definitions, &exe, &own));
        for (region_id, records) in &regions.traces {
            if let Some(region) = regions.regions.iter().find(|r| &r.id == region_id) {
                let explainer = TraceExplainer::new(definitions, region, records);
                explainers.insert(Some(region_id.clone()), explainer);
            }
        }
    }
    let steps = crate::inspect::timeline(own, regions.traces);
    if steps.is_empty() {
        bail!(
            "{id} ({}, v{}) has no trace steps: the worker records them when it runs with \
             STM_TRACE=true (`stm local` does by default)",
            exe.status,
            exe.version
        );
    }
    let first = steps
        .first()
        .and_then(|s| s.record.get("timestamp"))
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    for step in &steps {
        println!("{}", crate::inspect::trace_line(step, first));
        if let Some(explainer) = explainers.get_mut(&step.region) {
            print!("{}", explainer.explain(&step.record));
        }
    }
    if regions.left_out > 0 {
        eprintln!(
            "{} of {id} not shown: `stm show {id}` lists them, `stm trace REGION_ID` prints one",
            crate::plural::count(regions.left_out, "more region")
        );
    }
    Ok(())
}
