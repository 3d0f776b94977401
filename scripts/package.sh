#!/usr/bin/env bash
# Build the three Lambda functions with cargo-lambda (zig as the linker, no Docker) and
# package what `template.yaml` deploys, with sizes:
#
#   $DIST/worker.zip, relay.zip, sweeper.zip   (each: one `bootstrap`, arm64)
#   $DIST/definitions-layer.zip                (the DefinitionsLayer: examples/ at /opt)
#   $DIST/SIZES.md                             (bytes of every binary and zip)
#
# DIST defaults to $CARGO_TARGET_DIR/dist (target/dist).
#
# Usage:
#   scripts/package.sh            # arm64 release build + zips + sizes
#   scripts/package.sh --smoke    # also build for this machine (x86_64) and start each function
#                                 # against a local Lambda Runtime API + moto with the template's
#                                 # environment (init time, peak RSS, AWS calls; see lambda-smoke)
#   scripts/package.sh --sam      # also run `sam build` (the same cargo-lambda build, driven by SAM)
#
# Needs: the venv from .ci/setup.sh (cargo-lambda, ziglang + the zig wrapper, aws-sam-cli,
# moto) and the aarch64 target (installed here if missing). Honours CARGO_TARGET_DIR.
# A cold release build (LTO, one codegen unit, the AWS SDK) takes many minutes on 2 cores.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

SMOKE=0
SAM=0
for arg in "$@"; do
    case "$arg" in
        --smoke) SMOKE=1 ;;
        --sam) SAM=1 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "unknown argument: $arg" >&2; exit 2 ;;
    esac
done

say() { printf '[package] %s\n' "$*"; }
export PATH="$REPO/.venv/bin:$PATH"
export SAM_CLI_TELEMETRY=0
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
DIST="${DIST:-$TARGET_DIR/dist}"
PY="$REPO/.venv/bin/python"
BINS=(worker relay sweeper)

for tool in cargo-lambda zig; do
    command -v "$tool" >/dev/null || { echo "missing $tool: run bash .ci/setup.sh" >&2; exit 1; }
done
if ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
    say "adding the Rust target aarch64-unknown-linux-gnu"
    rustup target add aarch64-unknown-linux-gnu
fi

timed() {
    local label="$1"; shift
    local t0; t0=$(date +%s)
    "$@"
    say "$label: $(( $(date +%s) - t0 )) s"
}

pkg_args=()
for b in "${BINS[@]}"; do pkg_args+=(-p "$b"); done

say "cargo lambda build --release --arm64 (${BINS[*]})"
timed "arm64 release build" cargo lambda build --release --arm64 --locked "${pkg_args[@]}"

rm -rf "$DIST"
mkdir -p "$DIST"
# zips with fixed timestamps and modes (reproducible): `bootstrap` at the root, 0755
"$PY" - "$TARGET_DIR/lambda" "$DIST" "${BINS[@]}" <<'PYEOF'
import os, sys, zipfile
src, dist, bins = sys.argv[1], sys.argv[2], sys.argv[3:]
def add(z, path, arcname, mode):
    info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    with open(path, "rb") as f:
        z.writestr(info, f.read(), compresslevel=9)
for b in bins:
    with zipfile.ZipFile(os.path.join(dist, f"{b}.zip"), "w") as z:
        add(z, os.path.join(src, b, "bootstrap"), "bootstrap", 0o755)
PYEOF

# the definitions layer: the DefinitionsLayer's ContentUri, as SAM packages it (at /opt)
LAYER_SRC="$(awk '/^  DefinitionsLayer:/{f=1} f&&/ContentUri:/{print $2; exit}' template.yaml)"
LAYER_SRC="${LAYER_SRC%/}"
"$PY" - "$LAYER_SRC" "$DIST/definitions-layer.zip" <<'PYEOF'
import os, sys, zipfile
src, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w") as z:
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            info = zipfile.ZipInfo(os.path.relpath(path, src), date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(path, "rb") as f:
                z.writestr(info, f.read())
print("[package] layer files:", ", ".join(zipfile.ZipFile(out).namelist()))
PYEOF

{
    echo "| artifact | bytes |"
    echo "|---|---:|"
    for b in "${BINS[@]}"; do
        echo "| $b bootstrap (arm64, stripped) | $(stat -c %s "$TARGET_DIR/lambda/$b/bootstrap") |"
        echo "| $b.zip | $(stat -c %s "$DIST/$b.zip") |"
    done
    echo "| definitions-layer.zip | $(stat -c %s "$DIST/definitions-layer.zip") |"
} > "$DIST/SIZES.md"
cat "$DIST/SIZES.md"
file "$TARGET_DIR/lambda/worker/bootstrap" 2>/dev/null || true

if [ "$SMOKE" = 1 ]; then
    say "cargo lambda build --release --x86-64 (to run here)"
    timed "x86_64 release build" cargo lambda build --release --x86-64 --locked \
        --lambda-dir "$TARGET_DIR/lambda-x86_64" "${pkg_args[@]}"
    say "lambda-smoke: each bootstrap against a local Runtime API + moto"
    export STM_PYTHON="$PY"
    # the layer as Lambda mounts it: unzip it where /opt would be
    OPT="$(mktemp -d)"
    "$PY" -m zipfile -e "$DIST/definitions-layer.zip" "$OPT"
    timed "smoke" cargo run -q --locked -p stm-deploytest --bin lambda-smoke -- \
        --lambda-dir "$TARGET_DIR/lambda-x86_64" --zips "$DIST" --definitions "$OPT" --runs 5
    rm -rf "$OPT"
fi

if [ "$SAM" = 1 ]; then
    say "sam build (rust-cargolambda, no container)"
    timed "sam build" sam build
    for b in Worker Relay Sweeper; do
        ls -l ".aws-sam/build/$b/bootstrap"
    done
fi
say "done: $DIST"
