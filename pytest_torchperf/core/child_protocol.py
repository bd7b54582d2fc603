"""The messages between a child pytest run and the run that started it: one typed protocol, one
encoder (:func:`encode`), one reader (:func:`decode`), whatever carries them.

Two transports carry them. A file (``--torchperf-child=FILE``): the child appends one line per
message and the controller reads the file afterwards (:func:`append_message`,
:func:`read_messages`); a fresh process's timed pass (:class:`SampleLine`), an instruction count
(:class:`CountLine`), an A/B side's measurement (:class:`SideResultLine`) or one it skipped on
purpose (:class:`SkippedLine`). And the two pipes of an A/B side, while the pair runs: the side
says which tests it runs (:class:`PerfTests`), that it is ready (:class:`Ready`), where it waits
before a timed block (:class:`At`) and that it is done (:class:`Bye`); the controller says which
tests to run (:class:`Only`) and whose turn it is (:class:`Go`).

Every message is one line: a JSON object whose ``kind`` key is its *message type* (the key is
``kind`` for older revisions' sake; it is not a measurement kind, and in the code it is called
the message type). Two exceptions, both for older revisions of this package, which side A of an
A/B run may be: :class:`Go` is the bare line ``go``, which their sides wait for; and a line
without a type is read by its older shape (:func:`decode`'s ``untyped``). No pytest, no torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

#: The JSON key of a line's message type. ``kind`` because older revisions read and write it.
TYPE_KEY = "kind"
#: The line :class:`Go` is, bare: the sides of older revisions wait for exactly this line.
GO_LINE = "go"


class MessageError(ValueError):
    """A line that is not a message of this protocol; the text says why."""


# -- reading fields ---------------------------------------------------------------------------


def _str(data: Mapping[str, Any], key: str) -> str:
    return str(data[key])


def _times(data: Mapping[str, Any], key: str) -> tuple[float, ...]:
    values = data[key]
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{key!r} is not a list")
    return tuple(float(t) for t in values)


def _strings(values: Any, key: str) -> tuple[str, ...]:
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{key!r} is not a list")
    return tuple(str(v) for v in values)


def _opt_float(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    return None if value is None else float(value)


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return None if value is None else str(value)


def _opt_mapping(data: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = data.get(key)
    if value is None or isinstance(value, Mapping):
        return value
    raise TypeError(f"{key!r} is not an object")


def _plain(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An optional mapping as written: an empty one as null (it carries nothing)."""
    return dict(value) if value else None


# -- the file lines ---------------------------------------------------------------------------


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
    beside: Mapping[str, Any] | None = None

    def body(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "name": self.name,
            "process": self.process,
            "times": list(self.times),
            "cpu_share": self.cpu_share,
            "calibration": self.calibration,
            "problem": self.problem,
            "neighbour_load": self.neighbour_load,
            "speedup": _plain(self.speedup),
            "beside": _plain(self.beside),
        }

    @classmethod
    def from_body(cls, data: Mapping[str, Any]) -> SampleLine:
        return cls(
            _str(data, "nodeid"),
            _str(data, "name"),
            int(data["process"]),
            _times(data, "times"),
            _opt_float(data, "cpu_share"),
            _opt_float(data, "calibration"),
            _opt_str(data, "problem"),
            _opt_float(data, "neighbour_load"),
            _opt_mapping(data, "speedup"),
            _opt_mapping(data, "beside"),
        )


@dataclass(frozen=True)
class CountLine:
    """An instruction count of one measurement, taken under Valgrind."""

    TYPE: ClassVar[str] = "count"
    nodeid: str
    name: str
    #: ``InstructionCount.to_record()``.
    instructions: Mapping[str, Any]
    #: The CPU capability torch dispatched to under Valgrind.
    capability: str | None = None
    #: When the count started (epoch seconds) and how long it took: where the child's time
    #: went (``CountedTime``, where the counting children are read).
    started: float | None = None
    seconds: float | None = None

    def body(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "name": self.name,
            "instructions": dict(self.instructions),
            "capability": self.capability,
            "started": self.started,
            "seconds": self.seconds,
        }

    @classmethod
    def from_body(cls, data: Mapping[str, Any]) -> CountLine:
        instructions = _opt_mapping(data, "instructions")
        if instructions is None:
            raise KeyError("instructions")
        return cls(
            _str(data, "nodeid"),
            _str(data, "name"),
            instructions,
            _opt_str(data, "capability"),
            _opt_float(data, "started"),
            _opt_float(data, "seconds"),
        )


@dataclass(frozen=True)
class SideResultLine:
    """An A/B side's measurement: every block time at full precision (the rounds are paired by
    position), the session record a save would store, and the measurement's limit."""

    TYPE: ClassVar[str] = "side"
    nodeid: str
    name: str
    times: tuple[float, ...]
    session: Mapping[str, Any]
    #: The measurement's max_slowdown on that side.
    limit: float | None = None
    problem: str | None = None

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "nodeid": self.nodeid,
            "name": self.name,
            "times": list(self.times),
            "session": dict(self.session),
            "limit": self.limit,
        }
        if self.problem is not None:
            body["problem"] = self.problem
        return body

    @classmethod
    def from_body(cls, data: Mapping[str, Any]) -> SideResultLine:
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

    def body(self) -> dict[str, Any]:
        return {"nodeid": self.nodeid, "name": self.name, "times": [], "skipped": self.reason}

    @classmethod
    def from_body(cls, data: Mapping[str, Any]) -> SkippedLine:
        return cls(_str(data, "nodeid"), _str(data, "name"), _str(data, "skipped"))


# -- the turn pipes of an A/B side ------------------------------------------------------------


@dataclass(frozen=True)
class PerfTests:
    """Side to controller: the perf tests this side will run (no turn is given back)."""

    TYPE: ClassVar[str] = "tests"
    nodeids: tuple[str, ...]

    def body(self) -> dict[str, Any]:
        return {"tests": list(self.nodeids)}

    @classmethod
    def from_body(cls, data: Mapping[str, Any]) -> PerfTests:
        return cls(_strings(data["tests"], "tests"))


@dataclass(frozen=True)
class Ready:
    """Side to controller: collected, waiting for its first turn."""

    TYPE: ClassVar[str] = "ready"
    side: str

    def body(self) -> dict[str, Any]:
        return {"ready": self.side}

    @classmethod
    def from_body(cls, data: Mapping[str, Any]) -> Ready:
        return cls(_str(data, "ready"))


@dataclass(frozen=True)
class At:
    """Side to controller: the turn given back before a timed block of ``(nodeid, name)``."""

    TYPE: ClassVar[str] = "at"
    nodeid: str
    name: str

    def body(self) -> dict[str, Any]:
        return {"at": [self.nodeid, self.name]}

    @classmethod
    def from_body(cls, data: Mapping[str, Any]) -> At:
        nodeid, name = _strings(data["at"], "at")
        return cls(nodeid, name)


@dataclass(frozen=True)
class Bye:
    """Side to controller: measured and reported everything; the turn given back for good,
    with pytest's exit status."""

    TYPE: ClassVar[str] = "bye"
    side: str
    code: int = 0

    def body(self) -> dict[str, Any]:
        return {"bye": self.side, "code": self.code}

    @classmethod
    def from_body(cls, data: Mapping[str, Any]) -> Bye:
        return cls(_str(data, "bye"), int(data.get("code") or 0))


@dataclass(frozen=True)
class Only:
    """Controller to side, once after collection: which collected tests to run (None: all)."""

    TYPE: ClassVar[str] = "only"
    nodeids: tuple[str, ...] | None

    def body(self) -> dict[str, Any]:
        return {"only": None if self.nodeids is None else list(self.nodeids)}

    @classmethod
    def from_body(cls, data: Mapping[str, Any]) -> Only:
        only = data.get("only")
        return cls(None if only is None else _strings(only, "only"))


@dataclass(frozen=True)
class Go:
    """Controller to side: its turn. Written as the bare line ``go`` (:data:`GO_LINE`)."""

    TYPE: ClassVar[str] = "go"

    def body(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_body(cls, data: Mapping[str, Any]) -> Go:
        return cls()


#: A line of a child's file.
ChildLine = SampleLine | CountLine | SideResultLine | SkippedLine
#: A message on an A/B side's turn pipes.
TurnMessage = PerfTests | Ready | At | Bye | Only | Go
Message = ChildLine | TurnMessage

_TYPES: tuple[type[Message], ...] = (
    SampleLine,
    CountLine,
    SideResultLine,
    SkippedLine,
    PerfTests,
    Ready,
    At,
    Bye,
    Only,
    Go,
)
#: Each message type's class, by its name (the value of :data:`TYPE_KEY`).
MESSAGE_TYPES: dict[str, type[Message]] = {cls.TYPE: cls for cls in _TYPES}
_READERS: dict[str, Callable[[Mapping[str, Any]], Message]] = {
    cls.TYPE: cls.from_body for cls in _TYPES
}
#: The pipe messages older revisions sent without a type, each known by its one key.
_KEYED = ("ready", "tests", "at", "bye", "only")

M = TypeVar("M", bound=Message)


def message_type(message: Message) -> str:
    """The message type of ``message`` (``sample``, ``go``, ...)."""
    return message.TYPE


def encode(message: Message) -> str:
    """``message`` as one line (without its newline): a JSON object, its type under
    :data:`TYPE_KEY` last; :class:`Go` as the bare line ``go``."""
    if isinstance(message, Go):
        return GO_LINE
    return json.dumps({**message.body(), TYPE_KEY: message.TYPE})


def decode(line: str | bytes, untyped: str | None = None) -> Message:
    """The message of one line (with or without its newline); :class:`MessageError`, saying why,
    when it is none: not JSON (a line torn by a child that died writing it), not an object, of no
    or an unknown type, or a field missing or of the wrong type.

    A line without a type was written by an older revision (side A of an A/B run may be one): a
    pipe message is known by its one key (``{"ready": "A"}``); a file line is read as
    ``untyped`` (the A/B sides' files: ``side``, and ``skipped`` where it says why it skipped);
    with ``untyped`` None it has no type.
    """
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MessageError(f"not UTF-8 text ({exc})") from None
    text = line.strip()
    if text == GO_LINE:
        return Go()
    try:
        data = json.loads(text)
    except ValueError:
        raise MessageError(f"not a JSON line: {text[:80]!r}") from None
    if not isinstance(data, dict):
        raise MessageError(f"not a JSON object: {text[:80]!r}")
    name = data.get(TYPE_KEY)
    if name is None:
        name = _older_type(data, untyped)
        if name is None:
            raise MessageError(f"a line without a message type ({TYPE_KEY!r}): {text[:80]!r}")
    reader = _READERS.get(name) if isinstance(name, str) else None
    if reader is None:
        raise MessageError(
            f"unknown message type {name!r}: one of {', '.join(sorted(MESSAGE_TYPES))}"
        )
    try:
        return reader(data)
    except KeyError as exc:
        raise MessageError(f"a message of type {name!r} without {exc}: {text[:80]!r}") from None
    except (ValueError, TypeError) as exc:
        raise MessageError(
            f"a message of type {name!r} with a bad field ({exc}): {text[:80]!r}"
        ) from None


def _older_type(data: Mapping[str, Any], untyped: str | None) -> str | None:
    """The type of a line an older revision wrote without one (see :func:`decode`)."""
    for key in _KEYED:
        if key in data:
            return key
    if untyped == SideResultLine.TYPE and "skipped" in data:
        # Written between skipped lines (8f8b3b5) and typed lines (527c9d3).
        return SkippedLine.TYPE
    return untyped


# -- the file transport -----------------------------------------------------------------------


def append_message(path: Path, message: ChildLine) -> None:
    """Append ``message`` to the child's file and flush it to disk: a child that crashes half
    way still leaves the measurements it did take (and at worst one torn last line)."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(encode(message) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_messages(path: Path, types: Sequence[type[M]], untyped: str | None = None) -> list[M]:
    """The messages of ``types`` in a child's file, in order. A line that is not a message
    (:func:`decode`: torn, foreign, a field missing or of the wrong type) or a message of another
    type is skipped, and a missing file has none: a child that died leaves what it measured,
    not an error. ``untyped``: see :func:`decode`."""
    wanted = tuple(types)
    found: list[M] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return found
    for line in lines:
        try:
            message = decode(line, untyped)
        except MessageError:
            continue
        if isinstance(message, wanted):
            found.append(cast(M, message))
    return found


__all__ = [
    "GO_LINE",
    "MESSAGE_TYPES",
    "TYPE_KEY",
    "At",
    "Bye",
    "ChildLine",
    "CountLine",
    "Go",
    "Message",
    "MessageError",
    "Only",
    "Ready",
    "SampleLine",
    "SideResultLine",
    "SkippedLine",
    "PerfTests",
    "TurnMessage",
    "append_message",
    "decode",
    "encode",
    "message_type",
    "read_messages",
]
