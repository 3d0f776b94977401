#!/usr/bin/env bash
# The engine bench at two commits, side by side in one run: is this checkout slower than
# BASE on bench/loop.stm? Two measures:
# - instructions per event (valgrind's callgrind: counts, so a busy machine does not move
#   them) of the worker's per-event CPU: decode the Execution JSON, step, encode (the
#   bench's BENCH_ONLY=json-step mode, with N and 2N events, the difference divided by N);
# - the bench's own table (events/s, best of its alternating rounds), BASE's and this
#   checkout's run one after the other, twice.
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

bench_binary() { # DIR [TARGET_DIR] -> the engine bench's executable
    (cd "$1" && CARGO_TARGET_DIR="${2:-$1/target}" cargo bench -p stm-runtime --bench engine --no-run \
        --message-format=json 2>/dev/null) | "$PY" -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("target",{}).get("name")=="engine" and m.get("executable"):
        print(m["executable"])' | tail -1
}
echo "building the bench at $base_rev (base) and $head_rev (this checkout)..." >&2
BASE_BIN="$(bench_binary "$WORKTREE" "$REPO/target/bench-base")"
HEAD_BIN="$(bench_binary "$REPO")"
[ -x "$BASE_BIN" ] && [ -x "$HEAD_BIN" ] || { echo "could not build the engine bench" >&2; exit 1; }

instructions() { # BIN EVENTS -> total instructions (Ir) of one json-step run
    local out; out="$(mktemp)"
    BENCH_ONLY=json-step BENCH_EVENTS="$2" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" \
        2>"$out" >/dev/null
    grep -oE 'Collected : [0-9]+' "$out" | awk '{print $3}'
    rm -f "$out"
}
per_event() { # BIN -> instructions per event
    local a b
    a=$(instructions "$1" "$N")
    b=$(instructions "$1" $((2 * N)))
    echo $(( (b - a) / N ))
}
base_ir=$(per_event "$BASE_BIN")
head_ir=$(per_event "$HEAD_BIN")
echo
echo "instructions per event, JSON decode + step + encode on bench/loop.stm (callgrind, N=$N):"
echo
echo "| commit | instructions/event | vs base |"
echo "|---|---:|---:|"
echo "| $base_rev (base) | $base_ir | 1.00 |"
awk -v h="$head_ir" -v b="$base_ir" -v r="$head_rev" 'BEGIN { printf "| %s | %d | %.2f |\n", r, h, h / b }'
echo
for round in 1 2; do
    echo "--- round $round: $base_rev (base)"
    BENCH_ROUNDS=3 "$BASE_BIN" | grep -E '^\| (driver|engine|json)'
    echo "--- round $round: $head_rev"
    BENCH_ROUNDS=3 "$HEAD_BIN" | grep -E '^\| (driver|engine|json)'
done
