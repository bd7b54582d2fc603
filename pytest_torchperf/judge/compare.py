"""The one comparison engine: a measurement against its stored sessions, every gate at once.

``pytest --torchperf-compare`` feeds it live passes (its ``remeasure`` and ``confirm`` measure
again, in this process or in fresh ones); ``torchperf compare`` feeds it the passes a results file
recorded, in the order the run took them. Same inputs, same :class:`Comparison`: outcome, figure,
label and message. Pure: no torch, no pytest, no files.

What it checks: the timing verdict (:func:`.decision.judge`), the counters against the latest
stored session that has them (:func:`.counter_diff.diff_counters`), the speedup, output
fingerprint and metric (:func:`.drift.drift_checks`), the failures found within the run (accuracy
vs eager, ``min_speedup``, compile time) and strict mode (inconclusive, or no baseline outside a
saving run, fails).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_torchperf.judge.counter_diff import changes_since_stored
from pytest_torchperf.judge.drift import drift_checks, speedup_gated
from pytest_torchperf.judge.failures import Failure, categories_of
from pytest_torchperf.judge.inputs import Candidate, Gate, Where
from pytest_torchperf.judge.kinds import kind_of
from pytest_torchperf.judge.labels import inconclusive_head, outcome_label
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.samples import Sample
from pytest_torchperf.judge.verdict import Verdict
from pytest_torchperf.store.environment import describe_difference, environment_mode
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.sessions import Session
from pytest_torchperf.variants.registry import VARIANTS, tolerances

__all__ = ["JUDGED", "Candidate", "Comparison", "Gate", "Where", "compare"]

#: Timing outcomes that judged the figure (a verdict that says neither ``new`` nor
#: ``inconclusive``).
JUDGED = (Outcome.PASS, Outcome.FAIL, Outcome.IMPROVED)


@dataclass
class Comparison:
    """The outcome of :func:`compare`."""

    verdict: Verdict
    #: The pass the verdict rests on, and every pass taken, in order.
    sample: Sample
    samples: list[Sample]
    counter_changes: list[str] = field(default_factory=list)
    #: Failures beyond the timing verdict and the counters (run, drift, strict), full sentences.
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Lines a live run adds to a failure (the profiled op diff); a replay has none.
    explanation: list[str] = field(default_factory=list)
    #: What this comparison gated: its timing verdict's basis (``time``, ``instructions``,
    #: ``ab``) when it judged one, ``counters`` and ``numerics`` when there was a stored
    #: counterpart to check against.
    gated: list[str] = field(default_factory=list)
    #: The command that records a new baseline of this measurement's kind
    #: (:attr:`~pytest_torchperf.judge.kinds.Kind.save`; empty in an A/B run, which keeps none).
    save: str = "pytest --torchperf-save"

    @property
    def outcome(self) -> str:
        """``fail`` when anything failed, else the timing verdict's outcome."""
        failed = self.verdict.failed or self.counter_changes or self.failures
        return Outcome.FAIL.value if failed else self.verdict.outcome.value

    @property
    def saveable(self) -> bool:
        """A save may store this measurement's session: nothing failed or changed, and its
        timing passed, improved or had no baseline yet."""
        return (
            not self.counter_changes
            and not self.failures
            and self.verdict.outcome in (Outcome.PASS, Outcome.IMPROVED, Outcome.NEW)
        )

    @property
    def label(self) -> str:
        """The label every report shows (``FAIL (counters)``, ``pass (re-measured)``, ...)."""
        return outcome_label(
            Record.from_json(
                {
                    "outcome": self.outcome,
                    "verdict": self.verdict.to_dict(),
                    "counter_changes": self.counter_changes,
                    "failures": self.failures,
                    "failure_kinds": categories_of(self.failures),
                }
            )
        )

    def pytest_warnings(self, name: str) -> list[str]:
        """The warnings pytest shows at the test: what the torchperf summary says in full (an
        inconclusive verdict's reason, a kind's undecided figure among the verdict's notes)
        only as a short line pointing there; a strict failure says it under FAILURES."""
        verdict = self.verdict
        said = []
        if verdict.outcome is Outcome.INCONCLUSIVE and "strict" not in categories_of(self.failures):
            said.append(
                f"{inconclusive_head(name, verdict.guard, verdict.ratio)}, which on its own does "
                f"not fail the test: the torchperf summary says why and what to do"
            )
        for warning in self.warnings:
            label, _, text = warning.partition(": ")
            if text in verdict.notes:  # an undecided GPU kernel time, say
                head = re.split(r" \(|: ", text, maxsplit=1)[0]
                warning = (
                    f"{label}: {head}, which on its own does not fail the test: the torchperf "
                    f"summary says why"
                )
            said.append(warning)
        return said


def compare(
    candidate: Candidate,
    sessions: Sequence[Session],
    gate: Gate,
    *,
    remeasure: Callable[[], Sample],
    confirm: Callable[[], Sample | None] | None = None,
    confirm_speedups: Callable[[], list[dict[str, float] | None]] | None = None,
    where: Where | None = None,
) -> Comparison:
    """Judge ``candidate`` against the stored ``sessions`` of its environment under ``gate``."""
    where = where if where is not None else Where()
    label = candidate.label
    kind = kind_of(gate)  # the one place the measurement kind is chosen
    judgement = kind.judge(candidate, sessions, gate, remeasure, confirm)
    verdict = judgement.verdict
    # Only environments of the same kind explain a missing baseline: a timing history cannot
    # stand in for instruction counts, nor counts for times.
    mode = environment_mode(where.environment_id)
    others = (
        [
            (env_id, env)
            for env_id, env in where.others()
            if env_id != where.environment_id and environment_mode(env_id) == mode
        ]
        if verdict.outcome is Outcome.NEW
        else []
    )
    save = kind.save
    # A test renamed or deleted since its baseline was saved: its measurement's name is stored
    # under a test id that is gone (said, not "no baseline yet": the old gate was lost).
    unsaved = verdict.outcome is Outcome.NEW and not (others or verdict.untimed or gate.saving)
    gone = where.gone() if unsaved and kind.needs_baseline else ()
    # A remedy that saves this test alone, where it is known: a suite's save takes minutes.
    this_test = save_this_test(where.nodeid, save) if where.nodeid else save
    if others:
        verdict = explain_new(verdict, label, where, others, save)
    elif (
        verdict.outcome is Outcome.NEW
        and where.storage_missing
        and not gate.saving
        and kind.needs_baseline  # an A/B run reads no storage folder
    ):
        # A typo in --torchperf-storage or a forgotten `git add`: said, not "no baseline yet".
        verdict = replace(
            verdict,
            message=(
                f"{label}: no baseline: the storage folder {where.storage} does not exist. Is "
                f"--torchperf-storage misspelt, or were the baselines never committed? Point "
                f"--torchperf-storage at the folder that holds them, or record them with {save} "
                f"and commit the folder"
            ),
        )
    elif gone:
        olds = [test.split("::", 1)[-1] for test in gone]
        # The whole id: a name after the file may be the same in other files (test_forward).
        forget = forget_command(shlex.quote(gone[0]) if len(gone) == 1 else "TEST", where.storage)
        verdict = replace(
            verdict,
            message=f"{label}: no baseline for this test; the baseline file holds {label} under "
            f"{', '.join(olds)}, which no longer exist{'s' if len(gone) == 1 else ''} here "
            f"(renamed?): {this_test} starts this one's baseline, and {forget} drops the old "
            f"one{'s' if len(gone) > 1 else ''}",
        )
    changes = changes_since_stored(
        [s.counters for s in sessions], candidate.counters, gate.ignore_counters
    )
    limits = candidate.accuracy_limits or tolerances(candidate.variant)
    drift_failures, warnings = drift_checks(
        label,
        sessions,
        speedup=candidate.speedup if kind.judges_timed_speedups else None,
        fingerprint=candidate.fingerprint,
        metric=candidate.metric,
        limits=limits,
        max_slowdown=gate.max_slowdown,
        confirm_speedups=confirm_speedups,
        save=this_test,
        max_widening=gate.max_widening,
        variant=candidate.variant,
    )
    checks = kind.extra_checks(candidate, sessions, gate)
    failures = [*candidate.run_failures, *drift_failures, *checks.failures]
    warnings += checks.warnings
    if checks.notes:
        verdict = replace(verdict, notes=(*verdict.notes, *checks.notes))
    gated = [
        *([verdict.basis] if verdict.outcome in JUDGED else []),
        *checks.gated,
        *candidate.gates_besides_time(sessions, gate.ignore_counters),
        *(
            ["speedup"]
            if kind.judges_timed_speedups
            and speedup_gated(sessions, candidate.speedup, gate.max_slowdown, gate.max_widening)
            else []
        ),
    ]
    strict = f"failing: {gate.strict_by}"  # appended to what fails only because of it
    # In CI a typo in --torchperf-storage or a forgotten `git add` would otherwise pass with every
    # test "new". A run that saves is creating the baseline.
    unbased = verdict.outcome is Outcome.NEW and not gate.saving and kind.needs_baseline
    if gate.strict and unbased and not (verdict.untimed or where.storage_missing or others or gone):
        # Where it looked, in the verdict its failure says once.
        verdict = replace(
            verdict,
            message=f"{label}: no baseline in "
            + (where.baseline_file or f"the storage (environment {where.environment_id or '?'})")
            + f": record one with {save} and commit it (git add "
            f"{where.storage or '.torchperf'}), or point --torchperf-storage at the folder that "
            f"holds it",
        )
    if gate.strict and (verdict.outcome is Outcome.INCONCLUSIVE or verdict.untimed or unbased):
        failures.append(Failure("strict", f"{verdict.message} ({strict})"))
    return Comparison(
        verdict,
        judgement.sample,
        judgement.samples,
        changes,
        failures,
        warnings,
        gated=gated,
        save=save,
    )


def save_this_test(nodeid: str, save: str = "pytest --torchperf-save", reset: bool = False) -> str:
    """The save (``save``: the kind's command) of test ``nodeid`` alone, with ``reset``
    replacing its stored sessions (a bare --torchperf-reset would replace every saved test's):
    a whole suite's save takes minutes and appends to every other test. A variant item's whole
    test: its other variants were saved beside it, and a variant's own counters (a compiled
    one's graphs) may not have changed. ``save`` itself where there is none (an A/B run)."""
    test, bracket, param = nodeid.partition("[")
    if not (bracket and param.rstrip("]") in VARIANTS):
        test = nodeid
    if not save:
        return save
    flags = save.removeprefix("pytest ") + (" --torchperf-reset" if reset else "")
    return f"pytest {shlex.quote(test)} {flags}" if test else f"pytest {flags}"


def forget_command(test: str, storage: str, name: str = "") -> str:
    """The ``torchperf forget`` command line (``test`` and ``name`` quoted already) that drops
    the stored sessions of a test, or of one measurement ``name`` of it."""
    folder = "" if storage in ("", ".torchperf") else f" --storage {shlex.quote(storage)}"
    return f"torchperf forget {test}{' ' + name if name else ''}{folder}"


def renamed_message(
    label: str, nodeid: str, olds: Sequence[str], storage: str, save: str, scoped: bool = True
) -> str:
    """Why measurement ``label`` of test ``nodeid`` has no baseline where the test's baseline
    file holds measurements ``olds`` that the test no longer takes: most likely renamed (a new
    ``name=``, or a target whose default name changed). Said once the test has ended: only then
    is it known that the test took none of them. ``scoped``: the save named is the test's own
    (not where pytest ran outside its rootdir: the id would not select it there)."""
    forget = forget_command(shlex.quote(nodeid), storage, " ".join(map(shlex.quote, olds)))
    return (
        f"{label}: no baseline for this measurement; this test's baseline holds "
        f"{', '.join(olds)}, which the test no longer measures (renamed?): "
        f"{save_this_test(nodeid if scoped else '', save)} starts {label}'s baseline, and "
        f"{forget} drops the old one{'s' if len(olds) > 1 else ''}"
    )


def explain_new(
    verdict: Verdict,
    label: str,
    where: Where,
    others: Sequence[tuple[str, Mapping[str, Any]]],
    save: str = "pytest --torchperf-save",
) -> Verdict:
    """Say which fingerprint field differs when baselines exist only for other environments."""
    env_id, stored = others[0]
    exact = stored.get("exact")
    folder = f"{where.storage}/{env_id}" if where.storage else env_id
    if not isinstance(exact, Mapping):
        return replace(
            verdict,
            message=(
                f"{label}: no baseline for this environment; baselines exist under {folder} but its "
                f"environment.json is unreadable or not a fingerprint, so the difference cannot be "
                f"named. Restore it from git or delete that folder."
            ),
        )
    reason = f"{describe_difference(where.exact, exact)} (stored under {folder})"
    return no_comparable_baseline(verdict, label, reason, save)


def no_comparable_baseline(verdict: Verdict, label: str, reason: str, save: str) -> Verdict:
    """``verdict`` (new) saying why only other environments' baselines hold it (``reason``),
    which the terminal groups measurements by."""
    return replace(
        verdict,
        new_reason=reason,
        message=(
            f"{label}: no comparable baseline: {reason}; record one for this environment with "
            f"{save}"
        ),
    )
