#!/usr/bin/env bash
# Run the three functions with `sam local invoke` on this machine, against moto, with every
# sample in events/, and check what each one did — no container registry needed.
#
#   scripts/sam-local.sh               # image (if missing), sam build, moto, every invoke
#   scripts/sam-local.sh --no-build    # reuse the last `sam build` in $SAM_BUILD_DIR
#   scripts/sam-local.sh --rebuild-image
#   scripts/sam-local.sh --no-build --plant-idle-worker   # must FAIL: see below
#   STM_PROJECT=DIR scripts/sam-local.sh   # a project made by `stm init`: its template,
#                                          # functions and events/, this checkout's stm
#
# What it does, in order (each step stops the script with a message if it fails; the time
# of each step and the total are printed at the end, failed or not):
#  1. The invoke image ($STM_INVOKE_IMAGE, stm-invoke:local): built here once, never pulled.
#     A Debian minbase root filesystem (debootstrap, installed with apt-get first if it is
#     missing and this runs as root) imported with `docker import`, with the
#     provided.al2023 layout (/var/task, /var/runtime, /opt). SAM adds its own Runtime
#     Interface Emulator (samcli/local/rapid/aws-lambda-rie-<arch>) on top of it
#     (`FROM <image>`, ADD, `RUN mv/chmod`: the image needs /bin/sh, hence not FROM scratch),
#     mounts the built function at /var/task and, for the worker, copies the definitions
#     layer to /opt. The RIE starts /var/task/bootstrap.
#  2. `sam build --parameter-overrides Architecture=<host arch>` into $SAM_BUILD_DIR
#     (cargo-lambda + zig, no Docker), unless --no-build.
#  3. The stm CLI (`cargo build -p stm`: minutes the first time, said before it starts).
#  4. moto on 127.0.0.1 (port $MOTO_PORT, 5055, or a free one), then `stm local --endpoint`
#     once to create the seven tables and the queues, stopped as soon as it has (moto keeps
#     them).
#  5. In this checkout: the executions the samples address, made with the real CLI
#     (`stm create` order-1..3 and checkout-1..2, `stm send order-3 Submit`), their
#     messages taken off the queue as Lambda's SQS trigger hands them over
#     (scripts/sam_local_check.py) and given to the Worker: every execution must be
#     RUNNING where its Start (and order-3's Submit) leaves it.
#  6. `sam local invoke <Function> -e events/<sample>.json` for each sample, with
#     events/sam-local/env-vars.json (the port rewritten if moto is not on 5055),
#     `--invoke-image --skip-pull-image --docker-network host`. Every invocation must
#     answer (no crash, no errorType), and then, per sample:
#       worker-domain-event   no batchItemFailures; order-1 moved Draft -> Payment.Charging
#                             with the event's amount, its Payment timer armed
#       worker-spawn-intent   none; the region child checkout-1:Fulfil.Payment:1 exists,
#                             RUNNING at Fulfil.Payment.Charging under checkout-1
#       worker-poison         exactly its record reported (the worker reports a record it
#                             cannot parse until SQS dead-letters it); order-1 untouched
#       worker-multi-group    none; order-2 at Shipping (Submit then PaymentOk, in order),
#                             checkout-2 at Fulfil; the fork's two spawn intents are on the
#                             queue and the Worker, given them, creates both regions
#       relay-scheduled       an outbox row left pending (as by a crash between a commit
#                             and its flush) is forwarded: the row is gone, its Shipped is on
#                             the queue and the Worker, given it, finishes order-2
#       sweeper-doorbell      order-1's Payment timer, moved to the doorbell's fire_at, is
#                             fired: the timer is gone, its Timeout is on the queue and the
#                             Worker, given it, moves order-1 to GaveUp
#       sweeper-scheduled     order-3's Payment timer, made due, is fired the same way
#     and nothing else may be left on the queue after each. A sample with no check here
#     stops the script. In a project (STM_PROJECT) its events/sam-local/checks.json says
#     which executions to create first and what each sample must leave (`stm init` writes
#     one for its samples); a sample it does not list stops the script.
#  7. moto is stopped on exit (trap).
#
# --plant-idle-worker proves the checks catch a Worker that does nothing: the build is
# copied, the copy's Worker bootstrap replaced by a shell stub that answers every invocation
# with {"batchItemFailures":[]} and touches nothing, and the run must fail at the first
# check of the tables. Never the default; $SAM_BUILD_DIR itself is not changed.
#
# SAM CLI 1.170 needs two corrections, applied by a small launcher around `sam` (written to
# a temporary directory, nothing is changed in the installed package):
#  - `--docker-network host` does not put the container in the host's network namespace
#    (SAM only skips connecting it to a network, so it stays on the default bridge, where
#    127.0.0.1 is not the host and moto is unreachable). The launcher creates the function
#    containers with network_mode=host, and since port publishing does not apply there,
#    tells the RIE to listen on the host port SAM chose (--runtime-interface-emulator-address)
#    and to put its Runtime API on a free loopback port (--runtime-api-address).
#  - `--env-vars` only overrides variables the template declares; STM_ENDPOINT_URL and
#    STM_EMULATOR are local-only and are not in the template. The launcher passes the
#    file's other variables too.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# the project whose template, functions and events/ are invoked: this checkout, or one
# that `stm init` made
PROJECT=$(cd "${STM_PROJECT:-$ROOT}" && pwd)
cd "$PROJECT"

VENV=${VENV:-$ROOT/.venv}
export PATH="$VENV/bin:$PATH" SAM_CLI_TELEMETRY=0
# dummy credentials: SAM reads the shell's, and must not go looking for real ones
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
unset AWS_PROFILE AWS_SESSION_TOKEN

IMAGE=${STM_INVOKE_IMAGE:-stm-invoke:local}
BUILD_DIR=${SAM_BUILD_DIR:-/tmp/sam-build}
ENV_FILE=events/sam-local/env-vars.json
PREFIX=samlocal
QUEUE=samlocal-events.fifo
SUITE=${DEBIAN_SUITE:-bookworm}
CHECK="$ROOT/scripts/sam_local_check.py"
# the Debian archive the invoke image is bootstrapped from: the machine's own apt source
# (its first deb822 URIs line or sources.list deb line) unless DEBIAN_MIRROR names one
apt_mirror() {
  local uri
  uri=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
  [ -n "$uri" ] || uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }' /etc/apt/sources.list 2>/dev/null | head -n 1)
  printf '%s' "$uri"
}
MIRROR=${DEBIAN_MIRROR:-$(apt_mirror)}

build=1
rebuild_image=0
plant_idle=0
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --rebuild-image) rebuild_image=1 ;;
    --plant-idle-worker) plant_idle=1 ;;
    -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "sam-local: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

now() { date +%s; }
T_START=$(now)
STEP_NAMES=()
STEP_SECS=()
STEP_T0=
STEP_NAME=
# close the running step: its time goes into the summary
end_step() {
  if [[ -n $STEP_NAME ]]; then
    STEP_NAMES+=("$STEP_NAME")
    STEP_SECS+=($(($(now) - STEP_T0)))
    STEP_NAME=
  fi
}
# a step: its banner now, its time in the summary at the end
step() {
  end_step
  STEP_NAME=$1
  STEP_T0=$(now)
  printf '\n==> %s\n' "$*"
}
say() { echo "[sam-local] $*"; }
times_summary() {
  end_step
  echo
  echo "[sam-local] time per step:"
  local i
  for i in "${!STEP_NAMES[@]}"; do
    printf '[sam-local] %6ss  %s\n' "${STEP_SECS[$i]}" "${STEP_NAMES[$i]}"
  done
  printf '[sam-local] %6ss  total\n' "$(($(now) - T_START))"
}

die() {
  echo >&2
  echo "sam-local: FAILED: $*" >&2
  exit 1
}

WORK=$(mktemp -d /tmp/sam-local.XXXXXX)
MOTO_PID=
SETUP_PID=
cleanup() {
  local rc=$?
  if [[ -n $SETUP_PID ]] && kill -0 "$SETUP_PID" 2>/dev/null; then kill -TERM "$SETUP_PID" 2>/dev/null || true; fi
  if [[ -n $MOTO_PID ]] && kill -0 "$MOTO_PID" 2>/dev/null; then
    kill -TERM "$MOTO_PID" 2>/dev/null || true
    wait "$MOTO_PID" 2>/dev/null || true
    echo "[sam-local] moto stopped"
  fi
  times_summary || true
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

case "$(uname -m)" in
  x86_64 | amd64) ARCH=x86_64 ;;
  aarch64 | arm64) ARCH=arm64 ;;
  *) die "unsupported host architecture $(uname -m)" ;;
esac
command -v sam >/dev/null || die "sam not found on PATH ($VENV/bin): run .ci/setup.sh (it installs aws-sam-cli in $VENV)"
[[ -f $ENV_FILE ]] || die "$ENV_FILE is missing"
docker info >/dev/null 2>&1 || die "the Docker Engine is not reachable (docker info failed)"

# ---------------------------------------------------------------- 1. the invoke image
if [[ $rebuild_image == 1 ]] || ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  if ! command -v debootstrap >/dev/null; then
    [[ $(id -u) == 0 ]] ||
      die "building $IMAGE needs debootstrap, which is missing, and root: run this once as root (it installs debootstrap with apt-get), or run 'sudo apt-get install -y debootstrap' and then this as root"
    step "installing debootstrap"
    say "apt-get install debootstrap: needed once, to build $IMAGE"
    if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap; } >"$WORK/apt.log" 2>&1; then
      tail -20 "$WORK/apt.log" >&2
      die "apt-get install debootstrap failed (log above)"
    fi
    command -v debootstrap >/dev/null || die "debootstrap is still missing after apt-get install"
    say "debootstrap $(dpkg-query -W -f '${Version}' debootstrap 2>/dev/null || echo installed)"
  fi
  step "the invoke image $IMAGE"
  say "building it: debootstrap $SUITE minbase + docker import, no registry (a minute or two)"
  [[ $(id -u) == 0 ]] || die "building $IMAGE needs root (debootstrap); run as root once, or build it yourself and set STM_INVOKE_IMAGE"
  [[ -n $MIRROR ]] || die "no Debian archive found in this machine's apt sources: set DEBIAN_MIRROR to one"
  rootfs=$WORK/rootfs
  debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap $SUITE from $MIRROR failed (log above)"; }
  # the provided.al2023 layout: the code at /var/task, layers at /opt
  mkdir -p "$rootfs/var/task" "$rootfs/var/runtime" "$rootfs/opt"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  # SAM derives stm-invoke:rapid-<arch> (and samcli/lambda-* for the worker) from the image
  # and reuses the first; drop stale ones so they are derived from this image again
  docker image ls --format '{{.Repository}}:{{.Tag}}' | grep -E "^${IMAGE%%:*}:rapid-" | xargs -r docker image rm -f >/dev/null || true
  tar -C "$rootfs" -c . | docker import \
    --change 'WORKDIR /var/task' \
    --change 'ENV LAMBDA_TASK_ROOT=/var/task LAMBDA_RUNTIME_DIR=/var/runtime LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --message "stm sam-local invoke image (debian $SUITE minbase)" - "$IMAGE" >/dev/null ||
    die "docker import of the root filesystem as $IMAGE failed"
  rm -rf "$rootfs"
  say "image $IMAGE built in $(($(now) - STEP_T0))s ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%d MB", $1/1e6}'))"
else
  say "invoke image $IMAGE present"
fi

# ---------------------------------------------------------------- 2. sam build
if [[ $build == 1 ]]; then
  step "sam build"
  say "sam build --build-dir $BUILD_DIR --parameter-overrides Architecture=$ARCH: three release builds, about a quarter of an hour cold"
  sam build --build-dir "$BUILD_DIR" --parameter-overrides "Architecture=$ARCH" ||
    die "sam build failed (output above)"
  say "sam build took $(($(now) - STEP_T0))s"
fi
[[ -f $BUILD_DIR/template.yaml ]] || die "no $BUILD_DIR/template.yaml: run without --no-build first"
for fn in Worker Relay Sweeper; do
  bin=$BUILD_DIR/$fn/bootstrap
  [[ -x $bin ]] || die "$bin is missing: sam build did not build $fn"
  case "$ARCH:$(file -b "$bin" 2>/dev/null || true)" in
    x86_64:*aarch64* | arm64:*x86-64*) die "$bin is not built for $ARCH: rebuild without --no-build" ;;
  esac
done

TEMPLATE=$BUILD_DIR/template.yaml
if [[ $plant_idle == 1 ]]; then
  step "planting an idle Worker"
  say "--plant-idle-worker: a copy of $BUILD_DIR whose Worker answers {\"batchItemFailures\":[]} and does nothing; this run must fail"
  cp -a "$BUILD_DIR" "$WORK/build"
  # the layer's ContentUri is relative to $BUILD_DIR: make it absolute for the copy
  python3 - "$BUILD_DIR" "$WORK/build/template.yaml" <<'PY'
import os, re, sys
build, template = sys.argv[1:]
text = open(template).read()
def absolute(m):
    path = m.group(2)
    return m.group(1) + (path if os.path.isabs(path) else os.path.normpath(os.path.join(build, path)))
open(template, "w").write(re.sub(r"^(\s*ContentUri: )(\S+)$", absolute, text, flags=re.M))
PY
  # the Lambda Runtime API loop in bash (the image has bash, no curl): take the next
  # invocation, answer it without reading it, again
  cat >"$WORK/build/Worker/bootstrap" <<'SH'
#!/bin/bash
api=$AWS_LAMBDA_RUNTIME_API
body='{"batchItemFailures":[]}'
while true; do
  exec 3<>"/dev/tcp/${api%:*}/${api##*:}" || exit 1
  printf 'GET /2018-06-01/runtime/invocation/next HTTP/1.1\r\nHost: %s\r\n\r\n' "$api" >&3
  id=
  while IFS= read -r line <&3; do
    line=${line%$'\r'}
    [[ -z $line ]] && break
    case "${line,,}" in lambda-runtime-aws-request-id:*) id=${line#*: } ;; esac
  done
  exec 3<&-
  exec 3<>"/dev/tcp/${api%:*}/${api##*:}" || exit 1
  printf 'POST /2018-06-01/runtime/invocation/%s/response HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
    "$id" "$api" "${#body}" "$body" >&3
  read -r _ <&3 || true
  exec 3<&-
done
SH
  chmod +x "$WORK/build/Worker/bootstrap"
  TEMPLATE=$WORK/build/template.yaml
fi

# ---------------------------------------------------------------- 3. the stm CLI
step "the stm CLI"
say "cargo build -p stm: the first time, minutes of compiling (progress below)"
set +e
cargo build --manifest-path "$ROOT/Cargo.toml" -p stm 2>&1 | awk '
  /^ *Compiling / { n++; if (n % 50 == 0) { printf "[sam-local]   cargo: %d crates compiled so far\n", n; fflush() } next }
  /^ *Finished|^error/ { sub(/^ */, ""); print "[sam-local]   cargo: " $0; fflush() }'
rc=${PIPESTATUS[0]}
set -e
[[ $rc == 0 ]] || die "cargo build -p stm failed (run it by hand to see the whole error)"
TARGET_DIR=$(cargo metadata --manifest-path "$ROOT/Cargo.toml" --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
STM=$TARGET_DIR/debug/stm
[[ -x $STM ]] || die "cargo build -p stm did not produce $STM (run it by hand to see why)"
say "stm CLI ready in $(($(now) - STEP_T0))s: $STM"

# ---------------------------------------------------------------- 4. moto and the resources
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=${MOTO_PORT:-5055}
if port_busy "$PORT"; then
  [[ -n ${MOTO_PORT:-} ]] && die "port $PORT (MOTO_PORT) is in use"
  PORT=$(free_port)
fi
ENDPOINT=http://127.0.0.1:$PORT
export STM_ENDPOINT_URL=$ENDPOINT

step "moto on $ENDPOINT"
python -m moto.server -H 127.0.0.1 -p "$PORT" >"$WORK/moto.log" 2>&1 &
MOTO_PID=$!
for _ in $(seq 1 100); do
  port_busy "$PORT" && break
  kill -0 "$MOTO_PID" 2>/dev/null || { cat "$WORK/moto.log" >&2; die "moto did not start (log above)"; }
  sleep 0.2
done
port_busy "$PORT" || die "moto does not answer on $ENDPOINT after 20 s"

step "tables ${PREFIX}_* and queue $QUEUE"
say "stm local --endpoint, stopped once it has created them"
# only the tables and queues matter here, so stm's own examples stand in for the project's
# machines (whose Rust actions this `stm local` could not call)
"$STM" local --endpoint "$ENDPOINT" \
  --prefix "$PREFIX" --queue "$QUEUE" --definitions "$ROOT/examples" >"$WORK/setup.log" 2>&1 &
SETUP_PID=$!
ready=0
for _ in $(seq 1 120); do
  if grep -q '^\[stm local\] tables' "$WORK/setup.log"; then ready=1; break; fi
  kill -0 "$SETUP_PID" 2>/dev/null || break
  sleep 0.5
done
if [[ $ready != 1 ]]; then
  tail -30 "$WORK/setup.log" >&2
  die "stm local did not create the tables and queues on $ENDPOINT (log above)"
fi
kill -TERM "$SETUP_PID" 2>/dev/null || true
wait "$SETUP_PID" 2>/dev/null || true
SETUP_PID=
grep '^\[stm local\] tables' "$WORK/setup.log"

sed "s#http://127.0.0.1:5055#$ENDPOINT#g" "$ENV_FILE" >"$WORK/env-vars.json"
QUEUE_URL=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["Parameters"]["STM_QUEUE_URL"])' "$WORK/env-vars.json")

# ---------------------------------------------------------------- sam local invoke
cat >"$WORK/sam_host.py" <<'PY'
"""`sam` with --docker-network host honoured and --env-vars passing undeclared variables."""
import socket
import sys

import docker.models.containers as containers
from samcli.local.lambdafn.env_vars import EnvironmentVariables


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_create = containers.ContainerCollection.create


def create(self, image, command=None, **kwargs):
    if (kwargs.get("labels") or {}).get("sam.cli.container.type") == "lambda":
        ports = kwargs.pop("ports", None) or {}
        _iface, host_port = ports["8080"]
        kwargs["network_mode"] = "host"
        kwargs["entrypoint"] = list(kwargs.get("entrypoint") or []) + [
            "--runtime-interface-emulator-address", f"127.0.0.1:{host_port}",
            "--runtime-api-address", f"127.0.0.1:{_free_port()}",
        ]
    return _create(self, image, command, **kwargs)


containers.ContainerCollection.create = create

_resolve = EnvironmentVariables.resolve


def resolve(self):
    result = _resolve(self)
    for name, value in self.override_values.items():
        if name not in self.variables:
            result[name] = self._stringify_value(value)
    return result


EnvironmentVariables.resolve = resolve

from samcli.cli.main import cli  # noqa: E402

sys.argv[0] = "sam"
sys.exit(cli())
PY

OUT=$WORK/out.json
n=0
# invoke FUNCTION EVENT_FILE: it must answer, without an errorType; the response is in $OUT,
# the function's log in $WORK/err.log
invoke() {
  local fn=$1 event=$2 rc t0
  t0=$(now)
  say "sam local invoke $fn -e $event"
  set +e
  python "$WORK/sam_host.py" local invoke "$fn" \
    --template "$TEMPLATE" \
    --parameter-overrides "Architecture=$ARCH" \
    --event "$event" \
    --env-vars "$WORK/env-vars.json" \
    --invoke-image "$IMAGE" --skip-pull-image \
    --docker-network host \
    >"$OUT" 2>"$WORK/err.log"
  rc=$?
  set -e
  sed 's/^/    /' "$WORK/err.log"
  echo "--- response of $fn ($(basename "$event")): $(cat "$OUT")"
  [[ $rc == 0 ]] || die "sam local invoke $fn -e $event exited with $rc (output above)"
  # a failed init or a crash: sam still exits 0, prints no response and the RIE logs it
  if grep -q '(rapid) Invoke.* failed' "$WORK/err.log" || [[ ! -s $OUT ]]; then
    die "$fn failed on $event: no response (the function's log is above)"
  fi
  if grep -q '"errorType"' "$OUT"; then
    die "$fn failed on $event: $(cat "$OUT")"
  fi
  n=$((n + 1))
  say "$fn answered in $(($(now) - t0))s"
}

# the checks: each stops the script with what it found and what it expected
stm_() { "$STM" "$@" --endpoint "$ENDPOINT" --prefix "$PREFIX"; }
# expect_failures [MESSAGE_ID ...]: the last response's batchItemFailures, exactly
expect_failures() {
  python "$CHECK" failures "$OUT" "$@" >"$WORK/check.txt" 2>&1 ||
    die "$LABEL: $(cat "$WORK/check.txt")"
  say "$LABEL: $(cat "$WORK/check.txt")"
}
# expect_exe ID FIELD=VALUE ...: the execution as `stm show ID --json` prints it
expect_exe() {
  local id=$1
  shift
  stm_ show "$id" --json >"$WORK/exe.json" 2>"$WORK/check.txt" ||
    die "$LABEL: execution $id: $(cat "$WORK/check.txt")"
  python "$CHECK" exe "$@" <"$WORK/exe.json" >"$WORK/check.txt" 2>&1 ||
    die "$LABEL: $(cat "$WORK/check.txt") (a Worker that did nothing?)"
  say "$LABEL: $(cat "$WORK/check.txt")"
}
exe_field() { stm_ show "$1" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"; }
# expect_timer ID PATH none|armed
expect_timer() {
  local got
  got=$(python "$CHECK" timer "$PREFIX" "$1" "$2") || die "$LABEL: reading the timer of $1 at $2 failed"
  case "$3:$got" in
    none:none) say "$LABEL: no timer of $1 at $2, as expected" ;;
    armed:none) die "$LABEL: no timer of $1 at $2, expected one armed" ;;
    none:*) die "$LABEL: the timer of $1 at $2 is still armed (fire_at $got), expected it fired" ;;
    armed:*) say "$LABEL: the timer of $1 at $2 is armed (fire_at $got)" ;;
  esac
}
# queued COUNT: take what is on the event queue (an SQS event in $WORK/queued.json), and
# check there are COUNT messages
queued() {
  local got
  got=$(python "$CHECK" drain "$QUEUE_URL" "$WORK/queued.json" 2>"$WORK/queued.txt") ||
    { cat "$WORK/queued.txt" >&2; die "$LABEL: reading the queue failed"; }
  cat "$WORK/queued.txt"
  [[ $got == "$1" ]] || die "$LABEL: $got message(s) on the queue, expected $1 (listed above)"
  say "$LABEL: $got message(s) on the queue, as expected"
}
# queued_has REGEX: one of the messages just taken off the queue matches
queued_has() {
  grep -qE "$1" "$WORK/queued.txt" || die "$LABEL: no message matching $1 among those on the queue (listed above)"
}

function_of() {
  case "$1" in
    worker-*) echo Worker ;;
    relay-*) echo Relay ;;
    sweeper-*) echo Sweeper ;;
  esac
}

if [[ $PROJECT != "$ROOT" ]]; then
  # a project's samples, checked as its events/sam-local/checks.json says: the executions
  # they address created first (their Start given to the Worker), then each sample in its
  # order, its response and the executions it must leave
  CHECKS=$PROJECT/events/sam-local/checks.json
  [[ -f $CHECKS ]] || die "no $CHECKS: say there what each sample in events/ must leave (stm init writes one)"
  python "$CHECK" samples "$CHECKS" events >"$WORK/samples.txt" 2>"$WORK/check.txt" || die "$(cat "$WORK/check.txt")"
  step "setup: the executions the samples address"
  LABEL=setup
  created=0
  while read -r file machine id; do
    stm_ create "$PROJECT/$file" "$machine" --id "$id" --queue "$QUEUE"
    created=$((created + 1))
  done < <(python "$CHECK" setup "$CHECKS")
  if ((created > 0)); then
    queued "$created"
    invoke Worker "$WORK/queued.json"
    expect_failures
  fi
  while read -r name; do
    fn=$(function_of "$name")
    [[ -n $fn ]] || die "events/$name: no function for it (worker-*, relay-* or sweeper-*)"
    step "sam local invoke $fn -e events/$name"
    LABEL=$name
    invoke "$fn" "events/$name"
    python "$CHECK" sample-failures "$CHECKS" "$name" "$OUT" >"$WORK/check.txt" 2>&1 || die "$LABEL: $(cat "$WORK/check.txt")"
    say "$LABEL: $(cat "$WORK/check.txt")"
    while read -r id; do
      stm_ show "$id" --json >"$WORK/exe.json" 2>"$WORK/check.txt" || die "$LABEL: execution $id: $(cat "$WORK/check.txt")"
      python "$CHECK" sample-exe "$CHECKS" "$name" "$id" <"$WORK/exe.json" >"$WORK/check.txt" 2>&1 ||
        die "$LABEL: $(cat "$WORK/check.txt") (a Worker that did nothing?)"
      say "$LABEL: $(cat "$WORK/check.txt")"
    done < <(python "$CHECK" ids "$CHECKS" "$name")
  done <"$WORK/samples.txt"
  [[ $n -gt 0 ]] || die "no sample in events/ was invoked"
  step "all $n invocations answered as events/sam-local/checks.json says"
  exit 0
fi

# every sample here has its checks below
SAMPLES=(worker-domain-event worker-spawn-intent worker-poison worker-multi-group relay-scheduled sweeper-doorbell sweeper-scheduled)
for sample in events/*.json; do
  name=$(basename "$sample" .json)
  [[ " ${SAMPLES[*]} " == *" $name "* ]] || die "events/$name.json has no checks in scripts/sam-local.sh: add them"
done
ORDER=$ROOT/examples/order.stm
CHECKOUT=$ROOT/examples/checkout.stm

# ---------------------------------------------------------------- 5. the executions
step "setup: the executions the samples address"
say "stm create, stm send, and the Worker given their messages"
LABEL=setup
for id in order-1 order-2 order-3; do stm_ create "$ORDER" Order --id "$id" --queue "$QUEUE"; done
for id in checkout-1 checkout-2; do stm_ create "$CHECKOUT" Checkout --id "$id" --queue "$QUEUE"; done
stm_ send order-3 'Submit:{"amount": 7.5}' --queue "$QUEUE" --definitions "$ROOT/examples"
queued 6
invoke Worker "$WORK/queued.json"
expect_failures
for id in order-1 order-2; do expect_exe "$id" status=RUNNING active_path=Draft; done
expect_exe order-3 status=RUNNING active_path=Payment.Charging context.amount=7.5
for id in checkout-1 checkout-2; do expect_exe "$id" status=RUNNING active_path=Cart; done
expect_timer order-3 Payment armed
queued 0

# ---------------------------------------------------------------- 6. the samples
step "Worker: events/worker-domain-event.json (Submit to order-1)"
LABEL=worker-domain-event
invoke Worker events/worker-domain-event.json
expect_failures
expect_exe order-1 status=RUNNING active_path=Payment.Charging context.amount=42.5
expect_timer order-1 Payment armed
queued 0

step "Worker: events/worker-spawn-intent.json (the region Fulfil.Payment of checkout-1)"
LABEL=worker-spawn-intent
invoke Worker events/worker-spawn-intent.json
expect_failures
expect_exe checkout-1:Fulfil.Payment:1 status=RUNNING active_path=Fulfil.Payment.Charging parent_id=checkout-1
queued 0

step "Worker: events/worker-poison.json (a body that is no event, in order-1's group)"
LABEL=worker-poison
before=$(exe_field order-1 version)
invoke Worker events/worker-poison.json
expect_failures 0e8f1a52-0000-4000-8000-000000000003
grep -q 'poison message' "$WORK/err.log" || die "$LABEL: the Worker logged no 'poison message' line (log above)"
say "$LABEL: the Worker's line: $(grep -m1 'poison message' "$WORK/err.log")"
expect_exe order-1 status=RUNNING active_path=Payment.Charging "version=$before"
queued 0

step "Worker: events/worker-multi-group.json (order-2 Submit, checkout-2 Checkout, order-2 PaymentOk)"
LABEL=worker-multi-group
invoke Worker events/worker-multi-group.json
expect_failures
expect_exe order-2 status=RUNNING active_path=Shipping context.receipt=r-2
expect_exe checkout-2 status=RUNNING active_path=Fulfil
expect_timer order-2 Payment none
# the fork's spawn intents, flushed inline: the Worker creates the regions from them
queued 2
queued_has 'checkout-2:Fulfil\.Payment:0'
queued_has 'checkout-2:Fulfil\.Stock:0'
LABEL="worker-multi-group (its spawn intents)"
invoke Worker "$WORK/queued.json"
expect_failures
expect_exe checkout-2:Fulfil.Payment:0 status=RUNNING active_path=Fulfil.Payment.Charging parent_id=checkout-2
expect_exe checkout-2:Fulfil.Stock:0 status=RUNNING active_path=Fulfil.Stock.Reserving parent_id=checkout-2
queued 0

step "Relay: events/relay-scheduled.json (an outbox row left pending: Shipped to order-2)"
LABEL=relay-scheduled
python "$CHECK" outbox-put "$PREFIX" order-2 '{"id": "samlocal-order-2-shipped", "kind": "Shipped", "data": {}}' | sed 's/^/[sam-local] /'
[[ $(python "$CHECK" rows "$PREFIX") == "1 0" ]] || die "$LABEL: the outbox row was not written"
invoke Relay events/relay-scheduled.json
rows=$(python "$CHECK" rows "$PREFIX")
[[ $rows == "0 0" ]] || die "$LABEL: outbox and spawn rows left after the Relay: $rows, expected 0 0"
say "$LABEL: no outbox or spawn row left"
queued 1
queued_has 'samlocal-order-2-shipped'
LABEL="relay-scheduled (the forwarded Shipped)"
invoke Worker "$WORK/queued.json"
expect_failures
expect_exe order-2 status=DONE active_path=Delivered
queued 0

step "Sweeper: events/sweeper-doorbell.json (order-1's Payment timer, due at the doorbell's fire_at)"
LABEL=sweeper-doorbell
fire_at=$(python3 -c 'import json, sys; print(json.loads(json.load(open(sys.argv[1]))["Records"][0]["body"])["fire_at"])' events/sweeper-doorbell.json)
python "$CHECK" timer-due "$PREFIX" order-1 Payment "$fire_at" | sed 's/^/[sam-local] /'
invoke Sweeper events/sweeper-doorbell.json
expect_failures
expect_timer order-1 Payment none
queued 1
queued_has '"kind": ?"Timeout"'
LABEL="sweeper-doorbell (the Timeout)"
invoke Worker "$WORK/queued.json"
expect_failures
expect_exe order-1 active_path=GaveUp
queued 0

step "Sweeper: events/sweeper-scheduled.json (order-3's Payment timer, made due)"
LABEL=sweeper-scheduled
python "$CHECK" timer-due "$PREFIX" order-3 Payment "$(($(now) - 60))" | sed 's/^/[sam-local] /'
invoke Sweeper events/sweeper-scheduled.json
expect_timer order-3 Payment none
queued 1
queued_has '"kind": ?"Timeout"'
LABEL="sweeper-scheduled (the Timeout)"
invoke Worker "$WORK/queued.json"
expect_failures
expect_exe order-3 active_path=GaveUp
queued 0

step "all ${#SAMPLES[@]} samples checked ($n invocations)"
