"""What one test item accumulates while it measures: its results, the baseline writes waiting for
the test to pass, warnings and failures; and what a measurement carries on its way there
(:class:`Measured`; a variant's build facts, speedup and accuracy: :class:`VariantExtra`).
Pytest-free."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_torchperf.core.types import JSONObject, Target, UserValue
from pytest_torchperf.judge.samples import Sample
from pytest_torchperf.options.measure_options import MeasureOptions
from pytest_torchperf.run.result import Result
from pytest_torchperf.store.sessions import Session

if TYPE_CHECKING:
    from pytest_torchperf.measure.timing import Measurer


class MeasurementSkipped(Exception):
    """A measurement that cannot be taken here; the test is skipped with this reason."""


@dataclass(frozen=True)
class Call:
    """What a test asked to measure: ``target(*inputs, **kwargs)`` under ``options``, as
    measurement ``name`` of test ``nodeid``."""

    nodeid: str
    name: str
    target: Target
    inputs: Sequence[UserValue]
    kwargs: Mapping[str, UserValue]
    options: MeasureOptions


class TorchperfWarning(UserWarning):
    """Inconclusive verdicts, unsaved baselines and other things a user should see but not fail on."""


@dataclass
class PendingSave:
    """A session to write once the test has passed."""

    env_id: str
    environment: JSONObject
    nodeid: str
    name: str
    record: Session
    result: Result


@dataclass
class TestState:
    """Measurements made by one test item."""

    __test__ = False  # a dataclass named Test*, not a test class

    results: list[Result] = field(default_factory=list)
    pending: list[PendingSave] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    #: Messages to show as TorchperfWarning, attributed to the test by the plugin.
    warnings: list[str] = field(default_factory=list)
    #: Failures not tied to one Result (a variant that could not be built).
    failures: list[str] = field(default_factory=list)
    #: Variants left out because they cannot exist here: label -> reason.
    skipped: dict[str, str] = field(default_factory=dict)
    #: True once this test built compiled/quantized variants (dynamo is reset after the test).
    built_variants: bool = False
    #: Whether the test of a node id of this test's module still exists there.
    exists: Callable[[str], bool] = lambda nodeid: True

    def failure_messages(self) -> list[str]:
        """Messages of measurements that must fail the test (each with its explanation)."""
        messages = [
            "\n".join([r.verdict.message, *r.explanation])
            for r in self.results
            if r.verdict and r.verdict.failed
        ]
        messages += [r.counter_message for r in self.results if r.counter_message]
        messages += [f for r in self.results for f in r.failures]
        return messages + self.failures

    def untimed(
        self,
        nodeid: str,
        name: str,
        device: str,
        options: MeasureOptions,
        source: str,
        variant: str = "eager",
    ) -> Result:
        """An untimed result, kept with the test's others: the target ran once
        (``--torchperf-disable``, what opted out of counting) or another process measures it."""
        result = Result(
            name=name,
            nodeid=nodeid,
            samples=[],
            number_per_block=0,
            device=device,
            threads=options.threads,
            cpu_share=None,
            group=options.group,
            disabled=True,
            options=options,
            source=source,
            variant=variant,
        )
        self.results.append(result)
        return result


@dataclass
class VariantExtra:
    """What a measurement carries beyond its timing: variant facts, accuracy, fingerprint, metric."""

    variant: str
    counters: dict[str, Any] | None = None
    build_time: float | None = None
    method: str | None = None
    notes: list[str] = field(default_factory=list)
    evidence: str = ""
    speedup: dict[str, float] | None = None
    #: Why the rounds that timed ``speedup`` cannot be trusted (a guard refused eager's blocks or
    #: the variant's): no session stores it then.
    speedup_refused: str | None = None
    accuracy: dict[str, float] | None = None
    limits: dict[str, float] | None = None
    fingerprint: dict[str, Any] | None = None
    metric: float | None = None
    failures: list[str] = field(default_factory=list)
    #: Speedups the fresh confirming processes measured (when the speedup check needed them).
    confirm_speedups: list[dict[str, float] | None] = field(default_factory=list)

    def facts(self) -> dict[str, Any]:
        """The variant's fields of the measurement's Result."""
        return {
            "variant": self.variant,
            "speedup": self.speedup,
            "accuracy": self.accuracy,
            "accuracy_limits": self.limits,
            "build_time": self.build_time,
            "method": self.method,
            "notes": [*self.notes, *([f"evidence: {self.evidence}"] if self.evidence else [])],
            "metric": self.metric,
            "fingerprint": self.fingerprint,
            "confirm_speedups": list(self.confirm_speedups),
        }

    def record(self) -> dict[str, Any]:
        """The keys a saved baseline session holds for this measurement."""

        def rounded(values: Mapping[str, float] | None) -> dict[str, float] | None:
            return None if values is None else {k: float(f"{v:.6g}") for k, v in values.items()}

        return {
            "variant": self.variant,
            "speedup": None if self.speedup_refused else rounded(self.speedup),
            "accuracy": rounded(self.accuracy),
            "accuracy_limits": rounded(self.limits),
            "build_time": None if self.build_time is None else round(self.build_time, 3),
            "method": self.method,
            "fingerprint": self.fingerprint,
            "metric": self.metric,
        }


@dataclass
class Measured:
    """A measurement ready to be judged: its first pass, and how to take more."""

    nodeid: str
    name: str
    measurer: "Measurer"
    options: MeasureOptions
    counters: dict[str, Any] | None
    first: Sample
    take_sample: Callable[[], Sample]
    clock: list[str]
    gate: bool = True
    #: What measured it: ``torchperf`` (the fixture or a marked test) or ``timer``.
    source: str = "torchperf"
    extra: VariantExtra | None = None
    #: What its kind measured beside the timed pass, as the session keys that hold it
    #: (:attr:`pytest_torchperf.run.kinds.KindRun.beside`: the GPU kernel time).
    beside: JSONObject = field(default_factory=dict)
    #: ``--torchperf-graph``: the call's per-node figures (``node_figures`` record), or None.
    graph: dict[str, Any] | None = None


@dataclass
class VariantPlan:
    """One call's variants as they progress: measurers, facts and failures by variant."""

    nodeid: str
    name: str
    options: MeasureOptions
    variants: Sequence[str]
    labels: dict[str, str]
    measurers: dict[str, Measurer] = field(default_factory=dict)
    extras: dict[str, VariantExtra] = field(default_factory=dict)
    failed: dict[str, Result] = field(default_factory=dict)
    graph: dict[str, Any] = field(default_factory=dict)
    count_graphs: bool = False
    #: Eager's op counts, kept in every other variant's counters as ``model_ops``
    #: (:func:`pytest_torchperf.run.variant_run.model_ops`); None where they are not kept.
    model_ops: dict[str, int] | None = None
    #: How blocks are clocked (``cpu``, ``cuda-events`` or ``sync``).
    clock_name: str = "cpu"

    def untimed(self, state: TestState, variant: str, device: str) -> Result:
        """A variant's untimed result (:meth:`TestState.untimed`)."""
        label = self.labels[variant]
        return state.untimed(self.nodeid, label, device, self.options, "torchperf", variant)
