"""The device a measurement computes on, as a test sees it, on any machine.

A target's device comes from what it computes with; only a target with none (a closure over
nothing, a whole test body) takes "auto", the accelerator if one is present. This suite's CPU
expectations must not rest on that fallback: tests/e2e/conftest.py fails a test whose in-process
measurements reach it unless the test is marked ``any_device``. The CUDA side of the same rules
runs where a GPU is: tests/e2e/test_cuda.py.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import FALLBACKS

TARGETS = """
import torch

x = torch.randn(8, 8)
model = torch.nn.Linear(8, 8)

def test_input(torchperf):
    assert torchperf(lambda a: a @ a, x, name="input").device == "cpu"

def test_captured(torchperf):
    y = torch.randn(8, 8)
    assert torchperf(lambda: y @ y, name="captured").device == "cpu"

def test_global(torchperf):
    assert torchperf(lambda: x @ x, name="global").device == "cpu"

def test_module(torchperf):
    assert torchperf(model, x, name="module").device == "cpu"

def test_over_nothing(torchperf):
    torchperf(lambda: torch.ones(4).sum(), name="nothing")
"""


def test_the_suite_sees_each_measurement_that_takes_the_accelerator_fallback(
    perf: pytest.Pytester, request: pytest.FixtureRequest
) -> None:
    """The check the conftest makes works: CPU inputs, a captured CPU tensor, a CPU tensor named
    as a global and a CPU module never reach the fallback (so they stay CPU measurements on a GPU machine); a closure over
    nothing does, and is named. Were ``devices.default_device`` renamed or bypassed, the check
    would see nothing and this test would fail."""
    perf.makepyfile(TARGETS)
    perf.runpytest().assert_outcomes(passed=5)
    used = request.node.stash[FALLBACKS]
    assert used == [
        "test_the_suite_sees_each_measurement_that_takes_the_accelerator_fallback.py"
        "::test_over_nothing"
    ], used
    used.clear()  # seen on purpose: the conftest's check is for tests that did not mean it
