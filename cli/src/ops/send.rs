//! `stm create` and `stm send`: a new execution, and an event for one, each checked
//! before anything is written or queued.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;
use stm_core::{Event, Map, Status};
use stm_runtime::{ControlError, DriverError};
use stm_store::ExecutionStore;

use super::{load, opt, Deployment};
use crate::errors::{self, usage};

/// Create an execution of machine NAME from FILE and queue its Start.
#[derive(Args)]
pub struct CreateArgs {
    /// The .stm file that declares the machine.
    file: PathBuf,
    /// The machine.
    name: String,
    /// The initial context, a JSON object.
    #[arg(long, value_name = "JSON")]
    seed: Option<String>,
    /// The execution id (1-128 letters, digits and ASCII punctuation); default: a new
    /// UUID.
    #[arg(long)]
    id: Option<String>,
    #[command(flatten)]
    deployment: Deployment,
}

/// Queue an event for an execution. The worker processes it asynchronously: `--wait`
/// waits for that and prints the new state.
#[derive(Args)]
pub struct SendArgs {
    /// The execution.
    id: String,
    /// The event: KIND or KIND:'{"json": "data"}'.
    #[arg(value_name = "KIND[:JSON]")]
    event: String,
    /// Wait until the event is processed (at most SECS, default 30) and show the state.
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "30")]
    wait: Option<u64>,
    #[command(flatten)]
    deployment: Deployment,
}

/// `stm create`: the seed is read before anything runs.
pub fn create(args: CreateArgs) -> Result<ExitCode> {
    let seed = args
        .seed
        .map(|s| crate::machine::json_object(&s, "--seed"))
        .transpose()?;
    crate::role::operate(async move {
        create_execution(&args.deployment, &args.file, &args.name, seed, args.id.as_deref()).await
    })
}

/// `stm send`: the event is read before anything runs.
pub fn send(args: SendArgs) -> Result<ExitCode> {
    let event = crate::machine::parse_event_spec(&args.event, "")?;
    let wait = args.wait.map(std::time::Duration::from_secs);
    crate::role::operate(async move { send_event(&args.deployment, &args.id, event, wait).await })
}

async fn create_execution(
    dep: &Deployment,
    file: &Path,
    name: &str,
    seed: Option<Map>,
    id: Option<&str>,
) -> Result<()> {
    // before connecting: a missing file, a machine the file lacks or an id SQS refuses as
    // a group id fails here, with nothing written
    crate::machine::load(file, Some(name))?;
    if let Some(id) = id {
        stm_runtime::driver::check_execution_id(id).map_err(errors::driver)?;
    }
    let connected = dep.connect(Some(file)).await?;
    let exe = connected
        .control
        .create(name, seed, id)
        .await
        .map_err(errors::control)?;
    println!("{}", exe.id);
    Ok(())
}

/// The kinds `defn` knows, or a usage error naming them.
fn check_kind(defn: &stm_core::Definition, id: &str, kind: &str) -> Result<()> {
    match crate::machine::unknown_kind(defn, kind) {
        None => Ok(()),
        Some(known) => Err(usage(format!(
            "{id} is a {} and no state of it handles {kind:?} (nothing sent): it knows {known}",
            defn.id
        ))),
    }
}

/// `stm send`: checked against the deployment (the execution exists, its machine knows
/// the kind and the data fits its declaration), then queued; with `wait`, polled until
/// the worker has processed it.
async fn send_event(
    dep: &Deployment,
    id: &str,
    event: Event,
    wait: Option<std::time::Duration>,
) -> Result<()> {
    // before connecting, and for the unchecked send below too: SQS would refuse it
    stm_runtime::driver::check_event_size(id, &event).map_err(errors::driver)?;
    let connected = dep.connect(None).await?;
    let exe = load(connected.store.as_ref(), id).await?;
    match connected.control.driver.definition_for(&exe) {
        Ok(defn) => check_kind(&defn, id, &event.kind)?,
        Err(_) => eprintln!(
            "note: {id}'s machine {} is not in {}: the event kind and data are not checked",
            exe.definition_id,
            dep.definitions
                .as_ref()
                .map_or("the definitions (pass --definitions DIR)".to_string(), |d| d
                    .display()
                    .to_string())
        ),
    }
    match connected.control.send(id, &event).await {
        Ok(()) => {}
        // no definitions here to check the event against: send it as it is
        Err(ControlError::Driver(DriverError::UnknownDefinition(_) | DriverError::Resolve { .. })) => {
            let message = stm_runtime::OutgoingMessage::event(id, &event);
            if let Some(failure) = connected
                .control
                .queue
                .publish_batch(std::slice::from_ref(&message))
                .await
                .first()
            {
                bail!(
                    "the queue refused the event: {} {}",
                    failure.code,
                    failure.message
                );
            }
        }
        Err(other) => return Err(errors::control(other)),
    }
    let Some(wait) = wait else {
        println!(
            "queued {} (event id {}) for {id}: the worker processes it asynchronously \
             (`stm show {id}`, or `stm send --wait` to wait for it)",
            event.kind, event.id
        );
        return Ok(());
    };
    let deadline = std::time::Instant::now() + wait;
    loop {
        if connected.store.is_processed(id, &event.id).await? {
            let exe = load(connected.store.as_ref(), id).await?;
            println!(
                "{id}: {} processed: {} at {}  outcome {}  (v{})",
                event.kind,
                exe.status,
                opt(&exe.active_path),
                opt(&exe.outcome),
                exe.version
            );
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            let exe = load(connected.store.as_ref(), id).await?;
            let why = match exe.status {
                Status::Suspended => format!("{id} is SUSPENDED: its events wait until `stm resume {id}`"),
                Status::Cancelled | Status::Cancelling => {
                    format!("{id} is {}: the worker drops its events", exe.status)
                }
                _ => "is a worker running? (`stm local`, or the deployed worker)".to_string(),
            };
            bail!(
                "{} (event id {}) was queued but not processed within {} s: {why}",
                event.kind,
                event.id,
                wait.as_secs()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Tables;
    use serde_json::Value;

    /// A deployment nothing listens at: a command that got as far as connecting would
    /// fail with a connection error, not with the check's message.
    fn nowhere() -> Deployment {
        Deployment {
            tables: Tables {
                endpoint: Some("http://127.0.0.1:9".into()),
                prefix: "nowhere".into(),
                region: Some("us-east-1".into()),
                profile: None,
                dedupe_marks: stm_store::DedupeMarks::Table,
            },
            queue: "nowhere.fifo".into(),
            definitions: None,
            finished_ttl_days: None,
        }
    }

    #[tokio::test]
    async fn create_refuses_an_id_sqs_would_refuse_before_connecting() {
        let file = stm_testkit::repo_root().join("examples/order.stm");
        let err = create_execution(&nowhere(), &file, "Order", None, Some("a b"))
            .await
            .expect_err("refused");
        let text = err.to_string();
        assert!(
            text.starts_with("execution id \"a b\" is not a valid SQS message group id")
                && text.contains("use 1-128 characters"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn send_refuses_an_event_sqs_could_never_take_before_sending() {
        let mut data = Map::new();
        data.insert(
            "blob".into(),
            Value::from("x".repeat(stm_runtime::queue::MAX_MESSAGE_BYTES)),
        );
        let err = send_event(&nowhere(), "o-1", Event::with_data("Submit", data), None)
            .await
            .expect_err("refused");
        let text = err.to_string();
        assert!(
            text.starts_with("the event \"Submit\"") && text.contains("1048576"),
            "{text}"
        );
    }
}
