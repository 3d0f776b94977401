//! The runtime a deployment command runs on, and the role it takes there.
//!
//! Every call a deployment command makes is the code of one of the template's functions,
//! under that function's policy (`operator`: OperatorPolicy, `purger`: PurgePolicy); the
//! test kit's strict layer checks it under an emulator. `stm ui` and `stm local` serve
//! many tasks and build multi-threaded runtimes of their own.

use std::future::Future;
use std::process::ExitCode;

use anyhow::Result;

/// Run one operator command to completion: exit 0 when it succeeds.
pub fn operate(command: impl Future<Output = Result<()>>) -> Result<ExitCode> {
    run_as(
        "operator",
        async move { command.await.map(|()| ExitCode::SUCCESS) },
    )
}

/// Run `command` to completion as the code of `function`, on a runtime of its own.
pub fn run_as(function: &'static str, command: impl Future<Output = Result<ExitCode>>) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(stm_aws::as_function(function, command))
}
