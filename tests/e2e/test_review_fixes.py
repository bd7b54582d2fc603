"""Regressions found in review: grad mode, inference tensors, device inference, fixture mixes,
unittest methods, bad fixture arguments, bad stored counters, storage paths that are files."""

from __future__ import annotations

import json

import pytest

from tests.conftest import baseline_files, edit_baselines


def test_training_steps_and_test_bodies_keep_autograd(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import pytest, torch

        @pytest.mark.torchperf
        def test_whole_body_backward():
            model = torch.nn.Linear(8, 8)
            model(torch.randn(4, 8)).sum().backward()
            assert model.weight.grad is not None

        def test_train_step(torchperf):
            model = torch.nn.Linear(8, 8)
            x = torch.randn(4, 8)
            def step():
                model.zero_grad()
                model(x).sum().backward()
            torchperf(step, name="step")
    """)
    perf.runpytest().assert_outcomes(passed=2)
    perf.runpytest("--torchperf-disable").assert_outcomes(passed=2)


def test_state_built_while_measuring_is_usable_for_training(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch

        class Lazy(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(8, 8)
                self.cache = None
            def forward(self, x):
                if self.cache is None:
                    self.cache = torch.arange(8.0)
                return self.fc(x) + self.cache

        def test_lazy(torchperf):
            model = Lazy()
            torchperf(model, torch.randn(2, 8))
            assert model.training  # restored
            model(torch.randn(2, 8)).sum().backward()
    """)
    perf.runpytest().assert_outcomes(passed=1)


def test_device_is_taken_from_parameters_before_inputs() -> None:
    import torch

    from pytest_torchperf.measure import infer_device

    model = torch.nn.Linear(2, 2)
    assert infer_device(model, (torch.empty(1, 2, device="meta"),)) == "cpu"
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert infer_device(lambda: None, ()).startswith(expected)  # closures: the real accelerator


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
    """)
    result = perf.runpytest("--torchperf-compare")
    result.assert_outcomes(failed=3, passed=1)
    result.stdout.fnmatch_lines([
        "*the target must be an nn.Module or a callable, got Tensor: pass the model or a function, "
        "not its output",
    ])
    result.stdout.fnmatch_lines(["*kwargs= must be a dict of keyword arguments for the target, got list"])
    result.stdout.fnmatch_lines(["*'maybe' is not a boolean (use true or false)"])
    assert "pytest_torchperf/" not in result.stdout.str()


def test_block_timer_parses_options_like_markers() -> None:
    from pytest_torchperf import BlockTimer, OptionError

    assert BlockTimer(min_time="0.5s").options.min_time == 0.5
    with pytest.raises(OptionError, match="unknown torchperf option 'min_tme'"):
        BlockTimer(min_tme=1)


def test_corrupt_stored_counters_name_the_key(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_m(torchperf):
            torchperf(torch.nn.Linear(2, 2), torch.randn(1, 2), name="lin")
    """)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)

    def corrupt(_n: str, _m: str, session: dict) -> None:
        session["counters"]["flops"] = "many"

    edit_baselines(perf.path / ".torchperf", corrupt)
    result = perf.runpytest("--torchperf-compare")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*sessions[[]0[]].counters.flops is 'many', expected a non-negative "
                                 "integer*"])


def test_unreadable_environment_file_is_named(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_m(torchperf):
            torchperf(torch.nn.Linear(2, 2), torch.randn(1, 2), name="lin")
    """)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    (path,) = baseline_files(perf.path / ".torchperf")
    (path.parent / "environment.json").write_text("[1, 2")
    result = perf.runpytest("--torchperf-compare", "--torchperf-threads=2")
    result.stdout.fnmatch_lines(["*its environment.json is unreadable or not a fingerprint*"])


def test_storage_path_that_is_a_file_is_a_usage_error(perf: pytest.Pytester) -> None:
    perf.makepyfile("def test_x(): pass")
    (perf.path / "store").write_text("not a folder")
    result = perf.runpytest("--torchperf-save", "--torchperf-storage", "store")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the storage path * is a file, not a folder*"])


def test_save_warning_says_how_often_it_measured(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import time
        def test_sleepy(torchperf):
            torchperf(lambda: time.sleep(0.002), name="sleepy")
    """)
    result = perf.runpytest("--torchperf-compare", "--torchperf-save", "--torchperf-min-cpu-share=0.9")
    result.stdout.fnmatch_lines(["*sleepy: baseline not saved: CPU share * (measured once)*"])
    assert json.loads(json.dumps(baseline_files(perf.path / ".torchperf"), default=str)) == []
