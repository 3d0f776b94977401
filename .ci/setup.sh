#!/usr/bin/env bash
# Installs what the project's tests need that cargo does not bring: a Python venv at
# $REPO/.venv with the emulators and the reference implementation. Idempotent: a second run
# only checks that everything is there. Safe to run on a fresh machine (needs python3 and the
# package registries, nothing else).
#
#   bash .ci/setup.sh            # everything
#
# Tests find the interpreter as $STM_PYTHON, else <repo>/.venv/bin/python.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO/.venv"
PY="$VENV/bin/python"

# --- Python packages, one per line (pinned where the tests rely on exact behaviour) ---------
PY_PACKAGES=(
    "moto[server]==5.2.5"   # DynamoDB/SQS emulator in server mode (stm-testkit starts it)
    "boto3"                 # harel's DynamoDB store and the interop tests talk through it
    "harel==0.9.0"          # the reference implementation (semantics + interop)
    # deployment: template checks, the Lambda build (scripts/package.sh, sam build)
    "cfn-lint==1.58.0"      # lints template.yaml (.ci/run)
    "aws-sam-cli==1.170.0"  # sam validate --lint (.ci/run), sam build/deploy
    "cargo-lambda==1.9.2"   # cargo lambda build: cross-compiles the functions, zips them
    "ziglang==0.17.1"       # the zig linker cargo-lambda cross-compiles with (no Docker)
)

say() { printf '[setup] %s\n' "$*"; }

if [ ! -x "$PY" ]; then
    say "creating venv $VENV"
    python3 -m venv "$VENV"
else
    say "venv $VENV exists"
fi

# the packages not installed at their pinned version (a re-run installs nothing)
MISSING=()
for spec in "${PY_PACKAGES[@]}"; do
    if ! "$PY" - "$spec" >/dev/null 2>&1 <<'PYEOF'
import importlib.metadata as md, re, sys
name, _, pinned = re.sub(r"\[.*\]", "", sys.argv[1]).partition("==")
installed = md.version(name)
sys.exit(0 if not pinned or installed == pinned else 1)
PYEOF
    then
        MISSING+=("$spec")
    fi
done
if [ "${#MISSING[@]}" -eq 0 ]; then
    say "python packages: all installed"
else
    # the first time: about a minute and some 850 MB (aws-sam-cli and ziglang are most of
    # it); pip's own lines show each package as it comes, instead of a silent minute
    say "installing ${#MISSING[@]} python packages (the first time: about a minute, ~850 MB): ${MISSING[*]}"
    if ! "$PY" -m pip install --disable-pip-version-check --progress-bar off "${MISSING[@]}" 2>&1 \
        | { grep --line-buffered -E '^(Collecting|Successfully installed|ERROR)' | sed -u 's/^/[setup]   /'; true; }; then
        say "pip install failed (its errors are above)"
        exit 1
    fi
fi

# cargo-lambda looks for a `zig` executable; the ziglang wheel ships it as a module
ZIG="$VENV/bin/zig"
if [ ! -x "$ZIG" ]; then
    say "adding the zig wrapper $ZIG"
    printf '#!/bin/sh\nexec "$(dirname "$0")/python" -m ziglang "$@"\n' > "$ZIG"
    chmod +x "$ZIG"
fi

# Debian's packages the tests drive: chromium, headless, for `stm ui` (cli/tests/ui.rs);
# tmux for `stm monitor` (cli/tests/monitor.rs); `script` (bsdutils) gives `stm purge` a
# pseudo-terminal (cli/tests/purge.rs). One apt-get run for whatever is missing.
APT_NEEDED=()
command -v chromium >/dev/null 2>&1 || APT_NEEDED+=(chromium)
command -v tmux >/dev/null 2>&1 || APT_NEEDED+=(tmux)
command -v script >/dev/null 2>&1 || APT_NEEDED+=(bsdutils)
if [ "${#APT_NEEDED[@]}" -gt 0 ]; then
    say "installing Debian packages with apt-get (setup runs as root here and in CI): ${APT_NEEDED[*]}"
    if ! { apt-get update -q && apt-get install -y -q --no-install-recommends "${APT_NEEDED[@]}"; } 2>&1 \
        | { grep --line-buffered -E '^(Get:|Setting up|E:)' | sed -u 's/^/[setup]   /'; true; }; then
        say "apt-get failed (its errors are above)"
        exit 1
    fi
else
    say "chromium, tmux and script exist"
fi
for tool in chromium tmux script; do
    command -v "$tool" >/dev/null 2>&1 || { say "$tool is still missing after apt-get install"; exit 1; }
done

say "checking the installs"
"$PY" - <<'PYEOF'
import importlib.metadata as md
for name in ("moto", "boto3", "harel", "flask", "cfn-lint", "aws-sam-cli", "cargo-lambda", "ziglang"):
    print(f"[setup]   {name} {md.version(name)}")
import moto.server  # noqa: F401  (server mode needs the [server] extra)
PYEOF
"$ZIG" version | sed 's/^/[setup]   zig /'
say "done: python is $PY"
