"""Splitting a run's perf tests over processes that run side by side: how many the machine
holds (:func:`auto_jobs`), and the contiguous slice each runs, cut at module boundaries where
that keeps them even (:func:`split_contiguous`). No pytest, no torch.

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

import math
import os
from collections.abc import Sequence
from pathlib import Path

#: Most counting processes ``auto`` picks.
AUTO_JOBS_MAX = 4
#: Memory one counting process is allowed for by ``auto``: a pytest process under Valgrind
#: holding torch, torchvision and the example project's ResNet-18 peaked near 1.8 GB resident.
CHILD_MEMORY_GIB = 3


def module_of(nodeid: str) -> str:
    """The file part of a pytest node id: ``tests/test_a.py::test_x[1]`` -> ``tests/test_a.py``."""
    return nodeid.split("::", 1)[0]


def split_contiguous(
    nodeids: Sequence[str], jobs: int, weights: Sequence[float] | None = None
) -> list[list[str]]:
    """``nodeids`` (in run order) cut into at most ``jobs`` non-empty contiguous slices of
    about equal weight (each test weighs 1 unless ``weights`` says otherwise).

    Each cut goes to the boundary nearest the ideal point (``k/jobs`` of the total weight);
    a module boundary is preferred when it is at most one mean test weight further from the
    ideal than the nearest boundary of any kind (one test more in a slice costs less than
    building a module's fixtures twice, as a rule).
    """
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    ids = list(nodeids)
    if weights is None:
        weights = [1.0] * len(ids)
    if len(weights) != len(ids):
        raise ValueError(f"{len(weights)} weights for {len(ids)} node ids")
    if any(w < 0 for w in weights):
        raise ValueError("weights must not be negative")
    jobs = min(jobs, len(ids))
    if jobs <= 1:
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
    for k in range(1, jobs):
        ideal = total * k / jobs
        # Leave room for the slices still to come: each needs at least one test.
        low = (cuts[-1] if cuts else 0) + 1
        high = len(ids) - (jobs - k)
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


def auto_jobs() -> int:
    """Counting processes for ``auto``: one per CPU this process may use (its affinity and, in a
    container, its cgroup's CPU quota), at most :data:`AUTO_JOBS_MAX`, and no more than the
    available memory (the cgroup's limit too) holds at :data:`CHILD_MEMORY_GIB` each; at least
    one."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _cgroup_cpus()
    jobs = min(cpus, quota if quota is not None else cpus, AUTO_JOBS_MAX)
    available = _available_memory_gib()
    if available is not None:
        jobs = min(jobs, int(available // CHILD_MEMORY_GIB))
    return max(1, jobs)


#: Where a cgroup v2 container's limits are read (the process's own cgroup is mounted here).
CGROUP = Path("/sys/fs/cgroup")


def _cgroup_cpus() -> int | None:
    """CPUs the cgroup's quota allows (``cpu.max``: ``200000 100000`` -> 2), None without one."""
    try:
        quota, period = (CGROUP / "cpu.max").read_text(encoding="ascii").split()[:2]
        return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        return None


def _available_memory_gib() -> float | None:
    """Memory available to new processes, GiB: the smaller of the machine's ``MemAvailable``
    and what the cgroup's ``memory.max`` leaves; None when neither can be read."""
    found: list[float] = []
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) / 2**20)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = (CGROUP / "memory.max").read_text(encoding="ascii").strip()
        if limit != "max":
            used = int((CGROUP / "memory.current").read_text(encoding="ascii").strip())
            found.append((int(limit) - used) / 2**30)
    except (OSError, ValueError):
        pass
    return min(found) if found else None
