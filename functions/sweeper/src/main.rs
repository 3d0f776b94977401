//! The `sweeper` Lambda function. Two triggers:
//!
//! - its schedule (EventBridge): every due timer becomes a `Timeout` event on its
//!   execution's FIFO group, then the timer is deleted (guarded by its `fire_at`);
//! - the precise-timer doorbell queue (SQS, standard): each doorbell fires its one timer
//!   when due, if it is still armed with that `fire_at` (`stm_runtime::doorbell`).

use aws_lambda_events::eventbridge::EventBridgeEvent;
use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{service_fn, Diagnostic, LambdaEvent};
use stm_runtime::config::{error_parts, FunctionContext};

/// What invokes the sweeper: an SQS batch has `Records`, a scheduled event does not.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Trigger {
    Doorbells(SqsEvent),
    Schedule(Box<EventBridgeEvent<serde_json::Value>>),
}

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
    let handler = service_fn(move |event: LambdaEvent<Trigger>| async move {
        let clock = context.driver.clock.clone();
        match event.payload {
            Trigger::Doorbells(batch) => {
                let now = move || clock.now();
                let (response, summary) = stm_runtime::doorbell::handle_doorbells(
                    context.store.as_ref(),
                    context.queue.as_ref(),
                    &batch,
                    &now,
                )
                .await;
                summary.metrics().emit();
                serde_json::to_value(response).map_err(|e| Diagnostic {
                    error_type: "stm.SerializationError".into(),
                    error_message: e.to_string(),
                })
            }
            Trigger::Schedule(scheduled) => {
                let swept = stm_runtime::sweeper::handle_scheduled(
                    context.store.as_ref(),
                    context.queue.as_ref(),
                    &scheduled,
                    clock.now(),
                )
                .await;
                match swept {
                    Ok(summary) => serde_json::to_value(summary).map_err(|e| Diagnostic {
                        error_type: "stm.SerializationError".into(),
                        error_message: e.to_string(),
                    }),
                    Err(err) => {
                        let (error_type, error_message) = error_parts(&err);
                        Err(Diagnostic {
                            error_type,
                            error_message,
                        })
                    }
                }
            }
        }
    });
    match lambda_runtime::run(handler).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "the Lambda runtime loop ended");
            std::process::ExitCode::FAILURE
        }
    }
}
