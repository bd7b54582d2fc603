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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar, cast

from pytest_torchperf.core.child_messages import (
    At,
    Body,
    Bye,
    ChildLine,
    CountLine,
    Go,
    Message,
    MessageError,
    Only,
    PerfTests,
    Ready,
    SampleLine,
    SideResultLine,
    SkippedLine,
)

#: The JSON key of a line's message type. ``kind`` because older revisions read and write it.
TYPE_KEY = "kind"
#: The line :class:`Go` is, bare: the sides of older revisions wait for exactly this line.
GO_LINE = "go"


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
_READERS: dict[str, Callable[[Body], Message]] = {cls.TYPE: cls.from_body for cls in _TYPES}
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
    "append_message",
    "decode",
    "encode",
    "message_type",
    "read_messages",
]
