"""The message types of the child protocol (:mod:`pytest_torchperf.core.child_protocol`): the
lines a child process writes to its file (:class:`SampleLine`, :class:`CountLine`,
:class:`SideResultLine`, :class:`SkippedLine`) and the messages on an A/B side's turn pipes
(:class:`PerfTests`, :class:`Ready`, :class:`At`, :class:`Bye`, :class:`Only`, :class:`Go`),
each a frozen dataclass with its ``TYPE``, the JSON ``body`` it writes and the reader of one
(``from_body``). No pytest, no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar, cast

from pytest_torchperf.core.json_fields import JsonTypeError, json_fields, read_fields
from pytest_torchperf.core.types import JSON, JSONObject


class MessageError(ValueError):
    """A line that is not a message of this protocol; the text says why."""


#: A message's body: the JSON object of its line.
Body = Mapping[str, JSON]

_M = TypeVar("_M", bound="_Fields")


class _Fields:
    """A message whose body holds its fields in order, each under its key (:func:`json_fields`:
    its name, or its ``metadata={"key": ...}``) and read by its declared type: a tuple as a list,
    a mapping as an object (an optional one, empty, as null: it carries nothing). A field missing
    or of the wrong type raises KeyError or :class:`JsonTypeError`, and the line is no message
    (``child_protocol.decode`` says which field)."""

    def body(self) -> JSONObject:
        body: dict[str, object] = {}
        for key, f in json_fields(type(self)).items():
            value = getattr(self, f.name)
            body[key] = None if value == {} and not f.required else f.type.write(value)
        return cast(JSONObject, body)

    @classmethod
    def from_body(cls: type[_M], data: Body) -> _M:
        return cls(**read_fields(json_fields(cls), data, None))


# -- the file lines ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SampleLine(_Fields):
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


@dataclass(frozen=True)
class CountLine(_Fields):
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


@dataclass(frozen=True)
class SideResultLine(_Fields):
    """An A/B side's measurement: every block time at full precision (the rounds are paired by
    position), the session record a save would store, and the measurement's limit."""

    TYPE: ClassVar[str] = "side"
    nodeid: str
    name: str
    times: tuple[float, ...]
    session: Mapping[str, JSON]
    #: The measurement's max_slowdown on that side.
    limit: float | None = None

    @classmethod
    def from_body(cls, data: Body) -> SideResultLine:
        return super().from_body({**data, "session": data.get("session") or {}})


@dataclass(frozen=True)
class SkippedLine(_Fields):
    """A measurement an A/B side's test ran but could not take (a variant unavailable there),
    and why: the controller skips it with the same reason instead of calling it missing."""

    TYPE: ClassVar[str] = "skipped"
    nodeid: str
    name: str
    reason: str = field(metadata={"key": "skipped"})

    def body(self) -> JSONObject:
        return {"nodeid": self.nodeid, "name": self.name, "times": [], "skipped": self.reason}


# -- the turn pipes of an A/B side ------------------------------------------------------------


@dataclass(frozen=True)
class PerfTests(_Fields):
    """Side to controller: the perf tests this side will run (no turn is given back)."""

    TYPE: ClassVar[str] = "tests"
    nodeids: tuple[str, ...] = field(metadata={"key": "tests"})


@dataclass(frozen=True)
class Ready(_Fields):
    """Side to controller: collected, waiting for its first turn."""

    TYPE: ClassVar[str] = "ready"
    side: str = field(metadata={"key": "ready"})


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
        at = data["at"]
        match at:
            case [str(nodeid), str(name)]:
                return cls(nodeid, name)
        raise JsonTypeError("at", at, "a [nodeid, name] pair")


@dataclass(frozen=True)
class Bye(_Fields):
    """Side to controller: measured and reported everything; the turn given back for good,
    with pytest's exit status."""

    TYPE: ClassVar[str] = "bye"
    side: str = field(metadata={"key": "bye"})
    code: int = 0


@dataclass(frozen=True)
class Only(_Fields):
    """Controller to side, once after collection: which collected tests to run (None: all)."""

    TYPE: ClassVar[str] = "only"
    nodeids: tuple[str, ...] | None = field(metadata={"key": "only"})


@dataclass(frozen=True)
class Go(_Fields):
    """Controller to side: its turn. Written as the bare line ``go`` (:data:`GO_LINE`)."""

    TYPE: ClassVar[str] = "go"


#: A line of a child's file.
ChildLine = SampleLine | CountLine | SideResultLine | SkippedLine
#: A message on an A/B side's turn pipes.
TurnMessage = PerfTests | Ready | At | Bye | Only | Go
Message = ChildLine | TurnMessage
