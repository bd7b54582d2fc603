"""The shapes of what torchperf writes and reads, as typed dicts: a measurement's record's JSON
form (what :meth:`pytest_torchperf.run.result.Result.to_record` produces, the hooks get and the
results file holds; inside the package it is read into
:class:`pytest_torchperf.store.record.Record`), and the options and instruction count a stored
session holds (a session itself is a :class:`pytest_torchperf.store.sessions.Session`).
Documented field by field in docs/file-formats.md. Pure: typing only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict


class GateRecord(TypedDict, total=False):
    """The options a measurement was judged under."""

    max_slowdown: float
    min_cpu_share: float
    max_spread: float
    max_neighbour_load: float
    max_machine_slowdown: float
    strict: bool
    ignore_counters: list[str]
    confirm: str
    saving: bool
    instructions: bool  #: judged on instruction counts (--torchperf-instructions)
    max_instruction_increase: float
    kind: str
    ab: str
    #: The widest noise-widened limit that gates, as a multiple of max_slowdown (0: no bound).
    max_widening: float
    max_kernel_slowdown: float
    min_gpu_clock: float


class InstructionRecord(TypedDict, total=False):
    """Instructions per call counted under Valgrind (``--torchperf-instructions``)."""

    per_call: float  #: what verdicts compare (the second counted window)
    windows: list[float]  #: per call in each of the two counted windows
    functions: dict[str, float]  #: self instructions per call of the top functions


class MeasurementRecord(TypedDict, total=False):
    """One measurement of a run, as the results file, the test report and the hooks hold it (its
    key order is the file's: :func:`in_record_order`); the package reads it as a Record."""

    nodeid: str
    name: str
    group: str | None
    device: str
    threads: int
    environment_id: str | None
    disabled: bool
    number_per_block: int
    cpu_share: float | None
    neighbour_load: float | None
    stats: dict[str, float] | None  #: as a stored session's
    samples: list[float]
    options: dict[str, float] | None
    verdict: dict[str, object] | None  #: as store/record.py:RecordedVerdict reads it
    counters: dict[str, object] | None
    counter_changes: list[str]
    kind: str  #: torchperf or timer
    clock: str | None
    saved: bool
    not_saved: str | None  #: why a saving run did not store it
    untimed: str | None  #: why a saving run stored its counters and numerics but not its timing
    untimed_options: list[str]  #: the option of every guard that refused it
    #: A save: its timing baseline now (sessions, median, noise, the limit a compare applies).
    stored: dict[str, object] | None
    calibration: float | None
    outcome: str  #: fail when anything failed, else the verdict's outcome; measured, disabled
    label: str  #: the label every report shows, e.g. ``FAIL (counters)``
    variant: str
    speedup: dict[str, float] | None
    accuracy: dict[str, float] | None
    accuracy_limits: dict[str, float] | None
    build_time: float | None
    method: str | None
    notes: list[str]
    metric: float | None
    failures: list[str]
    #: Each failure's kind (``judge/failures.py``; None: read from a file without kinds).
    failure_kinds: list[str | None]
    run_id: str | None
    #: What --torchperf-save stores (torchperf accept uses it): store/sessions.py:Session.
    session: dict[str, object] | None
    environment: dict[str, object] | None
    run_failures: list[str]
    run_failure_kinds: list[str | None]
    passes: list[dict[str, object]]  #: as store/record.py:RecordedPass reads them
    processes: list[float]
    confirm_speedups: list[dict[str, float] | None]
    explanation: list[str]  #: profiled op diff and trace path of a confirmed slowdown
    instructions: InstructionRecord | None  #: --torchperf-instructions runs
    instructions_vs_eager: float | None  #: a variant's instructions per call / eager's
    #: a count above its limit counted again in a fresh process (--torchperf-confirm fresh)
    recount: InstructionRecord | None
    ab: dict[str, object] | None  #: A/B runs: side A, the pairs' block times, the interval
    gated: list[str]  #: what the comparison gated: time/instructions/ab, counters, numerics
    #: ``--torchperf-graph``: the call's per-node figures on its exported graph (docs/graph.md)
    graph: dict[str, object] | None


# -- a record in a results file and back (one conversion each way) ----------------------------

#: Record keys a results file holds in pytest-benchmark's own fields of a benchmark (``name`` as
#: the section's ``measurement``; ``environment`` in the file's table of environments); every
#: other key, another plugin's included, goes in the benchmark's ``torchperf`` section as it is.
_BENCHMARK_FIELDS = frozenset(
    {"name", "group", "device", "threads", "stats", "samples", "number_per_block", "options"}
)
#: What a results file of an older version may lack, read as empty.
_LIST_KEYS = (
    "counter_changes",
    "failures",
    "failure_kinds",
    "passes",
    "run_failures",
    "run_failure_kinds",
    "processes",
    "confirm_speedups",
    "explanation",
    "gated",
    "notes",
)


def results_section(record: Mapping[str, Any]) -> dict[str, Any]:
    """The ``torchperf`` section of a record's benchmark in a results file (the inverse of
    :func:`record_from_benchmark`, with the benchmark's own fields)."""
    section = {k: v for k, v in record.items() if k not in _BENCHMARK_FIELDS and k != "environment"}
    section["measurement"] = record["name"]
    return section


def record_from_benchmark(
    bench: Mapping[str, Any], stats: Mapping[str, float] | None
) -> dict[str, Any] | None:
    """The record a results file's benchmark holds (None: not one of ours, or nothing timed);
    ``stats`` summarises its per-call samples."""
    section = dict(bench.get("torchperf") or {})
    timed = bench.get("stats") or {}
    data = list(timed.get("data") or [])
    if "nodeid" not in section or not data:
        return None
    record = {k: v for k, v in section.items() if k != "measurement"}
    extra_info = bench.get("extra_info") or {}
    record.update(
        name=section["measurement"],
        group=bench.get("group"),
        device=extra_info.get("device"),
        threads=extra_info.get("threads"),
        stats=stats,
        samples=data,
        number_per_block=timed.get("iterations"),
        options=bench.get("options"),
    )
    for key in _LIST_KEYS:
        record[key] = record.get(key) or []
    record["variant"] = record.get("variant") or "eager"
    if "run_id" not in record:  # written before records carried it
        record["run_id"] = (record.get("session") or {}).get("run_id")
    return record


def in_record_order(keys: Iterable[str]) -> list[str]:
    """``keys`` in the order :class:`MeasurementRecord` lists them (a results file reads the same
    whichever measurement kind added a key), unknown ones last."""
    order = list(MeasurementRecord.__annotations__)
    return sorted(keys, key=lambda k: order.index(k) if k in order else len(order))
