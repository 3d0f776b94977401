//! The commands that need no deployment: `validate`, `render`, `list FILE` and `run` (the
//! embedded runner). They build without the AWS SDK (`--no-default-features`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::Args;
use serde_json::Value;
use stm_core::{Definition, Event, Execution, Map};
use stm_runtime::driver::Held;
use stm_runtime::{ActionRegistry, Definitions, Driver};
use stm_store::MemoryStore;

use crate::errors::{self, usage};
use crate::stm_files::{self, Depth};

/// Read a text file, or a usage error naming it.
pub fn read(file: &Path) -> Result<String> {
    std::fs::read_to_string(file).map_err(|e| usage(format!("cannot read {}: {e}", file.display())))
}

/// The machine `name` of `file` (its only machine when `None`), or a usage error naming
/// the file, or the DSL error with its line.
pub fn load(file: &Path, name: Option<&str>) -> Result<Definition> {
    if file.is_dir() {
        bail!(usage(format!(
            "{} is a directory: name a .stm file",
            file.display()
        )));
    }
    if !file.exists() {
        bail!(usage(format!("no such file: {}", file.display())));
    }
    Ok(stm_core::dsl::load_definition_file(file, name)?)
}

/// Parse and validate machines: one FILE and an optional NAME as harel takes them, or several files and
/// directories (every .stm file in them). Exit 1 if any has errors.
#[derive(Args)]
#[command(after_help = errors::EXIT_CODES)]
pub struct ValidateArgs {
    /// .stm files or directories; harel's `FILE NAME` form selects one machine.
    #[arg(required = true, value_name = "PATH")]
    targets: Vec<String>,
    /// Only the machine with this name.
    #[arg(long, value_name = "NAME")]
    machine: Option<String>,
}

/// `stm validate`: harel's `validate FILE [NAME]` for one file; for several files or
/// directories, every machine of every `.stm` file found, each reported, then a count.
/// Exit 1 when any machine has errors or any file does not load.
pub fn validate(args: ValidateArgs) -> Result<ExitCode> {
    let (paths, name) = split_harel_name(&args.targets, args.machine.as_deref());
    if let ([file], Some(name)) = (paths.as_slice(), name) {
        if file.is_file() {
            return validate_one(&load(file, Some(name))?);
        }
    }
    let files = stm_files(&paths)?;
    let (mut machines, mut failing) = (0, 0);
    for file in &files {
        let defns = match stm_core::dsl::load_all_file(file) {
            Ok(defns) => defns,
            Err(err) => {
                println!("{}", err.with_file(file.display().to_string()));
                failing += 1;
                continue;
            }
        };
        let defns: Vec<Definition> = match name {
            Some(name) => defns.into_iter().filter(|d| d.id == name).collect(),
            None => defns,
        };
        for defn in &defns {
            machines += 1;
            if validate_one(defn)? != ExitCode::SUCCESS {
                failing += 1;
            }
        }
    }
    if files.len() > 1 || paths.iter().any(|p| p.is_dir()) {
        println!(
            "checked {} in {}: {}",
            crate::plural::count(machines, "machine"),
            crate::plural::count(files.len(), "file"),
            if failing == 0 {
                "all valid".to_string()
            } else {
                format!("{failing} with errors")
            }
        );
    }
    if machines == 0 && failing == 0 {
        bail!(usage(match name {
            Some(name) => format!("no machine named {name:?} in {}", describe_paths(&paths)),
            None => format!("no machine in {}", describe_paths(&paths)),
        }));
    }
    Ok(if failing == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// harel's form `validate FILE NAME`: two arguments, the first a file and the second no
/// path that exists, are a file and a machine name.
fn split_harel_name<'a>(targets: &'a [String], machine: Option<&'a str>) -> (Vec<PathBuf>, Option<&'a str>) {
    if let [file, name] = targets {
        if machine.is_none()
            && Path::new(file).is_file()
            && !Path::new(name).exists()
            && !name.ends_with(".stm")
        {
            return (vec![PathBuf::from(file)], Some(name.as_str()));
        }
    }
    (targets.iter().map(PathBuf::from).collect(), machine)
}

fn describe_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `.stm` files of `paths`: files as given, directories searched recursively (in
/// name order).
fn stm_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            out.extend(stm_files::in_dir(path, Depth::Recursive)?);
        } else if path.exists() {
            out.push(path.clone());
        } else {
            bail!(usage(format!("no such file or directory: {}", path.display())));
        }
    }
    Ok(out)
}

/// One machine's findings, then `NAME: ok` when there are none (harel's output), with
/// the machine's version: `Order: ok (version 1f2e3d4c5b6a7988)`.
fn validate_one(defn: &Definition) -> Result<ExitCode> {
    let findings = stm_core::validate::validate(defn);
    // each finding shown as a parse error is (its line, a caret): one shape for all; a
    // finding in an imported file quotes that file
    for shown in stm_core::validate::rendered_all(defn, &findings) {
        println!("{shown}");
    }
    let version = stm_core::version::version_of(defn);
    if findings.is_empty() {
        println!("{}: ok (version {version})", defn.id);
    } else if !stm_core::validate::has_errors(&findings) {
        println!("{}: version {version}", defn.id);
    }
    Ok(if stm_core::validate::has_errors(&findings) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Render a machine as PlantUML (the default, as harel's) or a Mermaid stateDiagram-v2.
#[derive(Args)]
pub struct RenderArgs {
    /// The .stm file.
    file: PathBuf,
    /// The machine, if the file declares more than one.
    name: Option<String>,
    /// Emit a Mermaid stateDiagram-v2 instead.
    #[arg(long, conflicts_with = "plantuml")]
    mermaid: bool,
    /// Emit PlantUML, the default (accepted to say so explicitly).
    #[arg(long)]
    plantuml: bool,
}

/// `stm render`: PlantUML, harel's default, or with `--mermaid` a Mermaid `stateDiagram-v2`.
pub fn render(args: RenderArgs) -> Result<ExitCode> {
    // `--plantuml` only names the default (clap refuses it beside `--mermaid`)
    let RenderArgs {
        file,
        name,
        mermaid,
        plantuml: _,
    } = args;
    let defn = load(&file, name.as_deref())?;
    if mermaid {
        println!("{}", stm_core::render::mermaid(&defn));
    } else {
        println!("{}", stm_core::render::plantuml(&defn));
    }
    Ok(ExitCode::SUCCESS)
}

/// `stm list FILE`: what a file declares.
pub fn list_file(file: &Path) -> Result<ExitCode> {
    if !file.exists() {
        bail!(usage(format!("no such file: {}", file.display())));
    }
    let text = read(file)?;
    let program = stm_core::dsl::parse(&text)
        .map_err(|e| anyhow::Error::new(e.with_file(file.display().to_string())))?;
    let join = |v: &[String]| {
        if v.is_empty() {
            "—".to_string()
        } else {
            v.join(", ")
        }
    };
    println!("machines:  {}", join(&program.machines));
    println!("fragments: {}", join(&program.fragments));
    println!("events:    {}", join(&program.events));
    // the versions need the machines compiled, imports and all: a file that parses but
    // does not load (a missing import, say) still lists, without them
    if let Ok(defns) = stm_core::dsl::load_all_file(file) {
        let versions: Vec<String> = defns
            .iter()
            .map(|d| format!("{} {}", d.id, stm_core::version::version_of(d)))
            .collect();
        println!("versions:  {}", join(&versions));
    }
    Ok(ExitCode::SUCCESS)
}

/// Drive a machine with events over an in-memory store (no deployment).
#[derive(Args)]
pub struct RunArgs {
    /// The .stm file.
    file: PathBuf,
    /// The machine, if the file declares more than one.
    name: Option<String>,
    /// An event to deliver (repeatable): KIND or KIND:'{"json": "data"}'.
    #[arg(short = 'e', long = "event", value_name = "KIND[:JSON]")]
    pub events: Vec<String>,
    /// The events to deliver from a file (`-`: standard input), one a line as `-e` takes
    /// them; blank lines and lines starting with `#` are skipped.
    #[arg(long = "events", value_name = "FILE")]
    events_file: Option<PathBuf>,
    /// The initial context, a JSON object.
    #[arg(long, value_name = "JSON")]
    seed: Option<String>,
    /// Validate before running.
    #[arg(long)]
    validate: bool,
    /// Print the final root execution and every child as one JSON object.
    #[arg(long)]
    json: bool,
    /// Under each event's line, every transition its kind triggers, in the order the
    /// engine considers them, with its guard's value and why it was or was not taken.
    #[arg(long, conflicts_with = "json")]
    explain: bool,
}

/// `stm run`: drive a machine over an in-memory store, printing each step as `harel run`
/// does. Every argument is checked before anything runs.
pub fn run(args: RunArgs) -> Result<ExitCode> {
    let defn = load(&args.file, args.name.as_deref())?;
    if args.validate {
        let findings = stm_core::validate::validate(&defn);
        if stm_core::validate::has_errors(&findings) {
            let errors = findings.iter().filter(|f| f.is_error());
            let text = stm_core::validate::rendered_all(&defn, errors);
            bail!("{} is not valid:\n{}", defn.id, text.join("\n"));
        }
    }
    let seed = args.seed.map(|s| json_object(&s, "--seed")).transpose()?;
    // before anything runs: a kind no state handles, or data that does not fit its
    // declaration, is a mistake in the command line, not an event to drop. The kinds are
    // gathered once: per event, that walk cost more than the event's step.
    let kinds: std::collections::HashSet<String> = defn.event_kinds().into_iter().collect();
    let events = match &args.events_file {
        // checked here, not by clap: the `-e` flags may never reach it (`run_args`)
        Some(_) if !args.events.is_empty() => {
            bail!(usage("give the events with -e or with --events, not both"))
        }
        Some(path) => events_from_file(path, &defn, &kinds)?,
        None => {
            // sized up front: collecting `Result`s gives no size hint, and a vector of
            // 20,000 events grown by doubling copied all of them a dozen times over
            let mut events = Vec::with_capacity(args.events.len());
            for spec in args.events {
                let event = parse_run_event(spec)?;
                check_run_event(&defn, &kinds, &event, || format!("-e {}", event.kind))?;
                events.push(event);
            }
            events
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let show = if args.json {
        Show::Json
    } else if args.explain {
        Show::Explained
    } else {
        Show::Steps
    };
    let Some(last) = runtime.block_on(run_machine(defn, seed, events, show))? else {
        return Ok(ExitCode::SUCCESS);
    };
    if last.status == stm_core::Status::Failed {
        // the output above is harel's, line for line; harel exits 0 here too, which
        // reports a failed run as a success: we say why and exit 1
        eprintln!(
            "error: execution {} ended FAILED: {}",
            last.id,
            last.error.as_deref().unwrap_or("no error recorded")
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// An event `stm run` may deliver to `defn`: a kind the machine knows (one of `kinds`,
/// its [`Definition::event_kinds`]) with data that fits its declaration; else a usage
/// error that starts with `origin()` (where the user gave it: made only for the message)
/// and names the kinds it knows.
fn check_run_event(
    defn: &Definition,
    kinds: &std::collections::HashSet<String>,
    event: &Event,
    origin: impl Fn() -> String,
) -> Result<()> {
    if !kinds.contains(&event.kind) {
        let known = unknown_kind(defn, &event.kind).unwrap_or_default();
        bail!(usage(format!(
            "{}: no state of machine {} handles {:?} (nothing run): it knows {known}",
            origin(),
            defn.id,
            event.kind
        )));
    }
    stm_runtime::Driver::check_event(defn, event).map_err(|e| usage(format!("{}: {e}", origin())))
}

/// `--events FILE`'s events (`-`: standard input), each checked as `-e`'s are; a mistake
/// names the file and the line. Read whole before anything runs, as the command line is:
/// a run never stops halfway on a typo at line 19,000.
fn events_from_file(
    path: &Path,
    defn: &Definition,
    kinds: &std::collections::HashSet<String>,
) -> Result<Vec<Event>> {
    let (name, text) = if path == Path::new("-") {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text)
            .map_err(|e| usage(format!("cannot read the events from standard input: {e}")))?;
        ("standard input".to_string(), text)
    } else {
        let text = std::fs::read_to_string(path)
            .map_err(|e| usage(format!("cannot read --events {}: {e}", path.display())))?;
        (path.display().to_string(), text)
    };
    let mut events = Vec::new();
    for (at, line) in text.lines().enumerate() {
        // trimmed: a space at a line's end is invisible in a file, and never part of a kind
        let spec = line.trim();
        if spec.is_empty() || spec.starts_with('#') {
            continue;
        }
        let origin = || format!("{name} line {}", at + 1);
        let event = parse_event_spec(spec, "").map_err(|e| usage(format!("{}: {e}", origin())))?;
        check_run_event(defn, kinds, &event, origin)?;
        events.push(event);
    }
    Ok(events)
}

/// `None` when `defn` knows `kind`; else the kinds it knows, as a sentence's end: its
/// domain events, then the control events a user may send.
pub fn unknown_kind(defn: &Definition, kind: &str) -> Option<String> {
    let kinds = defn.event_kinds();
    if kinds.iter().any(|k| k == kind) {
        return None;
    }
    let domain: Vec<&str> = kinds
        .iter()
        .map(String::as_str)
        .filter(|k| !stm_core::definition::RESERVED_EVENTS.contains(k))
        .collect();
    Some(format!(
        "{}, and the control events {}",
        if domain.is_empty() {
            "no domain event".to_string()
        } else {
            domain.join(", ")
        },
        ["Cancel", "Reset", "SetState"].join(", ")
    ))
}

/// A JSON object argument (`--seed`, `--reason`, an event's data), or a usage error
/// naming `what`.
pub fn json_object(raw: &str, what: &str) -> Result<Map> {
    // Python's json.loads, as harel's CLI reads it: NaN, Infinity and big ints included
    let value: Value =
        stm_core::pyjson::loads(raw).map_err(|e| usage(format!("{what} is not valid JSON ({e})")))?;
    match value {
        Value::Object(map) => Ok(map),
        other => Err(usage(format!(
            "{what} must be a JSON object, got {}",
            stm_core::pyvalue::type_name(&other)
        ))),
    }
}

/// `KIND` or `KIND:JSON`; `flag` is how the user passed it (`-e ` for `run`, empty for
/// `send`'s argument), for the message.
pub fn parse_event_spec(spec: &str, flag: &str) -> Result<Event> {
    let (kind, data) = match spec.split_once(':') {
        Some((kind, raw)) => (kind, json_object(raw, &format!("the data of {flag}{kind}"))?),
        None => (spec, Map::new()),
    };
    if kind.trim().is_empty() {
        bail!(usage(format!(
            "{flag}{spec:?}: the event kind is empty (KIND or KIND:JSON)"
        )));
    }
    Ok(Event::with_data(kind, data))
}

/// `run`'s `-e` value: [`parse_event_spec`], the plain `KIND` taking the text itself as
/// the event's kind rather than a copy of it (20,000 events, 20,000 allocations fewer).
fn parse_run_event(spec: String) -> Result<Event> {
    if spec.contains(':') || spec.trim().is_empty() {
        return parse_event_spec(&spec, "-e ");
    }
    Ok(Event::with_data(spec, Map::new()))
}

/// `STM_ACTIONS` binds remote actions for `stm run` as it does for the worker (a project's
/// Rust actions served by `worker serve-actions`, say), with the worker's action settings.
#[cfg(feature = "aws")]
fn bind_remote_actions(actions: &mut ActionRegistry) -> Result<()> {
    if std::env::var(stm_env::ACTIONS).map_or(true, |v| v.trim().is_empty()) {
        return Ok(());
    }
    // of the worker's configuration only the action settings matter: `stm run` sends
    // nothing to a queue and keeps no tables
    let config = stm_runtime::config::ActionConfig::from_lookup(|name| std::env::var(name).ok())?;
    if let Some(remote) = config.remote_actions()? {
        remote.register_into(actions);
    }
    Ok(())
}

/// A build without the AWS SDK has no remote-action client: say so rather than run
/// without the bindings.
#[cfg(not(feature = "aws"))]
fn bind_remote_actions(_: &mut ActionRegistry) -> Result<()> {
    if std::env::var(stm_env::ACTIONS).is_ok_and(|v| !v.trim().is_empty()) {
        bail!(usage(format!(
            "{} is set, but this stm was built without the `aws` feature, which remote \
             actions need: build it with default features",
            stm_env::ACTIONS
        )));
    }
    Ok(())
}

/// What `stm run` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Show {
    /// `harel run`'s lines: each event and the state it led to, then the status.
    Steps,
    /// Those lines, each event's explanation under its line (`--explain`).
    Explained,
    /// The final root execution and its children as JSON (`--json`).
    Json,
}

/// Run and show it; the execution as it ended (`None`: the reader of the output went away
/// first).
async fn run_machine(
    defn: Definition,
    seed: Option<Map>,
    events: Vec<Event>,
    show: Show,
) -> Result<Option<Execution>> {
    let mut actions = ActionRegistry::with_builtins();
    bind_remote_actions(&mut actions)?;
    actions.check(&defn)?;
    let defn_id = defn.id.clone();
    let mut definitions = Definitions::new();
    definitions.register(defn);
    let store = Arc::new(MemoryStore::new());
    let driver = Driver::new(store.clone(), definitions, actions);
    // one write for many lines, not a syscall per line: the steps are microseconds each
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let shown = show_run(&driver, &store, &defn_id, seed, events, show, &mut out).await;
    // the steps that ran are shown, before the error that stopped the run if one did
    let flushed = out.flush();
    match shown.and_then(|last| flushed.map(|()| last).map_err(anyhow::Error::from)) {
        // the reader went away (`stm run ... | head`): stop quietly, as Unix tools do
        Err(err) if is_broken_pipe(&err) => Ok(None),
        other => other.map(Some),
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

/// One line of `harel run`'s output, `f"{kind:<20} -> {path}"` (`None` for no path),
/// written piece by piece: the formatting machinery cost more than the step itself.
fn write_step(out: &mut impl Write, kind: &str, path: &Option<String>) -> std::io::Result<()> {
    const SPACES: &[u8; 20] = b"                    ";
    out.write_all(kind.as_bytes())?;
    // Python pads by characters, not bytes
    let width = kind.chars().count();
    if width < SPACES.len() {
        out.write_all(&SPACES[..SPACES.len() - width])?;
    }
    out.write_all(b" -> ")?;
    out.write_all(path.as_deref().unwrap_or("None").as_bytes())?;
    out.write_all(b"\n")
}

/// Each explanation under its event's line; one of a region (a broadcast event) under the
/// region's id.
fn write_explained(
    out: &mut impl Write,
    root_id: &str,
    explained: &[(String, stm_core::engine::Explanation)],
) -> std::io::Result<()> {
    for (id, why) in explained {
        if id != root_id {
            writeln!(out, "  in region {id}:")?;
        }
        write!(out, "{why}")?;
    }
    Ok(())
}

/// Create the execution, deliver `events`, and write what `harel run` prints (or, with
/// [`Show::Json`], the final execution and its children) to `out`.
async fn show_run(
    driver: &Driver,
    store: &MemoryStore,
    defn_id: &str,
    seed: Option<Map>,
    events: Vec<Event>,
    show: Show,
    out: &mut impl Write,
) -> Result<Execution> {
    let json = show == Show::Json;
    let exe = driver.create(defn_id, seed, None).await.map_err(errors::driver)?;
    let id = exe.id.clone();
    if !json {
        write_step(out, "(start)", &exe.active_path)?;
    }
    // held between events: nothing else writes it, so it need not be reloaded for each
    let mut held = Held::new(exe);
    for event in events {
        // from the execution before the step: what the step will consider
        let explained = if show == Show::Explained {
            driver
                .explain(held.execution(), &event)
                .await
                .map_err(errors::driver)?
        } else {
            Vec::new()
        };
        driver
            .process_held(&mut held, &event)
            .await
            .map_err(errors::driver)?;
        if !json {
            write_step(out, &event.kind, &held.execution().active_path)?;
        }
        write_explained(out, &id, &explained)?;
    }
    let last = held.into_execution();
    if json {
        let children: Vec<Value> = store
            .all_executions()
            .into_iter()
            .filter(|e| e.id != id)
            .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
            .collect();
        let doc = serde_json::json!({ "execution": last, "children": children });
        writeln!(out, "{}", stm_core::pyjson::to_string_pretty(&doc))?;
    } else {
        writeln!(
            out,
            "status: {}  outcome: {}",
            last.status,
            last.outcome.as_deref().unwrap_or("None")
        )?;
    }
    Ok(last)
}
