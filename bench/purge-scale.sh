#!/usr/bin/env bash
# `stm purge` at scale on moto: N finished trees (three executions each) seeded and purged
# with a JSONL archive. Prints the seconds, the DynamoDB calls per tree and the memory
# growth while purging (bounded: it does not grow with the number of trees). Not part of
# CI (the purge tests run there on a few trees).
#
# moto's Query walks every item of a table, not one partition as DynamoDB does, so with
# each member's trace step and processed mark (the default) the run is quadratic on moto:
# 1,000 trees take about 3 minutes, 10,000 would take hours. PURGE_ROWS=0 seeds the
# executions alone, which is how the 10,000-tree figure is measured.
#
#   PURGE_TREES=200,1000 bash bench/purge-scale.sh             # with member rows
#   PURGE_ROWS=0 PURGE_TREES=10000 bash bench/purge-scale.sh   # the scale run
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
bash .ci/setup.sh >/dev/null
export STM_PYTHON="$REPO/.venv/bin/python" PATH="$REPO/.venv/bin:$PATH"
PURGE_TREES="${PURGE_TREES:-200,1000}" cargo bench -p stm-runtime --features aws --bench purge_scale
