#!/usr/bin/env bash
# The three functions' cold start, built with the release profile that ships (fat LTO,
# codegen-units 1, stripped: [profile.release] in Cargo.toml), side by side with harel's
# worker (bench/harel_bootstrap.py) in the same run, against moto: init to the first
# Runtime API poll, and where each function's init goes (`lambda-smoke --breakdown`).
#
#   bash bench/coldstart.sh [lambda-smoke arguments...]     # e.g. --runs 9
#
# The bootstraps are built for this machine (`cargo build --release`, not the arm64
# deployment build) in their own target directory, COLDSTART_TARGET_DIR (default
# target/coldstart), so the build does not wait on target/'s lock; lambda-smoke is a test
# harness, built in the usual target directory. A cold release build of the three takes
# about 25 minutes on 2 cores; after a change to the functions' code, a few (the LTO link).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
TARGET="${COLDSTART_TARGET_DIR:-$REPO/target/coldstart}"
PY="${STM_PYTHON:-$REPO/.venv/bin/python}"
export STM_PYTHON="$PY" PATH="$REPO/.venv/bin:$PATH"

CARGO_TARGET_DIR="$TARGET" cargo build --release -p worker -p relay -p sweeper
cargo build -p stm-deploytest --bin lambda-smoke

# the layout lambda-smoke takes (cargo lambda's): DIR/<function>/bootstrap
LAMBDA_DIR="$TARGET/lambda"
for function in worker relay sweeper; do
    mkdir -p "$LAMBDA_DIR/$function"
    cp "$TARGET/release/$function" "$LAMBDA_DIR/$function/bootstrap"
done

exec "${CARGO_TARGET_DIR:-$REPO/target}/debug/lambda-smoke" --lambda-dir "$LAMBDA_DIR" --python "$PY" \
    --breakdown "$@"
