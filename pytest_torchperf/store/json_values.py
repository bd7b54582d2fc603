"""Typed values read from raw JSON, and written back as they came: what the record's types
(:mod:`pytest_torchperf.store.record`) are built from. A value that is not of its key's type is
kept raw and read as absent, so writing the object back gives it unchanged. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

#: A JSON value as ``json.loads`` gives it (dict, list, str, int, float, bool, None).
JSON = object

_T = TypeVar("_T")


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Reader:
    """The typed values of a JSON object's keys. A value that is not of its key's type is kept
    raw (:attr:`raw`) and read as absent, so writing the object back gives it unchanged."""

    def __init__(self, data: Mapping[str, object], known: Iterable[str]) -> None:
        self.data = data
        names = frozenset(known)
        #: Unknown keys, and known keys whose value the type could not read, as they came.
        self.raw: dict[str, object] = {k: v for k, v in data.items() if k not in names}

    def _read(self, key: str, fits: Callable[[object], bool]) -> tuple[bool, object]:
        if key not in self.data:
            return False, None
        value = self.data[key]
        if fits(value):
            return True, value
        self.raw[key] = value
        return False, None

    def text(self, key: str) -> str | None:
        found, value = self._read(key, lambda v: v is None or isinstance(v, str))
        return value if found and isinstance(value, str) else None

    def text_or(self, key: str, default: str) -> str:
        found, value = self._read(key, lambda v: isinstance(v, str))
        return value if found and isinstance(value, str) else default

    def integer(self, key: str) -> int | None:
        found, value = self._read(
            key, lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool))
        )
        return value if found and isinstance(value, int) else None

    def number(self, key: str) -> float | None:
        found, value = self._read(key, lambda v: v is None or is_number(v))
        return value if found and isinstance(value, (int, float)) else None

    def flag(self, key: str) -> bool:
        found, value = self._read(key, lambda v: isinstance(v, bool))
        return value is True

    def texts(self, key: str) -> tuple[str, ...]:
        found, value = self._read(
            key, lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)
        )
        return tuple(str(x) for x in value) if found and isinstance(value, list) else ()

    def optional_texts(self, key: str) -> tuple[str | None, ...]:
        found, value = self._read(
            key,
            lambda v: isinstance(v, list) and all(x is None or isinstance(x, str) for x in v),
        )
        if not (found and isinstance(value, list)):
            return ()
        return tuple(x if isinstance(x, str) else None for x in value)

    def numbers(self, key: str) -> tuple[float, ...]:
        found, value = self._read(key, lambda v: isinstance(v, list) and all(map(is_number, v)))
        if not (found and isinstance(value, list)):
            return ()
        return tuple(x for x in value if isinstance(x, (int, float)))

    def mapping(self, key: str) -> Mapping[str, object] | None:
        found, value = self._read(key, lambda v: v is None or isinstance(v, dict))
        return as_object(value) if found else None

    def figures(self, key: str) -> Mapping[str, float] | None:
        found, value = self._read(key, lambda v: v is None or is_figures(v))
        return as_figures(value) if found else None

    def optional_figures(self, key: str) -> tuple[Mapping[str, float] | None, ...]:
        found, value = self._read(
            key, lambda v: isinstance(v, list) and all(x is None or is_figures(x) for x in v)
        )
        if not (found and isinstance(value, list)):
            return ()
        return tuple(as_figures(x) for x in value)

    def nested(self, key: str, read: Callable[[Mapping[str, object]], _T]) -> _T | None:
        """A JSON object read by ``read`` (None: the key holds null or is absent)."""
        found, value = self._read(key, lambda v: v is None or isinstance(v, dict))
        return read(as_object(value) or {}) if found and isinstance(value, dict) else None

    def nested_list(self, key: str, read: Callable[[Mapping[str, object]], _T]) -> tuple[_T, ...]:
        found, value = self._read(
            key, lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v)
        )
        if not (found and isinstance(value, list)):
            return ()
        return tuple(read(as_object(x) or {}) for x in value)


def is_figures(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and is_number(v) for k, v in value.items()
    )


def as_object(value: object) -> Mapping[str, object] | None:
    """A JSON object's value as a mapping (its keys are strings: JSON has no others)."""
    if not isinstance(value, dict):
        return None
    return {str(k): v for k, v in value.items()}


def as_figures(value: object) -> Mapping[str, float] | None:
    if not isinstance(value, dict):
        return None
    return {str(k): v for k, v in value.items() if isinstance(v, (int, float))}


def json_object(value: JSON) -> Mapping[str, JSON]:
    """A raw JSON value read as an object: its keys and values; empty for anything else (null,
    absent, another type). For the values the record keeps raw (:meth:`Record.extra`)."""
    return as_object(value) or {}


def json_number(value: JSON) -> float | None:
    """A raw JSON value read as a number (an int stays an int); None for anything else."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def json_texts(value: JSON) -> list[str]:
    """A raw JSON list read as texts (each item as ``str`` gives it); empty for anything else."""
    return [str(v) for v in value] if isinstance(value, list) else []


_J = TypeVar("_J", bound="JsonObject")


@dataclass(frozen=True)
class JsonObject:
    """A typed object read from a JSON object and written back as it came. A subclass declares
    its keys once, as dataclass fields: :meth:`from_json` and :meth:`to_json` read and write each
    by its annotated type (:func:`_plan`); ``field(metadata={"key": ...})`` names a key that is
    not the field's name."""

    #: The keys it came with, in their order.
    order: tuple[str, ...] = field(default=(), repr=False, kw_only=True)
    #: Unknown keys, and known keys of another type than theirs, with their raw values.
    raw: Mapping[str, JSON] = field(default_factory=dict, repr=False, kw_only=True)

    @classmethod
    def from_json(cls: type[_J], data: Mapping[str, JSON]) -> _J:
        plan = _plan(cls)
        r = Reader(data, plan)
        values = {f.name: f.read(r, f.key) for f in plan.values()}
        return cls(**values, order=tuple(data), raw=r.raw)

    def to_json(self) -> dict[str, JSON]:
        """Its JSON form: the keys, values and key order it came with."""
        by_key = _plan(type(self))
        raw = self.raw
        return {
            key: raw[key] if key in raw else by_key[key].write(getattr(self, by_key[key].name))
            for key in self.order
        }

    def extra(self, key: str) -> JSON:
        """The raw value of a key the type does not read (None: absent)."""
        return self.raw.get(key)

    def has(self, key: str) -> bool:
        """Whether the JSON object held ``key`` (also with a null value)."""
        return key in self.order


@dataclass(frozen=True)
class _Field:
    """How one field of a :class:`JsonObject` is read from and written to its JSON key."""

    name: str
    key: str
    read: Callable[[Reader, str], Any]
    write: Callable[[Any], JSON]


#: The reader of each field type that maps onto one :class:`Reader` method.
_READS: dict[object, Callable[[Reader, str], Any]] = {
    str | None: Reader.text,
    int | None: Reader.integer,
    float | None: Reader.number,
    bool: Reader.flag,
    tuple[str, ...]: Reader.texts,
    tuple[str | None, ...]: Reader.optional_texts,
    tuple[float, ...]: Reader.numbers,
    Mapping[str, JSON] | None: Reader.mapping,
    Mapping[str, float] | None: Reader.figures,
    tuple[Mapping[str, float] | None, ...]: Reader.optional_figures,
}


#: Each class's fields by JSON key, in the dataclass's order: worked out once per class.
_PLANS: dict[type[JsonObject], dict[str, _Field]] = {}


def _plan(cls: type[JsonObject]) -> dict[str, _Field]:
    """The fields of ``cls`` by JSON key, with their readers and writers."""
    if cls not in _PLANS:
        hints = get_type_hints(cls)
        _PLANS[cls] = {
            f.metadata.get("key", f.name): _Field(
                f.name,
                f.metadata.get("key", f.name),
                _reader(hints[f.name], f.default),
                _writer(hints[f.name]),
            )
            for f in fields(cls)
            if f.name not in ("order", "raw")
        }
    return _PLANS[cls]


def _reader(hint: object, default: object) -> Callable[[Reader, str], Any]:
    if hint in _READS:
        return _READS[hint]
    if hint is str and isinstance(default, str):
        return lambda r, key: r.text_or(key, default)
    args = get_args(hint)
    nested = args[0] if args else None
    if isinstance(nested, type) and issubclass(nested, JsonObject):
        if get_origin(hint) is tuple:  # tuple[Nested, ...]
            return lambda r, key: r.nested_list(key, nested.from_json)
        return lambda r, key: r.nested(key, nested.from_json)  # Nested | None
    raise TypeError(f"no JSON reader for a field of type {hint!r}")


def _writer(hint: object) -> Callable[[Any], JSON]:
    """How a field of type ``hint`` is written: tuples as lists, mappings as dicts, nested
    objects as their JSON; anything else (str, numbers, bool, None) as it is."""
    args = get_args(hint)
    if get_origin(hint) is tuple:
        item = args[0]
        if isinstance(item, type) and issubclass(item, JsonObject):
            return lambda v: [x.to_json() for x in v]
        if get_origin(item) is Mapping or any(get_origin(a) is Mapping for a in get_args(item)):
            return lambda v: [None if x is None else dict(x) for x in v]
        return list
    if any(isinstance(a, type) and issubclass(a, JsonObject) for a in args):
        return lambda v: None if v is None else v.to_json()
    if any(get_origin(a) is Mapping for a in args):
        return lambda v: None if v is None else dict(v)
    return lambda v: v
