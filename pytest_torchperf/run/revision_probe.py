"""One revision of ``torchperf bisect``: its selected perf tests run in a temporary worktree, the
figures read from their results file, and the revision classified good, bad or skip against
GOOD's and BAD's figures (see :mod:`pytest_torchperf.run.bisect` for the search and the modes).
Pytest-free; the plugin runs in the child process.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_torchperf.kinds import specs
from pytest_torchperf.run.bisect_mode import COUNTERS, BisectError, BisectMode, Classify, Key
from pytest_torchperf.run.child_process import ChildCommand
from pytest_torchperf.run.kinds import run_part
from pytest_torchperf.run.worktree import WorktreeError, checkout, repository_root
from pytest_torchperf.store.results import ResultsFileError, read_results


def modes() -> tuple[BisectMode, ...]:
    """The ways a revision can be judged: the measurement kinds' (their run parts'
    :attr:`~pytest_torchperf.run.kind_run.KindRun.bisect`, the default's first), then the
    counters every kind records."""
    found = [m for spec in specs() if (m := run_part(spec.name).bisect) is not None]
    # The ones a bisection would choose by default first, as --mode lists them.
    found.sort(key=lambda m: (m.default_rank is None, m.default_rank or 0))
    return (*found, COUNTERS)


def mode_named(name: str) -> BisectMode:
    """The bisect mode called ``name``."""
    for mode in modes():
        if mode.name == name:
            return mode
    raise BisectError(f"unknown bisect mode {name!r}: one of {', '.join(m.name for m in modes())}")


def default_mode() -> str:
    """The mode a bisection uses unless told: the available one ranked first (the instruction
    count where Valgrind is on PATH, else A/B runs)."""
    ranked = sorted(
        (m for m in modes() if m.default_rank is not None and m.available()),
        key=lambda m: m.default_rank or 0,
    )
    return ranked[0].name if ranked else COUNTERS.name


@dataclass(frozen=True)
class Probe:
    """One revision's run of the selected tests."""

    commit: str
    subject: str
    #: ``good``, ``bad`` or ``skip``.
    verdict: str
    #: What decided it, e.g. ``b: 4,712,345 instr/call, +3.02% vs GOOD``.
    detail: str
    #: Each measurement's figure (instructions per call, counters, A/B outcome).
    figures: Mapping[Key, Any] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass(frozen=True)
class Target:
    """What to run at each revision."""

    mode: str
    #: ``-k`` of the perf tests (and any other pytest arguments), as for this run's pytest.
    pytest_args: tuple[str, ...]
    #: The folder pytest runs from, inside the repository (mapped into each worktree).
    invocation_dir: Path
    #: A/B mode: GOOD's commit id, side A of every A/B run.
    good_commit: str = ""
    timeout: float = 3600.0


def run_revision(target: Target, commit: str, out: Path) -> tuple[int, str]:
    """Run the selected tests at ``commit``; their results file is ``out``. Returns pytest's exit
    code and the end of its output."""
    mode_args = mode_named(target.mode).args(target.good_commit)
    root = repository_root(target.invocation_dir, "bisect")
    with checkout(root, target.invocation_dir, commit, "bisect") as tree:
        command = ChildCommand(
            tuple(tree.map_args(target.pytest_args)),
            tree.cwd,
            python=(sys.executable,),
            leading=("-p", "no:cacheprovider", *mode_args, f"--torchperf-json={out}"),
            env=tree.env,
            # Each revision runs these arguments alone, not the shell's PYTEST_ADDOPTS too.
            unset_env=("PYTEST_ADDOPTS",),
        )
        child = command.start(out.with_name("pytest.log"), own_session=True)
        try:
            code = child.wait(target.timeout)
        finally:  # Ctrl-C too: its own session does not get the terminal's SIGINT
            child.stop()
    if not isinstance(code, int):
        return -1, f"pytest did not finish within {target.timeout:.0f} s"
    return code, "\n".join(child.log_tail(12))


def figures_of(mode: str, out: Path) -> dict[Key, Any]:
    """Each measured record's figure in a revision's results file."""
    try:
        records, _ = read_results(out)
    except ResultsFileError:
        return {}
    figure = mode_named(mode).figure
    found: dict[Key, Any] = {}
    for record in records:
        value = figure(record)
        if value is not None:
            found[(record.nodeid, record.name)] = value
    return found


def _said(tail: str) -> str:
    """The line of pytest's output that says why it stopped: its last error line (a usage
    error prints the rootdir after it), else its last line."""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR") or "error:" in line]
    return (errors or lines or [""])[-1]


def probe(target: Target, commit: str, subject: str, classify: Classify | None) -> Probe:
    """Run and classify one revision (``classify`` None: only measure it, for GOOD and BAD)."""
    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="torchperf-bisect-"))
    try:
        code, tail = run_revision(target, commit, folder / "results.json")
        figures = figures_of(target.mode, folder / "results.json")
    except WorktreeError as exc:  # no worktree for it, or pytest's folder missing there
        return Probe(commit, subject, "skip", str(exc), {}, time.perf_counter() - started)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    seconds = time.perf_counter() - started
    if not figures and code in (0, 1):
        what = mode_named(target.mode).what
        return Probe(
            commit,
            subject,
            "skip",
            f"the selected tests ran but measured no {what}: are they perf tests?",
            {},
            seconds,
        )
    if not figures:
        why = {
            -1: "timed out",
            2: "interrupted or a collection error",
            3: "internal error",
            4: "usage error",
            5: "no tests collected",
        }.get(code, f"exit code {code}")
        return Probe(
            commit, subject, "skip", f"the tests did not run ({why}: {_said(tail)})", {}, seconds
        )
    if classify is None:
        return Probe(commit, subject, "measured", "", figures, seconds)
    verdict, detail = classify(figures)
    return Probe(commit, subject, verdict, detail, figures, seconds)
