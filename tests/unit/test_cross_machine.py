"""Unit tests of the cross-machine comparison (pure functions, synthetic sessions)."""

from __future__ import annotations

from pytest_torchperf.cross_machine import normalised_check, pick_environment, same_torch_build

HERE = {"device": "cpu", "torch": "2.14.1", "torch_git": "abc", "threads": 1, "cpu_model": "A"}


def test_pick_environment_prefers_same_device_then_same_torch() -> None:
    others = [("gpu", {"exact": {**HERE, "device": "cuda:0"}}),
              ("old-torch", {"exact": {**HERE, "torch": "2.13.0", "cpu_model": "B"}}),
              ("same-build", {"exact": {**HERE, "cpu_model": "B"}})]
    assert pick_environment(HERE, others)[0] == "same-build"
    assert pick_environment(HERE, []) is None
    assert same_torch_build(HERE, {**HERE, "cpu_model": "B"})
    assert not same_torch_build(HERE, {**HERE, "torch_git": "def"})


def test_normalised_check_factors_out_machine_speed() -> None:
    # The other machine: 1 ms per call with a 5 us kernel. Here the kernel takes 10 us (a machine
    # half as fast) and the call 2 ms: the same code, normalised -> +0 %, no warning.
    sessions = [{"statistic": 1e-3, "calibration": 5e-6}] * 3
    same = normalised_check("m", 2e-3, 10e-6, sessions, "other")
    assert "m: cross-machine: +0% vs the baseline of other" in same
    assert "x0.50 as fast as other" in same
    slow = normalised_check("m", 4e-3, 10e-6, sessions, "other")
    assert "m: cross-machine warning: 100% slower than the baseline of other" in slow
    none = normalised_check("m", 4e-3, None, sessions, "other")
    assert "cannot be normalised" in none
