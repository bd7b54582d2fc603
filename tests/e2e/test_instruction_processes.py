"""``--torchperf-instructions``' counting processes: the combinations that cannot work, a child
that dies under Valgrind, and processes side by side (one real Valgrind child, on its own
xdist worker: apart from test_instructions.py's, so the two modules' Valgrind runs can share
the machine's cores). The error paths start no Valgrind child (a fake ``valgrind`` stands in
where one is needed), so they run where Valgrind is not installed too."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.e2e.test_instructions import MODELS, _sessions

# -- bad environments: no Valgrind child is started ------------------------------------------


def test_without_valgrind_it_is_a_usage_error_naming_the_install(
    perf: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    perf.makepyfile(MODELS)
    monkeypatch.setenv("PATH", str(perf.path / "empty-bin"))
    result = perf.runpytest("--torchperf-instructions", "--torchperf-compare")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--torchperf-instructions counts instructions under Valgrind, and valgrind is not on "
            "PATH. Install it (Debian/Ubuntu: sudo apt-get install valgrind*"
        ]
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("--torchperf-processes", "3"),
            "*--torchperf-processes measures time in several processes*",
        ),
        (("--torchperf-disable",), "*cannot be combined with --torchperf-disable*"),
        (("-n", "2"), "*pytest-xdist (-n) would start them again in every worker. Drop -n*"),
        (
            ("--torchperf-instruction-jobs=0",),
            "*--torchperf-instruction-jobs must be auto or a whole number from 1 to 64, got '0'*",
        ),
    ],
)
def test_combinations_that_cannot_work_are_usage_errors(
    perf: pytest.Pytester, args: tuple[str, ...], expected: str
) -> None:
    if "-n" in args:
        pytest.importorskip("xdist")
    perf.makepyfile(MODELS)
    result = perf.runpytest("--torchperf-instructions", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])


def test_a_child_that_dies_under_valgrind_fails_the_tests_with_its_log_and_command(
    perf: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = perf.path / "bin" / "valgrind"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo valgrind-9.9.9; exit 0; fi\n'
        'echo "valgrind: the impossible happened: simulated crash" >&2\n'
        "exit 7\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    perf.makepyfile(
        """
        import torch
        def test_a(torchperf):
            torchperf(torch.nn.Linear(8, 8), torch.randn(2, 8), name="a")
        """
    )
    result = perf.runpytest("--torchperf-instructions", "--torchperf-compare")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "torchperf: the pytest process under Valgrind exited with code 7 after * s and "
            "counted 0 measurements. Command: valgrind --tool=callgrind *",
            "*valgrind: the impossible happened: simulated crash",
            "*a: no instruction count: the pytest process under Valgrind exited with code 7*",
        ]
    )


@pytest.mark.slow  # a Valgrind child: 50-80 s
@pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="needs valgrind (apt-get install valgrind)"
)
def test_processes_side_by_side_each_count_their_share_and_a_dead_one_fails_only_its_tests(
    perf: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two counting processes (--torchperf-instruction-jobs=2), one real: a wrapper runs the
    first job under the real valgrind and makes the second die, so one Valgrind child runs."""
    real = shutil.which("valgrind")
    assert real is not None
    fake = perf.path / "bin" / "valgrind"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in *job-2/items.json*)\n'
        '  echo "valgrind: the impossible happened: simulated crash of job 2" >&2; exit 7;;\n'
        "esac\n"
        f'exec {real} "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    perf.makepyfile(
        """
        import torch
        def test_a(torchperf):
            torchperf(torch.nn.Linear(8, 8), torch.randn(2, 8), name="a")
        def test_b(torchperf):
            torchperf(torch.nn.Linear(8, 8), torch.randn(2, 8), name="b")
        """
    )
    result = perf.runpytest(
        "--torchperf-instructions", "--torchperf-save", "--torchperf-instruction-jobs=2", "-rf"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "torchperf: counting instructions of 2 perf tests in 2 pytest processes side by "
            "side under valgrind-* (the start-up alone takes minutes on a small machine; timed "
            "below) ...",
            "torchperf: 1 instruction count in * s under Valgrind",
            "  process 1 (1 test, 1 count) in * s: * s to the first count *",
            "  process 2 (1 test, 0 counts) in * s",
            "torchperf: the pytest process under Valgrind exited with code 7 after * s and "
            "counted 0 measurements. Command: valgrind --tool=callgrind *"
            "--torchperf-child-items=*job-2/items.json*",
            "*simulated crash of job 2",
            "*b: no instruction count: the pytest process under Valgrind exited with code 7*",
        ]
    )
    result.stdout.fnmatch_lines(["FAILED *::test_b - *"])
    saved = _sessions(perf.path / ".torchperf", "instructions-")
    assert sorted(saved) == ["a"] and saved["a"][0]["instructions"]["per_call"] > 1e4
