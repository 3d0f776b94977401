#!/usr/bin/env bash
# `stm purge` at scale on moto: 1,000 and 10,000 finished trees (three executions each, a
# trace step and a processed mark apiece) seeded and purged with a JSONL archive. Prints the
# seconds, the DynamoDB calls per tree and the memory growth while purging (bounded: it
# does not grow with the number of trees). Takes about 45 minutes on 2 cores, most of it
# moto's; not part of CI (the purge tests run there on a few trees).
#
#   bash bench/purge-scale.sh            # PURGE_TREES=1000,10000
#   PURGE_TREES=200 bash bench/purge-scale.sh
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
bash .ci/setup.sh >/dev/null
export STM_PYTHON="$REPO/.venv/bin/python" PATH="$REPO/.venv/bin:$PATH"
PURGE_TREES="${PURGE_TREES:-1000,10000}" cargo bench -p stm-runtime --features aws --bench purge_scale
