#!/usr/bin/env bash
# CI: the tests that depend on Triton's version (marked triton_version in tests/conftest.py: the
# kernels under the interpreter, AOT cubins and tuning, the interpreter target) again on the oldest
# Triton netc supports (pyproject: triton>=3.6), the one the lent GPU machines have, in a fresh
# virtual environment beside the newest NumPy. Triton 3.6's interpreter and code generator differ
# from the newest (netc.kernels.common works around one such difference); this keeps `triton>=3.6`
# true. Any exit other than 0 fails the run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
TRITON_FLOOR=${TRITON_FLOOR:-3.6.0}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
# NETC_CI_VENV: an isolated venv with torch already in it (.ci/run passes isolated_install.sh's)
VENV=${NETC_CI_VENV:-$D/venv}
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"                        # isolated: no --system-site-packages
    "$VENV/bin/python" -m pip install -q "torch==2.13.0"
fi
PIP="$VENV/bin/python -m pip"
echo "triton==$TRITON_FLOOR" >"$D/constraints.txt"
$PIP install -q -c "$D/constraints.txt" -e "$ROOT[test,plot,data]"
"$VENV/bin/python" -c "import triton, torch, numpy; print('triton', triton.__version__, 'torch', torch.__version__, 'numpy', numpy.__version__)"
export NETC_CACHE_DIR="$D/cache"
cd "$ROOT"
"$VENV/bin/python" -m pytest -q -n auto -p no:cacheprovider -m triton_version
echo "triton $TRITON_FLOOR: ok"
