"""The result object a test gets back from ``torchperf(...)``, and its JSON record.

Pure module: a :class:`Result` is built from per-call samples and an optional :class:`Verdict`.
Its :meth:`Result.to_record` form is what travels to the terminal summary (also across xdist
workers, through the test report) and what reports read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from pytest_torchperf.core.stats import Summary, summarize
from pytest_torchperf.core.units import format_change, format_time
from pytest_torchperf.judge.compare import save_this_test
from pytest_torchperf.judge.counter_diff import changed_head, ignore_hint
from pytest_torchperf.judge.failures import categories_of
from pytest_torchperf.judge.labels import outcome_label
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.verdict import Verdict
from pytest_torchperf.kinds import result_keys
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.records import MeasurementRecord, in_record_order
from pytest_torchperf.store.sessions import Session

#: Why a plain save that found other code than its stored sessions' stored nothing.
_OTHER_CODE = (
    "Nothing of this measurement was saved: the stored sessions measured other code, and this "
    "save's times appended to theirs would read as process noise and widen the limit. "
)


@dataclass
class Result:
    """Timing of one measurement (all times in seconds per call).

    ``samples`` holds one per-call time per timed block; ``median``, ``p25``, ``iqr`` and friends
    summarise them. ``verdict`` is set in ``--torchperf-compare`` runs.
    """

    name: str
    nodeid: str
    samples: list[float]
    number_per_block: int
    device: str
    threads: int
    cpu_share: float | None
    environment_id: str | None = None
    verdict: Verdict | None = None
    #: Share of the other CPUs other processes kept busy while timing (CPU; None elsewhere).
    neighbour_load: float | None = None
    #: Share of the timed wall time the timing thread waited for a CPU (Linux, CPU; else None):
    #: a low CPU share with little queueing is a target that slept, not a busy machine.
    queued_share: float | None = None
    group: str | None = None
    #: True when ``--torchperf-disable`` ran the target once without timing.
    disabled: bool = False
    #: The resolved options the measurement ran with (after marker/CLI/ini precedence).
    options: Any = field(default=None, repr=False)
    #: Noise-free counters: ``flops``, ``ops`` (ATen op -> calls), ``params``, ``param_bytes``,
    #: ``peak_memory`` (bytes). None when counters are off.
    counters: dict[str, Any] | None = None
    #: Gated counter changes against the baseline (each a readable sentence); empty = unchanged.
    counter_changes: list[str] = field(default_factory=list)
    #: What measured it: ``torchperf`` for fixture calls and whole tests, ``timer`` for
    #: ``torchperf_timer`` (the record's key ``kind``, named before "kind" came to mean only a
    #: measurement kind).
    source: str = "torchperf"
    #: How blocks were clocked: ``cpu``, ``cuda-events`` or ``sync``.
    clock: str | None = None
    #: True once the session was written to the baseline file (``--torchperf-save``, test passed).
    saved: bool = False
    #: Why a saving run did not store this measurement (``machine +61% slower``), else None.
    not_saved: str | None = None
    #: A plain save found other code than the stored sessions' (its counters, or where they
    #: cannot tell its outputs), so its test fails and stores nothing
    #: (:func:`pytest_torchperf.run.saving.other_code_since_stored`).
    other_code: bool = False
    #: Why a saving run stored this measurement without its timing (every pass refused by a
    #: guard: ``busy neighbour``); its counters and numerics were stored. None when timed.
    untimed: str | None = None
    #: With ``untimed``: the option of every guard its pass tripped (storing it anyway needs
    #: them all).
    untimed_options: list[str] = field(default_factory=list)
    #: A save: what its timing baseline now is (sessions, median, noise, the limit it implies;
    #: :class:`pytest_torchperf.judge.tolerance.StoredBaseline`); None when nothing timed.
    stored: dict[str, Any] | None = None
    #: A save: the processes whose sessions were not stored, each with why (``process 2 (CPU
    #: share 0.64 < 0.90)``, ``this process (machine +61.0% slower)``).
    left_out: list[str] = field(default_factory=list)
    #: The guards that refused them (``judge.refusals.BUSY``, ``IDLE``, ...).
    refused_by: list[str] = field(default_factory=list)
    #: p25 per-call seconds of the calibration kernel timed alongside (CPU), None elsewhere.
    calibration: float | None = None
    summary: Summary | None = field(default=None, repr=False)
    #: What the measurement kinds added, by the record keys each declares
    #: (:attr:`pytest_torchperf.kinds.KindSpec.result_keys`): an instruction count
    #: (``instructions``: ``per_call``, ``windows``, ``functions``) and a variant's count as a
    #: multiple of eager's (``instructions_vs_eager``); an A/B run's ``ab``: side A
    #: (``against``), each process pair's block times of both sides (``pairs``), side A's
    #: sessions (``a_sessions``), the ``interval`` of the change, ``one_sided``.
    sections: dict[str, Any] = field(default_factory=dict)
    #: Failures other than the timing verdict and counters (accuracy, speedup, compile time,
    #: numerics drift), each a full sentence naming the measurement.
    failures: list[str] = field(default_factory=list)
    #: Id of the pytest run (worker) that measured it; its saved session carries the same id.
    run_id: str | None = None
    #: Failures found within the run (accuracy vs eager, min_speedup, compile time), a subset of
    #: ``failures`` (which adds the across-run checks).
    run_failures: list[str] = field(default_factory=list)
    #: Every sampling pass the verdict saw, in order (first, re-measures): ``times``,
    #: ``cpu_share``, ``calibration``. ``torchperf compare`` replays them.
    passes: list[dict[str, Any]] = field(default_factory=list, repr=False)
    #: ``--torchperf-processes``: the p25 (seconds per call) of each fresh process whose
    #: measurement was pooled, this one's last; empty for a single-process measurement.
    processes: list[float] = field(default_factory=list)
    #: Lines a live run adds to a failed verdict: the profiled op diff and the trace path.
    explanation: list[str] = field(default_factory=list)
    #: What the comparison gated (``time``/``instructions``/``ab``, ``counters``, ``numerics``;
    #: see :attr:`pytest_torchperf.judge.compare.Comparison.gated`); empty without a compare.
    gated: list[str] = field(default_factory=list)
    #: The command that records a new baseline of this measurement's kind (a fallback run's
    #: differs from a timing run's: :attr:`pytest_torchperf.judge.compare.Comparison.save`).
    save_command: str = field(default="pytest --torchperf-save", repr=False)
    #: ``--torchperf-graph``: per-node figures of the call on its exported graph, with the
    #: baseline's beside them in a compare (:mod:`pytest_torchperf.measure.node_figures`).
    graph: dict[str, Any] | None = field(default=None, repr=False)
    #: The baseline session this measurement is (as ``--torchperf-save`` writes it).
    session: Session | None = field(default=None, repr=False)
    #: The environment fingerprint of the measurement (``environment.json`` of its folder).
    environment: dict[str, Any] | None = field(default=None, repr=False)
    #: Which variant of the target this is (``eager``, ``compiled``, ``fused``, ``amp``, ``int8``).
    variant: str = "eager"
    #: Speedup vs eager from interleaved rounds: ``median``, ``p25``, ``p75``, ``n`` (None for
    #: eager).
    speedup: dict[str, float] | None = None
    #: Accuracy vs the eager fp32 outputs of the same run (``rel_l2``, ``cosine``, ``max_abs``,
    #: ``top1``).
    accuracy: dict[str, float] | None = None
    #: Tolerances the accuracy was checked against.
    accuracy_limits: dict[str, float] | None = None
    #: Seconds to build the variant including its first (compiling) call; None for eager.
    build_time: float | None = None
    #: How the variant was built (e.g. ``torch.compile(backend='inductor')``).
    method: str | None = None
    #: Things worth knowing about how the variant was built (fallbacks, caveats).
    notes: list[str] = field(default_factory=list)
    #: The user metric (``metric=fn`` on ``data=``) for this variant, if one was given.
    metric: float | None = None
    #: Summary statistics of the outputs (stored with baselines to catch numerics changes).
    fingerprint: dict[str, Any] | None = field(default=None, repr=False)
    #: Speedups vs eager measured by the fresh processes that confirmed a suspected fall.
    confirm_speedups: list[dict[str, float] | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.summary is None and self.samples:
            self.summary = summarize(self.samples)

    # Convenience accessors -------------------------------------------------------------------
    def _stat(self, attr: str) -> float:
        if self.summary is None:
            raise ValueError(f"measurement {self.name!r} was {self._untimed_why()}")
        return float(getattr(self.summary, attr))

    def _untimed_why(self) -> str:
        """Why there is no timing: the run did not time (``--torchperf-disable``), or the
        measurement failed before it was timed (a variant whose outputs were NaN)."""
        if self.disabled:
            return "not timed (--torchperf-disable)"
        if self.failures:
            return f"not timed: it failed first ({self.failures[0]})"
        return "not timed"

    @property
    def median(self) -> float:
        """Median per-call time in seconds."""
        return self._stat("median")

    @property
    def p25(self) -> float:
        """25th percentile of per-call time in seconds: the statistic compared with baselines."""
        return self._stat("p25")

    @property
    def p75(self) -> float:
        """75th percentile of per-call time in seconds."""
        return self._stat("p75")

    @property
    def iqr(self) -> float:
        """Inter-quartile range of per-call time in seconds."""
        return self._stat("iqr")

    @property
    def min(self) -> float:
        """Fastest per-call time in seconds."""
        return self._stat("min")

    @property
    def mean(self) -> float:
        """Mean per-call time in seconds."""
        return self._stat("mean")

    @property
    def outcome(self) -> Outcome:
        """Verdict outcome (``FAIL`` also when counters changed), or ``MEASURED`` without comparison."""
        if self.counter_changes or self.failures:
            return Outcome.FAIL
        return self.verdict.outcome if self.verdict else Outcome.MEASURED

    @property
    def kind(self) -> str:
        """:attr:`source`, under the name earlier versions gave it (and the record keeps)."""
        return self.source

    @property
    def counter_message(self) -> str | None:
        """Failure message for changed counters, or None."""
        if not self.counter_changes:
            return None
        if self.verdict is not None and self.verdict.basis == "ab":
            return (
                f"{changed_head(self.name, self.verdict.basis)}: "
                f"{'; '.join(self.counter_changes)}. If intended, nothing to record (an A/B run "
                f"keeps no baseline); {ignore_hint(self.counter_changes)}"
            )
        # This test's sessions alone: a bare --torchperf-reset replaces every saved test's.
        save = save_this_test(self.nodeid, self.save_command, reset=True)
        unsaved = _OTHER_CODE if self.other_code else ""  # a plain save appends
        return (
            f"{changed_head(self.name, self.verdict.basis if self.verdict else None)}: "
            f"{'; '.join(self.counter_changes)}. "
            f"{unsaved}If intended, record a new baseline ({save}); "
            f"{ignore_hint(self.counter_changes)}"
        )

    def other_outputs_message(self, moved: str, counted: str) -> str:
        """Failure message of a plain save whose outputs ``moved`` since the stored sessions,
        where the counters cannot tell whether the code changed (``counted`` says why)."""
        return (
            f"{self.name}: outputs changed since the stored sessions ({moved}), and {counted}. "
            f"{_OTHER_CODE}If intended (a model edit, other weights or inputs), record a new "
            f"baseline ({save_this_test(self.nodeid, reset=True)}); a save must use the seed the stored "
            f"sessions used (seed=, --torchperf-seed, ini torchperf_seed)"
        )

    def __repr__(self) -> str:
        if self.summary is None:
            return f"<torchperf Result {self.name!r}: {self._untimed_why()}>"
        s = self.summary
        text = (
            f"<torchperf Result {self.name!r}: median {format_time(s.median)} "
            f"(p25 {format_time(s.p25)}, IQR {format_time(s.iqr)}, {s.n} blocks x "
            f"{self.number_per_block} calls, {self.device}, {self.threads} thread"
            f"{'s' if self.threads != 1 else ''})"
        )
        settle = self.passes[-1].get("settle") if self.passes else None
        if settle and not settle["settled"]:  # timed while the GPU may still have been ramping
            text += (
                f" (unsettled: block times still moving after {settle['blocks']} untimed blocks)"
            )
        if self.verdict is not None:
            text += f" {self.verdict.outcome.value}"
            if self.verdict.ratio is not None:
                text += f" {format_change(self.verdict.ratio)}"
        # What else fails it (the test fails at its end), as every report labels it: not a plain
        # "pass".
        if self.failures or self.counter_changes:
            text += f"; {self.to_record()['label']}"
        if self.speedup is not None:
            text += f" speedup x{self.speedup['median']:.2f}"
        return text + ">"

    def to_record(self) -> MeasurementRecord:
        """JSON-friendly record for summaries and reports (see :mod:`pytest_torchperf.store.records`):
        in the file format's order (MeasurementRecord), each key the attribute of its name (a
        list copied) but those worded below, then the measurement kinds' keys (a plugin's
        last), ``gated``, ``graph`` (where there is one) and ``label``."""
        worded: dict[str, Any] = {
            "stats": self.summary.to_dict() if self.summary else None,
            "samples": [float(f"{t:.6g}") for t in self.samples],
            "options": {
                "min_time": self.options.min_time,
                "max_slowdown": self.options.max_slowdown,
            }
            if self.options is not None
            else None,
            "verdict": self.verdict.to_dict() if self.verdict else None,
            "kind": self.source,
            "outcome": self.outcome.value if not self.disabled else "disabled",
            "failure_kinds": categories_of(self.failures),
            # The one conversion of a live session to JSON (a save writes it through the store).
            "session": self.session.to_json() if self.session is not None else None,
            "run_failure_kinds": categories_of(self.run_failures),
        }
        keys = list(MeasurementRecord.__annotations__)
        values: dict[str, Any] = {}
        for key in keys[: keys.index("explanation") + 1]:
            if key != "label":  # worded last, from the record
                value = worded[key] if key in worded else getattr(self, key)
                values[key] = list(value) if isinstance(value, list) else value
        values.update({key: self.sections.get(key) for key in in_record_order(result_keys())})
        values["gated"] = list(self.gated)
        if self.graph is not None:
            values["graph"] = self.graph
        record = cast(MeasurementRecord, values)
        # The outcome label every report shows (terminal, markdown, HTML, JSON, torchperf compare),
        # worded from the record being built (read as the reports read it).
        record["label"] = (
            outcome_label(Record.from_json(record)) if not self.disabled else "disabled"
        )
        return record
