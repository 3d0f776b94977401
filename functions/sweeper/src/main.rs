//! The `sweeper` Lambda function (scheduled): every due timer becomes a `Timeout` event
//! on its execution's FIFO group, then the timer is deleted (guarded by its `fire_at`).

use aws_lambda_events::eventbridge::EventBridgeEvent;
use lambda_runtime::{service_fn, Diagnostic, LambdaEvent};
use stm_runtime::config::{error_parts, FunctionContext};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stm_runtime::config::init_json_logs();
    let context = match FunctionContext::from_env(None).await {
        Ok(context) => context,
        Err(err) => {
            tracing::error!(error = %err, "sweeper init failed");
            eprintln!("sweeper init failed: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let context = &context;
    let handler = service_fn(
        move |event: LambdaEvent<EventBridgeEvent<serde_json::Value>>| async move {
            let now = context.driver.clock.now();
            let swept = stm_runtime::sweeper::handle_scheduled(
                context.store.as_ref(),
                context.queue.as_ref(),
                &event.payload,
                now,
            );
            swept.await.map_err(|err| {
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
