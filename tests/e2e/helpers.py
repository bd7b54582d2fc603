"""Editing stored baselines to extreme values, so that e2e verdicts are deterministic without
sleeping or slowing anything down; a CPU hog to run beside a run under test."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cpu_hog() -> subprocess.Popen[bytes]:
    """A pure-Python busy loop (kill it when done): the load beside a run under test."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def baseline_files(storage: Path) -> list[Path]:
    """All module baseline files under a storage folder."""
    return sorted(p for p in storage.glob("*/*.json") if p.name != "environment.json")


def assert_sessions_round_trip(storage: Path) -> int:
    """Every stored session under ``storage`` read as the package reads it and written back:
    the same keys, values and key order (the file boundary: Session.from_json / to_json).
    Returns how many sessions it checked."""
    from pytest_torchperf.store.sessions import Session

    checked = 0
    for path in baseline_files(storage):
        doc = json.loads(path.read_text())
        for measurements in doc["tests"].values():
            for entry in measurements.values():
                for data in entry["sessions"]:
                    back = Session.from_json(data).to_json()
                    assert json.dumps(back) == json.dumps(data), (path, data)
                    checked += 1
    return checked


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
