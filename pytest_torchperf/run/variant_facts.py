"""What a measurement of a variant carries beyond its timing: :class:`VariantExtra`, what a run
gathers for it and hands to the :class:`pytest_torchperf.run.result.Result` (speedup, accuracy,
build facts) and to the saved session. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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

    def facts(self) -> dict[str, Any]:
        """The variant's fields of the measurement's Result."""
        evidence = ", ".join(f"{k}={v}" for k, v in self.info.items())
        return {
            "variant": self.variant,
            "speedup": self.speedup,
            "accuracy": self.accuracy,
            "accuracy_limits": self.limits,
            "build_time": self.build_time,
            "method": self.method,
            "notes": [*self.notes, *([f"evidence: {evidence}"] if evidence else [])],
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
            "speedup": rounded(self.speedup),
            "accuracy": rounded(self.accuracy),
            "accuracy_limits": rounded(self.limits),
            "build_time": None if self.build_time is None else round(self.build_time, 3),
            "method": self.method,
            "fingerprint": self.fingerprint,
            "metric": self.metric,
        }
