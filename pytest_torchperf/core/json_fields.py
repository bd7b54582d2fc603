"""Typed objects read from a JSON object and written back: one mechanism for every typed JSON
shape of the package (a measurement's record, a stored session, a child process's line). Pure.

A class declares its keys once, as dataclass fields; each key is read and written by its field's
annotated type (:func:`json_fields`): ``str``, ``int``, ``float``, ``bool``, a mapping (of
numbers or of any JSON), a typed dict, a nested :class:`JsonObject`, a tuple of any of these
(written as a list), each optionally ``| None``. What becomes of a value that is not of its key's
type is the reader's policy (:func:`read_fields`): kept raw and read as absent (a record: it is
written back as it came) or :class:`JsonTypeError`, naming the key (a stored session, a child's
line: the file's problem is told where it is read).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeGuard, TypeVar, get_args, get_origin, get_type_hints, is_typeddict


class JsonTypeError(ValueError):
    """A key holds a value of another type than its field's; the message names the key."""

    def __init__(self, key: str, value: object, expected: str) -> None:
        self.key = key
        self.value = value
        self.expected = expected
        self.problem = f"{key} is {value!r}, expected {expected}"
        super().__init__(f"key {self.problem}")


def is_number(value: object) -> TypeGuard[int | float]:
    """An int or a float (not a bool, which Python counts as an int)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# -- raw JSON values read leniently: a value of another type reads as empty --------------------
# For the values a record keeps raw (a measurement kind's data, another plugin's keys:
# :meth:`JsonObject.extra`), read as what a report needs.


def json_object(value: object) -> Mapping[str, object]:
    """A raw JSON value read as an object: its keys and values; empty for anything else."""
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def json_number(value: object) -> float | None:
    """A raw JSON value read as a number (an int stays an int); None for anything else."""
    return value if is_number(value) else None


def json_texts(value: object) -> list[str]:
    """A raw JSON list read as texts (each item as ``str`` gives it); empty for anything else."""
    return [str(v) for v in value] if isinstance(value, list) else []


@dataclass(frozen=True)
class JsonType:
    """How values of one field type are checked, read and written."""

    #: Says in an error what the key should hold (``a list of numbers or null``).
    expected: str
    #: Its words for a list of such values (``numbers``).
    plural: str
    fits: Callable[[object], bool]
    read: Callable[[Any], Any]
    write: Callable[[Any], object]


def _same(value: object) -> object:
    return value


def _copied(value: Mapping[str, object]) -> dict[str, object]:
    return {str(k): v for k, v in value.items()}


_TEXT = JsonType("text", "texts", lambda v: isinstance(v, str), _same, _same)
_INTEGER = JsonType(
    "an integer",
    "integers",
    lambda v: isinstance(v, int) and not isinstance(v, bool),
    _same,
    _same,
)
_NUMBER = JsonType("a number", "numbers", is_number, _same, _same)
_FLAG = JsonType("true or false", "flags", lambda v: isinstance(v, bool), _same, _same)
_OBJECT = JsonType("an object", "objects", lambda v: isinstance(v, Mapping), _copied, _copied)
_FIGURES = JsonType(
    "an object of numbers",
    "objects of numbers",
    lambda v: isinstance(v, Mapping) and all(map(is_number, v.values())),
    _copied,
    _copied,
)


def _optional(inner: JsonType) -> JsonType:
    return JsonType(
        f"{inner.expected} or null",
        f"{inner.plural} or nulls",
        lambda v: v is None or inner.fits(v),
        lambda v: None if v is None else inner.read(v),
        lambda v: None if v is None else inner.write(v),
    )


def _list(item: JsonType) -> JsonType:
    return JsonType(
        f"a list of {item.plural}",
        f"lists of {item.plural}",
        lambda v: isinstance(v, (list, tuple)) and all(map(item.fits, v)),
        lambda v: tuple(map(item.read, v)),
        lambda v: [item.write(x) for x in v],
    )


def _nested(cls: type[JsonObject]) -> JsonType:
    return JsonType(
        "an object",
        "objects",
        lambda v: isinstance(v, Mapping),
        lambda v: cls.from_json(_copied(v)),
        lambda v: v.to_json(),
    )


def json_type(hint: object) -> JsonType:
    """The :class:`JsonType` of a field annotated ``hint`` (an evaluated type); TypeError for a
    type no JSON value reads as."""
    args = get_args(hint)
    origin = get_origin(hint)
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return _optional(json_type(next(a for a in args if a is not type(None))))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _list(json_type(args[0]))
    if origin in (Mapping, dict):
        return _FIGURES if args and args[1] in (float, int) else _OBJECT
    if is_typeddict(hint):  # an object; its keys are read (and checked) where they are used
        return _OBJECT
    if isinstance(hint, type) and issubclass(hint, JsonObject):
        return _nested(hint)
    plain = {str: _TEXT, int: _INTEGER, float: _NUMBER, bool: _FLAG}
    if hint in plain:
        return plain[hint]
    raise TypeError(f"no JSON type reads as {hint!r}")


@dataclass(frozen=True)
class JsonField:
    """One field of a typed JSON class: its attribute, its JSON key and its type."""

    name: str
    key: str
    type: JsonType
    #: Whether the key must be there (the field has no default).
    required: bool


#: Each class's fields by JSON key, in the dataclass's order: worked out once per class.
_FIELDS: dict[type, dict[str, JsonField]] = {}


#: The metadata of a dataclass field that is no JSON key (a class's own bookkeeping).
NOT_JSON: Mapping[str, object] = types.MappingProxyType({"json": False})


def json_fields(cls: type) -> dict[str, JsonField]:
    """The JSON fields of the dataclass ``cls`` by key, in its order (not those whose metadata
    is :data:`NOT_JSON`). A field's key is its name, or its ``field(metadata={"key": ...})``."""
    if cls not in _FIELDS:
        hints = get_type_hints(cls)
        found = (
            JsonField(
                f.name,
                f.metadata.get("key", f.name),
                json_type(hints[f.name]),
                f.default is MISSING and f.default_factory is MISSING,
            )
            for f in fields(cls)
            if f.metadata.get("json", True)
        )
        _FIELDS[cls] = {f.key: f for f in found}
    return _FIELDS[cls]


def read_fields(
    plan: Mapping[str, JsonField], data: Mapping[str, object], mistyped: dict[str, object] | None
) -> dict[str, Any]:
    """The typed values of ``data``'s keys, by attribute name: those of the keys it holds (an
    absent one is left to the field's default). A value of another type than its key's goes to
    ``mistyped`` (by key), or raises :class:`JsonTypeError` where that is None; a required key
    that is absent raises KeyError."""
    values: dict[str, Any] = {}
    for key, f in plan.items():
        if key not in data:
            if f.required:
                raise KeyError(key)
            continue
        value = data[key]
        if f.type.fits(value):
            values[f.name] = f.type.read(value)
        elif mistyped is None:
            raise JsonTypeError(key, value, f.type.expected)
        else:
            mistyped[key] = value
    return values


_J = TypeVar("_J", bound="JsonObject")


@dataclass(frozen=True)
class JsonObject:
    """A typed object read from a JSON object and written back as it came: the same keys, values
    and key order. A subclass declares its keys as dataclass fields (:func:`json_fields`). A key
    it does not know, and one whose value is not of its type (a file edited by hand, another
    plugin's edit), is kept raw (:attr:`raw`), and the attribute reads as if it were absent."""

    #: The keys it came with, in their order.
    order: tuple[str, ...] = field(default=(), repr=False, kw_only=True, metadata=NOT_JSON)
    #: Unknown keys, and known keys of another type than theirs, with their raw values.
    raw: Mapping[str, object] = field(
        default_factory=dict, repr=False, hash=False, kw_only=True, metadata=NOT_JSON
    )

    @classmethod
    def from_json(cls: type[_J], data: Mapping[str, object]) -> _J:
        plan = json_fields(cls)
        raw = {k: v for k, v in data.items() if k not in plan}
        values = read_fields(plan, data, raw)
        return cls(**values, order=tuple(data), raw=raw)

    def to_json(self) -> dict[str, Any]:
        """Its JSON form: the keys, values and key order it came with (Any: a subclass says of
        what type its values are)."""
        return {key: self._written(key) for key in self.order}

    def json_value(self, key: str) -> object:
        """The JSON value of a key it holds (typed or not), as :meth:`to_json` writes it;
        KeyError for one it does not hold."""
        if key not in self.order:
            raise KeyError(key)
        return self._written(key)

    def _written(self, key: str) -> object:
        if key in self.raw:
            return self.raw[key]
        f = json_fields(type(self))[key]
        return f.type.write(getattr(self, f.name))

    def extra(self, key: str) -> object:
        """The raw value of a key the type does not read (None: absent)."""
        return self.raw.get(key)

    def has(self, key: str) -> bool:
        """Whether the JSON object held ``key`` (also with a null value)."""
        return key in self.order
