#!/usr/bin/env bash
# The engine bench at two commits, side by side in one run: is this checkout slower than
# BASE on bench/loop.stm? Two measures:
# - instructions per event (valgrind's callgrind: counts, so a busy machine does not move
#   them) of each row: the pure engine step, the worker's per-event CPU (decode the
#   Execution JSON, step, encode) and the embedded driver (load, step, commit); each is the
#   bench's BENCH_ONLY mode run with N and 2N events, the difference divided by N;
# - the bench's own table (events/s, best of its alternating rounds), BASE's and this
#   checkout's run one after the other, twice.
#
# Both are built from this checkout's bench harness (shared/runtime/benches/engine.rs,
# copied into BASE's worktree), so the two measure the same loop over each commit's code.
#
#   bash bench/engine-vs-base.sh [BASE]     # BASE: a commit (default: HEAD~1)
#
# BASE is checked out in a temporary git worktree and built in its own target directory
# (a cold build of stm-runtime without the AWS SDK: a few minutes on 2 cores).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BASE="${1:-HEAD~1}"
N="${N:-2000}"
PY="${STM_PYTHON:-$REPO/.venv/bin/python}"
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 2; }
base_rev="$(git rev-parse --short "$BASE")"
head_rev="$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes')"

WORKTREE="$(mktemp -d /tmp/stm-bench-base.XXXXXX)"
cleanup() { git worktree remove --force "$WORKTREE" >/dev/null 2>&1 || rm -rf "$WORKTREE"; }
trap cleanup EXIT
git worktree add --detach --quiet "$WORKTREE" "$BASE"
cp shared/runtime/benches/engine.rs "$WORKTREE/shared/runtime/benches/engine.rs"

bench_binary() { # DIR [TARGET_DIR] -> the engine bench's executable
    # without the AWS SDK, which the bench does not use: a build of minutes, not a quarter hour
    (cd "$1" && CARGO_TARGET_DIR="${2:-$1/target}/bench-light" cargo bench -p stm-runtime --no-default-features \
        --bench engine --no-run --message-format=json 2>/dev/null) | "$PY" -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("target",{}).get("name")=="engine" and m.get("executable"):
        print(m["executable"])' | tail -1
}
echo "building the bench at $base_rev (base) and $head_rev (this checkout)..." >&2
BASE_BIN="$(bench_binary "$WORKTREE" "$REPO/target/bench-base")"
HEAD_BIN="$(bench_binary "$REPO")"
[ -x "$BASE_BIN" ] && [ -x "$HEAD_BIN" ] || { echo "could not build the engine bench" >&2; exit 1; }

instructions() { # BIN MODE EVENTS -> total instructions (Ir) of one run of that row
    local out; out="$(mktemp)"
    BENCH_ONLY="$2" BENCH_EVENTS="$3" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" \
        2>"$out" >/dev/null
    grep -oE 'Collected : [0-9]+' "$out" | awk '{print $3}'
    rm -f "$out"
}
per_event() { # BIN MODE -> instructions per event
    local a b
    a=$(instructions "$1" "$2" "$N")
    b=$(instructions "$1" "$2" $((2 * N)))
    echo $(( (b - a) / N ))
}
echo
echo "instructions per event on bench/loop.stm (callgrind, N=$N):"
echo
echo "| row | $base_rev (base) | $head_rev | vs base |"
echo "|---|---:|---:|---:|"
for mode in engine-step json-step driver-step; do
    base_ir=$(per_event "$BASE_BIN" "$mode")
    head_ir=$(per_event "$HEAD_BIN" "$mode")
    awk -v m="$mode" -v h="$head_ir" -v b="$base_ir" 'BEGIN { printf "| %s | %d | %d | %.2f |\n", m, b, h, h / b }'
done
echo
for round in 1 2; do
    echo "--- round $round: $base_rev (base)"
    BENCH_ROUNDS=3 "$BASE_BIN" | grep -E '^\| (driver|engine|json)'
    echo "--- round $round: $head_rev"
    BENCH_ROUNDS=3 "$HEAD_BIN" | grep -E '^\| (driver|engine|json)'
done
