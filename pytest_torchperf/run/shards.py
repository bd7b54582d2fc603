"""Splitting a run's perf tests over processes that run side by side: contiguous shards, cut at
module boundaries where that keeps the shards even. Pure: no pytest, no torch.

Used by ``--torchperf-instructions``, whose counting processes under Valgrind are CPU-bound and
single-threaded (Valgrind runs one thread at a time), so N of them on N cores take about 1/N of
the time, while their counts do not depend on what runs beside them.

Why contiguous, in collection order: each process then runs a slice of the order a plain run
would, so module- and session-scoped fixtures are built once per process that needs them, and a
test's history in its process (what ran before it) is a prefix of its history in a plain run.
Why module boundaries: a module's tests usually share fixtures (a model built once per module);
cutting inside a module builds them twice.
"""

from __future__ import annotations

from collections.abc import Sequence


def module_of(nodeid: str) -> str:
    """The file part of a pytest node id: ``tests/test_a.py::test_x[1]`` -> ``tests/test_a.py``."""
    return nodeid.split("::", 1)[0]


def split_contiguous(
    nodeids: Sequence[str], shards: int, weights: Sequence[float] | None = None
) -> list[list[str]]:
    """``nodeids`` (in run order) cut into at most ``shards`` non-empty contiguous slices of
    about equal weight (each test weighs 1 unless ``weights`` says otherwise).

    Each cut goes to the boundary nearest the ideal point (``k/shards`` of the total weight);
    a module boundary is preferred when it is at most one mean test weight further from the
    ideal than the nearest boundary of any kind (one test more in a shard costs less than
    building a module's fixtures twice, as a rule).
    """
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    ids = list(nodeids)
    if weights is None:
        weights = [1.0] * len(ids)
    if len(weights) != len(ids):
        raise ValueError(f"{len(weights)} weights for {len(ids)} node ids")
    if any(w < 0 for w in weights):
        raise ValueError("weights must not be negative")
    shards = min(shards, len(ids))
    if shards <= 1:
        return [ids] if ids else []
    total = float(sum(weights))
    if total <= 0:
        weights, total = [1.0] * len(ids), float(len(ids))
    # cumulative[i]: the weight before boundary i (boundary i cuts between test i-1 and test i).
    cumulative = [0.0]
    for weight in weights:
        cumulative.append(cumulative[-1] + weight)
    slack = total / len(ids)
    cuts: list[int] = []
    for k in range(1, shards):
        ideal = total * k / shards
        # Leave room for the shards still to come: each needs at least one test.
        low = (cuts[-1] if cuts else 0) + 1
        high = len(ids) - (shards - k)
        candidates = range(low, high + 1)
        nearest = min(candidates, key=lambda i: abs(cumulative[i] - ideal))
        at_module = [i for i in candidates if module_of(ids[i - 1]) != module_of(ids[i])]
        best = nearest
        if at_module:
            module_cut = min(at_module, key=lambda i: abs(cumulative[i] - ideal))
            if abs(cumulative[module_cut] - ideal) <= abs(cumulative[nearest] - ideal) + slack:
                best = module_cut
        cuts.append(best)
    bounds = [0, *cuts, len(ids)]
    return [ids[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]
