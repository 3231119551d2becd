#!/usr/bin/env bash
# CI: install netc into a fresh virtual environment WITHOUT system site packages (torch's CPU wheel
# first, then the project without extras, as README's set-up says) and run the main commands on
# examples: every import netc makes must be a declared dependency. Any exit other than 0 fails the run.
#
# NETC_CI_VENV: where to make the venv (.ci/run sets it), else a temporary one. TRITON_FLOOR: when set
# (.ci/run sets it), Triton is held at that version, so the same environment then serves
# .ci/triton_floor.sh (one torch install instead of two: CI is CPU-bound).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
VENV=${NETC_CI_VENV:-$D/venv}
"$PYTHON" -m venv "$VENV"                            # isolated: no --system-site-packages
"$VENV/bin/python" -m pip install -q "torch==2.13.0"
CONSTRAINT=()
if [ -n "${TRITON_FLOOR:-}" ]; then
    echo "triton==$TRITON_FLOOR" >"$D/constraints.txt"
    CONSTRAINT=(-c "$D/constraints.txt")
fi
"$VENV/bin/python" -m pip install -q "${CONSTRAINT[@]}" "$ROOT"
export NETC_CACHE_DIR="$D/cache"
cd "$D"                                              # nothing importable from the checkout
NETC="$VENV/bin/netc"
set -x
"$NETC" check "$ROOT/examples/lenet.nd"
"$NETC" explain "$ROOT/examples/inception_v3.nd" --memory --brief >/dev/null
"$NETC" compile "$ROOT/examples/lenet.nd" -o "$D/lenet.so" --target cuda   # (the suite compiles AlexNet)
"$NETC" run "$ROOT/examples/lenet.nd" --reference -o "$D/lenet.npz"
"$NETC" export "$ROOT/examples/alexnet.nd" --format singa -o "$D/alexnet.conf"
"$NETC" check "$D/alexnet.conf"
set +x
echo "isolated install: ok"
