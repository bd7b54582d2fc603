"""``torchperf bisect GOOD BAD -k TEST``: the first commit between two revisions where the selected
perf tests got slower, found by running them at revisions chosen by bisection.

Each revision is checked out in a temporary git worktree (as an A/B run's side A is, imports
mapped into it, removed afterwards) and its selected tests run in a pytest process of this
interpreter, in one of three ways (:data:`MODES`):

* ``instructions``: instructions per call under Valgrind. Deterministic, so a +3 % pure-Python
  slowdown is found exactly. GOOD and BAD are counted first; a revision is bad where a
  measurement that changed between them has moved more than halfway from GOOD's count to BAD's.
* ``ab``: the revision against GOOD in alternating process pairs (``--torchperf-ab GOOD``);
  bad where the A/B verdict fails (the tests' own ``max_slowdown``). For GPU measurements or
  where Valgrind is missing; the verdicts are statistical, so a step has to be well over the
  limit to be found every time.
* ``counters``: the exact counters (FLOPs, op counts, parameters, peak memory); bad where they
  differ from GOOD's. Seconds per revision: for "which commit added that op".

A revision whose selected tests do not run (collection error, the test missing, an inconclusive
A/B verdict) is skipped, like ``git bisect skip``: its neighbours are tried instead, and if only
skipped commits are left between the last good and the first bad one, all of them are named.
Pytest-free; the plugin runs in the child processes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_torchperf.judge.counter_diff import diff_counters
from pytest_torchperf.run.sides import (
    SideError,
    repository_root,
    resolve_revision,
    revision_side,
    run_git,
)
from pytest_torchperf.store.results import ResultsFileError, read_results

#: How a revision is judged (see the module docstring).
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
class Bisection:
    """The outcome: the first bad commit (or the skipped commits it is among)."""

    good: Probe
    bad: Probe
    #: The bisection's probes, in the order they ran (GOOD and BAD not included).
    steps: tuple[Probe, ...]
    #: The first bad commit tested; the first bad one if no commit before it was skipped
    #: (``skipped_between`` empty), else the first bad one is among those or this one.
    first_bad: Probe
    #: The last good revision before it (GOOD itself when the first commit after it is bad).
    last_good: Probe
    #: Commits between the last good and the first bad one that could not be tested.
    skipped_between: tuple[str, ...]
    seconds: float


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


def commits_between(root: Path, good: str, bad: str) -> list[tuple[str, str]]:
    """(commit id, subject) of the commits after GOOD up to BAD, oldest first (first parents:
    a merged branch is one step)."""
    try:
        return _commits_between(root, good, bad)
    except SideError as exc:
        raise BisectError(str(exc)) from None


def _commits_between(root: Path, good: str, bad: str) -> list[tuple[str, str]]:
    ancestor = run_git(["merge-base", "--is-ancestor", good, bad], root, who="bisect")
    if ancestor.returncode != 0:
        raise BisectError(
            f"GOOD ({good[:12]}) is not an ancestor of BAD ({bad[:12]}): bisect needs BAD to "
            f"descend from GOOD. Give the older revision first (torchperf bisect GOOD BAD)"
        )
    chain = run_git(["rev-list", "--first-parent", bad], root, who="bisect").stdout.split()
    if good not in chain:
        raise BisectError(
            f"GOOD ({good[:12]}) is not on BAD's first-parent line (it was merged in from a "
            f"side branch): give a GOOD on the branch of BAD, e.g. the merge-base "
            f"(git merge-base GOOD BAD)"
        )
    listed = run_git(
        ["log", "--first-parent", "--reverse", "--format=%H %s", f"{good}..{bad}"],
        root,
        who="bisect",
    )
    commits = [
        (line.split(" ", 1)[0], line.split(" ", 1)[1] if " " in line else "")
        for line in listed.stdout.splitlines()
        if line.strip()
    ]
    if not commits:
        raise BisectError(f"no commits between GOOD ({good[:12]}) and BAD ({bad[:12]})")
    return commits


def run_revision(target: Target, commit: str, out: Path) -> tuple[int, str]:
    """Run the selected tests at ``commit``; their results file is ``out``. Returns pytest's exit
    code and the end of its output."""
    mode_args = {
        "instructions": ["--torchperf-instructions"],
        "ab": ["--torchperf-ab", target.good_commit],
        "counters": ["--torchperf-min-time=0.01s"],  # the counters are what is compared
    }[target.mode]
    with revision_side(target.invocation_dir, commit, who="bisect") as side:
        command = [
            side.python,
            *side.flags,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *mode_args,
            f"--torchperf-json={out}",
            *side.map_args(target.pytest_args),
        ]
        env = {**os.environ, **side.env}
        env.pop("PYTEST_ADDOPTS", None)
        # Its own session: on a timeout the whole tree goes (a Valgrind child, an A/B pair),
        # not only pytest, so nothing keeps burning CPU beside the next revision's run.
        with subprocess.Popen(
            command,
            cwd=side.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        ) as child:
            try:
                stdout, stderr = child.communicate(timeout=target.timeout)
            except subprocess.TimeoutExpired:
                _kill(child)
                return -1, f"pytest did not finish within {target.timeout:.0f} s"
            except BaseException:  # Ctrl-C: its own session does not get the terminal's SIGINT
                _kill(child)
                raise
    tail = (stdout + stderr).strip().splitlines()[-12:]
    return child.returncode, "\n".join(tail)


def _kill(child: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(child.pid, signal.SIGKILL)
    child.communicate()


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
            commit, subject, "skip", f"the selected tests ran but measured no {what}", {}, seconds
        )
    if not figures:
        why = {
            -1: "timed out",
            2: "interrupted or a collection error",
            3: "internal error",
            4: "usage error",
            5: "no tests collected",
        }.get(code, f"exit code {code}")
        last = tail.splitlines()[-1] if tail else ""
        return Probe(commit, subject, "skip", f"the tests did not run ({why}: {last})", {}, seconds)
    if classify is None:
        return Probe(commit, subject, "measured", "", figures, seconds)
    verdict, detail = classify(figures)
    return Probe(commit, subject, verdict, detail, figures, seconds)


def bisect(
    target: Target,
    good: str,
    bad: str,
    say: Callable[[str], None] = print,
    run: Callable[[Target, str, str, Classify | None], Probe] = probe,
) -> Bisection:
    """Find the first bad commit after GOOD up to BAD (``run``: how a revision is probed)."""
    started = time.perf_counter()
    try:
        root = repository_root(target.invocation_dir)
    except SideError:
        raise BisectError(
            f"torchperf bisect checks out revisions of a git repository, and "
            f"{target.invocation_dir} is not in one: run it from your repository's checkout"
        ) from None
    good_commit, bad_commit = (_resolve(root, rev) for rev in (good, bad))
    commits = commits_between(root, good_commit, bad_commit)
    target = Target(
        target.mode, target.pytest_args, target.invocation_dir, good_commit, target.timeout
    )
    say(
        f"torchperf bisect: {len(commits)} commits after {good} ({good_commit[:10]}) up to "
        f"{bad} ({bad_commit[:10]}), by {target.mode}; about {_expected_steps(len(commits))} "
        f"steps"
    )
    if target.mode == "ab":
        good_probe = Probe(
            good_commit, _subject(root, good_commit), "good", "side A of the A/B runs"
        )
    else:
        good_probe = run(target, good_commit, _subject(root, good_commit), None)
        if good_probe.verdict == "skip":
            raise BisectError(f"GOOD ({good_commit[:10]}): {good_probe.detail}; fix -k or GOOD")
        say(f"GOOD {good_commit[:10]}: measured in {good_probe.seconds:.0f} s")
    bad_run = run(
        target,
        bad_commit,
        _subject(root, bad_commit),
        None if target.mode != "ab" else _ab_classifier(),
    )
    if bad_run.verdict == "skip":
        raise BisectError(f"BAD ({bad_commit[:10]}): {bad_run.detail}; fix -k or BAD")
    classify = (
        _ab_classifier()
        if target.mode == "ab"
        else classifier(target.mode, good_probe.figures, bad_run.figures)
    )
    verdict, detail = classify(bad_run.figures)
    bad_probe = Probe(
        bad_commit, bad_run.subject, verdict, detail, bad_run.figures, bad_run.seconds
    )
    say(f"BAD  {bad_commit[:10]}: {detail} ({bad_probe.seconds:.0f} s)")
    if verdict != "bad":
        raise BisectError(
            f"BAD ({bad_commit[:10]}) is not slower than GOOD here ({detail}): nothing to "
            f"bisect. Check the revisions and -k"
            + (
                ", or retry on a quieter machine (A/B verdicts are statistical)"
                if target.mode == "ab"
                else ""
            )
        )
    lo, hi = -1, len(commits) - 1  # commits[lo] good (-1: GOOD), commits[hi] bad
    probes: dict[int, Probe] = {hi: bad_probe}
    steps: list[Probe] = []
    skipped: set[int] = set()
    while hi - lo > 1:
        index = _pick(lo, hi, skipped)
        if index is None:
            break
        commit, subject = commits[index]
        result = run(target, commit, subject, classify)
        steps.append(result)
        probes[index] = result
        say(
            f"step {len(steps)}: {commit[:10]} ({index + 1} of {len(commits)}) {subject[:50]!r}: "
            f"{result.verdict}: {result.detail} ({result.seconds:.0f} s)"
        )
        if result.verdict == "bad":
            hi = index
        elif result.verdict == "good":
            lo = index
        else:
            skipped.add(index)
    between = tuple(commits[i][0] for i in range(lo + 1, hi) if i in skipped)
    return Bisection(
        good_probe,
        bad_probe,
        tuple(steps),
        probes[hi],
        probes[lo] if lo >= 0 else good_probe,
        between,
        time.perf_counter() - started,
    )


def _subject(root: Path, commit: str) -> str:
    try:
        return run_git(["log", "-1", "--format=%s", commit], root, who="bisect").stdout.strip()
    except SideError:
        return ""


def _ab_classifier() -> Classify:
    return classifier("ab", {}, {})


def _resolve(root: Path, revision: str) -> str:
    try:
        return resolve_revision(root, revision, who="bisect")
    except SideError as exc:
        raise BisectError(str(exc)) from None


def _pick(lo: int, hi: int, skipped: set[int]) -> int | None:
    """The commit to try between ``lo`` and ``hi`` (exclusive): the middle, or the untried one
    nearest to it."""
    middle = (lo + hi) // 2
    for distance in range(hi - lo):
        for index in (middle - distance, middle + distance):
            if lo < index < hi and index not in skipped:
                return index
    return None


def _expected_steps(commits: int) -> int:
    steps, span = 0, commits
    while span > 1:
        span = (span + 1) // 2
        steps += 1
    return steps


def default_mode() -> str:
    """``instructions`` where Valgrind is on PATH, else ``ab``."""
    return "instructions" if shutil.which("valgrind") else "ab"
