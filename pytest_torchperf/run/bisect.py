"""``torchperf bisect GOOD BAD -k TEST``: the first commit between two revisions where the selected
perf tests got slower, found by running them at revisions chosen by bisection.

Each revision is checked out in a temporary git worktree (:mod:`pytest_torchperf.run.worktree`,
as an A/B run's side A is: imports mapped into it, removed afterwards) and its selected tests
run in a pytest process of this interpreter, in one of three ways (:data:`MODES`):

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
This module is the search; how one revision is run and classified is
:mod:`pytest_torchperf.run.revision_probe`. Pytest-free; the plugin runs in the child processes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_torchperf.run.bisect_mode import BisectError, Classify
from pytest_torchperf.run.revision_probe import (
    Probe,
    Target,
    mode_named,
    probe,
)
from pytest_torchperf.run.worktree import (
    WorktreeError,
    repository_root,
    resolve_revision,
    run_git,
)


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


def commits_between(root: Path, good: str, bad: str) -> list[tuple[str, str]]:
    """(commit id, subject) of the commits after GOOD up to BAD, oldest first (first parents:
    a merged branch is one step)."""
    ancestor = run_git(["merge-base", "--is-ancestor", good, bad], root, "bisect")
    if ancestor.returncode != 0:
        raise BisectError(
            f"GOOD ({good[:12]}) is not an ancestor of BAD ({bad[:12]}): bisect needs BAD to "
            f"descend from GOOD. Give the older revision first (torchperf bisect GOOD BAD)"
        )
    chain = run_git(["rev-list", "--first-parent", bad], root, "bisect").stdout.split()
    if good not in chain:
        raise BisectError(
            f"GOOD ({good[:12]}) is not on BAD's first-parent line (it was merged in from a "
            f"side branch): give a GOOD on the branch of BAD, e.g. the merge-base "
            f"(git merge-base GOOD BAD)"
        )
    listed = run_git(
        ["log", "--first-parent", "--reverse", "--format=%H %s", f"{good}..{bad}"],
        root,
        "bisect",
    )
    commits = [
        (line.split(" ", 1)[0], line.split(" ", 1)[1] if " " in line else "")
        for line in listed.stdout.splitlines()
        if line.strip()
    ]
    if not commits:
        raise BisectError(f"no commits between GOOD ({good[:12]}) and BAD ({bad[:12]})")
    return commits


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
        root = repository_root(target.invocation_dir, "bisect")
    except WorktreeError:
        raise BisectError(
            f"torchperf bisect checks out revisions of a git repository, and "
            f"{target.invocation_dir} is not in one: run it from your repository's checkout"
        ) from None
    try:
        good_commit, bad_commit = (resolve_revision(root, rev, "bisect") for rev in (good, bad))
        commits = commits_between(root, good_commit, bad_commit)
    except WorktreeError as exc:
        raise BisectError(str(exc)) from None
    target = replace(target, good_commit=good_commit)
    say(
        f"torchperf bisect: {len(commits)} commits after {good} ({good_commit[:10]}) up to "
        f"{bad} ({bad_commit[:10]}), by {target.mode}; about {(len(commits) - 1).bit_length()} "
        f"steps"
    )
    mode = mode_named(target.mode)
    if not mode.measures_good:  # every run measures GOOD beside the revision
        good_probe = Probe(
            good_commit, _subject(root, good_commit), "good", "side A of the A/B runs"
        )
    else:
        good_probe = run(target, good_commit, _subject(root, good_commit), None)
        if good_probe.verdict == "skip":
            raise BisectError(
                f"GOOD ({good_commit[:10]}): {good_probe.detail}; {_fix(target, 'GOOD')}"
            )
        say(f"GOOD {good_commit[:10]}: measured in {good_probe.seconds:.0f} s")
    bad_run = run(
        target,
        bad_commit,
        _subject(root, bad_commit),
        None if mode.measures_good else mode.classifier({}, {}),
    )
    if bad_run.verdict == "skip":
        raise BisectError(f"BAD ({bad_commit[:10]}): {bad_run.detail}; {_fix(target, 'BAD')}")
    classify = mode.classifier(good_probe.figures, bad_run.figures)
    verdict, detail = classify(bad_run.figures)
    bad_probe = replace(bad_run, verdict=verdict, detail=detail)
    say(f"BAD  {bad_commit[:10]}: {detail} ({bad_probe.seconds:.0f} s)")
    if verdict != "bad":
        raise BisectError(
            f"BAD ({bad_commit[:10]}) is not slower than GOOD here ({detail}): nothing to "
            f"bisect. Check the revisions and -k{mode.retry_hint}"
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
            f"step {len(steps)}: {commit[:10]} ({index + 1} of {len(commits)}) {_short_subject(subject)}: "
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


def _fix(target: Target, revision: str) -> str:
    """What to check when GOOD's or BAD's tests did not run or measured nothing."""
    args = target.pytest_args
    others = [a for i, a in enumerate(args) if a != "-k" and (i == 0 or args[i - 1] != "-k")]
    where = f", the pytest arguments ({' '.join(others)})" if others else ""
    return f"check -k (it must select perf tests){where} and that {revision} has those tests"


def _short_subject(subject: str, width: int = 50) -> str:
    """A commit's subject for a step line, in quotes, cut at a word (...)."""
    if len(subject) > width:
        subject = subject[: width - 3].rsplit(" ", 1)[0] + "..."
    return f"'{subject}'"


def _subject(root: Path, commit: str) -> str:
    try:
        return run_git(["log", "-1", "--format=%s", commit], root, "bisect").stdout.strip()
    except WorktreeError:
        return ""


def _pick(lo: int, hi: int, skipped: set[int]) -> int | None:
    """The commit to try between ``lo`` and ``hi`` (exclusive): the middle, or the untried one
    nearest to it."""
    middle = (lo + hi) // 2
    for distance in range(hi - lo):
        for index in (middle - distance, middle + distance):
            if lo < index < hi and index not in skipped:
                return index
    return None
