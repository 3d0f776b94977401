//! `stm list`: with FILE, what a `.stm` file declares ([`crate::machine::list_file`]);
//! with the `aws` feature and no FILE, the executions of the deployment
//! ([`crate::ops::list`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

/// The machines, fragments and events a .stm file declares.
#[cfg(not(feature = "aws"))]
#[derive(Args)]
pub struct ListArgs {
    /// The .stm file.
    file: PathBuf,
}

/// With FILE: the machines, fragments and events it declares. Without: the
/// executions of the deployment.
#[cfg(feature = "aws")]
#[derive(Args)]
pub struct ListArgs {
    /// A .stm file: list what it declares instead of executions.
    file: Option<PathBuf>,
    /// Only executions with this status (PENDING, RUNNING, SUSPENDED, CANCELLING,
    /// CANCELLED, FAILED, DONE).
    #[arg(long)]
    status: Option<String>,
    /// Only executions of this machine.
    #[arg(long, value_name = "NAME")]
    definition: Option<String>,
    /// Only root executions (no regions or invoked children).
    #[arg(long)]
    roots: bool,
    /// Only executions in this state or under it (`Payment`, `Payment.Charging`), oldest
    /// in it first, from the state index; needs --definition and --definitions.
    #[arg(long = "in", value_name = "STATE")]
    in_state: Option<String>,
    /// With --in: only those that have been in their state for longer than AGE
    /// (30d, 12h, 90m, 45s).
    #[arg(long, value_name = "AGE", value_parser = crate::purge::parse_age, requires = "in_state")]
    older_than: Option<f64>,
    /// With --in: the folder of .stm files that declares the machine.
    #[arg(long, env = stm_env::DEFINITIONS_DIR, value_name = "DIR")]
    definitions: Option<PathBuf>,
    #[command(flatten)]
    tables: crate::ops::Tables,
}

#[cfg(not(feature = "aws"))]
pub fn list(args: ListArgs) -> Result<ExitCode> {
    crate::machine::list_file(&args.file)
}

/// A FILE's declarations, else the deployment's executions (the filters are theirs: with
/// a FILE they are not read).
#[cfg(feature = "aws")]
pub fn list(args: ListArgs) -> Result<ExitCode> {
    match args.file {
        Some(file) => crate::machine::list_file(&file),
        None if args.in_state.is_some() => {
            let status = args.status.as_deref().map(crate::ops::status_of).transpose()?;
            crate::role::run_as(
                "operator",
                crate::ops::list_in_state(crate::ops::InStateQuery {
                    tables: &args.tables,
                    definitions: args.definitions.as_deref(),
                    machine: args.definition.as_deref(),
                    state: args.in_state.as_deref().unwrap_or_default(),
                    older_than: args.older_than,
                    status,
                    roots_only: args.roots,
                }),
            )
        }
        None => crate::ops::list(
            &args.tables,
            args.status.as_deref(),
            args.definition.as_deref(),
            args.roots,
        ),
    }
}
