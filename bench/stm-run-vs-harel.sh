#!/usr/bin/env bash
# `stm run` as a whole process (start, parse, 20,000 events, output) against harel 0.9.0's
# DurableRunner over DictStore (its event loop only, timed inside Python), on
# bench/loop.stm, in one run on this machine. Prints a table; asserts nothing.
#
#   bash bench/stm-run-vs-harel.sh            # N=20000 events, best of ROUNDS=3
#
# stm is built with the release profile that ships (LTO), without the AWS SDK, which
# `stm run` does not use (a few minutes on 2 cores, cached afterwards).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
N="${N:-20000}"
ROUNDS="${ROUNDS:-3}"
PY="${STM_PYTHON:-$REPO/.venv/bin/python}"
TARGET="$REPO/target/bench-light"
echo "building stm (release, no AWS SDK)..." >&2
CARGO_TARGET_DIR="$TARGET" cargo build --release -p stm --no-default-features --quiet
STM="$TARGET/release/stm"
"$PY" - "$STM" "$N" "$ROUNDS" <<'PYEOF'
import json, subprocess, sys, time
stm, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
args = [stm, "run", "bench/loop.stm"]
for i in range(n):
    args += ["-e", "Go" if i % 2 == 0 else "Back"]
def ours():
    t0 = time.perf_counter()
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    seconds = time.perf_counter() - t0
    assert out.count("\n") == n + 2, "one line per event, the start and the status"
    return seconds
def harel(mode):
    out = subprocess.run([sys.executable, "bench/harel_engine.py", "bench/loop.stm", str(n), mode],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["seconds"]
best = {"stm": float("inf"), "inline": float("inf"), "background": float("inf")}
for _ in range(rounds):  # alternating, each keeps its best round: the machine is noisy
    best["stm"] = min(best["stm"], ours())
    for mode in ("inline", "background"):
        best[mode] = min(best[mode], harel(mode))
print(f"{n} events of bench/loop.stm, best of {rounds} alternating rounds\n")
print("| runner | seconds | events/s | stm run vs it |")
print("|---|---:|---:|---:|")
print(f"| stm run, whole process (start, parse, events, output) | {best['stm']:.3f} | {n / best['stm']:.0f} | 1x |")
for mode, label in (("inline", 'harel DurableRunner + DictStore, execution="inline", event loop only'),
                    ("background", "harel DurableRunner + DictStore, default (background), event loop only")):
    print(f"| {label} | {best[mode]:.3f} | {n / best[mode]:.0f} | {best[mode] / best['stm']:.0f}x |")
PYEOF
