"""What a measurement of a variant carries beyond its timing: :class:`VariantFacts`, the part a
:class:`pytest_torchperf.run.result.Result` shows (speedup, accuracy, build facts), and
:class:`VariantExtra`, what a run gathers for it and hands to the Result and to the saved
session. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class VariantFacts:
    """The part of a :class:`Result` a variant adds (see the properties of the same names)."""

    variant: str = "eager"
    speedup: dict[str, float] | None = None
    accuracy: dict[str, float] | None = None
    accuracy_limits: dict[str, float] | None = None
    build_time: float | None = None
    method: str | None = None
    notes: list[str] = field(default_factory=list)
    metric: float | None = None
    fingerprint: dict[str, Any] | None = None
    confirm_speedups: list[dict[str, float] | None] = field(default_factory=list)


@dataclass
class VariantExtra:
    """What a measurement carries beyond its timing: variant facts, accuracy, fingerprint, metric."""

    variant: str
    counters: dict[str, Any] | None = None
    build_time: float | None = None
    method: str | None = None
    notes: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    speedup: dict[str, float] | None = None
    accuracy: dict[str, float] | None = None
    limits: dict[str, float] | None = None
    fingerprint: dict[str, Any] | None = None
    metric: float | None = None
    failures: list[str] = field(default_factory=list)
    #: Speedups the fresh confirming processes measured (when the speedup check needed them).
    confirm_speedups: list[dict[str, float] | None] = field(default_factory=list)

    def facts(self) -> VariantFacts:
        """The variant's part of the test's Result."""
        evidence = ", ".join(f"{k}={v}" for k, v in self.info.items())
        return VariantFacts(
            self.variant,
            self.speedup,
            self.accuracy,
            self.limits,
            self.build_time,
            self.method,
            [*self.notes, *([f"evidence: {evidence}"] if evidence else [])],
            self.metric,
            self.fingerprint,
            list(self.confirm_speedups),
        )

    def record(self) -> dict[str, Any]:
        """The keys a saved baseline session holds for this measurement."""

        def rounded(values: Mapping[str, float] | None) -> dict[str, float] | None:
            return None if values is None else {k: float(f"{v:.6g}") for k, v in values.items()}

        return {
            "variant": self.variant,
            "speedup": rounded(self.speedup),
            "accuracy": rounded(self.accuracy),
            "accuracy_limits": rounded(self.limits),
            "build_time": None if self.build_time is None else round(self.build_time, 3),
            "method": self.method,
            "fingerprint": self.fingerprint,
            "metric": self.metric,
        }
