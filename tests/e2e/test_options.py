"""Options: marker validation, value parsing, precedence (call > marker > CLI > ini > default),
and the run modes --torchperf-disable / --torchperf-skip / --torchperf-only."""

from __future__ import annotations

import pytest

PRECEDENCE = """
import pytest, torch

@pytest.mark.torchperf({marker})
def test_options(torchperf):
    r = torchperf(torch.nn.Linear(4, 4), torch.randn(2, 4){call})
    with open("resolved.txt", "w") as fh:
        fh.write(f"{{r.options.max_slowdown}} {{r.options.min_time}} {{r.options.threads}}")
"""


def run_precedence(
    pytester: pytest.Pytester, ini: str, cli: list[str], marker: str, call: str
) -> tuple[float, float, int]:
    pytester.makefile(".ini", pytest=f"[pytest]\ntorchperf_warmup = 0.005s\n{ini}")
    pytester.makepyfile(PRECEDENCE.format(marker=marker, call=call))
    result = pytester.runpytest(*cli)
    result.assert_outcomes(passed=1)
    slowdown, min_time, threads = (pytester.path / "resolved.txt").read_text().split()
    return float(slowdown), float(min_time), int(threads)


@pytest.mark.parametrize(
    ("ini", "cli", "marker", "call", "expected"),
    [
        ("", [], "", "", (0.10, 1.0, 1)),  # defaults
        (
            "torchperf_max_slowdown = 40%\ntorchperf_min_time = 0.03s\ntorchperf_threads = 2",
            [],
            "",
            "",
            (0.40, 0.03, 2),
        ),  # ini over default
        (
            "torchperf_max_slowdown = 40%\ntorchperf_min_time = 0.03s",
            ["--torchperf-max-slowdown=30%", "--torchperf-min-time=20ms"],
            "",
            "",
            (0.30, 0.02, 1),
        ),  # CLI over ini
        (
            "torchperf_max_slowdown = 40%\ntorchperf_min_time = 0.03s",
            ["--torchperf-max-slowdown=30%", "--torchperf-min-time=20ms"],
            "max_slowdown='20%', min_time=0.025",
            "",
            (0.20, 0.025, 1),
        ),  # marker over CLI
        (
            "torchperf_max_slowdown = 40%",
            ["--torchperf-max-slowdown=30%"],
            "max_slowdown='20%', min_time=0.025",
            ", max_slowdown=0.05, min_time='15ms'",
            (0.05, 0.015, 1),
        ),  # call over marker
    ],
    ids=["default", "ini", "cli-over-ini", "marker-over-cli", "call-over-marker"],
)
def test_precedence(
    pytester: pytest.Pytester,
    ini: str,
    cli: list[str],
    marker: str,
    call: str,
    expected: tuple[float, float, int],
) -> None:
    assert run_precedence(pytester, ini, cli, marker, call) == pytest.approx(expected)


SHORT_TIMING = """
import pytest, torch

def test_a(torchperf):
    torchperf(torch.nn.Linear(4, 4), torch.randn(2, 4), name="a")

@pytest.mark.torchperf({marker})
def test_b(torchperf):
    torchperf(torch.nn.Linear(4, 4), torch.randn(2, 4), name="b"{call_b})
"""


@pytest.mark.parametrize(
    ("ini", "cli", "marker", "call_b", "source"),
    [
        ("torchperf_min_time = 0.02s", [], "", "", "20 ms (ini torchperf_min_time)"),
        ("", ["--torchperf-min-time=5ms"], "", "", "5 ms (--torchperf-min-time)"),
        (
            "",
            [],
            "min_time='10ms'",
            "",
            "10 ms (@pytest.mark.torchperf(min_time=...) of test_*.py::test_b)",
        ),
        (
            "",
            [],
            "",
            ", min_time=0.25",
            "250 ms (min_time= of the torchperf(...) call in test_*.py::test_b)",
        ),
    ],
    ids=["ini", "cli", "marker", "call"],
)
def test_a_min_time_shorter_than_the_docs_advise_warns_once(
    pytester: pytest.Pytester, ini: str, cli: list[str], marker: str, call_b: str, source: str
) -> None:
    """``--torchperf-min-time=5ms`` was accepted silently. A min_time under the 0.5 s docs/faq.md
    advises on a noisy runner is still accepted, with one warning per run that names the value,
    where it was set, the figure and its doc, and what to do."""
    pytester.makefile(".ini", pytest=f"[pytest]\ntorchperf_warmup = 0.005s\n{ini}")
    # Both tests run at the short min_time in the ini and command-line cases: still one warning.
    pytester.makepyfile(SHORT_TIMING.format(marker=marker, call_b=call_b))
    result = pytester.runpytest(*cli)
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(
        [
            f"*TorchperfWarning: min_time {source} is below the 0.5 s docs/faq.md advises: "
            f"fewer ~10 ms blocks, noisier verdicts. Set 0.5 s or more, or filterwarnings = "
            f"ignore:min_time where short timings are meant"
        ]
    )


def test_unknown_marker_keyword_names_test_and_valid_options(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import pytest
        @pytest.mark.torchperf(max_slowdwon="5%")
        def test_typo():
            pass
    """)
    result = perf.runpytest("--strict-markers")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: test_unknown_marker_keyword_names_test_and_valid_options.py::test_typo: "
            "@pytest.mark.torchperf: unknown torchperf option 'max_slowdwon'. Did you mean "
            "'max_slowdown'? Valid options: accuracy, check_finite, counters, data, group, "
            "ignore_counters, inference, instructions, max_compile_time, max_instruction_increase, "
            "max_kernel_slowdown, max_machine_slowdown, max_neighbour_load, max_slowdown, "
            "max_spread, max_widening, metric, min_cpu_share, min_gpu_clock, min_speedup, "
            "min_time, name, seed, strict, threads, variants, warmup.",
        ]
    )


# A whole test body: cuda on a GPU machine; only the outcome and --markers are checked.
@pytest.mark.any_device
def test_marker_is_registered_for_strict_markers(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import pytest
        @pytest.mark.torchperf(max_slowdown="20%")
        def test_body():
            sum(range(100))
    """)
    perf.runpytest("--strict-markers").assert_outcomes(passed=1)
    perf.runpytest("--markers").stdout.fnmatch_lines(["@pytest.mark.torchperf(**options): *"])


def test_invalid_marker_value_quotes_it(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import pytest
        @pytest.mark.torchperf(min_time="fast")
        def test_bad():
            pass
    """)
    result = perf.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*test_bad: @pytest.mark.torchperf: invalid value for min_time: 'fast' is not a duration "
            "(examples: '1s', '500ms', 0.5)"
        ]
    )


def test_a_min_speedup_for_a_variant_the_measurement_does_not_run_is_warned(
    perf: pytest.Pytester,
) -> None:
    """min_speedup={"compiled": 1.2} on a test without that variant gated nothing, silently. A
    warning, not an error: variants may come from the call, and a module-wide marker's
    min_speedup may be meant only for the tests that run that variant."""
    perf.makepyfile("""
        import pytest, torch
        @pytest.mark.torchperf(min_speedup={"compiled": 1.2})
        def test_none(torchperf):
            torchperf(torch.nn.Linear(4, 4), torch.randn(2, 4), name="lin")

        @pytest.mark.torchperf(min_speedup={"amp": 0.01})
        def test_call(torchperf):
            torchperf(torch.nn.Linear(4, 4), torch.randn(2, 4), name="mlp", variants=["eager", "amp"])
    """)
    result = perf.runpytest("-W", "default::UserWarning")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*TorchperfWarning: lin: min_speedup names 'compiled', which this measurement does not "
            "run (it runs eager): that limit gates nothing here; add 'compiled' to variants=, or "
            "drop it from min_speedup"
        ]
    )
    assert "mlp: min_speedup" not in result.stdout.str()


def test_every_bad_marker_is_named_in_one_run_each_test_once(perf: pytest.Pytester) -> None:
    """A newcomer fixed one marker per run: the second error showed only after the first was
    fixed. A parametrized test's items share its marker: named once."""
    perf.makepyfile("""
        import pytest
        @pytest.mark.torchperf(variants=["eager", "compield"])
        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_variants(n):
            pass

        @pytest.mark.torchperf(max_slowdown="ten")
        def test_limit():
            pass
    """)
    result = perf.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    # Named by the test the marker is on, not by one of its items.
    assert "::test_variants: @pytest.mark.torchperf: " in err and "compield" in err, err
    assert "test_variants[" not in err, err
    assert "test_limit: @pytest.mark.torchperf: invalid value for max_slowdown: 'ten'" in err, err
    assert "test_variants[2]" not in err and "test_variants[3]" not in err, err


def test_invalid_call_keyword_is_a_usage_error(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_bad(torchperf):
            torchperf(torch.nn.Linear(2, 2), torch.randn(1, 2), max_slowdown=12)
    """)
    result = perf.runpytest()
    result.stdout.fnmatch_lines(
        [
            "*torchperf(...) call: invalid value for max_slowdown: 12 is ambiguous as a relative "
            "threshold: write a percentage such as '12%' or a fraction below 1 such as 0.1*"
        ]
    )
    assert result.ret != 0


def test_call_keyword_error_lists_only_what_a_call_may_set(perf: pytest.Pytester) -> None:
    """seed= is refused on a call (torchperf seeds before the test's fixtures run), so the
    options a call's unknown keyword lists leave it out; torchperf_timer's leave out variants."""
    perf.makepyfile("""
        def test_fixture(torchperf):
            torchperf(lambda: None, threadz=2)

        def test_timer(torchperf_timer):
            torchperf_timer(lambda: None, threadz=2)
    """)
    result = perf.runpytest()
    out = result.stdout.str()
    lines = [line for line in out.splitlines() if "unknown torchperf option 'threadz'" in line]
    fixture = [line for line in lines if "test_fixture" in line]
    timer = [line for line in lines if "test_timer" in line]
    assert fixture and timer, out
    assert "Did you mean 'threads'?" in fixture[0] and ", variants, " in fixture[0], fixture
    assert not any("seed" in line for line in lines), lines
    assert "variants" not in timer[0], timer
    assert result.ret != 0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--torchperf-max-slowdown=ten"],
            "*argument --torchperf-max-slowdown: 'ten' is not a percentage or fraction (examples: "
            "'10%', 0.1)",
        ),
        (["--torchperf-min-time=-1s"], "*argument --torchperf-min-time: '-1s' is not a duration*"),
        (
            ["--torchperf-threads=0"],
            "*argument --torchperf-threads: '0' is not a positive integer*",
        ),
        (
            ["--torchperf-skip", "--torchperf-only"],
            "*--torchperf-skip and --torchperf-only exclude each other; pick one",
        ),
        (
            ["--torchperf-disable", "--torchperf-compare"],
            "*--torchperf-disable runs perf tests without timing, so it cannot be combined with*",
        ),
        (["--torchperf-reset"], "*--torchperf-reset only makes sense with --torchperf-save"),
        (
            ["--torchperf-compare", "--torchperf-device=cdua"],
            "*argument --torchperf-device: 'cdua' is not a device (did you mean 'cuda'?): use "
            "auto (an accelerator if present, else cpu), cpu, cuda, cuda:N (GPU number N), mps, "
            "xpu, mtia, or the type a backend's package registers when imported (hpu, npu, ...)",
        ),
        (
            ["--torchperf-device=tpu"],
            "*argument --torchperf-device: 'tpu' is not a torch device type: torch calls a TPU "
            "'xla' (torch_xla), and pytest-torchperf cannot time an XLA device: * Use auto (*",
        ),
    ],
)
def test_invalid_command_line_is_a_usage_error(
    perf: pytest.Pytester, args: list[str], expected: str
) -> None:
    perf.makepyfile("def test_x(): pass")
    result = perf.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])


def test_invalid_ini_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".ini", pytest="[pytest]\ntorchperf_max_slowdown = lots\n")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*torchperf: ini file: invalid value for max_slowdown: 'lots' is not a percentage or "
            "fraction*(ini key torchperf_max_slowdown)"
        ]
    )


# pyproject.toml declares pytest>=8, and this project's CI runs pytest 9 only: on pytest 8 the
# [tool.pytest.ini_options] case runs (pytest 8 reads only that table, and hands its numbers and
# flags over as strings, its lists as lists), and [tool.pytest] is skipped (pytest 8 does not
# read it at all: the keys have no effect there, so there is nothing of ours to test).
@pytest.mark.parametrize(
    "table",
    [
        "tool.pytest.ini_options",
        pytest.param(
            "tool.pytest",
            marks=pytest.mark.skipif(
                pytest.version_tuple < (9,), reason="[tool.pytest] is pytest 9's table"
            ),
        ),
    ],
)
def test_toml_numbers_flags_and_lists_in_pyproject_are_read_as_their_text(
    pytester: pytest.Pytester, table: str
) -> None:
    """pytest 9's native ``[tool.pytest]`` table keeps TOML's types, and pytest's getini refused
    ``torchperf_threads = 2`` (an int for a string key) with a TypeError: an internal error with
    our traceback in every run. A number or a flag is read as its string form, a list of names as
    the names; what cannot be a key's value is a usage error naming the key and what it takes,
    in either table (the ini-mode table hands a list over as it is: a folder given as one was a
    TypeError)."""
    pytester.makepyprojecttoml(
        f"[{table}]\ntorchperf_warmup = 0.005\ntorchperf_min_time = 0.02\n"
        "torchperf_threads = 2\ntorchperf_max_slowdown = 0.25\ntorchperf_instructions = false\n"
        'torchperf_ignore_counters = ["memory"]\n'
    )
    pytester.makepyfile(PRECEDENCE.format(marker="", call=""))
    pytester.runpytest().assert_outcomes(passed=1)
    assert (pytester.path / "resolved.txt").read_text().split() == ["0.25", "0.02", "2"]

    def refused(line: str) -> str:
        pytester.makepyprojecttoml(f"[{table}]\n{line}\n")
        result = pytester.runpytest()
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert "Traceback" not in result.stdout.str() + result.stderr.str()
        return result.stderr.str()

    # A bare 20 is as ambiguous as the string "20" (20 % or 2000 %?).
    assert (
        "torchperf: ini file: invalid value for max_slowdown: '20' is ambiguous as a relative "
        "threshold: write a percentage such as '20%' or a fraction below 1 such as 0.1 (ini key "
        "torchperf_max_slowdown)" in refused("torchperf_max_slowdown = 20")
    )
    for line, value in (("torchperf_threads = [1]", "[1]"), ('torchperf_storage = ["p"]', "['p']")):
        out = refused(line)
        key = line.split()[0]
        assert f"torchperf: ini key {key} in " in out
        assert (
            f"pyproject.toml is {value} (list); it takes one value (a string, a number or "
            f"true/false), not a list. pytest --help says what {key} takes" in out
        )


def test_an_ini_files_list_of_names_may_take_one_line_each(pytester: pytest.Pytester) -> None:
    """An ini file's usual list form, one name per line, read as one name 'eager\\nfused'
    (unknown variant) before: it is read as the comma-separated names a command line takes."""
    pytester.makeini("[pytest]\ntorchperf_variants =\n    eager\n    fused\n")
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.torchperf(variants=["eager", "fused", "compiled"])
        def test_m(torchperf):
            pass
        """
    )
    result = pytester.runpytest("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    result.stdout.fnmatch_lines(["*test_m?eager?", "*test_m?fused?"])
    assert "test_m[compiled]" not in result.stdout.str()
    # The line saying what it deselected names the ini key too, not a flag nobody passed.
    result.stdout.fnmatch_lines(
        [
            "torchperf: ini key torchperf_variants eager,fused: 1 variant item deselected (compiled 1)"
        ]
    )
    # A wrong name there is said to come from the ini key, not from a flag nobody passed.
    pytester.makeini("[pytest]\ntorchperf_variants =\n    eager\n    fussed\n")
    result = pytester.runpytest("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*torchperf: ini key torchperf_variants: unknown variant 'fussed'*"]
    )


def test_unknown_ini_key_is_a_usage_error_with_the_closest_key(pytester: pytest.Pytester) -> None:
    """Like an unknown marker keyword: pytest itself only warned "Unknown config option", and
    the limit meant kept its default."""
    pytester.makefile(".ini", pytest="[pytest]\ntorchperf_max_slowdwn = 20%\n")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*torchperf: unknown ini key 'torchperf_max_slowdwn' in *pytest.ini. Did you mean "
            "'torchperf_max_slowdown'? Known torchperf keys: torchperf_confirm, *torchperf_device,"
            "*torchperf_processes, *(pytest --help lists them with their meaning)."
        ]
    )
    # The keys of the plugin and its kinds are known.
    pytester.makefile(
        ".ini",
        pytest="[pytest]\ntorchperf_max_slowdown = 20%\ntorchperf_processes = 1\n"
        "torchperf_instructions = false\n",
    )
    pytester.runpytest().assert_outcomes(passed=1)
    # Reading the ini file's keys warns of nothing (pytest 9 deprecated Config.inicfg, whose
    # warning every run of the plugin printed).
    clean = pytester.runpytest("-W", "error::DeprecationWarning")
    clean.assert_outcomes(passed=1)
    assert "inicfg" not in clean.stdout.str() + clean.stderr.str()
    # Every unknown key is named in the one error.
    two = pytester.runpytest("-o", "torchperf_min_tim=1s", "-o", "torchperf_max_spred=50%")
    assert two.ret == pytest.ExitCode.USAGE_ERROR
    two.stderr.fnmatch_lines(
        [
            "*unknown ini key 'torchperf_min_tim' in -o/--override-ini. Did you mean "
            "'torchperf_min_time'?",
            "torchperf: unknown ini key 'torchperf_max_spred' in -o/--override-ini. Did you mean "
            "'torchperf_max_spread'? Known torchperf keys: *",
        ]
    )
    # A key given with -o is refused too, saying where it came from.
    typo = pytester.runpytest("-o", "torchperf_max_slowdwn=5%")
    assert typo.ret == pytest.ExitCode.USAGE_ERROR
    typo.stderr.fnmatch_lines(
        ["*unknown ini key 'torchperf_max_slowdwn' in -o/--override-ini. Did you mean*"]
    )


def test_a_misspelt_option_is_a_usage_error_naming_the_one_meant(
    pytester: pytest.Pytester,
) -> None:
    """pytest's own error named no option (``unrecognized arguments: --torchperf-comapre``);
    every misspelt torchperf option is named at once, with the value given, from the command
    line and from addopts alike."""
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--torchperf-comapre", "--torchperf-max-slowdow=5%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*torchperf: unknown option --torchperf-comapre. Did you mean --torchperf-compare?",
            "torchperf: unknown option --torchperf-max-slowdow=5%. Did you mean "
            "--torchperf-max-slowdown=5%?",
            "(pytest --help lists the torchperf options with their meaning)",
        ]
    )
    pytester.makefile(".ini", pytest="[pytest]\naddopts = --torchperf-instruction\n")
    addopts = pytester.runpytest()
    assert addopts.ret == pytest.ExitCode.USAGE_ERROR
    addopts.stderr.fnmatch_lines(["*Did you mean --torchperf-instructions?"])
    # A word close to no option of the plugin is left to pytest, as is what follows "--".
    pytester.makefile(".ini", pytest="[pytest]\n")
    other = pytester.runpytest("--torchperf-zzzzzz")
    assert other.ret == pytest.ExitCode.USAGE_ERROR
    assert "Did you mean" not in other.stderr.str()
    other.stderr.fnmatch_lines(["*unrecognized arguments: --torchperf-zzzzzz*"])
    pytester.runpytest("--torchperf-skip").assert_outcomes(passed=1)
    # An option a conftest (or another plugin) adds is its own, however close to one of ours.
    pytester.makeconftest(
        "def pytest_addoption(parser):\n"
        "    parser.addoption('--torchperf-compares', action='store_true')\n"
    )
    pytester.runpytest("--torchperf-compares").assert_outcomes(passed=1)


def test_invalid_ini_device_is_a_usage_error(pytester: pytest.Pytester) -> None:
    """Refused when pytest starts: before, a misspelt device failed each test using the
    torchperf_device fixture with torch's traceback, and the others passed on CPU."""
    pytester.makefile(".ini", pytest="[pytest]\ntorchperf_device = cdua:1\n")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*torchperf: 'cdua:1' is not a device (did you mean 'cuda:1'?): use auto *(ini key "
            "torchperf_device)"
        ]
    )


COUNTING = """
import pytest, torch
CALLS = {"model": 0, "body": 0}

class Counting(torch.nn.Module):
    def forward(self, x):
        CALLS["model"] += 1
        return x * 2

def test_fixture(torchperf):
    torchperf(Counting(), torch.ones(3))
    with open("model_calls.txt", "w") as fh:
        fh.write(str(CALLS["model"]))

@pytest.mark.torchperf
def test_body():
    CALLS["body"] += 1
    with open("body_calls.txt", "w") as fh:
        fh.write(str(CALLS["body"]))

def test_plain():
    pass
"""


# COUNTING's test_body is a whole test body (cuda on a GPU machine); calls are counted.
@pytest.mark.any_device
def test_disable_runs_each_target_once_without_timing(perf: pytest.Pytester) -> None:
    perf.makepyfile(COUNTING)
    result = perf.runpytest("--torchperf-disable")
    result.assert_outcomes(passed=3)
    assert (perf.path / "model_calls.txt").read_text() == "1"
    assert (perf.path / "body_calls.txt").read_text() == "1"
    result.stdout.fnmatch_lines(["*Counting*disabled*"])
    assert not (perf.path / ".torchperf").exists()


# A whole test body, timed on the accelerator where one is present; calls are counted.
@pytest.mark.any_device
def test_whole_test_body_is_the_workload(perf: pytest.Pytester) -> None:
    path = perf.makepyfile(COUNTING)
    result = perf.runpytest(f"{path.name}::test_body")
    result.assert_outcomes(passed=1)
    assert int((perf.path / "body_calls.txt").read_text()) > 10  # warm-up plus timed blocks
    result.stdout.fnmatch_lines(["*test_body  *measured*"])


# COUNTING's test_body is a whole test body; only the selection is checked.
@pytest.mark.any_device
def test_skip_and_only_select_perf_tests(perf: pytest.Pytester) -> None:
    perf.makepyfile(COUNTING)
    perf.runpytest("--torchperf-skip").assert_outcomes(passed=1, skipped=2)
    result = perf.runpytest("--torchperf-only", "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*not a perf test (--torchperf-only)*"])


INSTRUMENTS = """
import pytest, torch

def test_profiled(torchperf_profiler, torchperf_nvtx):
    with torchperf_profiler(), torchperf_nvtx("forward"):
        torch.ones(3) * 2

def test_ranges(torchperf_nvtx):
    with torchperf_nvtx("forward"):
        torch.ones(3) * 2

def test_timed(torchperf_timer):
    x = torch.ones(3)
    torchperf_timer(lambda: x * 2, name="double")

@pytest.mark.torchperf
def test_marked_profiled(torchperf_profiler):
    with torchperf_profiler():
        torch.ones(3) * 2
"""


def test_skip_and_only_leave_tests_that_only_profile_with_the_others(
    perf: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test that only profiles (torchperf_profiler, torchperf_nvtx) times nothing: it runs
    beside the functional tests under --torchperf-skip and is skipped by --torchperf-only, as
    --help says. --torchperf-skip skipped it, and --torchperf-only ran it, while the help said
    only marked tests and the torchperf fixture's counted. A marked one is a perf test, and its
    body is still not timed while it profiles."""
    perf.makepyfile(INSTRUMENTS)
    result = perf.runpytest("--torchperf-skip", "-rs", "-v")
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines_random(
        ["*::test_profiled PASSED*", "*::test_ranges PASSED*", "*::test_timed SKIPPED*"]
    )
    result = perf.runpytest("--torchperf-only", "-rs", "-v")
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines_random(
        [
            "*::test_profiled SKIPPED (not a perf test (--torchperf-only))*",
            "*::test_ranges SKIPPED*",
            "*::test_marked_profiled PASSED*",
            "torchperf: 1 measured",
        ]
    )
    monkeypatch.setenv("COLUMNS", "400")  # each option's help on one line
    perf.runpytest("--help").stdout.fnmatch_lines(
        [
            "*--torchperf-skip *Skip perf tests (marked, or using the torchperf, torchperf_timer "
            "or torchperf_quantized_model fixture; not one that only profiles)",
            "*--torchperf-only *Run only perf tests (as --torchperf-skip defines them)",
        ]
    )


def test_several_named_measurements_in_one_test(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_batches(torchperf):
            model = torch.nn.Linear(16, 16)
            small = torchperf(model, torch.randn(1, 16), name="bs1")
            large = torchperf(model, torch.randn(64, 16), name="bs64")
            assert (small.name, large.name) == ("bs1", "bs64")
            assert torchperf.results == [small, large]
    """)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    result = perf.runpytest("--torchperf-compare", "--torchperf-max-slowdown=900%")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*bs1*pass*", "*bs64*pass*"])


def test_duplicate_measurement_names_fail_with_a_hint(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_twice(torchperf):
            model = torch.nn.Linear(4, 4)
            torchperf(model, torch.randn(1, 4))
            torchperf(model, torch.randn(8, 4))
    """)
    result = perf.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*measurement name 'Linear' is used twice in this test; give each torchperf(...) call its "
            "own name="
        ]
    )
    # The first call's row reads `measured` (`new` in a compare): the summary says the test failed
    # all the same (it said `torchperf: 1 measured` and nothing of the failure).
    result.stdout.fnmatch_lines(
        [
            "torchperf: 1 measured",
            "torchperf: test_duplicate_measurement_names_fail_with_a_hint.py::test_twice FAILED, "
            "not on a verdict above: measurement name 'Linear' is used twice in this test; *",
        ]
    )


def test_result_repr_is_unit_aware(perf: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    perf.makepyfile("""
        import torch
        def test_repr(torchperf):
            r = torchperf(torch.nn.Linear(4, 4), torch.randn(1, 4), name="lin")
            text = repr(r)
            assert text.startswith("<torchperf Result 'lin': median ")
            assert any(u in text for u in (" ns", " us", " ms")), text
            assert len(r.samples) >= 5 and r.iqr >= 0 and r.min <= r.p25 <= r.median <= r.p75
    """)
    perf.runpytest().assert_outcomes(passed=1)
    # A measurement that fails on what it computes says so, not a plain "pass -2.4%".
    perf.makepyfile("""
        import os, torch
        def test_repr(torchperf):
            model = torch.nn.Linear(4, 4)
            model.weight.data *= float(os.environ.get("SCALE", "1"))
            print(repr(torchperf(model, torch.randn(1, 4), name="lin")))
    """)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    monkeypatch.setenv("SCALE", "2")
    drifted = perf.runpytest("--torchperf-compare", "--torchperf-max-slowdown=900%", "-s")
    drifted.assert_outcomes(failed=1)
    drifted.stdout.fnmatch_lines(["*<torchperf Result 'lin': median * pass *; FAIL (numerics)>"])


def test_storage_option_and_ini(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_s(torchperf):
            torchperf(torch.nn.Linear(4, 4), torch.randn(1, 4))
    """)
    perf.runpytest("--torchperf-save", "--torchperf-storage", "cli_store").assert_outcomes(passed=1)
    assert list((perf.path / "cli_store").glob("*/test_storage_option_and_ini.py.json"))
    ini = (perf.path / "pytest.ini").read_text() + "\ntorchperf_storage = perf/baselines\n"
    (perf.path / "pytest.ini").write_text(ini)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    assert list((perf.path / "perf" / "baselines").glob("*/test_storage_option_and_ini.py.json"))


def test_a_storage_outside_the_project_written_with_a_space_is_refused(
    perf: pytest.Pytester,
) -> None:
    """pytest chooses its rootdir before it knows plugin options: an existing folder given as
    ``--torchperf-storage DIR`` would become the rootdir and change every test id."""
    perf.makepyfile("""
        import torch
        def test_s(torchperf):
            torchperf(torch.nn.Linear(4, 4), torch.randn(1, 4))
    """)
    elsewhere = perf.path.parent / f"{perf.path.name}-baselines"
    elsewhere.mkdir()
    result = perf.runpytest("--torchperf-save", "--torchperf-storage", str(elsewhere))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*pytest took the value of --torchperf-storage {elsewhere} for a test path*"
            f"({elsewhere.parent} instead of {perf.path}*"
            f"Write the option with '=': --torchperf-storage={elsewhere}"
        ]
    )
    assert not list(elsewhere.iterdir())  # nothing stored under the wrong test ids
    # The '=' form is what the message asks for: same folder, the project's own rootdir.
    perf.runpytest("--torchperf-save", f"--torchperf-storage={elsewhere}").assert_outcomes(passed=1)
    (stored,) = elsewhere.glob("*/test_*.json")  # beside environment.json
    assert "test_a_storage_outside_the_project_written_with_a_space_is_refused.py::test_s" in (
        stored.read_text()
    )


def test_help_lists_every_option(pytester: pytest.Pytester) -> None:
    # argparse %-formats help strings: a bare "10%" in a help text crashed `pytest --help` once.
    result = pytester.runpytest("--help")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "performance regressions of PyTorch models (pytest-torchperf):",
            "*--torchperf-save*",
            "*--torchperf-max-slowdown=PCT",
            "*Slowdown beyond which a test fails, e.g. 10% or 0.1",
        ]
    )
    for name in (
        "compare",
        "storage",
        "reset",
        "min-time",
        "warmup",
        "threads",
        "strict",
        "min-cpu-share",
        "max-spread",
        "device",
        "report-dir",
        "ignore-counters",
        "disable",
        "skip",
        "only",
    ):
        assert f"--torchperf-{name}" in result.stdout.str(), name


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--torchperf-fallback", "cycles", "--torchperf-compare"], "takes instructions*"),
        (["--torchperf-fallback", "instructions"], "*add --torchperf-save or --torchperf-compare"),
        (
            [
                "--torchperf-fallback",
                "instructions",
                "--torchperf-instructions",
                "--torchperf-save",
            ],
            "*--torchperf-instructions already gates on counts alone*",
        ),
        (
            ["--torchperf-fallback", "instructions", "--torchperf-compare", "-n", "2"],
            "*pytest-xdist (-n) would start them again in every worker. Drop -n for this run",
        ),
    ],
)
def test_fallback_misuse_is_a_usage_error(
    perf: pytest.Pytester, args: list[str], error: str
) -> None:
    perf.makepyfile("def test_x():\n    pass\n")
    result = perf.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--torchperf-fallback*{error}"])


def test_an_ini_fallback_gives_way_to_a_run_that_neither_saves_nor_compares(
    perf: pytest.Pytester,
) -> None:
    """No counting processes (minutes under Valgrind) for a plain run; -o turns it off."""
    ini = perf.path / "pytest.ini"
    ini.write_text(ini.read_text() + "\ntorchperf_fallback = instructions\n")
    perf.makepyfile("def test_x():\n    pass\n")
    plain = perf.runpytest()
    plain.assert_outcomes(passed=1)
    assert "counting instructions" not in plain.stdout.str()
    xdist = perf.runpytest("--torchperf-compare", "-n", "2")
    assert xdist.ret == pytest.ExitCode.USAGE_ERROR
    xdist.stderr.fnmatch_lines(["*-o torchperf_fallback=off turns it off for this run*"])
    off = perf.runpytest("--torchperf-compare", "-n", "2", "-o", "torchperf_fallback=off")
    off.assert_outcomes(passed=1)
