"""A stored baseline session as one typed, frozen object: :class:`Session`. Pure.

A session is what one process of ``--torchperf-save`` stores of a measurement (the keys are
documented in docs/file-formats.md, "A stored session"). Inside the package it is a
:class:`Session`; it is JSON only at the file boundary: :meth:`Session.from_json` where a baseline
file (or a record's ``session`` key, or a child's message) is read, :meth:`Session.to_json` where
one is written. What the two give back is what was read: the same keys, values and key order,
the keys it does not know (another plugin's or a measurement kind's data: ``kernels``,
``counted_with``, ``gpu_clock``, ``nodes``, ...) kept unchanged (:meth:`Session.extra`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pytest_torchperf.core.json_fields import JsonObject, JsonTypeError, json_fields, read_fields
from pytest_torchperf.core.types import JSONObject
from pytest_torchperf.store.records import GateRecord, InstructionRecord

__all__ = ["Session", "SessionError", "session_of", "timed_sessions"]


class SessionError(JsonTypeError):
    """A session's key holds a value of the wrong type; the message names the key."""


#: Keys of a session that describe its timing (left out of one stored without it).
TIMING_KEYS = (
    "stats",
    "times",
    "number_per_block",
    "cpu_share",
    "neighbour_load",
    "queued_share",
    "calibration",
    "calibration_kernel",
    "top_ops",
    "clock",
    "gpu_clock",
    "settle",
)


@dataclass(frozen=True)
class Session(JsonObject):
    """One stored baseline session. Each field is ``None`` (``times``: empty) where the session
    lacks its key or holds null. Built without an :attr:`order`, it holds the typed fields that
    are set (not None or empty), in the order below, then :attr:`raw`'s keys."""

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
    #: Share of the timed wall time the timing thread waited for a CPU (None: not measured):
    #: tells ``torchperf accept`` a target that slept from a busy machine, as the save tells.
    queued_share: float | None = None
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

    def __post_init__(self) -> None:
        if not self.order:
            own = [
                k
                for k in _FIELDS
                if getattr(self, k) not in (None, ())
                and not (k == "variant" and self.variant == "eager")
            ]
            object.__setattr__(self, "order", (*own, *self.raw))
        # Every key it holds has a value, and every value a place: to_json writes them all.
        held = set(self.order)
        astray = [k for k in self.order if k not in _FIELDS and k not in self.raw]
        astray += [k for k in self.raw if k not in held or k in _FIELDS]
        if astray or len(held) != len(self.order):
            raise ValueError(f"session keys {self.order} do not match its values (extra: {astray})")

    # -- the file boundary ----------------------------------------------------------------------

    @classmethod
    def from_json(cls, data: object) -> Session:
        """The session a file's JSON object holds. Raises :class:`SessionError` naming the key
        whose value has the wrong type (``store/schema.py`` checks the values' ranges)."""
        if not isinstance(data, Mapping) or not all(isinstance(k, str) for k in data):
            raise SessionError("session", data, "an object")
        try:
            values = read_fields(_FIELDS, data, None)
        except JsonTypeError as exc:
            raise SessionError(exc.key, exc.value, exc.expected) from None
        raw = {k: v for k, v in data.items() if k not in _FIELDS}
        return Session(**values, order=tuple(data), raw=raw)

    def to_json(self) -> JSONObject:
        """The session as its file holds it: the keys it was read with, in their order (a deep
        copy: every value was read from JSON, or checked as from_json checks it)."""
        return copy.deepcopy(super().to_json())

    # -- building one -----------------------------------------------------------------------------

    def updated(self, values: Mapping[str, object]) -> Session:
        """This session with ``values`` set, as a dict's ``update`` does: a key it holds keeps
        its place, a new one comes last. Values are JSON values, checked as :meth:`from_json`
        checks them."""
        return Session.from_json({**super().to_json(), **values})

    def without(self, *keys: str) -> Session:
        """This session without ``keys`` (those it does not hold are ignored)."""
        return Session.from_json({k: self.json_value(k) for k in self.order if k not in keys})

    def without_timing(self, why: str, options: Sequence[str] = ()) -> Session:
        """This session without its timing (a save on a busy machine stores it so, and
        ``torchperf accept`` a run's): ``statistic`` null, ``untimed`` saying why and
        ``untimed_options`` the option of every guard that refused it (a compare names them
        all). Its counters and numerics stay."""
        values: dict[str, object] = {"statistic": None, "times": [], "untimed": why}
        if options:
            values["untimed_options"] = list(options)
        return self.without(*TIMING_KEYS).updated(values)

    @property
    def per_call_instructions(self) -> float | None:
        """Its instruction count per call, or None (no count, or one without a figure)."""
        return (self.instructions or {}).get("per_call")


def session_of(record: Mapping[str, object]) -> Session:
    """The session a measurement's record carries (its ``session`` key: what a save would
    store), read from its JSON; an empty one where it carries none."""
    return Session.from_json(record.get("session") or {})


def timed_sessions(sessions: Iterable[Session]) -> list[Session]:
    """The sessions that stored a timing (``statistic``): the timing baseline. A session saved
    while no pass could be trusted (``untimed``) still holds counters and numerics."""
    return [s for s in sessions if s.statistic]


#: The keys :class:`Session` types, in its order, with their types.
_FIELDS = json_fields(Session)
