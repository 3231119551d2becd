# netc — `make demo` runs the main job on an example, `make test` runs the tests.
# Both set up a virtual environment first (.venv), pinning torch 2.13.0's CPU build where no
# torch is importable (a bare `torch` requirement would pull several GB of CUDA packages).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
NETC   := $(VENV)/bin/netc
STAMP  := $(VENV)/.netc-installed

.PHONY: install demo test golden bench gpu-wheels gpu-prebuild clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e .
	$(PY) -m pip install -q --no-compile -e ".[test,plot,data]"
	@pin=$$($(PY) -c "$(TORCHVISION_PIN)"); test -z "$$pin" || $(PY) -m pip install -q --no-deps "$$pin" || \
	    echo "netc: could not install $$pin (tests/test_onnx_torchvision.py will skip): $(TORCHVISION_HOW)"
	@touch $(STAMP)

# netc and what every netc process imports (lark, networkx, numpy, triton) are installed with their bytecode compiled;
# the extras (onnx, onnxruntime, scikit-learn, matplotlib, the test runners) without it (--no-compile: 4 s less on
# 2 cores; Python compiles a module when it is first imported).

# torchvision for tests/test_onnx_torchvision.py (torchvision's CNNs through torch.onnx): the release made for the
# installed torch (2.N -> 0.(N+15): 2.13 -> 0.28), with --no-deps. Not a pyproject extra: pip would resolve the
# newest torchvision and upgrade torch to its (with GBs of CUDA packages). Prints the pin, or nothing where the
# matching release is installed already.
TORCHVISION_PIN = import importlib.metadata as m, torch; v = torch.__version__.split('+')[0].split('.'); \
    want = f'0.{int(v[1]) + 15}.'; have = [d.version for d in m.distributions() if d.metadata['Name'] == 'torchvision']; \
    print('' if have and have[0].startswith(want) else f'torchvision=={want}*')
TORCHVISION_HOW = pip install --no-deps torchvision==0.(N+15).* for torch 2.N

demo: install
	$(NETC) check examples/alexnet.nd
	$(NETC) explain examples/alexnet.nd --brief
	$(NETC) explain examples/inception_v3.nd --brief | tail -n 4
	$(NETC) compile examples/alexnet.nd -o build/alexnet.so --target cuda
	$(NETC) run examples/lenet.nd --phase test --target interp --compare --batch 2 --spatial 20 --interp-blocks large
	$(NETC) explain examples/inception_v3.nd --memory --brief --plot build/inception_v3_plan.png | tail -n 3
	$(PY) examples/digits_data.py -o build/digits
	$(NETC) run examples/digits.nd --train --data build/digits_train.npz --eval build/digits_test.npz \
	    --optimizer adam --lr 0.003 --epochs 10 --plot build/digits_loss.png | tail -n 2
	@echo "pictures: build/inception_v3_plan.png (Inception v3's memory plan), build/digits_loss.png (the digits network's training loss)"

# every core (pytest-xdist): tests write only under their own tmp_path; kernel caches are atomic. worksteal:
# an idle worker takes queued tests from a busy one (the suite's 2-25 s tests left one core idle at the end)
# compileall first: where PYTHONDONTWRITEBYTECODE is set (as on the CI machines) every process the suite
# starts (xdist workers, `netc` subprocesses, ranks) would compile netc's sources again; up-to-date files
# are skipped, and a stale .pyc is never used (Python checks the source's mtime); --durations: the slowest
# tests in every log (issue 22: the suite keeps within 6 minutes on 2 cores)
test: install
	@$(PY) -m compileall -q netc >/dev/null
	$(PY) -m pytest -q -n auto --dist worksteal --durations=15

# Regenerate golden expectations after a deliberate change (review the diff before committing).
golden: install
	$(PY) -m pytest -q tests/test_golden.py tests/test_corpus_goldens.py tests/test_training.py tests/test_onnx_backend.py -k "golden or docs or node_cases" --update-goldens

bench: install
	$(PY) bench/frontend.py

# The wheels a GPU machine without network access lacks, for CPython 3.12, into .whl/ (git-ignored);
# README.md, "On the GPU machine", says how to use them there. Its image (the device tool's KINDS.md,
# read 2026-11-17) has torch, triton, numpy, networkx, safetensors, matplotlib, scikit-learn, pytest,
# hypothesis and pytest-xdist (with execnet): of netc's dependencies and the tests' only lark is
# missing. Add here any new dependency the image lacks (a carried copy of one it has would shadow it).
GPU_WHEELS = "lark>=1.1.9"

gpu-wheels: install
	$(PY) -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	    --platform manylinux2014_x86_64 --platform any -d .whl $(GPU_WHEELS)

# the libraries a GPU lease benchmarks (bench/gpu_session.sh lease), compiled here ahead of it (Triton compiles
# cubins without a GPU) into prebuilt/: carry it with .whl, and the lease measures instead of compiling. What a
# lease carries is at most 64 MiB: a training library is 5-14 MB, so the training ones are the lease's own
# (bench/gpu_session.sh: TRAIN_NETS, TRAIN_PRECISION), about 35 MB in all with the inference ones
GPU_BENCH_NETS ?= alex_v2 vgg16 resnet50 inception_v3 densenet
GPU_TRAIN_NETS ?= alex_v2 resnet50
GPU_TRAIN_PRECISIONS ?= tf32x3,f32
gpu-prebuild: install
	rm -rf prebuilt
	$(PY) bench/gpu.py $(GPU_BENCH_NETS) --precision bf16,tf32 --prebuild prebuilt
	$(PY) bench/gpu.py --train $(GPU_TRAIN_NETS) --precision $(GPU_TRAIN_PRECISIONS) --prebuild prebuilt

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
