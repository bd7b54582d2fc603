"""The ``ab`` kind's settings of a run: what side A is and how many process pairs it measures
in. It adds no option of a measurement (its limit is ``max_slowdown``, at a default of its own).
Pure."""

from __future__ import annotations

from dataclasses import dataclass

#: An A/B run's process pairs: measured first, and the most while verdicts are undecided.
DEFAULT_PAIRS = 3
DEFAULT_MAX_PAIRS = 8


@dataclass(frozen=True)
class ABSettings:
    """An A/B run's settings (``settings.of(ABSettings)``)."""

    #: ``--torchperf-ab REV`` / ``--torchperf-ab-python PYTHON``: what side A is (``rev:REV``,
    #: or ``python:PATH``); empty outside an A/B run. Children of an A/B run have it too.
    against: str = ""
    #: Process pairs an A/B run measures first, and the most it adds while verdicts are
    #: undecided.
    pairs: int = DEFAULT_PAIRS
    max_pairs: int = DEFAULT_MAX_PAIRS

    @property
    def active(self) -> bool:
        return bool(self.against)

    #: An A/B run always compares its two sides.
    compares = active

    def describe(self, mode: str) -> str | None:
        """The run mode for headers."""
        if not self.against:
            return None
        side_type, _, what = self.against.partition(":")
        return f"A/B: working tree against {what}" + (
            " (another Python)" if side_type == "python" else ""
        )
