"""A measurement's record as a typed, frozen object: what every report, ``torchperf`` and the run's
summary read. Its JSON form (:class:`pytest_torchperf.store.records.MeasurementRecord`,
docs/file-formats.md) exists only at the boundaries: a results file, a test report's user
property (pytest-xdist and JUnit carry it), and the hooks other plugins implement. One
conversion each way: :meth:`Record.from_json` where a record comes in, :meth:`Record.to_json`
where it goes out.

The JSON form is written back as it came: the same keys, values and key order. A key the type
does not know (another plugin's, a measurement kind's data such as ``instructions`` or ``ab``)
is kept with its raw JSON value, and so is a known key whose value is not of the key's type (a
file edited by hand, a plugin's edit): the attribute then reads as if the key were absent.
Pure: no torch, no pytest.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

from pytest_torchperf.store.json_values import (
    JSON,
    JsonObject,
    Reader,
    json_of,
    listed,
    written,
)


@dataclass(frozen=True)
class Stats(JsonObject):
    """Summary of per-call seconds (one value per timed block): a record's ``stats``."""

    n: int | None = None
    min: float | None = None
    p25: float | None = None
    median: float | None = None
    p75: float | None = None
    max: float | None = None
    mean: float | None = None
    iqr: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> Stats:
        r = Reader(data, _STATS_KEYS)
        return cls(
            n=r.integer("n"),
            min=r.number("min"),
            p25=r.number("p25"),
            median=r.number("median"),
            p75=r.number("p75"),
            max=r.number("max"),
            mean=r.number("mean"),
            iqr=r.number("iqr"),
            order=tuple(data),
            raw=r.raw,
        )

    def to_json(self) -> dict[str, JSON]:
        known: dict[str, object] = {
            "n": self.n,
            "min": self.min,
            "p25": self.p25,
            "median": self.median,
            "p75": self.p75,
            "max": self.max,
            "mean": self.mean,
            "iqr": self.iqr,
        }
        return written(self.order, known, self.raw)


_STATS_KEYS = ("n", "min", "p25", "median", "p75", "max", "mean", "iqr")


@dataclass(frozen=True)
class RecordedVerdict(JsonObject):
    """A record's ``verdict`` (:class:`pytest_torchperf.judge.verdict.Verdict` as it was
    recorded). An absent key reads None, False, 0 or empty, as an older file's reader saw it."""

    outcome: str | None = None  #: pass, fail, inconclusive, improved, new
    message: str | None = None
    ratio: float | None = None  #: the verdict's figure: candidate / baseline statistic
    confirm_ratio: float | None = None
    first_ratio: float | None = None
    baseline_statistic: float | None = None
    candidate_statistic: float | None = None
    tolerance: float | None = None
    effective_tolerance: float | None = None
    confirm_tolerance: float | None = None
    baseline_sessions: int | None = None
    baseline_cv: float | None = None
    suspicious: bool = False
    machine_ratio: float | None = None
    normalized_ratio: float | None = None
    remeasures: int | None = None
    notes: tuple[str, ...] = ()
    new_reason: str | None = None
    confirm_ratios: tuple[float, ...] = ()
    confirmed_in: str | None = None
    basis: str | None = None  #: time, instructions, ab, ... (None: a file without it)
    untimed: bool = False
    guard: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> RecordedVerdict:
        r = Reader(data, _VERDICT_KEYS)
        return cls(
            outcome=r.text("outcome"),
            message=r.text("message"),
            ratio=r.number("ratio"),
            confirm_ratio=r.number("confirm_ratio"),
            first_ratio=r.number("first_ratio"),
            baseline_statistic=r.number("baseline_statistic"),
            candidate_statistic=r.number("candidate_statistic"),
            tolerance=r.number("tolerance"),
            effective_tolerance=r.number("effective_tolerance"),
            confirm_tolerance=r.number("confirm_tolerance"),
            baseline_sessions=r.integer("baseline_sessions"),
            baseline_cv=r.number("baseline_cv"),
            suspicious=r.flag("suspicious"),
            machine_ratio=r.number("machine_ratio"),
            normalized_ratio=r.number("normalized_ratio"),
            remeasures=r.integer("remeasures"),
            notes=r.texts("notes"),
            new_reason=r.text("new_reason"),
            confirm_ratios=r.numbers("confirm_ratios"),
            confirmed_in=r.text("confirmed_in"),
            basis=r.text("basis"),
            untimed=r.flag("untimed"),
            guard=r.text("guard"),
            order=tuple(data),
            raw=r.raw,
        )

    def to_json(self) -> dict[str, JSON]:
        known: dict[str, object] = {
            "outcome": self.outcome,
            "message": self.message,
            "ratio": self.ratio,
            "confirm_ratio": self.confirm_ratio,
            "first_ratio": self.first_ratio,
            "baseline_statistic": self.baseline_statistic,
            "candidate_statistic": self.candidate_statistic,
            "tolerance": self.tolerance,
            "effective_tolerance": self.effective_tolerance,
            "confirm_tolerance": self.confirm_tolerance,
            "baseline_sessions": self.baseline_sessions,
            "baseline_cv": self.baseline_cv,
            "suspicious": self.suspicious,
            "machine_ratio": self.machine_ratio,
            "normalized_ratio": self.normalized_ratio,
            "remeasures": self.remeasures,
            "notes": listed(self.notes),
            "new_reason": self.new_reason,
            "confirm_ratios": listed(self.confirm_ratios),
            "confirmed_in": self.confirmed_in,
            "basis": self.basis,
            "untimed": self.untimed,
            "guard": self.guard,
        }
        return written(self.order, known, self.raw)


_VERDICT_KEYS = tuple(RecordedVerdict.__dataclass_fields__.keys() - {"order", "raw"})


@dataclass(frozen=True)
class RecordedPass(JsonObject):
    """One sampling pass the verdict saw (a record's ``passes``), replayed by ``torchperf
    compare``. Its ``gpu_clock`` stays raw JSON (:meth:`extra`): the clock's own type reads it."""

    times: tuple[float, ...] = ()  #: per-call seconds, one per block, full precision
    cpu_share: float | None = None
    calibration: float | None = None  #: p25 of the calibration kernel timed alongside (seconds)
    neighbour_load: float | None = None
    fresh: bool = False  #: taken in a fresh process (a confirmation)
    process_statistics: tuple[float, ...] = ()  #: other processes' p25s pooled with it
    process_calibrations: tuple[float, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> RecordedPass:
        r = Reader(data, _PASS_KEYS)
        return cls(
            times=r.numbers("times"),
            cpu_share=r.number("cpu_share"),
            calibration=r.number("calibration"),
            neighbour_load=r.number("neighbour_load"),
            fresh=r.flag("fresh"),
            process_statistics=r.numbers("process_statistics"),
            process_calibrations=r.numbers("process_calibrations"),
            order=tuple(data),
            raw=r.raw,
        )

    def to_json(self) -> dict[str, JSON]:
        known: dict[str, object] = {
            "times": listed(self.times),
            "cpu_share": self.cpu_share,
            "calibration": self.calibration,
            "neighbour_load": self.neighbour_load,
            "fresh": self.fresh,
            "process_statistics": listed(self.process_statistics),
            "process_calibrations": listed(self.process_calibrations),
        }
        return written(self.order, known, self.raw)


_PASS_KEYS = tuple(RecordedPass.__dataclass_fields__.keys() - {"order", "raw"})


@dataclass(frozen=True)
class Record(JsonObject, Mapping[str, JSON]):
    """One measurement of a run, as every report, the results file and ``torchperf`` see it.

    The attributes are the keys :class:`~pytest_torchperf.store.records.MeasurementRecord`
    documents (the key ``kind`` is :attr:`source`: it names what measured it, not the
    measurement kind). An absent key reads as the reports always read it (None, empty,
    ``eager``). The measurement kinds' data (``instructions``, ``instructions_vs_eager``,
    ``ab``, a plugin kind's keys) and other plugins' keys are raw JSON: :meth:`extra`. The
    ``session`` is the stored session's raw mapping (``store/baselines.py`` reads sessions).
    """

    nodeid: str = ""
    name: str = ""
    group: str | None = None
    device: str = ""
    threads: int | None = None
    environment_id: str | None = None
    disabled: bool = False
    number_per_block: int | None = None
    cpu_share: float | None = None
    neighbour_load: float | None = None
    stats: Stats | None = None
    samples: tuple[float, ...] = ()
    options: Mapping[str, JSON] | None = None
    verdict: RecordedVerdict | None = None
    counters: Mapping[str, JSON] | None = None
    counter_changes: tuple[str, ...] = ()
    source: str | None = None  #: the key ``kind``: torchperf or timer
    clock: str | None = None
    saved: bool = False
    not_saved: str | None = None
    untimed: str | None = None
    untimed_options: tuple[str, ...] = ()
    stored: Mapping[str, JSON] | None = None
    calibration: float | None = None
    outcome: str = ""
    label: str | None = None
    variant: str = "eager"
    speedup: Mapping[str, float] | None = None
    accuracy: Mapping[str, float] | None = None
    accuracy_limits: Mapping[str, float] | None = None
    build_time: float | None = None
    method: str | None = None
    notes: tuple[str, ...] = ()
    metric: float | None = None
    failures: tuple[str, ...] = ()
    failure_kinds: tuple[str | None, ...] = ()
    run_id: str | None = None
    session: Mapping[str, JSON] | None = None
    environment: Mapping[str, JSON] | None = None
    run_failures: tuple[str, ...] = ()
    run_failure_kinds: tuple[str | None, ...] = ()
    passes: tuple[RecordedPass, ...] = ()
    processes: tuple[float, ...] = ()
    confirm_speedups: tuple[Mapping[str, float] | None, ...] = ()
    explanation: tuple[str, ...] = ()
    gated: tuple[str, ...] = ()
    graph: Mapping[str, JSON] | None = None  #: raw JSON (docs/graph.md)

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> Record:
        """The record of its JSON form (a results file's, a test report's, a hook's dict)."""
        r = Reader(data, _RECORD_KEYS)
        return cls(
            nodeid=r.text_or("nodeid", ""),
            name=r.text_or("name", ""),
            group=r.text("group"),
            device=r.text_or("device", ""),
            threads=r.integer("threads"),
            environment_id=r.text("environment_id"),
            disabled=r.flag("disabled"),
            number_per_block=r.integer("number_per_block"),
            cpu_share=r.number("cpu_share"),
            neighbour_load=r.number("neighbour_load"),
            stats=r.nested("stats", Stats.from_json),
            samples=r.numbers("samples"),
            options=r.mapping("options"),
            verdict=r.nested("verdict", RecordedVerdict.from_json),
            counters=r.mapping("counters"),
            counter_changes=r.texts("counter_changes"),
            source=r.text("kind"),
            clock=r.text("clock"),
            saved=r.flag("saved"),
            not_saved=r.text("not_saved"),
            untimed=r.text("untimed"),
            untimed_options=r.texts("untimed_options"),
            stored=r.mapping("stored"),
            calibration=r.number("calibration"),
            outcome=r.text_or("outcome", ""),
            label=r.text("label"),
            variant=r.text_or("variant", "eager"),
            speedup=r.figures("speedup"),
            accuracy=r.figures("accuracy"),
            accuracy_limits=r.figures("accuracy_limits"),
            build_time=r.number("build_time"),
            method=r.text("method"),
            notes=r.texts("notes"),
            metric=r.number("metric"),
            failures=r.texts("failures"),
            failure_kinds=r.optional_texts("failure_kinds"),
            run_id=r.text("run_id"),
            session=r.mapping("session"),
            environment=r.mapping("environment"),
            run_failures=r.texts("run_failures"),
            run_failure_kinds=r.optional_texts("run_failure_kinds"),
            passes=r.nested_list("passes", RecordedPass.from_json),
            processes=r.numbers("processes"),
            confirm_speedups=r.optional_figures("confirm_speedups"),
            explanation=r.texts("explanation"),
            gated=r.texts("gated"),
            graph=r.mapping("graph"),
            order=tuple(data),
            raw=r.raw,
        )

    def to_json(self) -> dict[str, JSON]:
        """Its JSON form: the keys, values and key order it came with (a new dict each call)."""
        return dict(self._json)

    @cached_property
    def _json(self) -> dict[str, JSON]:
        known: dict[str, object] = {
            "nodeid": self.nodeid,
            "name": self.name,
            "group": self.group,
            "device": self.device,
            "threads": self.threads,
            "environment_id": self.environment_id,
            "disabled": self.disabled,
            "number_per_block": self.number_per_block,
            "cpu_share": self.cpu_share,
            "neighbour_load": self.neighbour_load,
            "stats": None if self.stats is None else self.stats.to_json(),
            "samples": listed(self.samples),
            "options": json_of(self.options),
            "verdict": None if self.verdict is None else self.verdict.to_json(),
            "counters": json_of(self.counters),
            "counter_changes": listed(self.counter_changes),
            "kind": self.source,
            "clock": self.clock,
            "saved": self.saved,
            "not_saved": self.not_saved,
            "untimed": self.untimed,
            "untimed_options": listed(self.untimed_options),
            "stored": json_of(self.stored),
            "calibration": self.calibration,
            "outcome": self.outcome,
            "label": self.label,
            "variant": self.variant,
            "speedup": json_of(self.speedup),
            "accuracy": json_of(self.accuracy),
            "accuracy_limits": json_of(self.accuracy_limits),
            "build_time": self.build_time,
            "method": self.method,
            "notes": listed(self.notes),
            "metric": self.metric,
            "failures": listed(self.failures),
            "failure_kinds": listed(self.failure_kinds),
            "run_id": self.run_id,
            "session": json_of(self.session),
            "environment": json_of(self.environment),
            "run_failures": listed(self.run_failures),
            "run_failure_kinds": listed(self.run_failure_kinds),
            "passes": [p.to_json() for p in self.passes],
            "processes": listed(self.processes),
            "confirm_speedups": [json_of(s) for s in self.confirm_speedups],
            "explanation": listed(self.explanation),
            "gated": listed(self.gated),
            "graph": json_of(self.graph),
        }
        return written(self.order, known, self.raw)

    # Read as its JSON form while the consumers move to the attributes (transitional).
    def __getitem__(self, key: str) -> JSON:
        return self._json[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._json)

    def __len__(self) -> int:
        return len(self._json)

    def with_json(self, **values: JSON) -> Record:
        """This record with ``values`` set (added after its keys, or in place), read again."""
        return Record.from_json({**self.to_json(), **values})


#: The JSON keys :class:`Record` reads into attributes (``kind`` into ``source``).
_RECORD_KEYS = tuple(
    "kind" if name == "source" else name
    for name in Record.__dataclass_fields__
    if name not in ("order", "raw")
)
