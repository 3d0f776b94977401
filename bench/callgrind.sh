#!/usr/bin/env bash
# Instructions per event, counted by valgrind's callgrind (repeatable on a busy machine,
# unlike time): the worker's per-event CPU in Rust (decode the Execution JSON, step, encode;
# `cargo bench --bench engine` with BENCH_ONLY=json-step) against harel 0.9.0's embedded
# runner (`bench/harel_engine.py`, inline execution, over DictStore) on the same machine
# (bench/loop.stm) and events. Each side runs twice, with N and 2N events; the difference
# divided by N removes start-up (process, imports, parsing) from the figure.
#
#   bash bench/callgrind.sh            # N = 2000 (Rust), 300 (harel, slow under valgrind)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PY="${STM_PYTHON:-$REPO/.venv/bin/python}"
N_RUST="${N_RUST:-2000}"
N_HAREL="${N_HAREL:-300}"
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 2; }

BIN="$(cargo bench -p stm-runtime --bench engine --no-run --message-format=json 2>/dev/null \
    | "$PY" -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("target",{}).get("name")=="engine" and m.get("executable"):
        print(m["executable"])' | tail -1)"
[ -x "$BIN" ] || { echo "could not build the engine bench" >&2; exit 1; }

instructions() { # command... -> total instructions (Ir)
    local out; out="$(mktemp)"
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>"$out" >/dev/null
    grep -oE 'Collected : [0-9]+' "$out" | awk '{print $3}'
    rm -f "$out"
}

r1=$(BENCH_ONLY=json-step BENCH_EVENTS=$N_RUST instructions "$BIN")
r2=$(BENCH_ONLY=json-step BENCH_EVENTS=$((2 * N_RUST)) instructions "$BIN")
h1=$(instructions "$PY" bench/harel_engine.py bench/loop.stm "$N_HAREL" inline)
h2=$(instructions "$PY" bench/harel_engine.py bench/loop.stm "$((2 * N_HAREL))" inline)
rust=$(( (r2 - r1) / N_RUST ))
harel=$(( (h2 - h1) / N_HAREL ))
echo "| per event (bench/loop.stm) | instructions | vs harel |"
echo "|---|---:|---:|"
echo "| ours: JSON decode + step + encode | $rust | $(awk -v a="$harel" -v b="$rust" 'BEGIN{printf "%.0fx fewer", a/b}') |"
echo "| harel 0.9.0 DurableRunner (inline) + DictStore, process() | $harel | 1x |"
