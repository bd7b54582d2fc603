"""Measurements taken in other processes: child runs of ``--torchperf-processes N`` and the fresh
processes that confirm a suspected slowdown.

Why: on a shared runner the noise that matters is between processes (memory layout, allocator
state, neighbours), not between the blocks of one process (process-to-process CV 3-4 % vs a
within-run IQR of 2 % on a quiet 2-vCPU VM; far more on a busy one, docs/reliability.md).

How: the controlling pytest run starts child pytest runs (same arguments, plus
``--torchperf-child FILE``; see :mod:`pytest_torchperf.pytest_plugin.child_runs`). Each child runs
only the perf tests (or only the one test it confirms), judges nothing, saves nothing, and
appends one JSON line per measurement to its file (:class:`ChildSink`). The controller reads them
back (:func:`read_child_file`, :func:`merge`), pools them with its own pass
(:func:`pytest_torchperf.judge.samples.pooled`) and, with ``--torchperf-save``, stores one session
per process (:func:`child_session_records`). :class:`FreshRuns` hands out the confirming runs.

No pytest, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from pytest_torchperf.core.child_protocol import (
    ChildLine,
    SampleLine,
    append_message,
    read_messages,
)
from pytest_torchperf.core.stats import summarize
from pytest_torchperf.core.types import JSON
from pytest_torchperf.judge.samples import Sample, trusted
from pytest_torchperf.store.sessions import Session

#: Key of one measurement in the children's files: (nodeid, measurement name).
Key = tuple[str, str]


def concurrent_child_args(folder: Path, args: Sequence[str]) -> list[str]:
    """Arguments that keep a child pytest from getting in the way of others running at the same
    time (A/B sides, counting processes): its own ``--basetemp`` and cache folder under
    ``folder`` (pytest clears ``--basetemp`` when it starts; two caches written at once can tear),
    and no pytest-randomly, so it runs its tests in collection order whatever ``args`` say.
    Creates ``folder`` (pytest creates ``--basetemp`` but not its parent)."""
    folder.mkdir(parents=True, exist_ok=True)
    cache = (
        []
        if any("no:cacheprovider" in a for a in args)
        else ["-o", f"cache_dir={folder / 'cache'}"]
    )
    return [f"--basetemp={folder / 'tmp'}", *cache, "-p", "no:randomly"]


class ChildSink:
    """Where a child process writes its messages (:mod:`pytest_torchperf.core.child_protocol`):
    one line each, appended and flushed.

    Appending line by line means a child that crashes half way still leaves the targets it did
    measure, and a torn last line is skipped by :func:`read_child_file`.
    """

    def __init__(self, path: Path, process: int) -> None:
        self.path = Path(path)
        self.process = process

    def write(
        self,
        nodeid: str,
        name: str,
        sample: Sample,
        problem: str | None,
        speedup: Mapping[str, float] | None = None,
        beside: Mapping[str, JSON] | None = None,
        waited: float | None = None,
    ) -> None:
        self.send(
            SampleLine(
                nodeid,
                name,
                self.process,
                tuple(sample.times),
                sample.cpu_share,
                sample.calibration,
                problem,
                sample.neighbour_load,
                speedup,
                beside,
                sample.queued_share,
                waited,
            )
        )

    def send(self, message: ChildLine) -> None:
        """Append ``message``'s line and flush it to disk."""
        append_message(self.path, message)


def read_child_file(path: Path) -> dict[Key, SampleLine]:
    """The timed passes one fresh process wrote (a torn or foreign line, or one without
    times, is skipped)."""
    return {
        (line.nodeid, line.name): line for line in read_messages(path, (SampleLine,)) if line.times
    }


def merge(per_child: Iterable[Mapping[Key, SampleLine]]) -> dict[Key, list[SampleLine]]:
    """All children's measurements by target, in process order."""
    merged: dict[Key, list[SampleLine]] = {}
    for found in per_child:
        for key, sample in found.items():
            merged.setdefault(key, []).append(sample)
    return merged


class FreshRuns:
    """The fresh pytest processes a comparing run starts to confirm suspected slowdowns.

    ``runner(nodeid)`` runs test ``nodeid`` once more in a new pytest process and returns its
    measurements. The k-th confirming pass of any measurement of a test comes from that test's
    k-th fresh run, started on first need, so one run serves all the measurements of a test.
    """

    def __init__(self, runner: Callable[[str], Mapping[Key, SampleLine]]) -> None:
        self.runner = runner
        self.runs: dict[str, list[Mapping[Key, SampleLine]]] = {}

    def get(self, nodeid: str, k: int) -> Mapping[Key, SampleLine]:
        """The measurements of the ``k``-th (0-based) fresh run of test ``nodeid``."""
        runs = self.runs.setdefault(nodeid, [])
        while len(runs) <= k:
            runs.append(self.runner(nodeid))
        return runs[k]


def fresh_confirmer(
    fresh: FreshRuns | None, nodeid: str, name: str, device: str, passes: list[Sample]
) -> Callable[[], Sample | None] | None:
    """The confirming passes of a suspected slowdown, taken in fresh processes (or None).

    Each call takes the next fresh run of the test; the pass is appended to ``passes`` (reports
    and the offline judge see it). A call gives None when that fresh process did not measure this
    name, and the verdict then confirms in this process.
    """
    if fresh is None:
        return None
    taken = [0]

    def confirm() -> Sample | None:
        found = fresh.get(nodeid, taken[0]).get((nodeid, name))
        taken[0] += 1
        if found is None:
            return None
        on_cpu = device.startswith("cpu")
        sample = Sample(
            summarize(found.times),
            found.cpu_share if on_cpu else None,
            tuple(found.times),
            found.calibration,
            neighbour_load=found.neighbour_load if on_cpu else None,
            fresh=True,
            queued_share=found.queued_share if on_cpu else None,
        )
        passes.append(sample)
        return sample

    return confirm


def fresh_speedups(
    fresh: FreshRuns | None, nodeid: str, name: str, count: int
) -> Callable[[], list[dict[str, float] | None]] | None:
    """The speedups vs eager that ``count`` fresh runs of the test measured for ``name`` (None
    for a run that did not measure it: it cannot confirm)."""
    if fresh is None:
        return None

    def speedups() -> list[dict[str, float] | None]:
        found = [fresh.get(nodeid, k).get((nodeid, name)) for k in range(count)]
        return [dict(f.speedup) if f is not None and f.speedup else None for f in found]

    return speedups


def child_session_records(
    record: Session,
    others: Iterable[SampleLine],
    run_id: str,
    beside_keys: Iterable[str] = (),
) -> list[Session]:
    """Sessions for the trusted child measurements, derived from this process's session.

    Counters and fingerprints are deterministic, so they are copied; the timing fields, a
    variant's speedup (each process measures its own, as it measures its own time) and what the
    kind measured beside the timed pass (``beside_keys`` in this process's record: a GPU's kernel
    time, whose spread is its process noise; nothing where that process measured none) are the
    child's own. What only this process measured is not the child's: its GPU clocks while timing,
    the per-node figures of --torchperf-graph and the op table. Each gets its own ``run_id``
    suffix so reports can tell the sessions of one multi-process save apart.
    """
    records = []
    beside_keys = tuple(beside_keys)
    for sample in trusted(others):
        summary = summarize(sample.times)
        child = record.updated(
            {
                "run_id": f"{run_id}-p{sample.process}",
                "statistic": summary.p25,
                "stats": {
                    k: v if k == "n" else float(f"{v:.6g}") for k, v in summary.to_dict().items()
                },
                "times": [float(f"{t:.6g}") for t in sample.times],
                "cpu_share": None if sample.cpu_share is None else round(sample.cpu_share, 4),
                "calibration": None
                if sample.calibration is None
                else float(f"{sample.calibration:.6g}"),
                "neighbour_load": None
                if sample.neighbour_load is None
                else round(sample.neighbour_load, 3),
                "process": sample.process,
                "speedup": dict(sample.speedup) if sample.speedup else None,
                **{key: None for key in beside_keys},
                **(sample.beside or {}),
            }
        )
        records.append(child.without("gpu_clock", "settle", "nodes", "graph", "top_ops"))
    return records
