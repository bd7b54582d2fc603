"""Editing stored baselines to extreme values, so that e2e verdicts are deterministic without
sleeping or slowing anything down; a CPU hog that crowds exactly the process under test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def hog_cpu() -> set[int] | None:
    """One CPU of this process's (the last), for a run under test and its hog to share: the hog
    then takes half of that CPU from the run, every moment, and leaves the other CPUs to the
    rest of the suite (two unpinned hogs on a 2-core CI runner slowed every test of the other
    xdist worker too). None where affinity cannot be set (not Linux) or there is one CPU."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return {cpus[-1]} if len(cpus) > 1 else None


def pinned_to(cpus: set[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that pins a child process (and whatever it starts) to ``cpus``."""
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def cpu_hog(cpus: set[int] | None) -> subprocess.Popen[bytes]:
    """A pure-Python busy loop on ``cpus`` (anywhere when None); kill it when done."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=pinned_to(cpus))


def baseline_files(storage: Path) -> list[Path]:
    """All module baseline files under a storage folder."""
    return sorted(p for p in storage.glob("*/*.json") if p.name != "environment.json")


def edit_baselines(storage: Path, edit: Callable[[str, str, dict[str, Any]], None]) -> None:
    """Apply ``edit(nodeid, name, session)`` to every stored session, in place."""
    for path in baseline_files(storage):
        doc = json.loads(path.read_text())
        for nodeid, measurements in doc["tests"].items():
            for name, entry in measurements.items():
                for session in entry["sessions"]:
                    edit(nodeid, name, session)
        path.write_text(json.dumps(doc))


def scale_baselines(storage: Path, factor: float, name: str | None = None) -> None:
    """Multiply stored times by ``factor`` (< 1 makes the current code look slower)."""

    def edit(_nodeid: str, measurement: str, session: dict[str, Any]) -> None:
        if name is None or measurement == name:
            session["statistic"] *= factor
            session["times"] = [t * factor for t in session["times"]]

    edit_baselines(storage, edit)
