//! The `worker` Lambda function: SQS FIFO batches -> statechart steps.
//!
//! Init (once per cold start): JSON logs, configuration from the environment, the
//! definitions loaded and validated, the DynamoDB and SQS clients. A broken definition
//! or a missing variable fails the cold start with the file, line and reason. Each
//! invocation is [`stm_runtime::Worker::handle_sqs_event_until`] with the invocation's
//! deadline, which reports failed records in `batchItemFailures` (the function must be
//! mapped with `ReportBatchItemFailures`) and starts no record with less than one
//! record's reserve left: one slow record then costs the records behind it a
//! redelivery, not the whole batch a timeout.

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{service_fn, Diagnostic, LambdaEvent};
use stm_runtime::config::FunctionContext;
use stm_runtime::ActionRegistry;

/// The actions this deployment's machines call, by the names the `.stm` files bind.
/// Register your Rust functions here; `STM_ACTIONS` binds remote ones.
fn actions() -> ActionRegistry {
    ActionRegistry::with_builtins()
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stm_runtime::config::init_json_logs();
    let context = match FunctionContext::from_env(Some(actions())).await {
        Ok(context) => context,
        Err(err) => {
            tracing::error!(error = %err, "worker init failed");
            eprintln!("worker init failed: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let worker = &context.worker();
    let handler = service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let deadline = stm_runtime::worker::deadline_from_epoch_millis(event.context.deadline);
        Ok::<SqsBatchResponse, Diagnostic>(worker.handle_sqs_event_until(event.payload, deadline).await)
    });
    match lambda_runtime::run(handler).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "the Lambda runtime loop ended");
            std::process::ExitCode::FAILURE
        }
    }
}
