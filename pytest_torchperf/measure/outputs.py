"""What a target's outputs say beyond time: their fingerprint and the user's metric on them.

Both are stored with baselines and compared across runs (:mod:`pytest_torchperf.judge.drift`): a
fingerprint catches "numerics changed", the metric a drop in what the user cares about (e.g.
accuracy).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.core.types import JSONObject, UserValue
from pytest_torchperf.options.measure_options import MeasureOptions

if TYPE_CHECKING:  # torch (which timing imports) is imported lazily
    from pytest_torchperf.measure.timing import Measurer

#: Two calls whose outputs differ by more than this (relative) are nondeterministic: their
#: fingerprint is not stored, so random outputs never raise "numerics changed".
DETERMINISM_TOLERANCE = 1e-6

#: Marks "no second output captured" (``None`` is a legitimate output).
NO_OUTPUT = object()


def output_fingerprint(
    output: UserValue, again: UserValue, measurer: Measurer
) -> JSONObject | None:
    """Output fingerprint, or None when two calls disagree (random outputs cannot be gated).

    ``again`` is a second call's output, or :data:`NO_OUTPUT` to make one with ``measurer``.
    """
    from pytest_torchperf.measure.accuracy import fingerprint, fingerprint_drift

    first = fingerprint(output)
    if again is NO_OUTPUT:
        again = measurer.run_once()
    # A compiled target's second output comes from its eager original: allow rounding noise.
    drift, problem = fingerprint_drift(first, fingerprint(again))
    return first if problem is None and drift <= DETERMINISM_TOLERANCE else None


def user_metric(measurer: Measurer, options: MeasureOptions, label: str) -> float | None:
    """The user metric ``metric(outputs, targets)`` on ``data`` for this target (or None)."""
    __tracebackhide__ = True
    if options.metric is None:
        return None
    if options.data is None:
        raise OptionError(f"{label}: metric= needs data=(inputs, targets) to compute it on")
    data_inputs, targets = options.data
    args = data_inputs if isinstance(data_inputs, (tuple, list)) else (data_inputs,)
    with measurer.prepared():
        outputs = measurer.target(*args)
    value = options.metric(outputs, targets)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise OptionError(
            f"{label}: metric= returned {value!r}; it must return a number "
            f"(e.g. accuracy as a float)"
        ) from None
    if not math.isfinite(number):
        raise OptionError(f"{label}: metric= returned {number} (not finite)")
    return number
