//! The environment variables the runtime, its Lambda functions, the `stm` command and the
//! test support read, each named once: a writer of one (`stm local`, the test kit, the
//! template's tests) and its reader cannot spell it two ways.
//!
//! A crate of its own, below every other: the emulator switch is read by `stm-aws`, under
//! the runtime, and the test kit depends on no other workspace crate; both name theirs from
//! here, as the runtime's configuration and the CLI's flags (`#[arg(env = ...)]`) do.
//! `shared/env/tests/spelled_once.rs` fails when a `"STM_…"` literal, or a literal equal to
//! a name below, appears anywhere else in the crates' sources.

// The functions' configuration (`stm_runtime::config::FunctionConfig`), which the operator
// commands and `stm local` read as well.

pub const TABLE_PREFIX: &str = "STM_TABLE_PREFIX";
pub const QUEUE_URL: &str = "STM_QUEUE_URL";
pub const TIMER_QUEUE_URL: &str = "STM_TIMER_QUEUE_URL";
pub const ENDPOINT_URL: &str = "STM_ENDPOINT_URL";
pub const DEFINITIONS_DIR: &str = "STM_DEFINITIONS_DIR";
pub const TRACE: &str = "STM_TRACE";
pub const TRACE_MAX: &str = "STM_TRACE_MAX";
pub const PROCESSED_TTL_DAYS: &str = "STM_PROCESSED_TTL_DAYS";
pub const FINISHED_TTL_DAYS: &str = "STM_FINISHED_TTL_DAYS";
pub const DEDUPE_MARKS: &str = "STM_DEDUPE_MARKS";
pub const COALESCE: &str = "STM_COALESCE";
pub const STATE_INDEX: &str = "STM_STATE_INDEX";
pub const STATUS_EVENTS: &str = "STM_STATUS_EVENTS";
/// The failure rate (FAILED among finished, 0 to 1; 0 or unset: off) at which a routed
/// canary version's weight returns to 0 by itself.
pub const ROLLBACK_FAILURE_RATE: &str = "STM_ROLLBACK_FAILURE_RATE";
/// The fewest finished executions of a canary its failure rate is taken over.
pub const ROLLBACK_MIN_FINISHED: &str = "STM_ROLLBACK_MIN_FINISHED";
/// The length of the windows a canary's failure rate is counted in, in seconds.
pub const ROLLBACK_WINDOW_SECONDS: &str = "STM_ROLLBACK_WINDOW_SECONDS";
pub const FAN_OUT_JOIN: &str = "STM_FAN_OUT_JOIN";
pub const EVENT_BUS: &str = "STM_EVENT_BUS";
pub const ACTIONS: &str = "STM_ACTIONS";
pub const ACTION_TIMEOUT_SECONDS: &str = "STM_ACTION_TIMEOUT_SECONDS";
pub const ACTION_MAX_RESPONSE_BYTES: &str = "STM_ACTION_MAX_RESPONSE_BYTES";

// Switches any process reads, read with [`switch`].

/// The clients talk to an emulator (moto, LocalStack, DynamoDB Local): they take static
/// dummy credentials only then (`stm_aws::emulator_mode`). `stm local` sets it for its
/// functions; the test kit sets it in every test process that starts moto.
pub const EMULATOR: &str = "STM_EMULATOR";
/// Whether metric lines are written (`stm_runtime::metrics::enabled`); unset, only on
/// Lambda ([`LAMBDA_FUNCTION_NAME`]).
pub const METRICS: &str = "STM_METRICS";

// AWS's and Lambda's own, which our code reads too.

/// The SDK's endpoint variable, read when [`ENDPOINT_URL`] is unset.
pub const AWS_ENDPOINT_URL: &str = "AWS_ENDPOINT_URL";
pub const AWS_REGION: &str = "AWS_REGION";
pub const AWS_DEFAULT_REGION: &str = "AWS_DEFAULT_REGION";
/// The shared config files' profile (the operator commands' `--profile`).
pub const AWS_PROFILE: &str = "AWS_PROFILE";
/// Lambda's: where the function's code is (the definitions default to a folder in it).
pub const LAMBDA_TASK_ROOT: &str = "LAMBDA_TASK_ROOT";
/// Lambda's: set in a function's process, and only there.
pub const LAMBDA_FUNCTION_NAME: &str = "AWS_LAMBDA_FUNCTION_NAME";

// OpenTelemetry's own (its exporter specification), which the functions read.

/// The collector's base URL: spans go to its `/v1/traces` (`stm_runtime::telemetry::otlp`).
pub const OTEL_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The full URL spans are posted to, when set (before [`OTEL_ENDPOINT`]).
pub const OTEL_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";

// X-Ray's.

/// The share of traces the functions send to X-Ray, 0 to 1 (`stm_runtime::telemetry::xray`;
/// the template's `XRaySampleRatio`, 0 unless its `XRayTracing` is Active).
pub const XRAY_SAMPLE_RATIO: &str = "STM_XRAY_SAMPLE_RATIO";
/// Lambda's: the X-Ray daemon's address, set when a function's tracing is Active.
pub const XRAY_DAEMON_ADDRESS: &str = "AWS_XRAY_DAEMON_ADDRESS";

// The tools'.

/// The Python with moto that `stm local` and the test kit start.
pub const PYTHON: &str = "STM_PYTHON";
/// Where `stm local` keeps (and makes, once) its own Python environment with moto, in place
/// of `$XDG_DATA_HOME/stm/moto` (and before the checkout's `.venv`).
pub const MOTO_ENV: &str = "STM_MOTO_ENV";
/// The seed of the store contract's drawn shapes (`stm_store::contract`).
pub const SHAPES_SEED: &str = "STM_SHAPES_SEED";
/// The seed of the store contract's drawn due timers and page limits (`stm_store::contract`).
pub const DUE_PAGES_SEED: &str = "STM_DUE_PAGES_SEED";
/// The seed of the store contract's counted-join reports.
pub const JOIN_REPORTS_SEED: &str = "STM_JOIN_REPORTS_SEED";
/// The seed of the store contract's drawn tally adds.
pub const TALLIES_SEED: &str = "STM_TALLIES_SEED";
/// The seed of the runtime's drawn rollout evaluations (tallies over windows and shards).
pub const ROLLOUT_SEED: &str = "STM_ROLLOUT_SEED";
/// The seed of the store contract's parked rows (how many, which numbers are holes).
pub const PARKED_ROWS_SEED: &str = "STM_PARKED_ROWS_SEED";
/// The seed of the engine's walks comparing counted joins with harel's children.
pub const COUNTED_JOIN_SEED: &str = "STM_COUNTED_JOIN_SEED";
/// The seed of `stm run --events`'s drawn event files (cli/tests/run_events.rs).
pub const RUN_EVENTS_SEED: &str = "STM_RUN_EVENTS_SEED";
/// How many shapes the store contract draws.
pub const SHAPES: &str = "STM_SHAPES";

/// An on/off variable's value: `1`, `true`, `on`, `yes` are on; `0`, `false`, `off`, `no`
/// and empty are off (any case, spaces around ignored); anything else is `None`, which the
/// functions' configuration refuses and a switch read at run time takes as off.
pub fn switch(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Some(true),
        "0" | "false" | "off" | "no" | "" => Some(false),
        _ => None,
    }
}

/// Whether the process's variable `name` is set and [`switch`] reads it as on.
pub fn is_on(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| switch(&v) == Some(true))
}

#[cfg(test)]
mod tests {
    use super::switch;

    #[test]
    fn a_switch_reads_the_usual_words_in_any_case() {
        for on in ["1", "true", "TRUE", " on ", "Yes"] {
            assert_eq!(switch(on), Some(true), "{on:?}");
        }
        for off in ["0", "false", "Off", "no", "", "  "] {
            assert_eq!(switch(off), Some(false), "{off:?}");
        }
        for neither in ["2", "enabled", "y", "t"] {
            assert_eq!(switch(neither), None, "{neither:?}");
        }
    }
}
