"""The steps every measurement shares, plain or side by side with its variants
(:mod:`pytest_torchperf.run.pipeline`, :mod:`pytest_torchperf.run.variant_run`): refusing to time
inside a profiler block, one name per measurement, the timed sampler and its Sample, counters,
the ``--torchperf-graph`` figures. Pytest-free."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.core.stats import summarize
from pytest_torchperf.core.types import Target, UserValue
from pytest_torchperf.judge.samples import Sample
from pytest_torchperf.options.measure_options import MeasureOptions
from pytest_torchperf.run.context import RunContext
from pytest_torchperf.run.state import TestState
from pytest_torchperf.store.sessions import Session

if TYPE_CHECKING:
    from pytest_torchperf.core.graph_types import GraphRecord
    from pytest_torchperf.measure.sampling import RawSamples
    from pytest_torchperf.measure.timing import Measurer


def check_not_profiling(ctx: RunContext, nodeid: str, name: str) -> None:
    """Timing inside a torchperf_profiler block would be inflated: refuse it."""
    if ctx.profiling_depth:
        raise OptionError(
            f"{nodeid}: {name!r} was timed inside a torchperf_profiler block; the profiler adds "
            f"3-25% overhead, so time outside the block and profile in a separate pass"
        )


def claim_name(state: TestState, nodeid: str, name: str, source: str = "torchperf") -> None:
    """Each measurement of a test needs its own name (it is its baseline key); ``source``
    names the fixture whose call is told to give one (``torchperf``, ``timer``)."""
    if name in state.names:
        call = "torchperf_timer(...) block" if source == "timer" else "torchperf(...) call"
        raise OptionError(
            f"{nodeid}: measurement name {name!r} is used twice in this test; give each "
            f"{call} its own name="
        )
    state.names.add(name)


def graph_of(measurer: "Measurer") -> GraphRecord:
    """``--torchperf-graph``: the per-node figures of the measured call, after its timed
    passes (never while timing), under the measurement's own preparation."""
    from pytest_torchperf.measure.node_figures import node_figures

    return node_figures(
        measurer.target, measurer.inputs, measurer.kwargs, measurer.device, measurer.prepared
    )


def graph_beside_baseline(
    ctx: RunContext, graph: dict[str, Any], name: str, sessions: Sequence[Session]
) -> dict[str, Any]:
    """A compare's ``--torchperf-graph`` record with the stored node figures beside its own
    (:func:`pytest_torchperf.judge.node_changes.with_baseline`), or saying why there are none:
    a baseline saved without the option (warned once a run)."""
    from pytest_torchperf.judge.node_changes import with_baseline
    from pytest_torchperf.store.graphs import latest_stored

    stored = latest_stored(sessions)
    if stored:
        return with_baseline(graph, stored)
    if not sessions or not graph.get("exported"):
        return graph
    ctx.warn_once(
        f"--torchperf-graph: the baseline of {name} (and of any other measurement saved without "
        f"the option) has no per-node figures: its graph shows this run's figures, no change, "
        f"and names no block. Save with pytest --torchperf-save --torchperf-graph",
        topic="graph without baseline",
    )
    why = "its baseline was saved without --torchperf-graph: no per-node figures to compare with"
    return {**graph, "no_baseline": why}


def to_sample(raw: RawSamples, on_cpu: bool) -> Sample:
    """A verdict :class:`Sample` from one sampling pass's raw samples."""
    times = tuple(raw.times)
    calibration = summarize(raw.calibration).p25 if raw.calibration else None
    return Sample(
        summarize(times),
        raw.cpu_share if on_cpu else None,
        times,
        calibration,
        neighbour_load=raw.neighbour_load if on_cpu else None,
        queued_share=raw.queued_share if on_cpu else None,
        gpu_clock=raw.gpu_clock,
        settle=None
        if raw.settled is None
        else {"blocks": raw.settle_blocks, "settled": raw.settled},
    )


def sampler(ctx: RunContext, measurer: "Measurer", clock: list[str]) -> Callable[[], Sample]:
    """A function taking one (re-)measurement of ``measurer`` under the timing lock."""
    on_cpu = measurer.device.startswith("cpu")

    def take_sample() -> Sample:
        with ctx.timing_lock(measurer.device):
            timed = measurer.sample()
        clock.append(timed.clock)
        return to_sample(timed.raw, on_cpu)

    return take_sample


def counters_of(
    measurer: "Measurer",
    options: MeasureOptions,
    eager: Target | None = None,
    ops_only: bool = False,
) -> tuple[dict[str, Any] | None, UserValue]:
    """Counters of one call (None when off; ``ops_only``: its ops and dtypes alone) and that
    call's output (for a determinism check)."""
    from pytest_torchperf.measure.accuracy import NO_OUTPUT

    if not options.counters:
        return None, NO_OUTPUT
    return measurer.counters(eager, ops_only)


def model_ops(counters: Mapping[str, Any] | None, options: MeasureOptions) -> dict[str, int] | None:
    """Eager's op counts, as every other variant of the call keeps them (``model_ops`` in its
    counters): a variant's own counters count its graphs (compiled) or nothing (amp, fused,
    int8), so without them an edit of the model that leaves its outputs alone (``h + 0 * a(x)``)
    went unseen by a variant item's save, which appended the new code's time to the old code's
    sessions, and by its compare. None where counters are off, ops ignored, or eager itself runs
    low-precision code (whose ops depend on the CPU class)."""
    from pytest_torchperf.judge.counter_diff import low_precision

    if not counters or "ops" in options.ignore_counters or low_precision(counters):
        return None
    return dict(counters.get("ops") or {}) or None
