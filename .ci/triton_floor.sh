#!/usr/bin/env bash
# CI: the tests that depend on Triton's version (marked triton_version in tests/conftest.py: the
# kernels under the interpreter, every kernel's cubins, 16-bit networks) again on the oldest
# Triton netc supports (pyproject: triton>=3.6), the one the lent GPU machines have. Triton 3.6's
# interpreter and code generator differ from the newest (netc.kernels.common works around one such
# difference); this keeps `triton>=3.6` true. The sm_80 compiles (marked sm80) stay with the newest
# Triton only: 3.6 is what the H100/H200 machines run, and CI's time is short. Any exit other than 0
# fails the run.
#
#   bash .ci/triton_floor.sh [prepare|run]     # both when not given
#
# prepare: a virtual environment without system site packages (NETC_FLOOR_VENV, else a temporary
# one) with torch's CPU wheel, Triton $TRITON_FLOOR, the newest NumPy, netc and the test runners. An
# existing one is reused: .ci/run hands over the one .ci/isolated_install.sh made (netc installed, Triton
# held at $TRITON_FLOOR), and this adds pytest and pytest-xdist. run: the tests.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
TRITON_FLOOR=${TRITON_FLOOR:-3.6.0}
STAGE=${1:-all}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
VENV=${NETC_FLOOR_VENV:-$D/venv}
if [ "$STAGE" != run ]; then
    if [ ! -x "$VENV/bin/python" ]; then
        "$PYTHON" -m venv "$VENV"                    # isolated: no --system-site-packages
        "$VENV/bin/python" -m pip install -q "torch==2.13.0"
    fi
    echo "triton==$TRITON_FLOOR" >"$D/constraints.txt"
    # the kernel tests need netc and its dependencies (installed already where .ci/isolated_install.sh made the
    # environment), pytest and pytest-xdist (their versions as the test extra declares them), nothing else
    RUNNERS=$("$PYTHON" -c "import tomllib; t = tomllib.load(open('$ROOT/pyproject.toml', 'rb'))
print(' '.join(r for r in t['project']['optional-dependencies']['test'] if r.startswith('pytest')))")
    # (from /: in the checkout, python's path would find its netc whether or not the environment has it)
    (cd / && "$VENV/bin/python" -c "import netc" 2>/dev/null) || "$VENV/bin/python" -m pip install -q -c "$D/constraints.txt" -e "$ROOT"
    "$VENV/bin/python" -m pip install -q -c "$D/constraints.txt" $RUNNERS
fi
[ "$STAGE" = prepare ] && exit 0
"$VENV/bin/python" -c "import triton, torch, numpy; print('triton', triton.__version__, 'torch', torch.__version__, 'numpy', numpy.__version__)"
"$VENV/bin/python" -c "import triton, sys; sys.exit(triton.__version__ != '$TRITON_FLOOR')" || {
    echo "triton_floor: the environment has triton $("$VENV/bin/python" -c 'import triton; print(triton.__version__)'), not $TRITON_FLOOR"; exit 1; }
export NETC_CACHE_DIR="$D/cache"
cd "$ROOT"
# only the files that hold such tests are collected (tests/conftest.py TRITON_VERSION_TESTS), not the whole suite
PATHS=$(cd tests && "$VENV/bin/python" -c "import conftest; print(' '.join('tests/' + p for p in conftest.TRITON_VERSION_TESTS))")
"$VENV/bin/python" -m pytest -q -n auto --dist worksteal -p no:cacheprovider --basetemp "$D/pytest" \
    -m "triton_version and not sm80" $PATHS
echo "triton $TRITON_FLOOR: ok"
