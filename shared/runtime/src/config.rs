//! The functions' configuration (the environment variables ARCHITECTURE.md lists) and
//! the definitions directory, loaded and validated at init.
//!
//! Reading the configuration and loading definitions are plain Rust (the embedded runner
//! loads its machines here too); building the clients from it (the DynamoDB store, the
//! SQS client, remote actions) is `config/clients.rs`, feature `aws`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use stm_store::ExecutionStore;

use crate::actions::ActionRegistry;
use crate::definitions::Definitions;
use crate::driver::Driver;

// what a function builds from its configuration: the AWS clients (feature `aws`)
// the configuration's error type
mod error;
pub use error::ConfigError;

#[cfg(feature = "aws")]
mod clients;
#[cfg(feature = "aws")]
pub use clients::{aws_clients, provide_clients, provide_clients_from_env};

pub use stm_store::{DEFAULT_PREFIX, DEFAULT_REGION};

// The variables' names, each spelled once in stm-env, where the CLI's flags, `stm local` and
// the test kit take them from too: a writer and this reader cannot spell one two ways.
use stm_env as vars;
use stm_env::switch;

/// A retention of whole `days`, as the store takes it.
pub fn days(days: u64) -> Duration {
    Duration::from_secs(days.saturating_mul(86_400))
}

/// The longest `STM_PROCESSED_TTL_DAYS` or `STM_FINISHED_TTL_DAYS` taken (a century).
pub const MAX_RETENTION_DAYS: u64 = 36_500;

/// What every function reads from its environment.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionConfig {
    /// `STM_TABLE_PREFIX` (default `harel`).
    pub table_prefix: String,
    /// `STM_QUEUE_URL` (required by all three functions).
    pub queue_url: String,
    /// `STM_TIMER_QUEUE_URL` (optional): the standard queue of precise-timer doorbells.
    pub timer_queue_url: Option<String>,
    /// `STM_ENDPOINT_URL`, else `AWS_ENDPOINT_URL` (moto, LocalStack).
    pub endpoint_url: Option<String>,
    /// `STM_DEFINITIONS_DIR` (default `$LAMBDA_TASK_ROOT/definitions`).
    pub definitions_dir: PathBuf,
    /// `STM_TRACE` (default false).
    pub trace: bool,
    /// `STM_TRACE_MAX` (default 200).
    pub trace_max: usize,
    /// `STM_PROCESSED_TTL_DAYS` (unset: dedupe marks are kept).
    pub processed_ttl_days: Option<u64>,
    /// `STM_FINISHED_TTL_DAYS` (unset: finished executions and their trace are kept until
    /// a purge): retention by DynamoDB's TTL, see `DynamoDbStore::with_finished_ttl`.
    pub finished_ttl_days: Option<u64>,
    /// `STM_DEDUPE_MARKS` (`table`, the default, or `item`): where the dedupe marks live,
    /// see `stm_store::DedupeMarks`.
    pub dedupe_marks: stm_store::DedupeMarks,
    /// `STM_COALESCE` (default on): the worker steps a burst of one execution's records
    /// in one commit (`WorkerSettings::coalesce`); off, one commit per record.
    pub coalesce: bool,
    /// `STM_STATE_INDEX` (default off): commits write each execution's state index entry
    /// (`stm list --in`, `stm states`), about 80 bytes on the execution item.
    pub state_index: bool,
    /// `STM_STATUS_EVENTS` (`none`, the default, `failures` or `all`): which status
    /// changes are announced on the status bus ([`crate::status`]).
    pub status_events: crate::status::StatusEvents,
    /// When a routed canary is rolled back by itself (`STM_ROLLBACK_*`, off unless
    /// `STM_ROLLBACK_FAILURE_RATE` is set): [`crate::rollout`].
    pub rollout: crate::rollout::RolloutPolicy,
    /// `STM_FAN_OUT_JOIN` (`children`, the default, or `counted`): how a new execution
    /// keeps its fan-outs' joins, see `stm_core::FanOutJoin`.
    pub fan_out_join: stm_core::FanOutJoin,
    /// `STM_EVENT_BUS`: the EventBridge bus status events go to (required unless
    /// `STM_STATUS_EVENTS` is `none`).
    pub event_bus: Option<String>,
    /// The remote actions: `STM_ACTIONS` and its bounds.
    pub actions: ActionConfig,
    /// `AWS_REGION` (default `us-east-1`).
    pub region: String,
}

/// What binds remote actions, read alike by the worker, `stm local` and `stm run` (which
/// has no queue, so reads only this).
#[derive(Debug, Clone, PartialEq)]
pub struct ActionConfig {
    /// `STM_ACTIONS`: remote action bindings (`name=lambda:fn,name2=https://…`).
    pub bindings: Option<String>,
    /// `STM_ACTION_TIMEOUT_SECONDS` (default 10): the bound on one remote action call.
    pub timeout: Duration,
    /// `STM_ACTION_MAX_RESPONSE_BYTES` (default 1 MiB): the cap on a remote action's answer.
    pub max_response_bytes: usize,
    /// Where a `lambda:` binding's Invoke goes when not to AWS ([`endpoint_url`]).
    pub endpoint_url: Option<String>,
    /// The Region of a `lambda:` binding's Invoke ([`region`]).
    pub region: String,
}

impl ActionConfig {
    /// From any name -> value lookup; a binding that does not parse is refused here, so a
    /// typo fails the cold start, not the first execution that calls the action.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let timeout = match get(vars::ACTION_TIMEOUT_SECONDS) {
            None => crate::remote::DEFAULT_TIMEOUT,
            Some(v) => v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0 && *s <= 900.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| {
                    invalid(
                        vars::ACTION_TIMEOUT_SECONDS,
                        &v,
                        "expected seconds, above 0 and at most 900",
                    )
                })?,
        };
        let max_response_bytes = match get(vars::ACTION_MAX_RESPONSE_BYTES) {
            None => crate::remote::DEFAULT_MAX_RESPONSE_BYTES,
            Some(v) => v.trim().parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                invalid(
                    vars::ACTION_MAX_RESPONSE_BYTES,
                    &v,
                    "expected a positive whole number",
                )
            })?,
        };
        let bindings = get(vars::ACTIONS);
        if let Some(spec) = &bindings {
            crate::remote::parse_bindings(spec)?;
        }
        Ok(ActionConfig {
            bindings,
            timeout,
            max_response_bytes,
            endpoint_url: endpoint_url(get),
            region: region(get),
        })
    }
}

/// A variable whose value the process does not take.
fn invalid(name: &'static str, value: &str, why: &'static str) -> ConfigError {
    ConfigError::Invalid {
        name,
        value: value.to_string(),
        why,
    }
}

impl FunctionConfig {
    /// From the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        FunctionConfig::from_lookup(|name| std::env::var(name).ok())
    }

    /// From any name -> value lookup (tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let bad = invalid;
        let queue_url = get(vars::QUEUE_URL).ok_or(ConfigError::Missing {
            name: vars::QUEUE_URL,
            what: "the FIFO event queue's URL",
        })?;
        let definitions_dir = match get(vars::DEFINITIONS_DIR) {
            Some(dir) => PathBuf::from(dir),
            None => {
                PathBuf::from(get(vars::LAMBDA_TASK_ROOT).unwrap_or_else(|| ".".into())).join("definitions")
            }
        };
        let trace = match get(vars::TRACE) {
            None => false,
            Some(v) => switch(&v).ok_or_else(|| bad(vars::TRACE, &v, "expected true or false"))?,
        };
        let coalesce = match get(vars::COALESCE) {
            None => true,
            Some(v) => switch(&v).ok_or_else(|| bad(vars::COALESCE, &v, "expected on or off"))?,
        };
        let state_index = match get(vars::STATE_INDEX) {
            None => false,
            Some(v) => switch(&v).ok_or_else(|| bad(vars::STATE_INDEX, &v, "expected true or false"))?,
        };
        let status_events = match get(vars::STATUS_EVENTS) {
            None => crate::status::StatusEvents::None,
            Some(v) => v
                .parse()
                .map_err(|()| bad(vars::STATUS_EVENTS, &v, "expected none, failures or all"))?,
        };
        let event_bus = get(vars::EVENT_BUS).filter(|b| !b.trim().is_empty());
        if status_events != crate::status::StatusEvents::None && event_bus.is_none() {
            return Err(ConfigError::Missing {
                name: vars::EVENT_BUS,
                what: "the EventBridge bus status events go to (STM_STATUS_EVENTS is not none)",
            });
        }
        let rollout = crate::rollout::RolloutPolicy::from_lookup(get, status_events)?;
        let trace_max = match get(vars::TRACE_MAX) {
            None => stm_store::DEFAULT_TRACE_MAX,
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| bad(vars::TRACE_MAX, &v, "expected a whole number"))?,
        };
        // 0 would stamp every item already expired (the template's "0: keep forever" leaves
        // the variable unset), and days * 86 400 must not overflow
        let retention_days = |name: &'static str, unset: &'static str| match get(name) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse()
                .ok()
                .filter(|days| (1..=MAX_RETENTION_DAYS).contains(days))
                .map(Some)
                .ok_or_else(|| bad(name, &v, unset)),
        };
        let processed_ttl_days = retention_days(
            vars::PROCESSED_TTL_DAYS,
            "expected a whole number of days from 1 to 36500 (unset keeps the marks)",
        )?;
        let finished_ttl_days = retention_days(
            vars::FINISHED_TTL_DAYS,
            "expected a whole number of days from 1 to 36500 (unset keeps finished executions until a purge)",
        )?;
        let dedupe_marks = match get(vars::DEDUPE_MARKS) {
            None => stm_store::DedupeMarks::Table,
            Some(v) => v.parse().map_err(|_| {
                bad(
                    vars::DEDUPE_MARKS,
                    &v,
                    "expected `table` (harel's processed table) or `item` (the last 10 on the execution item)",
                )
            })?,
        };
        let fan_out_join = match get(vars::FAN_OUT_JOIN) {
            None => stm_core::FanOutJoin::Children,
            Some(v) => v.trim().parse().map_err(|_| {
                bad(
                    vars::FAN_OUT_JOIN,
                    &v,
                    "expected `children` (harel's: each instance in its parent's item) or `counted` (any width, counted)",
                )
            })?,
        };
        let actions = ActionConfig::from_lookup(get)?;
        Ok(FunctionConfig {
            table_prefix: get(vars::TABLE_PREFIX).unwrap_or_else(|| DEFAULT_PREFIX.into()),
            queue_url,
            timer_queue_url: get(vars::TIMER_QUEUE_URL),
            endpoint_url: endpoint_url(get),
            definitions_dir,
            trace,
            trace_max,
            processed_ttl_days,
            finished_ttl_days,
            dedupe_marks,
            coalesce,
            state_index,
            status_events,
            rollout,
            fan_out_join,
            event_bus,
            actions,
            region: region(get),
        })
    }
}

/// `STM_ENDPOINT_URL`, else `AWS_ENDPOINT_URL`: where a function's (and its actions')
/// clients send their requests, when not to AWS.
pub fn endpoint_url(get: impl Fn(&str) -> Option<String>) -> Option<String> {
    let get = |name: &str| get(name).filter(|v| !v.trim().is_empty());
    get(vars::ENDPOINT_URL).or_else(|| get(vars::AWS_ENDPOINT_URL))
}

/// `AWS_REGION`, else `AWS_DEFAULT_REGION`, else [`DEFAULT_REGION`]: the Region of a
/// function's (and its actions') clients.
pub fn region(get: impl Fn(&str) -> Option<String>) -> String {
    let get = |name: &str| get(name).filter(|v| !v.trim().is_empty());
    get(vars::AWS_REGION)
        .or_else(|| get(vars::AWS_DEFAULT_REGION))
        .unwrap_or_else(|| DEFAULT_REGION.into())
}

/// Load and validate every machine of every `*.stm` file directly in `dir` (sorted, as
/// harel's worker does), and every retained version in `dir/versions/`. A broken file
/// fails with its path, line and reason; a machine with validation errors fails with
/// its findings.
pub fn load_definitions_dir(dir: &Path) -> Result<Definitions, ConfigError> {
    let files = files_in(dir, "stm").map_err(|source| ConfigError::DefinitionsDir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let mut definitions = Definitions::new();
    for file in &files {
        for defn in load_file(file)? {
            definitions.register(defn);
        }
    }
    if definitions.is_empty() {
        return Err(ConfigError::NoMachines {
            dir: dir.to_path_buf(),
        });
    }
    for frozen in load_versions_dir(&dir.join(stm_core::version::VERSIONS_DIR))? {
        definitions.retain(frozen);
    }
    Ok(definitions)
}

/// Every frozen version in `dir` (`*.json`, sorted; none when `dir` does not exist),
/// each read back, checked against its name and validated.
pub(crate) fn load_versions_dir(dir: &Path) -> Result<Vec<stm_core::version::FrozenVersion>, ConfigError> {
    let files = match files_in(dir, "json") {
        Ok(files) => files,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ConfigError::DefinitionsDir {
                dir: dir.to_path_buf(),
                source,
            })
        }
    };
    files.iter().map(|file| load_frozen(file)).collect()
}

/// The files directly in `dir` whose name ends in `.extension`, sorted by name (the order
/// a deploy loads them in, on every machine).
pub fn files_in(dir: &Path, extension: &str) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|ext| ext == extension))
        .collect();
    files.sort();
    Ok(files)
}

/// One frozen version, read back, named as it holds and valid.
pub fn load_frozen(file: &Path) -> Result<stm_core::version::FrozenVersion, ConfigError> {
    let text = std::fs::read_to_string(file).map_err(|source| ConfigError::FrozenUnreadable {
        file: file.to_path_buf(),
        source,
    })?;
    let frozen =
        stm_core::version::FrozenVersion::from_text(&text).map_err(|source| ConfigError::FrozenVersion {
            file: file.to_path_buf(),
            source,
        })?;
    let expected = stm_core::version::frozen_file_name(&frozen.machine, frozen.version);
    if file.file_name().and_then(|n| n.to_str()) != Some(expected.as_str()) {
        return Err(ConfigError::FrozenName {
            file: file.to_path_buf(),
            expected,
        });
    }
    check_valid(file, &frozen.definition)?;
    Ok(frozen)
}

/// A machine with validation errors fails with its findings.
fn check_valid(file: &Path, defn: &stm_core::Definition) -> Result<(), ConfigError> {
    let findings = stm_core::validate::validate(defn);
    if stm_core::validate::has_errors(&findings) {
        return Err(ConfigError::InvalidMachine {
            file: file.to_path_buf(),
            machine: defn.id.clone(),
            // as `stm validate` shows them: the line, a caret, the hint
            findings: stm_core::validate::rendered_all(defn, findings.iter().filter(|f| f.is_error())),
        });
    }
    Ok(())
}

/// Load and validate every machine of one file.
pub fn load_file(file: &Path) -> Result<Vec<stm_core::Definition>, ConfigError> {
    let machines = stm_core::dsl::load_all_file(file).map_err(|e| {
        // the error names the file it is in (an imported one, maybe); else this one
        let e = if e.file.is_none() {
            e.with_file(file.display().to_string())
        } else {
            e
        };
        ConfigError::Definition {
            file: file.to_path_buf(),
            source: Box::new(e),
        }
    })?;
    for defn in &machines {
        check_valid(file, defn)?;
    }
    Ok(machines)
}

/// Every action the definitions use must be bound: a typo fails the cold start.
pub fn check_actions(definitions: &Definitions, actions: &ActionRegistry) -> Result<(), ConfigError> {
    for defn in definitions.all_versions() {
        actions.check(defn).map_err(ConfigError::from)?;
    }
    Ok(())
}

/// The driver a function runs: the store, the validated definitions, the actions.
pub fn driver(
    config: &FunctionConfig,
    store: Arc<dyn ExecutionStore>,
    definitions: Definitions,
    actions: ActionRegistry,
) -> Result<Driver, ConfigError> {
    check_actions(&definitions, &actions)?;
    Ok(Driver::new(store, definitions, actions)
        .with_trace(config.trace)
        .with_status_events(config.status_events)
        .with_fan_out_join(config.fan_out_join))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_broken_file_keeps_its_parse_error_with_line_and_column() {
        let dir = std::env::temp_dir().join(format!("stm-config-error-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("broken.stm");
        std::fs::write(&file, "machine M {\n  initial A\n  state A {\n}\n").expect("write");
        let err = load_definitions_dir(&dir).expect_err("a broken file fails");
        let ConfigError::Definition { file: named, source } = &err else {
            panic!("not a definition error: {err:?}");
        };
        assert_eq!(named, &file);
        assert!(
            source.line.is_some(),
            "the parse error keeps its line: {source:?}"
        );
        // the chain: ConfigError -> DslError
        assert!(err
            .source()
            .is_some_and(|dsl| dsl.to_string() == source.to_string()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_bad_variable_names_itself() {
        let err = FunctionConfig::from_lookup(|name| match name {
            vars::QUEUE_URL => Some("q".into()),
            vars::TRACE_MAX => Some("many".into()),
            _ => None,
        })
        .expect_err("refused");
        assert!(matches!(
            err,
            ConfigError::Invalid {
                name: vars::TRACE_MAX,
                ..
            }
        ));
        // the variable, its value and what it takes (a function's init and the CLI say
        // `configuration error: ` before it)
        assert_eq!(
            err.to_string(),
            format!("{}=\"many\": expected a whole number", vars::TRACE_MAX)
        );
    }
}
