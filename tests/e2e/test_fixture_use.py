"""How the fixtures and the marker combine: a marked test using only the timer or profiler is not
timed as a whole, unittest methods are refused, bad fixture arguments fail clearly."""

from __future__ import annotations

import pytest


# The timer's closure builds its tensors inside (no captured device): cuda on a GPU machine.
@pytest.mark.any_device
def test_marked_test_using_timer_or_profiler_is_not_timed_as_a_whole(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import pytest, torch

        @pytest.mark.torchperf
        def test_marked_timer(torchperf_timer):
            torchperf_timer(lambda: torch.randn(8, 8) @ torch.randn(8, 8), name="mm")

        @pytest.mark.torchperf
        def test_marked_profiler(torchperf_profiler):
            with torchperf_profiler():
                torch.randn(8, 8) @ torch.randn(8, 8)
    """)
    result = perf.runpytest()
    result.assert_outcomes(passed=2)
    traces = list((perf.path / ".torchperf-report" / "traces").glob("*.json"))
    assert len(traces) == 1


def test_marked_unittest_method_is_a_usage_error(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import unittest, pytest

        class TestLegacy(unittest.TestCase):
            @pytest.mark.torchperf
            def test_old(self):
                pass
    """)
    result = perf.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*cannot time a unittest.TestCase method as a whole*"])


# test_gate_words times lambda: None (no device of its own); its verdict is None anywhere.
@pytest.mark.any_device
def test_bad_fixture_arguments_fail_clearly(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch

        def test_not_callable(torchperf):
            torchperf(torch.ones(2))

        def test_bad_kwargs(torchperf):
            torchperf(torch.nn.Linear(2, 2), kwargs=[1])

        def test_bad_gate(torchperf_timer):
            torchperf_timer(lambda: None, gate="maybe")

        def test_gate_words(torchperf_timer):
            r = torchperf_timer(lambda: None, gate="no", name="n")
            assert r.verdict is None

        def test_timer_twice(torchperf_timer):
            torchperf_timer(lambda: None, name="dup")
            torchperf_timer(lambda: None, name="dup")
    """)
    result = perf.runpytest("--torchperf-compare")
    result.assert_outcomes(failed=4, passed=1)
    # The timer's own call is named, not torchperf(...) (newcomer pass).
    result.stdout.fnmatch_lines(
        [
            "*measurement name 'dup' is used twice in this test; give each torchperf_timer(...) "
            "block its own name="
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*the target must be an nn.Module or a callable, got Tensor: pass the model or a function, "
            "not its output",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*kwargs= must be a mapping (a dict) of keyword arguments for the target, got list"]
    )
    result.stdout.fnmatch_lines(["*'maybe' is not a boolean (use true or false)"])
    assert "pytest_torchperf/" not in result.stdout.str()
