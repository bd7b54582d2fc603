"""Reading what the plugin wrote back into records and tables: results files (``--torchperf-json``)
and baseline folders. Shared by the ``torchperf`` command and :func:`load_results` for notebooks.

A *record* (:class:`pytest_torchperf.store.record.Record`, read here from its JSON form: what
:meth:`pytest_torchperf.run.result.Result.to_record` gives) is what reports render; a results file
holds them in pytest-benchmark's layout, each benchmark's ``torchperf`` section carrying the
measurement's verdict, variant facts and the baseline session it would save.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from pytest_torchperf.core.json_fields import json_object, json_texts
from pytest_torchperf.core.stats import summarize
from pytest_torchperf.store.baselines import BaselineStore
from pytest_torchperf.store.record import Record, RecordedVerdict, Stats
from pytest_torchperf.store.records import record_from_benchmark
from pytest_torchperf.store.schema import positive_number, session_problem, short_repr
from pytest_torchperf.store.sessions import Session, SessionError, session_of, timed_sessions

RESULTS_FORMAT = "pytest-torchperf-results"


class ResultsFileError(ValueError):
    """A results file is missing, unreadable or not written by pytest-torchperf."""


def read_results(path: Path | str) -> tuple[list[Record], dict[str, Any]]:
    """Records and environment fingerprints (id -> fingerprint) of a ``--torchperf-json`` file."""
    doc = read_results_document(path)
    environments = dict(doc["torchperf"].get("environments") or {})
    return with_environments(records_of(doc), environments), environments


def with_environments(records: list[Record], environments: dict[str, Any]) -> list[Record]:
    """Each record with its environment's fingerprint (id -> fingerprint: a results file's
    ``environments``), as the run's own records carry it: the HTML report's environment section
    reads it there."""
    return [
        replace(r, environment=environments.get(r.environment_id or ""))
        if r.environment is None
        else r
        for r in records
    ]


def recorded_storage(path: Path | str) -> tuple[str | None, str | None]:
    """The baseline folder a ``--torchperf-json`` file's run read: absolute (as that machine
    named it) and relative to its rootdir (None where it lay outside); (None, None) in files
    written before it was recorded, and in a merge of shards that read different folders."""
    storage = read_results_document(path)["torchperf"].get("storage")
    if not isinstance(storage, dict):
        return None, None
    absolute, relative = storage.get("path"), storage.get("relative")
    return (
        absolute if isinstance(absolute, str) else None,
        relative if isinstance(relative, str) else None,
    )


def recorded_mode(path: Path | str) -> str | None:
    """Whether the run of a ``--torchperf-json`` file compared or saved (``compare``,
    ``save``), as its coverage recorded it; None where it did neither."""
    cov = read_results_document(path)["torchperf"].get("coverage")
    mode = cov.get("mode") if isinstance(cov, dict) else None
    return mode if isinstance(mode, str) else None


def recorded_strict(documents: Sequence[Mapping[str, Any]]) -> tuple[bool, str | None]:
    """What made the run of these results documents (one file, or one run's shards) strict as
    a whole, as its run failure names it (``--torchperf-strict``, ``ini torchperf_strict``; None:
    it was not), and whether they say so at all: files written before it was recorded do not."""
    said = [doc["torchperf"]["strict"] for doc in documents if "strict" in doc["torchperf"]]
    if not documents or len(said) < len(documents):
        return False, None
    return True, next((by for by in said if isinstance(by, str)), None)


def read_results_document(path: Path | str) -> dict[str, Any]:
    """A ``--torchperf-json`` file as it is written, checked to be one of ours."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        missing = isinstance(exc, (FileNotFoundError, IsADirectoryError))
        remedy = "; give the file pytest --torchperf-json PATH wrote" if missing else ""
        raise ResultsFileError(
            f"results file {path}: cannot be read ({exc.strerror}){remedy}"
        ) from None
    except ValueError as exc:
        raise ResultsFileError(
            f"results file {path}: not valid JSON ({exc}); if pytest --torchperf-json wrote it, "
            f"it is damaged (cut short, or edited): re-run the run that wrote it, or restore it "
            f"from where it came from (a CI job's artifacts); nothing was read from it"
        ) from None
    ours = doc.get("torchperf") if isinstance(doc, dict) else None
    if not isinstance(ours, dict) or ours.get("format") != RESULTS_FORMAT:
        raise ResultsFileError(
            f"results file {path}: not written by pytest-torchperf (no 'torchperf' section with "
            f"format {RESULTS_FORMAT!r}); write one with pytest --torchperf-json PATH"
        )
    if not isinstance(doc.get("benchmarks", []), list):
        raise ResultsFileError(f"results file {path}: 'benchmarks' is not a list")
    problem = _damaged(doc)
    if problem:
        raise ResultsFileError(
            f"results file {path}: {problem}: the file is damaged; write it again with pytest "
            f"--torchperf-json PATH (or fix that value, or restore the file from where it came "
            f"from); nothing was read from it"
        )
    return cast("dict[str, Any]", doc)


def _damaged(doc: dict[str, Any]) -> str | None:
    """Where a results document's shape is not what every reader relies on (each benchmark an
    object, its ``stats.data`` positive numbers, each ``torchperf`` section and environment an
    object, a measurement's session and passes what judging and storing it read: its
    :func:`_section_problem`), or None. Other values are read by the typed records, which
    read one of the wrong type as absent."""
    removed = doc["torchperf"].get("removed") or []
    if not isinstance(removed, list) or not all(isinstance(r, dict) for r in removed):
        return "torchperf.removed is not a list of objects (records of removed measurements)"
    environments = doc["torchperf"].get("environments") or {}  # null: none, as readers take it
    if not isinstance(environments, dict):
        return f"torchperf.environments is a JSON {_kind(environments)}, not an object"
    for env_id, environment in environments.items():
        if not isinstance(environment, dict):
            return f"torchperf.environments.{env_id} is a JSON {_kind(environment)}, not an object"
    for i, bench in enumerate(doc.get("benchmarks", [])):
        where = f"benchmarks[{i}]"
        if not isinstance(bench, dict):
            return f"{where} is a JSON {_kind(bench)}, not an object"
        for key in ("stats", "torchperf"):
            if bench.get(key) is not None and not isinstance(bench[key], dict):
                return f"{where}.{key} is a JSON {_kind(bench[key])}, not an object"
        data = (bench.get("stats") or {}).get("data") or []
        if not isinstance(data, list) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in data
        ):
            return f"{where}.stats.data is not a list of numbers"
        for j, block in enumerate(data):
            if not positive_number(block):
                return (
                    f"{where}.stats.data[{j}] is {block!r}, expected a positive number of seconds"
                )
        problem = _section_problem(bench.get("torchperf") or {}, f"{where}.torchperf")
        if problem:
            return problem
    return None


def _section_problem(section: dict[str, Any], where: str) -> str | None:
    """What is wrong with a measurement's ``torchperf`` section where ``torchperf compare``
    replays it and ``torchperf accept`` stores it, or None: its ``session`` must be one a
    baseline file may hold (``store/schema.py``: a hand-edited time or counter would otherwise
    crash the replay, or be found bad only when appended, and blamed on the baseline file), its
    ``passes`` each a list of positive per-call seconds (what the replay judges)."""
    session = section.get("session")
    if session is not None:
        problem = session_problem(session, f"{where}.session")
        if problem:
            return problem
        try:
            Session.from_json(session)
        except SessionError as exc:
            return f"key {where}.session.{exc.problem}"
    passes = section.get("passes")
    if passes is None:
        return None
    if not isinstance(passes, list):
        return f"key {where}.passes is {short_repr(passes)}, expected a list of sampling passes"
    for i, recorded in enumerate(passes):
        at = f"{where}.passes[{i}]"
        if not isinstance(recorded, dict):
            return f"key {at} is {short_repr(recorded)}, expected an object"
        times = recorded.get("times")
        if not isinstance(times, list) or not times:
            return (
                f"key {at}.times is {short_repr(times)}, expected a list of per-call seconds (one "
                f"per timed block)"
            )
        for key in ("times", "process_statistics"):
            for j, value in enumerate(recorded.get(key) or ()):
                if not positive_number(value):
                    return (
                        f"key {at}.{key}[{j}] is {value!r}, expected a positive number of seconds"
                    )
    return None


def _kind(value: object) -> str:
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def records_of(doc: dict[str, Any]) -> list[Record]:
    """The records of a results document's benchmarks (others' benchmarks and untimed ones are
    left out), then those of its measurements only the baseline has (``torchperf.removed``:
    side A's of an A/B run, removed in B), which are no benchmarks (no times of this run)."""
    timed = [r for r in map(record_of, doc.get("benchmarks", [])) if r is not None]
    return timed + removed_records(doc)


def removed_records(doc: dict[str, Any]) -> list[Record]:
    """The records of a results document's ``torchperf.removed`` (checked a list of objects)."""
    return [Record.from_json(r) for r in doc["torchperf"].get("removed") or ()]


def record_of(bench: dict[str, Any]) -> Record | None:
    """The record of one benchmark of a results document (None: not one of ours): where a
    record comes in from a file."""
    data = list((bench.get("stats") or {}).get("data") or [])
    stats = summarize(data).to_dict() if data else None
    record = record_from_benchmark(bench, stats)
    return None if record is None else Record.from_json(record)


def stored_records(storage: Path | str) -> list[Record]:
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
            Record.from_json(
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
        )
    return records


def _rows(records: list[Record]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for r in records:
        stats = r.stats or Stats()
        verdict = r.verdict or RecordedVerdict()
        speedup = r.speedup or {}
        accuracy = r.accuracy or {}
        counters = r.counters or {}
        session = session_of(r)
        counted = verdict.basis == "instructions"
        ab = json_object(r.extra("ab"))
        rows.append(
            {
                "environment": r.environment_id,
                "test": r.nodeid,
                "name": r.name,
                "variant": r.variant,
                "outcome": r.outcome if r.has("outcome") else None,
                # What every report shows (``FAIL (counters)``, ``INCONCLUSIVE (busy machine)``):
                # the outcome alone says fail, not which gate failed.
                "label": r.label,
                "median_s": stats.median,
                "p25_s": stats.p25,
                "iqr_s": stats.iqr,
                "baseline_p25_s": None if counted else verdict.baseline_statistic,
                "ratio": verdict.ratio,
                # --torchperf-instructions: instructions per call under Valgrind (ratio is then
                # instructions vs their baseline): the count judged (a count above its limit
                # counted again in a fresh process: the lower of the two).
                "instructions": verdict.candidate_statistic
                if counted and verdict.candidate_statistic
                else json_object(r.extra("instructions")).get("per_call"),
                "baseline_instructions": verdict.baseline_statistic if counted else None,
                # A/B runs: the 95 % interval of the change (baseline_p25_s is side A's p25).
                "ab_against": ab.get("against"),
                "ab_low": json_object(ab.get("interval")).get("low"),
                "ab_high": json_object(ab.get("interval")).get("high"),
                "speedup": speedup.get("median"),
                "rel_l2": accuracy.get("rel_l2"),
                "cosine": accuracy.get("cosine"),
                "metric": r.metric,
                "build_time_s": r.build_time,
                "flops": counters.get("flops"),
                # Heavy ops the FLOP figure leaves out (no formula); empty when it is whole.
                "flops_partial": ", ".join(json_texts(counters.get("flops_partial"))),
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
                record = Record.from_json(
                    {
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
                )
                row = _rows([record])[0]
                row["session"] = index
                rows.append(row)
        return pd.DataFrame(rows)
    records, _ = read_results(path)
    return pd.DataFrame(_rows(records))
