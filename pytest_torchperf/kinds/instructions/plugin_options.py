"""The options of ``--torchperf-instructions`` and ``--torchperf-fallback instructions`` and their
checks: bad values and combinations are usage errors that say why (the counting processes
themselves: :mod:`.plugin_runs`)."""

from __future__ import annotations

import shutil

import pytest

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.kinds.instructions.run_job_split import CHILD_MEMORY_GIB
from pytest_torchperf.pytest_plugin import child_runs

#: Most counting processes ``--torchperf-instruction-jobs`` accepts.
MAX_JOBS = 64


#: Its ``--torchperf-<name>`` options (registered with the run's others:
#: :mod:`pytest_torchperf.pytest_plugin.options`): name -> help, metavars (none: a switch), ini keys.
CLI_HELP = {
    "instructions": "Gate CPU perf tests on instructions per call counted under Valgrind "
    "(deterministic: for shared CI runners) instead of time; extra pytest processes "
    "under valgrind count them first (ini torchperf_instructions)",
    "fallback": "instructions: time and gate CPU perf tests on time as usual, and also count "
    "their instructions under Valgrind; a save stores the count beside the timing, and a "
    "compare judges a measurement whose timing verdict is inconclusive (busy machine, "
    "spread) by its count instead (ini torchperf_fallback)",
    "instruction_jobs": "Counting processes under Valgrind run side by side, each counting a "
    "contiguous share of the perf tests: auto (default: one per CPU core, at most 4, about 3 GiB "
    "of memory each) or N (ini torchperf_instruction_jobs)",
}
METAVARS = {"fallback": "KIND", "instruction_jobs": "N"}
INI_HELP = {
    "instructions": "Gate on instruction counts under Valgrind (true/false)",
    "fallback": "instructions: judge by the instruction count where timing cannot decide",
    "instruction_jobs": "Counting processes side by side under Valgrind (auto or N)",
}


#: Said when valgrind is missing (after the option that needs it).
_NO_VALGRIND = (
    "counts instructions under Valgrind, and valgrind is not on PATH. Install it (Debian/Ubuntu: "
    "sudo apt-get install valgrind; Fedora: sudo dnf install valgrind; not available on macOS or "
    "Windows), or drop the option"
)


def _ini_hint(on_cli: bool, name: str, off: str) -> str:
    """Set in the ini file, the mode is switched off for one run with -o: each error says so."""
    if on_cli:
        return ""
    return f" (set by ini torchperf_{name}: -o torchperf_{name}={off} turns it off for this run)"


def instructions_setting(config: pytest.Config) -> bool:
    """Whether this run counts instructions; bad combinations are usage errors that say why."""
    from pytest_torchperf.options.values import parse_bool

    raw = config.getoption("torchperf_instructions")
    if raw is None:
        ini = config.getini("torchperf_instructions")
        try:
            raw = parse_bool(ini) if ini not in ("", None) else False
        except OptionError:
            raise pytest.UsageError(
                f"torchperf: ini torchperf_instructions must be true or false, got {ini!r}"
            ) from None
    if not raw or config.getoption("torchperf_skip"):
        return False
    on_cli = config.getoption("torchperf_instructions") is not None
    off = _ini_hint(on_cli, "instructions", "false")
    if config.getoption("torchperf_disable"):
        if not on_cli:
            return False  # the ini default gives way to a run that times nothing
        raise pytest.UsageError(
            "--torchperf-instructions counts instructions of each perf test; it cannot be "
            "combined with --torchperf-disable"
        )
    if child_runs.is_xdist(config) and not config.getoption("torchperf_child"):
        raise pytest.UsageError(
            "--torchperf-instructions counts the perf tests in its own pytest processes under "
            "Valgrind (one per core: --torchperf-instruction-jobs); pytest-xdist (-n) would "
            "start them again in every worker. Drop -n for the instruction run (e.g. pytest -n "
            "2 --torchperf-skip, then pytest --torchperf-only --torchperf-instructions "
            "--torchperf-compare)" + off
        )
    processes = config.getoption("torchperf_processes") or config.getini("torchperf_processes")
    if str(processes).strip() not in ("", "1"):
        raise pytest.UsageError(
            "--torchperf-processes measures time in several processes; instruction counts "
            "repeat exactly between processes, so --torchperf-instructions needs one. Drop "
            "--torchperf-processes or ini torchperf_processes from this run, or pass "
            "--torchperf-processes 1 (or run the timing gate as a separate job)" + off
        )
    if not config.getoption("torchperf_child") and shutil.which("valgrind") is None:
        raise pytest.UsageError(f"--torchperf-instructions {_NO_VALGRIND} to gate on time{off}")
    return True


def fallback_setting(config: pytest.Config) -> str:
    """``--torchperf-fallback`` / ini ``torchperf_fallback``: ``instructions`` or "" (off); bad
    values and combinations are usage errors that say why."""
    raw = config.getoption("torchperf_fallback")
    where = "--torchperf-fallback"
    if raw is None:
        raw, where = config.getini("torchperf_fallback") or "", "ini torchperf_fallback"
    value = str(raw).strip().lower()
    if value in ("", "none", "off"):
        return ""
    if value != "instructions":
        raise pytest.UsageError(
            f"torchperf: {where} takes instructions (judge a measurement whose timing verdict "
            f"is inconclusive by its instruction count under Valgrind), got {raw!r}"
        )
    if config.getoption("torchperf_skip") or config.getoption("torchperf_disable"):
        return ""  # nothing is timed, so nothing falls back
    on_cli = config.getoption("torchperf_fallback") is not None
    ab = config.getoption("torchperf_ab", None) or config.getoption("torchperf_ab_python", None)
    stores = config.getoption("torchperf_save") or config.getoption("torchperf_compare")
    if not on_cli and (ab or not stores or instructions_setting(config)):
        # The ini default gives way to a run that keeps no baseline or counts on its own: the
        # counting would cost minutes for nothing.
        return ""
    off = _ini_hint(on_cli, "fallback", "off")
    if not stores:
        raise pytest.UsageError(
            f"torchperf: {where} instructions stores counts with a save and judges them in a "
            f"compare; add --torchperf-save or --torchperf-compare"
        )
    if instructions_setting(config):
        raise pytest.UsageError(
            f"torchperf: {where} instructions falls back to instruction counts where timing "
            f"cannot decide; --torchperf-instructions already gates on counts alone. Use one of "
            f"them"
        )
    if ab:
        raise pytest.UsageError(
            f"torchperf: {where} instructions stores and judges counts beside a baseline; an "
            f"A/B run (--torchperf-ab) keeps no baseline. Drop one of them"
        )
    if config.getoption("torchperf_child"):
        return value
    if child_runs.is_xdist(config):
        raise pytest.UsageError(
            f"torchperf: {where} instructions counts the perf tests in its own pytest processes "
            f"under Valgrind before the test loop; pytest-xdist (-n) would start them again in "
            f"every worker. Drop -n for this run" + off
        )
    if shutil.which("valgrind") is None:
        raise pytest.UsageError(f"torchperf: {where} instructions {_NO_VALGRIND}{off}")
    return value


def jobs_setting(config: pytest.Config) -> int:
    """``--torchperf-instruction-jobs`` / ini ``torchperf_instruction_jobs``: a whole number
    from 1 to :data:`MAX_JOBS`, or ``auto`` (0, the default: :func:`auto_jobs` at run time)."""
    raw = config.getoption("torchperf_instruction_jobs")
    where = "--torchperf-instruction-jobs"
    if raw is None:
        raw, where = config.getini("torchperf_instruction_jobs"), "ini torchperf_instruction_jobs"
    text = str(raw or "auto").strip().lower()
    if text == "auto":
        return 0
    try:
        jobs = int(text)
    except ValueError:
        jobs = -1
    if not 1 <= jobs <= MAX_JOBS:
        raise pytest.UsageError(
            f"torchperf: {where} must be auto or a whole number from 1 to {MAX_JOBS}, got "
            f"{raw!r}. Each job is one pytest process under Valgrind (one CPU core, about "
            f"{CHILD_MEMORY_GIB} GiB of memory for a torch model); auto uses one per core"
        )
    return jobs
