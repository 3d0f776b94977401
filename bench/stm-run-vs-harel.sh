#!/usr/bin/env bash
# `stm run` as a whole process (start, parse, 20,000 events, output) against harel 0.9.0's
# DurableRunner over DictStore (its event loop only, timed inside Python), and against its
# own engine step (the engine bench's `engine step only` row, timed inside the bench), on
# bench/loop.stm, in one run on this machine: ROUNDS rounds, each running all four one after
# another, and each figure the median of its rounds (with its range). Prints a table;
# asserts nothing.
#
#   bash bench/stm-run-vs-harel.sh            # N=20000 events, ROUNDS=5
#
# stm is built with the release profile that ships (LTO), and the engine bench with the
# bench profile, both without the AWS SDK, which neither uses (a few minutes on 2 cores,
# cached afterwards).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
N="${N:-20000}"
ROUNDS="${ROUNDS:-5}"
PY="${STM_PYTHON:-$REPO/.venv/bin/python}"
TARGET="$REPO/target/bench-light"
echo "building stm (release, no AWS SDK) and the engine bench..." >&2
CARGO_TARGET_DIR="$TARGET" cargo build --release -p stm --no-default-features --quiet
CARGO_TARGET_DIR="$TARGET" cargo bench -p stm-runtime --no-default-features --bench engine --no-run --quiet
STM="$TARGET/release/stm"
"$PY" - "$STM" "$N" "$ROUNDS" "$TARGET" <<'PYEOF'
import json, os, statistics, subprocess, sys, time
stm, n, rounds, target = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
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
def engine():
    # the engine bench's events/s (its step alone, timed inside the bench): the seconds it
    # takes for n events
    env = dict(os.environ, CARGO_TARGET_DIR=target, BENCH_ONLY="engine-rate", BENCH_EVENTS=str(n))
    out = subprocess.run(["cargo", "bench", "-q", "-p", "stm-runtime", "--no-default-features",
                          "--bench", "engine"], env=env, check=True, capture_output=True, text=True).stdout
    return n / float(out.split()[-1])
times = {"stm": [], "engine": [], "inline": [], "background": []}
for _ in range(rounds):  # alternating: the machine is shared, and each round sees the same
    times["stm"].append(ours())
    times["engine"].append(engine())
    for mode in ("inline", "background"):
        times[mode].append(harel(mode))
med = {k: statistics.median(v) for k, v in times.items()}
def cell(k):
    return f"{med[k]:.3f} ({min(times[k]):.3f}-{max(times[k]):.3f})"
print(f"{n} events of bench/loop.stm, medians of {rounds} alternating rounds (min-max)\n")
print("| runner | seconds | events/s | against stm run |")
print("|---|---:|---:|---:|")
print(f"| stm run, whole process (start, parse, events, output) | {cell('stm')} | {n / med['stm']:.0f} | 1x |")
print(f"| its engine step alone (the engine bench) | {cell('engine')} | {n / med['engine']:.0f} | "
      f"stm run takes {med['stm'] / med['engine']:.1f}x its time |")
for mode, label in (("inline", 'harel DurableRunner + DictStore, execution="inline", event loop only'),
                    ("background", "harel DurableRunner + DictStore, default (background), event loop only")):
    print(f"| {label} | {cell(mode)} | {n / med[mode]:.0f} | {med[mode] / med['stm']:.0f}x |")
PYEOF
