//! The cold start: a broken definitions directory or a bad function variable fails it,
//! naming the file:line:col, the machine, the action or the variable.

use std::path::{Path, PathBuf};

use serde_json::Value;
use stm_runtime::config::{self, ConfigError, FunctionConfig};
use stm_runtime::{ActionRegistry, Definitions};

// --- broken definitions directories ------------------------------------------------

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        TempDir(stm_testkit::scratch_dir(&format!("bad-input-{tag}")))
    }
    fn write(&self, name: &str, text: &[u8]) -> &Self {
        std::fs::write(self.0.join(name), text).expect("write");
        self
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The error a function's cold start reports for this loading failure (stm-lambda words it
/// `worker init failed: configuration error: ...`).
fn config_error(result: Result<Definitions, ConfigError>) -> String {
    match result {
        Err(err) => err.to_string(),
        Ok(defs) => panic!("loaded {} definitions", defs.len()),
    }
}

const GOOD: &str =
    "event Go {}\nmachine Good {\n  initial A\n  state A {}\n  final B success\n  from A to B on Go\n}\n";

#[test]
fn a_broken_definitions_directory_fails_the_cold_start_naming_the_place() {
    // (a) a syntax error: file:line:col, after a good file (one bad file fails it all)
    let dir = TempDir::new("syntax");
    dir.write("a_good.stm", GOOD.as_bytes()).write(
        "b_broken.stm",
        b"machine M {\n  initial A\n  state A {}\n  from A to A on\n}\n",
    );
    let text = config_error(config::load_definitions_dir(dir.path()));
    let file = dir.path().join("b_broken.stm").display().to_string();
    assert!(
        text.contains(&format!("invalid definition file {file}")),
        "{text}"
    );
    assert!(text.contains(&format!("--> {file}:5:1")), "file:line:col: {text}");

    // (a') not UTF-8
    let dir = TempDir::new("binary");
    dir.write("bin.stm", &[0xff, 0xfe, 0x00, 0x41]);
    let text = config_error(config::load_definitions_dir(dir.path()));
    assert!(text.contains("bin.stm"), "{text}");

    // (a'') a transition to a state that does not exist: resolved while loading
    let dir = TempDir::new("unresolved");
    dir.write(
        "lost.stm",
        b"machine Lost {\n  initial A\n  state A {}\n  from A to Nowhere on Go\n}\n",
    );
    let text = config_error(config::load_definitions_dir(dir.path()));
    let file = dir.path().join("lost.stm").display().to_string();
    assert!(
        text.contains("cannot resolve transition target 'Nowhere'"),
        "{text}"
    );
    assert!(text.contains(&format!("--> {file}:4:13")), "{text}");

    // (b) a validation error: the file, the machine, the finding and where
    let dir = TempDir::new("invalid");
    dir.write(
        "broken.stm",
        b"event Go {}\nmachine Broken {\n  initial A\n  state A {}\n  state B {}\n  from A to B on Go\n}\n",
    );
    let text = config_error(config::load_definitions_dir(dir.path()));
    let file = dir.path().join("broken.stm").display().to_string();
    assert!(
        text.contains(&format!("{file}: machine Broken is not valid")),
        "{text}"
    );
    assert!(
        text.contains("error[terminal_missing_outcome]: ")
            && text.contains(&format!("--> {file}:5:3"))
            && text.contains("5 |   state B {}"),
        "as `stm validate` shows it: {text}"
    );

    // (c) an action nothing binds: loads, and check_actions names machine and action
    let dir = TempDir::new("unbound");
    dir.write(
        "unbound.stm",
        b"event Go {}\nmachine Hooks {\n  initial A\n  state A { on enter billing.charge(amount: 1) }\n  \
          final B success\n  from A to B on Go\n}\n",
    );
    let defs = config::load_definitions_dir(dir.path()).expect("it parses and validates");
    let err = config::check_actions(&defs, &ActionRegistry::with_builtins()).expect_err("unbound");
    assert_eq!(
        err.to_string(),
        "machine Hooks: unbound actions: billing.charge \
         (register them in the worker's ActionRegistry, or bind them with STM_ACTIONS; on \
         `stm local` or `stm run`, serve the worker's actions with `cargo run -p <project>-worker \
         -- serve-actions` and export the STM_ACTIONS line it prints)"
    );
    let mut registry = ActionRegistry::with_builtins();
    registry.register("billing.charge", |_| Ok(Value::Null));
    config::check_actions(&defs, &registry).expect("bound");

    // (d) an empty directory (or one without *.stm), and a missing one
    let dir = TempDir::new("empty");
    dir.write("README.md", b"# not a machine\n")
        .write("order.stm.bak", GOOD.as_bytes());
    let text = config_error(config::load_definitions_dir(dir.path()));
    assert_eq!(
        text,
        format!("no machine found in {}/*.stm", dir.path().display())
    );
    let missing = dir.path().join("nope");
    let text = config_error(config::load_definitions_dir(&missing));
    assert!(
        text.starts_with(&format!(
            "cannot read the definitions directory {}: ",
            missing.display()
        )),
        "{text}"
    );
    // a file where the directory should be
    let text = config_error(config::load_definitions_dir(&dir.path().join("README.md")));
    assert!(text.contains("cannot read the definitions directory"), "{text}");
}

// --- the functions' configuration --------------------------------------------------

/// The configuration from `vars`, or the error a cold start reports.
fn from_env(vars: &[(&str, &str)]) -> Result<FunctionConfig, ConfigError> {
    let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    FunctionConfig::from_lookup(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
}

#[test]
fn each_bad_variable_is_named_in_the_error() {
    const QUEUE: (&str, &str) = ("STM_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/q.fifo");
    let ok = from_env(&[QUEUE]).expect("the minimum");
    assert!(!ok.trace);
    assert_eq!(ok.processed_ttl_days, None);
    for days in ["1", "30", "36500"] {
        let ok = from_env(&[QUEUE, ("STM_PROCESSED_TTL_DAYS", days)]).expect(days);
        assert_eq!(ok.processed_ttl_days, days.parse().ok());
        let ok = from_env(&[QUEUE, ("STM_FINISHED_TTL_DAYS", days)]).expect(days);
        assert_eq!(ok.finished_ttl_days, days.parse().ok());
    }

    // (variable, value, why): the error names the variable and the value, and says why
    let days = "expected a whole number of days from 1 to 36500 (unset keeps the marks)";
    let finished_days =
        "expected a whole number of days from 1 to 36500 (unset keeps finished executions until a purge)";
    let cases: &[(&str, &str, &str)] = &[
        ("STM_TRACE", "maybe", "expected true or false"),
        ("STM_TRACE_MAX", "-1", "expected a whole number"),
        ("STM_TRACE_MAX", "lots", "expected a whole number"),
        ("STM_PROCESSED_TTL_DAYS", "x", days),
        ("STM_PROCESSED_TTL_DAYS", "-3", days),
        ("STM_PROCESSED_TTL_DAYS", "1.5", days),
        // 0 would write marks that are already expired (the template leaves it unset for
        // "keep forever"); a huge count overflowed `days * 86_400` in `store()`
        ("STM_PROCESSED_TTL_DAYS", "0", days),
        ("STM_PROCESSED_TTL_DAYS", "300000000000000", days),
        ("STM_FINISHED_TTL_DAYS", "0", finished_days),
        ("STM_FINISHED_TTL_DAYS", "ninety", finished_days),
        ("STM_FINISHED_TTL_DAYS", "36501", finished_days),
        (
            "STM_ACTION_TIMEOUT_SECONDS",
            "0",
            "expected seconds, above 0 and at most 900",
        ),
        (
            "STM_ACTION_TIMEOUT_SECONDS",
            "1000",
            "expected seconds, above 0 and at most 900",
        ),
        (
            "STM_ACTION_TIMEOUT_SECONDS",
            "NaN",
            "expected seconds, above 0 and at most 900",
        ),
        (
            "STM_ACTION_MAX_RESPONSE_BYTES",
            "0",
            "expected a positive whole number",
        ),
        // STM_ACTIONS names the entry
        (
            "STM_ACTIONS",
            "charge",
            "expected name=lambda:<function> or name=https://<url>",
        ),
        (
            "STM_ACTIONS",
            "charge=ftp://x",
            "the target must start with lambda:, https://",
        ),
        ("STM_ACTIONS", "charge=lambda:", "no function name after lambda:"),
        (
            "STM_ACTIONS",
            "c=http://example.com/x",
            "plain http:// is only allowed to a loopback host",
        ),
        ("STM_ACTIONS", "a=lambda:f,a=lambda:g", "a is bound twice"),
    ];
    for (name, value, why) in cases {
        let err = from_env(&[QUEUE, (name, value)]).expect_err(&format!("{name}={value}"));
        let text = err.to_string();
        let named = if *name == "STM_ACTIONS" {
            let entry = value.rsplit(',').next().unwrap_or(value);
            format!("STM_ACTIONS entry {entry:?}: {why}")
        } else {
            format!("{name}={value:?}: {why}")
        };
        assert!(text.starts_with(&named), "{name}={value}: {text:?}");
    }

    // a missing or blank queue URL
    for vars in [vec![], vec![("STM_QUEUE_URL", "  ")]] {
        let err = from_env(&vars).expect_err("no queue");
        assert_eq!(
            err.to_string(),
            "STM_QUEUE_URL is required (the FIFO event queue's URL)"
        );
    }
    // flags take the usual spellings; blank means unset
    for (value, want) in [
        ("TRUE", true),
        ("on", true),
        ("0", false),
        ("no", false),
        (" ", false),
    ] {
        assert_eq!(
            from_env(&[QUEUE, ("STM_TRACE", value)]).expect("flag").trace,
            want,
            "{value:?}"
        );
    }
}
