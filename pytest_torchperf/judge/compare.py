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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_torchperf.judge.ab import judge_ab_speedup
from pytest_torchperf.judge.counter_diff import diff_counters
from pytest_torchperf.judge.decision import Outcome
from pytest_torchperf.judge.drift import drift_checks
from pytest_torchperf.judge.instructions import (
    DEFAULT_MAX_INCREASE,
)
from pytest_torchperf.judge.kind_verdicts import ab_verdict, instruction_verdict, untimed_verdict
from pytest_torchperf.judge.labels import outcome_label
from pytest_torchperf.judge.samples import (
    MAX_MACHINE_SLOWDOWN,
    MAX_NEIGHBOUR_LOAD,
    MAX_RELATIVE_IQR,
    MIN_CPU_SHARE,
    Sample,
)
from pytest_torchperf.judge.verdict import Judgement, Verdict, judge
from pytest_torchperf.store.environment import describe_difference, environment_mode
from pytest_torchperf.store.records import timed_sessions
from pytest_torchperf.variants.registry import tolerances

#: Timing outcomes that judged the figure (a verdict that says neither ``new`` nor
#: ``inconclusive``).
JUDGED = (Outcome.PASS, Outcome.FAIL, Outcome.IMPROVED)

#: What ``--torchperf-strict`` appends to a verdict that fails only because of it.
STRICT = "failing: --torchperf-strict"


@dataclass(frozen=True)
class Gate:
    """The options a measurement is judged under; stored with each session as ``gate`` so that
    ``torchperf compare`` judges a results file exactly as the run did."""

    max_slowdown: float = 0.10
    min_cpu_share: float = MIN_CPU_SHARE
    max_spread: float = MAX_RELATIVE_IQR
    max_neighbour_load: float = MAX_NEIGHBOUR_LOAD
    max_machine_slowdown: float = MAX_MACHINE_SLOWDOWN
    strict: bool = False
    ignore_counters: tuple[str, ...] = ()
    #: Where confirming passes were taken: ``fresh`` processes or the ``same`` one.
    confirm: str = "same"
    #: The run also saved (strict does not fail a measurement that has no baseline yet then).
    saving: bool = False
    #: An instruction-count run (``--torchperf-instructions``): instructions per call gate, time
    #: and the timed speedups of variants are reported only.
    instructions: bool = False
    #: Instruction-count runs: the largest growth of instructions per call that passes.
    max_instruction_increase: float = DEFAULT_MAX_INCREASE
    #: An A/B run (``--torchperf-ab``/``--torchperf-ab-python``): what side A is (``origin/main
    #: (abc1234)``); the paired interval against ``max_slowdown`` is the timing verdict and the
    #: sessions are side A's. Empty in every other run.
    ab: str = ""

    def to_record(self) -> dict[str, Any]:
        return {
            "max_slowdown": self.max_slowdown,
            "min_cpu_share": self.min_cpu_share,
            "max_spread": self.max_spread,
            "max_neighbour_load": self.max_neighbour_load,
            "max_machine_slowdown": self.max_machine_slowdown,
            "strict": self.strict,
            "ignore_counters": list(self.ignore_counters),
            "confirm": self.confirm,
            "saving": self.saving,
            "instructions": self.instructions,
            "max_instruction_increase": self.max_instruction_increase,
            "ab": self.ab,
        }

    @classmethod
    def from_record(cls, gate: Mapping[str, Any], **overrides: Any) -> "Gate":
        """The gate a session recorded (keys missing from older files: their behaviour then)."""
        values = {
            "max_slowdown": gate.get("max_slowdown", 0.10),
            "min_cpu_share": gate.get("min_cpu_share", MIN_CPU_SHARE),
            "max_spread": gate.get("max_spread", MAX_RELATIVE_IQR),
            # Older files measured no neighbours and had no machine guard.
            "max_neighbour_load": gate.get("max_neighbour_load", 1.0),
            "max_machine_slowdown": gate.get("max_machine_slowdown", 1000.0),
            "strict": bool(gate.get("strict", False)),
            "ignore_counters": tuple(gate.get("ignore_counters") or ()),
            "confirm": gate.get("confirm", "same"),
            "saving": bool(gate.get("saving", False)),
            "instructions": bool(gate.get("instructions", False)),
            "max_instruction_increase": gate.get("max_instruction_increase", DEFAULT_MAX_INCREASE),
            "ab": str(gate.get("ab") or ""),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


@dataclass(frozen=True)
class Candidate:
    """What one measurement brings to the comparison besides its timing passes."""

    label: str
    first: Sample
    counters: Mapping[str, Any] | None = None
    variant: str = "eager"
    speedup: Mapping[str, float] | None = None
    fingerprint: Mapping[str, Any] | None = None
    metric: float | None = None
    #: Accuracy limits the variant ran under (None: the variant's defaults).
    accuracy_limits: Mapping[str, float] | None = None
    #: Failures found within the run: accuracy vs eager, min_speedup, compile time.
    run_failures: Sequence[str] = ()
    #: Name of the calibration kernel timed alongside (only sessions of the same kernel compare).
    calibration_kernel: str | None = None
    #: Instruction-count runs: this measurement's count (``InstructionCount.to_record()``), or
    #: None with ``uncounted`` saying why there is none.
    instructions: Mapping[str, Any] | None = None
    uncounted: str | None = None
    #: A/B runs: each process pair's block times of both sides (``PairResult.to_record()``), and
    #: ``"A"``/``"B"`` when only that side has this measurement.
    ab_pairs: Sequence[Mapping[str, Any]] = ()
    one_sided: str | None = None
    #: A/B runs, variants: each pair's (side A, side B) median speedup vs eager.
    ab_speedups: Sequence[tuple[float, float]] = ()


@dataclass(frozen=True)
class Where:
    """Where the baseline was looked for, to word "no baseline" precisely."""

    #: The environment this measurement was taken in: its id and exact fingerprint.
    environment_id: str = ""
    exact: Mapping[str, Any] = field(default_factory=dict)
    #: The file that would hold its sessions, and the storage folder.
    baseline_file: str = ""
    storage: str = ""
    #: The storage folder does not exist at all (the likeliest typo in --torchperf-storage).
    storage_missing: bool = False
    #: Finds the other stored environments that hold this measurement, ``(env_id, fingerprint)``
    #: (called only when there is no baseline here: it reads every environment's file).
    others: Callable[[], Sequence[tuple[str, Mapping[str, Any]]]] = lambda: ()


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

    @property
    def outcome(self) -> str:
        """``fail`` when anything failed, else the timing verdict's outcome."""
        failed = self.verdict.failed or self.counter_changes or self.failures
        return Outcome.FAIL.value if failed else self.verdict.outcome.value

    @property
    def label(self) -> str:
        """The label every report shows (``FAIL (counters)``, ``pass (re-measured)``, ...)."""
        return outcome_label(
            {
                "outcome": self.outcome,
                "verdict": self.verdict.to_dict(),
                "counter_changes": self.counter_changes,
                "failures": self.failures,
            }
        )


def compare(
    candidate: Candidate,
    sessions: Sequence[Mapping[str, Any]],
    gate: Gate,
    *,
    remeasure: Callable[[], Sample],
    confirm: Callable[[], Sample | None] | None = None,
    confirm_speedups: Callable[[], list[dict[str, float] | None]] | None = None,
    where: Where = Where(),
) -> Comparison:
    """Judge ``candidate`` against the stored ``sessions`` of its environment under ``gate``."""
    label = candidate.label
    if gate.instructions:
        verdict = instruction_verdict(
            label,
            candidate.instructions,
            candidate.uncounted,
            sessions,
            gate.max_instruction_increase,
        )
        judgement = Judgement(verdict, candidate.first, [candidate.first])
    elif gate.ab:
        verdict = ab_verdict(
            label, candidate.ab_pairs, candidate.one_sided, gate.max_slowdown, gate.ab
        )
        judgement = Judgement(verdict, candidate.first, [candidate.first])
    else:
        timed = timed_sessions(sessions)
        judgement = judge(
            label,
            candidate.first,
            [s["statistic"] for s in timed],
            gate.max_slowdown,
            remeasure,
            min_cpu_share=gate.min_cpu_share,
            max_relative_iqr=gate.max_spread,
            max_neighbour_load=gate.max_neighbour_load,
            max_machine_slowdown=gate.max_machine_slowdown,
            confirm=confirm,
            baseline_calibrated=[
                (s["statistic"], s["calibration"])
                for s in timed
                if s.get("calibration")
                and candidate.calibration_kernel
                and s.get("calibration_kernel") == candidate.calibration_kernel
            ],
        )
    verdict = judgement.verdict
    if verdict.outcome is Outcome.NEW and sessions and not gate.instructions and not gate.ab:
        verdict = untimed_verdict(verdict, label, sessions)
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
    save = save_command(gate)
    if others:
        verdict = explain_new(verdict, label, where, others, save)
    stored_counters = next((s["counters"] for s in reversed(sessions) if s.get("counters")), None)
    changes = (
        diff_counters(stored_counters, candidate.counters, gate.ignore_counters)
        if candidate.counters is not None and stored_counters is not None
        else []
    )
    limits = candidate.accuracy_limits or tolerances(candidate.variant)
    drift_failures, warnings = drift_checks(
        label,
        sessions,
        # Timed speedups are reported only in an instruction-count run, like time itself; an
        # A/B run judges them on its pairs (below).
        speedup=None if gate.instructions or gate.ab else candidate.speedup,
        fingerprint=candidate.fingerprint,
        metric=candidate.metric,
        limits=limits,
        max_slowdown=gate.max_slowdown,
        confirm_speedups=confirm_speedups,
        save=save,
    )
    failures = [*candidate.run_failures, *drift_failures]
    if gate.ab and candidate.ab_speedups:
        failure, warning = judge_ab_speedup(
            label, candidate.ab_speedups, gate.max_slowdown, gate.ab
        )
        failures += [failure] if failure else []
        warnings += [warning] if warning else []
    stored_fingerprint = any(s.get("fingerprint") for s in sessions)
    stored_metric = any(s.get("metric") is not None for s in sessions)
    gated = [
        *([verdict.basis] if verdict.outcome in JUDGED else []),
        *(["counters"] if changes or (candidate.counters is not None and stored_counters) else []),
        *(
            ["numerics"]
            if (candidate.fingerprint is not None and stored_fingerprint)
            or (candidate.metric is not None and stored_metric)
            or candidate.variant != "eager"  # checked against eager fp32 within the run
            else []
        ),
    ]
    if gate.strict and (verdict.outcome is Outcome.INCONCLUSIVE or verdict.untimed):
        failures.append(f"{verdict.message} ({STRICT})")
    elif gate.strict and verdict.outcome is Outcome.NEW and not gate.saving and not gate.ab:
        # In CI a typo in --torchperf-storage or a forgotten `git add` would otherwise pass with
        # every test "new". A run that saves is creating the baseline.
        elsewhere = (
            f"; baselines of it exist only for {', '.join(e for e, _ in others)}" if others else ""
        )
        if where.storage_missing:
            failures.append(
                f"{label}: no baseline: the storage folder {where.storage} does not exist, "
                f"{STRICT}. Is --torchperf-storage misspelt, or were the baselines never "
                f"committed? Point --torchperf-storage at the folder that holds them, or record "
                f"them with {save} and commit the folder"
            )
        else:
            failures.append(
                f"{label}: no baseline for this measurement in "
                f"{where.baseline_file or 'the storage'} (environment "
                f"{where.environment_id or '?'}{elsewhere}), {STRICT}. Record one with {save} "
                f"and commit it (git add {where.storage or '.torchperf'}), or point "
                f"--torchperf-storage at the folder that holds it"
            )
    elif verdict.outcome is Outcome.INCONCLUSIVE:
        warnings.insert(0, verdict.message)
    return Comparison(
        verdict, judgement.sample, judgement.samples, changes, failures, warnings, gated=gated
    )


def save_command(gate: Gate) -> str:
    """The command that records a baseline of the kind this gate compares (none in an A/B
    run: it compares two sides measured now)."""
    if gate.ab:
        return ""
    if gate.instructions:
        return "pytest --torchperf-instructions --torchperf-save"
    return "pytest --torchperf-save"


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
    return replace(
        verdict,
        new_reason=reason,
        message=(
            f"{label}: no comparable baseline: {reason}; record one for this environment with "
            f"{save}"
        ),
    )
