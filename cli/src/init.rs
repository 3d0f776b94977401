//! `stm init DIR [--name NAME] [--stm-path PATH | --stm-git URL]`: a standalone project
//! outside this repository, with its own Rust actions and nothing of stm's to fork.
//!
//! What it writes:
//! - `Cargo.toml`: a workspace of the three functions, the stm crates as path or git
//!   dependencies, and this repository's `[profile.*]` sections (so a shared target dir
//!   reuses what stm's own build compiled);
//! - `functions/worker` (the machine's async action and `stm_lambda::run_worker`),
//!   `functions/relay` and `functions/sweeper` (this repository's mains, as they are);
//! - `machines/NAME.stm`, a starter machine that calls the action;
//! - `template.yaml`, generated from this repository's template: the definitions layer
//!   points at `machines/` and the binaries carry the project's name; `samconfig.toml`
//!   likewise, with the project's stack name;
//! - `events/`: a worker sample for the machine, the relay and sweeper samples and the
//!   `sam local invoke` environment, and a short `README.md`.
//!
//! The template and the mains are compiled into `stm` from this repository's files, so a
//! scaffold never drifts from the template the repository tests.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use crate::errors::usage;
use crate::shell::shell_word;

const TEMPLATE: &str = include_str!("../../template.yaml");
const SAMCONFIG: &str = include_str!("../../samconfig.toml");
const WORKSPACE_MANIFEST: &str = include_str!("../../Cargo.toml");
const RELAY_MAIN: &str = include_str!("../../functions/relay/src/main.rs");
const SWEEPER_MAIN: &str = include_str!("../../functions/sweeper/src/main.rs");
const RELAY_SAMPLE: &str = include_str!("../../events/relay-scheduled.json");
const SWEEPER_SAMPLE: &str = include_str!("../../events/sweeper-scheduled.json");
const SAM_LOCAL_ENV: &str = include_str!("../../events/sam-local/env-vars.json");

/// Where the project's stm crates come from.
#[derive(Debug, Clone, PartialEq)]
pub enum StmSource {
    /// A checkout of this repository.
    Path(PathBuf),
    /// A git repository holding it.
    Git(String),
}

impl StmSource {
    /// The comment above the stm crates in the project's manifest: where they come from,
    /// and how to switch (a path dependency builds only on a machine with that checkout).
    fn note(&self) -> &'static str {
        match self {
            StmSource::Path(_) => {
                "# stm's crates, from a checkout of stm on this machine (stm init --stm-path). A\n\
                 # machine without it (a teammate, CI) builds from git instead: replace `path = ...`\n\
                 # with `git = \"<stm's repository URL>\"` in both lines, or run stm init --stm-git URL.\n"
            }
            StmSource::Git(_) => {
                "# stm's crates, from git. To build against a local checkout of stm instead (to try\n\
                 # a change to stm itself), replace `git = ...` with `path = \"<checkout>/shared/lambda\"`\n\
                 # and `path = \"<checkout>/shared/runtime\"`, or run stm init --stm-path DIR.\n"
            }
        }
    }

    /// The dependency table for the crate at `crate_dir` (`shared/lambda`, say).
    fn dependency(&self, crate_dir: &str, extra: &str) -> String {
        match self {
            StmSource::Path(root) => {
                let path = root.join(crate_dir).display().to_string();
                format!("{{ path = {}{extra} }}", toml_string(&path))
            }
            StmSource::Git(url) => format!("{{ git = {}{extra} }}", toml_string(url)),
        }
    }
}

/// Scaffold a standalone project: its machines, its worker with a Rust action, the
/// relay and sweeper, template.yaml, samconfig.toml and event samples.
#[derive(Args)]
pub struct InitArgs {
    /// The new project's directory (missing or empty).
    pub dir: PathBuf,
    /// The project's name (its binaries are NAME-worker, ...); default: DIR's name.
    #[arg(long)]
    pub name: Option<String>,
    /// A checkout of stm to depend on by path; default: the one this stm was built from.
    #[arg(long, value_name = "PATH", conflicts_with = "stm_git")]
    pub stm_path: Option<PathBuf>,
    /// A git repository of stm to depend on instead.
    #[arg(long, value_name = "URL")]
    pub stm_git: Option<String>,
}

/// `stm init`: refuse a non-empty DIR, then write the project and say what to run next.
pub fn init(args: InitArgs) -> Result<ExitCode> {
    let source = source(args.stm_path.as_deref(), args.stm_git.as_deref())?;
    let name = match args.name {
        Some(name) => check_project_name(&name)?,
        None => {
            let stem = args
                .dir
                .file_name()
                .map(|n| n.to_string_lossy().to_lowercase())
                .unwrap_or_default();
            check_project_name(&stem).map_err(|_| {
                usage(format!(
                    "{} does not make a project name (lower-case letters, digits, - and _, \
                     starting with a letter): pass --name NAME",
                    args.dir.display()
                ))
            })?
        }
    };
    if args.dir.is_file() {
        return Err(usage(format!(
            "{} is a file: name a new directory",
            args.dir.display()
        )));
    }
    if args.dir.is_dir()
        && std::fs::read_dir(&args.dir)
            .with_context(|| format!("cannot read {}", args.dir.display()))?
            .next()
            .is_some()
    {
        return Err(usage(format!(
            "{} is not empty: stm init writes a new project into an empty or missing directory",
            args.dir.display()
        )));
    }
    let lock = match &source {
        StmSource::Path(root) => std::fs::read_to_string(root.join("Cargo.lock")).ok(),
        StmSource::Git(_) => None,
    };
    for (path, text) in files(&name, &source, lock.as_deref())? {
        let path = args.dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let dir = shell_word(&args.dir.to_string_lossy());
    println!("created the project {name} in {}", args.dir.display());
    println!("next:");
    println!("  cd {dir}");
    println!("  stm validate machines/{name}.stm");
    println!("  cargo run -p {name}-worker -- serve-actions   # then, in a second shell:");
    println!("  STM_ACTIONS=... stm run machines/{name}.stm -e 'Greet:{{\"name\": \"Ada\"}}' -e Finish");
    println!("  sam build && sam deploy --guided");
    Ok(ExitCode::SUCCESS)
}

/// `--stm-path`, `--stm-git`, or the checkout this `stm` was built from.
fn source(path: Option<&Path>, git: Option<&str>) -> Result<StmSource> {
    let checkout = |root: &Path| root.join("shared/lambda/Cargo.toml").is_file();
    match (path, git) {
        (Some(_), Some(_)) => Err(usage("pass --stm-path or --stm-git, not both")),
        (None, Some(url)) if url.trim().is_empty() => Err(usage("--stm-git needs a URL")),
        (None, Some(url)) => Ok(StmSource::Git(url.to_string())),
        (Some(root), None) => {
            let root = std::fs::canonicalize(root)
                .map_err(|e| usage(format!("--stm-path {}: {e}", root.display())))?;
            if !checkout(&root) {
                return Err(usage(format!(
                    "--stm-path {} is not a checkout of stm (it has no shared/lambda/Cargo.toml)",
                    root.display()
                )));
            }
            Ok(StmSource::Path(root))
        }
        (None, None) => {
            let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            match std::fs::canonicalize(&built_from) {
                Ok(root) if checkout(&root) => Ok(StmSource::Path(root)),
                _ => Err(usage(
                    "the stm checkout this binary was built from is gone: pass --stm-path PATH (a \
                     checkout of stm) or --stm-git URL",
                )),
            }
        }
    }
}

/// A Cargo package name (the binaries are `NAME-worker` and so on): lower-case ASCII
/// letters, digits, `-` and `_`, starting with a letter, at most 40 characters.
fn check_project_name(name: &str) -> Result<String> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && name.len() <= 40;
    if ok {
        Ok(name.to_string())
    } else {
        Err(usage(format!(
            "{name:?} is not a project name: use lower-case letters, digits, - and _, starting \
             with a letter (at most 40)"
        )))
    }
}

/// The machine's name and the action's module: the project name as an identifier.
fn identifier(name: &str) -> String {
    name.replace('-', "_")
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// Every file of the project, by path inside it.
pub fn files(name: &str, source: &StmSource, lock: Option<&str>) -> Result<Vec<(String, String)>> {
    let ident = identifier(name);
    let mut files = vec![
        ("Cargo.toml".to_string(), workspace_manifest(source)?),
        (".gitignore".to_string(), "/target\n/.aws-sam\n".to_string()),
        (
            "functions/worker/Cargo.toml".to_string(),
            function_manifest(
                name,
                "worker",
                "The worker Lambda function, with the machines' actions.",
                true,
            ),
        ),
        ("functions/worker/src/main.rs".to_string(), worker_main(&ident)),
        (
            "functions/relay/Cargo.toml".to_string(),
            function_manifest(name, "relay", "The relay Lambda function.", false),
        ),
        ("functions/relay/src/main.rs".to_string(), RELAY_MAIN.to_string()),
        (
            "functions/sweeper/Cargo.toml".to_string(),
            function_manifest(name, "sweeper", "The sweeper Lambda function.", false),
        ),
        (
            "functions/sweeper/src/main.rs".to_string(),
            SWEEPER_MAIN.to_string(),
        ),
        (format!("machines/{name}.stm"), machine(&ident)),
        ("template.yaml".to_string(), template(name)?),
        ("samconfig.toml".to_string(), samconfig(name)?),
        ("events/worker-greet.json".to_string(), worker_sample(&ident)),
        (
            "events/relay-scheduled.json".to_string(),
            RELAY_SAMPLE.to_string(),
        ),
        (
            "events/sweeper-scheduled.json".to_string(),
            SWEEPER_SAMPLE.to_string(),
        ),
        (
            "events/sam-local/env-vars.json".to_string(),
            SAM_LOCAL_ENV.to_string(),
        ),
        (
            "events/sam-local/checks.json".to_string(),
            sample_checks(name, &ident),
        ),
        ("README.md".to_string(), readme(name, &ident)),
    ];
    if let Some(lock) = lock {
        // the stm checkout's resolved versions: the project builds offline from what the
        // checkout's build fetched, and a shared target dir reuses its compiled crates
        files.push(("Cargo.lock".to_string(), lock.to_string()));
    }
    Ok(files)
}

/// Replace `from` (which must occur exactly `times` times) in `text`: the generation from
/// the repository's files fails loudly, at test time, if they change under it.
fn replace(text: &str, from: &str, to: &str, times: usize, file: &str) -> Result<String> {
    let found = text.matches(from).count();
    anyhow::ensure!(
        found == times,
        "stm init's generation of {file} expected {from:?} {times} time(s) in stm's own {file}, \
         found it {found} time(s)"
    );
    Ok(text.replace(from, to))
}

/// Cut the lines from the one starting with `first` through the next blank line.
fn cut_paragraph(text: &str, first: &str, file: &str) -> Result<String> {
    let start = text
        .find(first)
        .with_context(|| format!("stm init's generation of {file}: no {first:?} in stm's own {file}"))?;
    let end = text[start..].find("\n\n").map_or(text.len(), |i| start + i + 2);
    Ok(format!("{}{}", &text[..start], &text[end..]))
}

/// This repository's template for a project named `name`: its machines in `machines/`,
/// its binaries `NAME-worker`, `NAME-relay`, `NAME-sweeper`, and no note about checks
/// that live in stm's own test suite.
pub fn template(name: &str) -> Result<String> {
    let file = "template.yaml";
    let mut text = cut_paragraph(TEMPLATE, "# Invariants that shared/deploytest checks", file)?;
    text = replace(
        &text,
        "      ContentUri: examples/\n",
        "      ContentUri: machines/\n",
        1,
        file,
    )?;
    text = replace(&text, "(examples/lib)", "(machines/lib, say)", 1, file)?;
    text = replace(
        &text,
        "(shared/deploytest derives those from the code and compares)",
        "(stm's own tests derive those from its code and compare)",
        1,
        file,
    )?;
    text = replace(
        &text,
        "`sam local invoke` (scripts/sam-local.sh).",
        "`sam local invoke` (stm's scripts/sam-local.sh).",
        1,
        file,
    )?;
    for function in ["worker", "relay", "sweeper"] {
        text = replace(
            &text,
            &format!("        Binary: {function}\n"),
            &format!("        Binary: {name}-{function}\n"),
            1,
            file,
        )?;
    }
    Ok(text)
}

fn samconfig(name: &str) -> Result<String> {
    let file = "samconfig.toml";
    let mut text = replace(
        SAMCONFIG,
        "stack_name = \"stm\"",
        &format!("stack_name = \"{name}\""),
        1,
        file,
    )?;
    text = replace(
        &text,
        "s3_prefix = \"stm\"",
        &format!("s3_prefix = \"{name}\""),
        1,
        file,
    )?;
    replace(
        &text,
        "#   bash .ci/setup.sh && export PATH=\"$PWD/.venv/bin:$PATH\"\n",
        "#   pip install cargo-lambda ziglang   (and a `zig` wrapper: stm's .ci/setup.sh writes one)\n",
        1,
        file,
    )
}

/// The workspace: the three functions, the stm crates, and stm's own profiles.
fn workspace_manifest(source: &StmSource) -> Result<String> {
    let profiles = WORKSPACE_MANIFEST
        .find("\n[profile.")
        .map(|i| &WORKSPACE_MANIFEST[i + 1..])
        .context("stm init: stm's Cargo.toml has no [profile.*] section to carry over")?;
    let edition = WORKSPACE_MANIFEST
        .lines()
        .find_map(|l| l.strip_prefix("edition = "))
        .unwrap_or("\"2021\"");
    Ok(format!(
        "[workspace]\n\
         resolver = \"2\"\n\
         members = [\"functions/worker\", \"functions/relay\", \"functions/sweeper\"]\n\
         \n\
         [workspace.package]\n\
         version = \"0.1.0\"\n\
         edition = {edition}\n\
         \n\
         [workspace.dependencies]\n\
         {}\
         stm-lambda = {}\n\
         stm-runtime = {}\n\
         serde_json = \"1\"\n\
         tokio = {{ version = \"1\", features = [\"macros\", \"rt-multi-thread\"] }}\n\
         \n\
         {profiles}",
        source.note(),
        source.dependency("shared/lambda", ""),
        source.dependency("shared/runtime", ", features = [\"aws\"]"),
    ))
}

fn function_manifest(name: &str, function: &str, description: &str, worker: bool) -> String {
    let extra = if worker {
        "stm-runtime.workspace = true\nserde_json.workspace = true\n"
    } else {
        ""
    };
    format!(
        "[package]\n\
         name = \"{name}-{function}\"\n\
         description = \"{description}\"\n\
         version.workspace = true\n\
         edition.workspace = true\n\
         publish = false\n\
         \n\
         [[bin]]\n\
         name = \"{name}-{function}\"\n\
         path = \"src/main.rs\"\n\
         \n\
         [dependencies]\n\
         stm-lambda.workspace = true\n\
         {extra}tokio.workspace = true\n"
    )
}

fn worker_main(ident: &str) -> String {
    format!(
        r#"//! The worker Lambda function: SQS FIFO batches -> statechart steps, with the Rust
//! actions the machines in `machines/` call.
//!
//! Locally, `cargo run -p <project>-worker -- serve-actions` serves these actions over
//! HTTP and prints the `STM_ACTIONS` line that lets `stm run` and `stm local` call them.

use stm_runtime::ActionRegistry;

/// The actions, by the names the `.stm` files call them.
fn actions() -> ActionRegistry {{
    let mut actions = ActionRegistry::with_builtins();
    // An async action: it may await an SDK call (the worker's DynamoDB and SQS clients
    // are in `input.state::<aws_sdk_dynamodb::Client>()` and the like; add your own with
    // `ActionRegistry::with_state`). What it puts in the context is committed with the
    // step; its value is what a `select` routes on; an error (`?` on any
    // std::error::Error) is routed by `on error` on its type name.
    actions.register_async("{ident}.greet", async |input| {{
        let name = input
            .event
            .and_then(|event| event.data.get("name"))
            .and_then(|name| name.as_str())
            .unwrap_or("world");
        let greeting = input.inputs.get("greeting").and_then(|g| g.as_str()).unwrap_or("Hello");
        input
            .context
            .insert("greeting".into(), format!("{{greeting}}, {{name}}!").into());
        Ok(serde_json::json!("greeted"))
    }});
    actions
}}

#[tokio::main]
async fn main() -> std::process::ExitCode {{
    stm_lambda::run_worker(actions()).await
}}
"#
    )
}

fn machine(ident: &str) -> String {
    format!(
        r#"# The {ident} machine: `Greet` runs the Rust action {ident}.greet (functions/worker),
# which writes context.greeting; `Finish` ends it.
#
#   stm validate machines/{ident}.stm
#   stm run machines/{ident}.stm -e 'Greet:{{"name": "Ada"}}' -e Finish   (with STM_ACTIONS set)

event Greet {{ name: string }}
event Finish {{}}

machine {ident} {{
  initial Waiting

  state Waiting {{}}
  state Greeted {{}}
  final Done done

  from Waiting select {ident}.greet(greeting: "Hello") on Greet {{
    "greeted" to Greeted
    else to Waiting
  }}
  from Greeted to Done on Finish
}}
"#
    )
}

/// What each sample leaves, for `scripts/sam-local.sh` (`STM_PROJECT`) and the project's
/// own checks: the executions the samples address, created first, then each sample in the
/// order it is invoked with what it must leave. A sample in `events/` that is not listed
/// stops the script.
fn sample_checks(name: &str, ident: &str) -> String {
    let id = format!("{}-1", ident.replace('_', "-"));
    let greeted =
        serde_json::json!({"status": "RUNNING", "active_path": "Greeted", "context.greeting": "Hello, Ada!"});
    let checks = serde_json::json!({
        "setup": [{"file": format!("machines/{name}.stm"), "machine": ident, "id": id}],
        "samples": [
            {"sample": "worker-greet.json", "batchItemFailures": [], "executions": {&id: greeted}},
            // nothing pending, nothing due: each answers and leaves the execution as it was
            {"sample": "relay-scheduled.json", "executions": {&id: greeted}},
            {"sample": "sweeper-scheduled.json", "executions": {&id: greeted}},
        ],
    });
    format!("{}\n", serde_json::to_string_pretty(&checks).unwrap_or_default())
}

/// One SQS FIFO record for execution `ID-1`: `Greet` with a name.
fn worker_sample(ident: &str) -> String {
    let id = format!("{}-1", ident.replace('_', "-"));
    let body = serde_json::json!({"id": format!("evt-{id}-greet"), "kind": "Greet", "data": {"name": "Ada"}});
    let record = serde_json::json!({
        "Records": [{
            "messageId": "0e8f1a52-0000-4000-8000-000000000001",
            "receiptHandle": "AQEB0e8f1a52000040008000000000000001ExampleReceiptHandle",
            "body": body.to_string(),
            "attributes": {
                "ApproximateReceiveCount": "1",
                "SentTimestamp": "1767225600000",
                "SenderId": "AIDAIENQZJOLO23YVJ4VO",
                "ApproximateFirstReceiveTimestamp": "1767225600010",
                "SequenceNumber": "18849496460467696128",
                "MessageGroupId": id,
                "MessageDeduplicationId": "0e8f1a52-0000-4000-8000-000000000001"
            },
            "messageAttributes": {},
            // as in stm's own samples: the worker does not check it
            "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:harel.fifo",
            "awsRegion": "us-east-1"
        }]
    });
    format!("{}\n", serde_json::to_string_pretty(&record).unwrap_or_default())
}

fn readme(name: &str, ident: &str) -> String {
    format!(
        r#"# {name}

Durable statecharts on AWS Lambda with stm (made by `stm init`): the machine is
`machines/{name}.stm`, its Rust action `{ident}.greet` is in `functions/worker/src/main.rs`.

```sh
stm validate machines/{name}.stm
cargo run -p {name}-worker -- serve-actions      # prints STM_ACTIONS=...; keep it running
# in a second shell, with that line exported:
stm run machines/{name}.stm -e 'Greet:{{"name": "Ada"}}' -e Finish
stm local --definitions machines                  # the whole stack on moto
sam build && sam deploy --guided                  # to AWS
```

`events/` holds a sample for each function (`sam local invoke Worker -e
events/worker-greet.json`, with `events/sam-local/env-vars.json`);
`events/sam-local/checks.json` says what each leaves (the executions it addresses, created
first), which stm's `scripts/sam-local.sh` checks with `STM_PROJECT` set to this folder.
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_is_stms_own_with_the_projects_machines_and_binaries() {
        let text = template("shop").expect("generated");
        assert!(text.contains("      ContentUri: machines/\n"));
        assert!(!text.contains("examples/"));
        assert!(!text.contains("shared/deploytest"));
        for function in ["worker", "relay", "sweeper"] {
            assert!(text.contains(&format!("        Binary: shop-{function}\n")));
        }
        // everything else is stm's template, line for line
        let kept = TEMPLATE.lines().filter(|l| text.lines().any(|t| t == *l)).count();
        assert!(
            kept + 20 >= TEMPLATE.lines().count(),
            "{kept} of {} lines kept",
            TEMPLATE.lines().count()
        );
    }

    #[test]
    fn the_manifest_says_where_stms_crates_come_from_and_how_to_switch() {
        let path = StmSource::Path(PathBuf::from("/src/stm"));
        let git = StmSource::Git("https://example.invalid/stm.git".into());
        let from_path = workspace_manifest(&path).expect("manifest");
        assert!(from_path.contains("stm-lambda = { path = \"/src/stm/shared/lambda\" }"));
        assert!(
            from_path.contains("or run stm init --stm-git URL."),
            "{from_path}"
        );
        let from_git = workspace_manifest(&git).expect("manifest");
        assert!(from_git.contains("stm-lambda = { git = \"https://example.invalid/stm.git\" }"));
        assert!(from_git.contains("or run stm init --stm-path DIR."), "{from_git}");
    }

    #[test]
    fn project_names_are_checked() {
        assert!(check_project_name("shop-2").is_ok());
        for bad in ["", "Shop", "2shop", "shop!", "-shop"] {
            assert!(check_project_name(bad).is_err(), "{bad:?}");
        }
    }
}
