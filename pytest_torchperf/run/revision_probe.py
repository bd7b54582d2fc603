"""One revision of ``torchperf bisect``: its selected perf tests run in a temporary worktree, the
figures read from their results file, and the revision classified good, bad or skip against
GOOD's and BAD's figures (see :mod:`pytest_torchperf.run.bisect` for the search and the modes).
Pytest-free; the plugin runs in the child process.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_torchperf.judge.counter_diff import diff_counters
from pytest_torchperf.kinds.ab.run_sides import SideError, revision_side
from pytest_torchperf.run.child_process import ChildCommand
from pytest_torchperf.store.results import ResultsFileError, read_results

#: How a revision is judged (see :mod:`pytest_torchperf.run.bisect`).
MODES = ("instructions", "ab", "counters")

#: A measurement: test id and measurement name.
Key = tuple[str, str]


class BisectError(Exception):
    """The bisection cannot start or go on; the message says why and what to do."""


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
    mode_args = {
        "instructions": ["--torchperf-instructions"],
        "ab": ["--torchperf-ab", target.good_commit],
        "counters": ["--torchperf-min-time=0.01s"],  # the counters are what is compared
    }[target.mode]
    with revision_side(target.invocation_dir, commit, who="bisect") as side:
        command = ChildCommand(
            tuple(side.map_args(target.pytest_args)),
            side.cwd,
            python=(side.python, *side.flags),
            leading=("-p", "no:cacheprovider", *mode_args, f"--torchperf-json={out}"),
            env=side.env,
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
    found: dict[Key, Any] = {}
    for record in records:
        key = (str(record["nodeid"]), str(record["name"]))
        if mode == "instructions":
            counted = (record.get("instructions") or {}).get("per_call")
            if counted:
                found[key] = float(counted)
        elif mode == "ab":
            if (record.get("ab") or {}) and record.get("outcome"):
                ratio = (record.get("verdict") or {}).get("ratio")
                change = f" ({(ratio - 1) * 100:+.1f}% vs GOOD)" if ratio else ""
                found[key] = (str(record["outcome"]), change)
        elif record.get("counters"):
            found[key] = record["counters"]
    return found


Classify = Callable[[Mapping[Key, Any]], tuple[str, str]]


def classifier(mode: str, good: Mapping[Key, Any], bad: Mapping[Key, Any]) -> Classify:
    """How a revision's figures are judged, given GOOD's and BAD's."""
    if mode == "ab":

        def ab(figures: Mapping[Key, Any]) -> tuple[str, str]:
            said = ", ".join(
                f"{k[1]}: {outcome}{change}" for k, (outcome, change) in figures.items()
            )
            outcomes = {outcome for outcome, _ in figures.values()}
            if "fail" in outcomes:
                return "bad", said
            if "inconclusive" in outcomes:
                return "skip", f"{said}: the A/B verdict could not decide (a busy machine?)"
            return "good", said

        return ab
    if mode == "counters":
        changed = [k for k in good if k in bad and diff_counters(good[k], bad[k], ())]
        if not changed:
            raise BisectError(
                "BAD's counters (FLOPs, ops, parameters, memory) are the same as GOOD's for "
                "every selected measurement: nothing to bisect by counters. Use --mode "
                "instructions or --mode ab for a slowdown the counters do not see"
            )

        def counters(figures: Mapping[Key, Any]) -> tuple[str, str]:
            for key in changed:
                if key in figures:
                    diff = diff_counters(good[key], figures[key], ())
                    if diff:
                        return "bad", f"{key[1]}: {'; '.join(diff)} vs GOOD"
            return "good", "counters as GOOD's"

        return counters
    # instructions: halfway from GOOD's count to BAD's decides, for the measurements that BAD
    # made slower (one that got faster is not what is looked for: its commit would pass for
    # the first bad one).
    moved = {k: (good[k], bad[k]) for k in good if k in bad and bad[k] >= good[k] * 1.002}
    if not moved:
        raise BisectError(
            "BAD does not count 0.2 % or more instructions per call than GOOD for any selected "
            "measurement: nothing to bisect. Check -k and the order of the revisions, or "
            "bisect a timing change with --mode ab"
        )

    def instructions(figures: Mapping[Key, Any]) -> tuple[str, str]:
        details, verdict = [], "good"
        for key, (g, b) in moved.items():
            if key not in figures:
                continue
            x = figures[key]
            details.append(f"{key[1]}: {x:,.0f} instr/call, {(x / g - 1) * 100:+.2f}% vs GOOD")
            if (x - g) / (b - g) > 0.5:
                verdict = "bad"
        if not details:
            return "skip", "no instruction count of the measurements that changed"
        return verdict, "; ".join(details)

    return instructions


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
    except SideError as exc:  # no worktree for it, or pytest's folder missing there
        return Probe(commit, subject, "skip", str(exc), {}, time.perf_counter() - started)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    seconds = time.perf_counter() - started
    if not figures and code in (0, 1):
        what = {
            "instructions": "an instruction count (a GPU measurement? those need --mode ab)",
            "ab": "an A/B verdict",
            "counters": "counters",
        }[target.mode]
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
