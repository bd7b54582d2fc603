"""The ``instructions`` kind's plugin part: its options and their checks (bad values and
combinations are usage errors that say why), and its child-process schedule, counting under
Valgrind side by side before anything is timed (``--torchperf-instructions``, and
``--torchperf-fallback instructions`` for the ``time-or-instructions`` kind; the counting
processes themselves: :mod:`.plugin_runs`)."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

import pytest

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.kinds.instructions import plugin_runs
from pytest_torchperf.kinds.instructions.options import CountSettings
from pytest_torchperf.kinds.instructions.run_job_split import CHILD_MEMORY_GIB
from pytest_torchperf.options.values import parse_bool
from pytest_torchperf.pytest_plugin import child_runs
from pytest_torchperf.pytest_plugin.child_schedule import Schedule
from pytest_torchperf.pytest_plugin.stash import CONTEXT_SETUP_KEY, ini_value

if TYPE_CHECKING:
    from pytest_torchperf.run.context import RunContext

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


def _given(config: pytest.Config, name: str) -> tuple[object, str]:
    """``--torchperf-<name>``, else ini ``torchperf_<name>`` ("" where neither gives it), and
    where it came from, as its errors name it."""
    raw = config.getoption(f"torchperf_{name}", None)
    if raw is not None:
        return raw, "--torchperf-" + name.replace("_", "-")
    return ini_value(config, f"torchperf_{name}"), f"ini torchperf_{name}"


def _asked(config: pytest.Config) -> bool:
    """Whether the run asks to count instructions (a bad ini value is an OptionError)."""
    return parse_bool(_given(config, "instructions")[0] or False)


def instructions_setting(config: pytest.Config) -> bool:
    """Whether this run counts instructions; bad combinations are usage errors that say why."""
    try:
        asked = _asked(config)
    except OptionError:
        ini = ini_value(config, "torchperf_instructions")
        raise pytest.UsageError(
            f"torchperf: ini torchperf_instructions must be true or false, got {ini!r}"
        ) from None
    if not asked or config.getoption("torchperf_skip"):
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
    processes = config.getoption("torchperf_processes") or ini_value(config, "torchperf_processes")
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
    raw, where = _given(config, "fallback")
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
    raw, where = _given(config, "instruction_jobs")
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


def settings(config: pytest.Config) -> CountSettings:
    """This run's instruction-count settings from the command line and ini file (usage errors
    for what cannot work)."""
    instructions = instructions_setting(config)
    fallback = fallback_setting(config)
    return CountSettings(
        instructions,
        fallback,
        # Checked only where it matters: a bad value must not break runs that count nothing.
        jobs_setting(config) if instructions or fallback else 0,
    )


def repeats_exactly(config: pytest.Config) -> bool:
    """The run gates on the instruction count, which repeats exactly between processes: a save
    needs no fresh processes. Read raw, before the run's settings exist (a bad ini value is
    :func:`settings`' error, reported after the process count's)."""
    try:
        return _asked(config)
    except OptionError:
        return False  # the kind's own check reports the bad value


def configure_counting_child(config: pytest.Config) -> None:
    """In the child under Valgrind: tell the run's context where the profiles go, once it exists
    (the counting child's settings live on it)."""

    def setup(ctx: RunContext) -> None:
        from pytest_torchperf.kinds.instructions.measure_callgrind import counted_process
        from pytest_torchperf.kinds.instructions.run_counting import CountState
        from pytest_torchperf.kinds.instructions.run_recount import TAG_SHIFT_ENV, shift_type_tags

        ctx.state(CountState).folder = counted_process()
        # A recount's process: another history than the first counts' (run_recount).
        shift = os.environ.get(TAG_SHIFT_ENV, "")
        if shift.isdigit():
            shift_type_tags(int(shift))

    config.stash[CONTEXT_SETUP_KEY].append(setup)


SCHEDULES = (
    Schedule(
        "counting under Valgrind",
        used=lambda settings, config: settings.of(CountSettings).counts,
        run=plugin_runs.run_counting_children,
        configure_child=configure_counting_child,
    ),
)
