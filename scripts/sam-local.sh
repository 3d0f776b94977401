#!/usr/bin/env bash
# Run the three functions with `sam local invoke` on this machine, against moto, with every
# sample in events/ — no container registry needed.
#
#   scripts/sam-local.sh               # image (if missing), sam build, moto, every invoke
#   scripts/sam-local.sh --no-build    # reuse the last `sam build` in $SAM_BUILD_DIR
#   scripts/sam-local.sh --rebuild-image
#   STM_PROJECT=DIR scripts/sam-local.sh   # a project made by `stm init`: its template,
#                                          # functions and events/, this checkout's stm
#
# What it does, in order (each step stops the script with a message if it fails):
#  1. The invoke image ($STM_INVOKE_IMAGE, stm-invoke:local): built here once, never pulled.
#     A Debian minbase root filesystem (debootstrap) imported with `docker import`, with the
#     provided.al2023 layout (/var/task, /var/runtime, /opt). SAM adds its own Runtime
#     Interface Emulator (samcli/local/rapid/aws-lambda-rie-<arch>) on top of it
#     (`FROM <image>`, ADD, `RUN mv/chmod`: the image needs /bin/sh, hence not FROM scratch),
#     mounts the built function at /var/task and, for the worker, copies the definitions
#     layer to /opt. The RIE starts /var/task/bootstrap.
#  2. `sam build --parameter-overrides Architecture=<host arch>` into $SAM_BUILD_DIR
#     (cargo-lambda + zig, no Docker), unless --no-build.
#  3. moto on 127.0.0.1 (port $MOTO_PORT, 5055, or a free one), then `stm local --endpoint`
#     once to create the seven tables and the queues, stopped as soon as it has (moto keeps
#     them).
#  4. `sam local invoke <Function> -e events/<sample>.json` for each function and each of
#     its samples (worker-*, relay-*, sweeper-*), with events/sam-local/env-vars.json
#     (the port rewritten if moto is not on 5055), `--invoke-image --skip-pull-image
#     --docker-network host`. An invocation that fails, or answers with an errorType,
#     stops the script.
#  5. moto is stopped on exit (trap).
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
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --rebuild-image) rebuild_image=1 ;;
    -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "sam-local: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

die() {
  echo >&2
  echo "sam-local: FAILED: $*" >&2
  exit 1
}
step() { printf '\n==> %s\n' "$*"; }
now() { date +%s; }

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
command -v sam >/dev/null || die "sam not found on PATH ($VENV/bin): install aws-sam-cli in $VENV"
[[ -f $ENV_FILE ]] || die "$ENV_FILE is missing"
docker info >/dev/null 2>&1 || die "the Docker Engine is not reachable (docker info failed)"

# ---------------------------------------------------------------- 1. the invoke image
if [[ $rebuild_image == 1 ]] || ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  step "building the invoke image $IMAGE (debootstrap $SUITE minbase + docker import; no registry)"
  [[ $(id -u) == 0 ]] || die "building $IMAGE needs root (debootstrap); run as root once, or build it yourself and set STM_INVOKE_IMAGE"
  command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install -y debootstrap"
  [[ -n $MIRROR ]] || die "no Debian archive found in this machine's apt sources: set DEBIAN_MIRROR to one"
  t0=$(now)
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
  echo "[sam-local] image $IMAGE built in $(($(now) - t0))s ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%d MB", $1/1e6}'))"
else
  echo "[sam-local] invoke image $IMAGE present"
fi

# ---------------------------------------------------------------- 2. sam build
if [[ $build == 1 ]]; then
  step "sam build --build-dir $BUILD_DIR --parameter-overrides Architecture=$ARCH"
  t0=$(now)
  sam build --build-dir "$BUILD_DIR" --parameter-overrides "Architecture=$ARCH" ||
    die "sam build failed (output above)"
  echo "[sam-local] sam build took $(($(now) - t0))s"
fi
[[ -f $BUILD_DIR/template.yaml ]] || die "no $BUILD_DIR/template.yaml: run without --no-build first"
for fn in Worker Relay Sweeper; do
  bin=$BUILD_DIR/$fn/bootstrap
  [[ -x $bin ]] || die "$bin is missing: sam build did not build $fn"
  case "$ARCH:$(file -b "$bin" 2>/dev/null || true)" in
    x86_64:*aarch64* | arm64:*x86-64*) die "$bin is not built for $ARCH: rebuild without --no-build" ;;
  esac
done

# ---------------------------------------------------------------- 3. moto and the resources
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

step "moto on $ENDPOINT"
python -m moto.server -H 127.0.0.1 -p "$PORT" >"$WORK/moto.log" 2>&1 &
MOTO_PID=$!
for _ in $(seq 1 100); do
  port_busy "$PORT" && break
  kill -0 "$MOTO_PID" 2>/dev/null || { cat "$WORK/moto.log" >&2; die "moto did not start (log above)"; }
  sleep 0.2
done
port_busy "$PORT" || die "moto does not answer on $ENDPOINT after 20 s"

step "tables ${PREFIX}_* and queue $QUEUE (stm local --endpoint, stopped once it has created them)"
t0=$(now)
# only the tables and queues matter here, so stm's own examples stand in for the project's
# machines (whose Rust actions this `stm local` could not call)
cargo run -q --manifest-path "$ROOT/Cargo.toml" -p stm -- local --endpoint "$ENDPOINT" \
  --prefix "$PREFIX" --queue "$QUEUE" --definitions "$ROOT/examples" >"$WORK/setup.log" 2>&1 &
SETUP_PID=$!
ready=0
for _ in $(seq 1 1200); do # up to 10 min: `cargo run` may compile the CLI first
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
echo "[sam-local] set up in $(($(now) - t0))s"

sed "s#http://127.0.0.1:5055#$ENDPOINT#g" "$ENV_FILE" >"$WORK/env-vars.json"

# ---------------------------------------------------------------- 4. sam local invoke
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

function_of() {
  case "$1" in
    worker-*) echo Worker ;;
    relay-*) echo Relay ;;
    sweeper-*) echo Sweeper ;;
  esac
}

n=0
for sample in events/*.json; do
  name=$(basename "$sample")
  fn=$(function_of "$name")
  [[ -n $fn ]] || { echo "[sam-local] skipping $sample (no function for it)"; continue; }
  step "sam local invoke $fn -e $sample"
  t0=$(now)
  set +e
  python "$WORK/sam_host.py" local invoke "$fn" \
    --template "$BUILD_DIR/template.yaml" \
    --parameter-overrides "Architecture=$ARCH" \
    --event "$sample" \
    --env-vars "$WORK/env-vars.json" \
    --invoke-image "$IMAGE" --skip-pull-image \
    --docker-network host \
    >"$WORK/out.json" 2>"$WORK/err.log"
  rc=$?
  set -e
  cat "$WORK/err.log"
  echo "--- response of $fn ($name):"
  cat "$WORK/out.json"
  echo
  [[ $rc == 0 ]] || die "sam local invoke $fn -e $sample exited with $rc (output above)"
  # a failed init or a crash: sam still exits 0, prints no response and the RIE logs it
  if grep -q '(rapid) Invoke.* failed' "$WORK/err.log" || [[ ! -s $WORK/out.json ]]; then
    die "$fn failed on $sample: no response (the function's log is above)"
  fi
  if grep -q '"errorType"' "$WORK/out.json"; then
    die "$fn failed on $sample: $(cat "$WORK/out.json")"
  fi
  echo "[sam-local] $fn $name: ok in $(($(now) - t0))s"
  n=$((n + 1))
done
[[ $n -gt 0 ]] || die "no sample in events/ was invoked"
step "all $n invocations answered"
