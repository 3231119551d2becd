"""The GPU tests share one card between 14-16 pytest workers: each worker hands its cached GPU memory back
after every test. Without that, workers that had run the in-process references (test_gpu.py) held 4-17 GiB
each in PyTorch's caching allocator, and the training libraries' runs in other processes found the H200's
140 GiB taken (six 'CUDA out of memory' failures on 2026-11-27)."""
from __future__ import annotations

import gc

import pytest


@pytest.fixture(autouse=True)
def _return_cached_gpu_memory():
    yield
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        gc.collect()
        torch.cuda.empty_cache()
