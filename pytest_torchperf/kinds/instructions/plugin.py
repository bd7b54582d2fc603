"""The ``instructions`` kind's plugin part: its options and their checks (bad values and
combinations are usage errors that say why), and the child pytest runs under Valgrind that count
every perf test before this run's own test loop (``--torchperf-instructions``, and
``--torchperf-fallback instructions`` for the ``time-or-instructions`` kind).

Why children: Valgrind has to start the process (it cannot attach), and ``import torch`` under it
costs a minute or more, so the counts are taken once per run, in child runs started with the
controller's own arguments plus ``--torchperf-child=FILE`` under ``valgrind --tool=callgrind``
with instrumentation off
(:func:`pytest_torchperf.kinds.instructions.measure_callgrind.valgrind_command`). Each child
counts each of its measurements (:mod:`pytest_torchperf.kinds.instructions.run_counting`) and
writes one line per count; this run then measures as usual (counters, outputs, variants, a timed
pass that is reported, not gated) and judges the counts through the comparison engine.

Why several side by side (``--torchperf-instruction-jobs``, auto: one per core): a process under
Valgrind runs one thread at a time, so one child leaves the other cores idle; each child takes a
contiguous share of the perf tests
(:func:`pytest_torchperf.kinds.instructions.run_job_split.split_contiguous`,
``--torchperf-child-items=FILE``) and counts do not depend on what runs beside them.
"""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.kinds.instructions.options import CountSettings
from pytest_torchperf.kinds.instructions.run_job_split import (
    CHILD_MEMORY_GIB,
    auto_jobs,
    split_contiguous,
)
from pytest_torchperf.options.values import parse_bool
from pytest_torchperf.pytest_plugin import child_runs
from pytest_torchperf.pytest_plugin.child_schedule import Schedule
from pytest_torchperf.pytest_plugin.stash import (
    CONTEXT_SETUP_KEY,
    SETTINGS_KEY,
    context_of,
    marker_options,
)
from pytest_torchperf.run.child_process import ChildCommand, ChildProcess

if TYPE_CHECKING:
    from pytest_torchperf.kinds.instructions.run_counting import CountedTime
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


def _asked(config: pytest.Config) -> bool:
    """``--torchperf-instructions``, else ini ``torchperf_instructions`` (a bad ini value is an
    OptionError)."""
    raw = config.getoption("torchperf_instructions", None)
    return parse_bool(config.getini("torchperf_instructions") or False) if raw is None else raw


def instructions_setting(config: pytest.Config) -> bool:
    """Whether this run counts instructions; bad combinations are usage errors that say why."""
    try:
        asked = _asked(config)
    except OptionError:
        ini = config.getini("torchperf_instructions")
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


#: The children are killed after this long (a stuck child would otherwise hold CI forever).
CHILD_TIMEOUT_S = 3 * 3600.0


def run_counting_children(session: pytest.Session) -> None:
    """Count every perf test in child pytest runs under Valgrind, side by side, each with its
    contiguous share of the tests; hand the counts to the run."""
    from pytest_torchperf.kinds.instructions.measure_callgrind import kernel_caps, valgrind_version
    from pytest_torchperf.kinds.instructions.run_counting import (
        CountState,
        counted_time,
        read_counts,
    )

    config = session.config
    perf = child_runs.perf_items(session)
    ctx = context_of(config)
    if not perf or config.option.collectonly:
        return
    settings = config.stash[SETTINGS_KEY]
    jobs = settings.of(CountSettings).jobs or auto_jobs()
    slices = split_contiguous([item.nodeid for item in perf], jobs, [_weight(i) for i in perf])
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    folder = Path(tempfile.mkdtemp(prefix="torchperf-instructions-"))
    # oneDNN's and MKL's kernels without FMA, which Valgrind runs ~10x faster (KERNEL_CAPS).
    caps = kernel_caps(os.environ, platform.machine())
    children: list[_Child] = []
    try:
        for index, part in enumerate(slices, 1):
            children.append(_start_child(config, folder / f"job-{index}", part, caps))
        version = valgrind_version()
        where = (
            f"a pytest process under {version}"
            if len(children) == 1
            else f"{len(children)} pytest processes side by side under {version}"
        ) + _start_up_note(config, len(children))
        child_runs.say(
            terminal,
            f"torchperf: counting instructions of {len(perf)} perf test(s) in {where} ...",
        )
        for child in children:  # one limit for them all: they run at the same time
            child.wait(CHILD_TIMEOUT_S)
        counting = ctx.state(CountState)
        counting.counted_with = {
            "valgrind": version,
            "kernel_caps": " ".join(f"{name}={value}" for name, value in sorted(caps.items())),
        }
        counted = 0
        for child in children:
            counts, capability = read_counts(child.out)
            counting.counts.update(counts)
            counted += len(counts)
            if capability:
                counting.counted_with.setdefault("counted_capability", capability)
            child.counted = len(counts)
            child.split = counted_time(
                child.out, child.process.launched, child.process.launched + child.process.took
            )
        counting.counted_with.setdefault("counted_capability", None)
        took = max(child.process.took for child in children)
        child_runs.say(
            terminal,
            f"torchperf: {counted} instruction count(s) in {took:.1f} s under Valgrind"
            + (
                f": {children[0].split.describe()}"
                if len(children) == 1 and children[0].split
                else ""
            ),
        )
        if len(children) > 1:
            for index, child in enumerate(children, 1):
                child_runs.say(
                    terminal,
                    f"  process {index} ({len(child.nodeids)} test(s), {child.counted} count(s)) "
                    f"in {child.process.took:.1f} s"
                    + (f": {child.split.describe()}" if child.split else ""),
                )
        _remember_start_up(config, children)
        for child in children:
            _report_child(ctx, terminal, child, alone=counted == 0)
    finally:
        # Interrupted (Ctrl-C) or failed while others still count: none outlives the run.
        for child in children:
            child.process.stop()
        shutil.rmtree(folder, ignore_errors=True)


#: pytest's cache key of the last start-up under Valgrind on this machine: {"jobs": s}.
_START_UP_KEY = "torchperf/valgrind-start-up-s"


def _start_up_note(config: pytest.Config, jobs: int) -> str:
    """How long the start-up (interpreter, imports, collection) under Valgrind took here the
    last time, with as many processes side by side; nothing when unknown. It varies by machine
    and load by 3x or more, so no figure is made up."""
    cache = getattr(config, "cache", None)
    known = cache.get(_START_UP_KEY, {}) if cache is not None else {}
    seconds = known.get(str(jobs)) if isinstance(known, dict) else None
    if not isinstance(seconds, (int, float)) or seconds <= 0:
        return " (the start-up alone takes minutes on a small machine; timed below)"
    each = "its" if jobs == 1 else "each one's"
    return f" ({each} start-up and imports took {seconds:.0f} s on this machine last time)"


def _remember_start_up(config: pytest.Config, children: list[_Child]) -> None:
    splits = [child.split.start_up for child in children if child.split is not None]
    cache = getattr(config, "cache", None)
    if not splits or cache is None:
        return
    known = cache.get(_START_UP_KEY, {})
    known = dict(known) if isinstance(known, dict) else {}
    known[str(len(children))] = round(max(splits), 1)
    cache.set(_START_UP_KEY, known)


class _Child:
    """One counting process: its slice of the tests, its file of counts, and how it went."""

    def __init__(self, nodeids: list[str], out: Path, process: ChildProcess) -> None:
        self.nodeids, self.out, self.process = nodeids, out, process
        self.counted = 0
        self.split: CountedTime | None = None

    def wait(self, timeout: float) -> None:
        """Wait until ``timeout`` seconds after this child started, then kill it."""
        left = max(1.0, timeout - (time.time() - self.process.launched))
        if isinstance(self.process.wait(left), str):
            # Killed: name the limit, not the time that was left of it.
            self.process.code = f"none: killed at the limit of {timeout:.0f} s for counting"


def _weight(item: pytest.Item) -> float:
    """What counting ``item`` costs, roughly, for splitting the tests evenly: nothing when its
    marker opts it out (``instructions=False``), two counts for a variant item (eager is its
    reference), one otherwise."""
    try:
        if marker_options(item).get("instructions") is False:
            return 0.0
    except OptionError:  # a bad marker fails the test itself, with its own message
        return 1.0
    params = getattr(getattr(item, "callspec", None), "params", {})
    return 2.0 if params.get("torchperf_variant") not in (None, "eager") else 1.0


def _start_child(
    config: pytest.Config, folder: Path, nodeids: list[str], caps: dict[str, str]
) -> _Child:
    """Start one pytest process under Valgrind counting the perf tests ``nodeids``; it writes
    its counts to ``folder/counts.jsonl``."""
    import json

    from pytest_torchperf.kinds.instructions.measure_callgrind import DUMP_DIR_ENV, valgrind_command
    from pytest_torchperf.run.children import concurrent_child_args

    (folder / "dumps").mkdir(parents=True)
    out, log, items = folder / "counts.jsonl", folder / "valgrind-child.log", folder / "items.json"
    items.write_text(json.dumps(nodeids), encoding="utf-8")
    env = {
        DUMP_DIR_ENV: str(folder / "dumps"),
        # Kernels cached by a native run were built for the host's ISA (AVX-512, AMX),
        # which Valgrind does not emulate: they gave wrong outputs under it.
        "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor"),
        # CUDA does not run under Valgrind; this run skips non-CPU measurements anyway.
        "CUDA_VISIBLE_DEVICES": "",
        # str hashes decide dict layouts and so the instructions of every lookup.
        "PYTHONHASHSEED": "0",
        **caps,
    }
    march = "TORCHINDUCTOR_CPP_MARCH"
    if platform.machine() in ("x86_64", "AMD64") and march not in env and march not in os.environ:
        # Inductor compiles its kernels natively with -march=native: on an AVX-512 host they
        # died with SIGILL under Valgrind 3.19, which emulates up to AVX2.
        env[march] = "x86-64-v3"
    command = ChildCommand(
        tuple(config.invocation_params.args),
        config.invocation_params.dir,
        child_file=out,
        child_items=items,
        overrides=(
            # A test failing under Valgrind must not stop the counting of the others (-x).
            "--maxfail=1000000000",
            # Its own temporary folders and cache, its share in collection order.
            *concurrent_child_args(folder, config.invocation_params.args),
        ),
        # Under callgrind, instrumentation off until a count switches it on.
        launcher=tuple(valgrind_command([], folder / "dumps")),
        env=env,
        process=0,
    )
    return _Child(nodeids, out, command.start(log))


def _report_child(
    ctx: RunContext, terminal: pytest.TerminalReporter | None, child: _Child, alone: bool
) -> None:
    """Say what went wrong in one counting process, once, and tell each of its tests' missing
    counts where to look. A process that exited normally without a count is only reported when
    no process counted anything (``alone``): its tests may all have been opted out or off-CPU."""
    code = child.process.code  # every child was waited for
    if code not in (0, 1) or (alone and not child.counted):
        what = (
            f"the pytest process under Valgrind exited with code {code} after "
            f"{child.process.took:.0f} s and counted {child.counted} measurement(s)"
        )
        # The command and the log once, at the top; each measurement's failure refers to it.
        child_runs.say(
            terminal,
            f"torchperf: {what}. {child.process.told(20)}",
            yellow=True,
        )
        problem = f"{what} (its command and the end of its log are printed before the tests)"
    else:
        problem = (
            f"the pytest process under Valgrind (exit code {code}) did not count it: its "
            f"test failed or was skipped there. The end of that process's output:\n    "
            + "\n    ".join(child.process.log_tail(12))
        )
    from pytest_torchperf.kinds.instructions.run_counting import CountState

    for nodeid in child.nodeids:
        ctx.state(CountState).problems[nodeid] = problem


def configure_counting_child(config: pytest.Config) -> None:
    """In the child under Valgrind: tell the run's context where the profiles go, once it exists
    (the counting child's settings live on it)."""

    def setup(ctx: RunContext) -> None:
        from pytest_torchperf.kinds.instructions.measure_callgrind import counted_process
        from pytest_torchperf.kinds.instructions.run_counting import CountState

        ctx.state(CountState).folder = counted_process()

    config.stash[CONTEXT_SETUP_KEY].append(setup)


SCHEDULES = (
    Schedule(
        "counting under Valgrind",
        used=lambda settings, config: settings.of(CountSettings).counts,
        run=run_counting_children,
        configure_child=configure_counting_child,
    ),
)
