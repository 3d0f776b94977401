//! Every fenced block of README.md and of the book (`docs/**/*.md`) is checked by its info
//! string, so a document that drifts from the code fails the test run:
//!
//! - `stm`: validated with the real `stm validate` (its imports resolve against a copy of
//!   `examples/lib/`);
//! - `console`: a transcript: each `$ ` line (with `\` continuations) is run (`stm …`, or
//!   `cargo run [--profile quick] -p stm [--no-default-features] -- …`, as the built `stm`), in a scratch
//!   directory that sees `examples/`, and what follows it, up to the next `$ `, is what it
//!   must print (stdout then stderr; versions, ids and times normalised; a `...` line
//!   stands for any lines); `cd DIR` moves the rest of the transcript;
//! - `rust`: compiled as a module of the worker of a fresh `stm init` project, with the
//!   book's `toml,worker-dependencies` blocks added to that worker's dependencies; the
//!   chapter's `hello.audit` action is then served and run by `stm run`, and must have
//!   written its key to a table on moto; the `yaml,template-*` blocks are put at their
//!   places in that project's `template.yaml` (as they are), which must pass cfn-lint and
//!   grant the worker what the action writes;
//! - `sh`: parsed with `bash -n`, and every script of this repository it names must exist
//!   (these need AWS, SAM or Docker, so they are not run);
//! - `json`: parsed;
//! - `text`, `yaml` (but `yaml,template-*`), `toml`, `lua`: not run, deliberately (sample
//!   output, excerpts, editor configurations), see [`NOT_RUN`];
//! - no info string, or another one: a failure, so nothing escapes unchecked.
//!
//! Blocks after a `<!-- newcomer: NAME -->` marker are run by `newcomer.rs` too, which
//! must read that NAME.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{repo, served_bindings, shell_words, stderr, stdout, stm_command, target_dir};

/// Info strings whose blocks are not run, and why.
const NOT_RUN: &[(&str, &str)] = &[
    (
        "text",
        "sample output, wire formats, logs of runs that need AWS or Docker",
    ),
    (
        "yaml",
        "template excerpts (the template itself is linted by cfn-lint)",
    ),
    (
        "toml",
        "editor and manifest configurations (a `toml,worker-dependencies` block is built)",
    ),
    ("lua", "an editor configuration"),
];

/// The info strings that are checked.
const CHECKED: &[&str] = &["stm", "console", "rust", "sh", "json"];

#[derive(Debug, Clone)]
struct Block {
    file: String,
    /// The line of the opening fence (1-based).
    line: usize,
    lang: String,
    attrs: Vec<String>,
    body: String,
    /// The `<!-- newcomer: NAME -->` marker this block follows, if any.
    newcomer: Option<String>,
}

impl Block {
    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// README.md and every .md under docs/, relative to the repository.
fn documents() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut out = vec![repo().join("README.md")];
    walk(&repo().join("docs"), &mut out);
    out
}

fn blocks_of(path: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = path.strip_prefix(repo()).unwrap_or(path).display().to_string();
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    // a marker applies to the two blocks after it (a command and its output)
    let mut marker: Option<(String, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(block) = open.as_mut() {
            if line.trim_start().starts_with("```") && line.trim() == "```" {
                out.push(open.take().expect("an open block"));
            } else {
                block.body.push_str(line);
                block.body.push('\n');
            }
            continue;
        }
        if let Some(name) = line
            .trim()
            .strip_prefix("<!-- newcomer: ")
            .and_then(|r| r.strip_suffix(" -->"))
        {
            marker = Some((name.to_string(), 2));
        } else if let Some(info) = line.trim_start().strip_prefix("```") {
            let mut parts = info.trim().split(',').map(str::trim);
            let lang = parts.next().unwrap_or_default().to_string();
            let newcomer = match marker.as_mut() {
                Some((name, left)) if *left > 0 => {
                    *left -= 1;
                    Some(name.clone())
                }
                _ => None,
            };
            open = Some(Block {
                file: file.clone(),
                line: i + 1,
                lang,
                attrs: parts.map(str::to_string).collect(),
                body: String::new(),
                newcomer,
            });
        }
    }
    assert!(open.is_none(), "{file}: a block is never closed");
    out
}

fn all_blocks() -> Vec<Block> {
    documents().iter().flat_map(|p| blocks_of(p)).collect()
}

fn blocks(lang: &str) -> Vec<Block> {
    all_blocks().into_iter().filter(|b| b.lang == lang).collect()
}

/// Fails with every message, each naming its block's file:line.
fn report(what: &str, failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} {what}:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stm-docs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

#[test]
fn every_block_says_what_it_is() {
    let known: Vec<&str> = CHECKED
        .iter()
        .copied()
        .chain(NOT_RUN.iter().map(|(l, _)| *l))
        .collect();
    let all = all_blocks();
    assert!(
        all.len() > 40,
        "the documents' blocks were not found: {}",
        all.len()
    );
    let mut failures = Vec::new();
    for block in &all {
        if block.lang.is_empty() {
            failures.push(format!(
                "{}: a block with no info string: say what it is ({})",
                block.at(),
                known.join(", ")
            ));
        } else if !known.contains(&block.lang.as_str()) {
            failures.push(format!(
                "{}: a block of `{}`, which this test does not check: use one of {}",
                block.at(),
                block.lang,
                known.join(", ")
            ));
        }
    }
    // the newcomer's blocks are read by newcomer.rs, by name
    let newcomer = std::fs::read_to_string(repo().join("cli/tests/newcomer.rs")).expect("newcomer.rs");
    for block in all.iter().filter(|b| b.newcomer.is_some()) {
        let name = block.newcomer.as_deref().unwrap_or_default();
        if !newcomer.contains(&format!("readme_blocks(\"{name}\")")) {
            failures.push(format!(
                "{}: after <!-- newcomer: {name} -->, which cli/tests/newcomer.rs does not read",
                block.at()
            ));
        }
    }
    report("blocks that do not say what they are", failures);
}

#[test]
fn the_book_lists_every_chapter() {
    let summary = std::fs::read_to_string(repo().join("docs/SUMMARY.md")).expect("docs/SUMMARY.md");
    let book = std::fs::read_to_string(repo().join("docs/book.toml")).expect("docs/book.toml");
    assert!(book.contains("src = \".\""), "{book}");
    let mut failures = Vec::new();
    for doc in documents().iter().skip(1) {
        let name = doc
            .strip_prefix(repo().join("docs"))
            .expect("under docs/")
            .display()
            .to_string();
        if name != "SUMMARY.md" && !summary.contains(&format!("({name})")) {
            failures.push(format!("docs/{name} is not in docs/SUMMARY.md"));
        }
    }
    for link in summary.split("](").skip(1) {
        let target = link.split(')').next().unwrap_or_default();
        if !repo().join("docs").join(target).is_file() {
            failures.push(format!("docs/SUMMARY.md links {target}, which does not exist"));
        }
    }
    report("problems with the book's summary", failures);
}

#[test]
fn links_to_files_lead_to_files() {
    let mut failures = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("a document");
        let dir = doc.parent().expect("a folder");
        for (n, line) in text.lines().enumerate() {
            for link in line.split("](").skip(1) {
                let target = link.split(')').next().unwrap_or_default();
                let file = target.split('#').next().unwrap_or_default();
                if file.is_empty() || file.contains("://") {
                    continue;
                }
                if !dir.join(file).exists() {
                    failures.push(format!(
                        "{}:{}: links {target}, which does not exist",
                        doc.strip_prefix(repo()).unwrap_or(&doc).display(),
                        n + 1
                    ));
                }
            }
        }
    }
    report("links to nothing", failures);
}

#[test]
fn stm_blocks_are_valid_machines() {
    let dir = scratch("stm");
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).expect("lib");
    for entry in std::fs::read_dir(repo().join("examples/lib")).expect("examples/lib") {
        let path = entry.expect("an entry").path();
        std::fs::copy(&path, lib.join(path.file_name().expect("a name"))).expect("copy");
    }
    let all = blocks("stm");
    assert!(all.len() >= 20, "the language chapter's examples: {}", all.len());
    let mut failures = Vec::new();
    for (i, block) in all.iter().enumerate() {
        let file = dir.join(format!("block{i}.stm"));
        std::fs::write(&file, &block.body).expect("write");
        let out = Command::new(env!("CARGO_BIN_EXE_stm"))
            .arg("validate")
            .arg(&file)
            .current_dir(&dir)
            .output()
            .expect("run stm validate");
        if !out.status.success() {
            failures.push(format!(
                "{}: `stm validate` refuses this block:\n{}{}",
                block.at(),
                stdout(&out),
                stderr(&out)
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    report("stm blocks that do not validate", failures);
}

/// Versions (16 hex digits), UUIDs and timestamps replaced by placeholders.
fn normalised(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut words = Vec::new();
        for word in line.split(' ') {
            let core = word.trim_matches(|c: char| "()[],:;\"'".contains(c));
            let hex = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit());
            let is_uuid = core.len() == 36
                && core.split('-').map(str::len).eq([8, 4, 4, 4, 12])
                && core.split('-').all(hex);
            let is_version = core.len() == 16 && hex(core);
            let is_time = core.len() >= 19
                && core.as_bytes()[4] == b'-'
                && core.as_bytes()[10] == b'T'
                && core[..4].chars().all(|c| c.is_ascii_digit());
            words.push(if is_uuid {
                word.replace(core, "<id>")
            } else if is_version {
                word.replace(core, "<version>")
            } else if is_time {
                word.replace(core, "<time>")
            } else {
                word.to_string()
            });
        }
        out.push_str(words.join(" ").trim_end());
        out.push('\n');
    }
    out
}

/// Whether `got` is `expected`, where a `...` line of `expected` matches any lines.
fn matches(expected: &[&str], got: &[&str]) -> bool {
    match expected.split_first() {
        None => got.is_empty(),
        Some((&"...", rest)) => (0..=got.len()).any(|skip| matches(rest, &got[skip..])),
        Some((line, rest)) => got.first() == Some(line) && matches(rest, &got[1..]),
    }
}

struct Step {
    /// The line of the `$ ` in its document.
    line: usize,
    command: String,
    expected: String,
}

fn transcript(block: &Block) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut continued = false;
    for (i, line) in block.body.lines().enumerate() {
        if let Some(command) = line.strip_prefix("$ ") {
            steps.push(Step {
                line: block.line + 1 + i,
                command: command.trim_end_matches('\\').to_string(),
                expected: String::new(),
            });
            continued = command.ends_with('\\');
        } else if let Some(step) = steps.last_mut() {
            if continued {
                step.command.push(' ');
                step.command.push_str(line.trim().trim_end_matches('\\'));
                continued = line.ends_with('\\');
            } else {
                step.expected.push_str(line);
                step.expected.push('\n');
            }
        }
    }
    steps
}

#[test]
fn console_transcripts_print_what_the_docs_show() {
    let all = blocks("console");
    assert!(!all.is_empty(), "no console transcript in the documents");
    let mut failures = Vec::new();
    for (n, block) in all.iter().enumerate() {
        let steps = transcript(block);
        if steps.is_empty() {
            failures.push(format!("{}: a console block with no `$ ` command", block.at()));
            continue;
        }
        let root = scratch(&format!("console{n}"));
        std::os::unix::fs::symlink(repo().join("examples"), root.join("examples")).expect("symlink");
        let mut cwd = root.clone();
        for step in steps {
            let at = format!("{}:{}", block.file, step.line);
            let mut words = shell_words(&step.command);
            let mut env = Vec::new();
            while let Some((k, v)) = words.first().and_then(|w| w.split_once('=')) {
                if !k.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                    break;
                }
                env.push((k.to_string(), v.to_string()));
                words.remove(0);
            }
            let args: Vec<String> = match words.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
                ["cd", dir] => {
                    cwd = cwd.join(dir);
                    continue;
                }
                ["stm", rest @ ..] => rest.iter().map(|s| s.to_string()).collect(),
                ["cargo", "run", "-p", "stm", "--no-default-features", "--", rest @ ..]
                | ["cargo", "run", "--profile", "quick", "-p", "stm", "--no-default-features", "--", rest @ ..]
                | ["cargo", "run", "-p", "stm", "--", rest @ ..] => {
                    rest.iter().map(|s| s.to_string()).collect()
                }
                _ => {
                    failures.push(format!(
                        "{at}: a transcript runs `stm` (or `cargo run -p stm --`) and `cd` only: {}",
                        step.command
                    ));
                    break;
                }
            };
            let mut cmd = stm_command(&args, &cwd);
            cmd.envs(env);
            let out = cmd.output().expect("run stm");
            let got = normalised(&format!("{}{}", stdout(&out), stderr(&out)));
            let expected = normalised(&step.expected);
            let expected_lines: Vec<&str> = expected.lines().collect();
            let got_lines: Vec<&str> = got.lines().collect();
            let fails = expected.lines().any(|l| l.starts_with("error"));
            if !matches(&expected_lines, &got_lines) {
                failures.push(format!(
                    "{at}: `{}` printed\n{got}where the document shows\n{expected}",
                    step.command
                ));
            } else if out.status.success() == fails {
                failures.push(format!(
                    "{at}: `{}` exited {:?}, which the document's output does not say",
                    step.command,
                    out.status.code()
                ));
            }
        }
        let _ = std::fs::remove_dir_all(&root);
    }
    report("transcripts that drifted", failures);
}

#[test]
fn sh_blocks_parse_and_name_scripts_that_exist() {
    let dir = scratch("sh");
    let mut failures = Vec::new();
    for (i, block) in blocks("sh").iter().enumerate() {
        let file = dir.join(format!("block{i}.sh"));
        std::fs::write(&file, &block.body).expect("write");
        let out = Command::new("bash")
            .arg("-n")
            .arg(&file)
            .output()
            .expect("run bash -n");
        if !out.status.success() {
            failures.push(format!(
                "{}: bash -n refuses this block:\n{}",
                block.at(),
                stderr(&out)
            ));
        }
        for (n, line) in block.body.lines().enumerate() {
            let code = line.split(" #").next().unwrap_or_default();
            for word in shell_words(code) {
                let word = word.trim_end_matches([';', ')']);
                let script = ["scripts/", ".ci/", "bench/"].iter().any(|p| word.starts_with(p))
                    && !word.contains(['$', '*', '<', '@', '='])
                    && !word.ends_with('/');
                if script && !repo().join(word).exists() {
                    failures.push(format!(
                        "{}:{}: names {word}, which is not in the repository",
                        block.file,
                        block.line + 1 + n
                    ));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    report("sh blocks that are wrong", failures);
}

/// A chapter whose `sh` blocks run a tool beyond the repository's own (`aws`) says the
/// reader needs it; and a block that points `stm send` at a deployment (its
/// `STM_QUEUE_URL`) points it at the deployment's machines too (`STM_DEFINITIONS_DIR`: without it
/// `stm send` skips its checks of the events, with a note).
#[test]
fn sh_blocks_name_what_they_need() {
    let mut failures = Vec::new();
    let mut documents: BTreeMap<String, String> = BTreeMap::new();
    for block in blocks("sh") {
        let text = documents
            .entry(block.file.clone())
            .or_insert_with(|| std::fs::read_to_string(repo().join(&block.file)).expect("read the document"));
        let runs_aws = block.body.lines().any(|line| {
            shell_words(line.split(" #").next().unwrap_or_default())
                .iter()
                .any(|w| w == "aws")
        });
        if runs_aws && !text.contains("the AWS CLI") {
            failures.push(format!(
                "{}: runs `aws`, and the chapter never says the reader needs the AWS CLI",
                block.at()
            ));
        }
        let sends_to_a_deployment = block.body.contains("STM_QUEUE_URL=")
            && !block.body.contains("stm local")
            && block.body.contains("stm send ");
        if sends_to_a_deployment && !block.body.contains("STM_DEFINITIONS_DIR=") {
            failures.push(format!(
                "{}: sets STM_QUEUE_URL for the commands that follow, but not STM_DEFINITIONS_DIR",
                block.at()
            ));
        }
    }
    report("sh blocks that need what the chapter does not say", failures);
}

#[test]
fn json_blocks_parse() {
    let mut failures = Vec::new();
    for block in blocks("json") {
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&block.body) {
            failures.push(format!("{}: not JSON: {e}", block.at()));
        }
    }
    report("json blocks that do not parse", failures);
}

#[test]
fn rust_blocks_compile_in_a_fresh_project() {
    let rust = blocks("rust");
    assert!(!rust.is_empty(), "no rust block in the documents");
    let dir = scratch("rust");
    // not `hello`: init.rs builds a `hello-worker` into the same target directory
    let project = dir.join("docs-hello");
    let out = common::stm_alone(&[
        "init",
        &project.display().to_string(),
        "--stm-path",
        &repo().display().to_string(),
    ]);
    assert!(out.status.success(), "stm init: {}", stderr(&out));

    // the book's dependency lines for the worker, then each block as a module of it
    let manifest = project.join("functions/worker/Cargo.toml");
    let mut toml = std::fs::read_to_string(&manifest).expect("the worker's manifest");
    for block in all_blocks()
        .iter()
        .filter(|b| b.lang == "toml" && b.attrs.iter().any(|a| a == "worker-dependencies"))
    {
        toml.push_str(&block.body);
    }
    std::fs::write(&manifest, toml).expect("write the manifest");
    let main = project.join("functions/worker/src/main.rs");
    let mut source = std::fs::read_to_string(&main).expect("the worker's main.rs");
    let mut modules = BTreeMap::new();
    for (i, block) in rust.iter().enumerate() {
        // a block the chapter puts in a file of the worker's: that file, as it is
        if let Some(file) = block.attrs.iter().find_map(|a| a.strip_prefix("worker-file=")) {
            let module = file.trim_end_matches(".rs").to_string();
            std::fs::write(project.join("functions/worker/src/").join(file), &block.body)
                .expect("write the block's file");
            modules.insert(module, block.clone());
            continue;
        }
        // the chapter's `main`, in place of the scaffold's (the scaffold's text is what
        // is cut, never the block's)
        if block.attrs.iter().any(|a| a == "worker-main") {
            let scaffold_main = "#[tokio::main]\nasync fn main() -> std::process::ExitCode {\n    \
                                 stm_lambda::run_worker(actions()).await\n}\n";
            assert!(
                source.contains(scaffold_main),
                "the scaffold's main.rs changed:\n{source}"
            );
            source = source.replace(scaffold_main, "");
            source.push_str(&block.body);
            continue;
        }
        let module = format!("doc_block_{i}");
        std::fs::write(
            project.join(format!("functions/worker/src/{module}.rs")),
            &block.body,
        )
        .expect("write the block");
        source.push_str(&format!("#[allow(dead_code)]\nmod {module};\n"));
        modules.insert(module, block.clone());
    }
    std::fs::write(&main, &source).expect("write main.rs");

    let built = Command::new(env!("CARGO"))
        .args([
            "build",
            "--offline",
            "-p",
            "docs-hello-worker",
            "--message-format",
            "short",
        ])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run cargo build");
    let mut log = stderr(&built);
    // name each failing block by its document's file:line (the block's line L is the
    // document's fence line plus L)
    for (module, block) in &modules {
        let path = format!("functions/worker/src/{module}.rs:");
        while let Some(at) = log.find(&path) {
            let rest = &log[at + path.len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let line: usize = digits.parse().unwrap_or(0);
            let named = format!("{}:{}:", block.file, block.line + line);
            log.replace_range(at..at + path.len() + digits.len() + 1, &named);
        }
    }
    assert!(
        built.status.success(),
        "the book's rust blocks do not compile in a fresh `stm init` project:\n{log}"
    );
    if source.contains("with_audit(") {
        the_audit_action_writes_its_key(&project);
    }
    the_template_blocks_deploy_the_action(&project);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Where each `yaml,template-*` block goes in a project's `template.yaml`: right after the
/// first line equal to the anchor, itself after the first line equal to `within` (the
/// resource it belongs to, when given).
const TEMPLATE_PLACES: &[(&str, Option<&str>, &str)] = &[
    ("template-resources", None, "Resources:"),
    (
        "template-worker-variables",
        Some("  Worker:"),
        "        Variables:",
    ),
    (
        "template-worker-policies",
        Some("  WorkerRole:"),
        "      Policies:",
    ),
];

/// The chapter's template blocks, as they are, at their places in the project's
/// `template.yaml`: cfn-lint passes, and the worker's role may put items in the table its
/// `AUDIT_TABLE` names.
fn the_template_blocks_deploy_the_action(project: &Path) {
    let path = project.join("template.yaml");
    let mut lines: Vec<String> = std::fs::read_to_string(&path)
        .expect("the project's template")
        .lines()
        .map(str::to_string)
        .collect();
    let mut applied = 0;
    for block in all_blocks().iter().filter(|b| b.lang == "yaml") {
        let Some(attr) = block.attrs.iter().find(|a| a.starts_with("template-")) else {
            continue;
        };
        let Some((_, within, anchor)) = TEMPLATE_PLACES.iter().find(|(name, _, _)| name == attr) else {
            panic!("{}: `yaml,{attr}` names no place this test knows", block.at());
        };
        let from = within.map_or(0, |w| {
            lines
                .iter()
                .position(|l| l == w)
                .unwrap_or_else(|| panic!("the project's template has no line {w:?}"))
        });
        let at = lines[from..]
            .iter()
            .position(|l| l == anchor)
            .map(|i| from + i + 1)
            .unwrap_or_else(|| panic!("the project's template has no line {anchor:?} after {within:?}"));
        let body: Vec<String> = block.body.lines().map(str::to_string).collect();
        lines.splice(at..at, body);
        applied += 1;
    }
    assert_eq!(applied, TEMPLATE_PLACES.len(), "the chapter's template blocks");
    std::fs::write(&path, lines.join("\n") + "\n").expect("write the template");

    let python =
        std::env::var("STM_PYTHON").unwrap_or_else(|_| repo().join(".venv/bin/python").display().to_string());
    let cfn_lint = Path::new(&python).with_file_name("cfn-lint");
    let linted = Command::new(&cfn_lint)
        .arg("template.yaml")
        .current_dir(project)
        .output()
        .expect("run cfn-lint");
    assert!(
        linted.status.success(),
        "cfn-lint on the project's template with the chapter's blocks:\n{}{}",
        stdout(&linted),
        stderr(&linted)
    );
    let template = stm_testkit::template::Template::load(&path).expect("the template");
    let variables = &template.properties("Worker").expect("Worker")["Environment"]["Variables"];
    assert_eq!(
        variables["AUDIT_TABLE"],
        serde_json::json!({"Ref": "AuditTable"}),
        "the worker's AUDIT_TABLE: {variables}"
    );
    let grants = stm_testkit::iam::role_grants(&template, "WorkerRole").expect("the worker's grants");
    assert!(
        grants.contains(&("dynamodb:PutItem".to_string(), "AuditTable".to_string())),
        "the worker's role may not put items in AuditTable: {}",
        stm_testkit::iam::show(&grants)
    );
}

/// A child process, killed and reaped when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The chapter's `hello.audit`, run: the worker serves it, `stm run` and then `stm local`
/// call it from a machine's `on enter`, and each step's idempotency key is in the audit
/// table after.
fn the_audit_action_writes_its_key(project: &Path) {
    let moto = stm_testkit::moto_blocking();
    let table = stm_testkit::unique_prefix("docs-audit");
    let endpoint = moto.endpoint().to_string();
    let boto = [("ENDPOINT", endpoint.as_str()), ("TABLE", table.as_str())];
    stm_testkit::run_python(
        "import boto3, os\n\
         d = boto3.client('dynamodb', endpoint_url=os.environ['ENDPOINT'], region_name='us-east-1',\n\
             aws_access_key_id='test', aws_secret_access_key='test')\n\
         d.create_table(TableName=os.environ['TABLE'], BillingMode='PAY_PER_REQUEST',\n\
             KeySchema=[{'AttributeName': 'key', 'KeyType': 'HASH'}],\n\
             AttributeDefinitions=[{'AttributeName': 'key', 'AttributeType': 'S'}])\n",
        &boto,
        "",
    );
    let mut served = Command::new(target_dir().join("debug/docs-hello-worker"))
        .args(["serve-actions", "127.0.0.1:0"])
        .env("AUDIT_TABLE", &table)
        .env("STM_ENDPOINT_URL", &endpoint)
        .env("STM_EMULATOR", "1")
        .env("AWS_REGION", "us-east-1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start serve-actions");
    let bindings = served_bindings(&mut served);
    // killed however the test ends (a failed assertion would leave it holding the output)
    let served = Killed(served);
    let machine = project.join("machines/audited.stm");
    std::fs::write(
        &machine,
        "event Go {}\nmachine audited {\n  initial Idle\n  state Idle {}\n  \
         state Audited { on enter hello.audit(level: \"info\") }\n  from Idle to Audited on Go\n  \
         from Audited to Idle on Go\n}\n",
    )
    .expect("write the machine");
    let ran = Command::new(env!("CARGO_BIN_EXE_stm"))
        .args(["run", "machines/audited.stm", "-e", "Go"])
        .current_dir(project)
        .env("STM_ACTIONS", &bindings)
        .output()
        .expect("run stm");
    assert!(
        ran.status.success() && stdout(&ran).contains("Go                   -> Audited"),
        "stm run with hello.audit served ({bindings}):\n{}{}",
        stdout(&ran),
        stderr(&ran)
    );
    // and on `stm local`, as the chapter runs it: the same served action, the same table
    let local = common::Local::start_with(
        "docs-audit",
        &project.join("machines"),
        &[("STM_ACTIONS".to_string(), bindings.clone())],
    );
    let machine_file = machine.display().to_string();
    local.ok(&["create", &machine_file, "audited", "--id", "audited-local"]);
    local.wait_show("audited-local", &["RUNNING", "at Idle"]);
    local.ok(&["send", "audited-local", "Go", "--wait"]);
    local.wait_show("audited-local", &["at Audited"]);
    drop(local);
    drop(served);
    let keys = stm_testkit::run_python(
        "import boto3, os\n\
         d = boto3.client('dynamodb', endpoint_url=os.environ['ENDPOINT'], region_name='us-east-1',\n\
             aws_access_key_id='test', aws_secret_access_key='test')\n\
         for item in d.scan(TableName=os.environ['TABLE'])['Items']:\n    print(item['key']['S'])\n",
        &boto,
        "",
    );
    let keys: Vec<&str> = keys.lines().collect();
    assert!(
        keys.len() == 2
            && keys.iter().all(|k| k.ends_with(":hello.audit"))
            && keys.iter().any(|k| k.contains("audited-local")),
        "the audit table holds {keys:?}: a key from `stm run`, one from `stm local`"
    );
}
