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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, TypeVar, cast, get_args

from pytest_torchperf.core.json_fields import JsonTypeError, json_fields, read_fields
from pytest_torchperf.core.stats import summarize
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
    confirmation): the line it writes, and what the controller pools and stores of it."""

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
    #: Share of the other CPUs other processes kept busy meanwhile (None: not measured).
    neighbour_load: float | None = None
    #: A variant's speedup vs eager in that process (``median``, ``p25``, ``p75``, ``n``).
    speedup: Mapping[str, float] | None = None
    #: What its measurement kind measured beside the timed pass in that process, as session
    #: keys (a CUDA measurement's GPU kernel time: ``kernels``, ``unprofiled``).
    beside: Mapping[str, JSON] | None = None
    #: Share of the timed wall time its timing thread waited on a run queue (None: not
    #: measured): tells a crowded-out confirmation from a target that slept.
    queued_share: float | None = None
    #: Seconds the process had spent so far waiting for a busy machine to quiet down and
    #: measuring again (a save's), so the controller can say where a slow process's time went.
    waited: float | None = None

    @property
    def statistic(self) -> float:
        """p25 of the per-call times, the statistic every verdict compares."""
        return summarize(self.times).p25


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
    #: What the controller needs to tell, before its test loop, whether the count exceeds its
    #: baseline (and so is counted again in a fresh process): the measurement's device and
    #: threads (its environment) and its ``max_instruction_increase``.
    device: str | None = None
    threads: int | None = None
    limit: float | None = None


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


#: The JSON key of a line's message type. ``kind`` because older revisions read and write it.
TYPE_KEY = "kind"
#: The line :class:`Go` is, bare: the sides of older revisions wait for exactly this line.
GO_LINE = "go"


#: Each message type's class, by its name (the value of :data:`TYPE_KEY`).
MESSAGE_TYPES: dict[str, type[Message]] = {cls.TYPE: cls for cls in get_args(Message)}
#: The pipe messages older revisions sent without a type, each known by its one key.
_KEYED = ("ready", "tests", "at", "bye", "only")

M = TypeVar("M", bound=Message)


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
    cls = MESSAGE_TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise MessageError(
            f"unknown message type {name!r}: one of {', '.join(sorted(MESSAGE_TYPES))}"
        )
    try:
        return cls.from_body(data)
    except KeyError as exc:
        raise MessageError(f"a message of type {name!r} without {exc}: {text[:80]!r}") from None
    except (ValueError, TypeError) as exc:
        raise MessageError(
            f"a message of type {name!r} with a bad field ({exc}): {text[:80]!r}"
        ) from None


def _older_type(data: Body, untyped: str | None) -> str | None:
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
