"""Results in pytest-benchmark's JSON layout (``pytest-benchmark compare`` and tools that read that
format, e.g. github-action-benchmark, work on it), each benchmark extended with a ``torchperf``
section: outcome, label, verdict, variant facts, counters and the baseline session it would save.
Pure: records of :meth:`pytest_torchperf.run.result.Result.to_record` and plain dicts of machine
and commit information in, a JSON-ready dict out.
"""

from __future__ import annotations

import datetime as _dt
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_torchperf.judge.labels import outcome_label
from pytest_torchperf.store.record import Record, Stats
from pytest_torchperf.store.records import results_section
from pytest_torchperf.store.results import RESULTS_FORMAT

#: Version of pytest-benchmark's JSON layout that :func:`benchmark_json` follows.
PYTEST_BENCHMARK_FORMAT = "5.1.0"


def _benchmark_stats(record: Record) -> dict[str, Any]:
    """pytest-benchmark's ``stats`` block from a record's per-call samples (seconds)."""
    samples = sorted(record.samples)
    stats = record.stats or Stats()
    if not samples:
        return {}
    mean = statistics.fmean(samples)
    stddev = statistics.stdev(samples) if len(samples) > 1 else 0.0
    q1 = stats.p25 if stats.p25 is not None else samples[0]
    q3 = stats.p75 if stats.p75 is not None else samples[-1]
    iqr = q3 - q1
    low, high = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    inside = [s for s in samples if low <= s <= high]
    iqr_outliers = len(samples) - len(inside)
    stddev_outliers = sum(1 for s in samples if abs(s - mean) > stddev)
    return {
        "min": samples[0],
        "max": samples[-1],
        "mean": mean,
        "stddev": stddev,
        "rounds": len(samples),
        "median": stats.median if stats.median is not None else statistics.median(samples),
        "iqr": iqr,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": inside[0] if inside else samples[0],
        "hd15iqr": inside[-1] if inside else samples[-1],
        "ops": 1.0 / mean if mean > 0 else 0.0,
        "total": sum(samples) * (record.number_per_block or 1),
        "iterations": record.number_per_block or 1,
        "data": samples,
    }


def benchmark_json(
    records: Sequence[Record],
    machine_info: Mapping[str, Any],
    commit_info: Mapping[str, Any],
    coverage: Mapping[str, Any] | None = None,
    storage: Mapping[str, str | None] | None = None,
    strict: str | None = None,
) -> dict[str, Any]:
    """Results in pytest-benchmark's JSON layout, each benchmark with a ``torchperf`` section;
    ``coverage``: what the run gated (:meth:`pytest_torchperf.judge.coverage.Coverage.to_dict`);
    ``storage``: the baseline folder the run read (``torchperf accept`` checks it is given the
    same one); ``strict``: what made the run strict as a whole (None: it was not), for the
    commands that read the file to fail it as the run did."""
    benchmarks = []
    removed = []
    for record in records:
        stats = _benchmark_stats(record)
        if record.baseline_only:
            # Only the baseline has it (side A's, removed in B): no times of this run, so not
            # a benchmark (pytest-benchmark reads none without stats: "Failed to load ...:
            # 'mean'" dropped the whole file); its record says so beside them.
            data = {k: v for k, v in record.to_json().items() if k != "environment"}
            removed.append({**data, "label": record.label or outcome_label(record)})
            continue
        if not stats:
            continue  # --torchperf-disable: nothing was timed
        # The record leaves here: the file holds its JSON form, keys and values as they came.
        data = record.to_json()
        test = record.nodeid.split("::")[-1]
        options = record.options or {}
        benchmarks.append(
            {
                "group": data.get("group"),
                "name": f"{test}[{record.name}]",
                "fullname": f"{record.nodeid}[{record.name}]",
                "params": None,
                "param": None,
                "extra_info": {"device": data.get("device"), "threads": data.get("threads")},
                "options": {
                    "disable_gc": False,
                    "timer": "perf_counter",
                    "min_rounds": 5,
                    "max_time": options.get("min_time"),
                    "min_time": options.get("min_time"),
                    "warmup": True,
                },
                "stats": stats,
                "torchperf": {
                    **results_section(data),
                    "label": record.label or outcome_label(record),
                },
            }
        )
    environments = {
        r.environment_id: r.environment for r in records if r.environment_id and r.environment
    }
    return {
        "machine_info": dict(machine_info),
        "commit_info": dict(commit_info),
        "benchmarks": benchmarks,
        "datetime": _dt.datetime.now(_dt.timezone.utc).isoformat(),
        "version": PYTEST_BENCHMARK_FORMAT,
        # Ours: the fingerprints of the environments measured (torchperf accept needs them).
        "torchperf": {
            "format": RESULTS_FORMAT,
            "environments": environments,
            "coverage": dict(coverage) if coverage else None,
            "storage": dict(storage) if storage else None,
            "strict": strict,
            # Records of measurements only the baseline has (side A's, removed in B).
            **({"removed": removed} if removed else {}),
        },
    }
