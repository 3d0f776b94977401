#!/usr/bin/env bash
# The protocol, model-checked at the full bound (shared/model; docs/reliability.md,
# "The protocol, model-checked"): every safety property over every reachable state,
# quiescence reachable from every state, each planted hazard caught; then suspension's own
# bound (the timed execution suspended and resumed by the operator). A few minutes and
# about 3.5 GB on 2 cores. The test suite runs small bounds of the same checks.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build -p stm-model --release --quiet
model="$CARGO_TARGET_DIR/release/stm-model"
echo "== safety, full bound"
"$model" check --threads "${STM_MODEL_THREADS:-2}"
echo "== liveness (the graph is kept in memory: one lost lease fewer)"
"$model" liveness --leases 0
echo "== safety, suspension bound"
"$model" check --suspension --threads "${STM_MODEL_THREADS:-2}"
echo "== liveness, suspension bound (one lost lease fewer)"
"$model" liveness --suspension --leases 0
echo "== mutants"
"$model" mutants
