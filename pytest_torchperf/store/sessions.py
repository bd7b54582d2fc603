"""A stored baseline session as one typed, frozen object: :class:`Session`. Pure.

A session is what one process of ``--torchperf-save`` stores of a measurement (the keys are
documented in docs/file-formats.md, "A stored session"). Inside the package it is a
:class:`Session`; it is JSON only at the file boundary: :meth:`Session.from_json` where a baseline
file (or a record's ``session`` key, or a child's message) is read, :meth:`Session.to_json` where
one is written. What the two give back is what was read: the same keys, values and key order,
the keys it does not know (another plugin's or a measurement kind's data: ``kernels``,
``counted_with``, ``gpu_clock``, ``nodes``, ...) kept unchanged in :attr:`Session.extra`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import cast

from pytest_torchperf.core.json_fields import NOT_JSON, JsonTypeError, json_fields, read_fields
from pytest_torchperf.core.types import JSON, JSONObject
from pytest_torchperf.store.records import GateRecord, InstructionRecord

__all__ = ["Session", "SessionError", "session_of", "timed_sessions"]


class SessionError(ValueError):
    """A session's key holds a value of the wrong type; the message names the key."""

    def __init__(self, key: str, value: object, expected: str) -> None:
        self.key = key
        self.problem = f"{key} is {value!r}, expected {expected}"
        super().__init__(f"key {self.problem}")


@dataclass(frozen=True)
class Session:
    """One stored baseline session. Each field is ``None`` (``times``: empty) where the session
    lacks its key or holds null; :attr:`keys` says which keys it holds, in their order."""

    timestamp: str | None = None
    #: ``<run id>``, or ``<run id>-p<k>`` for the k-th extra process of a save.
    run_id: str | None = None
    git_sha: str | None = None
    pytest_torchperf: str | None = None
    #: p25 of per-call seconds: what verdicts compare (None: untimed).
    statistic: float | None = None
    #: Why this session stores no timing (the guard that refused every pass); None when timed.
    untimed: str | None = None
    #: With ``untimed``: the option of every guard that refused the save's pass (storing its
    #: timing anyway needs them all); empty in older files and timed sessions.
    untimed_options: tuple[str, ...] = ()
    stats: Mapping[str, float] | None = None
    times: tuple[float, ...] = ()
    number_per_block: int | None = None
    cpu_share: float | None = None
    neighbour_load: float | None = None
    threads: int | None = None
    device: str | None = None
    min_time: float | None = None
    group: str | None = None
    #: cpu, cuda-events or sync.
    clock: str | None = None
    calibration: float | None = None
    calibration_kernel: str | None = None
    counters: Mapping[str, object] | None = None
    #: The options it was judged under (``Gate.from_record`` reads it).
    gate: GateRecord | None = None
    top_ops: tuple[Mapping[str, object], ...] | None = None
    process: int | None = None
    #: The variant measured; sessions of files without it are eager's.
    variant: str = "eager"
    speedup: Mapping[str, float] | None = None
    accuracy: Mapping[str, float] | None = None
    accuracy_limits: Mapping[str, float] | None = None
    build_time: float | None = None
    method: str | None = None
    fingerprint: Mapping[str, object] | None = None
    metric: float | None = None
    #: Instruction-count environments, and a ``--torchperf-fallback instructions`` save.
    instructions: InstructionRecord | None = None
    #: The keys it does not know (a measurement kind's or another plugin's data), as read.
    extra: Mapping[str, object] = field(default_factory=dict, metadata=NOT_JSON)
    #: Every key it holds, in the file's order. None when built: the typed fields that are set
    #: (not None, not empty), in the order above, then :attr:`extra`'s.
    keys: tuple[str, ...] | None = field(default=None, metadata=NOT_JSON)

    def __post_init__(self) -> None:
        if self.keys is None:
            own = [
                k
                for k in _FIELDS
                if getattr(self, k) not in (None, ())
                and not (k == "variant" and self.variant == "eager")
            ]
            object.__setattr__(self, "keys", (*own, *self.extra))
        # Every key it holds has a value, and every value a place: to_json writes them all.
        held = set(self.held)
        astray = [k for k in self.held if k not in _FIELDS and k not in self.extra]
        astray += [k for k in self.extra if k not in held or k in _FIELDS]
        if astray or len(held) != len(self.held):
            raise ValueError(f"session keys {self.held} do not match its values (extra: {astray})")

    # -- the file boundary ----------------------------------------------------------------------

    @classmethod
    def from_json(cls, data: object) -> Session:
        """The session a file's JSON object holds. Raises :class:`SessionError` naming the key
        whose value has the wrong type (``store/schema.py`` checks the values' ranges)."""
        if not isinstance(data, Mapping) or not all(isinstance(k, str) for k in data):
            raise SessionError("session", data, "an object")
        return _read(cast("Mapping[str, object]", data))

    def to_json(self) -> JSONObject:
        """The session as its file holds it: the keys it was read with, in their order."""
        # Every value was read from JSON, or checked as from_json checks it (updated()).
        return {key: cast("JSON", copy.deepcopy(self.raw(key))) for key in self.held}

    # -- building one -----------------------------------------------------------------------------

    def updated(self, values: Mapping[str, object]) -> Session:
        """This session with ``values`` set, as a dict's ``update`` does: a key it holds keeps
        its place, a new one comes last. Values are JSON values, checked as :meth:`from_json`
        checks them."""
        return _read({**self._items(), **values})

    def without(self, *keys: str) -> Session:
        """This session without ``keys`` (those it does not hold are ignored)."""
        return _read({k: v for k, v in self._items().items() if k not in keys})

    # -- reading one ------------------------------------------------------------------------------

    @property
    def held(self) -> tuple[str, ...]:
        """Every key it holds, in order (:attr:`keys`)."""
        return self.keys or ()

    def has(self, key: str) -> bool:
        """It holds ``key`` (null included)."""
        return key in self.held

    @property
    def per_call_instructions(self) -> float | None:
        """Its instruction count per call, or None (no count, or one without a figure)."""
        return (self.instructions or {}).get("per_call")

    def raw(self, key: str) -> object:
        """The JSON value of a key it holds (typed or not), as :meth:`to_json` writes it but not
        deep-copied; KeyError for one it does not hold."""
        if key not in self.held:
            raise KeyError(key)
        if key not in _FIELDS:
            return self.extra[key]
        return _FIELDS[key].type.write(getattr(self, key))

    def _items(self) -> dict[str, object]:
        return {key: self.raw(key) for key in self.held}


def session_of(record: Mapping[str, object]) -> Session:
    """The session a measurement's record carries (its ``session`` key: what a save would
    store), read from its JSON; an empty one where it carries none."""
    return Session.from_json(record.get("session") or {})


def timed_sessions(sessions: Iterable[Session]) -> list[Session]:
    """The sessions that stored a timing (``statistic``): the timing baseline. A session saved
    while no pass could be trusted (``untimed``) still holds counters and numerics."""
    return [s for s in sessions if s.statistic]


def _read(items: Mapping[str, object]) -> Session:
    try:
        values = read_fields(_FIELDS, items, None)
    except JsonTypeError as exc:
        raise SessionError(exc.key, exc.value, exc.expected) from None
    extra = {k: v for k, v in items.items() if k not in _FIELDS}
    return Session(**values, extra=extra, keys=tuple(items))


#: The keys :class:`Session` types, in its order, with their types.
_FIELDS = json_fields(Session)
