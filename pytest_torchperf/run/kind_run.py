"""What a measurement kind's run part gives (``RUN`` in each ``kinds/<kind>/run.py``): a
:class:`KindRun` (when the kind is chosen for a measurement, what it measures beside the timed
pass, its role, its bisect mode, ...), with its :class:`Keeping` (where its sessions are filed,
whether the time guards refuse its save, what it adds to the Result or why it must not be
saved). Which kind a measurement is, found through these, is :mod:`pytest_torchperf.run.kinds`.
Pytest-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_torchperf.core.types import JSONObject

if TYPE_CHECKING:
    from pytest_torchperf.judge.samples import Sample
    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.bisect_mode import BisectMode
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.result import Result
    from pytest_torchperf.run.roles import Role
    from pytest_torchperf.run.state import Measured, TestState

#: Why a measurement is not saved: (short reason for the results, warning or "").
Unsaved = tuple[str, str]


class Keeping:
    """What a kind keeps by default (time, A/B pairs, the GPU kernel time, which rides in the
    timing session): filed under the timing environment, its save guarded by the timing guards;
    nothing is added."""

    #: The save is refused when the pass was disturbed (calibration, neighbours, spread).
    guards_time = True

    def environment(
        self, ctx: RunContext, env_id: str, environment: JSONObject
    ) -> tuple[str, JSONObject]:
        return env_id, environment

    def attach(
        self,
        ctx: RunContext,
        state: TestState,
        m: Measured,
        result: Result,
        comparing: bool,
        saving: bool,
    ) -> Unsaved | None:
        """Add what this kind measured besides time to ``result``; returns why it must not be
        saved, or None."""
        return None


#: Whether a kind is chosen for a measurement: ``(ctx, options, device, gate)``, where ``gate``
#: says the measurement is judged at all (a fixture's helper call is measured, never gated).
Chooser = Callable[["RunContext", "MeasureOptions", str, bool], bool]
#: What a kind measures beside the timed pass, after the first one and never during it, as the
#: session keys that hold it (the GPU kernel time: ``kernels``, or ``unprofiled`` saying why not).
Beside = Callable[["Measurer", "Sample"], JSONObject]


@dataclass(frozen=True)
class KindRun:
    """A measurement kind's run part."""

    keeping: Keeping
    chosen: Chooser
    beside: Beside | None = None
    #: The kind's own data on the measurement's record before it is judged, as the keys
    #: :attr:`pytest_torchperf.kinds.KindSpec.record_keys` names (under ``session``: those of
    #: ``session_keys``): the engine's candidate is built from the record, as a replay of the
    #: results file builds it (:meth:`pytest_torchperf.judge.inputs.Candidate.from_record`).
    record_fields: Callable[[RunContext, Measured], JSONObject] = lambda ctx, m: {}
    #: The role this process plays for the kind, from how the plugin set up the context (a
    #: counting child, an A/B side), or None (:func:`pytest_torchperf.run.kinds.role_of`).
    role: Callable[[RunContext], Role | None] = lambda ctx: None
    #: Adjusts a measurement's resolved options for the run it is in, whatever its kind
    #: (``(ctx, options, layers)``, the layers the options were resolved from, highest first:
    #: the call's, the marker's, the command line's, the ini file's): an A/B run's defaults.
    adjust_options: Callable[
        [RunContext, MeasureOptions, tuple[Mapping[str, object], ...]], MeasureOptions
    ] = lambda ctx, options, layers: options
    #: The gate facts (:attr:`pytest_torchperf.kinds.KindSpec.gate_facts`) it sets for any
    #: measurement of the run (an A/B run: ``ab``, side A).
    gate_fields: Callable[[RunContext], JSONObject] = lambda ctx: {}
    #: How ``torchperf bisect --mode <its name>`` runs and judges a revision by this kind's
    #: figure (None: the kind gives no bisect mode).
    bisect: BisectMode | None = None
    #: Why its run must not save a measurement of another kind (``(ctx, m, kind)``; None: it
    #: may): asked of every kind for every measurement, as :attr:`adjust_options` is (an
    #: instruction-count run refuses what it timed beside its Valgrind children).
    refuses_save: Callable[[RunContext, Measured, str], Unsaved | None] = lambda ctx, m, kind: None
    #: Why a measurement of this kind cannot be taken on a device (``(device, label)``), or None:
    #: the test is skipped with it.
    unmeasurable: Callable[[str, str], str | None] = lambda device, label: None
    #: Whether a failing verdict judged on this kind's figure (its basis: the kind's name) is
    #: explained by profiling the variant's call in this process (``(variant)``): a time is,
    #: a count is not.
    explains_slowdown: Callable[[str], bool] = lambda variant: False
