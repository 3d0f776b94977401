//! Differential fuzzing against harel 0.9.0: random machines and event scripts, run by
//! harel (in-process, one Python process per shard for the whole batch:
//! `tests/fuzz/harel_batch.py`) and by our driver (the conformance runner,
//! `tests/common/harel_case.rs`), compared on the transcript, the step errors, the final
//! root and children, the traces, and the exact `json.dumps` bytes of every context.
//!
//! ```text
//! cargo test -p stm-runtime --test differential_fuzz -- --nocapture
//! STM_FUZZ_CASES=2000 STM_FUZZ_SEED=7 cargo test ...      # longer / another seed
//! STM_FUZZ_SEED=7 STM_FUZZ_ONLY=123 cargo test ...        # one case again
//! ```
//!
//! Every disagreement is written (machine text, seed + steps, both results, the first
//! difference) to `<target>/fuzz-disagreements.jsonl`; the test fails if there is any.
//! See `tests/fuzz/README.md`.
//!
//! One file per concern, under `differential_fuzz/`: `rng.rs` (the random source),
//! `values.rs` (random values as JSON and as `.stm` literals), `machine.rs` and
//! `transitions.rs` (the machine generator), `cases.rs` (one case: a machine and its event
//! script), `compare.rs` (our result against harel's) and `harness.rs` (the run and the
//! test).

#[path = "common/harel_case.rs"]
mod harel_case;

// a crate root looks for its modules beside it: name the directory
#[path = "differential_fuzz/cases.rs"]
mod cases;
#[path = "differential_fuzz/compare.rs"]
mod compare;
#[path = "differential_fuzz/harness.rs"]
mod harness;
#[path = "differential_fuzz/machine.rs"]
mod machine;
#[path = "differential_fuzz/rng.rs"]
mod rng;
#[path = "differential_fuzz/transitions.rs"]
mod transitions;
#[path = "differential_fuzz/values.rs"]
mod values;
