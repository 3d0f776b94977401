//! What can be wrong with a process's configuration: its environment, its definitions,
//! its action bindings, the deployment it joins. Each variant keeps what a caller may act
//! on (the variable, the file and the parse error's line and column) and the error it came
//! from as its `source`.

use std::path::PathBuf;

use crate::actions::UnboundActions;
use crate::remote::RemoteError;

/// A configuration problem: the cold start (or `stm local`) stops with it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required variable is unset.
    #[error("{name} is required ({what})")]
    Missing { name: &'static str, what: &'static str },
    /// A variable's value is not one the process takes.
    #[error("{name}={value:?}: {why}")]
    Invalid {
        name: &'static str,
        value: String,
        why: &'static str,
    },
    /// A rollout setting that cannot be used ([`crate::rollout::RolloutPolicy`]).
    #[error(transparent)]
    Rollout(#[from] crate::rollout::PolicyError),
    /// Remote actions that cannot be offered: an `STM_ACTIONS` binding that does not
    /// parse, or their client that cannot start.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The definitions directory cannot be read.
    #[error("cannot read the definitions directory {}: {source}", dir.display())]
    DefinitionsDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The definitions directory holds no `*.stm` machine.
    #[error("no machine found in {}/*.stm", dir.display())]
    NoMachines { dir: PathBuf },
    /// A `.stm` file that does not parse: `source` has the file, line and column.
    #[error("invalid definition file {}:\n{source}", file.display())]
    Definition {
        file: PathBuf,
        #[source]
        source: Box<stm_core::dsl::DslError>,
    },
    /// A machine that parses but breaks the validator's rules: each finding as `stm
    /// validate` shows it (`error[code]: …`, `--> file:line:col`, the line and a caret).
    #[error("{}: machine {machine} is not valid:\n{}", file.display(), findings.join("\n"))]
    InvalidMachine {
        file: PathBuf,
        machine: String,
        findings: Vec<String>,
    },
    /// A retained version (`versions/*.json`) that cannot be read back as it was frozen.
    #[error("retained version {}: {source}", file.display())]
    FrozenVersion {
        file: PathBuf,
        #[source]
        source: stm_core::version::FrozenError,
    },
    /// A retained version's file that cannot be read.
    #[error("cannot read the retained version {}: {source}", file.display())]
    FrozenUnreadable {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A retained version whose file name is not what it holds (renamed by hand).
    #[error("retained version {}: it holds {expected}: name the file {expected}, as `stm versions freeze` does", file.display())]
    FrozenName { file: PathBuf, expected: String },
    /// Actions a machine calls that nothing provides.
    #[error(transparent)]
    Unbound(#[from] UnboundActions),
    /// The deployment does not fit: a doorbell queue that cannot be created. (The event
    /// queue's own misfits are `QueueError`s.)
    #[error("{message}")]
    Deployment {
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}
