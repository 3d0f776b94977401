//! The three functions: their handlers over a [`FunctionContext`] built at init, and the
//! `run_*` entry points that build it and serve invocations.

use std::future::Future;
use std::process::ExitCode;

use aws_lambda_events::eventbridge::EventBridgeEvent;
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{service_fn, Diagnostic, LambdaEvent};
use stm_runtime::ActionRegistry;

use crate::context::{DeploymentCheck, Function, FunctionContext};
use crate::error::InitFailed;
use crate::events::{deadline_from_epoch_millis, handle_doorbell_event, handle_sqs_event};
use crate::HandlerError;

/// The worker: SQS FIFO batches to statechart steps, the failed records reported in
/// `batchItemFailures` (map it with `ReportBatchItemFailures`). `actions` are the Rust
/// actions the machines call, beside the `STM_ACTIONS` remote bindings.
///
/// Run by hand as `worker serve-actions [ADDR]` (a Lambda passes no arguments), it
/// serves `actions` over HTTP instead ([`serve_actions`](crate::serve_actions), on
/// `127.0.0.1:9101` by default) and prints the `STM_ACTIONS` line that lets `stm local`
/// call them.
pub async fn run_worker(actions: ActionRegistry) -> ExitCode {
    let mut args = std::env::args().skip(1);
    if let Some(command) = args.next() {
        return serve_actions_command(actions, &command, args.next()).await;
    }
    serve("worker", Function::Worker(actions), |context, check| {
        let worker = context.worker();
        async move {
            let (worker, check) = (&worker, &check);
            lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
                check.passed().await?;
                let response = worker_handler(worker, event).await;
                crate::logs::flush_spans().await;
                Ok::<SqsBatchResponse, Diagnostic>(response)
            }))
            .await
        }
    })
    .await
}

/// `worker serve-actions [ADDR]`; any other argument is refused with what to run.
async fn serve_actions_command(actions: ActionRegistry, command: &str, addr: Option<String>) -> ExitCode {
    if command != "serve-actions" {
        eprintln!(
            "worker: unknown argument {command:?}: run it with no argument under Lambda, or as \
             `worker serve-actions [ADDR]` to serve its actions to `stm local`"
        );
        return ExitCode::from(2);
    }
    let addr = addr.unwrap_or_else(|| DEFAULT_ACTIONS_ADDR.to_string());
    let Ok(socket) = addr.parse() else {
        eprintln!("worker serve-actions: {addr:?} is not an address such as {DEFAULT_ACTIONS_ADDR}");
        return ExitCode::from(2);
    };
    match crate::serve_actions(actions, socket).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("worker serve-actions: cannot serve on {addr}: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Where `worker serve-actions` listens unless told.
pub const DEFAULT_ACTIONS_ADDR: &str = "127.0.0.1:9101";

/// One worker invocation: no record is started with less than one record's reserve left
/// before the invocation's deadline (those left are reported and come back at once).
pub async fn worker_handler(worker: &stm_runtime::Worker, event: LambdaEvent<SqsEvent>) -> SqsBatchResponse {
    let deadline = deadline_from_epoch_millis(event.context.deadline);
    handle_sqs_event(worker, event.payload, deadline).await
}

/// The relay (scheduled): every pending outbox event and spawn intent, in seq order, to
/// the FIFO queue; the safety net behind the worker's inline flush.
pub async fn run_relay() -> ExitCode {
    serve("relay", Function::Relay, |context, check| async move {
        let (context, check) = (&context, &check);
        lambda_runtime::run(service_fn(
            move |event: LambdaEvent<EventBridgeEvent<serde_json::Value>>| async move {
                check.passed().await?;
                let answer = relay_handler(context, event).await;
                crate::logs::flush_spans().await;
                answer.map_err(Diagnostic::from)
            },
        ))
        .await
    })
    .await
}

/// One relay invocation.
pub async fn relay_handler(
    context: &FunctionContext,
    event: LambdaEvent<EventBridgeEvent<serde_json::Value>>,
) -> Result<stm_runtime::RelaySummary, HandlerError> {
    // stop starting reads a few seconds before the invocation's deadline; what is left
    // waits for the next run
    let deadline = deadline_from_epoch_millis(event.context.deadline)
        .map(|d| d.checked_sub(std::time::Duration::from_secs(5)).unwrap_or(d));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    tracing::debug!(schedule = ?event.payload.resources, time = ?event.payload.time, "relay invoked");
    Ok(stm_runtime::relay::scheduled_pass(
        context.store.as_ref(),
        context.queue.as_ref(),
        context
            .status_bus
            .as_deref()
            .map(|b| b as &dyn stm_runtime::status::StatusBus),
        now,
        deadline,
    )
    .await?)
}

/// What invokes the sweeper: an SQS batch of precise-timer doorbells has `Records`, its
/// schedule's event does not.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
pub enum SweeperTrigger {
    Doorbells(SqsEvent),
    Schedule(Box<EventBridgeEvent<serde_json::Value>>),
}

/// The sweeper: on its schedule, every due timer becomes a `Timeout` on its execution's
/// group and is deleted if its `fire_at` is unchanged; on a doorbell, that one timer, if
/// it is still armed with that `fire_at`.
pub async fn run_sweeper() -> ExitCode {
    serve("sweeper", Function::Sweeper, |context, check| async move {
        let (context, check) = (&context, &check);
        lambda_runtime::run(service_fn(move |event: LambdaEvent<SweeperTrigger>| async move {
            check.passed().await?;
            let answer = sweeper_handler(context, event).await;
            crate::logs::flush_spans().await;
            answer.map_err(Diagnostic::from)
        }))
        .await
    })
    .await
}

/// One sweeper invocation: the doorbells' partial-batch response, or the sweep's summary.
pub async fn sweeper_handler(
    context: &FunctionContext,
    event: LambdaEvent<SweeperTrigger>,
) -> Result<serde_json::Value, HandlerError> {
    let clock = context.driver.clock.clone();
    // no store retry starts that could outlast the invocation
    let deadline = deadline_from_epoch_millis(event.context.deadline);
    stm_aws::within_deadline(deadline, async {
        match event.payload {
            SweeperTrigger::Doorbells(batch) => {
                let now = move || clock.now();
                // an early doorbell is re-delayed on its own queue (STM_TIMER_QUEUE_URL)
                let doorbells = context.doorbell.as_ref().map(|d| d.queue());
                let (response, summary) = handle_doorbell_event(
                    context.store.as_ref(),
                    context.queue.as_ref(),
                    &batch,
                    &now,
                    doorbells.as_ref().map(|q| q as &dyn stm_runtime::queue::Queue),
                )
                .await;
                summary.metrics().emit();
                Ok(serde_json::to_value(response)?)
            }
            SweeperTrigger::Schedule(scheduled) => {
                tracing::debug!(schedule = ?scheduled.resources, time = ?scheduled.time, "sweeper invoked");
                let summary = stm_runtime::sweeper::scheduled_sweep(
                    context.store.as_ref(),
                    context.queue.as_ref(),
                    clock.now(),
                    deadline,
                )
                .await?;
                // the canaries' rollbacks (nothing unless the bus counts them)
                let bus = context
                    .status_bus
                    .as_deref()
                    .map(|b| b as &dyn stm_runtime::status::StatusBus);
                let rollouts =
                    stm_runtime::rollout::evaluate_on(context.store.as_ref(), bus, clock.now()).await?;
                let mut answer = serde_json::to_value(summary)?;
                if rollouts.canaries > 0 || rollouts.announced > 0 {
                    answer["rollouts"] = serde_json::to_value(rollouts)?;
                }
                Ok(answer)
            }
        }
    })
    .await
}

/// A function's life: JSON logs, its context from the environment (a failure ends the
/// cold start with the reason, on stderr and in the log), then `run` until the Lambda
/// runtime loop ends.
///
/// The table check is the one part of the init that waits on the network (seven
/// `DescribeTable` round trips), so it runs while the function polls for its first
/// invocation, and every invocation waits for it ([`InitCheck::passed`]) before it
/// touches the store: a missing table fails that invocation, naming the table, with the
/// message a failed cold start had. It cannot go to the Runtime API's `init/error`, which
/// belongs to the Init phase: that phase ends with the first `invocation/next` request.
async fn serve<R, F>(name: &'static str, function: Function, run: R) -> ExitCode
where
    R: FnOnce(FunctionContext, InitCheck) -> F,
    F: Future<Output = Result<(), lambda_runtime::Error>>,
{
    let entered = std::time::SystemTime::now();
    if let Err(err) = crate::logs::init(name) {
        let failed = InitFailed::new(name, err);
        tracing::error!(error = %failed.reason(), "{name} init failed");
        eprintln!("{failed}");
        return ExitCode::FAILURE;
    }
    let (context, check) = match FunctionContext::from_env_checking(function).await {
        Ok(built) => built,
        Err(err) => {
            let failed = InitFailed::new(name, err);
            tracing::error!(error = %failed.reason(), "{name} init failed");
            eprintln!("{failed}");
            return ExitCode::FAILURE;
        }
    };
    // the ends of the init this process measures itself (`lambda-smoke --breakdown` puts
    // them beside its own clock: the exec before, the first poll after)
    tracing::debug!(
        entered_epoch_us = epoch_us(entered),
        polling_epoch_us = epoch_us(std::time::SystemTime::now()),
        "{name} init done; polling"
    );
    match run(context, InitCheck { name, check }).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "the Lambda runtime loop ended");
            ExitCode::FAILURE
        }
    }
}

fn epoch_us(at: std::time::SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// A function's [`DeploymentCheck`], as its invocations wait for it.
struct InitCheck {
    name: &'static str,
    check: DeploymentCheck,
}

impl InitCheck {
    /// `Ok` once the tables passed their check; else the invocation's error, logged as a
    /// failed init is: `{name} init failed: ...`, with the table named.
    async fn passed(&self) -> Result<(), Diagnostic> {
        let started = std::time::Instant::now();
        let result = self.check.passed().await;
        tracing::debug!(
            waited_us = started.elapsed().as_micros() as u64,
            "the invocation waited for the deployment check"
        );
        result.map_err(|err| {
            let name = self.name;
            let failed = InitFailed::new(name, err);
            tracing::error!(error = %failed.reason(), "{name} init failed");
            eprintln!("{failed}");
            Diagnostic::from(failed)
        })
    }
}
