//! Operator commands against a deployment (local or real AWS): create, send, show, list,
//! trace, and the control plane. They talk to DynamoDB and SQS directly through
//! `stm-runtime`'s control plane, the same code a program embedding the runtime uses.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde_json::Value;
use stm_core::{Event, Execution, Map, Status};
use stm_runtime::queue::SqsQueue;
use stm_runtime::{ActionRegistry, Control, Definitions, Driver, DriverError, Queue};
use stm_store::{CreateOptions, DynamoDbStore, ExecutionStore, ListQuery};

/// Where the deployment is: flags, else the functions' environment variables.
#[derive(Args, Debug, Clone)]
pub struct Deployment {
    /// A DynamoDB + SQS endpoint (moto, LocalStack); unset: real AWS.
    #[arg(long, global = true, env = "STM_ENDPOINT_URL")]
    pub endpoint: Option<String>,
    /// The table prefix.
    #[arg(long, global = true, env = "STM_TABLE_PREFIX", default_value = "harel")]
    pub prefix: String,
    /// The FIFO event queue: a URL, or a queue name.
    #[arg(
        long,
        global = true,
        env = "STM_QUEUE_URL",
        default_value = "harel-events.fifo"
    )]
    pub queue: String,
    /// The `.stm` files (a directory) the deployment runs: `send` checks events and
    /// `cancel` decides cooperative vs forceful with them.
    #[arg(long, global = true, env = "STM_DEFINITIONS_DIR")]
    pub definitions: Option<PathBuf>,
    #[arg(long, global = true, env = "AWS_REGION", default_value = "us-east-1")]
    pub region: String,
}

/// An open deployment.
pub struct Connected {
    pub store: Arc<DynamoDbStore>,
    pub control: Control,
}

impl Deployment {
    pub async fn store(&self, create_schema: bool) -> Result<Arc<DynamoDbStore>> {
        let options = CreateOptions {
            prefix: self.prefix.clone(),
            create_schema,
            connect_attempts: if create_schema { 30 } else { 3 },
            ..CreateOptions::default()
        };
        let store = DynamoDbStore::create_with(self.endpoint.as_deref(), &self.region, options)
            .await
            .with_context(|| format!("DynamoDB tables {}_* at {}", self.prefix, self.where_()))?;
        Ok(Arc::new(store))
    }

    fn where_(&self) -> String {
        self.endpoint
            .clone()
            .unwrap_or_else(|| format!("AWS {}", self.region))
    }

    pub async fn queue(&self) -> Result<SqsQueue> {
        let client = SqsQueue::client(self.endpoint.as_deref(), &self.region).await;
        if self.queue.starts_with("http://") || self.queue.starts_with("https://") {
            // any queue will do if it is FIFO (harel's, ours): a standard one is refused here
            // by name, not by SQS's complaint about MessageGroupId at the first send
            SqsQueue::check_event_queue(&client, &self.queue).await?;
            return Ok(SqsQueue::new(client, self.queue.clone()));
        }
        let url = client
            .get_queue_url()
            .queue_name(&self.queue)
            .send()
            .await
            .map_err(|e| anyhow!("queue {}: {}", self.queue, stm_store::aws::Readable(&e)))?
            .queue_url()
            .unwrap_or_default()
            .to_string();
        SqsQueue::check_event_queue(&client, &url).await?;
        Ok(SqsQueue::new(client, url))
    }

    pub fn load_definitions(&self, extra: Option<&Path>) -> Result<Definitions> {
        let mut definitions = match &self.definitions {
            Some(dir) => stm_runtime::config::load_definitions_dir(dir)?,
            None => Definitions::new(),
        };
        if let Some(file) = extra {
            for defn in stm_runtime::config::load_file(file)? {
                definitions.register(defn);
            }
        }
        Ok(definitions)
    }

    pub async fn connect(&self, extra: Option<&Path>) -> Result<Connected> {
        let definitions = self.load_definitions(extra)?;
        let store = self.store(false).await?;
        let queue: Arc<dyn Queue> = Arc::new(self.queue().await?);
        let driver = Driver::new(store.clone(), definitions, ActionRegistry::with_builtins());
        Ok(Connected {
            store,
            control: Control::new(driver, queue),
        })
    }
}

fn status_of(name: &str) -> Result<Status> {
    name.parse::<Status>().map_err(|e| anyhow!("--status: {e}"))
}

pub async fn create(
    dep: &Deployment,
    file: &Path,
    name: &str,
    seed: Option<Map>,
    id: Option<&str>,
) -> Result<()> {
    // before connecting: an id SQS refuses as a group id fails here, with nothing written
    if let Some(id) = id {
        stm_runtime::driver::check_execution_id(id).map_err(python_error)?;
    }
    let connected = dep.connect(Some(file)).await?;
    let exe = connected
        .control
        .create(name, seed, id)
        .await
        .map_err(python_error)?;
    println!("{}", exe.id);
    Ok(())
}

pub async fn send(dep: &Deployment, id: &str, event: Event) -> Result<()> {
    // before connecting, and for the unchecked send below too: SQS would refuse it
    stm_runtime::driver::check_event_size(id, &event).map_err(python_error)?;
    let connected = dep.connect(None).await?;
    match connected.control.send(id, &event).await {
        Ok(()) => {}
        // no definitions here to check the event against: send it as it is
        Err(DriverError::UnknownDefinition(_) | DriverError::Resolve(_)) => {
            let message = stm_runtime::OutgoingMessage::event(id, &event);
            if let Some(failure) = connected
                .control
                .queue
                .publish_batch(std::slice::from_ref(&message))
                .await
                .first()
            {
                bail!("publish failed: {} {}", failure.code, failure.message);
            }
        }
        Err(other) => return Err(python_error(other)),
    }
    println!("sent {} {} to {id}", event.kind, event.id);
    Ok(())
}

pub enum Command {
    Cancel(Option<Map>),
    Suspend,
    Resume,
    Terminate,
}

pub async fn control(dep: &Deployment, id: &str, command: Command) -> Result<()> {
    let connected = dep.connect(None).await?;
    let control = &connected.control;
    match command {
        Command::Cancel(reason) => control.cancel(id, reason).await,
        Command::Suspend => control.suspend(id).await,
        Command::Resume => control.resume(id).await,
        Command::Terminate => control.terminate(id).await,
    }
    .map_err(python_error)?;
    let exe = connected
        .store
        .load(id)
        .await?
        .ok_or_else(|| anyhow!("no execution {id}"))?;
    println!("{id}: {}", exe.status);
    Ok(())
}

pub async fn show(dep: &Deployment, id: &str, json: bool) -> Result<()> {
    let store = dep.store(false).await?;
    let exe = store
        .load(id)
        .await?
        .ok_or_else(|| anyhow!("no execution {id}"))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&exe)?);
        return Ok(());
    }
    let mut lines = Vec::new();
    describe(store.as_ref(), &exe, "", &mut lines).await?;
    for line in lines {
        println!("{line}");
    }
    Ok(())
}

fn opt(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("-")
}

/// `exe` and its children as an indented tree.
async fn describe(
    store: &dyn ExecutionStore,
    exe: &Execution,
    indent: &str,
    out: &mut Vec<String>,
) -> Result<()> {
    let mut frontier = vec![(exe.clone(), indent.to_string())];
    while let Some((exe, indent)) = frontier.pop() {
        out.push(format!(
            "{indent}{}  [{}] {}  at {}  outcome {}  (v{})",
            exe.id,
            exe.definition_id,
            exe.status,
            opt(&exe.active_path),
            opt(&exe.outcome),
            exe.version
        ));
        if let Some(error) = &exe.error {
            out.push(format!("{indent}  error: {error}"));
        }
        if !exe.context.is_empty() {
            out.push(format!(
                "{indent}  context: {}",
                Value::Object(exe.context.clone())
            ));
        }
        if !exe.deferred.is_empty() {
            let kinds: Vec<&str> = exe.deferred.iter().map(|e| e.kind.as_str()).collect();
            out.push(format!("{indent}  deferred: {}", kinds.join(", ")));
        }
        let child_indent = format!("{indent}    ");
        let mut children = Vec::new();
        for (cid, cs) in &exe.children {
            match store.load(cid).await? {
                Some(child) => children.push((child, child_indent.clone())),
                None => out.push(format!(
                    "{child_indent}{cid}  (not created yet)  finished {}  outcome {}",
                    cs.finished,
                    opt(&cs.outcome)
                )),
            }
        }
        // pop order: keep the children in declaration order
        frontier.extend(children.into_iter().rev());
    }
    Ok(())
}

pub async fn list(
    dep: &Deployment,
    status: Option<&str>,
    definition: Option<&str>,
    roots_only: bool,
) -> Result<()> {
    let store = dep.store(false).await?;
    let status = status.map(status_of).transpose()?;
    let mut query = ListQuery {
        status: status.map(|s| vec![s]),
        definition_id: definition.map(str::to_string),
        roots_only,
        limit: 100,
        cursor: None,
    };
    println!(
        "{:<44} {:<16} {:<10} {:<28} OUTCOME",
        "ID", "DEFINITION", "STATUS", "ACTIVE"
    );
    loop {
        let page = store.list_executions(&query).await?;
        for s in &page.items {
            println!(
                "{:<44} {:<16} {:<10} {:<28} {}",
                s.id,
                s.definition_id,
                s.status.as_str(),
                opt(&s.active_path),
                opt(&s.outcome)
            );
        }
        match page.next_cursor {
            Some(cursor) => query.cursor = Some(cursor),
            None => return Ok(()),
        }
    }
}

pub async fn trace(dep: &Deployment, id: &str) -> Result<()> {
    let store = dep.store(false).await?;
    let steps = store.read_trace(id).await?;
    if steps.is_empty() {
        println!("no trace for {id} (the functions record one with STM_TRACE=true)");
        return Ok(());
    }
    let first = steps
        .first()
        .and_then(|s| s.get("timestamp"))
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    for step in &steps {
        let get = |k: &str| step.get(k).cloned().unwrap_or(Value::Null);
        let text = |k: &str| match get(k) {
            Value::String(s) => s,
            Value::Null => "-".to_string(),
            other => other.to_string(),
        };
        let at = get("timestamp").as_f64().unwrap_or(first) - first;
        let data = match get("event_data") {
            Value::Object(m) if !m.is_empty() => format!(" {}", Value::Object(m)),
            _ => String::new(),
        };
        let actions = match get("actions") {
            Value::Array(a) if !a.is_empty() => {
                format!(
                    "  actions: {}",
                    a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")
                )
            }
            _ => String::new(),
        };
        println!(
            "#{:<4} +{:>9.3}s  {}{}  {} -> {}{}",
            text("index"),
            at,
            text("event_kind"),
            data,
            text("from_path"),
            text("to_path"),
            actions
        );
    }
    Ok(())
}

fn python_error(err: DriverError) -> anyhow::Error {
    anyhow!("{}: {err}", err.python_type())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deployment nothing listens at: a command that got as far as connecting would
    /// fail with a connection error, not with the check's message.
    fn nowhere() -> Deployment {
        Deployment {
            endpoint: Some("http://127.0.0.1:9".into()),
            prefix: "nowhere".into(),
            queue: "nowhere.fifo".into(),
            definitions: None,
            region: "us-east-1".into(),
        }
    }

    #[tokio::test]
    async fn create_refuses_an_id_sqs_would_refuse_before_connecting() {
        let file = stm_testkit::repo_root().join("examples/order.stm");
        let err = create(&nowhere(), &file, "Order", None, Some("a b"))
            .await
            .expect_err("refused");
        let text = err.to_string();
        assert!(
            text.starts_with("ValueError: execution id \"a b\" is not a valid SQS message group id")
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
        let err = send(&nowhere(), "o-1", Event::with_data("Submit", data))
            .await
            .expect_err("refused");
        let text = err.to_string();
        assert!(
            text.starts_with("MessageTooLarge: the event \"Submit\"") && text.contains("1048576"),
            "{text}"
        );
    }
}
