"""Pure type aliases every layer shares: JSON values and the user's own values. No torch.

``JSON`` is what :func:`json.loads` returns and :func:`json.dumps` takes: the results file,
the baseline file, a child process's line, an environment fingerprint. Code that reads a value
of it narrows it with ``isinstance`` before use, so a malformed file fails where it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

#: A JSON value, nested: ``null``, a boolean, a number, a string, an array or an object.
JSON: TypeAlias = None | bool | int | float | str | list["JSON"] | dict[str, "JSON"]
#: A JSON object (a file's top level, a record, a message's body).
JSONObject: TypeAlias = dict[str, JSON]

#: One input or output of a measured target, as the user's model takes or returns it: a
#: ``torch.Tensor``, a number, ``None``, or tuples, lists, dicts (``ModelOutput``-style ordered
#: dicts included) and dataclasses of them, nested. ``object``: this package passes it on, or
#: narrows it with ``isinstance`` before looking inside (``measure/accuracy.py:leaves``).
UserValue: TypeAlias = object
#: What a measurement times: an ``nn.Module``, a function, a compiled or quantized wrapper;
#: called with the measurement's inputs and keyword arguments, it returns a :data:`UserValue`.
Target: TypeAlias = Callable[..., UserValue]
