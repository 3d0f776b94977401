#!/usr/bin/env bash
# The protocol, model-checked (shared/model; docs/reliability.md, "The protocol,
# model-checked"): at the full bound (every path that commits rows: the timed execution's
# rows released after a suspension, the operator's commands, the status bus, a refused
# entry), every safety property over every reachable state; then the fan-out's bound and
# suspension's bound with a lost lease; quiescence reachable from every state at the
# bounds whose graph fits in memory; each planted hazard caught. About half an hour and
# 4 GB on 2 cores. The test suite runs small bounds of the same checks.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build -p stm-model --release --quiet
model="$CARGO_TARGET_DIR/release/stm-model"
threads="${STM_MODEL_THREADS:-2}"
echo "== safety, full bound"
"$model" check --threads "$threads"
echo "== safety, fan-out bound"
"$model" check --fanout --threads "$threads"
echo "== safety, suspension bound"
"$model" check --suspension --threads "$threads"
echo "== liveness (the graph is kept in memory: the small rows bound, the others without the lost lease)"
"$model" liveness --small-rows
"$model" liveness --fanout --leases 0
"$model" liveness --suspension --leases 0
echo "== mutants"
"$model" mutants
