"""What a measurement kind gives the comparison engine: the :class:`Kind` every kind's
``judge`` part subclasses (``pytest_torchperf/kinds/<kind>/judge.py``), and :class:`KindChecks`,
what a kind's own data adds beyond its verdict. The engine
(:func:`pytest_torchperf.judge.compare.compare`) asks the kind
(:func:`pytest_torchperf.judge.kinds.kind_of`), never the run mode. Pure.

A kind decides the figure's verdict (:meth:`Kind.judge`), may add failures from its own data
(:meth:`Kind.extra_checks`: an A/B run's paired speedups, the GPU kernel time) and says how its
baseline is recorded (:attr:`Kind.save`). Everything else the engine checks (counters, output
fingerprints, metrics, failures found within the run, strict mode) is the same for every kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pytest_torchperf.judge.inputs import Candidate, Gate
from pytest_torchperf.judge.samples import Sample
from pytest_torchperf.judge.verdict import Judgement, Verdict
from pytest_torchperf.store.sessions import Session

Remeasure = Callable[[], Sample]

Confirm = Callable[[], "Sample | None"]


@dataclass
class KindChecks:
    """What a kind's own data adds beyond its verdict: failures, warnings, notes on the verdict,
    and the gates it judged (``kernels``), which the run's coverage counts."""

    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    gated: list[str] = field(default_factory=list)


class Kind:
    """One measurement kind, as the comparison engine uses it. A kind subclasses it and writes
    only what differs from its defaults: the verdict rests on the candidate's first pass
    (:meth:`verdict`), its own data adds no failure beyond its verdict, a save stores a timing,
    and any session it recorded may become a baseline."""

    #: The name recorded in the gate (:func:`pytest_torchperf.kinds.names`).
    name: str
    #: The command that records a baseline of this kind ("" when none is kept: an A/B run
    #: compares two sides measured now).
    save: str
    #: Variants' timed speedups are judged against the stored ones (else reported only, or
    #: judged by the kind's own data in :meth:`extra_checks`).
    judges_timed_speedups: bool
    #: A measurement without a stored baseline fails under ``--torchperf-strict``.
    needs_baseline: bool
    #: The figure a save of this kind stores as its baseline (``time``, ``instructions``): what
    #: the save's summary counts it under.
    stored_figure = "time"

    def judge(
        self,
        candidate: Candidate,
        sessions: Sequence[Session],
        gate: Gate,
        remeasure: Remeasure,
        confirm: Confirm | None,
    ) -> Judgement:
        """The verdict on this kind's figure, and the pass it rests on."""
        verdict = self.verdict(candidate, sessions, gate)
        return Judgement(verdict, candidate.first, [candidate.first])

    def verdict(self, candidate: Candidate, sessions: Sequence[Session], gate: Gate) -> Verdict:
        """The verdict of a kind that judges no timed pass (a count, A/B pairs): the default
        :meth:`judge` rests it on the candidate's first pass."""
        raise NotImplementedError

    def extra_checks(
        self, candidate: Candidate, sessions: Sequence[Session], gate: Gate
    ) -> KindChecks:
        """Failures, warnings and gates from the kind's own data, beyond the shared checks."""
        return KindChecks()

    def accept_problem(self, session: Session) -> str | None:
        """Why a session this kind recorded must not become a baseline (``torchperf
        accept``), or None."""
        return None

    def gates_untimed(self, session: Session) -> bool:
        """A session this kind saved without its timing (every pass refused by a guard) still
        holds a figure a compare judges instead (a count stored beside the timing)."""
        return False


#: What a plugin's kind subclasses (docs/fixtures-and-api.md): the base with its defaults.
KindDefaults = Kind
