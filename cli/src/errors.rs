//! What `stm` says when a command fails, and its exit code.
//!
//! One convention for every command (stated in `stm --help`):
//!
//! - `0`: done;
//! - `1`: the command ran and the answer is no: a machine with errors, an execution that
//!   does not exist, a control command with nothing to do, a deployment that refused;
//! - `2`: the command line is wrong: a missing file, bad JSON, an unknown machine or
//!   event kind, a flag's bad value (clap's own usage errors exit 2 too).
//!
//! Each failure is one `error: …` line naming what was wrong and what to do (its causes
//! joined on that line); `-v` lists the causes again, one per line.

use std::process::ExitCode;

use stm_runtime::{ControlError, DriverError};

/// The exit codes and their meaning, as `stm --help` shows them.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  done
  1  the command ran and failed: a machine with errors, a run that ended FAILED, no such
     execution, a control command with nothing to do (already DONE, not SUSPENDED, ...),
     a deployment error
  2  usage: a bad flag or argument, a missing file, bad JSON, an unknown machine or event";

/// The command line is wrong (exit 2).
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A usage error.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Usage(message.into()))
}

/// No execution `id` in the deployment (exit 1).
pub fn no_execution(id: &str) -> anyhow::Error {
    anyhow::anyhow!("no execution {id:?} in this deployment (`stm list` shows them)")
}

/// A deployment the store could not open, in the operator's words (its tables are not
/// there, no credentials were found): what to do, with the store's own failure kept as the
/// source (`-v` shows it). Its message already says what its source is, so [`report`]
/// stops there.
#[cfg(feature = "aws")]
#[derive(Debug)]
pub struct StoreNotOpened {
    message: String,
    source: stm_store::StoreError,
}

#[cfg(feature = "aws")]
impl StoreNotOpened {
    pub fn new(message: String, source: stm_store::StoreError) -> Self {
        StoreNotOpened { message, source }
    }
}

#[cfg(feature = "aws")]
impl std::fmt::Display for StoreNotOpened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(feature = "aws")]
impl std::error::Error for StoreNotOpened {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// A driver failure in the user's terms: no Python exception names, the id or the input
/// named, and usage (exit 2) when what was given is at fault.
pub fn driver(err: DriverError) -> anyhow::Error {
    match err {
        DriverError::UnknownExecution(id) => no_execution(&id),
        DriverError::UnknownDefinition(name) => usage(format!(
            "no machine {name:?} in the definitions (pass --definitions DIR, the folder of its .stm file)"
        )),
        DriverError::Context { .. }
        | DriverError::Event { .. }
        | DriverError::InvalidId(_)
        | DriverError::MessageTooLarge { .. } => usage(err.to_string()),
        other => anyhow::Error::new(other),
    }
}

/// A control-plane failure in the user's terms, as [`driver`] words the driver's: no such
/// execution is exit 1, a `send` of a `Start` is usage.
#[cfg(feature = "aws")]
pub fn control(err: ControlError) -> anyhow::Error {
    match err {
        ControlError::UnknownExecution(id) => no_execution(&id),
        ControlError::Driver(err) => driver(err),
        ControlError::StartRefused => usage(err.to_string()),
        other => anyhow::Error::new(other),
    }
}

/// Print `err` as `stm` prints every failure and give its exit code.
pub fn report(err: &anyhow::Error, verbose: bool) -> ExitCode {
    if let Some(dsl) = err.downcast_ref::<stm_core::dsl::DslError>() {
        // already "error: ..." with its file, line and caret
        eprintln!("{dsl}");
    } else {
        eprintln!("error: {}", one_line(err));
        if verbose {
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
        }
    }
    exit_code(err)
}

/// The message and its causes, joined with `: `, down to the first of stm's own errors:
/// their messages already say what their sources are (an SDK error's code and text, a
/// parse error's line), which `-v` lists one by one.
fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for (i, cause) in err.chain().enumerate() {
        if i > 0 {
            line.push_str(": ");
        }
        if is_configuration(cause) {
            // as a function's failed init words it (stm-lambda's `InitFailed`)
            line.push_str("configuration error: ");
        }
        line.push_str(&cause.to_string());
        if carries_its_causes(cause) {
            break;
        }
    }
    line
}

/// The runtime's configuration errors: the environment, the definitions, the bindings,
/// and an event queue that cannot serve.
fn is_configuration(err: &(dyn std::error::Error + 'static)) -> bool {
    err.is::<stm_runtime::config::ConfigError>()
        || err.is::<stm_runtime::remote::RemoteError>()
        || err
            .downcast_ref::<stm_runtime::queue::QueueError>()
            .is_some_and(|e| e.is_deployment())
}

fn carries_its_causes(err: &(dyn std::error::Error + 'static)) -> bool {
    #[cfg(feature = "aws")]
    if err.is::<StoreNotOpened>() {
        return true;
    }
    // each of stm's errors: a wrapper of another is transparent, or its words already
    // name what it wraps
    err.is::<DriverError>()
        || err.is::<ControlError>()
        || err.is::<stm_runtime::RelayError>()
        || err.is::<stm_runtime::SweepError>()
        || err.is::<stm_runtime::doorbell::DoorbellError>()
        || err.is::<stm_runtime::eventsource::EventSourceError>()
        || err.is::<stm_runtime::remote::RemoteError>()
        || err.is::<stm_store::StoreError>()
        || err.is::<stm_runtime::config::ConfigError>()
        || err.is::<stm_runtime::queue::QueueError>()
}

/// The exit code of a failure: 2 for usage (a machine name the file does not declare
/// included), else 1.
pub fn exit_code(err: &anyhow::Error) -> ExitCode {
    let unknown_machine = err
        .downcast_ref::<stm_core::dsl::DslError>()
        .is_some_and(|e| e.message.starts_with("no machine named"));
    ExitCode::from(if err.downcast_ref::<Usage>().is_some() || unknown_machine {
        2
    } else {
        1
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;
    use stm_runtime::config::ConfigError;

    fn bad_trace_max() -> ConfigError {
        stm_runtime::config::FunctionConfig::from_lookup(|name| match name {
            stm_env::QUEUE_URL => Some("q".into()),
            stm_env::TRACE_MAX => Some("many".into()),
            _ => None,
        })
        .expect_err("refused")
    }

    #[test]
    fn a_configuration_error_reads_as_in_a_cold_start_however_it_arrives() {
        let cold_start = "configuration error: STM_TRACE_MAX=\"many\": expected a whole number";
        // straight from the config module, through `?`
        assert_eq!(one_line(&anyhow::Error::new(bad_trace_max())), cold_start);
        // under a command's context
        let err = Err::<(), _>(bad_trace_max())
            .context("the worker's settings")
            .expect_err("failed");
        assert_eq!(one_line(&err), format!("the worker's settings: {cold_start}"));
    }

    #[cfg(feature = "aws")]
    #[test]
    fn a_control_error_reads_as_the_driver_error_it_relays() {
        let refused = stm_runtime::ControlError::from(DriverError::AlreadyExists("o-1".into()));
        let err = control(refused);
        assert_eq!(one_line(&err), "execution \"o-1\" already exists");
        assert_eq!(err.chain().count(), 1, "-v lists no cause twice");
        let err = control(stm_runtime::ControlError::UnknownExecution("o-2".into()));
        assert!(one_line(&err).starts_with("no execution \"o-2\""), "{err}");
    }

    #[test]
    fn a_queue_call_that_failed_is_not_a_configuration_error() {
        let err = anyhow::Error::new(stm_runtime::queue::QueueError::failed(
            "ReceiveMessage",
            "throttled",
        ));
        assert_eq!(one_line(&err), "ReceiveMessage: throttled");
    }
}
