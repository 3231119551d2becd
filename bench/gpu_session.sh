#!/usr/bin/env bash
# Everything a lent GPU machine is for, in one command (device time is scarce: one call, many checks).
#
#   bash bench/gpu_session.sh STAGE [STAGE ...]      # from the repository root, on the GPU machine
#
# Stages (each logs to $OUT/<stage>.log, or ./gpu-logs/ when OUT is unset, and goes on if it fails):
#   setup      install the carried wheels (.whl/, `make gpu-wheels`), print the machine and versions
#   tests      pytest -m gpu tests/gpu (every example and Paleo net in f32, TF32, bf16, fp16), 16 workers
#   tests-train pytest -m gpu tests/gpu/test_gpu_train.py test_gpu_sequences_optimizers.py: every training
#              library against the reference; the recurrent, embedding and sequence kernels; every optimizer
#   tests-all  both, in one pytest run
#   sanitize   compute-sanitizer memcheck over one inference of AlexNet (f32 and bf16) and two training steps
#   ncu        Nsight Compute on VGG-16's convolutions, bf16 and TF32 (one log)
#   lease      what a 15-minute lease holds (~9.5 min): tests-all with sanitize beside it, then bench and
#              bench-train on three and two networks (torch.compile in its default mode; LEASE_AFTER names others)
#   carried    run .so files built on a CPU-only machine (carried/*.so) with --compare
#   tune       netc compile --autotune for the benchmark nets (bf16 and TF32): the tuning file
#   bench      bench/gpu.py: .so vs eager vs torch.compile (max-autotune), bf16 and TF32
#   bench-quick bench/gpu.py without torch.compile
#   bench-train bench/gpu.py --train: a training step of the .so vs eager vs torch.compile, its products in 3xTF32
#              and IEEE f32 (TRAIN_PRECISION, default tf32x3,f32; tf32 too: eager with TF32 on)
# Environment: NETC_CORPUS (default ./shared/corpus, else ../shared/corpus), TUNING (a tuning file
# for the bench stage), BENCH_NETS (default: the five), BENCH_ARGS (more bench/gpu.py flags),
# TESTS_TIMEOUT, BENCH_TIMEOUT, SANITIZE_TIMEOUT (seconds for the tests, bench and each memcheck run: 480,
# 580, 240/300; a short lease sets them lower, and a stage cut off still leaves its log), TESTS_WORKERS.
set -u
cd "$(dirname "$0")/.."
LOG=${OUT:-gpu-logs}
mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 NETC_CACHE_DIR=${NETC_CACHE_DIR:-/tmp/netc-cache}
if [ -z "${NETC_CORPUS:-}" ]; then
  for d in shared/corpus ../shared/corpus; do [ -d "$d/paleo" ] && export NETC_CORPUS=$PWD/$d && break; done
fi
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1 && [ -z "${NETC_WHEELS_IN:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >/dev/null 2>&1 || echo "gpu_session: installing .whl failed"
  export PYTHONPATH=/tmp/site:$PWD NETC_WHEELS_IN=1     # (a stage that runs this script again skips this)
elif [ -z "${NETC_WHEELS_IN:-}" ]; then
  export PYTHONPATH=$PWD
fi
NETS=${BENCH_NETS:-alex_v2 vgg16 inception_v3 resnet50 densenet}
# libraries compiled ahead on a CPU machine (`make gpu-prebuild`, carried as prebuilt/): bench/gpu.py takes them
# instead of compiling on the lease
PREBUILT_ARGS=$([ -d prebuilt ] && echo "--prebuilt $PWD/prebuilt")
stamp() { echo "== $1 $(date +%T)"; }

for stage in "$@"; do
  stamp "$stage"
  case $stage in
    setup)
      { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
        python3 -c "import torch, triton, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, triton.__version__, torch.cuda.get_device_name())"
        which cc gcc compute-sanitizer nvcc; nproc; } 2>&1 | tee "$LOG/setup.log" ;;
    tests|tests-train|tests-all)
      case $stage in
        tests) files="tests/gpu/test_gpu.py tests/gpu/test_profile_gpu.py" ;;
        tests-train) files="tests/gpu/test_gpu_train.py tests/gpu/test_gpu_sequences_optimizers.py" ;;
        *) files="tests/gpu" ;;
      esac
      # -v: each outcome as it comes (a run cut off by its time limit still says what passed); a hung test
      # is stopped after 200 s where pytest-timeout is installed (the GPU image has it)
      per_test=$(python3 -c "import pytest_timeout" 2>/dev/null && echo "--timeout 200")
      timeout ${TESTS_TIMEOUT:-480} python3 -m pytest -v -m gpu $files -n ${TESTS_WORKERS:-16} $per_test -rfEs --durations=15 \
        >"$LOG/$stage.log" 2>&1; echo "pytest exit $?"
      grep -E "passed|failed|error" "$LOG/$stage.log" | tail -3
      grep -E "^(FAILED|ERROR)" "$LOG/$stage.log" | head -40 ;;
    sanitize)
      # one log for the three runs (a call returns at most 8 files from $OUT). PyTorch's caching allocator
      # keeps its blocks to the end (memcheck's leak check reported the random inputs' 22 MB so): it is
      # off here, so a leak reported is one of netc's (its arena, its library)
      export PYTORCH_NO_CUDA_MEMORY_CACHING=1
      : >"$LOG/sanitize.log"
      for dt in f32 bf16; do
        python3 -m netc compile examples/alexnet.nd -o /tmp/san_$dt.so --dtype $dt 2>&1 | tail -1
        echo "== memcheck alexnet $dt" >>"$LOG/sanitize.log"
        timeout ${SANITIZE_TIMEOUT:-240} compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
          python3 bench/memcheck_run.py run /tmp/san_$dt.so --batch 16 >>"$LOG/sanitize.log" 2>&1
        echo "memcheck alexnet $dt: exit $?"
      done
      python3 -m netc compile examples/alexnet.nd --train --loss softmax --batch 16 -o /tmp/san_train.so 2>&1 \
        | grep -E "^wrote|error" | tail -2     # (not --loss softmax's warning that the network had no loss)
      echo "== memcheck alexnet training" >>"$LOG/sanitize.log"
      timeout ${SANITIZE_TIMEOUT:-300} compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
        python3 bench/memcheck_run.py run /tmp/san_train.so --train --steps 2 >>"$LOG/sanitize.log" 2>&1
      echo "memcheck alexnet training step: exit $?"
      # the control: PyTorch alone, no netc, allocating and freeing what the CLI does (an input, an output).
      # The third session's leak reports named only such tensors, though torch held 0 bytes at exit
      echo "== memcheck control (torch alone)" >>"$LOG/sanitize.log"
      timeout 60 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 python3 -c \
        "import torch; x = torch.randn(16, 224, 224, 3, device='cuda'); y = (x * 2).sum(); print(float(y)); del x, y" \
        >>"$LOG/sanitize.log" 2>&1
      echo "memcheck control (torch alone): exit $?"; grep -E "^==|ERROR SUMMARY|LEAK SUMMARY" "$LOG/sanitize.log" ;;
    ncu)
      # Nsight Compute on VGG-16's convolutions in bf16 and TF32 (the TF32 lead of docs/performance.md:
      # B's transposed shared layout): speed of light, memory workload, the pipeline stalls; clocks as found
      : >"$LOG/ncu.log"
      for p in bf16 tf32; do
        flags=$([ $p = bf16 ] && echo "--dtype bf16" || echo "--tf32")
        src=$(python3 -c "import sys; sys.path.insert(0, 'bench'); import gpu; print(gpu.source_of('vgg16'))")
        python3 -m netc compile "$src" -o /tmp/ncu_$p.so $flags 2>&1 | tail -1
        echo "== ncu vgg16 $p" >>"$LOG/ncu.log"
        timeout ${NCU_TIMEOUT:-60} ncu --clock-control none --kernel-name regex:conv2d --launch-skip 2 --launch-count 2 \
          --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
          python3 -m netc run /tmp/ncu_$p.so >>"$LOG/ncu.log" 2>&1
        echo "ncu vgg16 $p: exit $?"
      done
      grep -E "^== |Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Shared Memory Config" "$LOG/ncu.log" | head -30 ;;
    lease)
      # A 15-minute lease in one call (about 9.5 minutes of commands): every GPU test with memcheck
      # beside it (2 of the 16 cores), then the inference benchmark and the training-step benchmark
      # (torch.compile in its default mode: max-autotune's compiles do not fit). Every stage has its
      # own time limit and keeps its log, so a cut-off run still returns what it found.
      SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-70} bash "$0" sanitize >"$LOG/sanitize_stage.txt" 2>&1 &
      TESTS_WORKERS=14 TESTS_TIMEOUT=${TESTS_TIMEOUT:-235} bash "$0" tests-all
      wait; cat "$LOG/sanitize_stage.txt"; rm -f "$LOG/sanitize_stage.txt"
      # LEASE_AFTER: the stages after the tests (default: bench bench-train; 235 + 170 + 170 s at most, under a
      # call's 600; ncu may be named where time is left)
      for after in ${LEASE_AFTER:-bench bench-train}; do
        case $after in
          bench) BENCH_NETS=${BENCH_NETS:-alex_v2 vgg16 resnet50} BENCH_TIMEOUT=${BENCH_TIMEOUT:-170} \
                   BENCH_ARGS="--compile-mode default ${BENCH_ARGS:-}" bash "$0" bench ;;
          bench-train) BENCH_NETS=${TRAIN_NETS:-alex_v2 resnet50} BENCH_TIMEOUT=${TRAIN_TIMEOUT:-170} \
                   BENCH_ARGS="--compile-mode default ${BENCH_ARGS:-}" bash "$0" bench-train ;;
          ncu) NCU_TIMEOUT=50 bash "$0" ncu ;;
          *) bash "$0" "$after" ;;
        esac
      done ;;
    carried)
      for so in carried/*.so; do
        [ -e "$so" ] || continue
        src=$(python3 -c "import json,sys; from netc.runtime.native import read_manifest; print(read_manifest(sys.argv[1])['source']['path'].split('/')[-1])" "$so")
        python3 -m netc run "$so" --compare --batch 4 --source "examples/$src" 2>&1 | tail -4
      done ;;
    tune)
      mkdir -p "$LOG/tune"
      for p in bf16 tf32; do
        flags=$([ $p = bf16 ] && echo "--dtype bf16" || echo "--tf32")
        for n in $NETS; do
          f=$(python3 -c "import sys; sys.path.insert(0, 'bench'); import gpu; print(gpu.source_of(sys.argv[1]))" "$n")
          extra=$([ "$n" = densenet ] && echo "--opaque-as-identity")
          timeout 300 python3 -m netc compile "$f" -o /tmp/tuned_${n}_$p.so $flags $extra --autotune \
            --tuning "$LOG/tuning-${TUNING_NAME:-h100}.json" 2>&1 | tail -2
        done
      done ;;
    bench)
      timeout ${BENCH_TIMEOUT:-580} python3 bench/gpu.py $NETS --precision ${BENCH_PRECISION:-bf16,tf32} ${TUNING:+--tuning $TUNING} \
        ${BENCH_ARGS:-} $PREBUILT_ARGS --out "$LOG/bench.json" >"$LOG/bench.log" 2>&1; echo "bench exit $?"
      grep -vE "^\s*$" "$LOG/bench.log" | tail -14 ;;
    bench-quick)
      timeout 400 python3 bench/gpu.py $NETS --precision ${BENCH_PRECISION:-bf16,tf32} --no-torch-compile \
        ${TUNING:+--tuning $TUNING} ${BENCH_ARGS:-} --out "$LOG/bench_quick.json" >"$LOG/bench_quick.log" 2>&1
      echo "bench exit $?"; grep -vE "^\s*$" "$LOG/bench_quick.log" | tail -14 ;;
    bench-train)
      timeout ${BENCH_TIMEOUT:-580} python3 bench/gpu.py --train $NETS --precision ${TRAIN_PRECISION:-tf32x3,f32} \
        ${BENCH_ARGS:-} $PREBUILT_ARGS --out "$LOG/bench_train.json" \
        >"$LOG/bench_train.log" 2>&1; echo "bench-train exit $?"
      grep -vE "^\s*$" "$LOG/bench_train.log" | tail -8 ;;
    *) echo "gpu_session: unknown stage '$stage'" ;;
  esac
done
stamp done
