"""The A/B controller's variants: each variant of a test as the two sides measured it
(:func:`pytest_torchperf.kinds.ab.run_data.ab_measured`), for the variant run to conclude; nothing
is rebuilt in the controller. Apart from :mod:`pytest_torchperf.kinds.ab.run_data` (which the
pipeline imports). Pytest-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_torchperf.kinds.ab.run_data import ABMissing, ABSkipped, ABState, ab_measured
from pytest_torchperf.options.measure_options import MeasureOptions
from pytest_torchperf.run.context import RunContext
from pytest_torchperf.run.result import Result
from pytest_torchperf.run.state import Measured, TestState
from pytest_torchperf.run.steps import disabled_result


def variants_from_sides(
    ctx: RunContext,
    state: TestState,
    nodeid: str,
    name: str,
    labels: Mapping[str, str],
    eager: Any,
    options: MeasureOptions,
) -> dict[str, Result | Measured]:
    """The A/B controller: each variant as the two sides measured it, to be concluded (nothing
    is rebuilt here; ``labels`` maps each variant to its measurement name); a variant missing
    from the sides is a failed, untimed Result."""
    data = ctx.state(ABState).data
    assert data is not None, "only the A/B controller builds variants from the sides"
    eager.check_outputs(name)
    results: dict[str, Result | Measured] = {}
    for variant, label in labels.items():
        try:
            results[variant] = ab_measured(data, nodeid, label, eager, "torchperf")
        except ABSkipped as exc:
            # Side B could not take this variant (unavailable there): as a plain run does, the
            # test skips when it is its only variant, else the variant is left out with a note.
            if len(labels) == 1:
                raise
            state.skipped[label] = str(exc).split(": not measured: ", 1)[-1]
            state.warnings.append(str(exc))
        except ABMissing as exc:
            state.failures.append(str(exc))
            results[variant] = disabled_result(
                state, nodeid, label, eager.device, options, "torchperf", variant
            )
    return results
