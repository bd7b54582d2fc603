"""Reading what the plugin wrote back into records and tables: results files (``--torchperf-json``)
and baseline folders. Shared by the ``torchperf`` command and :func:`load_results` for notebooks.

A *record* is the dict of :meth:`pytest_torchperf.run.result.Result.to_record` (what reports
render); a results file holds them in pytest-benchmark's layout, each benchmark's ``torchperf``
section carrying the measurement's verdict, variant facts and the baseline session it would save.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, cast

from pytest_torchperf.core.stats import summarize
from pytest_torchperf.store.baselines import BaselineStore
from pytest_torchperf.store.records import StatsRecord, record_from_benchmark
from pytest_torchperf.store.sessions import session_of, timed_sessions

RESULTS_FORMAT = "pytest-torchperf-results"


class ResultsFileError(ValueError):
    """A results file is missing, unreadable or not written by pytest-torchperf."""


def read_results(path: Path | str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Records and environment fingerprints (id -> fingerprint) of a ``--torchperf-json`` file."""
    doc = read_results_document(path)
    return records_of(doc), dict(doc["torchperf"].get("environments") or {})


def read_results_document(path: Path | str) -> dict[str, Any]:
    """A ``--torchperf-json`` file as it is written, checked to be one of ours."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultsFileError(f"results file {path}: cannot be read ({exc.strerror})") from None
    except ValueError as exc:
        raise ResultsFileError(f"results file {path}: not valid JSON ({exc})") from None
    ours = doc.get("torchperf") if isinstance(doc, dict) else None
    if not isinstance(ours, dict) or ours.get("format") != RESULTS_FORMAT:
        raise ResultsFileError(
            f"results file {path}: not written by pytest-torchperf (no 'torchperf' section with "
            f"format {RESULTS_FORMAT!r}); write one with pytest --torchperf-json PATH"
        )
    if not isinstance(doc.get("benchmarks", []), list):
        raise ResultsFileError(f"results file {path}: 'benchmarks' is not a list")
    return cast("dict[str, Any]", doc)


def records_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of a results document's benchmarks (others' benchmarks and untimed ones are
    left out)."""
    records = []
    for bench in doc.get("benchmarks", []):
        record = record_of(bench)
        if record is not None:
            records.append(record)
    return records


def record_of(bench: dict[str, Any]) -> dict[str, Any] | None:
    """The record of one benchmark of a results document (None: not one of ours)."""
    data = list((bench.get("stats") or {}).get("data") or [])
    stats = cast("StatsRecord", summarize(data).to_dict()) if data else None
    return record_from_benchmark(bench, stats)


def stored_records(storage: Path | str) -> list[dict[str, Any]]:
    """The latest stored session of every measurement in a baseline folder, as records."""
    records = []
    for env_id, nodeid, name, sessions in BaselineStore(Path(storage)).measurements():
        if not sessions:
            continue
        latest = sessions[-1]
        # A save that could not time it stores a session without timing: the figures shown are
        # the latest timed session's, and the baseline the median of the timed ones (what a
        # compare holds a pass against), as `torchperf show` gives them.
        timed = [s.statistic for s in timed_sessions(sessions) if s.statistic]
        shown = next((s for s in reversed(sessions) if s.statistic), latest)
        records.append(
            {
                "nodeid": nodeid,
                "name": name,
                "group": latest.group,
                "device": latest.device,
                "threads": latest.threads,
                "environment_id": env_id,
                "outcome": "measured",
                "stats": summarize(shown.times).to_dict() if shown.times else None,
                "samples": list(shown.times),
                "stored": {"baseline": statistics.median(timed)} if timed else None,
                "verdict": None,
                "counters": latest.counters,
                "counter_changes": [],
                "variant": latest.variant,
                "speedup": latest.speedup,
                "accuracy": latest.accuracy,
                "build_time": latest.build_time,
                "metric": latest.metric,
                "failures": [],
                "failure_kinds": [],
                "session": latest.to_json(),
                "run_id": latest.run_id,
                "sessions": len(sessions),
                "timestamp": latest.timestamp,
                "git_sha": latest.git_sha,
            }
        )
    return records


def _rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in records:
        stats = r.get("stats") or {}
        verdict = r.get("verdict") or {}
        speedup = r.get("speedup") or {}
        accuracy = r.get("accuracy") or {}
        counters = r.get("counters") or {}
        session = session_of(r)
        counted = verdict.get("basis") == "instructions"
        rows.append(
            {
                "environment": r.get("environment_id"),
                "test": r["nodeid"],
                "name": r["name"],
                "variant": r.get("variant", "eager"),
                "outcome": r.get("outcome"),
                "median_s": stats.get("median"),
                "p25_s": stats.get("p25"),
                "iqr_s": stats.get("iqr"),
                "baseline_p25_s": None if counted else verdict.get("baseline_statistic"),
                "ratio": verdict.get("ratio"),
                # --torchperf-instructions: instructions per call under Valgrind (ratio is then
                # instructions vs their baseline).
                "instructions": (r.get("instructions") or {}).get("per_call"),
                "baseline_instructions": verdict.get("baseline_statistic") if counted else None,
                # A/B runs: the 95 % interval of the change (baseline_p25_s is side A's p25).
                "ab_against": (r.get("ab") or {}).get("against"),
                "ab_low": ((r.get("ab") or {}).get("interval") or {}).get("low"),
                "ab_high": ((r.get("ab") or {}).get("interval") or {}).get("high"),
                "speedup": speedup.get("median"),
                "rel_l2": accuracy.get("rel_l2"),
                "cosine": accuracy.get("cosine"),
                "metric": r.get("metric"),
                "build_time_s": r.get("build_time"),
                "flops": counters.get("flops"),
                # Heavy ops the FLOP figure leaves out (no formula); empty when it is whole.
                "flops_partial": ", ".join(counters.get("flops_partial") or ()),
                "params": counters.get("params"),
                "peak_memory_bytes": counters.get("peak_memory"),
                "timestamp": session.timestamp,
                "git_sha": session.git_sha,
            }
        )
    return rows


def load_results(path: Path | str) -> Any:
    """A pandas DataFrame of measurements, one row each, for notebooks.

    ``path`` is a results file written by ``pytest --torchperf-json PATH`` (this run's
    measurements and verdicts) or a baseline folder such as ``.torchperf/`` (every stored
    session: one row per session, so the history can be plotted). Times are in seconds.
    """
    import pandas as pd

    path = Path(path)
    if path.is_dir():
        rows = []
        for env_id, nodeid, name, sessions in BaselineStore(path).measurements():
            for index, session in enumerate(sessions):
                record = {
                    "nodeid": nodeid,
                    "name": name,
                    "environment_id": env_id,
                    "outcome": "stored",
                    "session": session.to_json(),
                    "stats": session.stats,
                    "variant": session.variant,
                    "speedup": session.speedup,
                    "accuracy": session.accuracy,
                    "counters": session.counters,
                    "metric": session.metric,
                    "build_time": session.build_time,
                    "instructions": session.instructions,
                }
                row = _rows([record])[0]
                row["session"] = index
                rows.append(row)
        return pd.DataFrame(rows)
    records, _ = read_results(path)
    return pd.DataFrame(_rows(records))
