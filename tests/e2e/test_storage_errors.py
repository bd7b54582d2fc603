"""Bad baseline storage: corrupt stored counters and unreadable environment files are named, a
storage path that is a file is a usage error, an unsaved baseline says how often it measured."""

from __future__ import annotations

import json

import pytest

from tests.e2e.helpers import baseline_files, edit_baselines


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
    result.stdout.fnmatch_lines(
        ["*sessions[[]0[]].counters.flops is 'many', expected a non-negative integer*"]
    )


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


def test_a_refused_save_says_how_often_it_measured(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import time
        import torch
        def test_sleepy(torchperf):
            x = torch.zeros(1)  # captured CPU tensor: a CPU measurement on a GPU machine too
            torchperf(lambda: (time.sleep(0.002), x), name="sleepy")
    """)
    result = perf.runpytest("--torchperf-save", "--torchperf-min-cpu-share=0.9")
    result.stdout.fnmatch_lines(
        [
            "torchperf:   sleepy: timing of 0 of 1 processes stored (not: this process (CPU share "
            "*; measured twice)): no timing stored"
        ]
    )
    (path,) = baseline_files(perf.path / ".torchperf")
    (measurements,) = json.loads(path.read_text())["tests"].values()
    assert [s["statistic"] for s in measurements["sleepy"]["sessions"]] == [None]
