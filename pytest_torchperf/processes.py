"""Multi-process measurement (``--torchperf-processes N``): pooling samples from fresh processes.

Why: on a shared runner the noise that matters is between processes (memory layout, allocator
state, neighbours), not between the blocks of one process (STATS.md §1: session CV 3-4 % vs
within-session IQR 2 %). Judging the median of N processes' statistics shrinks that noise by about
sqrt(N), which is what a 5-10 % gate needs (STATS.md §3.3: 3 candidate vs 5 baseline processes
caught +10 % 83-89 %).

How: the controlling pytest run starts N-1 child pytest runs one after another (same arguments,
plus ``--torchperf-child FILE``; see :mod:`.process_items`). Each child runs only the perf tests,
measures every target once (so targets are interleaved across processes, never timed back to
back), judges nothing, saves nothing, and appends one JSON line per measurement to its file. The
controller then runs as usual; its own measurement of each target is pooled with the children's
(:func:`pooled`), judged once, and with ``--torchperf-save`` stored as N sessions
(:func:`child_session_records`).

Pure logic: no pytest, no torch.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from .stats import summarize
from .verdict import Sample

#: Key of one measurement in the children's files: (nodeid, measurement name).
Key = tuple[str, str]


@dataclass(frozen=True)
class ProcessSample:
    """One child process's measurement of one target."""

    process: int
    times: tuple[float, ...]
    cpu_share: float | None
    calibration: float | None
    #: Why the guard rejected it (after the child's own re-measure), or None when trustworthy.
    problem: str | None = None
    #: Share of the other CPUs other processes kept busy meanwhile (None: not measured).
    neighbour_load: float | None = None

    @property
    def statistic(self) -> float:
        """p25 of the per-call times, the statistic every verdict compares."""
        return summarize(self.times).p25

    def to_json(self, nodeid: str, name: str) -> str:
        return json.dumps({"nodeid": nodeid, "name": name, "process": self.process,
                           "times": list(self.times), "cpu_share": self.cpu_share,
                           "calibration": self.calibration, "problem": self.problem,
                           "neighbour_load": self.neighbour_load})


def same_run(session_run_id: str | None, run_id: str | None) -> bool:
    """Whether a stored session was saved by run ``run_id`` (its own or one of its child
    processes', ``<run_id>-p<k>``): a run's own sessions are never its baseline or history."""
    if not session_run_id or not run_id:
        return False
    return session_run_id.split("-p", 1)[0] == run_id.split("-p", 1)[0]


class ChildSink:
    """Where a child process writes its measurements: one JSON line each, appended and flushed.

    Appending line by line means a child that crashes half way still leaves the targets it did
    measure, and a torn last line is skipped by :func:`read_child_file`.
    """

    def __init__(self, path: Path, process: int) -> None:
        self.path = Path(path)
        self.process = process

    def write(self, nodeid: str, name: str, sample: Sample, problem: str | None) -> None:
        record = ProcessSample(self.process, tuple(sample.times), sample.cpu_share,
                               sample.calibration, problem, sample.neighbour_load)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(record.to_json(nodeid, name) + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def read_child_file(path: Path) -> dict[Key, ProcessSample]:
    """The measurements one child wrote (a torn or foreign line is skipped, not fatal)."""
    found: dict[Key, ProcessSample] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return found
    for line in lines:
        try:
            data = json.loads(line)
            times = tuple(float(t) for t in data["times"])
            if not times:
                continue
            found[(str(data["nodeid"]), str(data["name"]))] = ProcessSample(
                int(data["process"]), times, data.get("cpu_share"), data.get("calibration"),
                data.get("problem"), data.get("neighbour_load"))
        except (ValueError, KeyError, TypeError):
            continue
    return found


def merge(per_child: Iterable[Mapping[Key, ProcessSample]]) -> dict[Key, list[ProcessSample]]:
    """All children's measurements by target, in process order."""
    merged: dict[Key, list[ProcessSample]] = {}
    for found in per_child:
        for key, sample in found.items():
            merged.setdefault(key, []).append(sample)
    return merged


def trusted(others: Iterable[ProcessSample]) -> list[ProcessSample]:
    """The child measurements that passed the contention/spread guard (the rest are dropped)."""
    return [s for s in others if s.problem is None]


def pooled(own: Sample, others: Iterable[ProcessSample]) -> Sample:
    """``own`` (this process's pass) pooled with the trusted child measurements of the target.

    The statistic becomes the median of the per-process p25s, and the machine-speed check uses
    the median of the per-process calibrations (``Sample.machine_calibration``), so it compares
    like with like. The spread, CPU share and the stored ``calibration`` stay this process's own:
    the guard judges the pass it can re-measure, and a saved session pairs its own p25 with its own
    calibration.
    """
    usable = trusted(others)
    if not usable:
        return own
    return replace(own, process_statistics=tuple(s.statistic for s in usable),
                   process_calibrations=tuple(s.calibration for s in usable if s.calibration))


def fresh_confirmer(runner: Callable[[str], Mapping[Key, ProcessSample]] | None,
                    cache: dict[str, Mapping[Key, ProcessSample]], nodeid: str, name: str,
                    device: str, passes: list[Sample]) -> Callable[[], Sample | None] | None:
    """The confirming pass of a suspected slowdown, taken in a fresh process (or None).

    ``runner(nodeid)`` runs the test once more in a fresh pytest process and returns its
    measurements; one run serves every measurement of the test (``cache``). The pass is appended
    to ``passes`` (reports and the offline judge see it). The returned function gives None when
    the fresh process did not measure this name, and the verdict then confirms in this process.
    """
    if runner is None:
        return None

    def confirm() -> Sample | None:
        if nodeid not in cache:
            cache[nodeid] = runner(nodeid)
        found = cache[nodeid].get((nodeid, name))
        if found is None:
            return None
        on_cpu = device.startswith("cpu")
        sample = Sample(summarize(found.times), found.cpu_share if on_cpu else None,
                        tuple(found.times), found.calibration,
                        neighbour_load=found.neighbour_load if on_cpu else None, fresh=True)
        passes.append(sample)
        return sample
    return confirm


def child_session_records(record: Mapping[str, Any], others: Iterable[ProcessSample],
                          run_id: str) -> list[dict[str, Any]]:
    """Session records for the trusted child measurements, derived from this process's record.

    Counters, fingerprints and variant figures are deterministic or per run, so they are copied;
    the timing fields are the child's own. Each gets its own ``run_id`` suffix so reports can tell
    the sessions of one multi-process save apart.
    """
    records = []
    for sample in trusted(others):
        summary = summarize(sample.times)
        child = dict(record)
        child.update({
            "run_id": f"{run_id}-p{sample.process}",
            "statistic": summary.p25,
            "stats": {k: v if k == "n" else float(f"{v:.6g}") for k, v in summary.to_dict().items()},
            "times": [float(f"{t:.6g}") for t in sample.times],
            "cpu_share": None if sample.cpu_share is None else round(sample.cpu_share, 4),
            "calibration": None if sample.calibration is None else float(f"{sample.calibration:.6g}"),
            "process": sample.process,
        })
        # Per-run figures the child did not report: not repeated, or they would count N-fold
        # (drift checks take the median of stored speedups).
        child["speedup"] = None
        child.pop("top_ops", None)
        records.append(child)
    return records


__all__ = ["ChildSink", "ProcessSample", "child_session_records", "fresh_confirmer", "merge", "pooled",
           "read_child_file", "same_run", "trusted"]
