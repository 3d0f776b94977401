#!/usr/bin/env bash
# The scale simulator (shared/runtime/tests/scale.rs): the real worker, relay and sweeper
# code over a metered in-memory store and queue, in simulated time, each call's latency
# drawn from a distribution with a tail. Prints one table (per workload and rate: events/s
# offered and served under AWS's quotas, the quota that binds first, the hottest DynamoDB
# partition key against its limit and the busiest table against its quota, DynamoDB and SQS
# requests per event, Lambda concurrency, latency p50/p99, each function's peak memory
# against its MemorySize, DynamoDB $ per million events), the quotas to raise, and ends with
#
#   scale: hottest key NN% of its limit; per-event requests flat: yes|no; served NN% of offered; peak memory NN% of the function's
#
# Exits non-zero when the gate fails: a key above 50% of its partition limit (the single
# hot execution aside), DynamoDB requests per event that differ by more than 2% between a
# small and a large table, less than 99% of the offered events served at the run's largest
# rate, or a function above 50% of its MemorySize.
#
# Usage:
#   bash scripts/scale.sh            # full: 1k, 10k and 100k events/s, 10^6 idle executions,
#                                    # relay backlogs of 10^6 rows and of 105 MB of packed
#                                    # rows, 10^5 timed executions suspended and resumed,
#                                    # 10^6 cancelled by state, 10^6 timers due at once
#                                    # (~22 min on 2 cores)
#   bash scripts/scale.sh --quick    # quick: 1k and 10k events/s, 10^4 of each (~60 s: the
#                                    # run `cargo test --workspace` makes in CI)
#
# Both run the debug build `cargo test` already makes (dependencies at opt-level 1): no
# cold release build of the test (fat LTO, one codegen unit, the AWS SDK) before it starts.
# Honours CARGO_TARGET_DIR.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

QUICK=0
for arg in "$@"; do
    case "$arg" in
        --quick) QUICK=1 ;;
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
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

line="$(grep -E '^scale: hottest key [0-9]+% of its limit; per-event requests flat: (yes|no); served [0-9]+% of offered; peak memory [0-9]+% of the function.s$' "$log" | tail -n 1 || true)"
if [[ -z "$line" ]]; then
    echo "scale: the simulation did not finish (cargo exited with $status)" >&2
    exit $(( status == 0 ? 1 : status ))
fi
share="${line#scale: hottest key }"
share="${share%%%*}"
served="${line#*; served }"
served="${served%%%*}"
memory="${line#*; peak memory }"
memory="${memory%%%*}"
echo
echo "$line"
if (( status != 0 )) || (( share > 50 )) || [[ "$line" != *"flat: yes;"* ]] || (( served < 99 )) || (( memory > 50 )); then
    exit 1
fi
