"""Run-wide settings from the command line and ini file (no torch, no heavy imports).

Kept apart from :mod:`pytest_torchperf.run` so that ``pytest_configure`` can record them
without importing the measuring machinery: a pytest run without perf tests never loads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RunSettings:
    """Session-wide settings from the command line and ini file."""

    storage: Path
    save: bool = False
    compare: bool = False
    disable: bool = False
    reset: bool = False
    #: Folder for profiler traces and reports (default ``.torchperf-report`` under the rootdir).
    report_dir: Path = Path(".torchperf-report")
    #: Requested device for ``torchperf_device`` (``auto``, ``cpu``, ``cuda``, ``cuda:1``, ``mps``).
    device: str = "auto"
    #: Parsed option layers (see :mod:`pytest_torchperf.options.measure_options`); ``None`` values mean "unset".
    cli: Mapping[str, Any] = field(default_factory=dict)
    ini: Mapping[str, Any] = field(default_factory=dict)
    #: ``--torchperf-cross-machine``: with no baseline here, compare with another environment's
    #: (normalised times warn only; counters of the same torch build are gated).
    cross_machine: bool = False
    #: ``--torchperf-graph``: each measurement's per-node figures on its exported graph.
    graph: bool = False
    #: ``--torchperf-variants`` / ini ``torchperf_variants``: only these variants run (None = all).
    variant_filter: tuple[str, ...] | None = None
    #: ``--torchperf-processes``: fresh processes each target is measured in (1 = this one only).
    processes: int = 1
    #: This run is a child of a ``--torchperf-processes`` run: it only measures (see
    #: :mod:`pytest_torchperf.pytest_plugin.child_runs`).
    child: bool = False
    #: ``--torchperf-confirm``: a suspected slowdown is re-measured in a ``fresh`` process or the
    #: ``same`` one.
    confirm: str = "fresh"
    #: ``--torchperf-instructions``: CPU measurements are gated on instructions per call counted
    #: under Valgrind (time is reported, not gated).
    instructions: bool = False
    #: ``--torchperf-fallback instructions``: CPU measurements are timed and gated on time as
    #: usual, and also counted under Valgrind; the count is stored beside the timing and judges
    #: a measurement whose timing verdict is inconclusive ("" when off).
    fallback: str = ""
    #: ``--torchperf-instruction-jobs``: counting processes run side by side under Valgrind
    #: (0 = auto: one per CPU, at most 4, fewer when memory is short).
    instruction_jobs: int = 0
    #: ``--torchperf-ab REV`` / ``--torchperf-ab-python PYTHON``: what side A is (a git revision,
    #: or ``python:PATH``); empty outside an A/B run. Children of an A/B run have it too.
    ab: str = ""
    #: Process pairs an A/B run measures first, and the most it adds while verdicts are undecided.
    ab_pairs: int = 3
    ab_max_pairs: int = 8
    #: ``--torchperf-save-wait``: seconds this process of a save may spend waiting for a busy
    #: machine to quiet down and measuring a refused pass again (the run's budget over its
    #: processes).
    save_wait: float = 60.0

    @property
    def counts_instructions(self) -> bool:
        """This run counts its CPU perf tests under Valgrind before its own test loop."""
        return self.instructions or self.fallback == "instructions"

    def selected_variants(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """``names`` narrowed by the run's variant filter, order kept."""
        if self.variant_filter is None:
            return names
        return tuple(n for n in names if n in self.variant_filter)

    @property
    def mode(self) -> str:
        """Human-readable run mode for headers."""
        if self.disable:
            return "disabled (each target run once, no timing)"
        parts = [m for m, on in (("compare", self.compare), ("save", self.save)) if on]
        mode = "+".join(parts) if parts else "measure only (no baseline)"
        if self.ab:
            side_type, _, what = self.ab.partition(":")
            return f"A/B: working tree against {what}" + (
                " (another Python)" if side_type == "python" else ""
            )
        if self.fallback:
            return f"{mode}, time (instruction counts where timing cannot decide)"
        return f"{mode}, instruction counts" if self.instructions else mode
