//! Operator commands against a deployment (local or real AWS): create, send, show, list,
//! trace, and the control plane. They talk to DynamoDB and SQS directly through
//! `stm-runtime`'s control plane, the same code a program embedding the runtime uses.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::Args;
use serde_json::Value;
use stm_core::{Event, Execution, Map, Status};
use stm_runtime::queue::SqsQueue;
use stm_runtime::{ActionRegistry, Control, Definitions, Driver, DriverError, Queue};
use stm_store::{CreateOptions, DynamoDbStore, ExecutionStore, ListQuery};

use crate::errors::{self, no_execution, usage};

/// Where the deployment's tables are (what `show`, `list` and `trace` read): flags, else
/// the functions' environment variables.
#[derive(Args, Debug, Clone)]
pub struct Tables {
    /// A DynamoDB + SQS endpoint (moto, LocalStack); unset: real AWS.
    #[arg(long, env = "STM_ENDPOINT_URL", value_name = "URL")]
    pub endpoint: Option<String>,
    /// The table prefix (the tables are PREFIX_executions, PREFIX_timers, ...).
    #[arg(long, env = "STM_TABLE_PREFIX", default_value = stm_store::DEFAULT_PREFIX)]
    pub prefix: String,
    /// The AWS Region. Unset: `AWS_REGION`, else `AWS_DEFAULT_REGION`, else the profile's
    /// `region` in the shared config file, as the AWS CLI finds it; `us-east-1` only with a
    /// local `--endpoint`.
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// The profile of the shared config files (`~/.aws/config`, `~/.aws/credentials`) whose
    /// credentials and Region to use.
    #[arg(long, env = "AWS_PROFILE", value_name = "NAME")]
    pub profile: Option<String>,
    /// Where the deployment keeps its dedupe marks (the stack's DedupeMarks): `table` or
    /// `item`. It must match the worker's: `send --wait` reads the marks, and a commit on
    /// the item layout carries them.
    #[arg(long, env = "STM_DEDUPE_MARKS", default_value = "table", value_name = "table|item",
          value_parser = |v: &str| v.parse::<stm_store::DedupeMarks>().map_err(|e| e.to_string()))]
    pub dedupe_marks: stm_store::DedupeMarks,
}

/// The whole deployment (what the commands that send or change something use): its
/// tables, its queue and its machines.
#[derive(Args, Debug, Clone)]
pub struct Deployment {
    #[command(flatten)]
    pub tables: Tables,
    /// The FIFO event queue: a URL, or a queue name.
    #[arg(
        long,
        env = "STM_QUEUE_URL",
        default_value = "harel-events.fifo",
        value_name = "URL|NAME"
    )]
    pub queue: String,
    /// The folder of .stm files the deployment runs: `send` checks event kinds and data
    /// against them, `cancel` decides cooperative vs forceful with them (`stm local`
    /// runs them; default there: examples).
    #[arg(long, env = "STM_DEFINITIONS_DIR", value_name = "DIR")]
    pub definitions: Option<PathBuf>,
    /// Days a finished execution is kept before DynamoDB's TTL deletes it (the stack's
    /// FinishedRetentionDays): stamped on what `cancel` and `terminate` finish, as the
    /// worker stamps what it finishes. Unset: kept until a purge.
    #[arg(long, env = "STM_FINISHED_TTL_DAYS", value_name = "DAYS",
          value_parser = clap::value_parser!(u64).range(1..=stm_runtime::config::MAX_RETENTION_DAYS))]
    pub finished_ttl_days: Option<u64>,
}

/// An open deployment.
pub struct Connected {
    pub store: Arc<DynamoDbStore>,
    pub control: Control,
}

impl Tables {
    pub async fn store(&self, create_schema: bool) -> Result<Arc<DynamoDbStore>> {
        Ok(Arc::new(self.open(create_schema).await?))
    }

    /// The store, not yet shared (to configure it further).
    pub async fn open(&self, create_schema: bool) -> Result<DynamoDbStore> {
        let region = self.region(self.endpoint.is_some()).await?;
        let options = CreateOptions {
            prefix: self.prefix.clone(),
            create_schema,
            connect_attempts: if create_schema { 30 } else { 3 },
            dedupe_marks: self.dedupe_marks,
            profile: self.profile.clone(),
            ..CreateOptions::default()
        };
        let at = match &self.endpoint {
            Some(endpoint) => format!("{endpoint} ({region})"),
            None => format!("AWS {region}"),
        };
        match DynamoDbStore::create_with(self.endpoint.as_deref(), &region, options).await {
            Ok(store) => Ok(store),
            Err(err) => match missing_table(&err) {
                Some(table) => Err(self.no_tables(err, table, &region, &at).await),
                None => {
                    Err(anyhow::Error::new(err).context(format!("DynamoDB tables {}_* at {at}", self.prefix)))
                }
            },
        }
    }

    /// A deployment with no table of this prefix, in the operator's words: the table and
    /// the prefix tried, and the flag or command that fixes it. The default prefix's
    /// tables are looked for there, as the likeliest right `--prefix`.
    async fn no_tables(
        &self,
        err: stm_store::StoreError,
        table: String,
        region: &str,
        at: &str,
    ) -> anyhow::Error {
        let default = stm_store::DEFAULT_PREFIX;
        let default_exists = self.prefix != default && {
            let probe = CreateOptions {
                prefix: default.to_string(),
                create_schema: false,
                connect_attempts: 1,
                profile: self.profile.clone(),
                ..CreateOptions::default()
            };
            DynamoDbStore::create_with(self.endpoint.as_deref(), region, probe)
                .await
                .is_ok()
        };
        let fix = if default_exists {
            format!("the tables there have the prefix {default}: pass `--prefix {default}`")
        } else if self.endpoint.is_some() {
            "pass the prefix the tables were made with (`--prefix`, or STM_TABLE_PREFIX), or start a \
             local deployment with `stm local`"
                .to_string()
        } else {
            "pass the prefix of the deployment (`--prefix`, or STM_TABLE_PREFIX: the stack's TablePrefix), \
             its Region (`--region`), or deploy it first (`sam deploy`)"
                .to_string()
        };
        anyhow::Error::new(MissingTables {
            message: format!(
                "no table {table} at {at}: --prefix {} names no deployment there; {fix}",
                self.prefix
            ),
            source: err,
        })
    }
}

/// The table a store's check found missing. The store says it only in its message
/// (`table NAME does not exist (...)`), so it is read from there; any other failure is
/// `None` and reported as it is.
fn missing_table(err: &stm_store::StoreError) -> Option<String> {
    let stm_store::StoreError::Backend { message, .. } = err else {
        return None;
    };
    let rest = message.strip_prefix("table ")?;
    let (name, tail) = rest.split_once(' ')?;
    tail.starts_with("does not exist").then(|| name.to_string())
}

/// A deployment whose tables are not there: what to do, with the store's own failure
/// kept as the source (`-v` shows it).
#[derive(Debug)]
pub struct MissingTables {
    message: String,
    source: stm_store::StoreError,
}

impl std::fmt::Display for MissingTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for MissingTables {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl Tables {
    /// The Region to use: `--region`, else the one the environment or the profile gives
    /// (as the AWS CLI reads them), else `us-east-1` when `local` (an emulator, where the
    /// Region only names the tables' namespace). Real AWS without a Region is an error
    /// rather than a guess: a guessed Region is someone else's tables, or none.
    pub async fn region(&self, local: bool) -> Result<String> {
        if let Some(region) = &self.region {
            return Ok(region.clone());
        }
        if let Some(region) = stm_store::aws::configured_region(self.profile.as_deref()).await {
            return Ok(region);
        }
        if local {
            return Ok(stm_store::DEFAULT_REGION.to_string());
        }
        let profile = match &self.profile {
            Some(name) => format!(" --profile {name}"),
            None => String::new(),
        };
        Err(usage(format!(
            "no AWS Region: pass --region REGION, set AWS_REGION, or give the profile one \
             (`aws configure set region REGION{profile}`)"
        )))
    }
}

impl Deployment {
    pub async fn queue(&self) -> Result<SqsQueue> {
        let region = self.tables.region(self.tables.endpoint.is_some()).await?;
        let client = SqsQueue::client_with_profile(
            self.tables.endpoint.as_deref(),
            &region,
            self.tables.profile.as_deref(),
        )
        .await;
        if is_queue_url(&self.queue) {
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
            .map_err(|e| anyhow::anyhow!("queue {}: {}", self.queue, stm_store::aws::Readable(&e)))?
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
        let mut store = self.tables.open(false).await?;
        if let Some(days) = self.finished_ttl_days {
            store = store.with_finished_ttl(std::time::Duration::from_secs(days * 86_400));
        }
        let store = Arc::new(store);
        let queue: Arc<dyn Queue> = Arc::new(self.queue().await?);
        let driver = Driver::new(store.clone(), definitions, ActionRegistry::with_builtins());
        Ok(Connected {
            store,
            control: Control::new(driver, queue),
        })
    }
}

/// Whether `--queue` names the queue by its URL (else by its name).
pub fn is_queue_url(queue: &str) -> bool {
    queue.starts_with("http://") || queue.starts_with("https://")
}

fn status_of(name: &str) -> Result<Status> {
    name.parse::<Status>().map_err(|_| {
        let all: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
        usage(format!(
            "--status {name:?} is not a status: use one of {}",
            all.join(", ")
        ))
    })
}

/// The execution `id`, or "no execution".
async fn load(store: &dyn ExecutionStore, id: &str) -> Result<Execution> {
    store.load(id).await?.ok_or_else(|| no_execution(id))
}

pub async fn create(
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
        .map_err(errors::driver)?;
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
pub async fn send(dep: &Deployment, id: &str, event: Event, wait: Option<std::time::Duration>) -> Result<()> {
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
        Err(DriverError::UnknownDefinition(_) | DriverError::Resolve(_)) => {
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
        Err(other) => return Err(errors::driver(other)),
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

/// A control-plane command.
pub enum ControlCommand {
    Cancel(Option<Map>),
    Suspend,
    Resume,
    Terminate,
    /// Back to RUNNING at this leaf.
    Redrive(String),
}

impl ControlCommand {
    fn verb(&self) -> &'static str {
        match self {
            ControlCommand::Cancel(_) => "cancel",
            ControlCommand::Suspend => "suspend",
            ControlCommand::Resume => "resume",
            ControlCommand::Terminate => "terminate",
            ControlCommand::Redrive(_) => "redrive",
        }
    }

    /// Why the command would do nothing to an execution in `status` (harel makes it a
    /// silent no-op; the CLI says so and exits 1).
    fn no_op(&self, status: Status) -> Option<String> {
        if status.is_finished() {
            return Some(format!("already {status}"));
        }
        match self {
            ControlCommand::Cancel(_) if status == Status::Cancelling => {
                Some("already CANCELLING (its Cancel is on its way)".to_string())
            }
            ControlCommand::Suspend if status == Status::Suspended => Some("already SUSPENDED".to_string()),
            ControlCommand::Suspend if status != Status::Running => Some(format!("{status}, not RUNNING")),
            ControlCommand::Resume if status != Status::Suspended => Some(format!("{status}, not SUSPENDED")),
            ControlCommand::Redrive(_) if status != Status::Failed => Some(format!("{status}, not FAILED")),
            _ => None,
        }
    }
}

/// What a control command did: the status before and after, and a note on how (a
/// cooperative or forceful cancel, a redrive), for the CLI's line and the console's flash.
#[derive(Debug, Clone)]
pub struct ControlOutcome {
    pub before: Status,
    pub after: Status,
    /// Empty, or a sentence on what happened beyond the status change.
    pub note: &'static str,
}

impl std::fmt::Display for ControlOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} -> {}", self.before, self.after)?;
        if !self.note.is_empty() {
            write!(f, "  ({})", self.note)?;
        }
        Ok(())
    }
}

/// `stm cancel|suspend|resume|terminate`: `ID: FROM -> TO`, or, when there is nothing to
/// do, an error saying why.
pub async fn control(dep: &Deployment, id: &str, command: ControlCommand) -> Result<()> {
    let connected = dep.connect(None).await?;
    let outcome = apply_control(&connected, id, command).await?;
    println!("{id}: {outcome}");
    Ok(())
}

/// Run one control command on `id` through the control plane (what `stm cancel` and the
/// console's buttons share): refused, with the reason, when it would do nothing.
pub async fn apply_control(
    connected: &Connected,
    id: &str,
    command: ControlCommand,
) -> Result<ControlOutcome> {
    let before = load(connected.store.as_ref(), id).await?;
    if let Some(why) = command.no_op(before.status) {
        bail!("{id} is {why}: nothing to {}", command.verb());
    }
    let control = &connected.control;
    match &command {
        ControlCommand::Cancel(reason) => control.cancel(id, reason.clone()).await,
        ControlCommand::Suspend => control.suspend(id).await,
        ControlCommand::Resume => control.resume(id).await,
        ControlCommand::Terminate => control.terminate(id).await,
        ControlCommand::Redrive(at) => control.redrive(id, at).await,
    }
    .map_err(errors::driver)?;
    let after = load(connected.store.as_ref(), id).await?;
    let note = match (&command, after.status) {
        (ControlCommand::Cancel(Some(_)), Status::Cancelled) => {
            "forceful: nothing active models `on Cancel`, so no Cancel event carried the reason; as in harel, it is not kept"
        }
        (ControlCommand::Cancel(_), Status::Cancelling) => {
            "cooperative: its Cancel goes to the model's `on Cancel`; `stm show` and `stm trace` show the reason"
        }
        (ControlCommand::Redrive(_), Status::Running) => {
            "its next event or timer moves it on; the context is as it was, the error and the history are cleared"
        }
        _ => "",
    };
    Ok(ControlOutcome {
        before: before.status,
        after: after.status,
        note,
    })
}

pub async fn show(dep: &Tables, id: &str, json: bool) -> Result<()> {
    let store = dep.store(false).await?;
    let exe = load(store.as_ref(), id).await?;
    if json {
        println!("{}", stm_core::pyjson::to_string_pretty(&exe));
        return Ok(());
    }
    let mut lines = Vec::new();
    describe(store.as_ref(), &exe, "", &mut lines).await?;
    if let Some(reason) = cancel_reason(store.as_ref(), &exe).await? {
        lines.insert(1, format!("  cancel reason: {reason}"));
    }
    for line in lines {
        println!("{line}");
    }
    Ok(())
}

/// The data of the `Cancel` a cooperative cancel delivered, from the trace (where the
/// worker records the step with its event data). A forceful cancel delivers no event and,
/// as in harel, keeps no reason: `stm cancel` says so when it happens.
async fn cancel_reason(store: &dyn ExecutionStore, exe: &Execution) -> Result<Option<Value>> {
    if !matches!(exe.status, Status::Cancelled | Status::Cancelling | Status::Done) {
        return Ok(None);
    }
    let steps = store.read_trace(&exe.id).await?;
    Ok(steps
        .iter()
        .rev()
        .find(|step| step.get("event_kind").and_then(Value::as_str) == Some("Cancel"))
        .and_then(|step| step.get("event_data").cloned())
        .filter(|data| data.as_object().is_some_and(|m| !m.is_empty())))
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
        if let Some(version) = exe.definition_version {
            out.push(format!("{indent}  machine version: {version}"));
        }
        if !exe.parked_events.is_empty() {
            let kinds: Vec<&str> = exe.parked_events.iter().map(|e| e.kind.as_str()).collect();
            out.push(format!(
                "{indent}  parked (its version is not deployed): {}",
                kinds.join(", ")
            ));
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
    dep: &Tables,
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

/// `stm trace ID`: the execution's timeline, its regions' steps merged in by time.
pub async fn trace(dep: &Tables, id: &str) -> Result<()> {
    let store = dep.store(false).await?;
    let exe = load(store.as_ref(), id).await?;
    let own = store.read_trace(id).await?;
    // the regions' steps too: a broadcast is recorded on their traces, not on this one
    // (harel's table layout; see `inspect::timeline`)
    let regions = crate::inspect::region_traces(store.as_ref(), &exe).await?;
    let steps = crate::inspect::timeline(own, regions.traces);
    if steps.is_empty() {
        bail!(
            "{id} ({}, v{}) has no trace steps: the worker records them when it runs with \
             STM_TRACE=true (`stm local` does by default)",
            exe.status,
            exe.version
        );
    }
    let first = steps
        .first()
        .and_then(|s| s.record.get("timestamp"))
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    for step in &steps {
        println!("{}", crate::inspect::trace_line(step, first));
    }
    if regions.left_out > 0 {
        eprintln!(
            "{} of {id} not shown: `stm show {id}` lists them, `stm trace REGION_ID` prints one",
            crate::plural::count(regions.left_out, "more region")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let err = create(&nowhere(), &file, "Order", None, Some("a b"))
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
        let err = send(&nowhere(), "o-1", Event::with_data("Submit", data), None)
            .await
            .expect_err("refused");
        let text = err.to_string();
        assert!(
            text.starts_with("the event \"Submit\"") && text.contains("1048576"),
            "{text}"
        );
    }
}
