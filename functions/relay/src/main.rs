//! The `relay` Lambda function (scheduled): every pending outbox event and spawn intent,
//! in seq order, to the SQS FIFO queue; acked once delivered. The safety net behind the
//! worker's inline flush.

use aws_lambda_events::eventbridge::EventBridgeEvent;
use lambda_runtime::{service_fn, Diagnostic, LambdaEvent};
use stm_runtime::config::{error_parts, FunctionContext};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stm_runtime::config::init_json_logs();
    let context = match FunctionContext::from_env(None).await {
        Ok(context) => context,
        Err(err) => {
            tracing::error!(error = %err, "relay init failed");
            eprintln!("relay init failed: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let context = &context;
    let handler = service_fn(
        move |event: LambdaEvent<EventBridgeEvent<serde_json::Value>>| async move {
            stm_runtime::relay::handle_scheduled(
                context.store.as_ref(),
                context.queue.as_ref(),
                &event.payload,
            )
            .await
            .map_err(|err| {
                let (error_type, error_message) = error_parts(&err);
                Diagnostic {
                    error_type,
                    error_message,
                }
            })
        },
    );
    match lambda_runtime::run(handler).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "the Lambda runtime loop ended");
            std::process::ExitCode::FAILURE
        }
    }
}
