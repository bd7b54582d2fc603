"""What a valid baseline file is: its format marker, schema version and the shape of a session.

Pure module. :func:`validate_document` checks a parsed module file and raises
:class:`BaselineFileError` naming the offending key, so a hand-edited or foreign file is refused
with a message instead of being misread (or overwritten).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from pytest_torchperf.core.json_fields import is_number
from pytest_torchperf.core.types import JSONObject

SCHEMA_VERSION = 1
FORMAT = "pytest-torchperf-baselines"


class BaselineFileError(Exception):
    """A baseline file is unreadable, foreign, from a newer schema, malformed, or not writable."""

    def __init__(self, path: Path | str, problem: str, remedy: str | None = None) -> None:
        self.path = Path(path)
        self.problem = problem
        if remedy is None:
            remedy = (
                f"The file was left untouched. Fix it, restore it (git checkout -- {path}), "
                f"or delete it and record a new baseline with pytest --torchperf-save."
            )
        super().__init__(f"baseline file {path}: {problem}. {remedy}")


def validate_document(doc: object, path: Path) -> JSONObject:
    """Check a parsed module file; raise :class:`BaselineFileError` naming the offending key."""
    if not isinstance(doc, dict):
        raise BaselineFileError(
            path, f"top level is a JSON {type(doc).__name__}, expected an object"
        )
    if doc.get("format") != FORMAT:
        raise BaselineFileError(
            path,
            f"not a pytest-torchperf baseline file (key 'format' is {doc.get('format')!r}, "
            f"expected {FORMAT!r})",
            "Move it out of the baseline folder, or use another folder (pytest "
            "--torchperf-storage DIR, torchperf ... --storage DIR).",
        )
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise BaselineFileError(path, f"key 'schema_version' is {version!r}, expected an integer")
    if version > SCHEMA_VERSION:
        raise BaselineFileError(
            path,
            f"written by a newer pytest-torchperf (schema_version {version} > {SCHEMA_VERSION} "
            f"understood here)",
            "Upgrade pytest-torchperf (git pull in its checkout, then pip install -e of it); the "
            "file was left untouched.",
        )
    tests = doc.get("tests")
    if not isinstance(tests, dict):
        raise BaselineFileError(path, "key 'tests' is missing or not an object")
    for nodeid, measurements in tests.items():
        if not isinstance(measurements, dict):
            raise BaselineFileError(path, f"key tests[{nodeid!r}] is not an object")
        for name, entry in measurements.items():
            where = f"tests[{nodeid!r}][{name!r}]"
            if not isinstance(entry, dict) or not isinstance(entry.get("sessions"), list):
                raise BaselineFileError(path, f"key {where}.sessions is missing or not a list")
            if not entry["sessions"]:  # no baseline, where a compare would pass it as new
                raise BaselineFileError(
                    path, f"key {where}.sessions is empty (to drop the baseline, delete its entry)"
                )
            for i, session in enumerate(entry["sessions"]):
                validate_session(session, path, f"{where}.sessions[{i}]")
    return doc


def validate_session(session: object, path: Path, where: str) -> None:
    """Check one session of a baseline file; raise :class:`BaselineFileError` naming the key."""
    problem = session_problem(session, where)
    if problem is not None:
        raise BaselineFileError(path, problem)


class _Malformed(Exception):
    """A session's key holds a value a baseline must not: the message names the key."""


def session_problem(session: object, where: str) -> str | None:
    """What is wrong with a session a baseline file holds, or a results file carries for
    ``torchperf accept`` to store (``key <where>.times ...``: the key, and the value where one
    is at fault), or None where it may be stored. Shared by both files' readers, so a session
    is refused where it is read, with its own file named."""
    try:
        _check_session(session, where)
    except _Malformed as exc:
        return str(exc)
    return None


#: The counters that map op names to counts: a measurement's own, and a variant's model's.
_OP_MAPS = ("ops", "model_ops")
#: The counters that are one count each (a non-negative integer), and those that are lists of
#: text. A key none of these names (a newer plugin's) is not checked: no comparison of this
#: version reads it, and refusing it called a newer version's file corrupt.
_COUNTS = (
    "flops", "flop_formulas", "params", "param_bytes", "peak_memory", "graphs", "graph_breaks",
    "recompiles",
)  # fmt: skip
_TEXT_LISTS = ("break_reasons", "dtypes", "flops_partial")


def _first_bad(name: str, values: object, fits: Callable[[Any], bool]) -> str:
    """Where the list ``name`` (an object for ``ops``) first holds a value that does not fit, as
    ``, but times[3] is -1.0`` or ``, but ops['aten::mm'] is 'x'``, or what it holds instead of
    a list or an object; empty where every value fits."""
    if name in _OP_MAPS and isinstance(values, dict):
        items: list[tuple[object, object]] = list(values.items())
    elif name not in _OP_MAPS and isinstance(values, list):
        items = list(enumerate(values))
    else:
        return f", but it is {short_repr(values)}"
    for key, value in items:
        if not (isinstance(key, (str, int)) and fits(value)):
            return f", but {name}[{key!r}] is {short_repr(value)}"
    return ""


def short_repr(value: object) -> str:
    """A value as an error quotes it: its repr, cut at 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _check_session(session: object, where: str) -> None:
    def bad(problem: str) -> NoReturn:
        raise _Malformed(f"key {where}{problem}")

    if not isinstance(session, dict):
        bad(" is not an object")
    stat = session.get("statistic")
    untimed = session.get("untimed")
    if untimed is not None and (not isinstance(untimed, str) or not untimed):
        bad(f".untimed is {untimed!r}, expected the reason (text) or null")
    # A session whose timing could not be trusted keeps its counters and numerics, with
    # statistic null and the reason in untimed.
    if not (positive_number(stat) or (stat is None and untimed)):
        bad(
            f".statistic is {stat!r}, expected a positive number of seconds (or null, with the "
            f"reason in {where}.untimed)"
        )
    times = session.get("times")
    if not isinstance(times, list) or not all(positive_number(t) for t in times):
        bad(
            ".times must be a list of positive numbers (per-call seconds)"
            + _first_bad("times", times, positive_number)
        )
    calibration = session.get("calibration")
    if calibration is not None and not positive_number(calibration):
        bad(f".calibration is {calibration!r}, expected a positive number of seconds or null")
    counters = session.get("counters")
    if counters is not None:
        if not isinstance(counters, dict):
            bad(f".counters must be an object, but it is {short_repr(counters)}")
        for key, value in counters.items():
            if key in _OP_MAPS:
                if not isinstance(value, dict) or not all(
                    isinstance(k, str) and _count(v) for k, v in value.items()
                ):
                    bad(
                        f".counters.{key} must map op names to non-negative integers"
                        + _first_bad(key, value, _count)
                    )
            elif key in _TEXT_LISTS:
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    bad(
                        f".counters.{key} must be a list of strings"
                        + _first_bad(key, value, lambda v: isinstance(v, str))
                    )
            elif key in _COUNTS and not _count(value):
                bad(f".counters.{key} is {short_repr(value)}, expected a non-negative integer")
    for key, fits, problem in _SHAPES:
        value = session.get(key)
        if value is not None and not fits(value):
            bad(f".{key}" + problem.format(value=value))
    top_ops = session.get("top_ops")
    if top_ops is not None:
        if not isinstance(top_ops, list):
            bad(".top_ops must be a list")
        for i, row in enumerate(top_ops):
            if (
                not isinstance(row, dict)
                or not isinstance(row.get("op"), str)
                or not all(_non_negative(row.get(k)) for k in ("calls", "self_cpu", "self_device"))
            ):
                bad(
                    f".top_ops[{i}] must have 'op' (text) and non-negative 'calls', 'self_cpu', "
                    "'self_device'"
                )


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _non_negative(value: object) -> bool:
    return is_number(value) and math.isfinite(value) and value >= 0


def positive_number(value: object) -> bool:
    """A time or a size as a file must hold one: a finite positive number."""
    return is_number(value) and math.isfinite(value) and value > 0


def _speedup(value: object) -> bool:
    return isinstance(value, dict) and all(
        positive_number(value.get(k)) for k in ("median", "p25", "p75")
    )


def _figures(value: object) -> bool:
    return isinstance(value, dict) and all(is_number(v) for v in value.values())


def _fingerprint(fp: object) -> bool:
    leaves = fp.get("leaves") if isinstance(fp, dict) else None
    return isinstance(leaves, list) and all(
        isinstance(leaf, dict)
        and isinstance(leaf.get("shape"), list)
        and all(isinstance(v, (int, float)) for v in leaf.get("probe", []))
        and all(isinstance(leaf.get(k, 0.0), (int, float)) for k in ("l2", "mean"))
        for leaf in leaves
    )


def _graph(structure: object) -> bool:
    return (
        isinstance(structure, dict)
        and isinstance(structure.get("nodes"), list)
        and all(isinstance(n, list) and len(n) == 7 for n in structure["nodes"])
    )


def _nodes(nodes: object) -> bool:
    return isinstance(nodes, dict) and all(
        isinstance(k, str)
        and isinstance(v, list)
        and len(v) == 3
        and _non_negative(v[0])
        and _count(v[1])
        and _count(v[2])
        for k, v in nodes.items()
    )


def _instructions(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    windows = value.get("windows")
    functions = value.get("functions", {})
    return (
        positive_number(value.get("per_call"))
        and isinstance(windows, list)
        and len(windows) == 2
        and all(positive_number(w) for w in windows)
        and isinstance(functions, dict)
        and all(isinstance(k, str) and _non_negative(v) for k, v in functions.items())
    )


def _kernels(value: object) -> bool:
    """A CUDA measurement's GPU kernel time: seconds per call, per profiler session, and the
    top kernels as ``[name, launches per call, seconds per call]``."""
    return (
        isinstance(value, dict)
        and positive_number(value.get("per_call"))
        and all(positive_number(s) for s in value.get("sessions") or ())
        and all(
            isinstance(row, list)
            and len(row) == 3
            and isinstance(row[0], str)
            and _non_negative(row[1])
            and _non_negative(row[2])
            for row in value.get("kernels") or ()
        )
    )


#: The optional keys of a session checked after its counters, in order: whether a value that is
#: not null fits, and what the error says after ``key <where>.<key>`` ({value!r}: the value).
_SHAPES: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("speedup", _speedup, " must be an object with positive 'median', 'p25' and 'p75'"),
    ("accuracy", _figures, " must map metric names to numbers"),
    ("accuracy_limits", _figures, " must map metric names to numbers"),
    ("metric", is_number, " is {value!r}, expected a number or null"),
    (
        "fingerprint",
        _fingerprint,
        " must be an object whose 'leaves' list holds shape lists and numeric statistics",
    ),
    (
        "graph",
        _graph,
        " must be an object whose 'nodes' lists [id, label, kind, module, key, inputs, "
        "outputs] per node (--torchperf-graph's graph structure)",
    ),
    (
        "nodes",
        _nodes,
        " must map node keys to [seconds, FLOPs, bytes] (--torchperf-graph's per-node figures)",
    ),
    (
        "instructions",
        _instructions,
        " must hold a positive per_call, two positive windows and a functions object of "
        "non-negative counts",
    ),
    (
        "kernels",
        _kernels,
        " must hold 'per_call' and 'sessions' (positive seconds) and 'kernels' as [name, "
        "launches, seconds] rows; restore the file from git, or record the baseline again "
        "with pytest --torchperf-save --torchperf-reset",
    ),
)
