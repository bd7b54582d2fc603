"""What the comparison engine (:func:`pytest_torchperf.judge.compare.compare`) is given: the
:class:`Gate` a measurement is judged under (its measurement kind among it), the
:class:`Candidate` (the measurement) and :class:`Where` its baseline was looked for. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any

from pytest_torchperf.core.stats import summarize
from pytest_torchperf.core.types import JSON, JSONObject
from pytest_torchperf.judge.counter_diff import compared_since_stored
from pytest_torchperf.judge.failures import restore
from pytest_torchperf.judge.numerics import degenerate_reference, empty_fingerprint
from pytest_torchperf.judge.samples import (
    MAX_MACHINE_SLOWDOWN,
    MAX_NEIGHBOUR_LOAD,
    MAX_RELATIVE_IQR,
    MIN_CPU_SHARE,
    GuardLimits,
    Sample,
)
from pytest_torchperf.judge.tolerance import MAX_WIDENING
from pytest_torchperf.kinds import gate_facts, gate_keys, specs
from pytest_torchperf.kinds import names as kind_names
from pytest_torchperf.measure.gpu_clocks import MIN_CLOCK_SHARE
from pytest_torchperf.options.measure_options import MeasureOptions
from pytest_torchperf.store.sessions import Session, session_of


@dataclass(frozen=True)
class Gate:
    """The options a measurement is judged under; stored with each session as ``gate`` so that
    ``torchperf compare`` judges a results file exactly as the run did."""

    max_slowdown: float = 0.10
    min_cpu_share: float = MIN_CPU_SHARE
    max_spread: float = MAX_RELATIVE_IQR
    max_neighbour_load: float = MAX_NEIGHBOUR_LOAD
    max_machine_slowdown: float = MAX_MACHINE_SLOWDOWN
    #: CUDA passes: the lowest SM clock, as a share of the maximum, a trusted pass may read.
    min_gpu_clock: float = MIN_CLOCK_SHARE
    strict: bool = False
    #: What set ``strict``, as a strict failure names it (not recorded: a replay has the value).
    strict_by: str = field(default="strict, as the run recorded it", compare=False)
    ignore_counters: tuple[str, ...] = ()
    #: Where confirming passes were taken: ``fresh`` processes or the ``same`` one.
    confirm: str = "same"
    #: The run also saved (strict does not fail a measurement that has no baseline yet then).
    saving: bool = False
    #: The measurement kind (one of :func:`pytest_torchperf.kinds.names`), chosen once from the run's settings.
    kind: str = "time"
    #: What the kinds record besides their limits, by key (:attr:`KindSpec.gate_facts
    #: <pytest_torchperf.kinds.KindSpec.gate_facts>`: ``ab``, what side A of an A/B run is),
    #: every declared one present: read with :meth:`fact`.
    facts: tuple[tuple[str, JSON], ...] = ()
    #: A timing pass within a limit the stored sessions' noise widened beyond this many times
    #: ``max_slowdown`` is inconclusive, not a pass (0: no bound).
    max_widening: float = MAX_WIDENING
    #: The kinds' own limits, by option name (:attr:`pytest_torchperf.kinds.KindSpec.gate_keys`:
    #: ``max_instruction_increase``, ``max_kernel_slowdown``), every declared one present
    #: (those not given at their option's default): read with :meth:`limit`.
    limits: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in kind_names():
            raise ValueError(
                f"unknown measurement kind {self.kind!r}: one of {', '.join(kind_names())}"
            )
        given = dict(self.limits)
        unknown = sorted(set(given) - set(gate_keys()))
        if unknown:
            raise ValueError(f"unknown gate limits {unknown}: the kinds declare {gate_keys()}")
        # Frozen: the normal form is set once, so equal gates compare equal however built.
        object.__setattr__(
            self, "limits", tuple((k, given.get(k, _limit_default(k))) for k in gate_keys())
        )
        facts, declared = dict(self.facts), gate_facts()
        if set(facts) - set(declared):
            raise ValueError(f"unknown gate facts {sorted(set(facts) - set(declared))}")
        object.__setattr__(
            self, "facts", tuple((k, facts.get(k, value)) for k, value in declared.items())
        )

    def limit(self, name: str) -> float:
        """One of the kinds' own limits (``gate.limit("max_kernel_slowdown")``)."""
        return dict(self.limits)[name]

    def fact(self, name: str) -> JSON:
        """What a kind recorded in the gate (``gate.fact("ab")``: side A)."""
        return dict(self.facts)[name]

    @property
    def guards(self) -> GuardLimits:
        """The guards' thresholds this gate sets."""
        return GuardLimits(
            self.min_cpu_share,
            self.max_spread,
            self.max_neighbour_load,
            self.max_machine_slowdown,
            self.min_gpu_clock,
        )

    @property
    def instructions(self) -> bool:
        """Instructions per call gate (time and the timed speedups are reported only)."""
        return self.kind == "instructions"

    def to_record(self) -> JSONObject:
        record: JSONObject = {
            **{f.name: getattr(self, f.name) for f in fields(self)},
            "ignore_counters": list(self.ignore_counters),
            # Read by files' consumers written before the kind was recorded.
            "instructions": self.instructions,
            **dict(self.limits),
            **dict(self.facts),
        }
        del record["limits"], record["facts"], record["strict_by"]
        # The file format's order (a baseline file's gate reads the same after a save); limits
        # a plugin's kind added come last.
        return {k: record[k] for k in sorted(record, key=_record_position)}

    @classmethod
    def from_record(cls, gate: Mapping[str, Any], **overrides: Any) -> "Gate":
        """The gate a session recorded (keys missing from older files: their behaviour then)."""
        values = {
            f.name: gate.get(f.name, _OLDER_FILES.get(f.name, f.default))
            for f in fields(cls)
            if f.name not in ("facts", "limits")
        }
        values.update(
            strict=bool(values["strict"]),
            saving=bool(values["saving"]),
            ignore_counters=tuple(gate.get("ignore_counters") or ()),
            kind=recorded_kind(gate),
        )
        limits = {k: gate[k] for k in gate_keys() if k in gate}
        facts = tuple((k, gate[k]) for k in gate_facts() if gate.get(k) is not None)
        for key, value in overrides.items():
            if value is not None:
                (limits if key in gate_keys() else values)[key] = value
        return cls(**values, limits=tuple(limits.items()), facts=facts)


#: A key missing from a recorded gate reads as its field's default, but for these: files
#: written before them measured no neighbours, had no machine guard and judged at any width.
#: (Older files read no GPU clocks either: their passes carry none to guard.)
_OLDER_FILES = {"max_neighbour_load": 1.0, "max_machine_slowdown": 1000.0, "max_widening": 0.0}


@cache
def _limit_default(key: str) -> float:
    """A kind's limit where a gate was not given it: its option's default (only the built-in
    kinds declare limits, and they do so when the package loads)."""
    limit: float = MeasureOptions().value(key)
    return limit


#: The order of a gate's keys in the files.
_RECORD_ORDER = (
    "max_slowdown",
    "min_cpu_share",
    "max_spread",
    "max_neighbour_load",
    "max_machine_slowdown",
    "min_gpu_clock",
    "strict",
    "ignore_counters",
    "confirm",
    "saving",
    "kind",
    "instructions",
    "max_instruction_increase",
    "ab",
    "max_widening",
    "max_kernel_slowdown",
)


def _record_position(key: str) -> int:
    return _RECORD_ORDER.index(key) if key in _RECORD_ORDER else len(_RECORD_ORDER)


def recorded_sample(session: Session) -> Sample:
    """The pass a recorded session holds, as the guards read it (``torchperf accept``)."""
    times = session.times
    return Sample(
        summarize(times),
        session.cpu_share,
        times,
        session.calibration,
        neighbour_load=session.neighbour_load,
        queued_share=session.queued_share,
    )


def recorded_kind(gate: Mapping[str, object]) -> str:
    """The kind a recorded gate names; files written before it was recorded say it with their
    ``instructions`` and ``ab`` keys."""
    kind = gate.get("kind")
    if kind in kind_names():
        return str(kind)
    if gate.get("instructions"):
        return "instructions"
    return "ab" if gate.get("ab") else "time"


@dataclass(frozen=True)
class Candidate:
    """What one measurement brings to the comparison besides its timing passes."""

    label: str
    first: Sample
    counters: Mapping[str, object] | None = None
    variant: str = "eager"
    speedup: Mapping[str, float] | None = None
    fingerprint: Mapping[str, object] | None = None
    metric: float | None = None
    #: Accuracy limits the variant ran under (None: the variant's defaults).
    accuracy_limits: Mapping[str, float] | None = None
    #: Failures found within the run: accuracy vs eager, min_speedup, compile time.
    run_failures: Sequence[str] = ()
    #: Name of the calibration kernel timed alongside (only sessions of the same kernel compare).
    calibration_kernel: str | None = None
    #: The measurement kinds' own data, by the record and session keys each kind declares
    #: (:attr:`pytest_torchperf.kinds.KindSpec.record_keys`, ``session_keys``): an instruction
    #: count, A/B process pairs, GPU kernel times. Only the kind reads its own.
    sections: Mapping[str, Any] = field(default_factory=dict)
    #: A variant whose eager fp32 reference is degenerate (all zero, constant, non-finite):
    #: what makes it so. Its numerics then prove nothing and are not counted as gated.
    degenerate_reference: str | None = None

    def gates_besides_time(
        self, sessions: Sequence[Session], ignore: Iterable[str] = ()
    ) -> list[str]:
        """``counters`` and ``numerics`` where this measurement has them and ``sessions`` hold
        a counterpart to check against (a variant's numerics: eager fp32 within the run). What
        the engine gates and what a message may say was gated, decided once. Counters: where
        the newest stored session with counters shares one with it that ``ignore`` (the gate's
        ``ignore_counters``) leaves gated, as the counter diff compares them."""
        counters = bool(
            compared_since_stored([s.counters for s in sessions], self.counters, ignore)
        )
        outputs = self.degenerate_reference is None and (
            (
                self.fingerprint is not None
                and not empty_fingerprint(self.fingerprint)
                and any(s.fingerprint for s in sessions)
            )
            or self.variant != "eager"
        )
        numerics = outputs or (
            self.metric is not None and any(s.metric is not None for s in sessions)
        )
        return [gate for gate, on in (("counters", counters), ("numerics", numerics)) if on]

    @classmethod
    def from_record(cls, first: Sample, record: Mapping[str, Any]) -> Candidate:
        """The candidate of a measurement record (:class:`~pytest_torchperf.store.records.
        MeasurementRecord` keys): what its ``session`` would store (counters, variant facts,
        the calibration kernel) and what the run found besides (failures), and the kinds' own
        data (:attr:`sections`: an instruction count, A/B pairs). The one conversion from a record, for a live
        measurement (the pipeline assembles the keys it has) and a replayed one alike."""
        session = session_of(record)
        sections = {
            **{k: record[k] for spec in specs() for k in spec.record_keys if k in record},
            **{k: session.json_value(k) for s in specs() for k in s.session_keys if session.has(k)},
        }
        return cls(
            record["name"],
            first,
            session.counters if session.has("counters") else record.get("counters"),
            variant=session.variant,
            # As measured: the session leaves out one a guard refused the rounds of (a save
            # stores none), which the run judged all the same.
            speedup=record.get("speedup") or session.speedup,
            fingerprint=session.fingerprint,
            metric=session.metric,
            accuracy_limits=session.accuracy_limits,
            run_failures=restore(
                list(record.get("run_failures") or ()), record.get("run_failure_kinds")
            ),
            calibration_kernel=session.calibration_kernel,
            sections=sections,
            degenerate_reference=degenerate_reference(record.get("accuracy") or {})
            if session.variant != "eager"
            else None,
        )


@dataclass(frozen=True)
class Where:
    """Where the baseline was looked for, to word "no baseline" precisely."""

    #: The environment this measurement was taken in: its id and exact fingerprint.
    environment_id: str = ""
    exact: Mapping[str, JSON] = field(default_factory=dict)
    #: The file that would hold its sessions, and the storage folder.
    baseline_file: str = ""
    storage: str = ""
    #: The storage folder does not exist at all (the likeliest typo in --torchperf-storage).
    storage_missing: bool = False
    #: Finds the other stored environments that hold this measurement, ``(env_id, fingerprint)``
    #: (called only when there is no baseline here: it reads every environment's file).
    others: Callable[[], Sequence[tuple[str, Mapping[str, JSON]]]] = lambda: ()
    #: The stored test ids of its module that hold this measurement but whose test no longer
    #: exists (renamed or deleted; called only when there is no baseline here).
    gone: Callable[[], Sequence[str]] = lambda: ()
    #: The test id it was measured by (a remedy saves that test alone).
    nodeid: str = ""
