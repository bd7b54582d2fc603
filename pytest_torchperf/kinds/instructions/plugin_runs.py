"""pytest glue of ``--torchperf-instructions`` and ``--torchperf-fallback instructions``: the child
pytest runs under Valgrind that count every perf test before this run's own test loop (the options
and their checks: :mod:`.plugin`).

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
from pytest_torchperf.core.units import counted
from pytest_torchperf.kinds.instructions.options import CountSettings
from pytest_torchperf.kinds.instructions.run_job_split import auto_jobs, split_contiguous
from pytest_torchperf.pytest_plugin import child_runs
from pytest_torchperf.pytest_plugin.stash import SETTINGS_KEY, context_of, marker_options
from pytest_torchperf.run.child_process import ChildCommand, ChildProcess

if TYPE_CHECKING:
    from pytest_torchperf.kinds.instructions.run_counting import CountedTime
    from pytest_torchperf.run.context import RunContext

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
    recounting: list[_Child] = []
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
            f"torchperf: counting instructions of {counted(len(perf), 'perf test')} in {where} ...",
        )
        for child in children:  # one limit for them all: they run at the same time
            child.wait(CHILD_TIMEOUT_S)
        counting = ctx.state(CountState)
        counting.counted_with = {
            "valgrind": version,
            "kernel_caps": " ".join(f"{name}={value}" for name, value in sorted(caps.items())),
        }
        n_counted = 0
        for child in children:
            counts, capability = read_counts(child.out)
            counting.counts.update(counts)
            n_counted += len(counts)
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
            f"torchperf: {counted(n_counted, 'instruction count')} in {took:.1f} s under Valgrind"
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
                    f"  process {index} ({counted(len(child.nodeids), 'test')}, "
                    f"{counted(child.counted, 'count')}) "
                    f"in {child.process.took:.1f} s"
                    + (f": {child.split.describe()}" if child.split else ""),
                )
        _remember_start_up(config, children)
        for child in children:
            _report_child(ctx, terminal, child, alone=n_counted == 0)
        if ctx.settings.compare and ctx.settings.confirm == "fresh":
            _recount(session, [child.out for child in children], folder, caps, recounting)
    finally:
        # Interrupted (Ctrl-C) or failed while others still count: none outlives the run.
        for child in children + recounting:
            child.process.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _recount(
    session: pytest.Session,
    outs: list[Path],
    folder: Path,
    caps: dict[str, str],
    started: list[_Child],
) -> None:
    """Count the tests whose counts exceed their limits with most of the increase in the
    interpreter's lookups and the allocators again, in fresh processes under Valgrind with
    another history (appended to ``started``), and hand those counts to the run: the lower of
    the two is judged (:mod:`pytest_torchperf.kinds.instructions.run_recount`)."""
    from pytest_torchperf.core.child_protocol import CountLine, read_messages
    from pytest_torchperf.kinds.instructions.judge_counts import repeats
    from pytest_torchperf.kinds.instructions.measure_callgrind import InstructionCount
    from pytest_torchperf.kinds.instructions.run_counting import CountState, read_counts
    from pytest_torchperf.kinds.instructions.run_recount import above_limit, listed

    config = session.config
    ctx = context_of(config)
    counting = ctx.state(CountState)
    lines = [line for out in outs for line in read_messages(out, (CountLine,))]
    fallback = not config.stash[SETTINGS_KEY].of(CountSettings).instructions
    suspects = above_limit(ctx, counting.counts, lines, counting.counted_with, fallback)
    tests = {nodeid for nodeid, _ in suspects}
    nodeids = [item.nodeid for item in child_runs.perf_items(session) if item.nodeid in tests]
    if not nodeids:
        return
    jobs = config.stash[SETTINGS_KEY].of(CountSettings).jobs or auto_jobs()
    for index, part in enumerate(split_contiguous(nodeids, jobs), 1):
        started.append(_start_child(config, folder / f"recount-{index}", part, caps, recount=True))
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    limits = "its limit" if len(suspects) == 1 else "their limits"
    where = (
        "a fresh pytest process" if len(started) == 1 else f"{len(started)} fresh pytest processes"
    )
    child_runs.say(
        terminal,
        f"torchperf: {counted(len(suspects), 'instruction count')} above {limits}, most of the "
        f"increase in the interpreter's lookups and the allocators ({listed(suspects)}): "
        f"counting {counted(len(nodeids), 'test')} again in {where} under Valgrind, with another "
        f"history (what a process ran before moves Python's type cache and the memory "
        f"allocators); the lower count is judged ...",
    )
    for child in started:
        child.wait(CHILD_TIMEOUT_S)
    again: dict[tuple[str, str], float] = {}
    shaky: list[str] = []
    for child in started:
        counts = read_counts(child.out)[0]
        for key in suspects:
            if key not in counts:
                continue
            counting.recounts[key] = counts[key]
            if not repeats(InstructionCount.from_record(counts[key])):
                shaky.append(key[1])  # the engine ignores it
                continue
            first = float(counting.counts[key]["per_call"])
            # Against the same baseline: first = baseline * (1 + its change).
            again[key] = (1.0 + suspects[key]) * float(counts[key]["per_call"]) / first - 1.0
    took = max(child.process.took for child in started)
    said = [f"counted again in {took:.1f} s: {listed(again)}"] if again else []
    if shaky:
        said.append(
            f"{', '.join(shaky)}: counted again, but the recount's two windows disagree, so "
            f"the first count is judged"
        )
    for child in started:
        missed = [
            name
            for nodeid, name in suspects
            if nodeid in child.nodeids and (nodeid, name) not in counting.recounts
        ]
        if missed:
            said.append(
                f"{', '.join(missed)}: not counted again, so the first count is judged (the "
                f"fresh process exited with code {child.process.code} after "
                f"{child.process.took:.0f} s). {child.process.told(12)}"
            )
    child_runs.say(terminal, "torchperf: " + "; ".join(said), yellow=len(again) < len(suspects))


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
    config: pytest.Config,
    folder: Path,
    nodeids: list[str],
    caps: dict[str, str],
    recount: bool = False,
) -> _Child:
    """Start one pytest process under Valgrind counting the perf tests ``nodeids``; it writes
    its counts to ``folder/counts.jsonl``. A ``recount``'s process hands out some of Python's
    type version tags before its tests (:data:`~pytest_torchperf.kinds.instructions.run_recount.
    TAG_SHIFT_ENV`), so that its types collide elsewhere in the type cache."""
    import json

    from pytest_torchperf.kinds.instructions.measure_callgrind import DUMP_DIR_ENV, valgrind_command
    from pytest_torchperf.kinds.instructions.run_recount import TAG_SHIFT, TAG_SHIFT_ENV
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
        **({TAG_SHIFT_ENV: str(TAG_SHIFT)} if recount else {}),
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
            f"{child.process.took:.0f} s and counted {counted(child.counted, 'measurement')}"
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
