"""The CUDA paths, where a CUDA GPU is present (skipped elsewhere: this project's CI has none).

Each test takes a few seconds at most on one GPU. On a GPU machine:
``python -m pytest -n 0 -p no:cacheprovider tests/e2e/test_cuda.py tests/e2e/test_devices.py``.
"""

from __future__ import annotations

import gc
from types import SimpleNamespace

import pytest


def _cuda() -> bool:
    import torch  # already loaded by tests/e2e/conftest.py

    return bool(torch.cuda.is_available())


pytestmark = pytest.mark.skipif(
    not _cuda(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"
)


def test_peak_memory_is_not_lowered_by_garbage_freed_during_the_counted_call() -> None:
    """Garbage holding CUDA memory (an earlier test's tensors in a reference cycle) is collected
    before the counted call: a collection inside the call would free it there and take its size
    off the peak (a compare read +62.7 % of peak memory on unchanged code)."""
    import torch

    from pytest_torchperf.measure.counters import collect_counters

    junk = SimpleNamespace(tensor=torch.empty(3 << 20, dtype=torch.uint8, device="cuda"))
    junk.me = junk  # a reference cycle: freed only by the garbage collector
    del junk

    def call() -> torch.Tensor:
        gc.collect()  # as an automatic collection may, at any allocation
        return torch.empty(8 << 20, dtype=torch.uint8, device="cuda")

    counted = collect_counters(call, "cuda")
    assert counted["peak_memory"] >= 8 << 20, counted["peak_memory"]
