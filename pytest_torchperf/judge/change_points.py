"""Steps in a measurement's history: the change points of a series of runs over commits.

A slowdown of 3 % a week passes every per-pull-request gate; in the series of main's runs it is
a step. The method is binary segmentation (Scott and Knott, 1974), the search that Hunter/Otava
and MongoDB's CI analysis run over their series too, with a robust two-sample test in place of
their means:

* values are compared as logarithms, so a step is relative (+5 % is the same step at 1 ms and
  at 100 ms) and multiplicative noise is additive;
* the noise is estimated once per series from the successive differences (the median absolute
  difference, scaled to a standard deviation): a few steps and outliers in the series hardly
  move it, where the series' own spread would count every step as noise;
* a segment's best split is where the two sides deviate least from their own medians (least
  absolute deviations: one slow process, a runner hiccup, moves a median by one rank, a mean by
  its whole size); it is a step when the two medians are ``threshold`` standard errors apart
  or more and differ by ``min_step`` or more, and then both sides are searched again;
* each side keeps ``min_segment`` runs or more, so a lone outlier is never a step, and a step
  is found ``min_segment`` runs after it at the earliest.

``threshold`` is set from the measured noise of real processes (benchmarks/history_steps.py,
docs/history.md): the false change points per 100 runs of unchanged code it allows, and what
it costs in detection. Pure: numbers in, steps out.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: A split's statistic (the step over its standard error) needed to call it a step.
THRESHOLD = 5.0
#: Runs on each side of a step, at least.
MIN_SEGMENT = 3
#: Relative steps smaller than this are not reported, however sure: instruction counts of
#: unchanged code repeat within 0.05 %, so a 0.5 % step in them is found and a 0.1 % one is not
#: worth a look (time never resolves either).
MIN_STEP = 0.002
#: The smallest relative noise assumed: instruction counts of unchanged code can repeat to the
#: instruction, which would make any difference infinitely sure.
NOISE_FLOOR = 1e-4
#: A run this many noise units (or more) from its side's level is read as a possible outlier
#: when it is next to a step: the step may then be on its other side (one run earlier or later).
OUTLIER = 3.0
#: A run next to a step whose distances to the two levels differ by less than this many noise
#: units fits either side: the step may be on its other side too.
AMBIGUOUS = 1.0
#: Standard error of a median over that of a mean, for normal noise (sqrt(pi / 2)).
_MEDIAN_SE = math.sqrt(math.pi / 2)


@dataclass(frozen=True)
class Step:
    """A change point: the series moved from one level to another between two runs."""

    #: Index of the first run after the step.
    index: int
    #: Median of the runs before the step and after it (within their segments).
    before: float
    after: float
    #: The step (in log units) over its standard error.
    score: float
    #: The first runs after the step it may also be at (``index`` when the series says no
    #: more): a run next to the step that lies :data:`OUTLIER` noise units or more from its own
    #: side's level may be an outlier of the other side, the step one run beyond it.
    earliest: int | None = None
    latest: int | None = None

    @property
    def candidates(self) -> range:
        """Each index the first run after the step may have: ``index`` and any neighbour that
        an outlier makes as likely."""
        first = self.index if self.earliest is None else self.earliest
        last = self.index if self.latest is None else self.latest
        return range(first, last + 1)

    @property
    def change(self) -> float:
        """Relative change, e.g. 0.05 for 5 % higher after the step."""
        return self.after / self.before - 1.0


def noise(values: Sequence[float]) -> float:
    """The series' relative noise between successive runs (a standard deviation of log values),
    robust to steps and outliers; at least :data:`NOISE_FLOOR`."""
    logs = [math.log(v) for v in values]
    diffs = [abs(b - a) for a, b in itertools.pairwise(logs)]
    if not diffs:
        return NOISE_FLOOR
    return max(1.4826 * statistics.median(diffs) / math.sqrt(2), NOISE_FLOOR)


def _either(value: float, own: float, other: float, sigma: float, one_sided: bool) -> bool:
    """Whether a run next to a step (log ``value``, on the side of level ``own``) could as well
    be the other side's: it lies :data:`OUTLIER` noise units or more from its own level toward
    the other, or beyond both on the side ``one_sided`` noise adds to, or either way where it is
    not one-sided, or within :data:`AMBIGUOUS` noise units of being as near the other level.

    Raw times are one-sided: a disturbance only ever adds time, so a slow outlier may be a run of
    either side, while one below both levels is the faster side's own (a newcomer's history
    offered a run 80 % under the slow level as where a slowdown may have begun). Instruction
    counts, and times over the machine's speed (a slowed calibration kernel reads them low),
    are not."""
    near, far = abs(value - own), abs(value - other)
    possible = (value - own) * (other - own) > 0 or not one_sided or value > max(own, other)
    return (possible and near >= OUTLIER * sigma) or far - near < AMBIGUOUS * sigma


def _deviation(values: Sequence[float]) -> float:
    middle = statistics.median(values)
    return sum(abs(v - middle) for v in values)


def change_points(
    values: Sequence[float],
    *,
    threshold: float = THRESHOLD,
    min_step: float = MIN_STEP,
    min_segment: int = MIN_SEGMENT,
    one_sided: bool = False,
) -> list[Step]:
    """The steps of a series of positive values (times, instruction counts), in run order;
    ``one_sided``: its noise only adds (raw times), which decides which outliers next to a step
    may be the other side's."""
    if any(not (v > 0) or math.isinf(v) for v in values):
        raise ValueError("change points need positive, finite values")
    logs = [math.log(v) for v in values]
    sigma = noise(values)
    found: list[Step] = []

    def search(lo: int, hi: int) -> None:
        if hi - lo < 2 * min_segment:
            return
        # Where: the split that leaves the least absolute deviation from the two sides' medians
        # (the comparison of medians alone is flat near a step and can miss it by a run or two,
        # which would name the wrong commits).
        k = min(
            range(lo + min_segment, hi - min_segment + 1),
            key=lambda k: _deviation(logs[lo:k]) + _deviation(logs[k:hi]),
        )
        # Whether: the two medians apart by `threshold` standard errors or more.
        left, right = statistics.median(logs[lo:k]), statistics.median(logs[k:hi])
        score = abs(right - left) / (sigma * _MEDIAN_SE * math.sqrt(1 / (k - lo) + 1 / (hi - k)))
        if score < threshold or abs(math.exp(right - left) - 1) < min_step:
            return
        found.append(Step(k, math.exp(left), math.exp(right), score))
        search(lo, k)
        search(k, hi)

    search(0, len(logs))
    found.sort(key=lambda step: step.index)
    # Each step's levels and score are those of its neighbouring segments (between the steps
    # around it), not of the wider segment it was first found in; a step that no longer passes
    # there is dropped (one pass: the segments around it are then joined as they stand).
    bounds = [0, *(s.index for s in found), len(logs)]
    steps = []
    for i, step in enumerate(found):
        lo, hi = bounds[i], bounds[i + 2]
        left = statistics.median(logs[lo : step.index])
        right = statistics.median(logs[step.index : hi])
        error = sigma * _MEDIAN_SE * math.sqrt(1 / (step.index - lo) + 1 / (hi - step.index))
        score = abs(right - left) / error
        if score >= threshold and abs(math.exp(right - left) - 1) >= min_step:
            # The runs either side of the step decide where it is; one far from its own side's
            # level (a slow spell of the runner, a retried job) could as well be the other
            # side's: one run of the history said so, and the commit range should too.
            k = step.index
            earliest = (
                k - 1
                if k - 1 > lo and _either(logs[k - 1], left, right, sigma, one_sided)
                else None
            )
            latest = (
                k + 1 if k + 1 < hi and _either(logs[k], right, left, sigma, one_sided) else None
            )
            steps.append(
                Step(k, math.exp(left), math.exp(right), score, earliest=earliest, latest=latest)
            )
    return steps
