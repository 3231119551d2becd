#!/usr/bin/env python3
"""`netc ARGS` for compute-sanitizer's memcheck (bench/gpu_session.sh, stage sanitize): the CLI, then the
device memory PyTorch still caches handed back (gc, synchronize, empty_cache) before the process ends, so
that memcheck's leak check at exit reports what is really held: netc's own allocations, or tensors kept."""
import gc
import sys

import torch

from netc.cli import main

rc = main(sys.argv[1:])
gc.collect()
if torch.cuda.is_available() and torch.cuda.is_initialized():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
sys.exit(rc)
