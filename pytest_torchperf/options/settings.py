"""Run-wide settings from the command line and ini file (no torch, no heavy imports).

Kept apart from :mod:`pytest_torchperf.run` so that ``pytest_configure`` can record them
without importing the measuring machinery: a pytest run without perf tests never loads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

S = TypeVar("S")

#: Where a strict measurement's strictness came from when neither the command line nor the ini
#: file made it strict.
MARKER_STRICT = "strict=True of a marker or torchperf(...) call"


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
    #: ``--torchperf-json PATH`` as given: the results file (a graph's why line says to draw it).
    results_file: str | None = None
    #: ``--torchperf-variants`` / ini ``torchperf_variants``: only these variants run (None = all).
    variant_filter: tuple[str, ...] | None = None
    #: Where the filter was set, as its messages name it (the option, or the ini key).
    variant_filter_from: str = "--torchperf-variants"
    #: pytest was started in its rootdir, so a test id as it reports them (relative to the
    #: rootdir) selects the test on a command line typed there: a remedy may name the test's own
    #: save (``pytest tests/test_m.py::test_mlp --torchperf-save``), else the plain one.
    ids_from_here: bool = True
    #: ``--torchperf-processes``: fresh processes each target is measured in (1 = this one only).
    processes: int = 1
    #: A plain save, which appends to the stored sessions (no ``--torchperf-reset``, no compare):
    #: a measurement of other code than theirs is refused. A fresh process keeps its
    #: controller's (its own save is off), so it times no retry of what will be refused.
    appends: bool = False
    #: This run is a child of a ``--torchperf-processes`` run: it only measures (see
    #: :mod:`pytest_torchperf.pytest_plugin.child_runs`).
    child: bool = False
    #: ``--torchperf-confirm``: a suspected slowdown is re-measured in a ``fresh`` process or the
    #: ``same`` one.
    confirm: str = "fresh"
    #: ``--torchperf-save-wait``: seconds this process of a save may spend waiting for a busy
    #: machine to quiet down and measuring a refused pass again (the run's budget over its
    #: processes).
    save_wait: float = 60.0
    #: The measurement kinds' own run settings (declared in their options parts, parsed by their
    #: plugin parts' ``settings(config)``: an instruction-count run's, an A/B run's), read with
    #: :meth:`of`.
    sections: tuple[Any, ...] = ()

    def of(self, section: type[S]) -> S:
        """A kind's run settings (``settings.of(ABSettings)``; its defaults when not set)."""
        found = next((s for s in self.sections if isinstance(s, section)), None)
        return found if found is not None else section()

    @property
    def strict_by(self) -> str:
        """What made a measurement strict, as a message names it: the flag, else the ini key,
        where the one that decides says true; else its marker's or call's ``strict=True``."""
        for layer, name in ((self.cli, "--torchperf-strict"), (self.ini, "ini torchperf_strict")):
            if layer.get("strict") is not None:
                return name if layer["strict"] else MARKER_STRICT
        return MARKER_STRICT

    @property
    def strict_run(self) -> str | None:
        """What makes the run strict as a whole, as a message names it: ``--torchperf-strict``,
        else the ini key, where the one that decides says true; None otherwise. Only such a run
        fails a compare that judged timing for fewer than half of its measurements: a marker's
        or call's ``strict=True`` is its own measurements' (their inconclusive verdicts fail)."""
        for layer, name in ((self.cli, "--torchperf-strict"), (self.ini, "ini torchperf_strict")):
            if layer.get("strict") is not None:
                return name if layer["strict"] else None
        return None

    @property
    def compares(self) -> bool:
        """This run judges its measurements (``--torchperf-compare``, or a kind's run that
        always compares, such as an A/B run)."""
        return self.compare or any(getattr(s, "compares", False) for s in self.sections)

    @property
    def active(self) -> bool:
        """This run does more than run the perf tests as tests (a header is worth printing)."""
        return (
            self.save
            or self.compare
            or self.disable
            or any(getattr(s, "active", False) for s in self.sections)
        )

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
        mode = "+".join(parts) if parts else "measure only (baselines not read)"
        # A kind's run says what it does instead (the first that does, in the registry's order).
        for section in self.sections:
            describe = getattr(section, "describe", None)
            described = describe(mode) if describe is not None else None
            if described:
                return str(described)
        return mode
