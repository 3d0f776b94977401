//! The `worker` Lambda function: SQS FIFO batches -> statechart steps
//! ([`stm_lambda::run_worker`]). A project's own worker is this file with its actions.

use stm_runtime::ActionRegistry;

/// The actions this deployment's machines call, by the names the `.stm` files bind:
/// harel's built-ins here; `STM_ACTIONS` binds remote ones.
fn actions() -> ActionRegistry {
    ActionRegistry::with_builtins()
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stm_lambda::run_worker(actions()).await
}
