"""Summary statistics of per-call times.

Pure Python (no numpy, no torch) so the comparison logic can be unit-tested with synthetic samples
and so loading stored baselines never needs torch. Quantiles use linear interpolation between
order statistics (numpy's default, "type 7"), so figures match what users compute in a notebook.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

#: Factor that turns a median absolute deviation into a standard-deviation estimate for normal data.
MAD_TO_SIGMA = 1.4826


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Return the ``q`` quantile (0..1) of already sorted values, linear interpolation."""
    if not sorted_values:
        raise ValueError("quantile of an empty sample")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be within [0, 1], got {q}")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


@dataclass(frozen=True)
class Summary:
    """Summary of one measurement's per-call times, all in seconds."""

    n: int
    min: float
    p25: float
    median: float
    p75: float
    max: float
    mean: float

    @property
    def iqr(self) -> float:
        """Inter-quartile range (p75 - p25)."""
        return self.p75 - self.p25

    @property
    def relative_iqr(self) -> float:
        """IQR / median: the within-measurement spread torch.utils.benchmark warns about (>0.10, >0.25)."""
        return self.iqr / self.median if self.median > 0 else math.inf

    def to_dict(self) -> dict[str, float]:
        """JSON-friendly dict, including the derived IQR."""
        data = asdict(self)
        data["iqr"] = self.iqr
        return data


class InvalidSamplesError(ValueError):
    """Raised when per-call times are empty, non-finite or not positive."""


def summarize(samples: Iterable[float]) -> Summary:
    """Summarise per-call times (seconds). Rejects empty, NaN, inf and non-positive values."""
    values = sorted(float(v) for v in samples)
    if not values:
        raise InvalidSamplesError("no timing samples were collected")
    bad = [v for v in values if not math.isfinite(v) or v <= 0.0]
    if bad:
        raise InvalidSamplesError(
            f"{len(bad)} of {len(values)} timing samples are not finite positive numbers "
            f"(e.g. {bad[0]!r}); the clock or the timed block is broken"
        )
    return Summary(
        n=len(values),
        min=values[0],
        p25=quantile(values, 0.25),
        median=quantile(values, 0.5),
        p75=quantile(values, 0.75),
        max=values[-1],
        mean=statistics.fmean(values),
    )


def robust_cv(values: Sequence[float]) -> float:
    """Robust coefficient of variation: 1.4826 * MAD / median (0 for fewer than 2 values)."""
    if len(values) < 2:
        return 0.0
    med = statistics.median(values)
    if med <= 0:
        return math.inf
    mad = statistics.median(abs(v - med) for v in values)
    return MAD_TO_SIGMA * mad / med
