#!/usr/bin/env bash
# The scale simulator (shared/runtime/tests/scale.rs): the real worker, relay and sweeper
# code over a metered in-memory store and queue, in simulated time. Prints one table (per
# workload and rate: events/s offered and served, the hottest DynamoDB partition key against
# its limit, DynamoDB requests and units per event, Lambda concurrency, DynamoDB $ per
# million events) and ends with
#
#   scale: hottest key NN% of its limit; per-event requests flat: yes|no
#
# Exits non-zero when the gate fails: a key above 50% of its partition limit (the single
# hot execution aside), or DynamoDB requests per event that differ by more than 2% between a
# small and a large table.
#
# Usage:
#   bash scripts/scale.sh            # full: 1k, 10k and 100k events/s, 10^6 idle executions,
#                                    # a relay backlog of 10^6 rows (~6 min on 2 cores)
#   bash scripts/scale.sh --quick    # quick: 1k and 10k events/s, 10^4 of each (~30 s: the
#                                    # run `cargo test --workspace` makes in CI)
#
# Both run the debug build `cargo test` already makes (dependencies at opt-level 1): the
# full simulation takes about 6 minutes there, less than a cold release build of the test
# (fat LTO, one codegen unit, the AWS SDK) takes on 2 cores before it could start.
# Honours CARGO_TARGET_DIR.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

QUICK=0
for arg in "$@"; do
    case "$arg" in
        --quick) QUICK=1 ;;
        -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
        *) echo "unknown argument: $arg (usage: bash scripts/scale.sh [--quick])" >&2; exit 2 ;;
    esac
done

mode=full
if (( QUICK )); then
    mode=quick
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT

set +e
STM_SCALE="$mode" cargo test -p stm-runtime --test scale -- --nocapture 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

line="$(grep -E '^scale: hottest key [0-9]+% of its limit; per-event requests flat: (yes|no)$' "$log" | tail -n 1 || true)"
if [[ -z "$line" ]]; then
    echo "scale: the simulation did not finish (cargo exited with $status)" >&2
    exit $(( status == 0 ? 1 : status ))
fi
share="${line#scale: hottest key }"
share="${share%%%*}"
echo
echo "$line"
if (( status != 0 )) || (( share > 50 )) || [[ "$line" != *"flat: yes" ]]; then
    exit 1
fi
