"""A measurement's record as a typed, frozen object: what every report, ``torchperf`` and the run's
summary read. Its JSON form (:class:`pytest_torchperf.store.records.MeasurementRecord`,
docs/file-formats.md) exists only at the boundaries: a results file, a test report's user
property (pytest-xdist and JUnit carry it), and the hooks other plugins implement. One
conversion each way: :meth:`Record.from_json` where a record comes in, :meth:`Record.to_json`
where it goes out, as it came (:class:`~pytest_torchperf.core.json_fields.JsonObject`). Pure.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from pytest_torchperf.core.json_fields import JsonObject


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


@dataclass(frozen=True)
class RecordedVerdict(JsonObject):
    """A record's ``verdict``: the fields of :class:`pytest_torchperf.judge.verdict.Verdict`
    (which builds on it), as recorded. An absent key reads None, False, 0 or empty, as an older
    file's reader saw it."""

    outcome: str | None = None  #: pass, fail, inconclusive, improved, new
    message: str | None = None
    #: Candidate statistic / baseline statistic: the verdict's figure (None without a baseline).
    ratio: float | None = None
    #: Ratio of the first confirming pass, when one was made.
    confirm_ratio: float | None = None
    #: Ratio of the first pass (``ratio`` may pool it with the confirming passes).
    first_ratio: float | None = None
    baseline_statistic: float | None = None
    candidate_statistic: float | None = None
    tolerance: float | None = None
    #: Tolerance actually applied (widened by the stored sessions' noise).
    effective_tolerance: float | None = None
    #: Tolerance applied to a confirming pass of one process when the first pass pooled several
    #: (``--torchperf-processes``): wider, a single process varies more than a median of N.
    confirm_tolerance: float | None = None
    baseline_sessions: int | None = None
    #: Estimated process-to-process noise (relative standard deviation) of the stored sessions.
    baseline_cv: float | None = None
    #: Passed, but only after a re-measurement contradicted a first suspicious pass.
    suspicious: bool = False
    #: Calibration kernel now / in the baseline sessions: >1 means the machine itself is slower.
    machine_ratio: float | None = None
    #: ``ratio`` / ``machine_ratio``: the change with the machine's own speed factored out.
    normalized_ratio: float | None = None
    #: How many extra measurement passes the decision needed.
    remeasures: int | None = None
    notes: tuple[str, ...] = ()
    #: NEW only: why no stored baseline is comparable (the fingerprint fields that differ from a
    #: stored environment, and where it is), shared by every measurement of that environment.
    new_reason: str | None = None
    #: Ratios of every confirming pass, in order.
    confirm_ratios: tuple[float, ...] = ()
    #: Where the confirming passes were taken: ``fresh`` (new processes) or ``same``.
    confirmed_in: str | None = None
    #: What was compared: ``time`` (statistics are seconds), ``instructions`` (instructions per
    #: call under Valgrind, ``--torchperf-instructions``), ``ab``, ... (None: a file without it).
    basis: str | None = None
    #: NEW only: sessions are stored, but none holds a timing (the save could not trust any
    #: pass); their counters and numerics were still gated.
    untimed: bool = False
    #: INCONCLUSIVE only: what kept the figure from being judged, in a word (``busy machine``,
    #: ``spread``, ``slower machine``, ``pairs undecided``, ...); run summaries count them.
    guard: str | None = None


@dataclass(frozen=True)
class RecordedPass(JsonObject):
    """One sampling pass the verdict saw (a record's ``passes``), replayed by ``torchperf
    compare``. Its ``gpu_clock`` stays raw JSON (:meth:`extra`): the clock's own type reads it."""

    times: tuple[float, ...] = ()  #: per-call seconds, one per block, full precision
    cpu_share: float | None = None
    calibration: float | None = None  #: p25 of the calibration kernel timed alongside (seconds)
    neighbour_load: float | None = None
    #: Share of the timed wall time the timing thread waited for a CPU: tells a pass crowded
    #: off its CPU from a target that slept (files before 0.1.0 lack it: read as not measured).
    queued_share: float | None = None
    fresh: bool = False  #: taken in a fresh process (a confirmation)
    process_statistics: tuple[float, ...] = ()  #: other processes' p25s pooled with it
    process_calibrations: tuple[float, ...] = ()


@dataclass(frozen=True)
class Record(JsonObject, Mapping[str, object]):
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
    options: Mapping[str, object] | None = None
    verdict: RecordedVerdict | None = None
    counters: Mapping[str, object] | None = None
    counter_changes: tuple[str, ...] = ()
    #: The key ``kind``: torchperf or timer (what measured it, not the measurement kind).
    source: str | None = field(default=None, metadata={"key": "kind"})
    clock: str | None = None
    saved: bool = False
    not_saved: str | None = None
    untimed: str | None = None
    untimed_options: tuple[str, ...] = ()
    stored: Mapping[str, object] | None = None
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
    session: Mapping[str, object] | None = None
    #: Its environment's fingerprint, shared by every record of it: not the record's own data,
    #: so not compared (shards of one run differ in soft fields such as the host name).
    environment: Mapping[str, object] | None = field(default=None, compare=False)
    run_failures: tuple[str, ...] = ()
    run_failure_kinds: tuple[str | None, ...] = ()
    passes: tuple[RecordedPass, ...] = ()
    processes: tuple[float, ...] = ()
    confirm_speedups: tuple[Mapping[str, float] | None, ...] = ()
    explanation: tuple[str, ...] = ()
    gated: tuple[str, ...] = ()
    graph: Mapping[str, object] | None = None  #: raw JSON (docs/graph.md)

    @property
    def baseline_only(self) -> bool:
        """Only its baseline has it (outcome ``removed``: side A's of an A/B run, removed in
        B): this run timed nothing of it, and nothing of it is judged."""
        return self.outcome == "removed"

    def to_json(self) -> dict[str, object]:
        """Its JSON form: the keys, values and key order it came with (a new dict each call)."""
        return dict(self._json)

    @cached_property
    def _json(self) -> dict[str, object]:
        return JsonObject.to_json(self)

    # Read as its JSON form too: a plugin kind's report part and Candidate.from_record do.
    def __getitem__(self, key: str) -> object:
        return self._json[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._json)

    def __len__(self) -> int:
        return len(self._json)
