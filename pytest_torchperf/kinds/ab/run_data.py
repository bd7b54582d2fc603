"""A/B runs, the controller's logic: whose turn it is, and what the two sides measured (from the
line a side writes of each measurement: :func:`.run.side_line`). Pytest-free, no torch, no
processes (:mod:`pytest_torchperf.kinds.ab.run_pairs` starts them;
:mod:`pytest_torchperf.kinds.ab.run` concludes variants from them).

:class:`TurnScheduler` decides, each time a side gives the token back (before a timed block, or
by exiting), which side runs next: the two sides alternate block by block on the measurement both
wait at; a side that is ahead waits for the other; a test only one side has runs alone; a side
that exited leaves the other to run alone. It never lets both run.

:func:`read_side` / :meth:`ABData.add_pair` turn the sides' files into the
:class:`~pytest_torchperf.kinds.ab.judge_pairs.PairResult` of each measurement and pair, and
:class:`ABData` holds them for the controller's own test loop, which judges each measurement
through the comparison engine (B against A's session records).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pytest_torchperf.core.child_protocol import SideResultLine, SkippedLine
from pytest_torchperf.core.types import JSONObject
from pytest_torchperf.judge.failures import restore
from pytest_torchperf.kinds.ab.judge_pairs import (
    DEFAULT_AB_LIMIT,
    PairResult,
    beyond_limit,
    undecided,
)
from pytest_torchperf.run.state import MeasurementSkipped
from pytest_torchperf.store.sessions import Session

_V = TypeVar("_V")

if TYPE_CHECKING:
    from pytest_torchperf.kinds.ab.measure_turns import TurnClient
    from pytest_torchperf.kinds.ab.run_sides import Side
    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.run.result import Result
    from pytest_torchperf.run.state import Measured

#: Key of one measurement: (nodeid, measurement name).
Key = tuple[str, str]
#: Where a side waits before its first turn (after collecting its tests).
START: Key = ("", "")
SIDES = ("A", "B")


@dataclass
class ABState:
    """An A/B run's state in a process (``ctx.state(ABState)``): in a side's child, its end of
    the turn protocol; in the controller, what the two sides measured."""

    turns: TurnClient | None = None
    data: ABData | None = None


class TurnScheduler:
    """Whose turn it is (see the module docstring). Pure: fed events, answers a side."""

    def __init__(self) -> None:
        self.waiting: dict[str, Key | None] = dict.fromkeys(SIDES, None)
        self.visited: dict[str, set[Key]] = {s: {START} for s in SIDES}
        self.blocks: dict[str, Counter[Key]] = {s: Counter() for s in SIDES}
        self.tests: dict[str, set[str] | None] = dict.fromkeys(SIDES, None)
        self.done: set[str] = set()

    @staticmethod
    def other(side: str) -> str:
        return "B" if side == "A" else "A"

    def arrive(self, side: str, key: Key) -> str:
        """``side`` waits at ``key`` (START, or before a timed block). Returns the side to run."""
        self.arrive_quietly(side, key)
        return self._choose(side)

    def exit(self, side: str) -> str | None:
        """``side`` exited; the side to run next (None when both are done)."""
        self.done.add(side)
        self.waiting[side] = None
        other = self.other(side)
        return None if other in self.done else self._run(other)

    def begin(self, first: str) -> str | None:
        """Both sides that did not exit wait at START; ``first`` (or the other) runs first."""
        alive = [s for s in SIDES if s not in self.done]
        for side in alive:
            self.arrive_quietly(side, START)
        if not alive:
            return None
        return self._run(first if first in alive else alive[0])

    def arrive_quietly(self, side: str, key: Key) -> None:
        self.waiting[side] = key
        self.visited[side].add(key)

    def _choose(self, side: str) -> str:
        other = self.other(side)
        here, there = self.waiting[side], self.waiting[other]
        if other in self.done or there is None or here is None:
            return self._run(side)
        if there == here:
            # Alternate: whoever has run fewer blocks here goes (the other one on a tie, since
            # ``side`` ran last).
            return self._run(other if self.blocks[other][here] <= self.blocks[side][here] else side)
        if there in self.visited[side]:
            return self._run(other)  # ``side`` is past the other's measurement: let it catch up
        known = self.tests[side]
        if known is not None and there[0] not in known:
            return self._run(other)  # a test only the other side has: it runs alone
        return self._run(side)  # a test only this side has, or this side is behind

    def _run(self, side: str) -> str:
        key = self.waiting[side]
        if key is not None and key != START:
            self.blocks[side][key] += 1
        self.waiting[side] = None
        return side


@dataclass
class SideLine:
    """One measurement one side took in one pair: its block times and session record."""

    times: tuple[float, ...]
    session: Session
    #: The measurement's max_slowdown on that side (the A/B limit).
    limit: float | None = None
    #: Why the side did not measure it although its test ran (a variant that cannot exist
    #: there, e.g. amp of a model with no autocast-eligible op); ``times`` is then empty.
    skipped: str | None = None


def read_side(path: Path) -> dict[Key, SideLine]:
    """The measurements one side's child wrote (a torn or foreign line is skipped)."""
    from pytest_torchperf.core.child_protocol import read_messages

    found: dict[Key, SideLine] = {}
    # Side A may run an older revision of this plugin, whose lines have no message type.
    for line in read_messages(path, (SideResultLine, SkippedLine), untyped=SideResultLine.TYPE):
        if isinstance(line, SkippedLine):
            found[(line.nodeid, line.name)] = SideLine((), Session(), skipped=line.reason)
        elif isinstance(line, SideResultLine):
            found[(line.nodeid, line.name)] = SideLine(
                line.times, Session.from_json(line.session), line.limit
            )
    return found


@dataclass
class Paired:
    """Everything the A/B run learnt of one measurement over its pairs."""

    pairs: list[PairResult] = field(default_factory=list)
    a_sessions: list[Session] = field(default_factory=list)
    b_sessions: list[Session] = field(default_factory=list)
    #: Its max_slowdown (side B's, else side A's).
    limit: float | None = None
    #: Pairs in which side A ran the test but did not measure this (the test failed, errored or
    #: was skipped there).
    missing_in_a: int = 0
    #: Variants: each pair's (side A, side B) median speedup vs eager.
    speedups: list[tuple[float, float]] = field(default_factory=list)
    #: Side -> why that side's test ran but skipped this measurement (see SideLine.skipped).
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def one_sided(self) -> str | None:
        """``"B"`` when only B has it (new in B), ``"A"`` when only A has it (removed in B),
        ``"A-failed"`` when A ran its test but never measured it (never "new": a test that
        breaks on the base branch must not pass unnoticed)."""
        if self.b_sessions and not self.a_sessions:
            return "A-failed" if self.missing_in_a else "B"
        if self.a_sessions and not self.b_sessions:
            return "A"
        return None


@dataclass
class ABData:
    """The A/B run's measurements by key, what side A is, and how many pairs ran."""

    against: str
    measured: dict[Key, Paired] = field(default_factory=dict)
    pairs_run: int = 0
    #: How each side's processes started (:class:`pytest_torchperf.kinds.ab.run_sides.Side`), by name.
    sides: dict[str, Side] = field(default_factory=dict)

    def add_pair(
        self,
        a: Mapping[Key, SideLine],
        b: Mapping[Key, SideLine],
        tests: Mapping[str, set[str] | None] | None = None,
    ) -> None:
        """File one pair's measurements (a key only one side has is kept as one-sided;
        ``tests``, the tests each side said it would run, tells "new in B" from "failed in
        A")."""
        self.pairs_run += 1
        a_tests = (tests or {}).get("A") or set()
        for key in {*a, *b}:
            entry = self.measured.setdefault(key, Paired())
            left, right = a.get(key), b.get(key)
            # A side that skipped it on purpose did not fail it: filed apart, not as missing.
            for side, line in (("A", left), ("B", right)):
                if line is not None and line.skipped is not None:
                    entry.skipped[side] = line.skipped
            left = None if left is None or left.skipped is not None else left
            right = None if right is None or right.skipped is not None else right
            if left is None and key[0] in a_tests and "A" not in entry.skipped:
                entry.missing_in_a += 1
            if left is not None:
                entry.a_sessions.append(left.session)
                entry.limit = left.limit if entry.limit is None else entry.limit
            if right is not None:
                entry.b_sessions.append(right.session)
                entry.limit = right.limit if right.limit is not None else entry.limit
            if left is not None and right is not None:
                entry.pairs.append(PairResult(left.times, right.times))
                a_speedup, b_speedup = left.session.speedup, right.session.speedup
                if a_speedup and b_speedup:
                    entry.speedups.append((a_speedup["median"], b_speedup["median"]))

    def undecided(self, most: int | None = None) -> list[Key]:
        """Measurements both sides have whose interval still straddles their limit and that
        ``most`` pairs could decide (:func:`pytest_torchperf.kinds.ab.judge_pairs.undecided`)."""
        return [
            key
            for key, entry in self.measured.items()
            if entry.one_sided is None
            and not entry.skipped  # a side skips it on purpose: no pair can decide it
            and undecided(
                entry.pairs, DEFAULT_AB_LIMIT if entry.limit is None else entry.limit, most
            )
        ]

    def confirming(self, keys: list[Key]) -> list[Key]:
        """Of ``keys``, those whose interval already lies beyond their limit: more pairs only
        confirm them."""
        found = []
        for key in keys:
            entry = self.measured[key]
            if beyond_limit(entry.pairs, DEFAULT_AB_LIMIT if entry.limit is None else entry.limit):
                found.append(key)
        return found


# -- the controller: a measurement's Result from the sides' data ------------------------------


class ABMissing(Exception):
    """The controller ran a measurement that side B did not measure."""


class ABSkipped(MeasurementSkipped):
    """Side B ran the test but skipped this measurement on purpose (the reason is the
    message): the controller skips it too."""


def ab_measured(data: ABData, nodeid: str, name: str, measurer: Measurer, source: str) -> Measured:
    """Side B's measurement of ``(nodeid, name)`` as the pipeline's
    :class:`~pytest_torchperf.run.state.Measured`: all of B's blocks as its pass, B's counters,
    fingerprint and speedup; the engine then judges it against side A's sessions."""
    from pytest_torchperf.core.stats import summarize
    from pytest_torchperf.judge.samples import Sample
    from pytest_torchperf.run.state import Measured as ToJudge
    from pytest_torchperf.run.state import VariantExtra

    entry = data.measured.get((nodeid, name))
    if entry is not None and not entry.b_sessions and "B" in entry.skipped:
        raise ABSkipped(f"{name}: not measured: {entry.skipped['B']}")
    if entry is None or not entry.b_sessions:
        raise ABMissing(
            f"{name}: not measured by side B of the A/B run: its test failed or was skipped in "
            f"B's processes, or measured under another name there (a name that changes between "
            f"processes, e.g. from a random value)"
        )
    times = tuple(t for p in entry.pairs for t in p.b) or tuple(
        float(t) for t in entry.b_sessions[-1].times
    )
    first = Sample(summarize(times), None, times)
    # The first pair's session: later pairs skip the (deterministic) counters.
    latest = entry.b_sessions[0]
    measurer.number_per_block = latest.number_per_block or 0
    extra = VariantExtra(
        latest.variant or "eager",
        speedup=_copy(latest.speedup),
        accuracy=_copy(latest.accuracy),
        limits=_copy(latest.accuracy_limits),
        fingerprint=_copy(latest.fingerprint),
        metric=latest.metric,
        build_time=latest.build_time,
        method=latest.method,
        failures=carried_failures(latest),
    )
    return ToJudge(
        nodeid,
        name,
        measurer,
        measurer.options,
        _copy(latest.counters),
        first,
        lambda: first,
        [str(latest.clock or "cpu")],
        gate=True,
        source=source,
        extra=extra,
    )


def _copy(values: Mapping[str, _V] | None) -> dict[str, _V] | None:
    return None if values is None else dict(values)


def carried_failures(session: Session) -> list[str]:
    """The failures a side found within its run (its line carries them in its session's
    ``run_failures`` and ``run_failure_kinds``: :func:`.run.side_line`), restored."""
    failures, kinds = session.extra("run_failures"), session.extra("run_failure_kinds")
    return restore(
        [str(f) for f in failures] if isinstance(failures, list) else [],
        [None if k is None else str(k) for k in kinds] if isinstance(kinds, list) else None,
    )


def ab_record(data: ABData, key: Key) -> JSONObject | None:
    """What a results file keeps of an A/B measurement, so ``torchperf compare`` replays it:
    side A, both sides' block times per pair, side A's sessions (without their block times and
    op tables), the interval and whether only one side had it."""
    from pytest_torchperf.kinds.ab.judge_pairs import interval

    entry = data.measured.get(key)
    if entry is None:
        return None
    iv = interval([p.ratio for p in entry.pairs if p.rounds])
    return {
        "against": data.against,
        "pairs": [p.to_record() for p in entry.pairs],
        "a_sessions": [s.without("times", "top_ops").to_json() for s in entry.a_sessions],
        "interval": None
        if iv is None
        else {"change": iv.change, "low": iv.low, "high": iv.high, "pairs": iv.pairs},
        "one_sided": entry.one_sided,
        "speedups": [list(pair) for pair in entry.speedups],
    }


def removed_result(data: ABData, key: Key) -> Result:
    """The Result of a measurement only side A has (removed or renamed in B), for the reports."""
    from dataclasses import replace

    from pytest_torchperf.core.stats import summarize
    from pytest_torchperf.kinds.ab.judge import ab_verdict
    from pytest_torchperf.run.result import Result

    entry = data.measured[key]
    latest = entry.a_sessions[-1]
    times = [float(t) for t in latest.times]
    verdict = ab_verdict(key[1], [], "A", entry.limit or 0.0, data.against)
    return Result(
        name=key[1],
        nodeid=key[0],
        # B has no times of it: the row shows side A's p25 as its baseline, nothing as its own.
        samples=[],
        number_per_block=int(latest.number_per_block or 0),
        device=str(latest.device or "cpu"),
        threads=int(latest.threads or 1),
        cpu_share=None,
        verdict=replace(verdict, baseline_statistic=summarize(times).p25 if times else None),
        group=latest.group,
        variant=str(latest.variant or "eager"),
        sections={"ab": ab_record(data, key)},
    )
