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
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

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

    @property
    def statistic(self) -> float:
        """p25 of the per-call times, the statistic every verdict compares."""
        return summarize(self.times).p25

    def to_json(self, nodeid: str, name: str) -> str:
        return json.dumps({"nodeid": nodeid, "name": name, "process": self.process,
                           "times": list(self.times), "cpu_share": self.cpu_share,
                           "calibration": self.calibration, "problem": self.problem})


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
                               sample.calibration, problem)
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
                data.get("problem"))
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

    The statistic becomes the median of the per-process p25s; the calibration the median of the
    per-process calibrations (so the machine-speed check compares like with like). The spread
    and CPU share stay this process's own: the guard judges the pass it can re-measure.
    """
    usable = trusted(others)
    if not usable:
        return own
    calibrations = [c for c in (own.calibration, *(s.calibration for s in usable)) if c]
    return replace(own, process_statistics=tuple(s.statistic for s in usable),
                   calibration=statistics.median(calibrations) if calibrations else own.calibration)


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
        records.append(child)
    return records


__all__ = ["ChildSink", "ProcessSample", "child_session_records", "merge", "pooled",
           "read_child_file", "trusted"]
