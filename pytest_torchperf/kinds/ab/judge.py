"""How the ``ab`` kind judges: side B's paired interval against side A, both measured now
(deciding and wording: :mod:`pytest_torchperf.kinds.ab.judge_pairs`), and the variants' paired
speedups. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_torchperf.judge.failures import Failure
from pytest_torchperf.judge.inputs import Candidate, Gate
from pytest_torchperf.judge.kind_protocol import Kind, KindChecks
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.verdict import Verdict
from pytest_torchperf.kinds.ab.judge_pairs import PairResult, judge_ab, judge_ab_speedup
from pytest_torchperf.store.sessions import Session


@dataclass(frozen=True)
class PairsData:
    """The A/B data a candidate carries (its ``ab`` section): each process pair's block times
    of both sides (``PairResult.to_record()``), ``"A"``/``"B"`` when only that side has this
    measurement, and for a variant each pair's (side A, side B) median speedup vs eager."""

    pairs: Sequence[Mapping[str, Any]] = ()
    one_sided: str | None = None
    speedups: Sequence[tuple[float, float]] = ()

    @classmethod
    def of(cls, candidate: Candidate) -> PairsData:
        ab = candidate.sections.get("ab") or {}
        return cls(
            ab.get("pairs") or (),
            ab.get("one_sided"),
            [(float(a), float(b)) for a, b in ab.get("speedups") or ()],
        )


class ABKind(Kind):
    """Side B's paired interval against side A, both measured now (``gate.fact("ab")`` names
    side A)."""

    name = "ab"
    save = ""
    # Judged on the pairs (extra_checks), not against stored speedups.
    judges_timed_speedups = False
    needs_baseline = False
    # It keeps no baseline; were one stored, it would be a timing (the default stored_figure).

    def verdict(self, candidate: Candidate, sessions: Sequence[Session], gate: Gate) -> Verdict:
        data = PairsData.of(candidate)
        return ab_verdict(
            candidate.label,
            data.pairs,
            data.one_sided,
            gate.max_slowdown,
            str(gate.fact("ab")),
            b_times=candidate.first.times,  # side B's blocks: all its pairs', or its own alone
        )

    def accept_problem(self, session: Session) -> str | None:
        # Side B's blocks of an A/B run: min_time shared out over process pairs, no
        # calibration, measured beside another side; not a baseline.
        return (
            "measured in an A/B run (--torchperf-ab), which keeps no baseline; record one with "
            "pytest --torchperf-save"
        )

    def extra_checks(
        self, candidate: Candidate, sessions: Sequence[Session], gate: Gate
    ) -> KindChecks:
        speedups = PairsData.of(candidate).speedups
        if not speedups:
            return KindChecks()
        failure, warning = judge_ab_speedup(
            candidate.label, speedups, gate.max_slowdown, str(gate.fact("ab"))
        )
        return KindChecks(
            [Failure("speedup", failure)] if failure else [], [warning] if warning else []
        )


def ab_verdict(
    label: str,
    ab_pairs: Sequence[Mapping[str, Any]],
    one_sided: str | None,
    max_slowdown: float,
    against: str,
    b_times: Sequence[float] = (),
) -> Verdict:
    """The timing verdict of an A/B run: side B's paired interval (``ab_pairs``, each pair's
    block times) against side A (the sessions the engine checks counters and numerics against
    are side A's); ``b_times``, side B's block times, give its figure where no pair holds it."""
    pairs = [PairResult.from_record(p) for p in ab_pairs]
    judged = judge_ab(label, pairs, max_slowdown, against, one_sided, b_times)
    iv = judged.interval
    ratio = None if iv is None else 1.0 + iv.change
    return Verdict(
        judged.outcome,
        judged.message,
        ratio=ratio,
        first_ratio=ratio,
        baseline_statistic=judged.a_time,
        candidate_statistic=judged.b_time,
        tolerance=max_slowdown,
        effective_tolerance=max_slowdown,
        baseline_sessions=len(pairs),
        basis="ab",
        guard="pairs undecided" if judged.outcome is Outcome.INCONCLUSIVE else None,
    )


KIND = ABKind()
