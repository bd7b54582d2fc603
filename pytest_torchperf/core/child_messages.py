"""The message types of the child protocol (:mod:`pytest_torchperf.core.child_protocol`): the
lines a child process writes to its file (:class:`SampleLine`, :class:`CountLine`,
:class:`SideResultLine`, :class:`SkippedLine`) and the messages on an A/B side's turn pipes
(:class:`PerfTests`, :class:`Ready`, :class:`At`, :class:`Bye`, :class:`Only`, :class:`Go`),
each a frozen dataclass with its ``TYPE``, the JSON ``body`` it writes and the reader of one
(``from_body``). No pytest, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_torchperf.core.types import JSON, JSONObject

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class MessageError(ValueError):
    """A line that is not a message of this protocol; the text says why."""


# -- reading fields ---------------------------------------------------------------------------
# A body is a JSON object (``json.loads`` of the line); a field of the wrong type raises
# TypeError or ValueError and the line is no message (child_protocol.decode says which field).

#: A message's body: the JSON object of its line.
Body = Mapping[str, JSON]


def _str(data: Body, key: str) -> str:
    return str(data[key])


def _number(value: JSON, key: str) -> float:
    if isinstance(value, (int, float, str)):  # a bool is an int, as float() took it
        return float(value)
    raise TypeError(f"{key!r} is not a number")


def _int(data: Body, key: str) -> int:
    value = data[key]
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"{key!r} is not a number")


def _times(data: Body, key: str) -> tuple[float, ...]:
    values = data[key]
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{key!r} is not a list")
    return tuple(_number(t, key) for t in values)


def _strings(values: JSON, key: str) -> tuple[str, ...]:
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{key!r} is not a list")
    return tuple(str(v) for v in values)


def _opt_float(data: Body, key: str) -> float | None:
    value = data.get(key)
    return None if value is None else _number(value, key)


def _opt_str(data: Body, key: str) -> str | None:
    value = data.get(key)
    return None if value is None else str(value)


def _opt_mapping(data: Body, key: str) -> Mapping[str, JSON] | None:
    value = data.get(key)
    if value is None or isinstance(value, Mapping):
        return value
    raise TypeError(f"{key!r} is not an object")


def _opt_numbers(data: Body, key: str) -> Mapping[str, float] | None:
    """An optional object of numbers (a variant's speedups), each value a float."""
    value = _opt_mapping(data, key)
    return None if value is None else {k: _number(v, key) for k, v in value.items()}


def _mapping(data: Body, key: str) -> Mapping[str, JSON]:
    value = _opt_mapping(data, key)
    if value is None:
        raise KeyError(key)
    return value


# -- the file lines ---------------------------------------------------------------------------
# A file line's body holds its fields in order, each under its name: a tuple as a list, a
# mapping as an object (an optional one, empty, as null: it carries nothing). Each field is read
# by its declared type.

_READ: dict[str, Callable[[Body, str], Any]] = {
    "str": _str,
    "int": _int,
    "tuple[float, ...]": _times,
    "float | None": _opt_float,
    "str | None": _opt_str,
    "Mapping[str, float] | None": _opt_numbers,
    "Mapping[str, JSON] | None": _opt_mapping,
    "Mapping[str, JSON]": _mapping,
}


def _fields_body(line: DataclassInstance) -> JSONObject:
    body: JSONObject = {}
    for f in fields(line):
        value = getattr(line, f.name)
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):
            value = dict(value) if value or f.default is not None else None
        body[f.name] = value
    return body


def _fields_read(cls: type[DataclassInstance], data: Body) -> Any:
    return cls(*(_READ[str(f.type)](data, f.name) for f in fields(cls)))


@dataclass(frozen=True)
class SampleLine:
    """A fresh process's timed pass of one measurement (``--torchperf-processes``, a
    confirmation)."""

    TYPE: ClassVar[str] = "sample"
    nodeid: str
    name: str
    #: The child's process number.
    process: int
    times: tuple[float, ...]
    cpu_share: float | None = None
    calibration: float | None = None
    #: Why the guard rejected it (after the child's own re-measure); None when trustworthy.
    problem: str | None = None
    neighbour_load: float | None = None
    #: A variant's speedup vs eager in that process.
    speedup: Mapping[str, float] | None = None
    #: What its measurement kind measured beside the timed pass in that process, as session
    #: keys (a CUDA measurement's GPU kernel time: ``kernels``, ``unprofiled``).
    beside: Mapping[str, JSON] | None = None

    def body(self) -> JSONObject:
        return _fields_body(self)

    @classmethod
    def from_body(cls, data: Body) -> SampleLine:
        line: SampleLine = _fields_read(cls, data)
        return line


@dataclass(frozen=True)
class CountLine:
    """An instruction count of one measurement, taken under Valgrind."""

    TYPE: ClassVar[str] = "count"
    nodeid: str
    name: str
    #: ``InstructionCount.to_record()``.
    instructions: Mapping[str, JSON]
    #: The CPU capability torch dispatched to under Valgrind.
    capability: str | None = None
    #: When the count started (epoch seconds) and how long it took: where the child's time
    #: went (``CountedTime``, where the counting children are read).
    started: float | None = None
    seconds: float | None = None

    def body(self) -> JSONObject:
        return _fields_body(self)

    @classmethod
    def from_body(cls, data: Body) -> CountLine:
        line: CountLine = _fields_read(cls, data)
        return line


@dataclass(frozen=True)
class SideResultLine:
    """An A/B side's measurement: every block time at full precision (the rounds are paired by
    position), the session record a save would store, and the measurement's limit."""

    TYPE: ClassVar[str] = "side"
    nodeid: str
    name: str
    times: tuple[float, ...]
    session: Mapping[str, JSON]
    #: The measurement's max_slowdown on that side.
    limit: float | None = None
    problem: str | None = None

    def body(self) -> JSONObject:
        body = _fields_body(self)
        if self.problem is None:
            del body["problem"]
        return body

    @classmethod
    def from_body(cls, data: Body) -> SideResultLine:
        return cls(
            _str(data, "nodeid"),
            _str(data, "name"),
            _times(data, "times"),
            _opt_mapping(data, "session") or {},
            _opt_float(data, "limit"),
            _opt_str(data, "problem"),
        )


@dataclass(frozen=True)
class SkippedLine:
    """A measurement an A/B side's test ran but could not take (a variant unavailable there),
    and why: the controller skips it with the same reason instead of calling it missing."""

    TYPE: ClassVar[str] = "skipped"
    nodeid: str
    name: str
    reason: str

    def body(self) -> JSONObject:
        return {"nodeid": self.nodeid, "name": self.name, "times": [], "skipped": self.reason}

    @classmethod
    def from_body(cls, data: Body) -> SkippedLine:
        return cls(_str(data, "nodeid"), _str(data, "name"), _str(data, "skipped"))


# -- the turn pipes of an A/B side ------------------------------------------------------------


@dataclass(frozen=True)
class PerfTests:
    """Side to controller: the perf tests this side will run (no turn is given back)."""

    TYPE: ClassVar[str] = "tests"
    nodeids: tuple[str, ...]

    def body(self) -> JSONObject:
        return {"tests": list(self.nodeids)}

    @classmethod
    def from_body(cls, data: Body) -> PerfTests:
        return cls(_strings(data["tests"], "tests"))


@dataclass(frozen=True)
class Ready:
    """Side to controller: collected, waiting for its first turn."""

    TYPE: ClassVar[str] = "ready"
    side: str

    def body(self) -> JSONObject:
        return {"ready": self.side}

    @classmethod
    def from_body(cls, data: Body) -> Ready:
        return cls(_str(data, "ready"))


@dataclass(frozen=True)
class At:
    """Side to controller: the turn given back before a timed block of ``(nodeid, name)``."""

    TYPE: ClassVar[str] = "at"
    nodeid: str
    name: str

    def body(self) -> JSONObject:
        return {"at": [self.nodeid, self.name]}

    @classmethod
    def from_body(cls, data: Body) -> At:
        nodeid, name = _strings(data["at"], "at")
        return cls(nodeid, name)


@dataclass(frozen=True)
class Bye:
    """Side to controller: measured and reported everything; the turn given back for good,
    with pytest's exit status."""

    TYPE: ClassVar[str] = "bye"
    side: str
    code: int = 0

    def body(self) -> JSONObject:
        return {"bye": self.side, "code": self.code}

    @classmethod
    def from_body(cls, data: Body) -> Bye:
        code = data.get("code")
        return cls(_str(data, "bye"), 0 if not code else _int(data, "code"))


@dataclass(frozen=True)
class Only:
    """Controller to side, once after collection: which collected tests to run (None: all)."""

    TYPE: ClassVar[str] = "only"
    nodeids: tuple[str, ...] | None

    def body(self) -> JSONObject:
        return {"only": None if self.nodeids is None else list(self.nodeids)}

    @classmethod
    def from_body(cls, data: Body) -> Only:
        only = data.get("only")
        return cls(None if only is None else _strings(only, "only"))


@dataclass(frozen=True)
class Go:
    """Controller to side: its turn. Written as the bare line ``go`` (:data:`GO_LINE`)."""

    TYPE: ClassVar[str] = "go"

    def body(self) -> JSONObject:
        return {}

    @classmethod
    def from_body(cls, data: Body) -> Go:
        return cls()


#: A line of a child's file.
ChildLine = SampleLine | CountLine | SideResultLine | SkippedLine
#: A message on an A/B side's turn pipes.
TurnMessage = PerfTests | Ready | At | Bye | Only | Go
Message = ChildLine | TurnMessage
