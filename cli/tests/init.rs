//! `stm init`: a project scaffolded outside this repository builds, validates, runs its
//! own Rust action, runs under `stm local`, answers a Lambda Runtime API over its
//! `events/` sample against moto (through the strict AWS layer, as the worker's role),
//! and its template passes cfn-lint, with no file of this repository edited.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{repo, served_bindings, stderr, stdout, stm_alone, target_dir, without_versions, Local};
use stm_deploytest::function_env;
use stm_deploytest::runtime_api::{Outcome, RuntimeApi};
use stm_testkit::Principal;

fn run(cmd: &mut Command) -> std::process::Output {
    cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"))
}

/// `worker serve-actions 127.0.0.1:0`, and the `STM_ACTIONS` line it prints.
struct Served {
    child: std::process::Child,
    bindings: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_actions(worker: &Path) -> Served {
    let mut child = Command::new(worker)
        .args(["serve-actions", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start serve-actions");
    let bindings = served_bindings(&mut child);
    Served { child, bindings }
}

#[test]
fn a_scaffolded_project_builds_validates_runs_and_deploys_as_it_is() {
    let dir = stm_testkit::scratch_dir("init");
    let project = dir.join("hello");

    // 1. the scaffold, from this checkout
    let out = stm_alone(&[
        "init",
        &project.display().to_string(),
        "--stm-path",
        &repo().display().to_string(),
    ]);
    assert!(out.status.success(), "stm init: {}", stderr(&out));
    assert!(
        stdout(&out).contains("created the project hello"),
        "{}",
        stdout(&out)
    );
    for file in [
        "Cargo.toml",
        "Cargo.lock",
        "functions/worker/src/main.rs",
        "functions/relay/src/main.rs",
        "functions/sweeper/src/main.rs",
        "machines/hello.stm",
        "template.yaml",
        "samconfig.toml",
        "events/worker-greet.json",
        "events/sam-local/env-vars.json",
        "events/sam-local/checks.json",
        "README.md",
    ] {
        assert!(project.join(file).is_file(), "stm init wrote no {file}");
    }
    // a second init over it is refused, and changes nothing
    let again = stm_alone(&["init", &project.display().to_string()]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("is not empty"), "{}", stderr(&again));

    // 2. it builds on its own, offline, at the versions of the checkout's lock
    let built = run(Command::new(env!("CARGO"))
        .args(["build", "--offline"])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", target_dir()));
    assert!(built.status.success(), "cargo build: {}", stderr(&built));
    let worker = target_dir().join("debug/hello-worker");
    for function in ["relay", "sweeper"] {
        assert!(target_dir().join(format!("debug/hello-{function}")).is_file());
    }

    // 3. validate, and run with its own Rust action served to `stm run`
    let stm = |args: &[&str], bindings: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_stm"));
        cmd.args(args).current_dir(&project).env_remove("STM_ACTIONS");
        if let Some(bindings) = bindings {
            cmd.env("STM_ACTIONS", bindings);
        }
        run(&mut cmd)
    };
    let validated = stm(&["validate", "machines/hello.stm"], None);
    assert!(validated.status.success(), "{}", stderr(&validated));
    assert_eq!(without_versions(&stdout(&validated)).trim(), "hello: ok");
    let unbound = stm(
        &["run", "machines/hello.stm", "-e", r#"Greet:{"name": "Ada"}"#],
        None,
    );
    assert!(!unbound.status.success());
    assert!(
        stderr(&unbound).contains("unbound actions: hello.greet"),
        "{}",
        stderr(&unbound)
    );
    let served = serve_actions(&worker);
    assert!(
        served.bindings.starts_with("hello.greet=http://127.0.0.1:"),
        "{}",
        served.bindings
    );
    let ran = stm(
        &[
            "run",
            "machines/hello.stm",
            "-e",
            r#"Greet:{"name": "Ada"}"#,
            "-e",
            "Finish",
        ],
        Some(&served.bindings),
    );
    assert!(ran.status.success(), "{}", stderr(&ran));
    assert_eq!(
        stdout(&ran),
        "(start)              -> Waiting\nGreet                -> Greeted\nFinish               -> Done\n\
         status: DONE  outcome: done\n"
    );
    let json = stm(
        &[
            "run",
            "machines/hello.stm",
            "-e",
            r#"Greet:{"name": "Ada"}"#,
            "--json",
        ],
        Some(&served.bindings),
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("JSON");
    assert_eq!(json["execution"]["context"]["greeting"], "Hello, Ada!");

    // 4. `stm local` on its machines, calling the served action
    let machines = project.join("machines");
    let local = Local::start_with(
        "init",
        &machines,
        &[("STM_ACTIONS".to_string(), served.bindings.clone())],
    );
    assert!(local
        .console()
        .contains("remote action hello.greet -> http://127.0.0.1:"));
    let machine_file = machines.join("hello.stm").display().to_string();
    local.ok(&["create", &machine_file, "hello", "--id", "hello-local"]);
    let sent = local.ok(&["send", "hello-local", r#"Greet:{"name": "Bo"}"#, "--wait"]);
    assert!(sent.contains("Greeted"), "{sent}");
    let shown = local.ok(&["show", "hello-local"]);
    assert!(shown.contains("Hello, Bo!"), "{shown}");

    // 5. the worker binary as Lambda runs it, over its events/ samples, as WorkerRole,
    // checked as the project's events/sam-local/checks.json says (what scripts/sam-local.sh
    // checks in SAM's containers): the executions it lists created first, then each worker
    // sample with the response and the executions it must leave
    let checks: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(project.join("events/sam-local/checks.json")).expect("checks.json"),
    )
    .expect("checks.json is JSON");
    let listed: Vec<&str> = checks["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .filter_map(|s| s["sample"].as_str())
        .collect();
    let mut present: Vec<String> = std::fs::read_dir(project.join("events"))
        .expect("events/")
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.ends_with(".json"))
        .collect();
    present.sort();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(
        sorted, present,
        "checks.json lists every sample of events/, and no other"
    );
    for entry in checks["setup"].as_array().expect("setup") {
        let file = project
            .join(entry["file"].as_str().expect("file"))
            .display()
            .to_string();
        let (machine, id) = (
            entry["machine"].as_str().expect("machine"),
            entry["id"].as_str().expect("id"),
        );
        local.ok(&["create", &file, machine, "--id", id]);
        // its Start goes over the queue: a PENDING execution takes nothing else (as harel)
        local.wait_show(id, &["RUNNING"]);
    }
    let queue_url = local
        .console()
        .split_whitespace()
        .find_map(|w| w.strip_prefix("STM_QUEUE_URL=").map(str::to_string))
        .expect("stm local printed its queue URL");
    let env_of = |name: &str| {
        local
            .env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let moto = stm_testkit::moto_blocking();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut checked = 0;
    for entry in checks["samples"].as_array().expect("samples") {
        let name = entry["sample"].as_str().expect("sample");
        if !name.starts_with("worker-") {
            continue;
        }
        let sample = std::fs::read_to_string(project.join("events").join(name)).expect("sample");
        let answer = runtime.block_on(async {
            let api = RuntimeApi::start().await.expect("a Runtime API");
            let mut env = vec![
                (
                    "STM_ENDPOINT_URL".to_string(),
                    moto.endpoint_as(Principal::Worker).to_string(),
                ),
                ("STM_TABLE_PREFIX".to_string(), env_of("STM_TABLE_PREFIX")),
                ("STM_QUEUE_URL".to_string(), queue_url.clone()),
                ("STM_DEFINITIONS_DIR".to_string(), machines.display().to_string()),
            ];
            env.extend(function_env::lambda_variables("hello-worker"));
            let mut child = function_env::spawn(&worker.display().to_string(), api.address(), &env);
            let id = api.invoke(&sample);
            let outcome = api.outcome(&id, Duration::from_secs(60)).await;
            let _ = child.start_kill();
            let log = child
                .wait_with_output()
                .await
                .map(|o| {
                    format!(
                        "{}{}",
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    )
                })
                .unwrap_or_default();
            (outcome, api.init_error(), log)
        });
        let (outcome, init_error, log) = answer;
        assert_eq!(init_error, None, "{log}");
        let Some(Outcome::Response(response)) = outcome else {
            panic!("{name}: the worker answered {outcome:?}\n{log}");
        };
        let response: serde_json::Value = serde_json::from_str(&response).expect("a JSON response");
        if let Some(failures) = entry.get("batchItemFailures") {
            assert_eq!(&response["batchItemFailures"], failures, "{name}: {log}");
        }
        // the worker committed before it answered: the step is there at once
        for (id, fields) in entry["executions"].as_object().expect("executions") {
            let shown = local.ok(&["show", id, "--json"]);
            let shown: serde_json::Value = serde_json::from_str(&shown).expect("show --json");
            for (field, want) in fields.as_object().expect("fields") {
                let got = field.split('.').fold(&shown, |v, part| &v[part]);
                assert_eq!(
                    got, want,
                    "{name}: execution {id}: {field}\n{shown}\nthe worker's log:\n{log}"
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked > 0,
        "checks.json checks no execution after a worker sample"
    );
    drop(local);
    drop(served);

    // 6. its template passes cfn-lint
    let python =
        std::env::var("STM_PYTHON").unwrap_or_else(|_| repo().join(".venv/bin/python").display().to_string());
    let cfn_lint = Path::new(&python).with_file_name("cfn-lint");
    assert!(
        cfn_lint.is_file(),
        "no cfn-lint at {} (run .ci/setup.sh)",
        cfn_lint.display()
    );
    let linted = run(Command::new(&cfn_lint).arg("template.yaml").current_dir(&project));
    assert!(
        linted.status.success(),
        "cfn-lint: {}{}",
        stdout(&linted),
        stderr(&linted)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
