#!/usr/bin/env python3
"""Runs every test binary of the workspace, and its doctests, in parallel lanes.

`cargo test` runs one test binary after another. Most of ours spend their time waiting on
one emulator process (moto is single-threaded Python, one server per binary), so one binary
at a time leaves a core idle for most of the run. This builds everything once, then runs
the binaries as jobs, `--jobs` at a time (2 by default), the known-long ones first, and
prints each binary's time at the end. A binary runs as `cargo test` runs it: from its
package's directory, with its manifest directory and the `[env]` of `.cargo/config.toml` in
the environment.

    python3 .ci/lanes.py              # everything, 2 lanes
    python3 .ci/lanes.py --jobs 3

The exit status is 1 when a binary fails; its whole output is printed.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import tomllib

# Started first so that the lanes end together: the binaries that took the longest on
# 2 cores (the table this script prints). A name missing here only starts later.
LONG_FIRST = [
    "stm-runtime test crash_injection",
    "stm-store test dynamodb_contract",
    "stm-runtime test aws_faults",
    "stm-model test model",
    "stm-runtime test races",
    "stm test fan_out",
    "doctests",
    "stm-model test replay",
]


def cargo_env(repo):
    """The `[env]` table of the workspace's `.cargo/config.toml`, which cargo gives the test
    binaries it runs (plain strings; a variable already set wins, as in cargo)."""
    path = os.path.join(repo, ".cargo", "config.toml")
    if not os.path.exists(path):
        return {}
    with open(path, "rb") as f:
        table = tomllib.load(f).get("env", {})
    return {k: v for k, v in table.items() if isinstance(v, str) and k not in os.environ}


def build(repo):
    """Builds every test target; returns [(name, executable, package dir)]."""
    cmd = ["cargo", "test", "--workspace", "--locked", "--no-run",
           "--message-format=json-render-diagnostics"]
    proc = subprocess.run(cmd, cwd=repo, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(proc.returncode)
    jobs = []
    for line in proc.stdout.splitlines():
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message["profile"]["test"]:
            continue
        target = message["target"]
        package = message["package_id"]
        # the package's name from its id (`path+file:///…/cli#stm@0.1.0`); the manifest's
        # directory is where cargo runs the binary
        package_dir = os.path.dirname(message["manifest_path"])
        source, _, fragment = package.rpartition("#")
        if "@" in fragment:
            package_name = fragment.split("@")[0]
        else:  # `…/worker#0.1.0` when the name is the directory's
            package_name = os.path.basename(source)
        kind = target["kind"][0]
        jobs.append((f"{package_name} {kind} {target['name']}", [message["executable"]], package_dir))
    jobs.append(("doctests", ["cargo", "test", "--workspace", "--locked", "--doc"], repo))
    return jobs


def order(jobs):
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    return sorted(jobs, key=lambda job: (rank.get(job[0], len(rank)), job[0]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("STM_TEST_JOBS", "2")),
                        help="binaries run at once (default 2, or $STM_TEST_JOBS)")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: expected 1 or more")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    started = time.monotonic()
    queue = order(build(repo))
    built = time.monotonic() - started
    print(f"[lanes] {len(queue)} test binaries built or fresh in {built:.0f} s; "
          f"running them {args.jobs} at a time", flush=True)

    extra_env = cargo_env(repo)
    lock = threading.Lock()
    results = []  # (name, seconds, status)
    running = {}

    def lane():
        while True:
            with lock:
                if not queue:
                    return
                name, cmd, cwd = queue.pop(0)
            env = dict(os.environ, CARGO_MANIFEST_DIR=cwd, **extra_env)
            begun = time.monotonic()
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace",
                                    start_new_session=True)
            with lock:
                running[name] = proc
            output, _ = proc.communicate()
            took = time.monotonic() - begun
            with lock:
                del running[name]
                results.append((name, took, proc.returncode))
                if proc.returncode == 0:
                    summary = [l for l in output.splitlines() if l.startswith("test result:")]
                    print(f"[lanes] ok     {took:7.1f} s  {name}  "
                          f"{'; '.join(s.removeprefix('test result: ') for s in summary)}",
                          flush=True)
                else:
                    print(f"[lanes] FAILED {took:7.1f} s  {name} (exit {proc.returncode})\n"
                          f"{output}\n[lanes] end of {name}", flush=True)

    threads = [threading.Thread(target=lane, daemon=True) for _ in range(args.jobs)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:
        with lock:
            for proc in running.values():
                os.killpg(proc.pid, signal.SIGKILL)
        raise

    total = time.monotonic() - started
    print("\n[lanes] the binaries by time (seconds):")
    for name, took, code in sorted(results, key=lambda r: -r[1]):
        print(f"{took:8.1f}  {'ok' if code == 0 else 'FAILED'}  {name}")
    failed = [name for name, _, code in results if code != 0]
    print(f"[lanes] {len(results)} binaries, {len(failed)} failed, {total:.0f} s in all "
          f"({built:.0f} s of build)")
    if failed:
        print("[lanes] failed: " + ", ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
